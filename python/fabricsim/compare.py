"""`fabricsim compare`: one scenario under every design, side by side.

Each design (`design:` presets, docs/DESIGNS.md) runs the scenario's
topology, workload and faults with the settings any design governs taken
out of it (`_core.under_design`), over `seeds` seeds (the scenario's seed,
then the next ones). Runs go to a process pool; each writes its run
directory `<design>/seed_<n>` and returns its metrics, so the comparison
never holds more than one run's tables at a time. A design that cannot run
on the scenario (HPN's bonded ports on single-port NICs, SHIFT without a
second NIC on the host) is left out with the core's reason unless it was
asked for by name, which makes it an error.

The comparison directory holds the run directories, `compare.parquet` (one
row per design and seed) and, on request, `fct_cdf.png` and
`throughput.png`.
"""

from __future__ import annotations

import json
import math
import multiprocessing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _core
from ._core import ScenarioError
from .scenario import is_sweep, to_json

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


def _run_one(run: CompareRun, directory: str, memory: int | None) -> dict[str, Any]:
    """Runs one design at one seed into `directory` within `memory` bytes; its metrics (in a worker process).

    The core's errors do not pickle (their class lives in the extension
    module), so they travel back as their kind and text (`_reraise`).
    """
    from .results import Results

    try:
        results = Results(_core.run(to_json(run.scenario), None, memory))
    except (_core.ScenarioError, _core.SimulationError) as e:
        return {"error": (type(e).__name__, f"{run.design}, seed {run.seed}: {e}")}
    results.write(directory, overwrite=True)
    return {"design": run.design, "seed": run.seed, **metrics(results)}


def _reraise(row: dict[str, Any]) -> dict[str, Any]:
    """The row, or the error a worker sent back instead, raised again."""
    if "error" not in row:
        return row
    kind, text = row["error"]
    raise (_core.ScenarioError if kind == "ScenarioError" else _core.SimulationError)(text)


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
    return row


def run_all(
    runs: Sequence[CompareRun], output: Path, jobs: int, done: Callable[[CompareRun], None] | None = None
) -> list[dict[str, Any]]:
    """Runs every run on `jobs` processes (in this process for 1); rows in the order of `runs`.

    Each run may take its share of the memory available now (a run that
    would outgrow it stops with `memory_limit`), so that `jobs` runs at
    once cannot together exhaust the machine.
    """
    available = _core.available_memory()
    memory = available // jobs if available is not None else None
    directories = [str(output / run.directory) for run in runs]
    # Each design's directory first: workers creating one at once would race.
    for design in dict.fromkeys(run.design for run in runs):
        (output / design).mkdir(parents=True, exist_ok=True)
    if jobs <= 1:
        rows = []
        for run, directory in zip(runs, directories, strict=True):
            rows.append(_reraise(_run_one(run, directory, memory)))
            if done:
                done(run)
        return rows
    # Spawned, not forked: the parent's polars and Rust threads do not survive a fork.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [
            pool.submit(_run_one, run, directory, memory) for run, directory in zip(runs, directories, strict=True)
        ]
        rows = []
        for run, future in zip(runs, futures, strict=True):
            try:
                rows.append(_reraise(future.result()))
            except BrokenProcessPool:
                raise _core.SimulationError(
                    f"{run.design}, seed {run.seed}: its process was killed (by the system: out of memory?)"
                ) from None
            if done:
                done(run)
        return rows


def spread(values: Sequence[float | None]) -> tuple[float, float, float] | None:
    """Mean, min and max over seeds; None when any seed lacks the value."""
    if not values or any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        return None
    numbers = [float(v) for v in values if v is not None]
    return sum(numbers) / len(numbers), min(numbers), max(numbers)
