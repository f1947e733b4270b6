"""The MRC paper (mrc-srv6-multiplane.txt): the experiment of each reproduced figure and its analysis.

Each experiment names the scenario files of one figure (scenarios/mrc/), the
quick version of each, and how to read the figure's metric out of the run
outputs: bus bandwidth per size for the collective figures, mean throughput
per phase of a failure for the time-series figures, and the EV log and EV
telemetry for the figures on paths. Everything simulated is in the scenario
files; this module only names them and analyses what they return.

Adding a figure: write its scenario files (a header comment citing the
figure and the paper's result; a `_quick` file that includes the full one
when the quick version changes a schedule), then append an `Experiment` to
`EXPERIMENTS` with a `Run` per file and an analysis: `collective_analysis`
for size sweeps, `phase_analysis` for throughput phases, or a function of
your own returning `Row`s.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from ..results import Results
from .analysis import (
    collective_analysis,
    host_throughput,
    phase_analysis,
    size_bytes,
    window_mean,
    window_min,
)
from .framework import Experiment, Outcome, Phase, Row, Run

__all__ = ["EXPERIMENTS", "ev_packets", "lost_packets"]

LOSSES = (("0", ""), ("0.1%", "_loss0.1pct"), ("1%", "_loss1pct"))
TRANSPORTS = (("roce_1qp", "RoCE 1 QP"), ("roce_16qp", "RoCE 16 QPs"), ("mrc_1qp", "MRC 1 QP"))


def _collective_runs(prefix: str, quick_sizes: list[str]) -> tuple[Run, ...]:
    return tuple(
        Run(
            f"{t}{suffix}",
            f"{label}, loss {loss}",
            f"mrc/{prefix}_{t}{suffix}.yaml",
            quick={"sweep.values": quick_sizes},
        )
        for t, label in TRANSPORTS
        for loss, suffix in LOSSES
    )


FIG16 = Experiment(
    "fig16",
    "Fig 16",
    "64-way ring all-reduce: RoCE (1 and 16 QPs, 400G plane) vs MRC (1 QP, 4 x 100G planes), 0 / 0.1% / 1% loss",
    _collective_runs("fig16_allreduce", ["1MiB", "64MiB"]),
    collective_analysis(
        [
            ("RoCE 1 QP / MRC 1 QP", "about 0.5 (ECMP collisions)", "roce_1qp", "mrc_1qp", "largest"),
            ("RoCE 16 QPs / MRC 1 QP", "below 1 (MRC 1 QP beats 16 QPs)", "roce_16qp", "mrc_1qp", "largest"),
            ("MRC 0.1% loss / no loss", "close to 1 at large sizes", "mrc_1qp_loss0.1pct", "mrc_1qp", "largest"),
            ("MRC 1% loss / no loss", "about 0.33", "mrc_1qp_loss1pct", "mrc_1qp", "largest"),
            ("RoCE 1 QP 1% loss / no loss", "near 0 (unusable)", "roce_1qp_loss1pct", "roce_1qp", "largest"),
            ("RoCE 16 QPs 0.1% loss / no loss", "poor", "roce_16qp_loss0.1pct", "roce_16qp", "largest"),
            ("MRC 1 QP / RoCE 1 QP", "about 1 (latency-bound)", "mrc_1qp", "roce_1qp", "smallest"),
        ]
    ),
)

FIG17 = Experiment(
    "fig17",
    "Fig 17",
    "64-way all-to-all: RoCE (1 and 16 QPs per peer, 400G plane) vs MRC (1 QP, 4 x 100G planes), 0 / 0.1% / 1% loss",
    _collective_runs("fig17_alltoall", ["4MiB", "32MiB"]),
    collective_analysis(
        [
            ("MRC 1 QP / RoCE 1 QP", "above 1, most when bandwidth-bound", "mrc_1qp", "roce_1qp", "largest"),
            ("MRC 1 QP / RoCE 1 QP", "above 1", "mrc_1qp", "roce_1qp", "smallest"),
            ("RoCE 16 QPs / RoCE 1 QP", "slightly below 1", "roce_16qp", "roce_1qp", "largest"),
            ("RoCE 1 QP 0.1% loss / no loss", "close to 1", "roce_1qp_loss0.1pct", "roce_1qp", "largest"),
            ("RoCE 1 QP 0.1% loss / no loss", "very poor", "roce_1qp_loss0.1pct", "roce_1qp", "smallest"),
            ("MRC 0.1% / RoCE 0.1% loss", "well above 1", "mrc_1qp_loss0.1pct", "roce_1qp_loss0.1pct", "smallest"),
        ]
    ),
)

_NIC_PAIR = ("nic0", "nic1")
_CROSS_PAIR = ("nic0", "nic16")

FIG9A = Experiment(
    "fig9a",
    "Fig 9a",
    "T0-local bidirectional 4-QP transfer, 8 x 100G planes; nic0's NIC-T0 links go down one by one, then come back",
    (Run("mrc", "MRC 4 QPs", "mrc/fig9a_nic_t0_links_down.yaml", "mrc/fig9a_nic_t0_links_down_quick.yaml"),),
    phase_analysis,
    phases=tuple(
        Phase(label, start + (0.6 if i else 0), start + 2, paper)
        for i, (label, start, paper) in enumerate(
            [
                ("all 8 links up", 0.0, "line rate (~770 Gb/s)"),
                ("1 link down", 2.0, "7/8 (-100 Gb/s)"),
                ("2 links down", 4.0, "6/8"),
                ("3 links down", 6.0, "5/8"),
                ("4 links down", 8.0, "4/8"),
                ("3 links down (1 back)", 10.0, "5/8"),
                ("2 links down", 12.0, "6/8"),
                ("1 link down", 14.0, "7/8"),
                ("all back", 16.0, "line rate"),
            ]
        )
    ),
    quick_phases=tuple(
        Phase(label, start + (0.3 if i else 0.2), start + 1, paper)
        for i, (label, start, paper) in enumerate(
            [
                ("all 8 links up", 0.0, "line rate (~770 Gb/s)"),
                ("1 link down", 1.0, "7/8 (-100 Gb/s)"),
                ("2 links down", 2.0, "6/8"),
                ("3 links down", 3.0, "5/8"),
                ("4 links down", 4.0, "4/8"),
                ("3 links down (1 back)", 5.0, "5/8"),
                ("2 links down", 6.0, "6/8"),
                ("1 link down", 7.0, "7/8"),
                ("all back", 8.0, "line rate"),
            ]
        )
    ),
    hosts=_NIC_PAIR,
    note="time scaled 1/1000 (ms for s); quick: the same steps every 1 ms instead of 2 ms",
)

FIG9B = Experiment(
    "fig9b",
    "Fig 9b",
    "T0-local bidirectional 4-QP transfer; four of nic0's eight links flap together (5 ms to 17 ms)",
    (Run("mrc", "MRC 4 QPs", "mrc/fig9b_nic_ports_flap.yaml"),),
    phase_analysis,
    phases=(
        Phase("all links up", 0.2, 5.0, "line rate (~770 Gb/s)"),
        Phase("4 of 8 links down", 5.6, 17.0, "about half"),
        Phase("links back", 17.6, 20.0, "line rate, quickly"),
    ),
    hosts=_NIC_PAIR,
    note="time scaled 1/1000; the quick version is the full one (it runs in about a second)",
)

FIG9C = Experiment(
    "fig9c",
    "Fig 9c",
    "cross-T1 bidirectional 4-QP transfer; twenty T0-T1 links fail one every 0.5 ms from 2 ms",
    (Run("mrc", "MRC 4 QPs", "mrc/fig9c_t0_t1_links_down.yaml"),),
    phase_analysis,
    phases=(
        Phase("before", 0.2, 2.0, "line rate"),
        Phase("while links fail (2-12 ms)", 2.0, 12.0, "minimal impact"),
        Phase("20 links down", 12.0, 14.0, "minimal impact"),
    ),
    hosts=_CROSS_PAIR,
    note="time scaled 1/1000",
)

FIG9D = Experiment(
    "fig9d",
    "Fig 9d",
    "cross-T1 bidirectional 4-QP transfer; eight T0-T1 links flap together (4 ms to 8 ms)",
    (Run("mrc", "MRC 4 QPs", "mrc/fig9d_t0_t1_links_flap.yaml"),),
    phase_analysis,
    phases=(
        Phase("before", 0.2, 4.0, "line rate"),
        Phase("8 links down", 4.0, 8.0, "negligible impact"),
        Phase("links back", 8.6, 11.0, "line rate"),
    ),
    hosts=_CROSS_PAIR,
    note="time scaled 1/1000",
)

FIG10 = Experiment(
    "fig10",
    "Fig 10",
    "T0-local bidirectional 4-QP transfer; one plane's T0 switch fails at 4 ms",
    (Run("mrc", "MRC 4 QPs", "mrc/fig10_t0_switch_down.yaml"),),
    phase_analysis,
    phases=(
        Phase("before", 0.2, 4.0, "line rate"),
        Phase("T0 down, steady state", 6.0, 12.0, "-100 Gb/s (7/8)"),
    ),
    hosts=_NIC_PAIR,
    note="time scaled 1/1000",
    recovers=False,
)

FIG11 = Experiment(
    "fig11",
    "Fig 11",
    "cross-T1 bidirectional 4-QP transfer; a T1 switch fails at 4 ms and recovers at 9 ms",
    (Run("mrc", "MRC 4 QPs", "mrc/fig11_t1_switch_down_up.yaml"),),
    phase_analysis,
    phases=(
        Phase("before", 0.2, 4.0, "line rate"),
        Phase("T1 down", 4.0, 9.0, "transient, no steady-state loss"),
        Phase("T1 down, last 1 ms", 8.0, 9.0, "no steady-state loss"),
        Phase("T1 back", 9.6, 14.0, "line rate"),
    ),
    hosts=_CROSS_PAIR,
    note="time scaled 1/1000",
)


def _ms(value: object) -> float:
    """A resolved scenario's time ('5ms', '200us', '0ns', or seconds as a number) in milliseconds."""
    if isinstance(value, int | float):
        return float(value) * 1e3
    text = str(value).strip()
    for unit, scale in (("ms", 1.0), ("us", 1e-3), ("ns", 1e-6), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    return float(text) * 1e3


def _qp_of(outcome: Results, src: str) -> int | None:
    """The QP (from the EV log) of the one connection whose sender is `src`."""
    log = outcome.ev_log
    if log.is_empty():
        return None
    qps = log.filter(pl.col("src") == src)["qp"].unique().to_list()
    return int(qps[0]) if qps else None


def ev_packets(outcome: Results, qp: int, ev: int, start_ms: float, end_ms: float) -> float:
    """Packets QP `qp` sent on EV `ev` in the samples of (start_ms, end_ms] (telemetry.ev_activity)."""
    ts = outcome.timeseries
    if ts.is_empty():
        return 0.0
    part = ts.filter(
        pl.col("metric") == "ev_packets",
        pl.col("entity") == f"qp{qp}/ev{ev}",
        pl.col("time_s") * 1e3 > start_ms + 1e-9,
        pl.col("time_s") * 1e3 <= end_ms + 1e-9,
    )
    return float(part["value"].sum()) if not part.is_empty() else 0.0


def _share_on(outcome: Results, qp: int | None, ev: int, other: int, window: tuple[float, float]) -> float | None:
    """The share of QP `qp`'s packets on `ev` rather than `other` in the window (ms)."""
    if qp is None:
        return None
    a, b = ev_packets(outcome, qp, ev, *window), ev_packets(outcome, qp, other, *window)
    return a / (a + b) if a + b else None


def _fig14_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Throughput of both flows and flow 1's share of packets on EV-A, alone and once flow 2 is pinned to A."""
    rows = []
    ev_a, ev_b = 0, 8
    for run in exp.runs:
        outcome = outcomes.get(run.key)
        if not isinstance(outcome, Results):
            continue
        end = float(outcome.summary.get("sim_time_s") or 0.0) * 1e3
        second = _ms(outcome.scenario["traffic"][1]["start"])
        flow1, flow2 = _qp_of(outcome, "nic0"), _qp_of(outcome, "nic1")
        one, two = host_throughput(outcome, ["nic2"]), host_throughput(outcome, ["nic3"])
        alone, shared = (0.2, second), (second + 0.2, end)
        p = f"{run.label}: "

        for label, series, window, paper, on_a in (
            ("flow 1 alone", one, alone, "near line rate, all on EV-A", _share_on(outcome, flow1, ev_a, ev_b, alone)),
            (
                "flow 1 with flow 2 pinned to EV-A",
                one,
                shared,
                "near line rate, moved to EV-B",
                _share_on(outcome, flow1, ev_a, ev_b, shared),
            ),
            ("flow 2 (EV-A only)", two, shared, "near line rate on EV-A", None),
        ):
            mean = window_mean(series, *window)
            if mean is not None:
                text = f"{mean:.1f} Gb/s" + (f", {on_a:.0%} of its packets on EV-A" if on_a is not None else "")
                rows.append(Row(p + label, paper, text, mean))
        low = window_min(one, second, end)
        if low is not None:
            rows.append(
                Row(p + "flow 1 lowest 50 us sample after flow 2 starts", "no observable dip", f"{low:.1f} Gb/s", low)
            )
        if flow1 is not None and flow2 is not None:
            a1, a2 = ev_packets(outcome, flow1, ev_a, *shared), ev_packets(outcome, flow2, ev_a, *shared)
            if a1 + a2:
                rows.append(
                    Row(
                        p + "EV-A's packets from flow 2 with both flows",
                        "all (flow 2 only)",
                        f"{a2 / (a1 + a2):.0%}",
                        a2 / (a1 + a2),
                    )
                )
    return rows


FIG14 = Experiment(
    "fig14",
    "Fig 14",
    "flow 1 sprays EV-A and EV-B; flow 2 from a neighbour, pinned to EV-A, starts at 1 ms; ECN avoidance 5us and 50us",
    (
        Run("avoid5us", "ecn_avoid 5us (default)", "mrc/fig14_ev_load_balancing.yaml"),
        Run("avoid50us", "ecn_avoid 50us", "mrc/fig14_ev_load_balancing_avoid50us.yaml"),
    ),
    _fig14_analysis,
    note="one 100G plane with exactly two paths between the racks; EV-A = EV 0 (uplink 0), EV-B = EV 8 (uplink 1); "
    "time scaled (flow 2 at 1 ms, end 3 ms, 50 us samples)",
)


def _fig12_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Throughput before and after the EV starts dropping, and the EV log of the QP whose EV drops."""
    outcome = outcomes.get("mrc")
    if not isinstance(outcome, Results):
        return []
    fault = next(f for f in outcome.scenario["faults"] if f["kind"] == "ev_loss")
    at, ev_a = _ms(fault["at"]), int(fault["ev"])
    ev_b = ev_a + 8  # the same plane's next path: the backup of paths_per_plane 2
    end = float(outcome.summary.get("sim_time_s") or 0.0) * 1e3
    series = host_throughput(outcome, exp.hosts)
    rows = []
    before, after = window_mean(series, 0.2, at), window_mean(series, at, end)
    if before is not None and after is not None:
        rows.append(Row("throughput before the drops", "line rate", f"{before:.0f} Gb/s", before))
        rows.append(
            Row(
                "throughput with 20% drops on EV-A",
                "line rate (unchanged)",
                f"{after:.0f} Gb/s ({after / before:.0%})",
                after,
            )
        )
        low = window_min(series, at - 0.5, end)
        if low is not None:
            rows.append(Row("lowest 200 us sample around the drops", "no dip", f"{low:.0f} Gb/s", low))
    log = outcome.ev_log
    qp = _qp_of(outcome, f"nic{fault['nic']}")
    if qp is None:
        return rows
    mine = log.filter(pl.col("qp") == qp)

    def first(ev: int, state: str, after_ms: float = -1.0) -> float | None:
        part = mine.filter(pl.col("ev") == ev, pl.col("state") == state, pl.col("time_s") * 1e3 >= after_ms)
        return None if part.is_empty() else float(part["time_s"].min()) * 1e3

    retired, promoted = first(ev_a, "retired"), first(ev_b, "active")
    if retired is not None:
        us = (retired - at) * 1e3
        rows.append(
            Row(f"EV-A (EV {ev_a}) retired (inactive) after the drops start", "immediately", f"{us:.1f} us", us)
        )
    if promoted is not None and retired is not None:
        gap = (promoted - retired) * 1e3
        rows.append(
            Row(f"EV-B (EV {ev_b}) active, after EV-A's retirement", "at once (replacement)", f"{gap:.1f} us", gap)
        )
    back = first(ev_a, "backup", at)
    if back is not None:
        rows.append(
            Row(
                "EV-A resurrected by probes (as a backup)",
                "not shown",
                f"{back - at:.2f} ms after the drops start",
                back - at,
            )
        )
    again = mine.filter(pl.col("ev") == ev_a, pl.col("state") == "active", pl.col("time_s") * 1e3 > at).height
    rows.append(Row("EV-A active again", "no (stays inactive)", "yes" if again else "no", float(again)))
    others = mine.filter(pl.col("state") == "retired", pl.col("ev") != ev_a).height
    rows.append(Row("other EVs of that QP retired", "none", str(others), float(others)))
    return rows


FIG12 = Experiment(
    "fig12",
    "Figs 12, 13",
    "cross-T1 bidirectional write, 8 x 100G planes, 16 paths (one active and one backup EV per plane); "
    "one EV drops 20% of its packets from mid-run",
    (Run("mrc", "MRC 1 QP each way", "mrc/fig12_ev_packet_drop.yaml", "mrc/fig12_ev_packet_drop_quick.yaml"),),
    _fig12_analysis,
    hosts=("nic0", "nic4"),
    note="time scaled 1/1000 (drops from 5 ms of 10 ms; quick: from 2 ms of 4 ms)",
)


def lost_packets(outcome: Results) -> pl.DataFrame:
    """Data packets the fabric dropped, per sample, QP and EV (`telemetry.ev_activity`'s `ev_drops`).

    The QP's source and destination come from the EV log. Columns time_ms
    (end of the sample interval), qp, ev, s, d (NIC numbers), packets.
    """
    schema = {
        "time_ms": pl.Float64,
        "qp": pl.Int64,
        "ev": pl.Int64,
        "s": pl.Int64,
        "d": pl.Int64,
        "packets": pl.Float64,
    }
    ts, log = outcome.timeseries, outcome.ev_log
    if ts.is_empty() or log.is_empty():
        return pl.DataFrame(schema=schema)
    ends = log.select(
        pl.col("qp").cast(pl.Int64),
        pl.col("src").str.strip_prefix("nic").cast(pl.Int64).alias("s"),
        pl.col("dst").str.strip_prefix("nic").cast(pl.Int64).alias("d"),
    ).unique()
    lost = (
        ts.filter(pl.col("metric") == "ev_drops")
        .with_columns(pl.col("entity").str.extract_groups(r"^qp(\d+)/ev(\d+)$").alias("g"))
        .select(
            (pl.col("time_s") * 1e3).alias("time_ms"),
            pl.col("g").struct.field("1").cast(pl.Int64).alias("qp"),
            pl.col("g").struct.field("2").cast(pl.Int64).alias("ev"),
            pl.col("value").alias("packets"),
        )
        .join(ends, on="qp", how="inner")
    )
    return lost.select(list(schema)).cast(schema)  # type: ignore[arg-type]


def _fig4_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Data packets lost on the dead links per ms per NIC over time, per QP and per job; and what retired EVs.

    The losses are the data packets the fabric dropped, by QP and EV
    (`lost_packets`, checked against the summary's dropped payload).
    A loss retires its EV only when a SACK reveals it (same EV, or across
    EVs after the reordering window); a loss recovered by the tail timer
    retires nothing, and the EV stays in use. So the EV log's retirements
    are reported apart: those of dead paths, and those with no loss behind
    them.
    """
    rows: list[Row] = []
    for run in exp.runs:
        outcome = outcomes.get(run.key)
        if not isinstance(outcome, Results):
            continue
        p = f"{run.label}: "
        summary = outcome.summary
        end = float(summary.get("sim_time_s") or 0.0) * 1e3
        jobs = outcome.scenario["jobs"]
        starts = [_ms(j["start"]) for j in jobs]
        nics = sum(int(j["ranks"]) for j in jobs)
        log = outcome.ev_log
        qps = log["qp"].n_unique() if not log.is_empty() else 0
        lost = lost_packets(outcome)
        total = float(lost["packets"].sum()) if lost.height else 0.0
        mtu = size_bytes(str(outcome.scenario["nic"]["mtu"]))
        dropped = float(summary.get("dropped_payload_bytes") or 0) / mtu
        per_qp = lost.group_by("qp").agg(pl.col("packets").sum())
        worst = float(per_qp["packets"].max()) if per_qp.height else 0.0  # type: ignore[arg-type]
        rows.append(
            Row(
                p + "data packets lost per QP",
                "under 5 in the first minute",
                f"{total / max(qps, 1):.2f} mean over {qps} QPs, at most {worst:.0f} "
                f"({total:.0f} in all; dropped payload / MTU: {dropped:.0f})",
                total / max(qps, 1),
            )
        )
        # A sample at t counts the packets sent in (t - interval, t]: bin k holds the samples in (k, k + 1] ms.
        binned = lost.with_columns(((pl.col("time_ms") - 1e-9).floor().cast(pl.Int64)).alias("bin"))
        counts = dict(binned.group_by("bin").agg(pl.col("packets").sum()).iter_rows())
        bins = [float(counts.get(k, 0.0)) for k in range(max(int(end + 0.5), 1))]
        timeline = ", ".join(f"{k}-{k + 1}: {n / nics:.2f}" for k, n in enumerate(bins))
        rows.append(
            Row(
                p + "losses per ms per NIC, by ms (jobs start at " + ", ".join(f"{s:g}" for s in starts) + " ms)",
                "falls well below 1 per NIC per second (here: per ms) within a couple of minutes",
                timeline,
                bins[-1] / nics,
            )
        )
        last = float(lost["time_ms"].max()) if lost.height else None  # type: ignore[arg-type]
        if last is None:
            text = "none"
        elif last >= end - 1e-6:
            text = f"in the last sample (to {last:.2f} ms): losses go on to the end"
        elif last >= max(starts):
            text = f"in the sample ending at {last:.2f} ms ({last - max(starts):.2f} ms after the last job started)"
        else:
            text = f"in the sample ending at {last:.2f} ms (before the last job started)"
        rows.append(Row(p + "last data loss", "", text, last))
        first_nic, parts = 0, []
        for j in jobs:
            lo, hi = first_nic, first_nic + int(j["ranks"])
            mine = lost.filter((pl.col("s") >= lo) & (pl.col("s") < hi))
            parts.append(f"{j['name']} {float(mine['packets'].sum()) if mine.height else 0.0:.0f}")
            first_nic = hi
        rows.append(Row(p + "data losses by job", "", ", ".join(parts), None))
        retired = log.filter(pl.col("state") == "retired").select(
            pl.col("qp").cast(pl.Int64), pl.col("ev").cast(pl.Int64)
        )
        # An EV that lost a packet is a dead path's (the only losses here).
        on_dead = retired.join(lost.select("qp", "ev").unique(), on=["qp", "ev"], how="semi").height
        rows.append(
            Row(
                p + "EVs over a dead link retired (the path mapped out)",
                "the EV is swapped for a backup",
                f"{on_dead} ({on_dead / max(total, 1):.0%} of the losses); timeouts {summary.get('timeouts')}, "
                f"retransmitted packets {summary.get('retransmitted_packets')}",
                float(on_dead),
            )
        )
        others = retired.height - on_dead
        rows.append(
            Row(
                p + "EVs retired without a loss",
                "",
                f"{others} (summary spurious_losses {summary.get('spurious_losses')})",
                float(others),
            )
        )
        mapper = outcome.clustermapper
        if not mapper.is_empty():
            down = mapper.filter(pl.col("kind").str.ends_with("link"), pl.col("health") == "down")
            if not down.is_empty():
                first_down = down.group_by("element").agg(pl.col("time_s").min())
                latest = float(first_down["time_s"].max()) * 1e3  # type: ignore[arg-type]
                rows.append(
                    Row(
                        p + "links found down by Clustermapper",
                        "the map of failed links",
                        f"{first_down.height}, the last at {latest:.2f} ms",
                        latest,
                    )
                )
    return rows


FIG4 = Experiment(
    "fig4",
    "Fig 4",
    "four 16-rank all-to-all jobs ramp up 1 ms apart over a fabric with four T0-T1 links down, "
    "no denylist; then with Clustermapper feeding the denylist",
    tuple(
        Run(key, label, f"mrc/{file}.yaml", f"mrc/{file}_quick.yaml")
        for key, label, file in (
            ("no_denylist", "no denylist", "fig4_startup_losses"),
            ("clustermapper", "Clustermapper + denylist", "fig4_startup_losses_clustermapper"),
        )
    ),
    _fig4_analysis,
    note="time scaled 1/1000 (the paper's seconds are ms); losses in time are the data packets dropped per QP "
    "and EV (telemetry.ev_activity's ev_drops, 1 ms samples); quick: jobs 0.5 ms apart, 4 ms",
)


def _incast_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    papers = {
        "roce_pfc": ("30-100 Gb/s", "line rate"),
        "roce_dcqcn_1qp": ("-25% (about 300 Gb/s)", "line rate"),
        "roce_dcqcn_8qp": ("smaller average impact, dips to 100 Gb/s", "line rate"),
        "mrc_1qp": ("unaffected (about 400 Gb/s)", "line rate, fair shares"),
        "mrc_8qp": ("unaffected, as with 1 QP", "line rate, fair shares"),
    }
    rows = []
    for run in exp.runs:
        outcome = outcomes.get(run.key)
        if not isinstance(outcome, Results):
            continue
        end = float(outcome.summary.get("sim_time_s") or 0.0) * 1e3
        victim, target = host_throughput(outcome, ["nic1"]), host_throughput(outcome, ["nic0"])
        paper_victim, paper_target = papers.get(run.key, ("", ""))
        mean, low = window_mean(victim, 0.5, end), window_min(victim, 0.5, end)
        if mean is not None and low is not None:
            rows.append(Row(f"{run.label}: victim mean", paper_victim, f"{mean:.0f} Gb/s", mean))
            rows.append(Row(f"{run.label}: victim lowest 50 us sample", "", f"{low:.0f} Gb/s", low))
        total = window_mean(target, 0.5, end)
        if total is not None:
            rows.append(Row(f"{run.label}: incast receiver", paper_target, f"{total:.0f} Gb/s", total))
        pauses = outcome.summary.get("pauses_sent")
        if pauses is not None:
            paper = "none (no PFC)" if run.key.startswith("mrc") else "many without DCQCN, few with"
            rows.append(Row(f"{run.label}: PFC pauses", paper, f"{pauses:,}", float(pauses)))
    return rows


FIG18 = Experiment(
    "fig18",
    "Figs 18, 21",
    "7-to-1 cross-spine incast to nic0 plus a victim flow nic15 -> nic1 (same rack as the target), 400G",
    tuple(
        Run(key, label, f"mrc/{file}.yaml", quick={"duration": "1.5ms"})
        for key, label, file in (
            ("roce_pfc", "RoCE PFC only (21a)", "fig21_incast_victim_roce_pfc"),
            ("roce_dcqcn_1qp", "RoCE DCQCN 1 QP (18a)", "fig18_incast_victim_roce_dcqcn_1qp"),
            ("roce_dcqcn_8qp", "RoCE DCQCN 8 QPs (18b)", "fig18_incast_victim_roce_dcqcn_8qp"),
            ("mrc_1qp", "MRC 1 QP (18c)", "fig18_incast_victim_mrc_1qp"),
            ("mrc_8qp", "MRC 8 QPs (21c)", "fig21_incast_victim_mrc_8qp"),
        )
    ),
    _incast_analysis,
    note="time scaled: 50 us samples over 3 ms (quick: 1.5 ms) instead of 1 s samples",
)


def _fig20_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Per-flow rate (bytes x 8 / FCT) of every flow, sorted, per transport and seed."""
    papers = {
        "roce": "some flows at line rate, some at a half or a third",
        "mrc": "390 Gb/s for every flow",
    }
    rows = []
    for run in exp.runs:
        outcome = outcomes.get(run.key)
        if not isinstance(outcome, Results) or outcome.flows.is_empty():
            continue
        flows = outcome.flows.filter(pl.col("fct_s").is_not_null())
        rates = sorted(float(b) * 8 / float(t) / 1e9 for b, t in zip(flows["bytes"], flows["fct_s"], strict=True))
        text = ", ".join(f"{r:.0f}" for r in rates) + " Gb/s"
        paper = papers[run.key.split("_")[0]]
        rows.append(Row(f"{run.label}: per-flow rate", paper, text, min(rates, default=None)))
    return rows


FIG20 = Experiment(
    "fig20",
    "Fig 20",
    "racks to racks: 8 flows of 64 MB from two racks to two others over 4 spines at 400G, one QP each; "
    "RoCEv2 (ECMP, PFC, no DCQCN) vs MRC (128 EVs, trimming)",
    tuple(
        Run(f"{t}_seed{seed}", f"{label}, seed {seed}", f"mrc/fig20_racks_to_racks_{t}.yaml", overrides={"seed": seed})
        for t, label in (("roce", "RoCEv2 1 QP"), ("mrc", "MRC 1 QP"))
        for seed in (1, 2, 3)
    ),
    _fig20_analysis,
    note="the quick version is the full one (each run takes a fraction of a second)",
)

EXPERIMENTS: tuple[Experiment, ...] = (
    FIG16,
    FIG17,
    FIG9A,
    FIG9B,
    FIG9C,
    FIG9D,
    FIG10,
    FIG11,
    FIG12,
    FIG14,
    FIG4,
    FIG18,
    FIG20,
)
