"""The MRC figures of `experiments/mrc_more.py`: every scenario they name loads and validates (quick versions
included), their analyses read small synthetic results right, and two cheap experiments run end to end."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from fabricsim import _core
from fabricsim.experiments.framework import MATCHES, Experiment, Run, run_experiment, scenarios_dir
from fabricsim.experiments.mrc import EXPERIMENTS
from fabricsim.experiments.mrc_more import (
    FIG5,
    FIG19,
    MORE_EXPERIMENTS,
    P2P,
    _fig5_analysis,
    _fig19_analysis,
    _p2p_analysis,
    _steps,
    flapped_links,
    incidents,
    memory_estimate,
    qp_incidents,
)
from fabricsim.results import Results
from fabricsim.scenario import is_sweep, load_scenario
from fabricsim.sweep import prepare

RUNS = [(exp, run) for exp in MORE_EXPERIMENTS for run in exp.runs]
MRC_DIR = scenarios_dir() / "mrc"


def test_keys_are_unique_and_registered() -> None:
    keys = [exp.key for exp in EXPERIMENTS]
    assert len(keys) == len(set(keys))
    assert all(exp in EXPERIMENTS for exp in MORE_EXPERIMENTS)
    for exp in MORE_EXPERIMENTS:
        assert len({r.key for r in exp.runs}) == len(exp.runs), exp.key


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize(("exp", "run"), RUNS, ids=[f"{e.key}-{r.key}" for e, r in RUNS])
def test_scenario_validates(exp: Experiment, run: Run, quick: bool) -> None:
    """What `fabricsim run` checks before it runs: every point of a sweep resolves in the core."""
    scenario = run.load(quick)
    scenarios = [p.scenario for p in prepare(scenario)[1]] if is_sweep(scenario) else [scenario]
    for one in scenarios:
        resolved = json.loads(_core.resolve(json.dumps(one)))
        assert resolved["name"] == Path(run.scenario).stem
    assert (scenarios_dir() / run.scenario).is_file()


def test_every_new_quick_file_is_a_quick_version() -> None:
    quick = {run.quick_scenario for _, run in RUNS if run.quick_scenario}
    for name in quick:
        assert name is not None and (scenarios_dir() / name).is_file(), name
        assert name.removesuffix("_quick.yaml") + ".yaml" in {run.scenario for _, run in RUNS}, name


def test_new_scenario_files_cite_the_paper() -> None:
    files = {run.scenario for _, run in RUNS} | {run.quick_scenario for _, run in RUNS if run.quick_scenario}
    for name in files:
        assert name is not None
        head = (scenarios_dir() / name).read_text(encoding="utf-8").splitlines()[0]
        assert head.startswith("#"), name
    for name in files - {r.scenario for e in EXPERIMENTS for r in e.runs}:
        if name and not name.endswith("_quick.yaml"):
            assert "mrc-srv6-multiplane.txt" in (scenarios_dir() / name).read_text(encoding="utf-8"), name


# --- helpers on synthetic results ---------------------------------------------------------------------------------


def _results(scenario: Mapping[str, Any], summary: Mapping[str, Any], **frames: pl.DataFrame) -> Results:
    run = Results.__new__(Results)
    run.scenario = dict(scenario)
    run.summary = dict(summary)
    run.frames = dict(frames)
    run.complete = True
    run.pcap = None
    return run


def test_incidents_cut_at_gaps() -> None:
    assert incidents([0.0, 0.05, 0.1, 1.0, 1.1, 5.0], 0.2) == [[0, 1, 2], [3, 4], [5]]
    assert incidents([], 0.2) == []


def _ev_log(retired: list[tuple[float, int, int]]) -> pl.DataFrame:
    rows = [(0.0, qp, "nic0", "nic1", 0, 0, "active") for qp in {qp for _, qp, _ in retired}]
    rows += [(t, qp, "nic0", "nic1", ev % 4, ev, "retired") for t, qp, ev in retired]
    return pl.DataFrame(rows, schema=["time_s", "qp", "src", "dst", "plane", "ev", "state"], orient="row")


def test_qp_incidents_group_each_qps_retirements() -> None:
    log = _ev_log([(0.001, 0, 4), (0.00105, 0, 8), (0.003, 0, 12), (0.001, 1, 4)])
    run = _results({}, {}, ev_log=log)
    found = qp_incidents(run, 0.2)
    assert found.group_by("qp").agg(pl.col("incident").max()).sort("qp")["incident"].to_list() == [1, 0]
    assert found.filter(pl.col("qp") == 0, pl.col("incident") == 0)["ev"].to_list() == [4, 8]


def test_flapped_links_count_each_switch_link_once() -> None:
    ports = pl.DataFrame(
        {
            "node": ["t0.p0.0", "t1.p0.1", "t0.p0.0", "t0.p0.0", "nic0"],
            "port": [5, 0, 6, 0, 0],
            "peer": ["t1.p0.1:0", "t0.p0.0:5", "t1.p0.2:0", "nic0:0", "t0.p0.0:0"],
            "drops_link_down": [3, 2, 0, 7, 1],
        }
    )
    assert flapped_links(_results({}, {}, ports=ports)) == 1


SMALL_CLOS = {"kind": "clos", "tiers": 2, "radix": 8, "nics": 8, "planes": 1, "link_rate": "400Gbps"}


def test_fig5_reads_losses_per_qp_and_flap() -> None:
    # One flapped link; QP 0 loses 1 packet on EV 4 and 2 on EV 8 (one incident), QP 1 one packet on EV 4.
    scenario = {
        "name": "fig5",
        "topology": SMALL_CLOS,
        "faults": [{"kind": "random_flaps", "mtbf": "100ms", "duration": "1ms", "until": "10ms"}],
        "jobs": [{"name": "job", "ranks": 4}],
    }
    ts = pl.DataFrame(
        [
            (0.001, "qp0/ev4", "ev_drops", 1.0),
            (0.001, "qp0/ev8", "ev_drops", 2.0),
            (0.001, "qp1/ev4", "ev_drops", 1.0),
        ],
        schema=["time_s", "entity", "metric", "value"],
        orient="row",
    )
    log = _ev_log([(0.00105, 0, 4), (0.0011, 0, 8), (0.00105, 1, 4)])
    ports = pl.DataFrame(
        {"node": ["t0.p0.0"], "port": [4], "peer": ["t1.p0.0:0"], "drops_link_down": [9]},
    )
    summary = {"sim_time_s": 0.01, "delivered_payload_bytes": 4 * 100e9 / 8 * 0.01 * 0.9}
    flaps = _results(scenario, summary, timeseries=ts, ev_log=log, ports=ports)
    base = _results({**scenario, "faults": []}, {**summary, "delivered_payload_bytes": 4 * 100e9 / 8 * 0.01})
    rows = {r.metric: r for r in _fig5_analysis(FIG5, {"flaps": flaps, "baseline": base}, False)}
    assert rows["T0-T1 links that flapped while carrying traffic"].value == 1.0
    assert rows["QPs hit per flap"].value == 2.0
    assert rows["data packets lost per QP per flap (mean over incidents)"].value == 2.0  # 4 packets, 2 incidents
    assert rows["incidents that lost exactly one data packet"].value == 0.5
    assert rows["EVs retired per QP per flap"].value == 1.5
    ratio = rows["job throughput with flaps / without"].value
    assert ratio is not None and abs(ratio - 0.9) < 1e-9
    lost = rows["job time lost per flap"].value
    assert lost is not None and abs(lost - 1000.0) < 1e-6  # 10% of 10 ms, one flap


def test_fig19_steps_follow_the_fault_schedule() -> None:
    scenario = {
        "faults": [
            {"kind": "link_down", "at": "2ms", "port": "a"},
            {"kind": "link_down", "at": "2ms", "port": "b"},
            {"kind": "link_up", "at": "6ms", "port": "a"},
        ]
    }
    assert _steps(scenario, 9.0) == [(0.0, 2.0, 0), (2.0, 6.0, 2), (6.0, 9.0, 1)]


def test_fig19_judges_steady_steps_against_the_remaining_capacity() -> None:
    scenario = {
        "topology": {**SMALL_CLOS, "link_rate": ["400Gbps", "100Gbps"]},
        "faults": [{"kind": "link_down", "at": "2ms", "port": "t0.p0.0:4"}],
        "telemetry": {"hosts": [4]},
    }
    # 400 Gb/s until 2 ms, then 300 (3 of 4 uplinks of 100G), 200 us samples to 4 ms.
    samples = [(t / 1e4, "nic4", "rx_goodput_bps", (400e9 if t <= 20 else 300e9)) for t in range(2, 41, 2)]
    ts = pl.DataFrame(samples, schema=["time_s", "entity", "metric", "value"], orient="row")
    run = _results(scenario, {"sim_time_s": 0.004}, timeseries=ts)
    exp = Experiment("f", "Fig", "t", (Run("b", "19b", "x.yaml"),), _fig19_analysis)
    rows = {r.metric: r for r in _fig19_analysis(exp, {"b": run}, False)}
    steady = rows["19b: step 1: 3 of 4 links up, steady / all up"]
    assert steady.value == pytest.approx(0.75) and steady.expect == pytest.approx((0.7, 0.8))


def test_p2p_decomposes_the_latency() -> None:
    scenario = {"topology": {**SMALL_CLOS, "link_delay": "1us", "switch_latency": "0ns"}}
    steps = pl.DataFrame(
        {
            "job": ["t0_local", "t0_local", "cross_t1"],
            "iteration": [0, 1, 0],
            "start_s": [0.0, 4e-6, 0.0],
            "end_s": [4e-6, 8e-6, 8.1e-6],
            "step_time_s": [4.05e-6, 4.05e-6, 8.1e-6],
        }
    )
    lat = _results(scenario, {}, steps=steps)
    jobs = {
        "t0_local": {"jct_s": 1e-3, "network_bytes": 96_000_000},
        "cross_t1": {"jct_s": 1e-3, "network_bytes": 96_000_000},
    }
    bw = _results(scenario, {"jobs": jobs})
    rows = {r.metric: r for r in _p2p_analysis(P2P, {"lat": lat, "bw": bw}, False)}
    local = rows["T0-local one-way latency, 2 B write (ping-pong round trip / 2)"]
    assert local.value == pytest.approx(2.025) and "propagation 2.00 us (2 links)" in local.ours
    assert rows["cross-T1 minus T0-local latency (two more switch hops)"].value == pytest.approx(2.025)
    assert rows["T0-local bandwidth, 32 KB writes back to back over 4 QPs"].value == pytest.approx(768.0)
    assert rows["cross-T1 / T0-local bandwidth"].value == pytest.approx(1.0)


def test_memory_estimate_reads_the_cores_estimate() -> None:
    scenario = load_scenario(MRC_DIR / "fig15_sendrecv_scale.yaml")
    assert memory_estimate(scenario).startswith("about ")


# --- end to end, the two cheapest experiments -----------------------------------------------------------------


def test_p2p_runs_end_to_end(tmp_path: Path) -> None:
    rows, _ = run_experiment(P2P, tmp_path, quick=True)
    by_metric = {r.metric: r for r in rows}
    local = by_metric["T0-local one-way latency, 2 B write (ping-pong round trip / 2)"].value
    # Two 1 us links and the serialization of one small packet at each of two hops.
    assert local is not None and 2.0 < local < 2.1
    bw = by_metric["T0-local bandwidth, 32 KB writes back to back over 4 QPs"].value
    assert bw is not None and 700 < bw < 800
    assert (tmp_path / "p2p" / "summary.md").is_file()


def test_fig19_tracks_capacity_end_to_end() -> None:
    rows, _ = run_experiment(FIG19, None, quick=True)
    steady = [r for r in rows if r.metric.startswith(("19b", "19c")) and "steady" in r.metric]
    assert len(steady) == 8
    for row in steady:
        assert row.value is not None and row.expect is not None
        low, high = row.expect
        assert low is not None and high is not None and low - 0.05 <= row.value <= high + 0.05, row
    assert all(r.verdict != MATCHES or r.expect for r in rows)
