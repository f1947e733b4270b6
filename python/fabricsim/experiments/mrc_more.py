"""More of the MRC paper's figures for `fabricsim reproduce mrc`: production events, the testbed table, the appendix.

`MORE_EXPERIMENTS` are the figures (and textual claims) of
mrc-srv6-multiplane.txt beyond `mrc.py`'s comparisons and failure tests: the
point-to-point table of s5.2.1, Figs 5, 6, 8 (s3, s5.1), Fig 15, Fig 19a-c,
Figs 20b-c, Fig 21b, the QP-scaling and 256-EV claims of Fig 16's text and
Fig 12 at several drop rates. Their scenario files are under
scenarios/mrc/, each with a header citing the figure, the paper's set-up and
result and our scaling; this module names them and reads the figures'
metrics out of the outputs.

Each `Row` gives our number (`value`) and, where the paper makes a claim,
`expect`: the range of `value` that agrees with the claim as the paper words
it (not our number). A number the paper states is matched within 5%; a
qualitative claim gets the range written beside it. Metric names do not
change with the seed, so the framework can merge the seeds' rows.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from .. import _core
from ..results import Results
from ..sweep import SweepResults
from .analysis import busbw_by_size, busbw_row, host_throughput, judged_over_sizes, size_bytes, window_mean, window_min
from .framework import Expect, Experiment, Outcome, Row, Run

__all__ = [
    "MORE_EXPERIMENTS",
    "flapped_links",
    "incidents",
    "memory_estimate",
    "qp_incidents",
]


def _around(x: float, tolerance: float = 0.05) -> Expect:
    """The range within `tolerance` (relative) of a number the paper states."""
    return (x * (1 - tolerance), x * (1 + tolerance))


# --- units of a resolved scenario ---------------------------------------------------------------------------------


def _ms(value: object) -> float:
    """A scenario time ('5ms', '200us', '0ns', '1ps', or seconds as a number) in milliseconds."""
    if isinstance(value, int | float):
        return float(value) * 1e3
    text = str(value).strip()
    for unit, scale in (("ms", 1.0), ("us", 1e-3), ("ns", 1e-6), ("ps", 1e-9), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    return float(text) * 1e3


def _bps(value: object) -> float:
    """A scenario rate ('400Gbps') in bits per second."""
    text = str(value).strip()
    for unit, scale in (("Tbps", 1e12), ("Gbps", 1e9), ("Mbps", 1e6), ("Kbps", 1e3), ("bps", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    return float(text)


def _per_tier(value: object, tier: int) -> object:
    """One tier's entry of a per-tier field (a single value applies to every tier)."""
    if isinstance(value, list):
        return value[min(tier, len(value) - 1)]
    return value


def _end_ms(outcome: Results) -> float:
    return float(outcome.summary.get("sim_time_s") or 0.0) * 1e3


def _hosts(outcome: Results) -> list[str]:
    """The NICs whose receive goodput the scenario samples."""
    return [h if isinstance(h, str) else f"nic{h}" for h in outcome.scenario["telemetry"]["hosts"]]


# --- s5.2.1: point-to-point latency and bandwidth -----------------------------------------------------------------


def _one_way_us(outcome: Results, job: str) -> float | None:
    """Half the median step (one ping-pong round trip) of a latency job, in us."""
    steps = outcome.steps
    if steps.is_empty():
        return None
    times = steps.filter(pl.col("job") == job)["step_time_s"].drop_nulls()
    return None if times.is_empty() else float(times.median()) / 2 * 1e6  # type: ignore[arg-type]


def _path_us(scenario: Mapping[str, Any], crosses_t1: bool) -> tuple[float, float, int]:
    """Propagation and switch forwarding (us) of a NIC-to-NIC path, and its number of links."""
    topo = scenario["topology"]
    delay, latency = topo["link_delay"], topo["switch_latency"]
    layers = [0, 1, 1, 0] if crosses_t1 else [0, 0]
    tiers = [0, 1, 0] if crosses_t1 else [0]
    propagation = sum(_ms(_per_tier(delay, layer)) for layer in layers) * 1e3
    switching = sum(_ms(_per_tier(latency, tier)) for tier in tiers) * 1e3
    return propagation, switching, len(layers)


def _job_gbps(outcome: Results, job: str) -> float | None:
    """A job's bytes on the network x 8 / its completion time, in Gb/s."""
    info = (outcome.summary.get("jobs") or {}).get(job) or {}
    jct, moved = info.get("jct_s"), info.get("network_bytes")
    return float(moved) * 8 / float(jct) / 1e9 if jct and moved else None


def _p2p_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """One-way latency of 2 B writes (with what it is made of) and 32 KB write bandwidth, T0-local and cross-T1."""
    rows: list[Row] = []
    lat = outcomes.get("lat")
    if isinstance(lat, Results):
        one_way: dict[str, float] = {}
        for job, label, paper, crosses in (
            ("t0_local", "T0-local", 5.09, False),
            ("cross_t1", "cross-T1", 6.54, True),
        ):
            us = _one_way_us(lat, job)
            if us is None:
                continue
            one_way[job] = us
            prop, switching, links = _path_us(lat.scenario, crosses)
            rest = us - prop - switching
            rows.append(
                Row(
                    f"{label} one-way latency, 2 B write (ping-pong round trip / 2)",
                    f"{paper} us (includes NIC, PCIe and MRC control-path overheads)",
                    f"{us:.3f} us = propagation {prop:.2f} us ({links} links) + switch forwarding {switching:.2f} us "
                    f"+ serialization and store-and-forward {rest * 1e3:.0f} ns; NIC pipeline, PCIe, doorbell and "
                    "completion processing are not modelled",
                    us,
                    _around(paper),
                )
            )
        if len(one_way) == 2:
            extra = one_way["cross_t1"] - one_way["t0_local"]
            rows.append(
                Row(
                    "cross-T1 minus T0-local latency (two more switch hops)",
                    "1.45 us",
                    f"{extra:.3f} us (two more 1 us links; switch forwarding 0 ns, the default)",
                    extra,
                    _around(1.45),
                )
            )
    bw = outcomes.get("bw")
    if isinstance(bw, Results):
        rates: dict[str, float] = {}
        for job, label in (("t0_local", "T0-local"), ("cross_t1", "cross-T1")):
            gbps = _job_gbps(bw, job)
            if gbps is None:
                continue
            rates[job] = gbps
            rows.append(
                Row(
                    f"{label} bandwidth, 32 KB writes back to back over 4 QPs",
                    "about 770 Gb/s (96% of 800)",
                    f"{gbps:.0f} Gb/s ({gbps / 800:.1%} of 800)",
                    gbps,
                    _around(770),
                )
            )
        if len(rates) == 2:
            ratio = rates["cross_t1"] / rates["t0_local"]
            rows.append(
                Row(
                    "cross-T1 / T0-local bandwidth",
                    "1 (not constrained by crossing T0 boundaries)",
                    f"{ratio:.3f}",
                    ratio,
                    (0.98, 1.02),
                )
            )
    return rows


