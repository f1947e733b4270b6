"""The experiment framework of `fabricsim reproduce`: run a paper's figures over several seeds, set our numbers
beside the paper's and give each claim a verdict.

A paper's module (`experiments/mrc.py`) lists its figures as `Experiment`s:
each names its scenario files (`Run`s, under scenarios/), what its quick
version runs instead, its seeds, and an analysis that reads the figure's
metric out of the run outputs as `Row`s (paper against fabricsim, and the
range of our value that agrees with the paper's claim). This module runs
them, times them, merges the seeds, judges and writes the report; what a
figure runs and how it is read belong to the paper's module.

Seeds: the full version runs every `Run` of an experiment once per seed of
`Experiment.seeds` (the scenario's top-level `seed` set to it, over any
override of the run), the quick version the first seed only. The analysis
reads one seed's outcomes at a time. The seeds' rows are merged into one
row per metric: its `ours` is the first seed's text, followed, when several
seeds ran, by the spread of `value` over them (`0.43 (seeds 1-3:
0.41-0.45)`); its `value` is the first seed's. When the seeds' analyses do
not give the same metrics in the same order, each seed's rows are listed
apart instead, the metric prefixed `seed N: `.

Verdicts: a row's `expect` is the closed range of `value` that agrees with
the paper's claim (a None bound is open). Over the seeds of a merged row:
`matches` when every seed's value is in range and at least `MIN_SEEDS` seeds
ran; `partly` when some but not all are, or all are but fewer seeds ran;
`contradicts` when none is; `not run` when no seed gave a value; `n/a` for a
row without `expect` (a number for information, no claim). An analysis may
set a seed's verdict itself (`Row.verdict`, with a `reason`), for a claim
that is not a range of one number: `matches` then counts as that seed in
range, `contradicts` as out of it, `partly` as neither. `reason` says why a
verdict is not plain (`2 of 3 seeds in range`).

Runs at once (`jobs`): with more than one, every run of every experiment
and seed (each point of a sweep) goes into one batch on a local process
pool (`batch.run_batch`), each run allowed its share of the memory
available; a run whose scenario needs more than its share runs alone after
the others. The figures are analysed once all their runs are written, in
the registry's order, from the run directories. An experiment's time is
then the sum of its runs' times, which overlap.

Output directory (default `reproduce-out/`): one directory per experiment
holding a run (or sweep) directory per scenario and seed, `<run>/` for the
first seed and `<run>.seed<N>/` for each other seed N, `summary.csv` and
`summary.md` (paper against fabricsim row by row, with the range and the
verdict); and a `summary.md` and `summary.json` of every experiment at the
top, with the count of each verdict.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from .. import _core
from ..results import Results
from ..runner import run_loaded
from ..scenario import is_sweep, load_scenario, to_json
from ..sweep import SweepPoint, SweepResults, prepare, run_points
from . import paper_experiments

__all__ = [
    "CONTRADICTS",
    "CSV_COLUMNS",
    "MATCHES",
    "MIN_SEEDS",
    "NOT_RUN",
    "NO_CLAIM",
    "PARTLY",
    "VERDICTS",
    "Analysis",
    "Expect",
    "Experiment",
    "Outcome",
    "Phase",
    "Row",
    "Run",
    "in_range",
    "merge_seeds",
    "not_run",
    "reproduce",
    "run_experiment",
    "scenarios_dir",
    "summary_markdown",
    "verdict_counts",
    "write_summary",
]

Outcome = Results | SweepResults
# The closed range of a value that agrees with a claim; a None bound is open.
Expect = tuple[float | None, float | None]

MATCHES, PARTLY, CONTRADICTS, NOT_RUN, NO_CLAIM = "matches", "partly", "contradicts", "not run", "n/a"
VERDICTS = (MATCHES, PARTLY, CONTRADICTS, NOT_RUN, NO_CLAIM)
# Seeds in range a `matches` needs; fewer make at most `partly`.
MIN_SEEDS = 3
CSV_COLUMNS = ("figure", "metric", "paper", "fabricsim", "value", "expect_low", "expect_high", "verdict", "reason")


def scenarios_dir() -> Path:
    """The scenarios shipped in the package (`scenarios/` at the repository's top); a `Run`'s files are relative."""
    return Path(str(resources.files("fabricsim").joinpath("scenarios")))


def in_range(value: float, expect: Expect) -> bool:
    """Whether `value` lies in the closed range `expect`."""
    low, high = expect
    return (low is None or value >= low) and (high is None or value <= high)


@dataclass(frozen=True)
class Run:
    """One scenario file of an experiment, and what its quick version runs instead.

    The quick version runs `quick_scenario` when there is one: a file that
    includes `scenario` and changes what takes too long (a schedule of
    faults, of job starts), keeping its name. `quick` are dotted overrides of
    the quick version for generic knobs only (the sizes of a sweep, the
    duration); `overrides` apply to both versions, the quick ones on top, and
    the experiment's seed on top of all.
    """

    key: str
    label: str
    scenario: str
    quick_scenario: str | None = None
    quick: Mapping[str, Any] = field(default_factory=dict)
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def load(self, quick: bool = False, root: Path | None = None, seed: int | None = None) -> dict[str, Any]:
        """The scenario dict of the full or the quick version, its top-level `seed` set to `seed` when given."""
        path = self.quick_scenario if quick and self.quick_scenario else self.scenario
        changes = {**self.overrides, **(self.quick if quick else {}), **({} if seed is None else {"seed": seed})}
        return load_scenario((root or scenarios_dir()) / path, changes or None)


@dataclass(frozen=True)
class Row:
    """One line of an experiment's comparison: the metric, the paper's value and ours, and the verdict.

    `value` is the number behind `ours`, and `value_of` says which of its
    numbers that is when `ours` lists several (`the largest`): the spread
    over seeds is of that one. `expect` is the closed range of it that
    agrees with the paper's claim (None bounds are open; no range: the row
    is for information). An analysis leaves `verdict` empty for the
    framework to judge `value` against `expect`, or sets it (one of
    `VERDICTS`) for a claim that is not a range of one number, with a
    `reason`; the merge of the seeds sets the verdict of every row and adds
    its own reason.
    """

    metric: str
    paper: str
    ours: str
    value: float | None = None
    expect: Expect | None = None
    verdict: str = ""
    reason: str = ""
    value_of: str = ""

    def __post_init__(self) -> None:
        if self.verdict and self.verdict not in VERDICTS:
            raise ValueError(f"{self.metric}: verdict {self.verdict!r} is none of {', '.join(VERDICTS)}")
        if self.expect is not None:
            low, high = self.expect
            if low is not None and high is not None and low > high:
                raise ValueError(f"{self.metric}: expected range {low} to {high} is empty")


def not_run(metric: str, paper: str, reason: str) -> Row:
    """The row of a claim the reproduction does not run, and why."""
    return Row(metric, paper, "not run", verdict=NOT_RUN, reason=reason)


@dataclass(frozen=True)
class Phase:
    """A window of a time-series run [start_ms, end_ms), what the paper reports for it and the range that agrees.

    `expect` bounds the phase's mean throughput in Gb/s, or, when `relative`,
    its share of the first phase's mean (the row's value is then that share).
    """

    label: str
    start_ms: float
    end_ms: float
    paper: str
    expect: Expect | None = None
    relative: bool = False


Analysis = Callable[["Experiment", Mapping[str, Outcome], bool], list[Row]]


@dataclass(frozen=True)
class Experiment:
    """A figure: its runs, the seeds they run with, and how to compare them with the paper."""

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
    # The full version runs every run once per seed; the quick version the first seed only.
    seeds: tuple[int, ...] = (1, 2, 3)

    def __post_init__(self) -> None:
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"{self.key}: seeds must be distinct and at least one, got {self.seeds}")

    def phases_for(self, quick: bool) -> tuple[Phase, ...]:
        """The phases of the full or the quick version."""
        return self.quick_phases if quick and self.quick_phases is not None else self.phases

    def seeds_for(self, quick: bool) -> tuple[int, ...]:
        """The seeds of the full or the quick version."""
        return self.seeds[:1] if quick else self.seeds


# --- running ----------------------------------------------------------------------------------------------------


def run_experiment(
    exp: Experiment,
    out: Path | None,
    quick: bool = False,
    on_run: Callable[[Run, int, float], None] | None = None,
    root: Path | None = None,
) -> tuple[list[Row], float]:
    """Runs every scenario of `exp` once per seed, each written under `out/<exp.key>/` when `out` is given.

    Returns the rows of the seeds merged (`merge_seeds`), verdicts set, and
    the wall time; `on_run` is called after each run with its seed and wall
    time.
    """
    start = time.perf_counter()
    seeds = exp.seeds_for(quick)
    per_seed: list[tuple[int, list[Row]]] = []
    for seed in seeds:
        outcomes: dict[str, Outcome] = {}
        for run in exp.runs:
            began = time.perf_counter()
            scenario = run.load(quick, root, seed)
            outcome: Outcome
            if is_sweep(scenario):
                parameter, points = prepare(scenario)
                outcome = run_points(parameter, points)
            else:
                outcome = run_loaded(scenario)
            outcomes[run.key] = outcome
            if out is not None:
                name = run.key if seed == seeds[0] else f"{run.key}.seed{seed}"
                outcome.write(out / exp.key / name, overwrite=True, csv=True)
            if isinstance(outcome, SweepResults) and outcome.failure is not None:
                # Its finished runs are written; an analysis of part of a sweep would mislead.
                raise outcome.failure.error
            if on_run is not None:
                on_run(run, seed, time.perf_counter() - began)
        per_seed.append((seed, exp.analyse(exp, outcomes, quick)))
    rows = merge_seeds(per_seed)
    wall = time.perf_counter() - start
    if out is not None:
        write_summary(out / exp.key, exp, rows, quick, wall)
    return rows, wall


# --- merging the seeds and judging ------------------------------------------------------------------------------


def merge_seeds(per_seed: Sequence[tuple[int, Sequence[Row]]]) -> list[Row]:
    """The rows of each seed's analysis (seed, rows) as one row per metric, with the spread and the verdict.

    When the seeds' rows do not name the same metrics in the same order, each
    seed's rows are kept apart, the metric prefixed `seed N: `, each judged
    on its one seed.
    """
    if not per_seed:
        return []
    metrics = [[r.metric for r in rows] for _, rows in per_seed]
    if all(m == metrics[0] for m in metrics):
        return [_merge([(seed, rows[i]) for seed, rows in per_seed]) for i in range(len(metrics[0]))]
    return [_merge([(seed, replace(r, metric=f"seed {seed}: {r.metric}"))]) for seed, rows in per_seed for r in rows]


def _merge(rows: Sequence[tuple[int, Row]]) -> Row:
    """One metric's rows of several seeds (seed, row) as one row: the first seed's, with the spread and the verdict.

    Each seed is judged against its own row's range (an analysis may derive
    it from that seed's runs); the merged row shows the first seed's.
    """
    first = rows[0][1]
    ours = first.ours
    valued = [(seed, r.value) for seed, r in rows if r.value is not None]
    if len(rows) > 1 and valued:
        low, high = _number(min(v for _, v in valued)), _number(max(v for _, v in valued))
        which = f", {first.value_of}" if first.value_of else ""
        spread = low if low == high else f"{low}-{high}"
        ours += f" (seeds {_seed_list([s for s, _ in valued])}{which}: {spread})"
    verdict, why = _verdict([r for _, r in rows])
    given = list(dict.fromkeys(r.reason for _, r in rows if r.reason))
    if len(given) > 1:
        given = [f"seed {seed}: {r.reason}" for seed, r in rows if r.reason]
    return replace(first, ours=ours, verdict=verdict, reason="; ".join([*given, *([why] if why else [])]))


def _seed_verdict(row: Row) -> str:
    """The verdict of one seed's row: the analysis's, or its value against its range."""
    if row.verdict:
        return row.verdict
    if row.expect is None:
        return NO_CLAIM
    if row.value is None:
        return NOT_RUN
    return MATCHES if in_range(row.value, row.expect) else CONTRADICTS


def _verdict(rows: Sequence[Row]) -> tuple[str, str]:
    """The verdict of one metric over its seeds' rows, and the reason when it is not plain."""
    verdicts = [_seed_verdict(r) for r in rows]
    judged = [v for v in verdicts if v in (MATCHES, PARTLY, CONTRADICTS)]
    if not judged:
        return (NOT_RUN if NOT_RUN in verdicts else NO_CLAIM), ""
    if all(v == MATCHES for v in judged):
        if len(judged) >= MIN_SEEDS:
            return MATCHES, ""
        ran = f"{len(judged)} seed{'s' if len(judged) > 1 else ''}"
        return PARTLY, f"in range, but only {ran} ran (a match needs {MIN_SEEDS})"
    if all(v == CONTRADICTS for v in judged):
        return CONTRADICTS, ""
    partly = f", {judged.count(PARTLY)} partly" if PARTLY in judged else ""
    return PARTLY, f"{judged.count(MATCHES)} of {len(judged)} seeds in range{partly}"


