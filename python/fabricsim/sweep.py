"""Sweeps: one scenario run at every point of some of its fields, and over seeds.

A scenario's `sweep` section stands for as many scenarios as it has points;
each is the scenario without `sweep`, its dotted parameters set to the
point's values (the core ignores `sweep`; it is expanded here):

- `{parameter: P, values: [...]}`: one field, one point per value;
- `{grid: {P1: [...], P2: [...]}}`: every combination, the first field
  varying slowest;
- `{zip: {P1: [...], P2: [...]}}`: lists of one length, taken together
  (with `grid`, the zipped tuples are the grid's last axis);
- `seeds: N` (the scenario's seed and the N-1 after it) or a list of seeds:
  every point once per seed, the innermost axis.

Every point is resolved by the core before the first one runs, so a bad
value is reported before anything is simulated or written.

A sweep directory holds one run directory per point, named by a hash of
the fabricsim version and the point's resolved scenario (which holds its
seed), `sweep.parquet` (the collectives of every run, with `sweep_index`,
`sweep_parameter`, `sweep_value`, `sweep_seed` and one column per parameter
first), `sweep.json` (the parameters, the seeds, each point's values,
directory and state) and, on request, `busbw.png`. The names make a sweep
resumable: run again into the same directory, it skips every point whose
run directory is there whole, for the same version and scenario, and runs
the rest; a sweep that grew new values reuses the old ones' runs. Runs go
to a local process pool or a Ray cluster (`fabricsim.batch`), and each is
written as it finishes, so an interrupted sweep loses no finished run.
Like a run directory, a sweep directory is marked `INCOMPLETE` until every
run is there whole; `sweep.json` names a run that failed with its error.

`fabricsim.sweep()` without an output directory runs the points in order in
this process and keeps the results in memory (`SweepResults.runs`), as the
paper reproductions use it.

`import fabricsim` imports this module, so polars and the modules that use it
are imported only when a sweep runs (see `fabricsim/__init__.py`).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import shutil
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _core
from ._core import ScenarioError
from .scenario import INCLUDE_KEY, SWEEP_KEY, Overrides, is_sweep, load_scenario, set_dotted, to_json, top_key

if TYPE_CHECKING:
    import polars as pl

    from .batch import Finished
    from .results import Results

__all__ = [
    "SweepFailure",
    "SweepPoint",
    "SweepResults",
    "expand",
    "prepare",
    "run_into",
    "run_points",
    "sweep",
    "value_label",
]

SWEEP_COLUMNS = ("sweep_index", "sweep_parameter", "sweep_value", "sweep_seed")
SWEEP_FORMS = ("parameter", "values", "grid", "zip", "seeds")
# Every point is a whole scenario checked by the core before the first runs; past this, a typo in a grid.
MAX_POINTS = 10_000
# Characters of the hex digest naming a run directory: 64 bits, no collision among any sweep's points.
_HASH_CHARS = 16


@dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep: its values (by parameter), its seed when the sweep has seeds, the scenario it is.

    `resolved` is the core's resolved scenario, which `prepare` fills in; it
    names the point's run directory.
    """

    index: int
    values: dict[str, Any]
    scenario: dict[str, Any]
    seed: int | None = None
    resolved: str = field(default="", repr=False, compare=False)

    @property
    def value(self) -> Any:
        """The value of a one-parameter sweep's point; the values by parameter of a point of several."""
        return next(iter(self.values.values())) if len(self.values) == 1 else dict(self.values)

    @property
    def label(self) -> str:
        """The point as text: `8B` for one parameter, `a.b=1 c=x` for several, then ` seed=3` with seeds."""
        if len(self.values) != 1:
            return self.named
        text = value_label(self.value)
        return text if self.seed is None else f"{text} seed={self.seed}"

    @property
    def named(self) -> str:
        """The point with its parameters named: `a.b=8B`, `a.b=8B c=x seed=3`."""
        text = " ".join(f"{name}={value_label(value)}" for name, value in self.values.items())
        return text if self.seed is None else f"{text} seed={self.seed}".strip()

    @property
    def directory(self) -> str:
        """Name of the point's run directory: a hash of the fabricsim version and its resolved scenario."""
        if not self.resolved:
            raise ValueError("a sweep point is named only once the core resolved it (sweep.prepare)")
        digest = hashlib.sha256(f"{_core.version()}\n{self.resolved}".encode()).hexdigest()
        return digest[:_HASH_CHARS]