P2P = Experiment(
    key="p2p",
    figure="s5.2.1 table",
    title="ib_write_lat (2 B, ping-pong) and ib_write_bw (32 KB writes, 4 QPs), T0-local and cross-T1, "
    "CX-8 as 8 x 100G planes",
    runs=(
        Run("lat", "ib_write_lat", "mrc/s521_p2p_write_lat.yaml"),
        Run("bw", "ib_write_bw", "mrc/s521_p2p_write_bw.yaml"),
    ),
    analyse=_p2p_analysis,
    note="latency = half a ping-pong round trip of two all_to_allv phases (1000 round trips); bandwidth = a "
    "one-way 256 MiB transfer in 32 KiB writes with 128 outstanding per QP; the quick version is the full one",
)


# --- Fig 5: random T0-T1 link flaps under a job -------------------------------------------------------------------


def flapped_links(outcome: Results) -> int:
    """Switch-to-switch links that dropped packets because they were down (each counted once)."""
    ports = outcome.ports
    if ports.is_empty():
        return 0
    down = ports.filter(
        pl.col("drops_link_down") > 0,
        ~pl.col("node").str.starts_with("nic"),
        ~pl.col("peer").str.starts_with("nic"),
    )
    links = {
        tuple(sorted((f"{node}:{port}", str(peer))))
        for node, port, peer in down.select("node", "port", "peer").iter_rows()
    }
    return len(links)


def incidents(times: Sequence[float], gap_ms: float) -> list[list[int]]:
    """Indices of `times` (sorted) cut into groups wherever two successive times are more than `gap_ms` apart."""
    groups: list[list[int]] = []
    last = -math.inf
    for i, t in enumerate(times):
        if t - last > gap_ms:
            groups.append([])
        groups[-1].append(i)
        last = t
    return groups


def qp_incidents(outcome: Results, gap_ms: float, after_ms: float = 0.0) -> pl.DataFrame:
    """Each QP's EV retirements (from `after_ms`) cut into incidents: retirements within `gap_ms` of the previous.

    Columns qp, incident (numbered per QP from 0), ev, time_ms: one row per retirement.
    """
    schema = {"qp": pl.Int64, "incident": pl.Int64, "ev": pl.Int64, "time_ms": pl.Float64}
    log = outcome.ev_log
    if log.is_empty():
        return pl.DataFrame(schema=schema)
    retired = (
        log.filter(pl.col("state") == "retired", pl.col("time_s") * 1e3 >= after_ms)
        .select(pl.col("qp").cast(pl.Int64), pl.col("ev").cast(pl.Int64), (pl.col("time_s") * 1e3).alias("time_ms"))
        .sort("qp", "time_ms")
    )
    rows = []
    for (qp,), part in retired.group_by(["qp"], maintain_order=True):
        times = part["time_ms"].to_list()
        for n, group in enumerate(incidents(times, gap_ms)):
            rows += [(qp, n, part["ev"][i], times[i]) for i in group]
    return pl.DataFrame(rows, schema=schema, orient="row")


def _switch_links(scenario: Mapping[str, Any]) -> int:
    report = json.loads(_core.topology_report(json.dumps({"topology": scenario["topology"]})))
    return int(report["links_total"]) - int(report["nic_ports"])


def _per_nic_gbps(outcome: Results) -> float | None:
    """Mean goodput per job NIC over the run: delivered bytes x 8 / simulated time / ranks."""
    ranks = sum(int(j["ranks"]) for j in outcome.scenario.get("jobs", []))
    end = float(outcome.summary.get("sim_time_s") or 0.0)
    delivered = outcome.summary.get("delivered_payload_bytes")
    return float(delivered) * 8 / end / ranks / 1e9 if ranks and end and delivered is not None else None


# Retirements of one QP closer than this belong to one flap: a flap retires its EVs within a reordering window
# (50 us) plus an RTT of the loss, and a second flap reaching the same QP that soon is rare at these rates.
INCIDENT_GAP_MS = 0.2


