"""Jobs and collectives through the `fabricsim` command and the Python API: bad input, run
directories, sweeps, the nccl-tests table, the collective bench case. Runs the core."""

from __future__ import annotations

import copy
import json
import os
import signal
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

import fabricsim
from fabricsim import _core, cli
from fabricsim.results import INCOMPLETE_MARKER
from fabricsim.scenario import builtin_scenario, example_scenarios, load_scenario
from test_cli import BENCH_KEYS

REPO = Path(__file__).resolve().parent.parent

COLLECTIVE_COLUMNS = {
    "job",
    "iteration",
    "phase",
    "group",
    "op",
    "algorithm",
    "ranks",
    "bytes",
    "start_s",
    "end_s",
    "cct_s",
    "algbw_gbps",
    "busbw_gbps",
    "ideal_s",
    "slowdown",
}
STEP_COLUMNS = {"job", "iteration", "start_s", "end_s", "step_time_s"}
NCCL_HEADER = [
    "#       size         count      type     time   algbw   busbw",
    "#        (B)    (elements)               (us)  (GB/s)  (GB/s)",
]
BYTES = "jobs.0.phases.0.collective.bytes"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def job_scenario() -> dict[str, Any]:
    """A 2-tier Clos of radix 4 (8 NICs on 4 ToRs) and a 4-rank ring all-reduce of 64 KiB."""
    return {
        "name": "job",
        "seed": 1,
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"},
        "transport": {"kind": "rocev2"},
        "jobs": [
            {
                "name": "ar",
                "ranks": 4,
                "phases": [{"name": "all_reduce", "collective": {"op": "all_reduce", "bytes": "64KiB"}}],
            }
        ],
    }


@pytest.fixture
def sweep_scenario(job_scenario: dict[str, Any]) -> dict[str, Any]:
    return job_scenario | {"name": "sw", "sweep": {"parameter": BYTES, "values": ["8B", "4KiB", "256KiB"]}}


def fabricsim_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _bad_input(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], err


def _phase(scenario: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return scenario["jobs"][0]["phases"][index]


def _bad(scenario: dict[str, Any], edit: str) -> dict[str, Any]:
    """`scenario` with one mistake, named by `edit`."""
    bad = copy.deepcopy(scenario)
    job = bad["jobs"][0]
    collective = job["phases"][0]["collective"]
    if edit == "op":
        collective["op"] = "all_reduse"
    elif edit == "bytes":
        collective["bytes"] = "64"
    elif edit == "too_many_ranks":
        job["ranks"] = 64
    elif edit == "explicit_nic":
        job["placement"] = {"explicit": [0, 1, 2, 99]}
    elif edit == "t0_local":
        job["placement"] = "t0_local"
    elif edit == "group":
        collective["group"] = {"size": 3}
    elif edit == "root":
        collective.update(op="broadcast", root=9)
    elif edit == "matrix":
        collective.update(op="all_to_allv", matrix=[["1KiB"] * 3] * 3)
        del collective["bytes"]
    elif edit == "after_self":
        job["phases"][0]["after"] = ["all_reduce"]
    elif edit == "after_unknown":
        job["phases"].append({"name": "later", "after": ["nowhere"], "compute": "1us"})
    elif edit == "cycle":
        job["phases"][0]["after"] = ["later"]
        job["phases"].append({"name": "later", "after": ["all_reduce"], "compute": "1us"})
    return bad


@pytest.mark.parametrize(
    ("edit", "fragments"),
    [
        ("op", ["jobs[0].phases[0].collective.op", "all_reduse"]),
        ("bytes", ["jobs[0].phases[0].collective.bytes", "64"]),
        ("too_many_ranks", ["jobs[0]", "64"]),
        ("explicit_nic", ["jobs[0].placement", "99"]),
        ("t0_local", ["jobs[0].placement", "ToR"]),
        ("group", ["jobs[0].phases[0].collective.group", "3"]),
        ("root", ["jobs[0].phases[0].collective.root", "9"]),
        ("matrix", ["jobs[0].phases[0].collective.matrix", "3"]),
        ("after_self", ["jobs[0].phases[0].after", "all_reduce"]),
        ("after_unknown", ["jobs[0].phases[1].after", "nowhere"]),
        ("cycle", ["jobs[0].phases", "after"]),
    ],
)
def test_bad_job_exits_2_naming_field_and_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, job_scenario: dict[str, Any], edit: str, fragments: list[str]
) -> None:
    path = _write_yaml(tmp_path / "bad.yaml", _bad(job_scenario, edit))
    code, out, err = fabricsim_cli(capsys, "run", path)
    assert code == 2, out + err
    _bad_input(err, *fragments)
    assert not (tmp_path / "runs").exists()