@dataclass(frozen=True)
class SweepFailure:
    """The point whose run failed, which stopped the sweep, and its error."""

    point: SweepPoint
    error: Exception

    def describe(self) -> dict[str, Any]:
        """The failure as `sweep.json` holds it."""
        return {
            "index": self.point.index,
            "value": self.point.label,
            "error": f"{type(self.error).__name__}: {self.error}",
        }


def value_label(value: Any) -> str:
    """A sweep value as text: strings as they are, other scalars as YAML writes them, lists and mappings as JSON."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def expand(scenario: Mapping[str, Any]) -> tuple[list[str], list[SweepPoint]]:
    """The sweep's parameters and its points: the scenario per point, `sweep` dropped. Does not call the core."""
    spec = scenario.get(SWEEP_KEY)
    if not isinstance(spec, Mapping):
        raise ScenarioError(f"sweep: expected a mapping with `parameter` and `values`, `grid` or `zip`, found {spec!r}")
    for key in spec:
        if key not in SWEEP_FORMS:
            raise ScenarioError(f"sweep.{key}: unknown field `{key}`, expected one of {', '.join(SWEEP_FORMS)}")
    axes = _axes(spec)
    seeds = _seeds(spec, scenario)
    fields = {name: field for axis in axes for name, field in zip(axis[0], axis[1], strict=True)}
    parameters = [name for axis in axes for name in axis[0]]
    if len(fields) != len(parameters):
        counts = Counter(parameters)
        twice = next(name for name in parameters if counts[name] > 1)
        raise ScenarioError(f"sweep: {twice}: a parameter is swept twice")
    for name, where in fields.items():
        if top_key(name) == SWEEP_KEY:
            raise ScenarioError(f"{where}: {name}: a sweep cannot vary its own definition")
        if top_key(name) == INCLUDE_KEY:
            raise ScenarioError(f"{where}: {name}: an include is read from the scenario file only, before the sweep")
        if name == "seed" and seeds != [None]:
            raise ScenarioError(f"{where}: the sweep also has `seeds`; name the seeds in one place")

    count = math.prod(len(tuples) for _, _, tuples in axes) * len(seeds)
    if count > MAX_POINTS:
        raise ScenarioError(f"sweep: {count:,} points; a sweep has at most {MAX_POINTS:,} (split it, or sample it)")

    base = {k: v for k, v in scenario.items() if k != SWEEP_KEY}
    points = []
    combinations = itertools.product(*(tuples for _, _, tuples in axes)) if axes else [()]
    for combination in combinations:
        values = {
            name: value
            for axis, chosen in zip(axes, combination, strict=True)
            for name, value in zip(axis[0], chosen, strict=True)
        }
        for seed in seeds:
            expanded = copy.deepcopy(base)
            for name, value in values.items():
                try:
                    set_dotted(expanded, name, copy.deepcopy(value))
                except ScenarioError as exc:
                    raise ScenarioError(f"{fields[name]}: {exc}") from None
            if seed is not None:
                expanded["seed"] = seed
            points.append(SweepPoint(len(points), values, expanded, seed))
    return parameters, points