def _fig5_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Per QP a flap hits: data packets lost and EVs retired; job throughput against the run without flaps."""
    # Imported here: mrc.py imports this module to register its experiments.
    from .mrc import lost_packets

    flaps, base = outcomes.get("flaps"), outcomes.get("baseline")
    if not isinstance(flaps, Results):
        return []
    spec = next(f for f in flaps.scenario["faults"] if f["kind"] == "random_flaps")
    end = _end_ms(flaps)
    window = min(_ms(spec["until"]), end)
    links = _switch_links(flaps.scenario)
    expected = links * window / (_ms(spec["mtbf"]) + _ms(spec["duration"]))
    seen = flapped_links(flaps)
    rows = [
        Row(
            "T0-T1 links that flapped while carrying traffic",
            "a steady rate of flaps (Fig 5; its counts are not in the text)",
            f"{seen} of {links} (expected flaps {expected:.1f}: mtbf {spec['mtbf']} per link, down "
            f"{spec['duration']} each, over {window:g} ms)",
            float(seen),
        )
    ]
    lost = lost_packets(flaps)
    per_ev = lost.group_by("qp", "ev").agg(pl.col("packets").sum())
    total = float(lost["packets"].sum()) if lost.height else 0.0
    hits = qp_incidents(flaps, INCIDENT_GAP_MS)
    qps = flaps.ev_log["qp"].n_unique() if not flaps.ev_log.is_empty() else 0
    losses = (
        hits.join(per_ev, on=["qp", "ev"], how="left")
        .group_by("qp", "incident")
        .agg(pl.col("packets").fill_null(0.0).sum().alias("lost"), pl.len().alias("retired"))
    )
    n = losses.height
    attributed = float(losses["lost"].sum()) if n else 0.0
    one = losses.filter(pl.col("lost") == 1.0).height
    rows.append(
        Row(
            "QPs hit per flap",
            "the QPs that use the flapped link",
            f"{n / max(seen, 1):.1f} of {qps} QPs ({n} QP-flap incidents: a QP's EV retirements less than "
            f"{INCIDENT_GAP_MS * 1e3:.0f} us apart)",
            n / max(seen, 1),
        )
    )
    rows.append(
        Row(
            "data packets lost per QP per flap (mean over incidents)",
            "a very small number, often just one",
            f"{total / n:.2f} ({total:.0f} lost data packets over {n} incidents; {attributed:.0f} of them on the EVs "
            "the incidents retired)"
            if n
            else f"no incident ({total:.0f} lost data packets)",
            total / n if n else None,
            (1.0, 2.0),
        )
    )
    rows.append(
        Row(
            "incidents that lost exactly one data packet",
            "often (just one packet)",
            f"{one / n:.0%} ({one} of {n})" if n else "no incident",
            one / n if n else None,
            (0.5, 1.0),
        )
    )
    retired = float(losses["retired"].mean()) if n else None  # type: ignore[arg-type]
    rows.append(
        Row(
            "EVs retired per QP per flap",
            "the corresponding EV is removed",
            f"{retired:.2f}" if retired is not None else "no incident",
            retired,
            (1.0, 2.0),
        )
    )
    unretired = per_ev.join(hits.select("qp", "ev").unique(), on=["qp", "ev"], how="anti")
    stray = float(unretired["packets"].sum()) if unretired.height else 0.0
    summary = flaps.summary
    rows.append(
        Row(
            "lost data packets on EVs never retired",
            "",
            f"{stray:.0f} (run: {summary.get('timeouts')} timeouts, {summary.get('spurious_losses')} spurious "
            f"losses, {summary.get('retired_evs')} EVs retired, {summary.get('resurrected_evs')} resurrected)",
            stray,
        )
    )
    with_flaps = _per_nic_gbps(flaps)
    without = _per_nic_gbps(base) if isinstance(base, Results) else None
    ratio = with_flaps / without if with_flaps is not None and without else None
    rows.append(
        Row(
            "job throughput with flaps / without",
            "negligible impact",
            f"{ratio:.3f} ({with_flaps:.0f} / {without:.0f} Gb/s per NIC; a flap every {window / max(seen, 1):.2f} "
            "ms, far more often per job step than in the paper, see the next row)"
            if ratio is not None
            else "not run",
            ratio,
            (0.95, None),
        )
    )
    lost_us = (1 - ratio) * end * 1e3 / max(seen, 1) if ratio is not None else None
    rows.append(
        Row(
            "job time lost per flap",
            "",
            f"{lost_us:.0f} us: recovering takes protocol time (reordering window, tail timer), which the 1/1000 "
            f"time base does not scale; at one flap per real second the job would lose {lost_us / 1e6:.3%} of its "
            "time"
            if lost_us is not None
            else "not run",
            lost_us,
        )
    )
    return rows


FIG5 = Experiment(
    key="fig5",
    figure="Fig 5",
    title="random T0-T1 link flaps under a 64-rank ring all-reduce job, Cluster A (4 x 200G planes, 256-port "
    "switches); per QP and flap: lost packets and retired EVs; throughput against no flaps",
    runs=(
        Run("flaps", "random flaps", "mrc/fig5_t0_t1_random_flaps.yaml", quick={"duration": "3ms"}),
        Run("baseline", "no flaps", "mrc/fig5_t0_t1_no_flaps.yaml", quick={"duration": "3ms"}),
    ),
    analyse=_fig5_analysis,
    note="time scaled 1/1000 (a flap lasts 1 ms; a flap starts about every 0.5 ms fabric-wide); losses per QP and "
    "EV from telemetry.ev_activity, incidents from the EV log; quick: 3 ms instead of 10 ms",
)


# --- Figs 6 and 8: throughput phases of a job ------------------------------------------------------------------


def _phase_row(
    series: pl.DataFrame, label: str, window: tuple[float, float], base: float, paper: str, expect: Expect | None
) -> Row | None:
    mean = window_mean(series, *window)
    if mean is None:
        return None
    ratio = mean / base
    return Row(label, paper, f"{ratio:.3f} ({mean:.0f} Gb/s per NIC, {window[0]:g}-{window[1]:g} ms)", ratio, expect)


def _fig6_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Job throughput before, during and after the transceiver's flaps; QP failures; losses."""
    outcome = outcomes.get("flap")
    if not isinstance(outcome, Results):
        return []
    faults = outcome.scenario["faults"]
    first = min(_ms(f["at"]) for f in faults if f["kind"] == "nic_port_down")
    last = max(_ms(f["at"]) for f in faults if f["kind"] == "nic_port_up")
    end = _end_ms(outcome)
    series = host_throughput(outcome, _hosts(outcome))
    base = window_mean(series, 0.5, first)
    rows: list[Row] = []
    if not base:
        return rows
    rows.append(Row("job throughput before the flaps", "full speed", f"{base:.0f} Gb/s per NIC", base))
    for row in (
        _phase_row(
            series, "job throughput during the flaps / before", (first, last), base, "about 25% lower", (0.70, 0.80)
        ),
        _phase_row(
            series,
            "job throughput after the flaps / before",
            (last + 0.5, end),
            base,
            "full speed immediately",
            (0.95, 1.05),
        ),
    ):
        if row is not None:
            rows.append(row)
    low = window_min(series, first, last)
    if low is not None:
        rows.append(
            Row("lowest sample during the flaps / before", "", f"{low / base:.3f} ({low:.0f} Gb/s)", low / base)
        )
    errors = float(outcome.summary.get("qp_errors") or 0)
    rows.append(Row("QPs failed", "none; the job did not crash", f"{errors:.0f}", errors, (0.0, 0.0)))
    rows.append(
        Row(
            "data packets lost (Fig 7: loss rates of the affected nodes)",
            "recovered quickly enough for a small impact",
            f"{outcome.summary.get('data_drops')} data packets dropped, {outcome.summary.get('retransmitted_packets')} "
            f"retransmitted, {outcome.summary.get('timeouts')} timeouts",
            float(outcome.summary.get("data_drops") or 0),
        )
    )
    return rows


