"""`fabricsim reproduce`: every registered scenario loads and validates (quick versions included), and one
small experiment runs end to end through the command."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from fabricsim import _core
from fabricsim.cli import main
from fabricsim.experiments import PAPERS, paper_experiments
from fabricsim.experiments.analysis import phase_analysis
from fabricsim.experiments.framework import Experiment, Phase, Row, Run, run_experiment, scenarios_dir
from fabricsim.experiments.mrc import FIG4, _fig4_analysis, _ms, lost_packets
from fabricsim.results import Results
from fabricsim.scenario import is_sweep
from fabricsim.sweep import prepare

MRC = paper_experiments("mrc")
RUNS = [(exp, run) for exp in MRC for run in exp.runs]


def test_registry_keys_are_unique() -> None:
    keys = [exp.key for exp in MRC]
    assert len(keys) == len(set(keys))
    for exp in MRC:
        assert len({r.key for r in exp.runs}) == len(exp.runs), exp.key
    assert set(PAPERS) == {"mrc"}


def test_unknown_paper_is_refused() -> None:
    with pytest.raises(KeyError, match="no paper named 'nope'"):
        paper_experiments("nope")


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize(("exp", "run"), RUNS, ids=[f"{e.key}-{r.key}" for e, r in RUNS])
def test_registered_scenario_validates(exp: Experiment, run: Run, quick: bool) -> None:
    scenario = run.load(quick)
    points = prepare(scenario)[1] if is_sweep(scenario) else None
    first = points[0].scenario if points else scenario
    resolved = json.loads(_core.resolve(json.dumps(first)))
    assert resolved["name"] == Path(run.scenario).stem


def test_experiment_scenarios_ship_inside_the_package() -> None:
    """`reproduce` must work from an installed wheel, not only from a checkout."""
    import fabricsim

    package = Path(fabricsim.__file__).resolve().parent
    assert scenarios_dir().resolve().is_relative_to(package), scenarios_dir()
    for paper in PAPERS:
        for exp in paper_experiments(paper):
            for run in exp.runs:
                for name in (run.scenario, run.quick_scenario):
                    assert name is None or (scenarios_dir() / name).is_file(), (exp.key, name)


def test_every_quick_file_is_a_registered_quick_version() -> None:
    registered = {run.quick_scenario for _, run in RUNS if run.quick_scenario}
    assert registered == {f"mrc/{p.name}" for p in (scenarios_dir() / "mrc").glob("*_quick.yaml")}


def test_phase_analysis_reads_a_tiny_run(tmp_path: Path) -> None:
    # A 1 ms flow over two planes whose nic0 port 1 fails at 0.5 ms: half the rate after.
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(
        """
