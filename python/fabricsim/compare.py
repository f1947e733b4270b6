"""`fabricsim compare`: one scenario under every design, side by side.

Each design (`design:` presets, docs/DESIGNS.md) runs the scenario's
topology, workload and faults with the settings any design governs taken
out of it (`_core.under_design`), over `seeds` seeds (the scenario's seed,
then the next ones). Runs go to a local process pool or a Ray cluster
(`fabricsim.batch`); each writes its run directory `<design>/seed_<n>`, and
the comparison reads back only what its metrics need, so it never holds
more than one run's tables at a time. A design that cannot run
on the scenario (HPN's bonded ports on single-port NICs, SHIFT without a
second NIC on the host) is left out with the core's reason unless it was
asked for by name, which makes it an error.

The comparison directory holds the run directories, `compare.parquet` (one
row per design and seed) and, on request, `fct_cdf.png`,
`throughput.png` and `report.html`.

Recovery after a fault (`recovery_<k>_ms`, k counting the faults with an
`at` from 1) is read from the sampled NICs' receive goodput
(`telemetry.sample_interval` with `telemetry.hosts`): the time from the
fault to the end of the first sample interval wholly after it in which
their total is back to `RECOVERED_SHARE` of its mean over the
`BASELINE_SAMPLES` samples before the fault. Its resolution is one sample
interval, and it is at least one. A run whose traffic never gets back to
that level but whose workload still finishes (RoCE's tail after waiting
out a timeout) recovers when its traffic ends. It is unset where the
scenario samples no NIC or no traffic flowed before the fault, and `never`
(`NEVER`, infinite) where the workload did not finish: a failed QP, or a
run stopped early.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _core
from ._core import ScenarioError
from .scenario import is_sweep, to_json
from .sweep import MAX_POINTS

if TYPE_CHECKING:
    from .batch import Finished, Progress

__all__ = ["METRICS", "CompareRun", "plan", "run_all", "spread"]

# What a comparison reports, when the workload has it: (column, label, unit).
METRICS: tuple[tuple[str, str, str], ...] = (
    ("fct_p50_us", "FCT p50", "us"),
    ("fct_p99_us", "FCT p99", "us"),
    ("fct_max_us", "FCT max", "us"),
    ("slowdown_p99", "slowdown p99", ""),
    ("cct_mean_ms", "CCT mean", "ms"),
    ("cct_max_ms", "CCT max", "ms"),
    ("busbw_mean_gbps", "busbw mean", "Gb/s"),
    ("jct_slowdown", "JCT slowdown", ""),
    ("drops", "drops", ""),
    ("retransmitted_packets", "retransmitted packets", ""),
    ("timeouts", "timeouts", ""),
    ("paused_time_s", "paused time", "s"),
    ("qp_errors", "QP errors", ""),
)
# Back to this share of the throughput before a fault counts as recovered (Spectrum-X s6.5 reads 75% of line rate).
RECOVERED_SHARE = 0.9
BASELINE_SAMPLES = 10
# `recovery_<k>_ms` of a run whose workload did not finish after the fault.
NEVER = math.inf
# A fault's fields that say when and how, not what it hits.
_NOT_TARGETS = ("kind", "at", "until", "duration", "direction")


@dataclass(frozen=True)
class CompareRun:
    """One design at one seed: the scenario it runs and where its run directory goes."""

    design: str
    seed: int
    scenario: dict[str, Any]

    @property
    def directory(self) -> str:
        return f"{self.design}/seed_{self.seed}"


def plan(
    scenario: Mapping[str, Any], designs: Sequence[str] | None, seeds: int
) -> tuple[list[CompareRun], dict[str, str]]:
    """The runs of a comparison, each resolved by the core, and the designs left out with why.

    `designs` None means every design; a named design that cannot run, or
    that does not exist, raises ScenarioError.
    """
    if is_sweep(scenario):
        raise ScenarioError("sweep: compare runs one scenario under each design; remove its sweep")
    if seeds < 1:
        raise ScenarioError(f"--seeds: {seeds}: at least one seed")
    known = _core.designs()
    asked = list(designs) if designs is not None else known
    if not asked:
        raise ScenarioError("--designs: names no design: one or more of " + ", ".join(known))
    # As many runs as a sweep may have, counted before any is resolved.
    if seeds * len(asked) > MAX_POINTS:
        raise ScenarioError(
            f"--seeds: {seeds:,} seeds under {len(asked)} designs are {seeds * len(asked):,} runs; "
            f"a comparison has at most {MAX_POINTS:,}"
        )
    for name in asked:
        if name not in known:
            raise ScenarioError(f"--designs: '{name}' is not a design: one of {', '.join(known)}")
    if len(set(asked)) != len(asked):
        raise ScenarioError(f"--designs: {','.join(asked)} names a design twice")
    first_seed = int(scenario.get("seed", 1))
    runs: list[CompareRun] = []
    left_out: dict[str, str] = {}
    for design in asked:
        under = json.loads(_core.under_design(to_json(scenario), design))
        try:
            _core.resolve(to_json(under))
        except ScenarioError as e:
            if _own_error(scenario) == str(e):
                # The scenario is bad whatever the design: the field is to blame, not --designs.
                raise ScenarioError(str(e)) from None
            if designs is not None:
                raise ScenarioError(f"--designs: {design} cannot run this scenario: {e}") from None
            left_out[design] = str(e)
            continue
        for k in range(seeds):
            runs.append(CompareRun(design, first_seed + k, {**under, "seed": first_seed + k}))
    if not runs:
        raise ScenarioError(
            "design: no design can run this scenario: " + "; ".join(f"{d}: {w}" for d, w in left_out.items())
        )
    return runs, left_out


def _own_error(scenario: Mapping[str, Any]) -> str | None:
    """What the core finds wrong with the scenario itself, under no design but its own; None if nothing."""
    try:
        _core.resolve(to_json(scenario))
    except ScenarioError as e:
        return str(e)
    return None


def metrics(results: Any) -> dict[str, Any]:
    """The comparison's metrics of one run (None where the workload has no such quantity)."""
    s = results.summary
    row: dict[str, Any] = {"complete": bool(results.complete)}
    has_flows = bool(s.get("flows"))
    for key in ("fct_p50_us", "fct_p99_us", "fct_max_us", "slowdown_p99"):
        row[key] = s.get(key) if has_flows else None
    collectives = results.collectives
    cct = collectives["cct_s"].drop_nulls() if len(collectives) else None
    done = cct is not None and len(cct) == len(collectives) and len(cct) > 0
    row["cct_mean_ms"] = float(cct.mean()) * 1e3 if done else None
    row["cct_max_ms"] = float(cct.max()) * 1e3 if done else None
    busbw = collectives["busbw_gbps"].drop_nulls() if len(collectives) else None
    row["busbw_mean_gbps"] = float(busbw.mean()) if busbw is not None and len(busbw) else None
    slowdowns = [j.get("jct_slowdown") for j in (s.get("jobs") or {}).values()]
    row["jct_slowdown"] = max(slowdowns) if slowdowns and None not in slowdowns else None
    for key in ("drops", "retransmitted_packets", "timeouts", "paused_time_s", "qp_errors"):
        row[key] = s.get(key)
    for k, recovery in enumerate(recovery_times(results), start=1):
        row[f"recovery_{k}_ms"] = None if recovery is None else recovery * 1e3
    return row