FIG6 = Experiment(
    key="fig6",
    figure="Figs 6, 7",
    title="a T0 transceiver's four 200G lanes (to nics 0-3, three in the job) flap in turn for a scaled minute "
    "under a 16-rank ring all-reduce job, Cluster A (4 x 200G planes)",
    runs=(Run("flap", "MRC", "mrc/fig6_transceiver_flap.yaml", "mrc/fig6_transceiver_flap_quick.yaml"),),
    analyse=_fig6_analysis,
    note="time scaled 1/1000: flaps from 10 ms to 70.5 ms (quick: 4 ms to 14.5 ms), each lane down 1 ms and up "
    "1 ms, the lanes 0.5 ms apart; 500 us samples of the job NICs' mean goodput",
)


def _fig8_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Share of QPs affected, the dip and the throughput after mapping out, during the reboot and after it."""
    outcome = outcomes.get("gray")
    if not isinstance(outcome, Results):
        return []
    faults = outcome.scenario["faults"]
    fail = next(_ms(f["at"]) for f in faults if f["kind"] == "switch_down" and f.get("gray"))
    reboot = next(_ms(f["at"]) for f in faults if f["kind"] == "switch_down" and not f.get("gray"))
    up = next(_ms(f["at"]) for f in faults if f["kind"] == "switch_up")
    end = _end_ms(outcome)
    rows: list[Row] = []
    log = outcome.ev_log
    if not log.is_empty():
        qps = log["qp"].n_unique()
        hit = log.filter(pl.col("state") == "retired", pl.col("time_s") * 1e3 >= fail, pl.col("time_s") * 1e3 < reboot)
        affected = hit["qp"].n_unique()
        rows.append(
            Row(
                "QPs affected (an EV retired while the T1 black-holed)",
                "around a quarter",
                f"{affected / qps:.0%} ({affected} of {qps}; {hit.height} EVs retired)",
                affected / qps,
                (0.2, 0.3),
            )
        )
        drops = outcome.summary.get("drops_by_cause", {}).get("switch_down")
        data = float(outcome.summary.get("data_drops") or 0)
        rows.append(
            Row(
                "packets the T1 dropped",
                "about 580K in a 75K-GPU job",
                f"{drops} ({data:.0f} data packets, {data / max(affected, 1):.1f} per affected QP)",
                float(drops or 0),
            )
        )
        restored = log.filter(pl.col("time_s") * 1e3 >= up, pl.col("state").is_in(["active", "backup"])).join(
            hit.select("qp", "ev").unique(), on=["qp", "ev"], how="semi"
        )
        rows.append(
            Row(
                "EVs retired at the failure restored after the reboot",
                "MRC restores them afterwards",
                f"{restored.select('qp', 'ev').unique().height} of {hit.select('qp', 'ev').unique().height}",
                float(restored.select("qp", "ev").unique().height),
            )
        )
    series = host_throughput(outcome, _hosts(outcome))
    base = window_mean(series, 0.2, fail)
    if not base:
        return rows
    rows.append(Row("job throughput before the failure", "", f"{base:.0f} Gb/s per NIC", base))
    settle = 0.6  # three 200 us samples, as the settling of fig9a's phases
    low = window_min(series, fail, fail + settle)
    if low is not None:
        rows.append(
            Row(
                "lowest sample just after the failure / before",
                "a dip (many QPs lose packets)",
                f"{low / base:.3f} ({low:.0f} Gb/s, {fail:g}-{fail + settle:g} ms)",
                low / base,
                (None, 0.97),
            )
        )
    for row in (
        _phase_row(
            series,
            "job throughput once the bad paths are mapped out / before",
            (fail + settle, reboot),
            base,
            "largely unaffected",
            (0.95, 1.05),
        ),
        _phase_row(
            series, "job throughput while the T1 reboots / before", (reboot, up), base, "no impact", (0.95, 1.05)
        ),
        _phase_row(series, "job throughput after the T1 is back / before", (up, end), base, "no impact", (0.95, 1.05)),
    ):
        if row is not None:
            rows.append(row)
    low = window_min(series, reboot, end)
    if low is not None:
        rows.append(
            Row(
                "lowest sample from the reboot on / before",
                "no impact",
                f"{low / base:.3f} ({low:.0f} Gb/s)",
                low / base,
                (0.95, None),
            )
        )
    return rows


FIG8 = Experiment(
    key="fig8",
    figure="Fig 8",
    title="a T1 stops forwarding with links and control plane up (gray), is rebooted and comes back, under a "
    "64-rank ring all-reduce job, Cluster A (4 x 200G planes, 256-port switches)",
    runs=(Run("gray", "MRC", "mrc/fig8_t1_gray_failure.yaml", "mrc/fig8_t1_gray_failure_quick.yaml"),),
    analyse=_fig8_analysis,
    note="time scaled 1/1000: gray failure at 2 ms, reboot at 6 ms, forwarding again at 8 ms, end 11 ms (quick: "
    "1, 2.5, 3.5, 5 ms); 200 us samples of the job NICs' mean goodput",
)


# --- Fig 15: sendrecv at scale ----------------------------------------------------------------------------------

PAPER_GPUS = 42_000
PAPER_RADIX = 512  # a 51.2 Tb/s switch at 100 Gb/s (s2)
MEASURED_HOPS_PER_S = 3.0e6  # MRC's rate on the reference machine (docs/PERFORMANCE.md: 3.05-3.34 M packet hops/s)


def memory_estimate(scenario: Mapping[str, Any]) -> str:
    """The core's memory estimate of a scenario ('about 4.32 GiB (...)'), read from its refusal of a 1-byte budget."""
    clean = {k: v for k, v in scenario.items() if k != "sweep"}
    try:
        _core.resolve(json.dumps(clean), 1)
    except _core.ScenarioError as exc:
        found = re.search(r"needs (about [^(,]*(?:\([^)]*\))?)", str(exc))
        if found:
            return found.group(1)
        raise
    return "under 1 B"


