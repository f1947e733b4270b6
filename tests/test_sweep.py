"""Sweeps, nccl-tests tables and the busbw plot: the Python side only, on hand-made core output."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from fabricsim import ScenarioError, SimulationError, _core, runner
from fabricsim.plots import plot_busbw, size_label
from fabricsim.results import INCOMPLETE_MARKER, Results, nccl_tests_table
from fabricsim.sweep import (
    SWEEP_FORMS,
    SweepFailure,
    SweepPoint,
    SweepResults,
    expand,
    run_points,
    value_label,
)

PARAMETER = "jobs.0.phases.0.collective.bytes"


def _scenario(values: list[Any] | None = None) -> dict[str, Any]:
    return {
        "name": "sw",
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"},
        "jobs": [{"name": "j", "ranks": 4, "phases": [{"name": "ar", "collective": {"op": "all_reduce"}}]}],
        "sweep": {"parameter": PARAMETER, "values": values if values is not None else ["8B", "1KiB", "1MiB"]},
    }


def _collective_row(**fields: Any) -> dict[str, Any]:
    row = {
        "job": "j",
        "iteration": 0,
        "phase": "ar",
        "group": 0,
        "op": "all_reduce",
        "algorithm": "ring",
        "ranks": 4,
        "bytes": 1024,
        "start_s": 0.0,
        "end_s": 1e-5,
        "cct_s": 1e-5,
        "algbw_gbps": 0.8192,
        "busbw_gbps": 1.2288,
        "ideal_s": 1e-5,
        "slowdown": 1.0,
    }
    return row | fields


def _raw(rows: list[dict[str, Any]], complete: bool = True) -> dict[str, Any]:
    """Output shaped like `fabricsim._core.run`'s, with a collectives table."""
    names = list(_collective_row())
    dtypes = {
        n: "str"
        if n in ("job", "phase", "op", "algorithm")
        else "float"
        if n.endswith(("_s", "_gbps", "slowdown"))
        else "int"
        for n in names
    }
    return {
        "resolved": json.dumps({"name": "sw", "seed": 1}),
        "complete": complete,
        "summary": {"sim_time_s": 1e-5, "jobs": {"j": {"ranks": 4, "jct_s": 1e-5}}},
        "tables": {
            "flows": {"flow": [], "bytes": []},
            "collectives": {n: [r[n] for r in rows] for n in names},
            "steps": {"job": ["j"], "iteration": [0], "start_s": [0.0], "end_s": [1e-5], "step_time_s": [1e-5]},
        },
        "dtypes": {
            "flows": {"flow": "int", "bytes": "int"},
            "collectives": dtypes,
            "steps": {"job": "str", "iteration": "int", "start_s": "float", "end_s": "float", "step_time_s": "float"},
        },
    }


def _sweep_results(sizes: list[int], runs: int | None = None, complete: bool = True) -> SweepResults:
    _, points = expand(_scenario([f"{s}B" for s in sizes]))
    # Named as `prepare` names them, without the core: by a stand-in for each resolved scenario.
    points = [replace(p, resolved=json.dumps(p.scenario, sort_keys=True)) for p in points]
    results = [
        Results(_raw([_collective_row(bytes=s, cct_s=1e-6 * (i + 1), busbw_gbps=8.0 * (i + 1))], complete=complete))
        for i, s in enumerate(sizes)
    ]
    return SweepResults([PARAMETER], points, results[: len(sizes) if runs is None else runs])


@pytest.mark.parametrize(
    ("value", "label"),
    [
        ("8B", "8B"),
        ("1.5MB", "1.5MB"),
        (16, "16"),
        (0.25, "0.25"),
        (True, "true"),
        (None, "null"),
        ([1, 2], "[1,2]"),
        ({"size": 4, "stride": 1}, '{"size":4,"stride":1}'),
    ],
)
def test_value_label(value: Any, label: str) -> None:
    assert value_label(value) == label