def verdict_counts(rows: Sequence[Row]) -> dict[str, int]:
    """How many rows have each verdict, in the order of `VERDICTS`."""
    return {v: sum(r.verdict == v for r in rows) for v in VERDICTS}


def _number(value: float) -> str:
    """Four significant digits, without an exponent from 10000 up."""
    return f"{value:.0f}" if abs(value) >= 10000 else f"{value:.4g}"


def _seed_list(seeds: Sequence[int]) -> str:
    """`1-3` for consecutive seeds, else `1, 5, 9`."""
    if len(seeds) > 1 and list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def _range_text(expect: Expect | None) -> str:
    if expect is None:
        return ""
    low, high = expect
    if low is None:
        return "any" if high is None else f"<= {_number(high)}"
    return f">= {_number(low)}" if high is None else f"{_number(low)} to {_number(high)}"


def _counts_text(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {v}" for v, n in counts.items())


# --- the report -------------------------------------------------------------------------------------------------


def summary_markdown(exp: Experiment, rows: Sequence[Row], quick: bool, wall_s: float) -> str:
    """The comparison of one experiment as a markdown section."""
    lines = [
        f"## {exp.figure}: {exp.title}",
        "",
        f"Version: {'quick' if quick else 'full'}, seeds {_seed_list(exp.seeds_for(quick))}; wall time {wall_s:.1f} s."
        + (f" Note: {exp.note}." if exp.note else ""),
        "",
        "| metric | paper | fabricsim | agrees if | verdict | reason |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r.metric} | {r.paper} | {r.ours} | {_range_text(r.expect)} | {r.verdict} | {r.reason} |")
    lines += ["", f"Verdicts: {_counts_text(verdict_counts(rows))}."]
    return "\n".join(lines) + "\n"


def write_summary(directory: Path, exp: Experiment, rows: Sequence[Row], quick: bool, wall_s: float) -> None:
    """Writes `summary.csv` and `summary.md` of one experiment into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        numbers = ("" if v is None else v for v in (r.value, *(r.expect or (None, None))))
        writer.writerow([exp.figure, r.metric, r.paper, r.ours, *numbers, r.verdict, r.reason])
    (directory / "summary.csv").write_text(buffer.getvalue(), encoding="utf-8")
    (directory / "summary.md").write_text(summary_markdown(exp, rows, quick, wall_s), encoding="utf-8")


def reproduce(
    paper: str,
    out: Path | None,
    quick: bool = False,
    only: Sequence[str] = (),
    on_experiment: Callable[[Experiment, list[Row], float], None] | None = None,
    on_run: Callable[[Run, int, float], None] | None = None,
    jobs: int = 1,
) -> dict[str, tuple[list[Row], float]]:
    """Runs the experiments of a paper (or those named in `only`), `jobs` runs at once when written to `out`; rows
    and time per experiment key."""
    registered = paper_experiments(paper)
    experiments = [e for e in registered if not only or e.key in only]
    unknown = set(only) - {e.key for e in registered}
    if unknown:
        raise KeyError(f"unknown experiment(s) {', '.join(sorted(unknown))}")
    results: dict[str, tuple[list[Row], float]] = {}
    if jobs > 1 and out is not None:
        results = _reproduce_in_batch(experiments, out, quick, jobs, on_experiment, on_run)
    else:
        for exp in experiments:
            rows, wall = run_experiment(exp, out, quick, on_run)
            results[exp.key] = (rows, wall)
            if on_experiment is not None:
                on_experiment(exp, rows, wall)
    if out is not None:
        sections = [summary_markdown(exp, results[exp.key][0], quick, results[exp.key][1]) for exp in experiments]
        total = sum(w for _, w in results.values())
        counts = verdict_counts([r for rows, _ in results.values() for r in rows])
        head = (
            f"# fabricsim reproduce {paper}{' --quick' if quick else ''}\n\n"
            f"Total wall time {total:.1f} s. Verdicts: {_counts_text(counts)}.\n\n"
        )
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.md").write_text(head + "\n".join(sections), encoding="utf-8")
        (out / "summary.json").write_text(
            json.dumps(
                {
                    "registry": paper,
                    "quick": quick,
                    "wall_s": total,
                    "verdicts": counts,
                    "experiments": {
                        exp.key: {
                            "wall_s": results[exp.key][1],
                            "seeds": list(exp.seeds_for(quick)),
                            "verdicts": verdict_counts(results[exp.key][0]),
                            "rows": [asdict(r) for r in results[exp.key][0]],
                        }
                        for exp in experiments
                    },
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return results


# --- every run at once ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Planned:
    """One run of an experiment for one seed: where it is written, and a sweep's prepared points."""

    exp: Experiment
    seed: int
    run: Run
    directory: Path
    scenario: str
    sweep: tuple[list[str], list[SweepPoint]] | None


class _RunClock:
    """The batch's progress as `reproduce` needs it: each task's time, and a run's once all its points are done."""

    def __init__(
        self, owners: Sequence[int], planned: Sequence[_Planned], on_run: Callable[[Run, int, float], None]
    ) -> None:
        self._owners = owners
        self._planned = planned
        self._on_run = on_run
        self._began: dict[int, float] = {}
        self._left = [0] * len(planned)
        for owner in owners:
            self._left[owner] += 1
        self.took = [0.0] * len(planned)

    def started(self, index: int, label: str) -> None:
        self._began[index] = time.perf_counter()

    def advanced(self, index: int, fraction: float) -> None:
        pass

    def finished(self, index: int) -> None:
        owner = self._owners[index]
        self.took[owner] += time.perf_counter() - self._began.pop(index)
        self._left[owner] -= 1
        if self._left[owner] == 0:
            run = self._planned[owner]
            self._on_run(run.run, run.seed, self.took[owner])


def _reproduce_in_batch(
    experiments: Sequence[Experiment],
    out: Path,
    quick: bool,
    jobs: int,
    on_experiment: Callable[[Experiment, list[Row], float], None] | None,
    on_run: Callable[[Run, int, float], None] | None,
) -> dict[str, tuple[list[Row], float]]:
    """`reproduce` with every run in one batch, `jobs` at a time; then each figure analysed from its directories."""
    from ..batch import Finished, Task, run_batch

    planned = []
    for exp in experiments:
        seeds = exp.seeds_for(quick)
        for seed in seeds:
            for run in exp.runs:
                scenario = run.load(quick, None, seed)
                name = run.key if seed == seeds[0] else f"{run.key}.seed{seed}"
                sweep = prepare(scenario) if is_sweep(scenario) else None
                planned.append(_Planned(exp, seed, run, out / exp.key / name, to_json(scenario), sweep))
    tasks: list[Task] = []
    owners: list[int] = []
    for k, p in enumerate(planned):
        label = f"{p.run.scenario}, seed {p.seed}"
        if p.sweep is None:
            tasks.append(Task(p.scenario, p.directory, label, csv=True))
            owners.append(k)
            continue
        points = p.sweep[1]
        for point in points:
            tasks.append(Task(point.resolved, p.directory / point.directory, f"{label}, {point.named}", csv=True))
            owners.append(k)
    # A run that would not fit in a worker's share of the memory runs alone, after the others.
    available = _core.available_memory()
    share = None if available is None else available // jobs

    def fits(task: Task) -> bool:
        try:
            _core.resolve(task.scenario, share)
        except _core.ScenarioError:
            return False
        return True

    fitting = [fits(task) for task in tasks]
    shared = [i for i, fit in enumerate(fitting) if fit]
    alone = [i for i, fit in enumerate(fitting) if not fit]
    clock = _RunClock(owners, planned, on_run or (lambda run, seed, took: None))
    errors: list[Exception] = []

    def finished(index: int, how: Finished) -> None:
        if how.error is not None:
            errors.append(how.error)

    for batch, at_once in ((shared, jobs), (alone, 1)):
        if batch and not errors:
            run_batch([tasks[i] for i in batch], jobs=at_once, on_finished=finished, progress=_Indexed(batch, clock))
    if errors:
        raise errors[0]
    results: dict[str, tuple[list[Row], float]] = {}
    for exp in experiments:
        per_seed = []
        took = 0.0
        for seed in exp.seeds_for(quick):
            outcomes: dict[str, Outcome] = {}
            for k, p in enumerate(planned):
                if p.exp is not exp or p.seed != seed:
                    continue
                outcomes[p.run.key] = _read_outcome(p)
                took += clock.took[k]
            per_seed.append((seed, exp.analyse(exp, outcomes, quick)))
        rows = merge_seeds(per_seed)
        write_summary(out / exp.key, exp, rows, quick, took)
        results[exp.key] = (rows, took)
        if on_experiment is not None:
            on_experiment(exp, rows, took)
    return results


class _Indexed:
    """A batch's progress over some of the tasks, told to the clock by the tasks' places in the whole list."""

    def __init__(self, places: Sequence[int], clock: _RunClock) -> None:
        self._places = places
        self._clock = clock

    def started(self, index: int, label: str) -> None:
        self._clock.started(self._places[index], label)

    def advanced(self, index: int, fraction: float) -> None:
        pass

    def finished(self, index: int) -> None:
        self._clock.finished(self._places[index])


def _read_outcome(p: _Planned) -> Outcome:
    """A planned run's results as the batch wrote them; a sweep's index is written now."""
    if p.sweep is None:
        return Results.read(p.directory)
    parameters, points = p.sweep
    runs: list[Results | None] = [Results.read(p.directory / point.directory) for point in points]
    sweep = SweepResults(parameters, points, runs)
    sweep.seal(p.directory, csv=True)
    return sweep
