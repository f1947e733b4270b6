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

Each claim row carries the range of our value that agrees with the claim
as the paper words it (`Row.expect`, `Phase.expect`, a collective claim's
sixth element): "about x" is x within 20% (about a third: 0.25-0.42),
"close to 1" at least 0.9, a line rate at least 95% of the paper's own
measurement of it, "minimal impact" at least 95% of the throughput before,
a step of one plane within 5% of its fraction. Rows without a claim carry
no range.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

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
from .framework import NO_CLAIM, PARTLY, Expect, Experiment, Outcome, Phase, Row, Run, not_run
from .mrc_more import MORE_EXPERIMENTS

__all__ = ["EXPERIMENTS", "ev_packets", "lost_packets"]

# Line rate of a bidirectional ib_write_bw over 8 x 100G planes: the paper's ~770 Gb/s (Fig 9a), within 5%.
_LINE_8X100G: Expect = (0.95 * 770, None)
# Line rate of one 400G link on the Thor Ultra testbed: the paper's 390 Gb/s (Fig 20, every MRC flow), within 5%.
_LINE_400G: Expect = (0.95 * 390, None)
# "Near line rate" on one 100G plane (Fig 14, no number given): within 10%, as "close to 1".
_NEAR_100G: Expect = (90.0, None)
# "Minimal" or "negligible impact", "no steady-state loss": at least 95% of the first phase's throughput.
_UNAFFECTED: Expect = (0.95, None)


def _share(fraction: float) -> Expect:
    """Within 5% of `fraction` of the first phase's throughput: the paper's steps of one plane (7/8, 6/8, ...)."""
    return (0.95 * fraction, 1.05 * fraction)


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
            ("RoCE 1 QP / MRC 1 QP", "about 0.5 (ECMP collisions)", "roce_1qp", "mrc_1qp", "largest", (0.4, 0.6)),
            (
                "RoCE 16 QPs / MRC 1 QP",
                "below 1 (MRC 1 QP beats 16 QPs)",
                "roce_16qp",
                "mrc_1qp",
                "every",
                (None, 1.0),
            ),
            (
                "MRC 0.1% loss / no loss",
                "close to 1 at large sizes",
                "mrc_1qp_loss0.1pct",
                "mrc_1qp",
                "from 64MiB",
                (0.9, None),
            ),
            ("MRC 1% loss / no loss", "about 0.33", "mrc_1qp_loss1pct", "mrc_1qp", "largest", (0.25, 0.42)),
            (
                "RoCE 1 QP 1% loss / no loss",
                "near 0 (unusable)",
                "roce_1qp_loss1pct",
                "roce_1qp",
                "largest",
                (None, 0.1),
            ),
            # "Poor": at most half of the loss-free busbw.
            ("RoCE 16 QPs 0.1% loss / no loss", "poor", "roce_16qp_loss0.1pct", "roce_16qp", "largest", (None, 0.5)),
            # "Little difference" when latency-bound: within 10%.
            ("MRC 1 QP / RoCE 1 QP", "about 1 (latency-bound)", "mrc_1qp", "roce_1qp", "smallest", (0.9, 1.1)),
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
            (
                "MRC 1 QP / RoCE 1 QP",
                "above 1, most when bandwidth-bound",
                "mrc_1qp",
                "roce_1qp",
                "largest",
                (1.0, None),
            ),
            ("MRC 1 QP / RoCE 1 QP", "above 1 at every size", "mrc_1qp", "roce_1qp", "every", (1.0, None)),
            # "Slightly below 1": within 10% under it.
            ("RoCE 16 QPs / RoCE 1 QP", "slightly below 1", "roce_16qp", "roce_1qp", "largest", (0.9, 1.0)),
            ("RoCE 1 QP 0.1% loss / no loss", "close to 1", "roce_1qp_loss0.1pct", "roce_1qp", "largest", (0.9, None)),
            # "Very poor", as "unusable": near 0.
            ("RoCE 1 QP 0.1% loss / no loss", "very poor", "roce_1qp_loss0.1pct", "roce_1qp", "smallest", (None, 0.1)),
            # "Well above 1" ("helps greatly"): at least twice.
            (
                "MRC 0.1% / RoCE 0.1% loss",
                "well above 1",
                "mrc_1qp_loss0.1pct",
                "roce_1qp_loss0.1pct",
                "smallest",
                (2.0, None),
            ),
        ]
    ),
)

_NIC_PAIR = ("nic0", "nic1")
_CROSS_PAIR = ("nic0", "nic16")