def test_a_run_directory_is_named_by_its_resolved_scenario() -> None:
    point = SweepPoint(0, {PARAMETER: "8B"}, {}, resolved='{"seed": 1}')
    assert re.fullmatch(r"[0-9a-f]{16}", point.directory)
    # The index and the values do not name it: the same scenario is the same run, wherever it stands in a sweep.
    assert SweepPoint(5, {"x": 1}, {}, resolved='{"seed": 1}').directory == point.directory
    assert SweepPoint(0, {PARAMETER: "8B"}, {}, resolved='{"seed": 2}').directory != point.directory
    with pytest.raises(ValueError, match="resolved"):
        _ = SweepPoint(0, {PARAMETER: "8B"}, {}).directory


def test_point_labels() -> None:
    assert SweepPoint(0, {PARAMETER: "8B"}, {}).label == "8B"
    assert SweepPoint(0, {PARAMETER: "8B"}, {}, seed=3).label == "8B seed=3"
    assert SweepPoint(0, {"a.b": 1, "c": "x"}, {}).label == "a.b=1 c=x"
    assert SweepPoint(0, {}, {}, seed=2).label == "seed=2"


def test_expand_sets_the_parameter_and_drops_the_sweep() -> None:
    scenario = _scenario()
    parameters, points = expand(scenario)
    assert parameters == [PARAMETER]
    assert [p.index for p in points] == [0, 1, 2]
    assert [p.scenario["jobs"][0]["phases"][0]["collective"]["bytes"] for p in points] == ["8B", "1KiB", "1MiB"]
    assert all("sweep" not in p.scenario for p in points)
    points[0].scenario["jobs"][0]["name"] = "changed"
    assert points[1].scenario["jobs"][0]["name"] == "j"
    assert scenario["jobs"][0]["phases"][0]["collective"] == {"op": "all_reduce"}


def test_expand_creates_a_missing_field() -> None:
    scenario = _scenario(["4"])
    scenario["sweep"]["parameter"] = "transport.qps"
    _, points = expand(scenario)
    assert points[0].scenario["transport"] == {"qps": "4"}


@pytest.mark.parametrize(
    ("sweep", "fragment"),
    [
        ([8, 16], "sweep: expected a mapping"),
        ({"parameter": PARAMETER}, "sweep.values: expected a non-empty list"),
        ({"parameter": PARAMETER, "values": []}, "sweep.values: expected a non-empty list"),
        ({"parameter": PARAMETER, "values": "8B"}, "sweep.values"),
        ({"values": ["8B"]}, "sweep.parameter: expected a dotted path"),
        ({"parameter": 3, "values": ["8B"]}, "sweep.parameter"),
        ({"parameter": PARAMETER, "values": ["8B"], "value": 1}, "sweep.value: unknown field"),
        ({"parameter": "sweep.values", "values": ["8B"]}, "sweep.parameter: sweep.values: a sweep cannot vary"),
        ({"parameter": "jobs.3.ranks", "values": [8]}, "sweep.parameter: jobs.3: index 3 is out of range"),
        ({"parameter": "name.x", "values": [8]}, "sweep.parameter: name.x"),
    ],
)
def test_expand_rejects_a_malformed_sweep(sweep: Any, fragment: str) -> None:
    scenario = _scenario()
    scenario["sweep"] = sweep
    with pytest.raises(ScenarioError) as info:
        expand(scenario)
    assert str(info.value).startswith(fragment)


def test_nccl_table_layout() -> None:
    rows = [
        _collective_row(bytes=8, cct_s=20e-6, algbw_gbps=0.0032, busbw_gbps=0.0048),
        _collective_row(bytes=1 << 20, cct_s=150e-6, algbw_gbps=55.9, busbw_gbps=83.9),
        _collective_row(bytes=1 << 30, cct_s=0.2, algbw_gbps=42.9, busbw_gbps=64.4),
    ]
    table = nccl_tests_table(pl.DataFrame(rows))
    assert table.splitlines() == [
        "# j / ar: all_reduce (ring), 4 ranks, 1 group",
        "#",
        "#       size         count      type     time   algbw   busbw",
        "#        (B)    (elements)               (us)  (GB/s)  (GB/s)",
        "           8             2     float    20.00    0.00    0.00",
        "     1048576        262144     float    150.0    6.99   10.49",
        "  1073741824     268435456     float   200000    5.36    8.05",
        "# Avg bus bandwidth    : 6.17937",
    ]


