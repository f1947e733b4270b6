"""Sweeps over grids, zipped lists and seeds, run on a process pool or Ray into resumable directories."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import fabricsim
from fabricsim import ScenarioError
from fabricsim.batch import Finished, Stopped, Task, run_batch
from fabricsim.results import INCOMPLETE_MARKER
from fabricsim.scenario import to_json
from fabricsim.sweep import MAX_POINTS, expand, prepare, run_into

BYTES = "traffic.0.bytes"
QPS = "transport.qps"


def _with_sweep(tiny: dict[str, Any], sweep: dict[str, Any]) -> dict[str, Any]:
    return {**tiny, "sweep": sweep}


def test_a_grid_is_every_combination_first_parameter_slowest(tiny_scenario: dict[str, Any]) -> None:
    parameters, points = expand(_with_sweep(tiny_scenario, {"grid": {BYTES: ["1KiB", "2KiB"], QPS: [1, 2, 4]}}))
    assert parameters == [BYTES, QPS]
    assert [(p.values[BYTES], p.values[QPS]) for p in points] == [
        ("1KiB", 1),
        ("1KiB", 2),
        ("1KiB", 4),
        ("2KiB", 1),
        ("2KiB", 2),
        ("2KiB", 4),
    ]
    assert points[4].scenario["traffic"][0]["bytes"] == "2KiB"
    assert points[4].scenario["transport"]["qps"] == 2
    assert points[4].label == f"{BYTES}=2KiB {QPS}=2"


def test_zip_pairs_values_and_is_the_grids_last_axis(tiny_scenario: dict[str, Any]) -> None:
    sweep = {"grid": {"seed": [7, 8]}, "zip": {BYTES: ["1KiB", "2KiB"], QPS: [1, 2]}}
    parameters, points = expand(_with_sweep(tiny_scenario, sweep))
    assert parameters == ["seed", BYTES, QPS]
    assert [tuple(p.values.values()) for p in points] == [
        (7, "1KiB", 1),
        (7, "2KiB", 2),
        (8, "1KiB", 1),
        (8, "2KiB", 2),
    ]


def test_seeds_are_the_innermost_axis(tiny_scenario: dict[str, Any]) -> None:
    tiny_scenario["seed"] = 5
    _, points = expand(_with_sweep(tiny_scenario, {"parameter": BYTES, "values": ["1KiB", "2KiB"], "seeds": 2}))
    assert [(p.value, p.seed, p.scenario["seed"]) for p in points] == [
        ("1KiB", 5, 5),
        ("1KiB", 6, 6),
        ("2KiB", 5, 5),
        ("2KiB", 6, 6),
    ]
    _, points = expand(_with_sweep(tiny_scenario, {"seeds": [3, 11]}))
    assert [(p.label, p.scenario["seed"]) for p in points] == [("seed=3", 3), ("seed=11", 11)]


@pytest.mark.parametrize(
    ("sweep", "fragment"),
    [
        ({"zip": {BYTES: ["1KiB", "2KiB"], QPS: [1]}}, "sweep.zip: its lists differ in length"),
        ({"grid": {BYTES: ["1KiB"]}, "zip": {BYTES: ["2KiB"]}}, f"sweep: {BYTES}: a parameter is swept twice"),
        ({"parameter": BYTES, "values": ["1KiB"], "grid": {QPS: [1]}}, "sweep: `parameter` and `values`"),
        ({"grid": {}}, "sweep.grid: expected a mapping"),
        ({"grid": [BYTES]}, "sweep.grid: expected a mapping"),
        ({"grid": {BYTES: []}}, f"sweep.grid.{BYTES}: expected a non-empty list"),
        ({"zip": {QPS: 4}}, f"sweep.zip.{QPS}: expected a non-empty list"),
        ({"grid": {"traffic.3.bytes": [8]}}, "sweep.grid.traffic.3.bytes: traffic.3"),
        ({"grid": {"sweep.grid": [1]}}, "sweep.grid.sweep.grid: sweep.grid: a sweep cannot vary"),
        ({"parameter": "include", "values": ["a.yaml"]}, "sweep.parameter: include: an include is read from"),
        ({"grid": {"include[0]": ["a.yaml"]}}, "sweep.grid.include[0]: include[0]: an include is read from"),
        ({"grid": {"seed": [1, 2]}, "seeds": 2}, "sweep.grid.seed: the sweep also has `seeds`"),
        ({"seeds": 0}, "sweep.seeds: 0"),
        ({"seeds": 10**12}, "sweep.seeds: 1000000000000: a count of seeds from 1 to 10,000"),
        ({"seeds": [1, 1]}, "sweep.seeds: [1, 1]: a seed is listed twice"),
        ({"seeds": [1.5]}, "sweep.seeds: expected a count"),
        ({"seeds": True}, "sweep.seeds: expected a count"),
        ({}, "sweep: expected `parameter` and `values`, `grid`, `zip` or `seeds`"),
        ({"grid": {BYTES: list(range(101)), QPS: list(range(100))}}, "sweep: 10,100 points; a sweep has at most"),
    ],
)
def test_malformed_grids_zips_and_seeds_are_named(tiny_scenario: dict[str, Any], sweep: Any, fragment: str) -> None:
    with pytest.raises(ScenarioError) as info:
        expand(_with_sweep(tiny_scenario, sweep))
    assert str(info.value).startswith(fragment)
    assert MAX_POINTS == 10_000


# Each point's scenario is checked whole before any runs: a bad value, and what only the run's build used to find
# (the switches' choosers, a QP's PSNs, imbalance groups, the memory of recording), with the point it is named by.
@pytest.mark.parametrize(
    ("changes", "sweep", "error"),
    [
        ({}, {"grid": {BYTES: ["1KiB", "lots"]}}, r"sweep point 2/2 \(traffic.0.bytes=lots\)"),
        # DRILL's samples fit the routes or not.
        (
            {"switch": {"forwarding": "drill"}},
            {"parameter": "switch.drill.samples", "values": [1, 2, 9]},
            r"sweep point 3/3 \(switch.drill.samples=9\).*more than the 2 next hops",
        ),
        # 2^50 B on one QP is 2^38 packets: more than its 2^31 PSNs.
        ({}, {"parameter": BYTES, "values": ["1KiB", "1048576GiB"]}, r"sweep point 2/2 .*=1048576GiB\).*2\^31 PSNs"),
        # The two-tier Clos's spines (tier 1) have nothing above them.
        (
            {"telemetry": {"imbalance": {"groups": [{"tier": 0, "facing": "up"}]}}},
            {"parameter": "telemetry.imbalance.groups.0.tier", "values": [0, 1]},
            r"sweep point 2/2 .*no switch of tier 1 has ports facing up",
        ),
        # Sampling every 1 ns for 1 s is 10^9 rows.
        (
            {"duration": "1s", "limits": {"memory": "256MiB"}, "telemetry": {"hosts": ["nic0"]}},
            {"parameter": "telemetry.sample_interval", "values": ["1ms", "1ns"]},
            r"sweep point 2/2 \(telemetry.sample_interval=1ns\).*time-series rows",
        ),
    ],
    ids=["bad-value", "drill-samples", "psns", "imbalance-group", "recording"],
)
def test_a_bad_point_is_named_before_anything_runs(
    tiny_scenario: dict[str, Any], tmp_path: Path, changes: dict[str, Any], sweep: dict[str, Any], error: str
) -> None:
    with pytest.raises(ScenarioError, match=error):
        fabricsim.sweep(_with_sweep({**tiny_scenario, **changes}, sweep), output=tmp_path / "sw")
    assert not (tmp_path / "sw").exists()


@pytest.mark.parametrize(
    "sweep",
    [
        {"parameter": BYTES, "values": ["1KiB", "2KiB", "1KiB"]},
        {"parameter": BYTES, "values": ["1KiB", "2KiB", "1024B"]},
        {"grid": {BYTES: ["1KiB", "2KiB", "1KiB"]}},
    ],
    ids=["repeated", "spelled-otherwise", "grid"],
)
def test_a_point_that_repeats_another_is_refused_before_anything_runs(
    tiny_scenario: dict[str, Any], tmp_path: Path, sweep: dict[str, Any]
) -> None:
    # Both would run into the one directory the resolved scenario names.
    with pytest.raises(ScenarioError, match=r"^sweep point 3/3 \(traffic.0.bytes=1.*\): the same scenario as point 1 "):
        fabricsim.sweep(_with_sweep(tiny_scenario, sweep), output=tmp_path / "sw")
    assert not (tmp_path / "sw").exists()


def _grid(tiny: dict[str, Any]) -> dict[str, Any]:
    return _with_sweep(tiny, {"grid": {BYTES: ["16KiB", "64KiB"]}, "seeds": 2})


def _tables(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir())}


def test_a_pool_writes_what_one_process_writes(tiny_scenario: dict[str, Any], tmp_path: Path) -> None:
    alone = fabricsim.sweep(_grid(tiny_scenario), output=tmp_path / "one", jobs=1)
    pooled = fabricsim.sweep(_grid(tiny_scenario), output=tmp_path / "two", jobs=2)
    assert alone.complete and pooled.complete
    names = [p.directory for p in alone.points]
    assert len(set(names)) == 4
    for name in names:
        assert _tables(tmp_path / "one" / name) == _tables(tmp_path / "two" / name), name
    for index in ("sweep.json", "sweep.parquet"):
        assert (tmp_path / "one" / index).read_bytes() == (tmp_path / "two" / index).read_bytes()
    frame = pl.read_parquet(tmp_path / "two" / "sweep.parquet")
    assert frame.columns[:5] == ["sweep_index", "sweep_parameter", "sweep_value", "sweep_seed", BYTES]
    assert not (tmp_path / "two" / INCOMPLETE_MARKER).exists()
    description = json.loads((tmp_path / "two" / "sweep.json").read_text())
    assert [(r["values"][BYTES], r["seed"]) for r in description["runs"]] == [
        ("16KiB", 1),
        ("16KiB", 2),
        ("64KiB", 1),
        ("64KiB", 2),
    ]


def test_a_sweep_run_again_resumes(tiny_scenario: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "sw"
    first = fabricsim.sweep(_grid(tiny_scenario), output=out, jobs=2)
    before = {p.directory: _tables(out / p.directory) for p in first.points}
    lost, stopped, kept = (p.directory for p in first.points[:3])
    # A run that never finished, and one its driver stopped: both run again; the rest is reused.
    for path in (out / lost).iterdir():
        path.unlink()
    (out / lost).rmdir()
    (out / stopped / INCOMPLETE_MARKER).write_text("stopped\n")
    parameters, points = prepare(_grid(tiny_scenario))
    reused: dict[str, bool] = {}
    again = run_into(parameters, points, out, jobs=2, on_run=lambda p, r, was: reused.__setitem__(p.directory, was))
    assert again.complete
    assert reused == {p.directory: p.directory not in (lost, stopped) for p in points}
    assert reused[kept]
    assert {p.directory: _tables(out / p.directory) for p in points} == before


def test_a_grown_sweep_reuses_the_runs_it_had(tiny_scenario: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "sw"
    fabricsim.sweep(_with_sweep(tiny_scenario, {"parameter": BYTES, "values": ["16KiB", "64KiB"]}), output=out)
    grown = _with_sweep(tiny_scenario, {"parameter": BYTES, "values": ["8KiB", "16KiB", "64KiB"]})
    parameters, points = prepare(grown)
    reused: list[bool] = []
    sweep = run_into(parameters, points, out, on_run=lambda p, r, was: reused.append(was))
    assert sorted(reused) == [False, True, True]
    assert sweep.complete
    assert [r["values"][BYTES] for r in json.loads((out / "sweep.json").read_text())["runs"]] == [
        "8KiB",
        "16KiB",
        "64KiB",
    ]


def test_a_run_of_another_version_is_not_reused(tiny_scenario: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "sw"
    scenario = _with_sweep(tiny_scenario, {"parameter": BYTES, "values": ["16KiB"]})
    first = fabricsim.sweep(scenario, output=out)
    run = out / first.points[0].directory
    written = json.loads((run / "scenario.json").read_text())
    (run / "scenario.json").write_text(json.dumps({**written, "fabricsim_version": "0.0.0"}))
    parameters, points = prepare(scenario)
    reused: list[bool] = []
    run_into(parameters, points, out, on_run=lambda p, r, was: reused.append(was))
    assert reused == [False]


def test_overwrite_runs_everything_afresh(tiny_scenario: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "sw"
    fabricsim.sweep(_grid(tiny_scenario), output=out)
    parameters, points = prepare(_grid(tiny_scenario))
    reused: list[bool] = []
    run_into(parameters, points, out, overwrite=True, on_run=lambda p, r, was: reused.append(was))
    assert reused == [False] * 4


def test_a_directory_that_is_not_a_sweeps_is_refused(tiny_scenario: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "mine.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        fabricsim.sweep(_grid(tiny_scenario), output=tmp_path / "sw")


class _Recorder:
    """A batch's progress as a list of what it was told; sends itself SIGINT once `stop_after` runs finished."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.events: list[tuple[str, int]] = []
        self.fractions: dict[int, list[float]] = {}
        self._stop_after = stop_after

    def started(self, index: int, label: str) -> None:
        self.events.append(("started", index))

    def advanced(self, index: int, fraction: float) -> None:
        self.fractions.setdefault(index, []).append(fraction)

    def finished(self, index: int) -> None:
        self.events.append(("finished", index))
        if self._stop_after is not None and sum(e == "finished" for e, _ in self.events) == self._stop_after:
            os.kill(os.getpid(), signal.SIGINT)


