"""Type stubs of the native module built from crates/fabricsim-py.

Scenarios cross the boundary once, as JSON text; results come back as plain
columns (lists) that `fabricsim.results` turns into frames.
"""

from collections.abc import Callable
from typing import Any

class ScenarioError(ValueError):
    """A scenario that cannot be simulated; the message is `<dotted.field>: <what is wrong>`."""

class SimulationError(RuntimeError):
    """A failure inside the simulator (a Rust panic); a bug, not bad input."""

def version() -> str: ...
def schema() -> str: ...
def available_memory() -> int | None: ...
def resolve(scenario_json: str, available_memory: int | None = None) -> str: ...
def topology_report(scenario_json: str) -> str: ...
def run(
    scenario_json: str, progress: Callable[[float], None] | None = None, available_memory: int | None = None
) -> dict[str, Any]: ...
def _panic_for_tests(message: str) -> None: ...
