"""The `fabricsim` command: bad input, outputs, determinism, topo, bench, schema. Runs the core."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

import fabricsim
from fabricsim import _core, cli
from fabricsim.results import INCOMPLETE_MARKER

REPO = Path(__file__).resolve().parent.parent

SUMMARY_KEYS = {
    "sim_time_s",
    "events",
    "packet_hops",
    "flows",
    "flows_completed",
    "fct_p50_us",
    "fct_p99_us",
    "fct_max_us",
    "goodput_gbps",
    "drops",
    "drops_by_cause",
    "ecn_marks",
    "trims",
    "pauses_sent",
    "paused_time_s",
    "qp_errors",
}
FLOW_COLUMNS = {
    "flow",
    "src",
    "dst",
    "bytes",
    "start_s",
    "end_s",
    "fct_s",
    "ideal_fct_s",
    "slowdown",
    "retransmitted_packets",
    "timeouts",
    "qp_errors",
}
TOPO_KEYS = {
    "nics",
    "nic_ports",
    "switches_total",
    "switches_per_tier",
    "links_total",
    "transceivers",
    "bisection_bps",
    "path_space",
}
BENCH_KEYS = {
    "wall_s",
    "events_per_s",
    "packet_hops_per_s",
    "peak_rss_bytes",
    "events",
    "packet_hops",
    "sim_time_s",
    "threads",
}


def fabricsim_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _bad_input(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], err


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_unknown_key_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario: dict[str, Any]
) -> None:
    tiny_scenario["topology"]["raddix"] = 4
    path = _write_yaml(tmp_path / "bad.yaml", tiny_scenario)
    code, _, err = fabricsim_cli(capsys, "run", path)
    assert code == 2
    _bad_input(err, "raddix")
    assert not (tmp_path / "runs").exists()


def test_unknown_top_level_key_exits_2(capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path) -> None:
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-s", "trafic.0.bytes=1MB")
    assert code == 2
    _bad_input(err, "trafic")
    assert not Path("runs").exists()


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        ("topology.link_rate=100", "topology.link_rate", "100"),
        ("topology.link_rate=100Gbit", "topology.link_rate", "100Gbit"),
        ("topology.link_rate=0Gbps", "topology.link_rate", "0Gbps"),
        ("traffic.0.bytes=64", "bytes", "64"),
    ],
)
def test_value_without_or_with_wrong_unit_names_field_and_value(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path, override: str, field: str, value: str
) -> None:
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-s", override)
    assert code == 2
    _bad_input(err, field, value)
    assert not Path("runs").exists()


def test_radix_that_cannot_build_exits_2(capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path) -> None:
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-s", "topology.radix=3")
    assert code == 2
    _bad_input(err, "radix", "3")


def test_missing_scenario_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fabricsim_cli(capsys, "run", "nowhere.yaml")
    assert code == 2
    _bad_input(err, "nowhere.yaml")
    assert not Path("runs").exists()


def test_yaml_syntax_error_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntopology: {kind: clos\n")
    code, _, err = fabricsim_cli(capsys, "run", bad)
    assert code == 2
    _bad_input(err, "bad.yaml", "line")


def test_malformed_override_exits_2(capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path) -> None:
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-s", "seed")
    assert code == 2
    _bad_input(err, "dotted.key=value")


def test_existing_output_directory_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario_file: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-o", out)
    assert code == 2
    _bad_input(err, str(out), "--overwrite")
    assert _files(out) == {"keep.txt": b"mine"}


def test_run_writes_the_run_directory(capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path) -> None:
    code, out, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "--csv")
    assert code == 0, err
    run_dir = Path("runs/tiny")
    assert str(run_dir) in out
    assert "FCT p99" in out
    names = set(_files(run_dir))
    assert {"scenario.json", "summary.json", "flows.parquet", "ports.parquet"} <= names
    assert {"flows.csv", "ports.csv"} <= names
    # Only tables with rows: nothing was sampled, no job ran.
    assert not {"timeseries.parquet", "collectives.parquet", "ev_log.parquet"} & names
    assert all(pl.read_parquet(run_dir / n).height > 0 for n in names if n.endswith(".parquet"))
    assert INCOMPLETE_MARKER not in names
    assert not [n for n in names if n.endswith(".tmp")]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] is True
    assert set(summary) >= SUMMARY_KEYS
    assert summary["flows_completed"] == summary["flows"] == 8
    scenario = json.loads((run_dir / "scenario.json").read_text())
    assert scenario["seed"] == 1
    assert scenario["fabricsim_version"] == fabricsim.__version__


def test_unnamed_scenario_runs_under_its_file_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario: dict[str, Any]
) -> None:
    del tiny_scenario["name"]
    path = _write_yaml(tmp_path / "exp1.yaml", tiny_scenario)
    code, _, err = fabricsim_cli(capsys, "run", path)
    assert code == 0, err
    assert json.loads(Path("runs/exp1/scenario.json").read_text())["name"] == "exp1"


def test_rerun_needs_overwrite(capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path) -> None:
    assert fabricsim_cli(capsys, "run", tiny_scenario_file)[0] == 0
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file)
    assert code == 2
    _bad_input(err, "runs/tiny")
    assert fabricsim_cli(capsys, "run", tiny_scenario_file, "--overwrite")[0] == 0


def test_seed_and_overrides_reach_the_resolved_scenario(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path
) -> None:
    code, _, err = fabricsim_cli(
        capsys, "run", tiny_scenario_file, "--seed", "5", "-s", "traffic.0.bytes=128KiB", "-s", "name=other"
    )
    assert code == 0, err
    scenario = json.loads(Path("runs/other/scenario.json").read_text())
    assert scenario["seed"] == 5
    assert set(pl.read_parquet("runs/other/flows.parquet")["bytes"].to_list()) == {128 * 1024}


def test_same_scenario_and_seed_give_identical_files(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path
) -> None:
    assert fabricsim_cli(capsys, "run", tiny_scenario_file, "-o", "a", "--csv")[0] == 0
    assert fabricsim_cli(capsys, "run", tiny_scenario_file, "-o", "b", "--csv")[0] == 0
    first, second = _files(Path("a")), _files(Path("b"))
    assert first.keys() == second.keys()
    for name in first:
        assert first[name] == second[name], f"{name} differs between two runs with the same seed"


def test_written_scenario_reruns_to_identical_results(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path
) -> None:
    assert fabricsim_cli(capsys, "run", tiny_scenario_file, "-o", "a")[0] == 0
    assert fabricsim_cli(capsys, "run", "a/scenario.json", "-o", "b")[0] == 0
    assert _files(Path("a")) == _files(Path("b"))


def test_python_api_runs_a_dict(tiny_scenario: dict[str, Any]) -> None:
    results = fabricsim.run(tiny_scenario, overrides=["seed=2"])
    assert results.complete
    assert results.scenario["seed"] == 2
    assert set(results.flows.columns) >= FLOW_COLUMNS
    assert results.flows.height == 8
    assert results.flows["fct_s"].null_count() == 0
    assert {"node", "port", "tx_bytes", "max_queue_bytes"} <= set(results.ports.columns)
    assert {"time_s", "entity", "metric", "value"} <= set(results.timeseries.columns)
    assert set(results.summary) >= SUMMARY_KEYS


def test_python_api_reports_scenario_errors(tiny_scenario: dict[str, Any]) -> None:
    with pytest.raises(fabricsim.ScenarioError, match=r"topology\.link_rate"):
        fabricsim.run(tiny_scenario, overrides={"topology.link_rate": "fast"})
    assert issubclass(fabricsim.ScenarioError, ValueError)
    assert issubclass(fabricsim.SimulationError, RuntimeError)


def test_simulator_failure_exits_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tiny_scenario_file: Path
) -> None:
    def panicking_run(*_: Any, **__: Any) -> Any:
        raise _core.SimulationError("index out of bounds")

    monkeypatch.setattr(_core, "run", panicking_run)
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file)
    assert code == 3
    assert err.startswith("error: internal simulator error: index out of bounds")
    assert not Path("runs").exists()


def test_stopped_run_is_written_incomplete(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tiny_scenario_file: Path
) -> None:
    real_run = _core.run

    def stopped_run(*args: Any, **kwargs: Any) -> Any:
        raw = real_run(*args, **kwargs)
        return {**raw, "complete": False}

    monkeypatch.setattr(_core, "run", stopped_run)
    code, out, _ = fabricsim_cli(capsys, "run", tiny_scenario_file)
    assert code == 130
    assert "incomplete" in out
    assert (Path("runs/tiny") / INCOMPLETE_MARKER).exists()
    assert json.loads(Path("runs/tiny/summary.json").read_text())["complete"] is False


def _signal_a_long_run(tmp_path: Path, scenario: Path, signum: int) -> tuple[int, str, str]:
    """Starts a run that would take minutes, sends it `signum` after 2 s; its exit code, stdout and stderr."""
    # The child installs Python's SIGINT handler itself: a test runner started
    # in the background may pass SIGINT on as ignored, and Python keeps that.
    launcher = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from fabricsim.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", launcher, "run", str(scenario), "-o", "long", "-s", "traffic.0.bytes=100GB"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2.0)
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the run did not stop within 60 s of signal {signum}")
    summary = json.loads((tmp_path / "long" / "summary.json").read_text())
    assert (tmp_path / "long" / INCOMPLETE_MARKER).exists()
    assert summary["complete"] is False
    assert summary["sim_time_s"] > 0
    assert "Traceback" not in err
    return proc.returncode, out, err


def test_ctrl_c_stops_a_long_run(tmp_path: Path, tiny_scenario_file: Path) -> None:
    """A real SIGINT to a run that would take minutes: results kept, marked incomplete, exit 130."""
    code, _, err = _signal_a_long_run(tmp_path, tiny_scenario_file, signal.SIGINT)
    assert code == 130, err


def test_sigterm_stops_a_long_run_like_ctrl_c(tmp_path: Path, tiny_scenario_file: Path) -> None:
    """SIGTERM (`timeout`, a scheduler) to a run that would take minutes: results kept, marked incomplete, exit 143."""
    code, out, err = _signal_a_long_run(tmp_path, tiny_scenario_file, signal.SIGTERM)
    assert code == 143, err
    assert "stopped by SIGTERM" in out


def test_sigterm_before_the_run_stops_the_command_with_143(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tiny_scenario_file: Path
) -> None:
    def resolve_then_sigterm(*_: Any, **__: Any) -> Any:
        # Delivered by hand: were SIGTERM not handled, a real one would end the test run.
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler), "SIGTERM is not handled while the command runs"
        handler(signal.SIGTERM, None)

    monkeypatch.setattr(_core, "resolve", resolve_then_sigterm)
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file)
    assert code == 143
    _bad_input(err, "terminated by SIGTERM")
    assert not Path("runs").exists()


def test_sigterm_handler_is_put_back_after_the_command(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    assert fabricsim_cli(capsys, "topo", tiny_scenario_file)[0] == 0
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.fixture
def sigint_handled() -> Iterator[None]:
    """Python's own SIGINT handler: a test runner started in the background may have inherited SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("sigint_handled")