def _long(tiny: dict[str, Any], bytes_: str = "256MiB") -> str:
    """A run long enough (about a second) that the core reports progress on the way, five times a second."""
    return to_json({**tiny, "traffic": [{**tiny["traffic"][0], "bytes": bytes_}]})


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_of_each_run_reaches_the_driver(tiny_scenario: dict[str, Any], tmp_path: Path, jobs: int) -> None:
    tasks = [Task(_long(tiny_scenario), tmp_path / f"run{k}", f"run {k}") for k in range(2)]
    recorder = _Recorder()
    ended: dict[int, Finished] = {}
    assert run_batch(tasks, jobs=jobs, on_finished=ended.__setitem__, progress=recorder)
    assert sorted(ended) == [0, 1]
    assert all(f.complete and f.error is None for f in ended.values())
    assert sorted(i for e, i in recorder.events if e == "started") == [0, 1]
    assert set(recorder.fractions) == {0, 1}, "each run reports its simulated time"
    assert all(0.0 <= f <= 1.0 for fs in recorder.fractions.values() for f in fs)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_stopped_batch_loses_no_finished_run(tiny_scenario: dict[str, Any], tmp_path: Path, jobs: int) -> None:
    # The first run is short, the others long: Ctrl-C lands when the first has finished.
    scenarios = [_long(tiny_scenario, "64KiB")] + [_long(tiny_scenario, "1GiB")] * 3
    tasks = [Task(s, tmp_path / f"run{k}", f"run {k}") for k, s in enumerate(scenarios)]
    ended: dict[int, Finished] = {}
    with pytest.raises(Stopped) as info:
        run_batch(tasks, jobs=jobs, on_finished=ended.__setitem__, progress=_Recorder(stop_after=1))
    assert info.value.signum == signal.SIGINT
    assert ended[0].complete
    assert not (tmp_path / "run0" / INCOMPLETE_MARKER).exists()
    # What was running stopped at once and is written, marked; nothing started after the stop.
    for index, how in ended.items():
        if index:
            assert not how.complete
            assert (tmp_path / f"run{index}" / INCOMPLETE_MARKER).exists()
    assert len(ended) == jobs
    assert not (tmp_path / "run3").exists()


