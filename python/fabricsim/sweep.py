"""Sweeps: one scenario run once per value of one of its fields.

A scenario with `sweep: {parameter: jobs.0.phases.0.collective.bytes, values:
[8B, 1KiB, 1MiB]}` stands for as many scenarios as values: each is the
scenario without `sweep`, with the dotted parameter set to one value (the
core ignores `sweep`; it is expanded here). Every expanded scenario is
resolved by the core before the first one runs, so a bad value is reported
before anything is simulated or written. Runs go one after the other, in the
order of the values, which keeps the output deterministic.

A sweep directory holds one run directory per value, named
`<index:03d>_<value>` (`000_8B`, `001_1KiB`, ...), `sweep.parquet` (the
collectives of every run, with `sweep_index`, `sweep_parameter` and
`sweep_value` columns first), `sweep.json` (the parameter, the values and
their directories) and, on request, `busbw.png`. Like a run directory it is
marked `INCOMPLETE` until every file is in place, and stays marked when the
sweep was stopped early: by Ctrl-C, or by a point whose run failed, which
`sweep.json` then names with its error (`SweepResults.failure`); the runs
before it are kept.

`import fabricsim` imports this module, so polars and the modules that use it
are imported only when a sweep runs (see `fabricsim/__init__.py`).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _core
from ._core import ScenarioError
from .scenario import SWEEP_KEY, Overrides, is_sweep, load_scenario, path_safe, set_dotted, to_json

if TYPE_CHECKING:
    import polars as pl

    from .results import Results

__all__ = ["SweepFailure", "SweepPoint", "SweepResults", "expand", "prepare", "run_points", "sweep", "value_label"]

SWEEP_COLUMNS = ("sweep_index", "sweep_parameter", "sweep_value")
# Run directories of a sweep: three or more digits, an underscore, the value.
_RUN_DIR = re.compile(r"^\d{3,}_")


@dataclass(frozen=True)
class SweepPoint:
    """One value of a sweep and the scenario it expands to."""

    index: int
    value: Any
    scenario: dict[str, Any]

    @property
    def label(self) -> str:
        """The value as it is written in a scenario: `8B`, `16`, `true`."""
        return value_label(self.value)

    @property
    def directory(self) -> str:
        """Name of this run's directory inside the sweep directory, e.g. `003_4KiB`."""
        return f"{self.index:03d}_{path_safe(self.label)}"


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


def expand(scenario: Mapping[str, Any]) -> tuple[str, list[SweepPoint]]:
    """The sweep's parameter and its points: the scenario per value, `sweep` dropped. Does not call the core."""
    spec = scenario.get(SWEEP_KEY)
    if not isinstance(spec, Mapping):
        raise ScenarioError(f"sweep: expected a mapping with `parameter` and `values`, found {spec!r}")
    for key in spec:
        if key not in ("parameter", "values"):
            raise ScenarioError(f"sweep.{key}: unknown field `{key}`, expected `parameter` or `values`")
    parameter = spec.get("parameter")
    if not isinstance(parameter, str) or not parameter.strip():
        raise ScenarioError(
            f"sweep.parameter: expected a dotted path such as jobs.0.phases.0.collective.bytes, found {parameter!r}"
        )
    if parameter.split(".")[0] == SWEEP_KEY:
        raise ScenarioError(f"sweep.parameter: {parameter}: a sweep cannot vary its own definition")
    values = spec.get("values")
    if not isinstance(values, list) or not values:
        raise ScenarioError(f"sweep.values: expected a non-empty list of values, found {values!r}")

    base = {k: v for k, v in scenario.items() if k != SWEEP_KEY}
    points = []
    for index, value in enumerate(values):
        expanded = copy.deepcopy(base)
        try:
            set_dotted(expanded, parameter, copy.deepcopy(value))
        except ScenarioError as exc:
            raise ScenarioError(f"sweep.parameter: {exc}") from None
        points.append(SweepPoint(index, value, expanded))
    return parameter, points


def prepare(scenario: Mapping[str, Any]) -> tuple[str, list[SweepPoint]]:
    """`expand`, then has the core resolve every point; the first bad one raises `ScenarioError`."""
    parameter, points = expand(scenario)
    for point in points:
        _core.resolve(to_json(point.scenario))
    return parameter, points