def test_run_of_a_job_writes_collectives_and_steps(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, job_scenario: dict[str, Any]
) -> None:
    path = _write_yaml(tmp_path / "job.yaml", job_scenario)
    code, out, err = fabricsim_cli(capsys, "run", path, "--csv")
    assert code == 0, err
    run_dir = Path("runs/job")
    names = {p.name for p in run_dir.iterdir()}
    assert {"collectives.parquet", "steps.parquet", "collectives.csv", "steps.csv"} <= names
    # Transfers are recorded only on request (telemetry.transfers).
    assert "transfers.parquet" not in names or pl.read_parquet(run_dir / "transfers.parquet").height == 0
    collectives = pl.read_parquet(run_dir / "collectives.parquet")
    assert set(collectives.columns) >= COLLECTIVE_COLUMNS
    assert collectives.height == 1
    assert collectives["op"].to_list() == ["all_reduce"]
    assert collectives["bytes"].to_list() == [64 * 1024]
    assert set(pl.read_parquet(run_dir / "steps.parquet").columns) >= STEP_COLUMNS
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["jobs"]["ar"]) >= {"ranks", "jct_s", "ideal_jct_s", "jct_slowdown"}
    assert "jobs" in out


def test_transfers_are_recorded_on_request(job_scenario: dict[str, Any]) -> None:
    results = fabricsim.run(job_scenario, overrides={"telemetry.transfers": True})
    assert results.transfers.height > 0
    assert results.collectives.height == 1
    assert results.steps.height == 1
    assert "transfers" in results.frames


def test_python_api_refuses_to_run_a_sweep_once(sweep_scenario: dict[str, Any]) -> None:
    with pytest.raises(fabricsim.ScenarioError, match=r"fabricsim\.sweep"):
        fabricsim.run(sweep_scenario)


def test_python_api_sweep(sweep_scenario: dict[str, Any]) -> None:
    sweep = fabricsim.sweep(sweep_scenario)
    assert sweep.complete
    assert len(sweep.runs) == 3
    assert sweep.values == ["8B", "4KiB", "256KiB"]
    frame = sweep.collectives
    assert frame["sweep_value"].to_list() == ["8B", "4KiB", "256KiB"]
    assert frame["bytes"].to_list() == [8, 4096, 256 * 1024]
    assert sweep.table().splitlines()[2:4] == NCCL_HEADER


def _run_dirs(sweep_dir: Path) -> list[str]:
    """The run directories of a sweep directory, in the order of its points."""
    return [r["directory"] for r in json.loads((sweep_dir / "sweep.json").read_text())["runs"]]


def test_sweep_from_the_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sweep_scenario: dict[str, Any]
) -> None:
    path = _write_yaml(tmp_path / "sw.yaml", sweep_scenario)
    code, out, err = fabricsim_cli(capsys, "run", path, "--plot")
    assert code == 0, err
    out_dir = Path("runs/sw")
    runs = _run_dirs(out_dir)
    assert {p.name for p in out_dir.iterdir()} == {*runs, "sweep.parquet", "sweep.json", "busbw.png"}
    for run in runs:
        assert (out_dir / run / "collectives.parquet").exists()
        assert not (out_dir / run / INCOMPLETE_MARKER).exists()
        assert json.loads((out_dir / run / "scenario.json").read_text()).get("sweep") is None
    combined = pl.read_parquet(out_dir / "sweep.parquet")
    assert combined["sweep_value"].to_list() == ["8B", "4KiB", "256KiB"]
    assert set(combined["sweep_parameter"]) == {BYTES}
    lines = out.splitlines()
    header = lines.index(NCCL_HEADER[0])
    assert lines[header + 1] == NCCL_HEADER[1]
    rows = [line.split() for line in lines[header + 2 : header + 5]]
    assert [r[:3] for r in rows] == [["8", "2", "float"], ["4096", "1024", "float"], ["262144", "65536", "float"]]
    assert "results: runs/sw" in out