def _at_paper_scale(scenario: Mapping[str, Any]) -> dict[str, Any]:
    scaled = json.loads(json.dumps(scenario))
    scaled["topology"]["radix"] = PAPER_RADIX
    scaled["topology"]["nics"] = PAPER_GPUS
    scaled["jobs"][0]["ranks"] = PAPER_GPUS
    scaled.pop("sweep", None)
    return scaled


# "Large message sizes": from 16 MiB, where nccl-tests' sendrecv has left its latency-bound rise.
_FIG15_LARGE = 16 * 2**20


def _fig15_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Per-NIC bandwidth per size; what the paper's 42K GPUs would take to run."""
    sweep = outcomes.get("sendrecv")
    if not isinstance(sweep, SweepResults) or not sweep.runs:
        return []
    sizes = busbw_by_size(sweep)
    rows: list[Row] = []
    ranks = int(sweep.runs[0].scenario["jobs"][0]["ranks"])
    text = ", ".join(f"{size}: {bw:.1f}" for size, bw in sizes.items())
    largest = max(sizes.values(), default=None)
    rows.append(Row(f"per-NIC bandwidth by size, {ranks} ranks", "", f"{text} GB/s", largest, value_of="the largest"))
    large = {size: bw for size, bw in sizes.items() if size_bytes(size) >= _FIG15_LARGE}
    if large:
        rows.append(
            judged_over_sizes(
                f"per-NIC bandwidth at large sizes ({ranks} ranks)",
                "up to 92 GB/s at large sizes (42K GPUs)",
                large,
                _around(92),
                " GB/s",
            )
        )
    last = sweep.runs[-1]
    scaled = _at_paper_scale(last.scenario)
    report = json.loads(_core.topology_report(json.dumps(scaled)))
    hops = float(last.summary.get("packet_hops") or 0) * PAPER_GPUS / ranks
    rows.append(
        Row(
            "what the paper's 42K GPUs would need",
            "42K GPUs",
            f"{report['nics']:,} NICs, {report['switches_total']:,} switches ({report['switches_per_tier'][0]:,} T0 + "
            f"{report['switches_per_tier'][1]:,} T1 at radix {PAPER_RADIX}), {report['links_total']:,} links; "
            f"the core estimates {memory_estimate(scaled)}; about {hops / 1e9:.1f} G packet hops for the "
            f"{sweep.values[-1]} point, {hops / MEASURED_HOPS_PER_S / 60:.0f} min at 3 M hops/s",
            hops,
        )
    )
    return rows


FIG15 = Experiment(
    key="fig15",
    figure="Fig 15",
    title="NCCL sendrecv (rank i to rank i + 1) over MRC on 8 x 100G planes, 1024 ranks, per-NIC bandwidth",
    runs=(
        Run("sendrecv", "MRC, 1024 ranks", "mrc/fig15_sendrecv_scale.yaml", quick={"sweep.values": ["1MiB", "16MiB"]}),
    ),
    analyse=_fig15_analysis,
    note="1024 ranks rather than 42K; quick: sizes 1MiB and 16MiB",
)


# --- Fig 19: ib_write_bw while T0-T1 links fail (Cluster D) --------------------------------------------------------


def _uplinks(scenario: Mapping[str, Any]) -> int:
    topo = scenario["topology"]
    return int(topo["radix"]) // 2 // int(topo.get("parallel_links") or 1)


def _steps(scenario: Mapping[str, Any], end: float) -> list[tuple[float, float, int]]:
    """The intervals between the link events of the fault schedule, each with the number of links down."""
    events: dict[float, int] = {}
    for f in scenario["faults"]:
        if f["kind"] in ("link_down", "link_up"):
            at = _ms(f["at"])
            events[at] = events.get(at, 0) + (1 if f["kind"] == "link_down" else -1)
    steps, down, start = [], 0, 0.0
    for at in sorted(events):
        steps.append((start, at, down))
        down += events[at]
        start = at
    steps.append((start, end, down))
    return steps