class SweepResults:
    """The runs of a sweep, in the order of its values; possibly fewer than the values when it was stopped.

    `failure` names the point whose run failed, when one did: the sweep stopped there.
    """

    def __init__(
        self,
        parameter: str,
        points: Sequence[SweepPoint],
        runs: Sequence[Results],
        failure: SweepFailure | None = None,
    ) -> None:
        self.parameter = parameter
        self.points: list[SweepPoint] = list(points)
        self.runs: list[Results] = list(runs)
        self.failure = failure
        self._collectives: pl.DataFrame | None = None

    @property
    def values(self) -> list[Any]:
        """The swept values, one per point."""
        return [p.value for p in self.points]

    @property
    def complete(self) -> bool:
        """Every value ran, and every run to its end."""
        return len(self.runs) == len(self.points) and all(r.complete for r in self.runs)

    @property
    def collectives(self) -> pl.DataFrame:
        """Every run's collectives, with `sweep_index`, `sweep_parameter` and `sweep_value` columns first."""
        if self._collectives is None:
            self._collectives = _combined(self.parameter, self.points, [r.collectives for r in self.runs])
        return self._collectives

    def table(self) -> str:
        """The nccl-tests style table of the sweep, one block per (job, phase)."""
        from .results import nccl_tests_table

        return nccl_tests_table(self.collectives, self.parameter)

    def __repr__(self) -> str:
        state = "complete" if self.complete else f"incomplete ({len(self.runs)} of {len(self.points)} runs)"
        return f"<SweepResults over {self.parameter} {state}>"

    def write(self, directory: str | Path, overwrite: bool = False, csv: bool = False, plot: bool = False) -> Path:
        """Writes the sweep directory (see the module docs); returns its path.

        An existing directory is an error unless `overwrite`; then the sweep's
        files are replaced, and run directories of an earlier sweep that this
        one does not have are removed. Other files are left alone.
        """
        from .results import INCOMPLETE_MARKER, check_output_dir, write_atomic, write_failures, write_json

        path = check_output_dir(directory, overwrite)
        with write_failures(path):
            path.mkdir(parents=True, exist_ok=True)
            marker = path / INCOMPLETE_MARKER
            write_atomic(marker, lambda f: f.write(b"this sweep directory is incomplete\n"))

            written = {INCOMPLETE_MARKER}
            for point, results in zip(self.points, self.runs, strict=False):
                results.write(path / point.directory, overwrite=True, csv=csv)
                written.add(point.directory)
            frame = self.collectives
            written.add(write_atomic(path / "sweep.parquet", lambda f: frame.write_parquet(f)))
            if csv:
                written.add(write_atomic(path / "sweep.csv", lambda f: frame.write_csv(f)))
            if plot:
                from .plots import plot_busbw

                written.add(plot_busbw(frame, path / "busbw.png", title=self._title(), parameter=self.parameter))
            written.add(write_json(path / "sweep.json", self._description()))
            self._remove_stale(path, written)
            if self.complete:
                marker.unlink()
        return path

    def _title(self) -> str:
        name = self.runs[0].scenario.get("name", "") if self.runs else ""
        return f"{name}: bus bandwidth against size".strip(": ")

    def _description(self) -> dict[str, Any]:
        done = len(self.runs)
        description = {
            "complete": self.complete,
            "parameter": self.parameter,
            "values": self.values,
            "runs": [
                {"index": p.index, "value": p.label, "directory": p.directory, "ran": p.index < done}
                for p in self.points
            ],
        }
        if self.failure is not None:
            description["failure"] = self.failure.describe()
        return description

    @staticmethod
    def _remove_stale(path: Path, written: set[str]) -> None:
        for stale in ("sweep.csv", "busbw.png"):
            if stale not in written:
                (path / stale).unlink(missing_ok=True)
        for entry in path.iterdir():
            # Only directories that look like an earlier sweep's runs.
            is_run = entry.is_dir() and _RUN_DIR.match(entry.name) and (entry / "scenario.json").is_file()
            if is_run and entry.name not in written:
                shutil.rmtree(entry)


def sweep(
    scenario: str | Path | Mapping[str, Any],
    overrides: Overrides = None,
    progress: bool = False,
) -> SweepResults:
    """Loads a scenario with a `sweep` (a YAML path or a dict) and runs it once per value.

    Every value is checked by the core before the first run. With
    `progress`, a bar on stderr follows simulated time of runs longer than a
    second. A run that fails stops the sweep without losing the runs before
    it: the results say so in `failure`.
    """
    loaded = load_scenario(scenario, overrides)
    if not is_sweep(loaded):
        raise ScenarioError("sweep: the scenario has no `sweep` section; use fabricsim.run to run it once")
    parameter, points = prepare(loaded)
    return run_points(parameter, points, progress=progress)


def run_points(
    parameter: str,
    points: Sequence[SweepPoint],
    progress: bool = False,
    on_run: Callable[[SweepPoint, Results], None] | None = None,
) -> SweepResults:
    """Runs prepared points in order and returns what ran.

    Ctrl-C stops the sweep: a run it lands in is kept, marked incomplete (the
    core stops and returns what it measured), and no further point runs. A
    run that fails (a `SimulationError`, or any other error) stops it too:
    the runs before it are kept and the failure is recorded.
    """
    runs: list[Results] = []
    failure = None
    try:
        for point in points:
            try:
                results = _run_point(point, f"{point.index + 1}/{len(points)} {parameter}={point.label}", progress)
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
    return SweepResults(parameter, points, runs, failure)


def _run_point(point: SweepPoint, description: str, progress: bool) -> Results:
    from .progress import ProgressBar
    from .runner import run_loaded

    if not progress:
        return run_loaded(point.scenario)
    with ProgressBar(description=description) as bar:
        return run_loaded(point.scenario, bar)


def _combined(parameter: str, points: Sequence[SweepPoint], frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    import polars as pl

    tagged = [
        frame.with_columns(
            pl.lit(point.index, pl.UInt64).alias("sweep_index"),
            pl.lit(parameter, pl.String).alias("sweep_parameter"),
            pl.lit(point.label, pl.String).alias("sweep_value"),
        ).select(*SWEEP_COLUMNS, *frame.columns)
        for point, frame in zip(points, frames, strict=False)
    ]
    empty = pl.DataFrame(schema={"sweep_index": pl.UInt64, "sweep_parameter": pl.String, "sweep_value": pl.String})
    return pl.concat([empty, *tagged], how="diagonal_relaxed")