def faults_with_times(scenario: Mapping[str, Any]) -> list[tuple[float, str]]:
    """The scenario's faults that happen at a set time, in its order: when, and what (`link_down t0.p0.0:2`)."""
    from .scenario import fault_window

    faults = []
    for fault in scenario.get("faults") or []:
        if "at" in fault:
            target = " ".join(str(v) for k, v in fault.items() if k not in _NOT_TARGETS)
            faults.append((fault_window(fault)[0], f"{fault.get('kind', 'fault')} {target}".strip()))
    return faults


def recovery_times(results: Any) -> list[float | None]:
    """Seconds from each timed fault until the sampled NICs' goodput is back (see the module docs); None unknown."""
    faults = faults_with_times(results.scenario)
    series = results.timeseries
    if not faults:
        return []
    if series.is_empty() or "metric" not in series.columns:
        return [None] * len(faults)
    import polars as pl

    total = (
        series.filter(pl.col("metric") == "rx_goodput_bps").group_by("time_s").agg(pl.col("value").sum()).sort("time_s")
    )
    times, values = total["time_s"].to_list(), total["value"].to_list()
    finished = _workload_finished(results)
    return [_recovery(times, values, at, finished) for at, _ in faults]


def _workload_finished(results: Any) -> bool:
    """Whether the run went to its end with every flow and every collective done."""
    s = results.summary
    collectives = results.collectives
    done = collectives.is_empty() or collectives["cct_s"].null_count() == 0
    return bool(results.complete) and s.get("flows_completed") == s.get("flows") and done


def _recovery(times: Sequence[float], values: Sequence[float], at: float, finished: bool) -> float | None:
    if len(times) < 2:
        return None
    # A sample is the rate over the interval it ends; only those wholly after the fault can show it.
    interval = times[1] - times[0]
    # The sample at 0 closes an empty interval.
    before = [v for t, v in zip(times, values, strict=True) if 0 < t <= at][-BASELINE_SAMPLES:]
    baseline = sum(before) / len(before) if before else 0.0
    if baseline <= 0.0:
        return None
    for t, v in zip(times, values, strict=True):
        if t >= at + interval and v >= RECOVERED_SHARE * baseline:
            return t - at
    # Not back at its level, but done: the fault's cost ended with the traffic (the tail after a stall).
    last = max((t for t, v in zip(times, values, strict=True) if v > 0), default=at)
    return max(last - at, interval) if finished else NEVER


def run_all(
    runs: Sequence[CompareRun],
    output: Path,
    jobs: int,
    done: Callable[[CompareRun], None] | None = None,
    ray: str | None = None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Runs every run, `jobs` at a time or on Ray (`fabricsim.batch`); each run's metrics, in the order of `runs`.

    A run that fails raises its error once the runs under way are written.
    """
    from .batch import Task, run_batch
    from .results import Results

    tasks = [Task(to_json(r.scenario), output / r.directory, f"{r.design}, seed {r.seed}") for r in runs]
    rows: list[dict[str, Any] | None] = [None] * len(runs)
    errors: list[Exception] = []

    def finished(index: int, how: Finished) -> None:
        run = runs[index]
        if how.error is not None:
            errors.append(how.error)
            # Nothing half-written: a run that died leaves no empty directory
            # (its own, then its design's).
            for empty in (output / run.directory, (output / run.directory).parent):
                with contextlib.suppress(OSError):
                    empty.rmdir()
            return
        rows[index] = {"design": run.design, "seed": run.seed, **metrics(Results.read(output / run.directory))}
        if done is not None:
            done(run)

    run_batch(tasks, jobs=jobs, ray=ray, on_finished=finished, progress=progress)
    if errors:
        with contextlib.suppress(OSError):
            output.rmdir()
        raise errors[0]
    return [row for row in rows if row is not None]


def spread(values: Sequence[float | None]) -> tuple[float, float, float] | None:
    """Mean, min and max over seeds; None when any seed lacks the value."""
    if not values or any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        return None
    numbers = [float(v) for v in values if v is not None]
    return sum(numbers) / len(numbers), min(numbers), max(numbers)
