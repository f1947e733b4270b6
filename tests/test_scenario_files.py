"""Every scenario shipped in scenarios/ and in the package is valid: the core
resolves it (every value of a sweep), or, for the topology calculator's
files, reports on it. Files under a `fragments/` directory are pieces that
scenarios include, not scenarios; they are checked through those. A file
that sends nothing (no traffic, no job) is a base other scenarios include:
`run` would refuse it, so it is resolved as `topo` resolves it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricsim import _core, load_scenario
from fabricsim.scenario import builtin_scenario, is_sweep
from fabricsim.sweep import prepare

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
FILES = sorted(p for p in SCENARIOS.rglob("*.yaml") if "fragments" not in p.relative_to(SCENARIOS).parts)
FRAGMENTS = sorted(p for p in SCENARIOS.rglob("fragments/*.yaml"))
COLLECTIVES = {
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "all_to_allv",
    "send_recv",
    "broadcast",
    "reduce",
    "tree_all_reduce",
    "training_step",
}


def test_there_are_scenarios() -> None:
    assert len(FILES) >= 10


def test_one_example_per_collective() -> None:
    assert {p.stem for p in (SCENARIOS / "collectives").glob("*.yaml")} >= COLLECTIVES


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SCENARIOS)))
def test_scenario_file_is_valid(path: Path) -> None:
    scenario = load_scenario(path)
    if path.parent.name == "topologies":
        report = json.loads(_core.topology_report(json.dumps(scenario)))
        assert report["nics"] > 0
        return
    if is_sweep(scenario):
        _, points = prepare(scenario)
        assert len(points) >= 2
        scenario = points[0].scenario
    sends = any(scenario.get(key) for key in ("traffic", "jobs", "clustermapper"))
    if not sends:
        includers = [f for f in FILES if f.parent == path.parent and path.name in f.read_text() and f != path]
        assert includers, f"{path} sends nothing and is included by no scenario"
    resolved = json.loads(_core.resolve(json.dumps(scenario), to_run=sends))
    # A `_quick` file is the quick version of the file it includes, under that file's name.
    assert resolved["name"] == path.stem.removesuffix("_quick")


@pytest.mark.parametrize("path", FRAGMENTS, ids=lambda p: str(p.relative_to(SCENARIOS)))
def test_every_fragment_is_included_by_a_scenario(path: Path) -> None:
    includers = [f for f in FILES if f.parent == path.parent.parent and f"fragments/{path.name}" in f.read_text()]
    assert includers, f"{path} is included by no scenario"


@pytest.mark.parametrize("name", ["default", "bench", "bench_collective"])
def test_builtin_scenario_is_valid(name: str) -> None:
    resolved = json.loads(_core.resolve(json.dumps(load_scenario(builtin_scenario(name)))))
    assert resolved["name"] == name