def _fig19_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Steady throughput of each step (its second half) against the remaining T0-T1 capacity; the dips."""
    papers = {
        "a": ("no discernible impact", True),
        "b": ("tracks the remaining capacity", False),
        "c": ("tracks the available capacity closely", False),
    }
    rows: list[Row] = []
    for run in exp.runs:
        outcome = outcomes.get(run.key)
        if not isinstance(outcome, Results):
            continue
        paper, flat = papers[run.key]
        topo = outcome.scenario["topology"]
        nic, up = _bps(_per_tier(topo["link_rate"], 0)), _bps(_per_tier(topo["link_rate"], 1))
        n = _uplinks(outcome.scenario)
        series = host_throughput(outcome, _hosts(outcome))
        steps = _steps(outcome.scenario, _end_ms(outcome))
        full = min(nic, n * up)
        base = window_mean(series, steps[0][0] + (steps[0][1] - steps[0][0]) / 2, steps[0][1])
        if not base:
            continue
        p = f"{run.label}: "
        rows.append(Row(p + f"all {n} T0-T1 links up", "line rate", f"{base:.0f} Gb/s", base))
        for i, (start, stop, down) in enumerate(steps[1:], 1):
            share = min(nic, (n - down) * up) / full
            mean = window_mean(series, start + (stop - start) / 2, stop)
            if mean is not None:
                expect = (0.95, 1.05) if flat else (share - 0.05, share + 0.05)
                rows.append(
                    Row(
                        p + f"step {i}: {n - down} of {n} links up, steady / all up",
                        f"{paper} ({share:.2f} of the capacity)" if not flat else paper,
                        f"{mean / base:.3f} ({mean:.0f} Gb/s, second half of {start:g}-{stop:g} ms)",
                        mean / base,
                        expect,
                    )
                )
            low = window_min(series, start, stop)
            if low is not None:
                rows.append(
                    Row(
                        p + f"step {i}: lowest 200 us sample / all up",
                        paper if flat else "",
                        f"{low / base:.3f} ({low:.0f} Gb/s)",
                        low / base,
                        (0.9, None) if flat else None,
                    )
                )
    return rows


FIG19 = Experiment(
    key="fig19",
    figure="Fig 19",
    title="ib_write_bw (1 QP) between racks, Cluster D (single 400G plane, MRC on SRv6): (a) 3 of 4 400G T0-T1 "
    "links fail; (b) 100G T0-T1 links, 3 fail then return; (c) 2 fail at once then return",
    runs=(
        Run("a", "19a 400G uplinks", "mrc/fig19a_t0_t1_links_down_400g.yaml"),
        Run("b", "19b 100G uplinks", "mrc/fig19b_t0_t1_links_down_up_100g.yaml"),
        Run("c", "19c 100G uplinks, two at once", "mrc/fig19c_t0_t1_two_links_down_up_100g.yaml"),
    ),
    analyse=_fig19_analysis,
    note="time scaled 1/1000, a change every 2 ms (19c: 4 ms), 200 us samples; steady = the second half of each "
    "step; the quick version is the full one (each run takes under a second)",
)


# --- Figs 20b and 20c: racks to racks with 8 QPs --------------------------------------------------------------


def _flow_rates(outcome: Results) -> list[float]:
    """Each finished flow's rate, bytes x 8 / FCT, in Gb/s, sorted."""
    flows = outcome.flows.filter(pl.col("fct_s").is_not_null()) if not outcome.flows.is_empty() else outcome.flows
    if flows.is_empty():
        return []
    return sorted(float(b) * 8 / float(t) / 1e9 for b, t in zip(flows["bytes"], flows["fct_s"], strict=True))


def _fig20bc_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Per-flow rates per transport; 8 QPs against 1 with PFC alone, DCQCN against PFC alone, MRC's slowest flow."""
    means: dict[str, float] = {}
    rows: list[Row] = []
    papers = {
        "roce_1qp": "some at line rate, some at a half or a third (20a)",
        "roce_pfc_8qp": "only marginally better than 1 QP (20b)",
        "roce_dcqcn_8qp": "better than PFC alone (20c)",
        "mrc_8qp": "line rate",
    }
    for run in exp.runs:
        outcome = outcomes.get(run.key)
        if not isinstance(outcome, Results):
            continue
        rates = _flow_rates(outcome)
        if not rates:
            continue
        means[run.key] = sum(rates) / len(rates)
        rows.append(
            Row(
                f"{run.label}: per-flow rate, mean (sorted)",
                papers[run.key],
                f"{means[run.key]:.0f} Gb/s ({', '.join(f'{r:.0f}' for r in rates)}); PFC pauses "
                f"{outcome.summary.get('pauses_sent')}",
                means[run.key],
            )
        )
        if run.key == "mrc_8qp":
            rows.append(
                Row(
                    f"{run.label}: slowest flow",
                    "line rate (390 Gb/s with 1 QP; the same with 8)",
                    f"{rates[0]:.0f} Gb/s",
                    rates[0],
                    (0.95 * 390, None),
                )
            )
    for metric, paper, a, b, expect in (
        (
            "RoCE PFC only: 8 QPs / 1 QP, mean per-flow rate",
            "only a marginal gain",
            "roce_pfc_8qp",
            "roce_1qp",
            (1.0, 1.15),
        ),
        (
            "RoCE 8 QPs: DCQCN + PFC / PFC only, mean per-flow rate",
            "above 1 (DCQCN avoids throttling the NIC)",
            "roce_dcqcn_8qp",
            "roce_pfc_8qp",
            (1.05, None),
        ),
    ):
        if a in means and b in means:
            ratio = means[a] / means[b]
            rows.append(Row(metric, paper, f"{ratio:.3f}", ratio, expect))
    return rows


FIG20BC = Experiment(
    key="fig20bc",
    figure="Figs 20b, 20c",
    title="racks to racks (8 flows of 64 MB, 4 spines, 400G) with 8 QPs per transfer: RoCEv2 PFC only (20b), "
    "DCQCN + PFC (20c), MRC; RoCEv2 1 QP (20a) for reference",
    runs=(
        Run("roce_1qp", "RoCEv2 1 QP, PFC", "mrc/fig20_racks_to_racks_roce.yaml"),
        Run("roce_pfc_8qp", "RoCEv2 8 QPs, PFC", "mrc/fig20b_racks_to_racks_roce_pfc_8qp.yaml"),
        Run("roce_dcqcn_8qp", "RoCEv2 8 QPs, DCQCN + PFC", "mrc/fig20c_racks_to_racks_roce_dcqcn_8qp.yaml"),
        Run("mrc_8qp", "MRC 8 QPs", "mrc/fig20_racks_to_racks_mrc_8qp.yaml"),
    ),
    analyse=_fig20bc_analysis,
    seeds=(1, 2, 3),
    note="ECMP collisions vary between runs (the paper says so), hence three seeds; per-flow rate = bytes x 8 / "
    "FCT; the quick version is the full one (each run takes under a second)",
)


# --- Fig 21b: the incast and victim with PFC alone, 8 QPs ---------------------------------------------------------


def _fig21b_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    rows: list[Row] = []
    for run in exp.runs:
        outcome = outcomes.get(run.key)
        if not isinstance(outcome, Results):
            continue
        end = _end_ms(outcome)
        victim, target = host_throughput(outcome, ["nic1"]), host_throughput(outcome, ["nic0"])
        mean, low = window_mean(victim, 0.5, end), window_min(victim, 0.5, end)
        if mean is not None and low is not None:
            rows.append(
                Row(
                    f"{run.label}: victim mean",
                    "30 to 100 Gb/s with PFC alone, by ECMP path choice and fairness",
                    f"{mean:.0f} Gb/s (lowest 50 us sample {low:.0f})",
                    mean,
                    (30.0, 100.0),
                )
            )
        total = window_mean(target, 0.5, end)
        if total is not None:
            rows.append(Row(f"{run.label}: incast receiver", "line rate", f"{total:.0f} Gb/s", total))
        pauses = outcome.summary.get("pauses_sent")
        if pauses is not None:
            rows.append(Row(f"{run.label}: PFC pauses", "", f"{pauses:,}", float(pauses)))
    return rows