def test_sweep_stopped_by_ctrl_c_keeps_what_ran_and_resumes(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    sweep_scenario: dict[str, Any],
) -> None:
    real_run = _core.run
    calls = []

    def ctrl_c_during_second_run(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(_core, "run", ctrl_c_during_second_run)
    path = _write_yaml(tmp_path / "sw.yaml", sweep_scenario)
    # In this process (-j 1), where the stand-in for the core is.
    code, out, _ = fabricsim_cli(capsys, "run", path, "-j", "1")
    assert code == 130
    assert len(calls) == 2
    out_dir = Path("runs/sw")
    runs = _run_dirs(out_dir)
    assert (out_dir / INCOMPLETE_MARKER).exists()
    # The second run was too short to be stopped: it finished, and is kept whole; the third never started.
    assert not (out_dir / runs[1] / INCOMPLETE_MARKER).exists()
    assert not (out_dir / runs[2]).exists()
    assert json.loads((out_dir / "sweep.json").read_text())["complete"] is False
    assert pl.read_parquet(out_dir / "sweep.parquet")["sweep_value"].to_list() == ["8B", "4KiB"]
    assert "run it again to resume" in out

    code, out, _ = fabricsim_cli(capsys, "run", path, "-j", "1")
    assert code == 0
    assert len(calls) == 3
    assert out.count("(reused)") == 2
    assert not (out_dir / INCOMPLETE_MARKER).exists()


def test_sweep_into_an_existing_directory_needs_overwrite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sweep_scenario: dict[str, Any]
) -> None:
    path = _write_yaml(tmp_path / "sw.yaml", sweep_scenario)
    Path("out").mkdir()
    code, out, err = fabricsim_cli(capsys, "run", path, "-o", "out")
    assert code == 2
    _bad_input(err, "out", "--overwrite")
    assert out == ""
    assert list(Path("out").iterdir()) == []
    assert fabricsim_cli(capsys, "run", path, "-o", "out", "--overwrite")[0] == 0


def test_sweep_is_deterministic(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sweep_scenario: dict[str, Any]
) -> None:
    path = _write_yaml(tmp_path / "sw.yaml", sweep_scenario)
    assert fabricsim_cli(capsys, "run", path, "-o", "a")[0] == 0
    assert fabricsim_cli(capsys, "run", path, "-o", "b")[0] == 0
    assert Path("a/sweep.parquet").read_bytes() == Path("b/sweep.parquet").read_bytes()
    second = _run_dirs(Path("a"))[1]
    assert _run_dirs(Path("b"))[1] == second
    assert Path(f"a/{second}/collectives.parquet").read_bytes() == Path(f"b/{second}/collectives.parquet").read_bytes()


@pytest.mark.parametrize(
    ("values", "fragments"),
    [
        (["8B", "8X", "1KiB"], ["jobs[0].phases[0].collective.bytes", "8X"]),
        (["8B", 1024], ["jobs[0].phases[0].collective.bytes", "1024"]),
    ],
)
def test_a_bad_sweep_value_writes_nothing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    sweep_scenario: dict[str, Any],
    values: list[Any],
    fragments: list[str],
) -> None:
    sweep_scenario["sweep"]["values"] = values
    path = _write_yaml(tmp_path / "sw.yaml", sweep_scenario)
    code, out, err = fabricsim_cli(capsys, "run", path)
    assert code == 2
    _bad_input(err, *fragments)
    assert out == ""
    assert not Path("runs").exists()


def test_a_malformed_sweep_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sweep_scenario: dict[str, Any]
) -> None:
    path = _write_yaml(tmp_path / "sw.yaml", sweep_scenario)
    code, _, err = fabricsim_cli(capsys, "run", path, "-s", "sweep.parameter=jobs.4.ranks")
    assert code == 2
    _bad_input(err, "sweep.parameter", "jobs.4")
    assert not Path("runs").exists()


def test_a_sweep_over_an_unknown_field_names_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sweep_scenario: dict[str, Any]
) -> None:
    path = _write_yaml(tmp_path / "sw.yaml", sweep_scenario)
    code, _, err = fabricsim_cli(capsys, "run", path, "-s", "sweep.parameter=jobs.0.phases.0.collective.bites")
    assert code == 2
    _bad_input(err, "bites")


def test_plot_needs_a_sweep(capsys: pytest.CaptureFixture[str], tmp_path: Path, job_scenario: dict[str, Any]) -> None:
    path = _write_yaml(tmp_path / "job.yaml", job_scenario)
    code, _, err = fabricsim_cli(capsys, "run", path, "--plot")
    assert code == 2
    _bad_input(err, "--plot")
    assert not Path("runs").exists()


def test_bench_collective_case(capsys: pytest.CaptureFixture[str]) -> None:
    # The built-in case, cut down to 16 ranks to keep the test fast.
    code, out, err = fabricsim_cli(
        capsys, "bench", "--case", "collective", "--json", "-s", "topology.nics=16", "-s", "jobs.0.ranks=16"
    )
    assert code == 0, err
    report = json.loads(out)
    assert set(report) == BENCH_KEYS
    assert report["packet_hops"] > 0