def test_a_signal_while_results_are_written_waits_for_them() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), cli.deferred_signals():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler has run by now, and only held the signal
        done.append("written")
    assert done == ["written"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("sigint_handled")
def test_interrupt_after_the_run_still_writes_the_results(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tiny_scenario_file: Path
) -> None:
    real_run = _core.run

    def run_then_ctrl_c(text: str, progress: Any, *args: Any, **kwargs: Any) -> Any:
        raw = real_run(text, None, *args, **kwargs)
        # As the core does for a run longer than 0.2 s: it reported progress ...
        progress(1.0)
        # ... then Ctrl-C lands while it makes its output (Python code: json.loads).
        os.kill(os.getpid(), signal.SIGINT)
        return raw

    monkeypatch.setattr(_core, "run", run_then_ctrl_c)
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file)
    assert code == 130
    _bad_input(err, "interrupted")
    summary = json.loads(Path("runs/tiny/summary.json").read_text())
    assert summary["complete"] is True
    assert not (Path("runs/tiny") / INCOMPLETE_MARKER).exists()


def _core_reports(monkeypatch: pytest.MonkeyPatch, reason: str, complete: bool) -> None:
    """Makes the core's runs say they ended for `reason`, complete or not."""
    real_run = _core.run

    def reasoned_run(*args: Any, **kwargs: Any) -> Any:
        raw = real_run(*args, **kwargs)
        return {**raw, "complete": complete, "summary": {**raw["summary"], "stop_reason": reason}}

    monkeypatch.setattr(_core, "run", reasoned_run)


