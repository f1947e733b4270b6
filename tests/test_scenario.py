"""Scenario loading: YAML, includes, `-s` overrides. Pure Python: the core is not called."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabricsim import ScenarioError, load_scenario
from fabricsim.scenario import builtin_scenario, deep_merge, parse_override, set_dotted


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("seed=3", "seed", 3),
        ("topology.radix=8", "topology.radix", 8),
        ("transport.qps=16", "transport.qps", 16),
        ("traffic.0.bytes=1MB", "traffic.0.bytes", "1MB"),
        ("topology.link_rate=400Gbps", "topology.link_rate", "400Gbps"),
        ("topology.link_rate=100", "topology.link_rate", 100),
        ("faults.loss=0.01", "faults.loss", 0.01),
        ("telemetry.enabled=true", "telemetry.enabled", True),
        ("name=a=b", "name", "a=b"),
        ("name='42'", "name", "42"),
        ("traffic.0.dst=[1, 2]", "traffic.0.dst", [1, 2]),
        ("seed=", "seed", None),
    ],
)
def test_parse_override(text: str, key: str, value: Any) -> None:
    assert parse_override(text) == (key, value)


@pytest.mark.parametrize("text", ["seed", "=3", " =3"])
def test_parse_override_rejects_malformed(text: str) -> None:
    with pytest.raises(ScenarioError, match=r"dotted\.key=value"):
        parse_override(text)


def test_set_dotted_creates_mappings_and_indexes_lists() -> None:
    scenario: dict[str, Any] = {"traffic": [{"kind": "permutation", "bytes": "64KiB"}]}
    set_dotted(scenario, "topology.radix", 8)
    set_dotted(scenario, "traffic.0.bytes", "1MB")
    assert scenario == {"traffic": [{"kind": "permutation", "bytes": "1MB"}], "topology": {"radix": 8}}


def test_set_dotted_takes_list_indices_as_errors_write_them() -> None:
    scenario: dict[str, Any] = {"jobs": [{"phases": [{"compute": "1us"}, {"compute": "2us"}]}]}
    set_dotted(scenario, "jobs[0].phases[1].compute", "5us")
    assert scenario["jobs"][0]["phases"][1] == {"compute": "5us"}


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("traffic.3.bytes", "traffic.3: index 3 is out of range"),
        ("traffic.first.bytes", "traffic.first: traffic is a list"),
        ("seed.value", "seed.value: seed is 1, not a mapping"),
        ("topology..radix", "empty segment"),
    ],
)
def test_set_dotted_errors_name_the_path(key: str, message: str) -> None:
    scenario = {"seed": 1, "traffic": [{"bytes": "64KiB"}], "topology": {}}
    with pytest.raises(ScenarioError, match=message):
        set_dotted(scenario, key, 0)


def test_overrides_as_strings_or_mapping(tiny_scenario: dict[str, Any]) -> None:
    from_strings = load_scenario(tiny_scenario, ["seed=3", "topology.radix=8", "traffic.0.bytes=1MB"])
    from_mapping = load_scenario(tiny_scenario, {"seed": 3, "topology.radix": 8, "traffic.0.bytes": "1MB"})
    assert from_strings == from_mapping
    assert from_strings["seed"] == 3
    assert from_strings["topology"]["radix"] == 8
    assert from_strings["traffic"][0]["bytes"] == "1MB"


def test_load_does_not_modify_the_callers_dict(tiny_scenario: dict[str, Any]) -> None:
    load_scenario(tiny_scenario, ["topology.radix=8"])
    assert tiny_scenario["topology"]["radix"] == 4


def test_deep_merge_merges_mappings_and_replaces_the_rest() -> None:
    base = {"topology": {"kind": "clos", "radix": 4}, "traffic": [{"kind": "incast"}], "seed": 1}
    top = {"topology": {"radix": 8}, "traffic": [{"kind": "permutation"}]}
    assert deep_merge(base, top) == {
        "topology": {"kind": "clos", "radix": 8},
        "traffic": [{"kind": "permutation"}],
        "seed": 1,
    }
    assert base["topology"]["radix"] == 4


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_include_is_merged_under_the_including_file(tmp_path: Path) -> None:
    _write(
        tmp_path / "common" / "fabric.yaml",
        "topology: {kind: clos, tiers: 2, radix: 4, link_rate: 100Gbps}\nseed: 1\n",
    )
    _write(tmp_path / "common" / "traffic.yaml", "traffic: [{kind: permutation, bytes: 64KiB}]\nseed: 2\n")
    main = _write(
        tmp_path / "exp" / "main.yaml",
        "include: [../common/fabric.yaml, ../common/traffic.yaml]\nname: main\ntopology: {radix: 8}\n",
    )
    scenario = load_scenario(main, ["topology.link_rate=400Gbps"])
    assert scenario == {
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "400Gbps"},
        "seed": 2,
        "traffic": [{"kind": "permutation", "bytes": "64KiB"}],
        "name": "main",
    }


def test_nested_include_is_relative_to_its_own_file(tmp_path: Path) -> None:
    _write(tmp_path / "a" / "b" / "leaf.yaml", "seed: 9\n")
    _write(tmp_path / "a" / "mid.yaml", "include: b/leaf.yaml\nname: mid\n")
    top = _write(tmp_path / "top.yaml", "include: a/mid.yaml\n")
    assert load_scenario(top) == {"seed": 9, "name": "mid"}


def test_include_cycle_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path / "a.yaml", "include: b.yaml\n")
    _write(tmp_path / "b.yaml", "include: a.yaml\n")
    with pytest.raises(ScenarioError, match="include cycle"):
        load_scenario(tmp_path / "a.yaml")


def test_missing_include_names_the_file_and_the_one_including_it(tmp_path: Path) -> None:
    main = _write(tmp_path / "main.yaml", "include: nowhere.yaml\n")
    with pytest.raises(
        FileNotFoundError, match=r"^include: scenario file not found: .*nowhere\.yaml \(included by .*main\.yaml\)$"
    ):
        load_scenario(main)


def test_include_must_be_paths(tmp_path: Path) -> None:
    main = _write(tmp_path / "main.yaml", "include: {a: 1}\n")
    with pytest.raises(ScenarioError, match="include: expected a path"):
        load_scenario(main)


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad.yaml", "name: x\ntopology: {kind: clos\n")
    with pytest.raises(ScenarioError, match=r"bad.yaml: invalid YAML: line \d+"):
        load_scenario(bad)


def test_scenario_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="a scenario is a mapping"):
        load_scenario(_write(tmp_path / "list.yaml", "- 1\n- 2\n"))


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"missing\.yaml"):
        load_scenario(tmp_path / "missing.yaml")


def test_written_scenario_json_loads_back(tmp_path: Path) -> None:
    path = _write(tmp_path / "scenario.json", '{"fabricsim_version": "0.1.0", "name": "x", "seed": 4}\n')
    assert load_scenario(path) == {"name": "x", "seed": 4}


def test_builtin_scenarios_ship_with_the_package() -> None:
    for name in ("default", "bench"):
        assert load_scenario(builtin_scenario(name))["name"] == name
    with pytest.raises(FileNotFoundError, match="nosuch"):
        builtin_scenario("nosuch")
