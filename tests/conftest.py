"""Shared fixtures: a tiny scenario that simulates in well under a second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import scenario_contract


@pytest.fixture
def tiny_scenario() -> dict[str, Any]:
    """A 2-tier Clos of radix 4 (8 NICs, 100 Gb/s), a 64 KiB permutation over RoCEv2 (the fuzz
    contract's smallest scenario, without its run limits)."""
    scenario = scenario_contract.tiny()
    del scenario["limits"]
    return scenario


@pytest.fixture
def tiny_scenario_file(tmp_path: Path, tiny_scenario: dict[str, Any]) -> Path:
    """`tiny_scenario` written as a YAML file in its own directory."""
    directory = tmp_path / "scenarios"
    directory.mkdir()
    path = directory / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario, sort_keys=False), encoding="utf-8")
    return path