def test_nccl_table_means_over_groups_and_iterations() -> None:
    rows = [
        _collective_row(group=g, iteration=i, cct_s=1e-6 * (1 + g + i), busbw_gbps=8.0 * (1 + g))
        for g in range(2)
        for i in range(2)
    ]
    lines = nccl_tests_table(pl.DataFrame(rows)).splitlines()
    assert lines[0].endswith("4 ranks, 2 groups")
    assert lines[4] == "        1024           256     float     2.00    0.10    1.50"


def test_nccl_table_has_one_block_per_phase_in_core_order() -> None:
    rows = [
        _collective_row(phase="tp", op="all_gather", bytes=4096),
        _collective_row(phase="dp", bytes=8192),
        _collective_row(phase="tp", op="all_gather", bytes=1024, iteration=1),
    ]
    blocks = nccl_tests_table(pl.DataFrame(rows)).split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == [
        "# j / tp: all_gather (ring), 4 ranks, 1 group",
        "# j / dp: all_reduce (ring), 4 ranks, 1 group",
    ]
    # Sizes from small to large, as nccl-tests prints them.
    assert [line.split()[0] for line in blocks[0].splitlines()[4:6]] == ["1024", "4096"]


def test_nccl_table_of_a_sweep_names_values_when_sizes_repeat() -> None:
    sweep = _sweep_results([1024, 1024])
    sweep.parameters = ["transport.qps"]
    sweep.points = [replace(p, values={"transport.qps": p.value}) for p in sweep.points]
    lines = sweep.table().splitlines()
    assert lines[2].endswith("busbw  transport.qps")
    assert lines[4].endswith("1.00  1024B")
    assert lines[5].endswith("2.00  1024B")


def test_nccl_table_of_nothing_is_empty() -> None:
    assert nccl_tests_table(pl.DataFrame()) == ""


def test_sweep_collectives_are_tagged_with_the_value() -> None:
    sweep = _sweep_results([8, 1024, 1 << 20])
    frame = sweep.collectives
    assert frame.columns[:5] == ["sweep_index", "sweep_parameter", "sweep_value", "sweep_seed", PARAMETER]
    assert frame[PARAMETER].to_list() == ["8B", "1024B", "1048576B"]
    assert frame["sweep_index"].to_list() == [0, 1, 2]
    assert frame["sweep_value"].to_list() == ["8B", "1024B", "1048576B"]
    assert set(frame["sweep_parameter"]) == {PARAMETER}
    assert frame["bytes"].to_list() == [8, 1024, 1 << 20]
    assert sweep.complete
    assert sweep.table().splitlines()[4:7] == [
        "           8             2     float     1.00    0.10    1.00",
        "        1024           256     float     2.00    0.10    2.00",
        "     1048576        262144     float     3.00    0.10    3.00",
    ]


