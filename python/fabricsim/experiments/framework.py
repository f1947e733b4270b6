"""The experiment framework of `fabricsim reproduce`: run a paper's figures and set our numbers beside the paper's.

A paper's module (`experiments/mrc.py`) lists its figures as `Experiment`s:
each names its scenario files (`Run`s, under scenarios/), what its quick
version runs instead, and an analysis that reads the figure's metric out of
the run outputs as `Row`s (paper against fabricsim). This module runs them,
times them and writes the report; what a figure runs and how it is read
belong to the paper's module.

Output directory (default `reproduce-out/`): one directory per experiment
with one run (or sweep) directory per scenario, `summary.csv` and
`summary.md` (paper against fabricsim, row by row), and a `summary.md` and
`summary.json` of every experiment at the top.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..results import Results
from ..runner import run_loaded
from ..scenario import is_sweep, load_scenario
from ..sweep import SweepResults, prepare, run_points
from . import paper_experiments

__all__ = [
    "Analysis",
    "Experiment",
    "Outcome",
    "Phase",
    "Row",
    "Run",
    "reproduce",
    "run_experiment",
    "scenarios_dir",
    "summary_markdown",
    "write_summary",
]

Outcome = Results | SweepResults


def scenarios_dir() -> Path:
    """The scenarios shipped in the package (`scenarios/` at the repository's top); a `Run`'s files are relative."""
    return Path(str(resources.files("fabricsim").joinpath("scenarios")))


@dataclass(frozen=True)
class Run:
    """One scenario file of an experiment, and what its quick version runs instead.

    The quick version runs `quick_scenario` when there is one: a file that
    includes `scenario` and changes what takes too long (a schedule of
    faults, of job starts), keeping its name. `quick` are dotted overrides of
    the quick version for generic knobs only (the sizes of a sweep, the
    duration); `overrides` apply to both versions (e.g. a seed), the quick
    ones on top.
    """

    key: str
    label: str
    scenario: str
    quick_scenario: str | None = None
    quick: Mapping[str, Any] = field(default_factory=dict)
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def load(self, quick: bool = False, root: Path | None = None) -> dict[str, Any]:
        """The scenario dict of the full or the quick version."""
        path = self.quick_scenario if quick and self.quick_scenario else self.scenario
        changes = {**self.overrides, **(self.quick if quick else {})}
        return load_scenario((root or scenarios_dir()) / path, changes or None)


@dataclass(frozen=True)
class Row:
    """One line of an experiment's comparison: the metric, the paper's value and ours."""

    metric: str
    paper: str
    ours: str
    value: float | None = None


@dataclass(frozen=True)
class Phase:
    """A window of a time-series run [start_ms, end_ms) and what the paper reports for it."""

    label: str
    start_ms: float
    end_ms: float
    paper: str


Analysis = Callable[["Experiment", Mapping[str, Outcome], bool], list[Row]]


@dataclass(frozen=True)
class Experiment:
    """A figure: its runs, and how to compare them with the paper."""

    key: str
    figure: str
    title: str
    runs: tuple[Run, ...]
    analyse: Analysis
    phases: tuple[Phase, ...] = ()
    quick_phases: tuple[Phase, ...] | None = None
    hosts: tuple[str, ...] = ()
    note: str = ""
    # Whether the last phase returns to the first phase's conditions (then the recovery time is reported).
    recovers: bool = True

    def phases_for(self, quick: bool) -> tuple[Phase, ...]:
        """The phases of the full or the quick version."""
        return self.quick_phases if quick and self.quick_phases is not None else self.phases


# --- running ----------------------------------------------------------------------------------------------------


def run_experiment(
    exp: Experiment,
    out: Path | None,
    quick: bool = False,
    on_run: Callable[[Run, float], None] | None = None,
    root: Path | None = None,
) -> tuple[list[Row], float]:
    """Runs every scenario of `exp`, each written under `out/<exp.key>/` when `out` is given; rows and wall time."""
    start = time.perf_counter()
    outcomes: dict[str, Outcome] = {}
    for run in exp.runs:
        began = time.perf_counter()
        scenario = run.load(quick, root)
        outcome: Outcome
        if is_sweep(scenario):
            parameter, points = prepare(scenario)
            outcome = run_points(parameter, points)
        else:
            outcome = run_loaded(scenario)
        outcomes[run.key] = outcome
        if out is not None:
            outcome.write(out / exp.key / run.key, overwrite=True, csv=True)
        if isinstance(outcome, SweepResults) and outcome.failure is not None:
            # Its finished runs are written; an analysis of part of a sweep would mislead.
            raise outcome.failure.error
        if on_run is not None:
            on_run(run, time.perf_counter() - began)
    rows = exp.analyse(exp, outcomes, quick)
    wall = time.perf_counter() - start
    if out is not None:
        write_summary(out / exp.key, exp, rows, quick, wall)
    return rows, wall


def summary_markdown(exp: Experiment, rows: Sequence[Row], quick: bool, wall_s: float) -> str:
    """The comparison of one experiment as a markdown section."""
    lines = [
        f"## {exp.figure}: {exp.title}",
        "",
        f"Version: {'quick' if quick else 'full'}; wall time {wall_s:.1f} s."
        + (f" Note: {exp.note}." if exp.note else ""),
        "",
        "| metric | paper | fabricsim |",
        "|---|---|---|",
    ]
    lines += [f"| {r.metric} | {r.paper} | {r.ours} |" for r in rows]
    return "\n".join(lines) + "\n"


def write_summary(directory: Path, exp: Experiment, rows: Sequence[Row], quick: bool, wall_s: float) -> None:
    """Writes `summary.csv` and `summary.md` of one experiment into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["figure", "metric", "paper", "fabricsim", "value"])
    for r in rows:
        writer.writerow([exp.figure, r.metric, r.paper, r.ours, "" if r.value is None else r.value])
    (directory / "summary.csv").write_text(buffer.getvalue(), encoding="utf-8")
    (directory / "summary.md").write_text(summary_markdown(exp, rows, quick, wall_s), encoding="utf-8")


