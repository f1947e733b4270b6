"""`fabricsim reproduce`: every registered scenario loads and validates (quick overrides included), and one
small experiment runs end to end through the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricsim import _core
from fabricsim.cli import main
from fabricsim.reproduce import MRC, REGISTRIES, Experiment, Phase, Row, Run, phase_analysis, run_experiment
from fabricsim.sweep import is_sweep, prepare

RUNS = [(exp, run) for exp in MRC for run in exp.runs]


def test_registry_keys_are_unique() -> None:
    keys = [exp.key for exp in MRC]
    assert len(keys) == len(set(keys))
    for exp in MRC:
        assert len({r.key for r in exp.runs}) == len(exp.runs), exp.key
    assert set(REGISTRIES) == {"mrc"}


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize(("exp", "run"), RUNS, ids=[f"{e.key}-{r.key}" for e, r in RUNS])
def test_registered_scenario_validates(exp: Experiment, run: Run, quick: bool) -> None:
    scenario = run.load(quick)
    points = prepare(scenario)[1] if is_sweep(scenario) else None
    first = points[0].scenario if points else scenario
    resolved = json.loads(_core.resolve(json.dumps(first)))
    assert resolved["name"] == Path(run.scenario).stem


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
    rows = summary["experiments"]["fig14"]["rows"]
    assert any(r["metric"] == "flow 2" and r["value"] > 80 for r in rows)
    assert (out / "summary.md").is_file()


def test_reproduce_rejects_an_unknown_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "mrc", "--only", "fig99"]) == 2
    assert "fig99" in capsys.readouterr().err


def test_row_is_plain_data() -> None:
    assert Row("m", "p", "o").value is None