def _axes(spec: Mapping[str, Any]) -> list[tuple[list[str], list[str], list[tuple[Any, ...]]]]:
    """The sweep's axes in the order they vary: each its parameters, where each is named, and its tuples of values."""
    one = "parameter" in spec or "values" in spec
    if one and ("grid" in spec or "zip" in spec):
        raise ScenarioError("sweep: `parameter` and `values` sweep one field; for several use `grid` or `zip` alone")
    if one:
        parameter = spec.get("parameter")
        if not isinstance(parameter, str) or not parameter.strip():
            raise ScenarioError(
                f"sweep.parameter: expected a dotted path such as jobs.0.phases.0.collective.bytes, found {parameter!r}"
            )
        values = spec.get("values")
        if not isinstance(values, list) or not values:
            raise ScenarioError(f"sweep.values: expected a non-empty list of values, found {values!r}")
        return [([parameter], ["sweep.parameter"], [(v,) for v in values])]
    grid = _lists(spec, "grid")
    axes = [([name], [f"sweep.grid.{name}"], [(v,) for v in values]) for name, values in grid.items()]
    zipped = _lists(spec, "zip")
    if zipped:
        lengths = {name: len(values) for name, values in zipped.items()}
        if len(set(lengths.values())) > 1:
            listed = ", ".join(f"{name}: {n}" for name, n in lengths.items())
            raise ScenarioError(f"sweep.zip: its lists differ in length ({listed}); zip pairs them value by value")
        names = list(zipped)
        axes.append((names, [f"sweep.zip.{n}" for n in names], list(zip(*zipped.values(), strict=True))))
    if not axes and "seeds" not in spec:
        raise ScenarioError("sweep: expected `parameter` and `values`, `grid`, `zip` or `seeds`")
    return axes


def _lists(spec: Mapping[str, Any], form: str) -> dict[str, list[Any]]:
    lists = spec.get(form)
    if lists is None:
        return {}
    if not isinstance(lists, Mapping) or not lists:
        raise ScenarioError(
            f"sweep.{form}: expected a mapping of dotted parameters to lists of values, found {lists!r}"
        )
    for name, values in lists.items():
        if not isinstance(name, str) or not name.strip():
            raise ScenarioError(f"sweep.{form}: {name!r}: a parameter is a dotted path such as topology.radix")
        if not isinstance(values, list) or not values:
            raise ScenarioError(f"sweep.{form}.{name}: expected a non-empty list of values, found {values!r}")
    return dict(lists)


def _seeds(spec: Mapping[str, Any], scenario: Mapping[str, Any]) -> list[int | None]:
    """The seeds every point runs with; `[None]` when the sweep has none (each point keeps the scenario's)."""
    seeds = spec.get("seeds")
    if seeds is None:
        return [None]
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if not 1 <= seeds <= MAX_POINTS:
            raise ScenarioError(f"sweep.seeds: {seeds}: a count of seeds from 1 to {MAX_POINTS:,}")
        first = scenario.get("seed", 1)
        if not isinstance(first, int) or isinstance(first, bool):
            raise ScenarioError(f"seed: expected an integer, found {first!r}")
        return list(range(first, first + seeds))
    if isinstance(seeds, list) and seeds and all(isinstance(v, int) and not isinstance(v, bool) for v in seeds):
        if len(set(seeds)) != len(seeds):
            raise ScenarioError(f"sweep.seeds: {seeds}: a seed is listed twice")
        return list(seeds)
    raise ScenarioError(f"sweep.seeds: expected a count of seeds or a non-empty list of integers, found {seeds!r}")


def prepare(scenario: Mapping[str, Any]) -> tuple[list[str], list[SweepPoint]]:
    """`expand`, then has the core resolve every point; the first bad one raises `ScenarioError`."""
    parameters, points = expand(scenario)
    resolved: list[SweepPoint] = []
    first_of: dict[str, SweepPoint] = {}
    for point in points:
        where = f"sweep point {point.index + 1}/{len(points)} ({point.named})"
        try:
            text = _core.resolve(to_json(point.scenario))
        except ScenarioError as e:
            raise ScenarioError(f"{where}: {e}") from None
        # Its run directory is named by the resolved scenario: a point that
        # resolves as another did would run it again into the same directory.
        same = first_of.setdefault(text, point)
        if same is not point:
            raise ScenarioError(
                f"{where}: the same scenario as point {same.index + 1} ({same.named}); sweep each value once"
            )
        resolved.append(replace(point, resolved=text))
    return parameters, resolved