def reproduce(
    paper: str,
    out: Path | None,
    quick: bool = False,
    only: Sequence[str] = (),
    on_experiment: Callable[[Experiment, list[Row], float], None] | None = None,
    on_run: Callable[[Run, float], None] | None = None,
) -> dict[str, tuple[list[Row], float]]:
    """Runs the experiments of a paper (or those named in `only`); rows and wall time per experiment key."""
    registered = paper_experiments(paper)
    experiments = [e for e in registered if not only or e.key in only]
    unknown = set(only) - {e.key for e in registered}
    if unknown:
        raise KeyError(f"unknown experiment(s) {', '.join(sorted(unknown))}")
    results: dict[str, tuple[list[Row], float]] = {}
    for exp in experiments:
        rows, wall = run_experiment(exp, out, quick, on_run)
        results[exp.key] = (rows, wall)
        if on_experiment is not None:
            on_experiment(exp, rows, wall)
    if out is not None:
        sections = [
            summary_markdown(exp, results[exp.key][0], quick, results[exp.key][1])
            for exp in experiments
            if exp.key in results
        ]
        total = sum(w for _, w in results.values())
        head = f"# fabricsim reproduce {paper}{' --quick' if quick else ''}\n\nTotal wall time {total:.1f} s.\n\n"
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.md").write_text(head + "\n".join(sections), encoding="utf-8")
        (out / "summary.json").write_text(
            json.dumps(
                {
                    "registry": paper,
                    "quick": quick,
                    "wall_s": total,
                    "experiments": {
                        k: {"wall_s": w, "rows": [r.__dict__ for r in rows]} for k, (rows, w) in results.items()
                    },
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return results
