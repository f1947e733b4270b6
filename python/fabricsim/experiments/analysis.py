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
from .framework import Analysis, Experiment, Outcome, Phase, Row

__all__ = [
    "GB_S",
    "busbw_by_size",
    "collective_analysis",
    "host_throughput",
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


def collective_analysis(claims: Sequence[tuple[str, str, str, str, str]]) -> Analysis:
    """Bus bandwidth per size and run, then each claim (metric, paper, run a, run b or '', size rule).

    A claim compares bus bandwidth at the largest or smallest size
    (`largest`/`smallest`): with run b, ours is a / b; without, a's busbw.
    """

    def analyse(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
        table = {key: busbw_by_size(o) for key, o in outcomes.items() if isinstance(o, SweepResults)}
        rows = []
        labels = {r.key: r.label for r in exp.runs}
        for key, sizes in table.items():
            text = ", ".join(f"{size}: {bw:.2f}" for size, bw in sizes.items())
            rows.append(Row(f"busbw {labels[key]}", "", f"{text} {GB_S}", max(sizes.values(), default=None)))
        for metric, paper, a, b, which in claims:
            if a not in table or (b and b not in table) or not table[a]:
                continue
            size = _pick_size(list(table[a]), which)
            va = table[a].get(size)
            vb = table[b].get(size) if b else None
            if va is None or (b and not vb):
                continue
            if b and vb:
                rows.append(Row(f"{metric} @ {size}", paper, f"{va / vb:.2f}", va / vb))
            else:
                rows.append(Row(f"{metric} @ {size}", paper, f"{va:.2f} {GB_S}", va))
        return rows

    return analyse


def size_bytes(label: str) -> float:
    """A size as a scenario writes it (`4KiB`, `1MB`, `512B`, or a number of bytes) in bytes."""
    units = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 1e3, "MB": 1e6, "GB": 1e9, "B": 1}
    for unit, scale in units.items():
        if label.endswith(unit):
            return float(label[: -len(unit)]) * scale
    return float(label)


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

    Also the lowest sample of each phase after the first, and how long after
    the start of the last phase the throughput is back within 5% of the
    first phase's, for good.
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
            share = f" ({mean / base:.0%})" if base else ""
            rows.append(Row(f"{prefix}{phase.label}", phase.paper, f"{mean:.0f} Gb/s{share}", mean))
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