class SweepResults:
    """The runs of a sweep, one per point (None for a point that did not run), and the failure that stopped it.

    The runs are in memory (`run_points`) or read back from their run
    directories, table by table as they are asked for (`run_into`).
    """

    def __init__(
        self,
        parameters: Sequence[str],
        points: Sequence[SweepPoint],
        runs: Sequence[Results | None],
        failure: SweepFailure | None = None,
    ) -> None:
        self.parameters = list(parameters)
        self.points: list[SweepPoint] = list(points)
        self.runs: list[Results | None] = list(runs) + [None] * (len(points) - len(runs))
        self.failure = failure
        self._collectives: pl.DataFrame | None = None

    @property
    def parameter(self) -> str:
        """The swept parameters, as one text (`a.b, c`)."""
        return ", ".join(self.parameters) or "seed"

    @property
    def values(self) -> list[Any]:
        """Each point's value (one parameter) or values by parameter (several)."""
        return [p.value for p in self.points]

    @property
    def finished(self) -> list[tuple[SweepPoint, Results]]:
        """The points that ran, with their results, in the sweep's order."""
        return [(p, r) for p, r in zip(self.points, self.runs, strict=True) if r is not None]

    @property
    def complete(self) -> bool:
        """Every point ran, and every run to its end."""
        return all(r is not None and r.complete for r in self.runs)

    @property
    def collectives(self) -> pl.DataFrame:
        """Every run's collectives, with the sweep's columns first (`SWEEP_COLUMNS`, then one per parameter)."""
        if self._collectives is None:
            self._collectives = _combined(self.parameters, self.finished)
        return self._collectives

    def table(self) -> str:
        """The nccl-tests style table of the sweep, one block per (job, phase)."""
        from .results import nccl_tests_table

        # A point of several parameters, or of a seed, is named whole: `a=1 b=x seed=2`.
        one = len(self.parameters) == 1 and all(p.seed is None for p in self.points)
        return nccl_tests_table(self.collectives, self.parameter if one else "point")

    def __repr__(self) -> str:
        ran = len(self.finished)
        state = "complete" if self.complete else f"incomplete ({ran} of {len(self.points)} runs)"
        return f"<SweepResults over {self.parameter} {state}>"

    def write(self, directory: str | Path, overwrite: bool = False, csv: bool = False, plot: bool = False) -> Path:
        """Writes the sweep directory (see the module docs): every run's directory, then the index; returns its path.

        An existing directory is an error unless `overwrite`; then the
        sweep's files are replaced, and run directories that no point of
        this sweep has are removed. Other files are left alone.
        """
        from .results import check_output_dir, write_failures

        path = check_output_dir(directory, overwrite)
        with write_failures(path):
            path.mkdir(parents=True, exist_ok=True)
            _mark_incomplete(path)
            for point, results in self.finished:
                results.write(path / point.directory, overwrite=True, csv=csv)
            self.seal(path, csv=csv, plot=plot)
        return path

    def seal(self, path: Path, csv: bool = False, plot: bool = False) -> None:
        """Indexes a sweep directory whose runs are written in place, and removes run directories no point has."""
        self.write_index(path, csv=csv, plot=plot)
        _remove_stale(path, {p.directory for p in self.points})

    def write_index(self, path: Path, csv: bool = False, plot: bool = False) -> None:
        """Writes the files that describe a sweep directory whose runs are in place, then unmarks it if whole."""
        from .results import INCOMPLETE_MARKER, write_atomic, write_json

        frame = self.collectives
        write_atomic(path / "sweep.parquet", lambda f: frame.write_parquet(f))
        if csv:
            write_atomic(path / "sweep.csv", lambda f: frame.write_csv(f))
        else:
            (path / "sweep.csv").unlink(missing_ok=True)
        if plot:
            from .plots import plot_busbw

            plot_busbw(frame, path / "busbw.png", title=self._title(), parameter=self.parameter)
        else:
            (path / "busbw.png").unlink(missing_ok=True)
        write_json(path / "sweep.json", self._description())
        if self.complete:
            (path / INCOMPLETE_MARKER).unlink(missing_ok=True)
        else:
            _mark_incomplete(path)

    def _title(self) -> str:
        name = next((r.scenario.get("name", "") for _, r in self.finished), "")
        return f"{name}: bus bandwidth against size".strip(": ")

    def _description(self) -> dict[str, Any]:
        failed = self.failure.point.index if self.failure is not None else None
        description: dict[str, Any] = {
            "complete": self.complete,
            "parameters": self.parameters,
            "seeds": sorted({p.seed for p in self.points if p.seed is not None}),
            "runs": [
                {
                    "index": p.index,
                    "values": {name: value_label(value) for name, value in p.values.items()},
                    "seed": p.seed if p.seed is not None else _seed_of(p),
                    "directory": p.directory,
                    "state": "failed" if p.index == failed else _state(r),
                }
                for p, r in zip(self.points, self.runs, strict=True)
            ],
        }
        if self.failure is not None:
            description["failure"] = self.failure.describe()
        return description