FIG21B = Experiment(
    key="fig21b",
    figure="Fig 21b",
    title="7-to-1 cross-spine incast plus a victim flow, RoCEv2 with PFC alone: 1 QP (21a) and 8 QPs (21b, "
    "inferred: the paper does not name the panel's run)",
    runs=(
        Run(
            "pfc_1qp", "RoCE PFC only, 1 QP (21a)", "mrc/fig21_incast_victim_roce_pfc.yaml", quick={"duration": "1.5ms"}
        ),
        Run(
            "pfc_8qp",
            "RoCE PFC only, 8 QPs (21b)",
            "mrc/fig21b_incast_victim_roce_pfc_8qp.yaml",
            quick={"duration": "1.5ms"},
        ),
    ),
    analyse=_fig21b_analysis,
    seeds=(1, 2, 3),
    note="21b as PFC alone with 8 QPs is an inference; the seeds vary the ECMP path choices, the other reading of "
    "21a/21b; 50 us samples over 3 ms (quick: 1.5 ms)",
)


# --- Fig 16 text: QP scaling and 256 EVs ----------------------------------------------------------------------


def _busbw_gb_s(outcome: Results) -> float | None:
    """Mean bus bandwidth (GB/s, nccl-tests' unit) of a run's collectives."""
    c = outcome.collectives
    if c.is_empty():
        return None
    values = c["busbw_gbps"].drop_nulls()
    return None if values.is_empty() else float(values.mean()) / 8  # type: ignore[arg-type]


def _qp_scaling_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """RoCE busbw per QP count at one large size, against one MRC QP."""
    roce, mrc = outcomes.get("roce"), outcomes.get("mrc")
    rows: list[Row] = []
    by_qps: dict[int, float] = {}
    if isinstance(roce, SweepResults):
        for value, run in zip(roce.values, roce.runs, strict=False):
            bw = _busbw_gb_s(run)
            if bw is not None:
                by_qps[int(value)] = bw
    size = ""
    if isinstance(mrc, Results):
        size = str(mrc.scenario["jobs"][0]["phases"][0]["collective"]["bytes"])
    if by_qps:
        text = ", ".join(f"{q} QPs: {bw:.1f}" for q, bw in sorted(by_qps.items()))
        rows.append(
            Row("RoCE busbw by QPs per connection", "", f"{text} GB/s", max(by_qps.values()), value_of="the largest")
        )
    mrc_bw = _busbw_gb_s(mrc) if isinstance(mrc, Results) else None
    if mrc_bw is not None:
        rows.append(Row("MRC 1 QP busbw", "", f"{mrc_bw:.1f} GB/s at {size}", mrc_bw))

    def ratio(metric: str, paper: str, a: float | None, b: float | None, expect: Expect | None) -> None:
        if a is not None and b:
            rows.append(Row(metric, paper, f"{a / b:.3f}", a / b, expect))

    ratio("RoCE 8 QPs / 1 QP", "QP scaling helps", by_qps.get(8), by_qps.get(1), (1.05, None))
    ratio("RoCE 16 QPs / 8 QPs", "very little gain beyond 8 QPs", by_qps.get(16), by_qps.get(8), (0.95, 1.1))
    ratio("RoCE 2 QPs / 1 QP", "", by_qps.get(2), by_qps.get(1), None)
    ratio("RoCE 4 QPs / 2 QPs", "", by_qps.get(4), by_qps.get(2), None)
    ratio("MRC 1 QP / RoCE 16 QPs", "above 1 (one MRC QP beats 16 RoCE QPs)", mrc_bw, by_qps.get(16), (1.0, None))
    return rows


QP_SCALING = Experiment(
    key="fig16_qps",
    figure="Fig 16 (text: QP scaling)",
    title="64-way ring all-reduce at 256 MiB: RoCEv2 with 1, 2, 4, 8, 16 QPs per connection (400G plane, ECMP, "
    "PFC + DCQCN) against MRC with 1 QP (4 x 100G planes)",
    runs=(
        Run(
            "roce",
            "RoCEv2, QPs swept",
            "mrc/fig16_qp_scaling_roce.yaml",
            quick={"jobs.0.phases.0.collective.bytes": "64MiB", "sweep.values": [1, 8, 16]},
        ),
        Run(
            "mrc", "MRC 1 QP", "mrc/fig16_qp_scaling_mrc_1qp.yaml", quick={"jobs.0.phases.0.collective.bytes": "64MiB"}
        ),
    ),
    analyse=_qp_scaling_analysis,
    note="quick: 64 MiB instead of 256 MiB, and 1, 8 and 16 RoCE QPs only",
)


def _evs256_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Busbw per size of MRC with 256 and 128 EVs and RoCE with 16 QPs; the paper's claims at both ends."""
    table = {key: busbw_by_size(o) for key, o in outcomes.items() if isinstance(o, SweepResults)}
    labels = {r.key: r.label for r in exp.runs}
    rows = [busbw_row(labels[key], sizes) for key, sizes in table.items()]
    evs256, evs128, roce = table.get("mrc_256evs", {}), table.get("mrc_128evs", {}), table.get("roce_16qp", {})
    if not evs256:
        return rows
    mrc = outcomes["mrc_256evs"]
    if isinstance(mrc, SweepResults) and mrc.runs:
        topo = mrc.runs[0].scenario["topology"]
        paths = _uplinks(mrc.runs[0].scenario) * int(topo["planes"])
        rows.append(
            Row(
                "distinct paths between two T0s (uplinks per T0 x planes)",
                "256 paths per QP",
                f"{paths}: an EV names one (SRv6); 256 EVs take each once, 128 EVs half of them per QP",
                float(paths),
            )
        )
    ordered = sorted(evs256, key=size_bytes)
    for metric, paper, a, b, size, expect in (
        (
            "MRC 256 EVs / RoCE 16 QPs",
            "above 1 (one QP over 256 paths beats 16 QPs)",
            evs256,
            roce,
            ordered[-1],
            (1.0, None),
        ),
        ("MRC 256 EVs / MRC 128 EVs", "", evs256, evs128, ordered[-1], None),
        ("MRC 256 EVs / RoCE 16 QPs", "little difference (latency-bound)", evs256, roce, ordered[0], (0.9, 1.1)),
    ):
        va, vb = a.get(size), b.get(size)
        if va is not None and vb:
            rows.append(
                Row(
                    f"{metric} @ {'largest' if size == ordered[-1] else 'smallest'} size",
                    paper,
                    f"{va / vb:.3f} at {size}",
                    va / vb,
                    expect,
                )
            )
    return rows