@pytest.mark.parametrize("reason", ["time_limit", "livelock", "stalled", "memory_limit"])
def test_run_stopped_by_a_limit_exits_5_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tiny_scenario_file: Path, reason: str
) -> None:
    _core_reports(monkeypatch, reason, complete=False)
    code, out, err = fabricsim_cli(capsys, "run", tiny_scenario_file)
    assert code == 5
    _bad_input(err, reason, "runs/tiny")
    assert f"stopped early: {reason}" in out
    assert (Path("runs/tiny") / INCOMPLETE_MARKER).exists()
    summary = json.loads(Path("runs/tiny/summary.json").read_text())
    assert summary["complete"] is False
    assert summary["stop_reason"] == reason


@pytest.mark.parametrize(
    ("override", "reason"),
    [("limits.sim_time=5us", "time_limit"), ("limits.events_per_instant=2", "livelock")],
)
def test_the_cores_own_limits_end_a_real_run_with_exit_5(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path, override: str, reason: str
) -> None:
    code, out, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-s", override)
    assert code == 5, err
    assert reason in err
    assert f"stopped early: {reason}" in out
    summary = json.loads(Path("runs/tiny/summary.json").read_text())
    assert (summary["complete"], summary["stop_reason"]) == (False, reason)
    assert (Path("runs/tiny") / INCOMPLETE_MARKER).exists()