def _seed_of(point: SweepPoint) -> Any:
    return json.loads(point.resolved).get("seed") if point.resolved else point.scenario.get("seed")


def _state(results: Results | None) -> str:
    if results is None:
        return "not run"
    return "complete" if results.complete else "incomplete"


def _mark_incomplete(path: Path) -> None:
    from .results import INCOMPLETE_MARKER, write_atomic

    write_atomic(path / INCOMPLETE_MARKER, lambda f: f.write(b"this sweep directory is incomplete\n"))


def _remove_stale(path: Path, kept: set[str]) -> None:
    """Removes run directories of earlier sweeps here that no point of this one has."""
    for entry in path.iterdir():
        is_run = entry.is_dir() and len(entry.name) == _HASH_CHARS and (entry / "scenario.json").is_file()
        if is_run and entry.name not in kept:
            shutil.rmtree(entry)


def sweep(
    scenario: str | Path | Mapping[str, Any],
    overrides: Overrides = None,
    progress: bool = False,
    output: str | Path | None = None,
    jobs: int = 1,
    ray: str | None = None,
) -> SweepResults:
    """Loads a scenario with a `sweep` (a YAML path or a dict) and runs every point.

    Every point is checked by the core before the first run. Without
    `output`, the points run in order in this process and their results stay
    in memory. With `output`, they run `jobs` at a time (or on the Ray
    cluster at `ray`) into that sweep directory, which is resumed if it
    holds an earlier run of the sweep (see the module docs). With
    `progress`, bars on stderr follow the runs. A run that fails stops the
    sweep without losing the runs before it: the results say so in
    `failure`.
    """
    loaded = load_scenario(scenario, overrides)
    if not is_sweep(loaded):
        raise ScenarioError("sweep: the scenario has no `sweep` section; use fabricsim.run to run it once")
    parameters, points = prepare(loaded)
    if output is None:
        return run_points(parameters, points, progress=progress)
    return run_into(parameters, points, Path(output), jobs=jobs, ray=ray, progress=progress)


def run_points(
    parameters: Sequence[str],
    points: Sequence[SweepPoint],
    progress: bool = False,
    on_run: Callable[[SweepPoint, Results], None] | None = None,
) -> SweepResults:
    """Runs prepared points in order in this process, keeping their results in memory; returns what ran.

    Ctrl-C stops the sweep: a run it lands in is kept, marked incomplete (the
    core stops and returns what it measured), and no further point runs. A
    run that fails (a `SimulationError`, or any other error) stops it too:
    the runs before it are kept and the failure is recorded.
    """
    runs: list[Results | None] = []
    failure = None
    try:
        for point in points:
            try:
                results = _run_point(point, f"{point.index + 1}/{len(points)} {point.named}", progress)
            except Exception as exc:
                failure = SweepFailure(point, exc)
                break
            runs.append(results)
            if on_run is not None:
                on_run(point, results)
            if not results.complete:
                break
    except KeyboardInterrupt:
        # Between two runs: the ones done are kept, the sweep is incomplete.
        pass
    return SweepResults(parameters, points, runs, failure)


