"""Every scenario shipped in scenarios/ is valid: the core resolves it (or, for
the topology calculator's files, reports on it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricsim import _core, load_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
FILES = sorted(SCENARIOS.rglob("*.yaml"))


def test_there_are_scenarios() -> None:
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SCENARIOS)))
def test_scenario_file_is_valid(path: Path) -> None:
    text = json.dumps(load_scenario(path))
    if path.parent.name == "topologies":
        report = json.loads(_core.topology_report(text))
        assert report["nics"] > 0
    else:
        resolved = json.loads(_core.resolve(text))
        assert resolved["name"] == path.stem