def test_a_scenario_too_large_for_the_memory_is_refused_before_running(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path
) -> None:
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-s", "transport.qps=100000000")
    assert code == 2
    _bad_input(err, "scenario: needs about", "QPs", "available")
    assert not Path("runs/tiny").exists()


@pytest.mark.parametrize(("reason", "complete", "code"), [("interrupted", False, 130), ("duration", True, 0)])
def test_other_stop_reasons_keep_their_exit_codes(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tiny_scenario_file: Path,
    reason: str,
    complete: bool,
    code: int,
) -> None:
    _core_reports(monkeypatch, reason, complete)
    assert fabricsim_cli(capsys, "run", tiny_scenario_file)[0] == code


def _sweep_file(tmp_path: Path, tiny_scenario: dict[str, Any]) -> Path:
    tiny_scenario["sweep"] = {"parameter": "traffic.0.bytes", "values": ["64KiB", "128KiB", "256KiB"]}
    return _write_yaml(tmp_path / "sw.yaml", tiny_scenario)


def test_sweep_keeps_the_runs_before_a_point_that_fails(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tiny_scenario: dict[str, Any],
) -> None:
    real_run = _core.run
    calls = []

    def second_run_fails(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise _core.SimulationError("internal error: index out of bounds")
        return real_run(*args, **kwargs)

    monkeypatch.setattr(_core, "run", second_run_fails)
    # In this process (-j 1), where the stand-in for the core is.
    code, _, err = fabricsim_cli(capsys, "run", _sweep_file(tmp_path, tiny_scenario), "-o", "sw", "-j", "1")
    assert code == 3
    _bad_input(err, "internal simulator error", "point 2/3", "traffic.0.bytes=128KiB", "index out of bounds")
    assert len(calls) == 2
    out = Path("sw")
    assert (out / INCOMPLETE_MARKER).exists()
    description = json.loads((out / "sweep.json").read_text())
    first = description["runs"][0]["directory"]
    assert {p.name for p in out.iterdir() if p.is_dir()} == {first}
    assert json.loads((out / first / "summary.json").read_text())["complete"] is True
    assert description["complete"] is False
    assert [r["state"] for r in description["runs"]] == ["complete", "failed", "not run"]
    assert description["failure"]["index"] == 1
    assert description["failure"]["value"] == "128KiB"
    assert "index out of bounds" in description["failure"]["error"]


def test_sweep_stopped_by_a_limit_exits_5_naming_the_point(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tiny_scenario: dict[str, Any],
) -> None:
    real_run = _core.run

    def livelocked(*args: Any, **kwargs: Any) -> Any:
        raw = real_run(*args, **kwargs)
        return {**raw, "complete": False, "summary": {**raw["summary"], "stop_reason": "livelock"}}

    monkeypatch.setattr(_core, "run", livelocked)
    code, _, err = fabricsim_cli(capsys, "run", _sweep_file(tmp_path, tiny_scenario), "-o", "sw", "-j", "1")
    assert code == 5
    _bad_input(err, "traffic.0.bytes=64KiB", "livelock")
    assert (Path("sw") / INCOMPLETE_MARKER).exists()
    first = json.loads((Path("sw") / "sweep.json").read_text())["runs"][0]["directory"]
    assert (Path("sw") / first / INCOMPLETE_MARKER).exists()


def test_topo_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = fabricsim_cli(capsys, "topo", REPO / "scenarios/topologies/fat_tree_k16.yaml", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert set(report) == TOPO_KEYS
    assert report["nics"] == 1024
    assert isinstance(report["switches_per_tier"], list)


def test_topo_table(capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path) -> None:
    code, out, err = fabricsim_cli(capsys, "topo", tiny_scenario_file)
    assert code == 0, err
    assert "NICs" in out
    assert "transceivers" in out


def test_topo_bad_input_exits_2(capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path) -> None:
    code, _, err = fabricsim_cli(capsys, "topo", tiny_scenario_file, "-s", "topology.radix=-4")
    assert code == 2
    _bad_input(err, "radix")


def test_bench_json_keys(capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path) -> None:
    code, out, err = fabricsim_cli(capsys, "bench", tiny_scenario_file, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert set(report) == BENCH_KEYS
    assert report["wall_s"] > 0
    assert report["packet_hops"] > 0
    assert report["peak_rss_bytes"] > 1 << 20


def test_bench_repeat_reports_the_median_run_and_the_range(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path
) -> None:
    code, out, err = fabricsim_cli(capsys, "bench", tiny_scenario_file, "--repeat", "3", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert set(report) == BENCH_KEYS | {"wall_s_min", "wall_s_max", "runs_wall_s"}
    walls = report["runs_wall_s"]
    assert len(walls) == 3
    assert report["wall_s"] == sorted(walls)[1]
    assert (report["wall_s_min"], report["wall_s_max"]) == (min(walls), max(walls))
    assert report["packet_hops_per_s"] == pytest.approx(report["packet_hops"] / report["wall_s"])


def test_bench_and_run_on_two_threads(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path, tmp_path: Path
) -> None:
    code, out, err = fabricsim_cli(capsys, "bench", tiny_scenario_file, "--threads", "2", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["threads"] == 2
    code, out, err = fabricsim_cli(capsys, "bench", tiny_scenario_file, "--json")
    assert code == 0, err
    assert json.loads(out)["threads"] == 1
    runs = []
    for name in ("a", "b"):
        code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "--threads", "2", "-o", tmp_path / name)
        assert code == 0, err
        runs.append(_files(tmp_path / name))
    assert runs[0] == runs[1], "a run on two threads replays itself byte for byte"


def test_two_threads_refuse_faults_with_exit_2(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path, tmp_path: Path
) -> None:
    fault = "faults=[{kind: link_down, at: 1us, port: 'nic0:0'}]"
    code, _, err = fabricsim_cli(
        capsys, "run", tiny_scenario_file, "--threads", "2", "-s", fault, "-o", tmp_path / "out"
    )
    assert code == 2
    _bad_input(err, "threads: 2", "faults")
    assert not (tmp_path / "out").exists(), "nothing half-written"


def test_bench_repeat_refuses_a_count_out_of_range(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path
) -> None:
    code, _, err = fabricsim_cli(capsys, "bench", tiny_scenario_file, "--repeat", "0")
    assert code == 2
    _bad_input(err, "--repeat")


def test_bench_repeat_takes_runs_that_disagree_for_a_fault() -> None:
    run = {"wall_s": 1.0, "events": 10, "packet_hops": 5, "peak_rss_bytes": 1}
    assert isinstance(cli._bench_repeated([run, {**run, "wall_s": 2.0}]), dict)
    verdict = cli._bench_repeated([run, {**run, "events": 11}])
    assert isinstance(verdict, str) and "different events" in verdict


def test_schema_is_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fabricsim_cli(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    assert "properties" in schema
    assert {"topology", "traffic", "transport", "seed"} <= set(schema["properties"])


def test_console_script_runs_the_builtin_default(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "120"}
    proc = subprocess.run(
        [sys.executable, "-m", "fabricsim", "run"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert (tmp_path / "runs" / "default" / "summary.json").exists()


def test_run_prints_the_cores_warnings_on_stderr(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # More QPs than the ToR has disjoint uplinks: a warning with the number found, not an error.
    scenario = {
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"},
        "nic": {"path_selection": "disjoint"},
        "transport": {"kind": "rocev2", "qps": 3},
        "traffic": [{"kind": "flow", "src": 0, "dst": 7, "bytes": "64KiB"}],
    }
    path = tmp_path / "disjoint.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    code, _, err = fabricsim_cli(capsys, "run", path, "-o", tmp_path / "out")
    assert code == 0, err
    assert "warning: nic.path_selection: disjoint: 1 of 1 connections found fewer disjoint paths than QPs" in err
    assert "fewest: 2 of 3" in err


def test_report_of_a_run_from_the_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario_file: Path
) -> None:
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-o", "r", "--report")
    assert code == 0, err
    page = (Path("r") / "report.html").read_text()
    assert "<html" in page and "tiny" in page
    Path("r/report.html").unlink()
    code, out, err = fabricsim_cli(capsys, "report", "r")
    assert code == 0, err
    assert "report: r/report.html" in out
    assert (Path("r") / "report.html").read_text() == page


def test_report_of_a_sweep_from_the_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario: dict[str, Any]
) -> None:
    code, _, err = fabricsim_cli(capsys, "run", _sweep_file(tmp_path, tiny_scenario), "-o", "sw", "--report")
    assert code == 0, err
    assert "traffic.0.bytes" in (Path("sw") / "report.html").read_text()


def test_report_of_what_is_not_a_results_directory_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    Path("empty").mkdir()
    code, out, err = fabricsim_cli(capsys, "report", "empty")
    assert code == 2
    _bad_input(err, "empty", "not a results directory")
    assert out == ""
    assert not (Path("empty") / "report.html").exists()
    code, _, err = fabricsim_cli(capsys, "report", "missing")
    assert code == 2
    _bad_input(err, "missing")


@pytest.mark.parametrize("option", [["-j", "2"], ["--ray", "auto"]])
def test_jobs_and_ray_need_a_sweep(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path, option: list[str]
) -> None:
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, *option)
    assert code == 2
    _bad_input(err, option[0], "only a sweep")
    assert not Path("runs").exists()


def test_a_grid_sweep_with_seeds_on_two_processes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario: dict[str, Any]
) -> None:
    tiny_scenario["sweep"] = {"grid": {"traffic.0.bytes": ["16KiB", "32KiB"], "transport.qps": [1, 2]}, "seeds": 2}
    path = _write_yaml(tmp_path / "grid.yaml", tiny_scenario)
    code, out, err = fabricsim_cli(capsys, "run", path, "-o", "g", "-j", "2")
    assert code == 0, err
    assert "fabricsim sweep: tiny over traffic.0.bytes, transport.qps" in out
    assert "traffic.0.bytes=32KiB transport.qps=2 seed=2" in out
    description = json.loads((Path("g") / "sweep.json").read_text())
    assert len(description["runs"]) == 8
    assert all(r["state"] == "complete" for r in description["runs"])
    code, out, _ = fabricsim_cli(capsys, "run", path, "-o", "g")
    assert code == 0
    assert out.count("(reused)") == 8