def run_into(
    parameters: Sequence[str],
    points: Sequence[SweepPoint],
    output: Path,
    jobs: int = 1,
    ray: str | None = None,
    overwrite: bool = False,
    csv: bool = False,
    plot: bool = False,
    progress: bool = False,
    on_run: Callable[[SweepPoint, Results, bool], None] | None = None,
) -> SweepResults:
    """Runs prepared points into the sweep directory `output`, `jobs` at a time or on Ray; returns the sweep.

    A directory holding an earlier run of the sweep is resumed: points whose
    run directory is whole are not run again (`on_run` tells them with
    `reused` True). `overwrite` runs every point afresh. Each run is written
    as it finishes; the index (`sweep.json`, `sweep.parquet`) when the
    sweep ends, stopped or not; `csv` and `plot` as `SweepResults.write`. A run that fails stops the sweep (no further
    point starts) and is named in `failure`; a stop signal (`batch.Stopped`)
    is raised again once the index is written.
    """
    from .batch import Stopped, Task, check_backend, run_batch
    from .progress import BatchProgress
    from .results import Results, check_output_dir, write_failures

    check_backend(jobs, ray)
    resumed = _is_sweep_directory(output) and not overwrite
    path = output if resumed else check_output_dir(output, overwrite)
    runs: list[Results | None] = [None] * len(points)
    failure: SweepFailure | None = None
    with write_failures(path):
        path.mkdir(parents=True, exist_ok=True)
        _mark_incomplete(path)
        todo = []
        for point in points:
            directory = path / point.directory
            if resumed and _whole(directory, point):
                runs[point.index] = Results.read(directory)
                if on_run is not None:
                    on_run(point, runs[point.index], True)
            else:
                todo.append(point)
        # The index first, so that a driver killed now leaves a directory that resumes.
        SweepResults(parameters, points, runs).write_index(path)
        tasks = [Task(p.resolved, path / p.directory, f"{p.index + 1}/{len(points)} {p.named}", csv) for p in todo]

        def finished(k: int, how: Finished) -> None:
            nonlocal failure
            point = todo[k]
            if how.error is not None:
                failure = failure or SweepFailure(point, how.error)
                return
            runs[point.index] = Results.read(path / point.directory)
            if on_run is not None:
                on_run(point, runs[point.index], False)

        try:
            with BatchProgress(len(tasks), description="sweep", force=False) as bar:
                run_batch(tasks, jobs=jobs, ray=ray, on_finished=finished, progress=bar if progress else None)
        except Stopped:
            SweepResults(parameters, points, runs, failure).write_index(path, csv=csv)
            raise
        results = SweepResults(parameters, points, runs, failure)
        results.write_index(path, csv=csv, plot=plot)
        if overwrite:
            _remove_stale(path, {p.directory for p in points})
    return results


def _is_sweep_directory(path: Path) -> bool:
    """Whether `path` holds a sweep's results: its index is written before the first run starts."""
    return (path / "sweep.json").is_file()


def _whole(directory: Path, point: SweepPoint) -> bool:
    """Whether `directory` holds the point's run whole: not marked, complete, for this version and scenario."""
    from .results import INCOMPLETE_MARKER
    from .scenario import VERSION_KEY

    try:
        if (directory / INCOMPLETE_MARKER).exists():
            return False
        summary = json.loads((directory / "summary.json").read_text(encoding="utf-8"))
        written = json.loads((directory / "scenario.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    expected = {VERSION_KEY: _core.version(), **json.loads(point.resolved)}
    return summary.get("complete") is True and written == expected


def _run_point(point: SweepPoint, description: str, progress: bool) -> Results:
    from .progress import ProgressBar
    from .runner import run_loaded

    if not progress:
        return run_loaded(point.scenario)
    with ProgressBar(description=description) as bar:
        return run_loaded(point.scenario, bar)


def _combined(parameters: Sequence[str], finished: Sequence[tuple[SweepPoint, Results]]) -> pl.DataFrame:
    import polars as pl

    joined = ", ".join(parameters) or "seed"
    tagged = []
    for point, results in finished:
        frame = results.collectives
        if frame.is_empty():
            continue
        columns = [
            pl.lit(point.index, pl.UInt64).alias("sweep_index"),
            pl.lit(joined, pl.String).alias("sweep_parameter"),
            pl.lit(point.label, pl.String).alias("sweep_value"),
            pl.lit(_seed_of(point), pl.Int64).alias("sweep_seed"),
        ]
        columns += [pl.lit(value_label(point.values[name]), pl.String).alias(name) for name in parameters]
        tagged.append(frame.with_columns(columns).select(*SWEEP_COLUMNS, *parameters, *frame.columns))
    schema = {"sweep_index": pl.UInt64, "sweep_parameter": pl.String, "sweep_value": pl.String, "sweep_seed": pl.Int64}
    empty = pl.DataFrame(schema=schema | dict.fromkeys(parameters, pl.String))
    return pl.concat([empty, *tagged], how="diagonal_relaxed")
