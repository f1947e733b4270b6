"""Measurements a figure's analysis reads out of run outputs, and the analyses any paper can use.

`collective_analysis` compares bus bandwidth per size across the runs of a
collective figure (nccl-tests' busbw); `phase_analysis` compares the mean
throughput of some hosts over the phases of a failure. A paper's own
analyses build on the helpers here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from ..results import Results, nccl_rows
from ..sweep import SweepResults
from .framework import CONTRADICTS, MATCHES, PARTLY, Analysis, Expect, Experiment, Outcome, Phase, Row, in_range

__all__ = [
    "GB_S",
    "Claim",
    "busbw_by_size",
    "collective_analysis",
    "host_throughput",
    "judged_over_sizes",
    "phase_analysis",
    "recovery_ms",
    "size_bytes",
    "window_mean",
    "window_min",
]

GB_S = "GB/s"


def busbw_by_size(sweep: SweepResults) -> dict[str, float]:
    """Mean bus bandwidth in GB/s (nccl-tests' unit) per swept size label."""
    rows = nccl_rows(sweep.collectives)
    return {str(r["value"]): float(r["busbw"]) for r in rows.iter_rows(named=True) if r["busbw"] is not None}


# A collective claim: (metric, paper, run a, run b or '', size rule), and optionally the range that agrees.
Claim = tuple[str, str, str, str, str] | tuple[str, str, str, str, str, Expect | None]


def collective_analysis(claims: Sequence[Claim]) -> Analysis:
    """Bus bandwidth per size and run, then each claim (metric, paper, run a, run b or '', size rule[, expect]).

    With run b, ours is a's busbw / b's; without, a's busbw. The size rule
    `largest` or `smallest` compares at that size, the row's value agreeing
    with the paper when in `expect`. `every` is for a claim about every size:
    ours lists each size, the value is the one with the least margin to
    `expect` (which it needs), and the verdict is `matches` when every size
    is in range, `contradicts` when none is, `partly` otherwise. `from
    <size>` is the same over the sizes from that one up (a claim "at large
    sizes").
    """
    for claim in claims:
        if claim[4] not in ("largest", "smallest", "every") and not _from_size(claim[4]):
            raise ValueError(f"{claim[0]}: size rule {claim[4]!r} is none of largest, smallest, every, from <size>")
        if (claim[4] == "every" or _from_size(claim[4])) and _expect_of(claim) is None:
            raise ValueError(f"{claim[0]}: a claim about every size needs its range")

    def analyse(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
        table = {key: busbw_by_size(o) for key, o in outcomes.items() if isinstance(o, SweepResults)}
        rows = []
        labels = {r.key: r.label for r in exp.runs}
        rows.extend(busbw_row(labels[key], sizes) for key, sizes in table.items())
        for claim in claims:
            metric, paper, a, b, which = claim[:5]
            expect = _expect_of(claim)
            if a not in table or (b and b not in table) or not table[a]:
                continue
            # Ours per size: a / b, or a's busbw.
            ours = {
                size: va / table[b][size] if b else va for size, va in table[a].items() if not b or table[b].get(size)
            }
            unit = "" if b else f" {GB_S}"
            lowest = _from_size(which)
            if (which == "every" or lowest) and ours and expect is not None:
                at = f"{which.removeprefix('from ')} and up" if lowest else "every size"
                over = {s: v for s, v in ours.items() if size_bytes(s) >= lowest}
                rows.append(judged_over_sizes(f"{metric} @ {at}", paper, over, expect, unit))
                continue
            size = _pick_size(list(table[a]), which)
            if size in ours:
                rows.append(Row(f"{metric} @ {size}", paper, f"{ours[size]:.2f}{unit}", ours[size], expect))
        return rows

    return analyse


def judged_over_sizes(
    metric: str, paper: str, ours: Mapping[str, float], expect: Expect, unit: str = "", digits: int = 2
) -> Row:
    """A claim about several sizes (`ours`: size label -> value, not empty), judged at each.

    Ours lists each size (to `digits` decimals); the value is the one with the least margin to
    `expect`; the verdict is `matches` when every size is in range,
    `contradicts` when none is, `partly` otherwise.
    """
    ordered = sorted(ours, key=size_bytes)
    inside = [s for s in ordered if in_range(ours[s], expect)]
    worst = min(ordered, key=lambda s: _margin(ours[s], expect))
    verdict = MATCHES if len(inside) == len(ordered) else PARTLY if inside else CONTRADICTS
    text = ", ".join(f"{s}: {ours[s]:.{digits}f}" for s in ordered)
    reason = f"in range at {len(inside)} of {len(ordered)} sizes"
    return Row(metric, paper, text + unit, ours[worst], expect, verdict, reason, value_of="the worst size")


def busbw_row(label: str, sizes: Mapping[str, float]) -> Row:
    """A run's busbw at each size, for information; its value the largest."""
    text = ", ".join(f"{size}: {bw:.2f}" for size, bw in sizes.items())
    return Row(f"busbw {label}", "", f"{text} {GB_S}", max(sizes.values(), default=None), value_of="the largest")


def _expect_of(claim: Claim) -> Expect | None:
    return claim[5] if len(claim) == 6 else None


def _margin(value: float, expect: Expect) -> float:
    """How far inside `expect` `value` lies (negative: outside)."""
    low, high = expect
    return min(value - low if low is not None else float("inf"), high - value if high is not None else float("inf"))


def size_bytes(label: str) -> float:
    """A size as a scenario writes it (`4KiB`, `1MB`, `512B`, or a number of bytes) in bytes."""
    units = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 1e3, "MB": 1e6, "GB": 1e9, "B": 1}
    for unit, scale in units.items():
        if label.endswith(unit):
            return float(label[: -len(unit)]) * scale
    return float(label)


def _from_size(rule: str) -> float:
    """The bytes of size rule `from <size>`, else 0."""
    if not rule.startswith("from "):
        return 0
    try:
        return size_bytes(rule.removeprefix("from "))
    except ValueError:
        return 0


def _pick_size(sizes: list[str], which: str) -> str:
    ordered = sorted(sizes, key=size_bytes)
    return ordered[-1] if which == "largest" else ordered[0]


def host_throughput(results: Results, hosts: Sequence[str]) -> pl.DataFrame:
    """Receive goodput (Gb/s) per sample time, the mean over `hosts`: columns time_ms, gbps."""
    ts = results.timeseries
    if ts.is_empty():
        return pl.DataFrame(schema={"time_ms": pl.Float64, "gbps": pl.Float64})
    return (
        ts.filter(pl.col("metric") == "rx_goodput_bps", pl.col("entity").is_in(list(hosts)))
        .group_by("time_s")
        .agg((pl.col("value").mean() / 1e9).alias("gbps"))
        .sort("time_s")
        .select((pl.col("time_s") * 1e3).alias("time_ms"), "gbps")
    )


def window_mean(series: pl.DataFrame, start_ms: float, end_ms: float) -> float | None:
    """Mean of the samples taken in (start_ms, end_ms]; None when there are none."""
    part = series.filter((pl.col("time_ms") > start_ms + 1e-9) & (pl.col("time_ms") <= end_ms + 1e-9))
    return None if part.is_empty() else float(part["gbps"].mean())  # type: ignore[arg-type]


def window_min(series: pl.DataFrame, start_ms: float, end_ms: float) -> float | None:
    """Lowest sample in (start_ms, end_ms]."""
    part = series.filter((pl.col("time_ms") > start_ms + 1e-9) & (pl.col("time_ms") <= end_ms + 1e-9))
    return None if part.is_empty() else float(part["gbps"].min())  # type: ignore[arg-type]


def recovery_ms(series: pl.DataFrame, after_ms: float, level: float) -> float | None:
    """Time from `after_ms` until the first sample from which throughput stays at or above `level`."""
    part = series.filter(pl.col("time_ms") > after_ms + 1e-9)
    if part.is_empty():
        return None
    times, values = part["time_ms"].to_list(), part["gbps"].to_list()
    for i, t in enumerate(times):
        if all(v >= level for v in values[i:]):
            return float(t - after_ms)
    return None


def phase_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    """Mean throughput of the experiment's hosts per phase (and relative to the first phase), per run.

    A phase's row carries its `expect`; its value is the mean in Gb/s, or
    the share of the first phase's mean for a `relative` phase. Also the
    lowest sample of each phase after the first, and how long after the
    start of the last phase the throughput is back within 5% of the first
    phase's, for good.
    """
    rows: list[Row] = []
    phases = exp.phases_for(quick)
    for run in exp.runs:
        outcome = outcomes.get(run.key)
        if not isinstance(outcome, Results):
            continue
        series = host_throughput(outcome, exp.hosts)
        prefix = f"{run.label}: " if len(exp.runs) > 1 else ""
        base = window_mean(series, phases[0].start_ms, phases[0].end_ms) if phases else None
        for i, phase in enumerate(phases):
            mean = window_mean(series, phase.start_ms, phase.end_ms)
            if mean is None:
                continue
            share = mean / base if base else None
            text = f"{mean:.0f} Gb/s" + (f" ({share:.0%})" if share is not None else "")
            value = share if phase.relative else mean
            rows.append(Row(f"{prefix}{phase.label}", phase.paper, text, value, phase.expect))
            if i > 0:
                low = window_min(series, phase.start_ms - 0.5, phase.end_ms)
                if low is not None:
                    rows.append(
                        Row(f"{prefix}{phase.label}: lowest sample around the change", "", f"{low:.0f} Gb/s", low)
                    )
        if base and len(phases) > 1 and exp.recovers:
            last = phases[-1]
            back = recovery_ms(series, last.start_ms - _settle(phases), 0.95 * base)
            text = "never" if back is None else f"{back:.1f} ms"
            rows.append(Row(f"{prefix}back within 5% of baseline after the last change", "", text, back))
    return rows


def _settle(phases: Sequence[Phase]) -> float:
    # Phases start a little after the event that opens them; the event is this much earlier.
    return phases[-1].start_ms - round(phases[-1].start_ms)