# Both ends of the sweep: the latency-bound claim needs its smallest size.
_FIG16_256PATHS_QUICK = {"sweep.values": ["64KiB", "16MiB"]}

EVS256 = Experiment(
    key="fig16_256evs",
    figure="Fig 16 (text: 256 paths)",
    title="Ring all-reduce over 256 paths between two T0s: MRC 1 QP over 256 EVs against 128 EVs (the default) and "
    "RoCEv2 with 16 QPs",
    runs=(
        Run(
            "mrc_256evs",
            "MRC 1 QP, 256 EVs",
            "mrc/fig16_256paths_mrc_1qp_256evs.yaml",
            quick=_FIG16_256PATHS_QUICK,
        ),
        Run("mrc_128evs", "MRC 1 QP, 128 EVs", "mrc/fig16_256paths_mrc_1qp.yaml", quick=_FIG16_256PATHS_QUICK),
        Run("roce_16qp", "RoCE 16 QPs", "mrc/fig16_256paths_roce_16qp.yaml", quick=_FIG16_256PATHS_QUICK),
    ),
    analyse=_evs256_analysis,
    note="radix-128 T0s (64 uplinks per plane: 256 paths over MRC's four 100G planes, 64 over RoCE's one 400G "
    "plane), two of them full, a 128-rank ring across them (the paper's 64 ranks would leave them half idle); "
    "sizes 64KiB, 16MiB, 256MiB (quick: 64KiB, 16MiB)",
)


# --- Fig 12 at several drop rates ---------------------------------------------------------------------------------


def _ev_times(outcome: Results, src: str, ev: int, state: str, after_ms: float) -> list[float]:
    log = outcome.ev_log
    if log.is_empty():
        return []
    part = log.filter(
        pl.col("src") == src, pl.col("ev") == ev, pl.col("state") == state, pl.col("time_s") * 1e3 >= after_ms
    )
    return sorted(float(t) * 1e3 for t in part["time_s"])


def _fig12_rates_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Per drop rate: throughput with the drops against before, EV-A's retirement and EV-B's activation."""
    sweep = outcomes.get("rates")
    if not isinstance(sweep, SweepResults):
        return []
    rows: list[Row] = []
    for value, outcome in zip(sweep.values, sweep.runs, strict=False):
        fault = next(f for f in outcome.scenario["faults"] if f["kind"] == "ev_loss")
        at, ev_a, nic = _ms(fault["at"]), int(fault["ev"]), f"nic{fault['nic']}"
        ev_b = ev_a + 8  # the same plane's other path, its backup (paths_per_plane 2)
        end = _end_ms(outcome)
        p = f"{float(value):.0%} drops on EV-A: "
        series = host_throughput(outcome, _hosts(outcome))
        before, after, low = window_mean(series, 0.2, at), window_mean(series, at, end), window_min(series, at, end)
        ratio = after / before if before and after is not None else None
        rows.append(
            Row(
                p + "throughput with the drops / before",
                "stable (line rate)",
                f"{ratio:.3f} ({after:.0f} of {before:.0f} Gb/s; lowest 200 us sample {low:.0f})"
                if ratio is not None and after is not None and before and low is not None
                else "no samples",
                ratio,
                (0.97, 1.03),
            )
        )
        retired = _ev_times(outcome, nic, ev_a, "retired", at)
        delay = (retired[0] - at) * 1e3 if retired else None
        rows.append(
            Row(
                p + "EV-A retired after the drops start",
                "promptly (within one 200 ms sample: 200 us here)",
                f"{delay:.1f} us" if delay is not None else "never",
                delay,
                (0.0, 200.0),
            )
        )
        active = _ev_times(outcome, nic, ev_b, "active", retired[0]) if retired else []
        gap = (active[0] - retired[0]) * 1e3 if active else None
        rows.append(
            Row(
                p + "EV-B active after EV-A's retirement",
                "at once (its replacement)",
                f"{gap:.1f} us" if gap is not None else "never",
                gap,
                (0.0, 1.0),
            )
        )
        again = _ev_times(outcome, nic, ev_a, "active", at + 1e-9)
        rows.append(Row(p + "EV-A active again", "no (stays inactive)", "yes" if again else "no", float(len(again))))
    return rows


FIG12_RATES = Experiment(
    key="fig12_rates",
    figure="Figs 12, 13 (text: other drop rates)",
    title="cross-T1 bidirectional write over 16 paths (8 x 100G planes); one EV drops 1%, 5%, 20% or 50% of its "
    "packets from mid-run",
    runs=(Run("rates", "MRC, drop rate swept", "mrc/fig12_ev_drop_rates.yaml", "mrc/fig12_ev_drop_rates_quick.yaml"),),
    analyse=_fig12_rates_analysis,
    note="time scaled 1/1000 (drops from 5 ms of 10 ms; quick: from 2 ms of 4 ms), 200 us samples",
)


MORE_EXPERIMENTS: tuple[Experiment, ...] = (
    P2P,
    FIG5,
    FIG6,
    FIG8,
    FIG15,
    FIG19,
    FIG20BC,
    FIG21B,
    QP_SCALING,
    EVS256,
    FIG12_RATES,
)