def test_bench_mrc_8k_case(capsys: pytest.CaptureFixture[str]) -> None:
    # The built-in case is bench_mrc.yaml at radix 32 (8,192 hosts); cut down to radix 8 (128 hosts) and 64 KB
    # here, it must still be the MRC case: trimming on, no PFC, the permutation over every host.
    code, out, err = fabricsim_cli(
        capsys, "bench", "--case", "mrc-8k", "--json", "-s", "topology.radix=8", "-s", "traffic.0.bytes=64KB"
    )
    assert code == 0, err
    report = json.loads(out)
    assert set(report) == BENCH_KEYS
    scenario = load_scenario(builtin_scenario("bench_mrc_8k"))
    assert scenario["topology"]["radix"] == 32
    assert scenario["transport"]["kind"] == "mrc" and scenario["switch"]["trimming"]["enabled"]
    assert report["packet_hops"] > 0


def test_bench_flow_mode_case(capsys: pytest.CaptureFixture[str]) -> None:
    # The built-in case (131,072 NICs), cut down to radix 16 (128 NICs) to keep the test fast.
    code, out, err = fabricsim_cli(
        capsys, "bench", "--case", "flow-mode", "--json", "-s", "topology.radix=16", "-s", "jobs.0.ranks=128"
    )
    assert code == 0, err
    report = json.loads(out)
    flow_keys = {"wall_s", "events_per_s", "peak_rss_bytes", "events", "sim_time_s", "rate_computations", "streams"}
    assert set(report) == flow_keys
    # Each channel's ring is one stream: the run is a handful of events.
    assert report["streams"] == 2
    assert report["sim_time_s"] > 0


def test_bench_all_cases_keeps_the_reference_keys_on_top(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_child(case: str, overrides: Any) -> dict[str, Any]:
        return dict.fromkeys(BENCH_KEYS, 1.0 if case == "flows" else 2.0)

    monkeypatch.setattr(cli, "_bench_in_child", fake_child)
    code, out, err = fabricsim_cli(capsys, "bench", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert set(report) == BENCH_KEYS | {"collective", "mrc", "mrc-8k", "spx", "flow-mode"}
    assert report["wall_s"] == 1.0
    assert report["collective"] == report["mrc"] == report["mrc-8k"] == report["spx"] == dict.fromkeys(BENCH_KEYS, 2.0)
    assert report["flow-mode"] == dict.fromkeys(BENCH_KEYS, 2.0)
    code, out, _ = fabricsim_cli(capsys, "bench")
    assert code == 0
    assert "fabricsim bench: flows" in out
    assert "fabricsim bench: collective" in out
    assert "fabricsim bench: mrc" in out


def test_bench_takes_a_scenario_or_a_case(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, job_scenario: dict[str, Any]
) -> None:
    path = _write_yaml(tmp_path / "job.yaml", job_scenario)
    code, _, err = fabricsim_cli(capsys, "bench", path, "--case", "flows")
    assert code == 2
    _bad_input(err, "--case")


def test_a_failing_bench_child_passes_its_exit_code_on(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_bench_in_child", lambda case, overrides: 2)
    code, out, _ = fabricsim_cli(capsys, "bench", "--json")
    assert code == 2
    assert out == ""


def test_sweep_of_flows_prints_a_summary_per_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario: dict[str, Any]
) -> None:
    tiny_scenario["sweep"] = {"parameter": "traffic.0.bytes", "values": ["4KiB", "64KiB"]}
    path = _write_yaml(tmp_path / "flows.yaml", tiny_scenario)
    code, out, err = fabricsim_cli(capsys, "run", path)
    assert code == 0, err
    assert "fabricsim sweep: tiny over traffic.0.bytes" in out
    assert "8 / 8" in out
    runs = _run_dirs(Path("runs/tiny"))
    assert {p.name for p in Path("runs/tiny").iterdir()} == {*runs, "sweep.parquet", "sweep.json"}
    assert pl.read_parquet(f"runs/tiny/{runs[1]}/flows.parquet")["bytes"].to_list() == [64 * 1024] * 8


@pytest.mark.parametrize("design", ["mrc", "spectrum-x"])
def test_an_uncontended_ring_over_nics_sharing_hosts_is_not_faster_than_its_ideal(design: str) -> None:
    # Two NICs a host: each ring has hops over the intra-host link and over the network at once. The ideal's
    # bandwidth bound is the busier of the two, not their sum (which put a pristine ring below its ideal).
    scenario = example_scenarios()["compare/uplink_down_midrun"]
    results = fabricsim.run(scenario, overrides=[f"design={design}", "faults=[]"])
    (slowdown,) = results.collectives["slowdown"].to_list()
    assert 1.0 <= slowdown < 1.005