def test_sweep_write(tmp_path: Path) -> None:
    sweep = _sweep_results([8, 1024])
    out = sweep.write(tmp_path / "sw", csv=True, plot=True)
    runs = [p.directory for p in sweep.points]
    names = {p.name for p in out.iterdir()}
    assert names == {*runs, "sweep.parquet", "sweep.csv", "sweep.json", "busbw.png"}
    assert (out / "busbw.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    run = out / runs[0]
    assert {"scenario.json", "summary.json", "collectives.parquet", "steps.parquet", "collectives.csv"} <= {
        p.name for p in run.iterdir()
    }
    combined = pl.read_parquet(out / "sweep.parquet")
    assert combined["sweep_value"].to_list() == ["8B", "1024B"]
    description = json.loads((out / "sweep.json").read_text())
    assert description["parameters"] == [PARAMETER]
    assert description["complete"] is True
    assert [r["directory"] for r in description["runs"]] == runs
    assert [r["values"] for r in description["runs"]] == [{PARAMETER: "8B"}, {PARAMETER: "1024B"}]
    assert [r["state"] for r in description["runs"]] == ["complete", "complete"]


def test_sweep_write_is_deterministic(tmp_path: Path) -> None:
    a = _sweep_results([8, 1024]).write(tmp_path / "a", plot=True)
    b = _sweep_results([8, 1024]).write(tmp_path / "b", plot=True)
    for name in ("sweep.parquet", "sweep.json", "busbw.png"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_stopped_sweep_is_marked_incomplete(tmp_path: Path) -> None:
    sweep = _sweep_results([8, 1024, 4096], runs=2)
    assert not sweep.complete
    out = sweep.write(tmp_path / "sw")
    assert (out / INCOMPLETE_MARKER).exists()
    assert {p.name for p in out.iterdir() if p.is_dir()} == {p.directory for p in sweep.points[:2]}
    description = json.loads((out / "sweep.json").read_text())
    assert description["complete"] is False
    assert [r["state"] for r in description["runs"]] == ["complete", "complete", "not run"]


def test_a_failing_point_stops_the_sweep_keeping_the_runs_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    parameter, points = expand(_scenario())
    calls = []

    def run_loaded(scenario: dict[str, Any], progress: Any = False) -> Results:
        calls.append(scenario)
        if len(calls) == 2:
            raise SimulationError("internal error: boom")
        return Results(_raw([_collective_row()]))

    monkeypatch.setattr(runner, "run_loaded", run_loaded)
    sweep = run_points(parameter, points)
    assert len(calls) == 2
    assert len(sweep.finished) == 1
    assert sweep.failure is not None
    assert sweep.failure.point.index == 1
    assert isinstance(sweep.failure.error, SimulationError)
    assert not sweep.complete


def test_a_failed_sweep_is_written_incomplete_naming_the_failure(tmp_path: Path) -> None:
    sweep = _sweep_results([8, 1024, 4096], runs=1)
    sweep.failure = SweepFailure(sweep.points[1], SimulationError("internal error: boom"))
    out = sweep.write(tmp_path / "sw")
    assert (out / INCOMPLETE_MARKER).exists()
    description = json.loads((out / "sweep.json").read_text())
    assert description["complete"] is False
    assert description["failure"] == {"index": 1, "value": "1024B", "error": "SimulationError: internal error: boom"}
    assert [r["state"] for r in description["runs"]] == ["complete", "failed", "not run"]


def test_sweep_overwrite_removes_runs_of_an_earlier_sweep(tmp_path: Path) -> None:
    out = _sweep_results([8, 1024, 4096]).write(tmp_path / "sw", csv=True, plot=True)
    (out / "notes.txt").write_text("mine")
    (out / "999_mine").mkdir()
    with pytest.raises(FileExistsError):
        _sweep_results([64]).write(out)
    again = _sweep_results([64])
    again.write(out, overwrite=True)
    assert {p.name for p in out.iterdir()} == {
        again.points[0].directory,
        "999_mine",
        "notes.txt",
        "sweep.parquet",
        "sweep.json",
    }


@pytest.mark.parametrize(
    ("size", "label"),
    [
        (8, "8B"),
        (1000, "1KB"),
        (1024, "1KiB"),
        (4096, "4KiB"),
        (1536, "1536B"),
        (16 << 20, "16MiB"),
        (5_500_000, "5500KB"),
    ],
)
def test_size_label(size: int, label: str) -> None:
    assert size_label(size) == label


def test_plot_of_a_sweep_of_another_field(tmp_path: Path) -> None:
    sweep = _sweep_results([1024, 1024])
    name = plot_busbw(sweep.collectives, tmp_path / "busbw.png", parameter="transport.qps")
    assert name == "busbw.png"
    assert (tmp_path / "busbw.png").stat().st_size > 1000


def test_the_schema_names_every_sweep_form_and_include() -> None:
    """`fabricsim schema` describes what a scenario file may hold, the Python face's sections too: an editor
    validating a file against it must not flag a grid sweep or an include (it did until 2026-11-29)."""
    schema = json.loads(_core.schema())
    assert set(schema["$defs"]["SweepSpec"]["properties"]) == set(SWEEP_FORMS)
    assert "include" in schema["properties"]
