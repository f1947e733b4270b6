"""One simulation run: the scenario crosses into the core once, results come back as columns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import _core
from ._core import ScenarioError
from .progress import ProgressBar
from .results import Results
from .scenario import Overrides, is_sweep, load_scenario, to_json

__all__ = ["run", "run_loaded"]


def run(scenario: str | Path | Mapping[str, Any], overrides: Overrides = None, progress: bool = False) -> Results:
    """Loads a scenario (a YAML path or a dict), runs it and returns its results.

    With `progress`, a bar on stderr follows simulated time for runs longer than a second.
    A scenario with a `sweep` is refused: it stands for several runs, see `fabricsim.sweep`.
    """
    loaded = load_scenario(scenario, overrides)
    if is_sweep(loaded):
        raise ScenarioError("sweep: this scenario is a sweep of several runs; run it with fabricsim.sweep")
    return run_loaded(loaded, progress)


def run_loaded(scenario: Mapping[str, Any], progress: bool | Callable[[float], None] = False) -> Results:
    """Runs an already loaded scenario dict; `progress` is a flag or the core's progress callback."""
    text = to_json(scenario)
    if callable(progress):
        return Results(_core.run(text, progress))
    if progress:
        with ProgressBar() as bar:
            return Results(_core.run(text, bar))
    return Results(_core.run(text))
