"""Traffic from other tools' files: htsim connection matrices and CSV / Parquet flow tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from fabricsim import ScenarioError, run
from fabricsim.scenario import load_scenario

# Connection matrices as htsim's own examples write them (csg-htsim
# sim/datacenter/connection_matrices/: one.cm, bidir.cm, incast.cm; ids as
# outcast_incast.cm has them; size 0 as sim/EXAMPLES/permutation.cm).
ONE = "Nodes 16\nConnections 1\n0->13 start 0 size 2000000\n"
BIDIR = "Nodes 16\nConnections 2\n0->13 start 0 size 2000000\n13->0 start 0 size 2000000\n"
INCAST = "Nodes 16\nConnections 15\n" + "".join(f"{i}->15 start 0 size 2000000\n" for i in range(15))
WITH_IDS = "Nodes 128\nConnections 2\n1->0 id 1 start 0 size 2000000\n2->4 id 2 start 5000000 size 2000000\n"
ENDLESS = "Nodes 16\nConnections 2\n0->5 start 0.000000 size 0\n1->6 start 0.000000 size 0\n"


def _scenario(tmp_path: Path, traffic: dict[str, Any], **extra: Any) -> Path:
    data = {
        "name": "cm",
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "nics": 16, "link_rate": "100Gbps"},
        "traffic": [traffic],
        **extra,
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _matrix(tmp_path: Path, text: str, name: str = "m.cm") -> str:
    (tmp_path / name).write_text(text, encoding="utf-8")
    return name


@pytest.mark.parametrize(("text", "flows"), [(ONE, 1), (BIDIR, 2), (INCAST, 15), (WITH_IDS, 2)])
def test_htsims_example_matrices_run(tmp_path: Path, text: str, flows: int) -> None:
    results = run(_scenario(tmp_path, {"kind": "htsim_cm", "file": _matrix(tmp_path, text)}))
    assert results.complete
    assert results.summary["flows_completed"] == flows
    assert set(results.flows["bytes"].to_list()) == {2_000_000}


def test_a_matrix_becomes_the_flows_it_lists(tmp_path: Path) -> None:
    loaded = load_scenario(_scenario(tmp_path, {"kind": "htsim_cm", "file": _matrix(tmp_path, WITH_IDS), "qps": 2}))
    assert loaded["traffic"] == [
        {"kind": "flow", "src": 1, "dst": 0, "start": "0ps", "bytes": "2000000B", "qps": 2},
        {"kind": "flow", "src": 2, "dst": 4, "start": "5000000ps", "bytes": "2000000B", "qps": 2},
    ]
    # htsim's start is in picoseconds: 5 us.
    results = run(_scenario(tmp_path, {"kind": "htsim_cm", "file": "m.cm"}))
    assert sorted(results.flows["start_s"].to_list()) == [0.0, 5e-6]


def test_flows_without_end_take_the_entrys_size(tmp_path: Path) -> None:
    name = _matrix(tmp_path, ENDLESS)
    with pytest.raises(ScenarioError, match=r"traffic\[0\]\.file: .*line 3: size 0 is htsim's flow without end"):
        load_scenario(_scenario(tmp_path, {"kind": "htsim_cm", "file": name}))
    results = run(_scenario(tmp_path, {"kind": "htsim_cm", "file": name, "unbounded_bytes": "1MB"}))
    assert results.flows["bytes"].to_list() == [1_000_000, 1_000_000]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("Nodes 16\nConnections 1\n0->3 id 1 trigger 1 size 10\n", "line 3: trigger: flows started by triggers"),
        ("Nodes 16\nConnections 1\n0->3 start 0 size 10 prio 1\n", "line 3: prio"),
        ("Nodes 16\nConnections 1\n0->3 start 0 size 10 color red\n", "unknown token 'color'"),
        ("Nodes 16\nConnections 1\n0->30 start 0 size 10\n", "destination 30 is not below Nodes 16"),
        ("Nodes 16\nConnections 2\n0->3 start 0 size 10\n", "declares Connections 2 and has 1"),
        ("Nodes 16\nConnections 1\n0->3 size 10\n", "line 3: no start time"),
        ("Nodes 16\nConnections 1\n0->3 start -5 size 10\n", "start '-5' is not a time"),
        ("Nodes 16\nConnections 1\n0->3 start 0 size ten\n", "size: 'ten' is not a whole number"),
        ("Nodes 16\nConnections 0\n", "has no connections"),
        ("Nodes 16\nConnections 1\nfailure switch_type TOR switch_id 1 link_id 2\n", "failure lines"),
    ],
)
def test_what_fabricsim_cannot_read_is_named_by_line(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(ScenarioError, match=r"^traffic\[0\]\.file") as caught:
        load_scenario(_scenario(tmp_path, {"kind": "htsim_cm", "file": _matrix(tmp_path, text)}))
    assert fragment in str(caught.value)


def test_a_missing_or_binary_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"traffic\[0\]\.file: cannot read"):
        load_scenario(_scenario(tmp_path, {"kind": "htsim_cm", "file": "nowhere.cm"}))
    (tmp_path / "bin.cm").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load_scenario(_scenario(tmp_path, {"kind": "htsim_cm", "file": "bin.cm"}))
    for device in ("/dev/zero", str(tmp_path)):
        with pytest.raises(ScenarioError, match="is not a regular file"):
            load_scenario(_scenario(tmp_path, {"kind": "htsim_cm", "file": device}))
    with pytest.raises(ScenarioError, match=r"traffic\[0\]\.colour: unknown field"):
        load_scenario(_scenario(tmp_path, {"kind": "htsim_cm", "file": "x.cm", "colour": 1}))


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_flow_table_runs_its_rows(tmp_path: Path, suffix: str) -> None:
    table = pl.DataFrame({"src": ["0", "nic3"], "dst": ["5", "6"], "bytes": ["64KB", "1000"], "start": ["0", "10us"]})
    path = tmp_path / f"flows{suffix}"
    if suffix == ".csv":
        table.write_csv(path)
    else:
        table.write_parquet(path)
    loaded = load_scenario(_scenario(tmp_path, {"kind": "flow_table", "file": path.name}))
    assert loaded["traffic"][1] == {"kind": "flow", "src": "nic3", "dst": 6, "bytes": "1000B", "start": "10us"}
    results = run(loaded)
    assert results.summary["flows_completed"] == 2
    assert sorted(results.flows["bytes"].to_list()) == [1000, 64000]


def test_a_flow_table_without_a_needed_column_is_refused(tmp_path: Path) -> None:
    pl.DataFrame({"src": [0], "bytes": [10]}).write_csv(tmp_path / "f.csv")
    with pytest.raises(ScenarioError, match="has no column 'dst'"):
        load_scenario(_scenario(tmp_path, {"kind": "flow_table", "file": "f.csv"}))