def test_a_failed_run_stops_the_batch_and_says_which(tiny_scenario: dict[str, Any], tmp_path: Path) -> None:
    broken = to_json({**tiny_scenario, "topology": {**tiny_scenario["topology"], "radix": 3}})
    tasks = [Task(broken, tmp_path / "bad", "the bad one"), Task(_long(tiny_scenario), tmp_path / "good", "good")]
    ended: dict[int, Finished] = {}
    assert not run_batch(tasks, jobs=1, on_finished=ended.__setitem__)
    assert list(ended) == [0]
    assert isinstance(ended[0].error, ScenarioError)
    assert str(ended[0].error).startswith("the bad one: ")
    assert not (tmp_path / "bad").exists() and not (tmp_path / "good").exists()


def test_jobs_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="--jobs: 0"):
        run_batch([], jobs=0)


def test_a_sweep_on_ray_lands_where_a_local_one_does(tiny_scenario: dict[str, Any], tmp_path: Path) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.skip("Ray is not installed: `pip install fabricsim[ray]` (CI installs it) to run the sweep on Ray")
    local = fabricsim.sweep(_grid(tiny_scenario), output=tmp_path / "local", jobs=2)
    on_ray = fabricsim.sweep(_grid(tiny_scenario), output=tmp_path / "ray", ray="local")
    assert on_ray.complete
    for point in local.points:
        assert _tables(tmp_path / "local" / point.directory) == _tables(tmp_path / "ray" / point.directory)
    assert (tmp_path / "local" / "sweep.parquet").read_bytes() == (tmp_path / "ray" / "sweep.parquet").read_bytes()


def test_an_empty_ray_address_is_bad_input(tiny_scenario: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="--ray: expected an ADDRESS"):
        fabricsim.sweep(_grid(tiny_scenario), output=tmp_path / "sw", ray=" ")
    assert not (tmp_path / "sw").exists()
