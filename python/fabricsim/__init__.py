"""fabricsim: a packet-level simulator of AI-training networks.

The simulator is the Rust core in `fabricsim._core`; this package loads
scenarios, calls the core once per run and turns its columns into frames and
files.

    >>> import fabricsim
    >>> results = fabricsim.run("scenario.yaml", overrides=["seed=3"])
    >>> results.flows          # a polars DataFrame
    >>> results.write("runs/example")
    >>> sweep = fabricsim.sweep("scenarios/collectives/all_reduce.yaml")
    >>> print(sweep.table())   # nccl-tests style

`run` and `Results` are imported on first use, and `sweep` imports them only
when called: they pull in polars, which `fabricsim bench` must not count in
the simulator's peak memory and which `fabricsim schema` or `topo` do not
need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core import ScenarioError, SimulationError
from ._core import version as _core_version
from .scenario import load_scenario
from .sweep import SweepResults, sweep

if TYPE_CHECKING:
    from .results import Results
    from .runner import run

__version__: str = _core_version()

__all__ = [
    "Results",
    "ScenarioError",
    "SimulationError",
    "SweepResults",
    "__version__",
    "load_scenario",
    "run",
    "sweep",
]


def __getattr__(name: str) -> Any:
    if name == "Results":
        from .results import Results

        return Results
    if name == "run":
        from .runner import run

        return run
    raise AttributeError(f"module 'fabricsim' has no attribute {name!r}")