# Fig 9a's steps, one every 2 ms (quick: 1 ms): label, paper, the range that agrees, whether it is a share.
_FIG9A_STEPS: tuple[tuple[str, str, Expect, bool], ...] = (
    ("all 8 links up", "line rate (~770 Gb/s)", _LINE_8X100G, False),
    ("1 link down", "7/8 (-100 Gb/s)", _share(7 / 8), True),
    ("2 links down", "6/8", _share(6 / 8), True),
    ("3 links down", "5/8", _share(5 / 8), True),
    ("4 links down", "4/8", _share(4 / 8), True),
    ("3 links down (1 back)", "5/8", _share(5 / 8), True),
    ("2 links down", "6/8", _share(6 / 8), True),
    ("1 link down", "7/8", _share(7 / 8), True),
    ("all back", "line rate", _LINE_8X100G, False),
)

FIG9A = Experiment(
    "fig9a",
    "Fig 9a",
    "T0-local bidirectional 4-QP transfer, 8 x 100G planes; nic0's NIC-T0 links go down one by one, then come back",
    (Run("mrc", "MRC 4 QPs", "mrc/fig9a_nic_t0_links_down.yaml", "mrc/fig9a_nic_t0_links_down_quick.yaml"),),
    phase_analysis,
    phases=tuple(
        Phase(label, 2 * i + (0.6 if i else 0), 2 * i + 2, paper, expect, relative)
        for i, (label, paper, expect, relative) in enumerate(_FIG9A_STEPS)
    ),
    quick_phases=tuple(
        Phase(label, i + (0.3 if i else 0.2), i + 1, paper, expect, relative)
        for i, (label, paper, expect, relative) in enumerate(_FIG9A_STEPS)
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
        Phase("all links up", 0.2, 5.0, "line rate (~770 Gb/s)", _LINE_8X100G),
        Phase("4 of 8 links down", 5.6, 17.0, "about half", (0.4, 0.6), relative=True),
        Phase("links back", 17.6, 20.0, "line rate, quickly", _LINE_8X100G),
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
        Phase("before", 0.2, 2.0, "line rate", _LINE_8X100G),
        Phase("while links fail (2-12 ms)", 2.0, 12.0, "minimal impact", _UNAFFECTED, relative=True),
        Phase("20 links down", 12.0, 14.0, "minimal impact", _UNAFFECTED, relative=True),
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
        Phase("before", 0.2, 4.0, "line rate", _LINE_8X100G),
        Phase("8 links down", 4.0, 8.0, "negligible impact", _UNAFFECTED, relative=True),
        Phase("links back", 8.6, 11.0, "line rate", _LINE_8X100G),
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
        Phase("before", 0.2, 4.0, "line rate", _LINE_8X100G),
        Phase("T0 down, steady state", 6.0, 12.0, "-100 Gb/s (7/8)", _share(7 / 8), relative=True),
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
        Phase("before", 0.2, 4.0, "line rate", _LINE_8X100G),
        # The mean over the whole outage holds the transient, which the paper does not bound.
        Phase("T1 down", 4.0, 9.0, "transient, no steady-state loss"),
        Phase("T1 down, last 1 ms", 8.0, 9.0, "no steady-state loss", _UNAFFECTED, relative=True),
        Phase("T1 back", 9.6, 14.0, "line rate", _LINE_8X100G),
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
        # The run without replacement is an ablation, not the paper's MRC: its numbers carry no claim.
        claim = run.key == "replace"

        # Flow 1's share of packets on EV-A: all of them alone ("mapped entirely onto EV-A"), none once
        # flow 2 is pinned there ("migrated to EV-B"); within 5%.
        for label, series, window, paper, on_a, where, expect in (
            (
                "flow 1 alone",
                one,
                alone,
                "near line rate",
                _share_on(outcome, flow1, ev_a, ev_b, alone),
                "all",
                (0.95, None),
            ),
            (
                "flow 1 with flow 2 pinned to EV-A",
                one,
                shared,
                "near line rate",
                _share_on(outcome, flow1, ev_a, ev_b, shared),
                "none (moved to EV-B)",
                (None, 0.05),
            ),
            ("flow 2 (EV-A only)", two, shared, "near line rate on EV-A", None, "", None),
        ):
            mean = window_mean(series, *window)
            if mean is not None:
                rows.append(Row(p + label, paper, f"{mean:.1f} Gb/s", mean, _NEAR_100G if claim else None))
            if on_a is not None:
                share = Row(f"{p}{label}: its packets on EV-A", where, f"{on_a:.0%}", on_a, expect if claim else None)
                rows.append(share)
        low = window_min(one, second, end)
        if low is not None:
            rows.append(
                Row(
                    p + "flow 1 lowest 50 us sample after flow 2 starts",
                    "no observable dip",
                    f"{low:.1f} Gb/s",
                    low,
                    _NEAR_100G if claim else None,
                )
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
                        (0.95, None) if claim else None,
                    )
                )
    return rows


FIG14 = Experiment(
    "fig14",
    "Fig 14",
    "flow 1 on EV-A with EV-B as its backup; flow 2 from a neighbour, pinned to EV-A, starts at 1 ms; "
    "an ECN-marked EV swapped for a backup (default) or only avoided for 5us",
    (
        Run("replace", "ECN replaces the EV (default)", "mrc/fig14_ev_load_balancing.yaml"),
        Run("avoid_only", "ECN only avoids the EV for 5us", "mrc/fig14_ev_load_balancing_avoid_only.yaml"),
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
        rows.append(Row("throughput before the drops", "line rate", f"{before:.0f} Gb/s", before, _LINE_8X100G))
        rows.append(
            Row(
                "throughput with 20% drops on EV-A",
                "line rate (unchanged)",
                f"{after:.0f} Gb/s ({after / before:.0%})",
                after,
                _LINE_8X100G,
            )
        )
        low = window_min(series, at - 0.5, end)
        if low is not None:
            rows.append(Row("lowest 200 us sample around the drops", "no dip", f"{low:.0f} Gb/s", low, _LINE_8X100G))
    log = outcome.ev_log
    qp = _qp_of(outcome, f"nic{fault['nic']}")
    if qp is None:
        return rows
    mine = log.filter(pl.col("qp") == qp)

    def first(ev: int, state: str, after_ms: float = -1.0) -> float | None:
        part = mine.filter(pl.col("ev") == ev, pl.col("state") == state, pl.col("time_s") * 1e3 >= after_ms)
        return None if part.is_empty() else float(part["time_s"].min()) * 1e3

    # "Immediately", "at once": within one of the paper's ~200 ms throughput samples (200 us here).
    at_once: Expect = (None, 200.0)
    retired, promoted = first(ev_a, "retired"), first(ev_b, "active")
    if retired is not None:
        us = (retired - at) * 1e3
        rows.append(
            Row(
                f"EV-A (EV {ev_a}) retired (inactive) after the drops start", "immediately", f"{us:.1f} us", us, at_once
            )
        )
    if promoted is not None and retired is not None:
        gap = (promoted - retired) * 1e3
        rows.append(
            Row(
                f"EV-B (EV {ev_b}) active, after EV-A's retirement",
                "at once (replacement)",
                f"{gap:.1f} us",
                gap,
                at_once,
            )
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
    rows.append(Row("EV-A active again", "no (stays inactive)", "yes" if again else "no", float(again), (None, 0.0)))
    others = mine.filter(pl.col("state") == "retired", pl.col("ev") != ev_a).height
    rows.append(Row("other EVs of that QP retired", "none", str(others), float(others), (None, 0.0)))
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
                (None, 5.0),
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
                # "Well below" the line of the paper's log-scale plot: a decade below, in the last ms.
                (None, 0.1),
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
        lossy = lost.select("qp", "ev").unique()
        on_dead = retired.join(lossy, on=["qp", "ev"], how="semi").height
        mapped = retired.unique().join(lossy, on=["qp", "ev"], how="semi").height
        text = (
            f"{mapped} of the {lossy.height} EVs that lost a packet ({on_dead} retirements); "
            f"timeouts {summary.get('timeouts')}, retransmitted packets {summary.get('retransmitted_packets')}"
        )
        # The paper: a path that loses packets has its EV swapped; every such EV, within 5%.
        swapped = Row(
            p + "EVs over a dead link retired (the path mapped out)",
            "the EV is swapped for a backup",
            text,
            mapped / lossy.height if lossy.height else None,
            (0.95, None),
        )
        rows.append(swapped if lossy.height else replace(swapped, verdict=NO_CLAIM, reason="no EV lost a packet"))
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


# Per run: the victim's mean (paper, range), its lowest sample (paper, range).
_INCAST_VICTIM: dict[str, tuple[str, Expect | None, str, Expect | None]] = {
    "roce_pfc": ("30-100 Gb/s", (30.0, 100.0), "", None),
    # -25% of 400 Gb/s, about 300: within 20%.
    "roce_dcqcn_1qp": ("-25% (about 300 Gb/s)", (240.0, 360.0), "", None),
    # A smaller average impact than 1 QP's -25%, and samples down to about 100 Gb/s (within 20%: a far deeper
    # collapse is not the figure's shape).
    "roce_dcqcn_8qp": ("smaller average impact than 1 QP's -25%", (300.0, None), "dips to 100 Gb/s", (80.0, 120.0)),
    "mrc_1qp": ("unaffected (about 400 Gb/s)", _LINE_400G, "", None),
    "mrc_8qp": ("unaffected, as with 1 QP", _LINE_400G, "", None),
}


def _incast_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    rows = []
    pfc = outcomes.get("roce_pfc")
    pfc_pauses = pfc.summary.get("pauses_sent") if isinstance(pfc, Results) else None
    for run in exp.runs:
        outcome = outcomes.get(run.key)
        if not isinstance(outcome, Results):
            continue
        end = float(outcome.summary.get("sim_time_s") or 0.0) * 1e3
        victim, target = host_throughput(outcome, ["nic1"]), host_throughput(outcome, ["nic0"])
        paper_mean, expect_mean, paper_low, expect_low = _INCAST_VICTIM.get(run.key, ("", None, "", None))
        mean, low = window_mean(victim, 0.5, end), window_min(victim, 0.5, end)
        if mean is not None and low is not None:
            rows.append(Row(f"{run.label}: victim mean", paper_mean, f"{mean:.0f} Gb/s", mean, expect_mean))
            rows.append(Row(f"{run.label}: victim lowest 50 us sample", paper_low, f"{low:.0f} Gb/s", low, expect_low))
        total = window_mean(target, 0.5, end)
        if total is not None:
            rows.append(Row(f"{run.label}: incast receiver", "line rate", f"{total:.0f} Gb/s", total, _LINE_400G))
        if run.key.startswith("mrc"):
            reason = "the senders' rates are not sampled (telemetry samples the receiver and the victim's host)"
            rows.append(not_run(f"{run.label}: incast senders' shares", "fair shares", reason))
        pauses = outcome.summary.get("pauses_sent")
        if pauses is not None:
            if run.key.startswith("mrc"):
                paper, expect = "none (no PFC)", (None, 0.0)
            elif run.key == "roce_pfc":
                paper, expect = "many (PFC alone)", (1.0, None)
            else:
                # "DCQCN ... still generates some PFCs", fewer than PFC alone.
                fewer = None if pfc_pauses is None else float(pfc_pauses) - 1
                paper, expect = "some, fewer than with PFC alone", (1.0, fewer)
            rows.append(Row(f"{run.label}: PFC pauses", paper, f"{pauses:,}", float(pauses), expect))
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
    """Per-flow rate (bytes x 8 / FCT) of every flow, sorted, per transport; its slowest and fastest flow."""
    rows = []
    for run in exp.runs:
        outcome = outcomes.get(run.key)
        if not isinstance(outcome, Results) or outcome.flows.is_empty():
            continue
        flows = outcome.flows.filter(pl.col("fct_s").is_not_null())
        rates = sorted(float(b) * 8 / float(t) / 1e9 for b, t in zip(flows["bytes"], flows["fct_s"], strict=True))
        if not rates:
            continue
        text = ", ".join(f"{r:.0f}" for r in rates) + " Gb/s"
        if run.key == "mrc":
            # MRC's ECN avoidance time (5 us) was chosen by fitting this figure: its agreement cannot count.
            fitted = "ecn_avoid (5us) was chosen by fitting this figure, so agreement here does not count"
            row = Row(f"{run.label}: per-flow rate", "390 Gb/s for every flow", text, rates[0], _LINE_400G)
            rows.append(replace(row, verdict=PARTLY, reason=fitted))
            continue
        # The slowest at a half or a third of 390 Gb/s (195 or 130, each within 20%: 104 to 234).
        rows.append(
            Row(f"{run.label}: per-flow rate", "some at a half or a third of line rate", text, rates[0], (104.0, 234.0))
        )
        rows.append(
            Row(f"{run.label}: fastest flow", "some at line rate", f"{rates[-1]:.0f} Gb/s", rates[-1], _LINE_400G)
        )
    return rows


FIG20 = Experiment(
    "fig20",
    "Fig 20",
    "racks to racks: 8 flows of 64 MB from two racks to two others over 4 spines at 400G, one QP each; "
    "RoCEv2 (ECMP, PFC, no DCQCN) vs MRC (128 EVs, trimming)",
    (
        Run("roce", "RoCEv2 1 QP", "mrc/fig20_racks_to_racks_roce.yaml"),
        Run("mrc", "MRC 1 QP", "mrc/fig20_racks_to_racks_mrc.yaml"),
    ),
    _fig20_analysis,
    note="the quick version is the full one with seed 1 only; per-flow rate: the slowest flow's value",
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
    *MORE_EXPERIMENTS,
)