name: tiny
duration: 1ms
topology: {kind: clos, tiers: 2, radix: 4, planes: 2, link_rate: 100Gbps}
switch: {forwarding: srv6, pfc: {enabled: false}, trimming: {enabled: true}, ecn: {last_hop: false}}
transport: {kind: mrc}
traffic: [{kind: flow, src: 0, dst: 1, bytes: 1GB}]
faults: [{kind: nic_port_down, at: 0.5ms, nic: 0, port: 1}]
telemetry: {sample_interval: 50us, hosts: [1]}
""",
        encoding="utf-8",
    )
    exp = Experiment(
        "tiny",
        "Fig 0",
        "tiny",
        (Run("mrc", "MRC", "tiny.yaml"),),
        phase_analysis,
        phases=(Phase("both planes", 0.1, 0.5, "line rate"), Phase("one plane", 0.6, 1.0, "half")),
        hosts=("nic1",),
    )
    rows, _ = run_experiment(exp, tmp_path / "out", root=tmp_path)
    by_metric = {r.metric: r for r in rows}
    both, one = by_metric["both planes"].value, by_metric["one plane"].value
    assert both is not None and one is not None
    assert both > 180 and 0.4 < one / both < 0.6, rows
    assert (tmp_path / "out" / "tiny" / "mrc" / "timeseries.parquet").is_file()
    assert "| one plane | half |" in (tmp_path / "out" / "tiny" / "summary.md").read_text(encoding="utf-8")
    assert "fabricsim" in (tmp_path / "out" / "tiny" / "summary.csv").read_text(encoding="utf-8")


def test_reproduce_command_runs_one_experiment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["reproduce", "mrc", "--quick", "--only", "fig14", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Fig 14" in printed and "paper" in printed
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    rows = {r["metric"]: r for r in summary["experiments"]["fig14"]["rows"]}
    # Flow 1 keeps near line rate; avoiding a marked EV longer leaves more of EV-A to flow 2 (pinned to it).
    for label in ("ecn_avoid 5us (default)", "ecn_avoid 50us"):
        assert rows[f"{label}: flow 1 with flow 2 pinned to EV-A"]["value"] > 85, rows
    flow2 = "flow 2 (EV-A only)"
    assert rows[f"ecn_avoid 50us: {flow2}"]["value"] > rows[f"ecn_avoid 5us (default): {flow2}"]["value"], rows
    assert (out / "summary.md").is_file()


def test_reproduce_rejects_an_unknown_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "mrc", "--only", "fig99"]) == 2
    assert "fig99" in capsys.readouterr().err


def test_times_of_a_resolved_scenario() -> None:
    assert [_ms(t) for t in ("5ms", "200us", "0ns", "1s")] == [5.0, 0.2, 0.0, 1000.0]


def test_row_is_plain_data() -> None:
    assert Row("m", "p", "o").value is None


def _fake_fig4_run(packets: list[tuple[float, int, int, float, str]], retired: list[tuple[float, int, int]]) -> Results:
    """A Results of a Fig 4-like run: QP 0 nic16 -> nic0, QP 1 nic1 -> nic2; plane 1's T0 2 lost uplink 1.

    `packets` are (time, QP, EV, count, metric): `ev_packets` sent, `ev_drops` lost.
    """
    run = Results.__new__(Results)
    run.scenario = {
        "topology": {"radix": 16},
        "nic": {"mtu": "4KiB"},
        "faults": [{"kind": "link_down", "port": "t0.p1.2:9"}],
        "jobs": [{"name": "job0", "ranks": 8, "start": "0ms"}, {"name": "job1", "ranks": 24, "start": "1ms"}],
    }
    run.summary = {"sim_time_s": 0.003, "dropped_payload_bytes": 3 * 4096, "timeouts": 2, "spurious_losses": 0}
    log = [(0.0, 0, "nic16", "nic0", 1, 9, "active"), (0.0, 1, "nic1", "nic2", 1, 9, "active")]
    log += [(t, qp, *(("nic16", "nic0") if qp == 0 else ("nic1", "nic2")), 1, ev, "retired") for t, qp, ev in retired]
    run.frames = {
        "timeseries": pl.DataFrame(
            [(t, f"qp{qp}/ev{ev}", metric, n) for t, qp, ev, n, metric in packets],
            schema=["time_s", "entity", "metric", "value"],
            orient="row",
        ),
        "ev_log": pl.DataFrame(log, schema=["time_s", "qp", "src", "dst", "plane", "ev", "state"], orient="row"),
        "clustermapper": pl.DataFrame(),
    }
    run.complete = True
    return run


def test_fig4_counts_the_dropped_packets_as_losses() -> None:
    dead_ev = 1 << 3 | 1  # uplink 1 of plane 1: nic16 -> nic0 crosses the dead link, nic1 -> nic2 stays under T0 0
    run = _fake_fig4_run(
        [
            (0.001, 0, dead_ev, 2.0, "ev_packets"),
            (0.001, 0, dead_ev, 2.0, "ev_drops"),
            (0.001, 0, dead_ev + 1, 5.0, "ev_packets"),
            (0.002, 0, dead_ev, 1.0, "ev_packets"),
            (0.002, 0, dead_ev, 1.0, "ev_drops"),
            (0.002, 1, dead_ev, 7.0, "ev_packets"),
        ],
        [(0.0015, 1, dead_ev)],
    )
    lost = lost_packets(run)
    assert lost["packets"].to_list() == [2.0, 1.0] and lost["qp"].to_list() == [0, 0]
    rows = {r.metric.split(": ", 1)[1]: r for r in _fig4_analysis(FIG4, {"no_denylist": run}, False)}
    assert rows["data packets lost per QP"].value == 1.5  # 3 losses over the 2 QPs of the EV log
    # The sample at 1 ms counts ms 0-1, the one at 2 ms ms 1-2; 32 NICs.
    assert rows["losses per ms per NIC, by ms (jobs start at 0, 1 ms)"].ours == "0-1: 0.06, 1-2: 0.03, 2-3: 0.00"
    assert rows["data losses by job"].ours == "job0 0, job1 3"  # nic16 is in job1 (NICs 8-31)
    assert rows["EVs over a dead link retired (the path mapped out)"].value == 0.0
    assert rows["EVs retired without a loss"].value == 1.0  # QP 1's EV 9 never leaves T0 0
