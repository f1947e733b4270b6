"""`fabricsim reproduce`: every registered scenario loads and validates (quick versions included), one
small experiment runs end to end through the command, and the seeds' rows merge into spreads and verdicts."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from fabricsim import _core, batch
from fabricsim import run as fabricsim_run
from fabricsim.cli import main
from fabricsim.experiments import PAPERS, analysis, framework, paper_experiments, spectrum_x, spectrum_x_jobs
from fabricsim.experiments.analysis import busbw_row, collective_analysis, judged_over_sizes, phase_analysis
from fabricsim.experiments.framework import (
    CONTRADICTS,
    MATCHES,
    NO_CLAIM,
    NOT_RUN,
    PARTLY,
    Experiment,
    Outcome,
    Phase,
    Row,
    Run,
    merge_seeds,
    run_experiment,
    scenarios_dir,
    write_summary,
)
from fabricsim.experiments.mrc import FIG4, _fig4_analysis, _ms, lost_packets
from fabricsim.results import Results
from fabricsim.scenario import is_sweep, load_scenario
from fabricsim.sweep import SweepPoint, SweepResults, prepare

MRC = paper_experiments("mrc")
SPECTRUM_X = paper_experiments("spectrum-x")
PRO = paper_experiments("pro")
HPN = paper_experiments("hpn")
SHIFT = paper_experiments("shift")
SCALE = paper_experiments("scale")
RUNS = [(exp, run) for exp in (*MRC, *SPECTRUM_X, *PRO, *HPN, *SCALE) for run in exp.runs]


@pytest.mark.parametrize(
    "experiments", [MRC, SPECTRUM_X, PRO, HPN, SHIFT, SCALE], ids=["mrc", "spectrum-x", "pro", "hpn", "shift", "scale"]
)
def test_registry_keys_are_unique(experiments: tuple[Experiment, ...]) -> None:
    keys = [exp.key for exp in experiments]
    assert len(keys) == len(set(keys))
    for exp in experiments:
        assert len({r.key for r in exp.runs}) == len(exp.runs), exp.key
    assert set(PAPERS) == {"mrc", "spectrum-x", "pro", "hpn", "shift", "scale"}


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
    shipped = {
        f"{d}/{p.name}"
        for d in ("mrc", "spectrum-x", "pro", "hpn", "shift")
        for p in (scenarios_dir() / d).glob("*_quick.yaml")
    }
    assert registered == shipped


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
        phases=(
            Phase("both planes", 0.1, 0.5, "line rate", (180.0, None)),
            Phase("one plane", 0.6, 1.0, "half", (0.4, 0.6), relative=True),
        ),
        hosts=("nic1",),
    )
    rows, _ = run_experiment(exp, tmp_path / "out", root=tmp_path)
    by_metric = {r.metric: r for r in rows}
    both, one = by_metric["both planes"], by_metric["one plane"]
    assert both.value is not None and both.value > 180, rows
    # A relative phase's value is its share of the first phase; every seed in range.
    assert one.value is not None and 0.4 < one.value < 0.6 and one.verdict == MATCHES, rows
    assert "(seeds 1-3: " in one.ours
    for run_dir in ("mrc", "mrc.seed2", "mrc.seed3"):
        assert (tmp_path / "out" / "tiny" / run_dir / "timeseries.parquet").is_file(), run_dir
    assert "| one plane | half |" in (tmp_path / "out" / "tiny" / "summary.md").read_text(encoding="utf-8")
    assert "fabricsim" in (tmp_path / "out" / "tiny" / "summary.csv").read_text(encoding="utf-8")


def test_reproduce_command_runs_one_experiment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["reproduce", "mrc", "--quick", "--only", "fig14", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Fig 14" in printed and "paper" in printed and "verdict" in printed
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["experiments"]["fig14"]["seeds"] == [1]
    rows = {r["metric"]: r for r in summary["experiments"]["fig14"]["rows"]}
    # The count of each verdict ends the output, the same as the summary's.
    counts = summary["verdicts"]
    assert sum(counts.values()) == len(rows) and counts[MATCHES] == 0  # one seed: at most partly
    assert "verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items()) in printed
    assert {r["verdict"] for r in rows.values()} <= {PARTLY, CONTRADICTS, NO_CLAIM}
    # As in the paper, ECN moves flow 1 from EV-A to EV-B and both flows keep near line rate; with the
    # marked EV only avoided, flow 1 (one active EV) stays on A and flow 2 pays for it.
    replace, avoid = "ECN replaces the EV (default)", "ECN only avoids the EV for 5us"
    assert rows[f"{replace}: flow 1 alone: its packets on EV-A"]["value"] == 1.0, rows
    assert rows[f"{replace}: flow 1 with flow 2 pinned to EV-A: its packets on EV-A"]["value"] < 0.05, rows
    for flow in ("flow 1 with flow 2 pinned to EV-A", "flow 2 (EV-A only)"):
        assert rows[f"{replace}: {flow}"]["value"] > 85, rows
    assert rows[f"{avoid}: flow 2 (EV-A only)"]["value"] < rows[f"{replace}: flow 2 (EV-A only)"]["value"], rows
    assert (out / "summary.md").is_file()


def _written(out: Path) -> dict[str, bytes]:
    """Every file under `out` but the times: a summary's time lines, the top summary's times."""
    files = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "summary.md":
            data = b"\n".join(line for line in data.splitlines() if b"wall time" not in line)
        if path == out / "summary.json":
            summary = json.loads(data)
            for entry in (summary, *summary["experiments"].values()):
                entry.pop("wall_s")
            data = json.dumps(summary).encode()
        files[str(path.relative_to(out))] = data
    return files


def _spy_on_batches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Records each batch `reproduce` hands out: how many runs, how many at once."""
    calls: list[tuple[int, int]] = []
    real = batch.run_batch

    def spy(tasks: Any, jobs: int = 1, **rest: Any) -> bool:
        calls.append((len(tasks), jobs))
        return real(tasks, jobs=jobs, **rest)

    monkeypatch.setattr(batch, "run_batch", spy)
    return calls


def test_reproduce_on_a_pool_writes_what_one_run_at_a_time_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fig 15d runs two sweeps: every point of both goes into the pool.
    calls = _spy_on_batches(monkeypatch)
    figure = ["reproduce", "spectrum-x", "--quick", "--only", "fig15d"]
    assert main([*figure, "--out", str(tmp_path / "one"), "-j", "1"]) == 0
    assert calls == []
    one_printed = capsys.readouterr().out
    assert main([*figure, "--out", str(tmp_path / "pool"), "-j", "2"]) == 0
    points = sum(len(prepare(run.load(True))[1]) for exp in SPECTRUM_X if exp.key == "fig15d" for run in exp.runs)
    assert calls == [(points, 2)] and points > 2
    pool_printed = capsys.readouterr().out
    assert _written(tmp_path / "pool") == _written(tmp_path / "one")
    # Each run reported once, its points' times summed.
    for printed in (one_printed, pool_printed):
        assert printed.count("fig15d_alltoall_concurrent_spx.yaml, seed 1 (") == 1, printed


def test_reproduce_runs_alone_what_does_not_fit_a_workers_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _spy_on_batches(monkeypatch)
    # A machine with 64 KiB available: half of it holds none of these runs; a run on its own in this
    # process is not held to it.
    monkeypatch.setattr(_core, "available_memory", lambda: 64 << 10)
    out = tmp_path / "out"
    assert main(["reproduce", "spectrum-x", "--quick", "--only", "fig12", "--out", str(out), "-j", "2"]) == 0
    runs = len(next(exp for exp in SPECTRUM_X if exp.key == "fig12").runs)
    assert calls == [(runs, 1)]
    assert (out / "fig12" / "summary.csv").is_file()


def test_reproduce_refuses_no_runs_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "mrc", "--only", "fig14", "-j", "0"]) == 2
    assert "--jobs" in capsys.readouterr().err


def test_reproduce_rejects_an_unknown_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "mrc", "--only", "fig99"]) == 2
    assert "fig99" in capsys.readouterr().err


def test_times_of_a_resolved_scenario() -> None:
    assert [_ms(t) for t in ("5ms", "200us", "0ns", "1s")] == [5.0, 0.2, 0.0, 1000.0]


def test_row_is_plain_data() -> None:
    row = Row("m", "p", "o")
    assert row.value is None and row.expect is None and row.verdict == "" and row.reason == ""
    with pytest.raises(ValueError, match="verdict 'fine'"):
        Row("m", "p", "o", verdict="fine")
    with pytest.raises(ValueError, match="empty"):
        Row("m", "p", "o", expect=(2.0, 1.0))


def _seeds(*values: float | None, expect: tuple[float | None, float | None] | None = (0.4, 0.6)) -> Row:
    """The merged row of one metric whose seeds 1, 2, ... gave `values`."""
    per_seed = [
        (seed, [Row("m", "about 0.5", "-" if v is None else f"{v:.2f}", v, expect)]) for seed, v in enumerate(values, 1)
    ]
    (row,) = merge_seeds(per_seed)
    return row


def test_verdict_rules() -> None:
    assert _seeds(0.5, 0.4, 0.6).verdict == MATCHES  # closed range: the bounds are in
    assert _seeds(0.5, 0.45, 0.55, 0.5).verdict == MATCHES
    # Fewer than 3 seeds in range: partly, however well they agree.
    two = _seeds(0.5, 0.5)
    assert two.verdict == PARTLY and "only 2 seeds ran" in two.reason
    assert _seeds(0.5).verdict == PARTLY
    some = _seeds(0.5, 0.7, 0.45)
    assert some.verdict == PARTLY and some.reason == "2 of 3 seeds in range"
    assert _seeds(0.7, 0.3, 0.61).verdict == CONTRADICTS
    assert _seeds(0.7).verdict == CONTRADICTS
    # A seed without a value did not run: it neither agrees nor counts.
    assert _seeds(None, None, None).verdict == NOT_RUN
    assert _seeds(0.5, None, 0.5, 0.5).verdict == MATCHES
    assert _seeds(0.5, None, 0.5).verdict == PARTLY
    assert _seeds(0.5, 0.5, 0.5, expect=None).verdict == NO_CLAIM
    assert _seeds(None, expect=None).verdict == NO_CLAIM
    # Open bounds.
    assert _seeds(1e9, 731.5, 800, expect=(731.5, None)).verdict == MATCHES
    assert _seeds(-5.0, 0.0, 1.0, expect=(None, 0.0)).verdict == PARTLY


def test_a_verdict_set_by_the_analysis_is_kept() -> None:
    def given(*verdicts: str) -> Row:
        per_seed = [(s, [Row("m", "p", "o", 0.5, (0.4, 0.6), v, f"why {v}")]) for s, v in enumerate(verdicts, 1)]
        return merge_seeds(per_seed)[0]

    # The value is in range, but the analysis judged otherwise.
    assert given(CONTRADICTS, CONTRADICTS, CONTRADICTS).verdict == CONTRADICTS
    assert given(CONTRADICTS).reason == "why contradicts"
    assert given(MATCHES, MATCHES, MATCHES).verdict == MATCHES
    assert given(MATCHES).verdict == PARTLY
    mixed = given(MATCHES, PARTLY, MATCHES)
    assert mixed.verdict == PARTLY
    reasons = "seed 1: why matches; seed 2: why partly; seed 3: why matches"
    assert mixed.reason == f"{reasons}; 2 of 3 seeds in range, 1 partly"
    assert given(NO_CLAIM, NO_CLAIM).verdict == NO_CLAIM


def test_a_spread_says_which_of_several_numbers_it_is_of() -> None:
    """A row listing a value per size spreads one of them over the seeds: it says which."""
    per_seed = [(seed, [busbw_row("RoCE", {"4MiB": 40.0 + seed, "128MiB": 30.0 - seed})]) for seed in (1, 2, 3)]
    (row,) = merge_seeds(per_seed)
    assert row.ours == "4MiB: 41.00, 128MiB: 29.00 GB/s (seeds 1-3, the largest: 41-43)"
    claim = [(s, [judged_over_sizes("r", "", {"1MiB": 0.9 + s / 100, "8MiB": 1.2}, (1.0, None))]) for s in (1, 2, 3)]
    (judged,) = merge_seeds(claim)
    assert judged.ours.endswith("(seeds 1-3, the worst size: 0.91-0.93)")


def test_seeds_merge_into_the_spread() -> None:
    row = _seeds(0.43, 0.41, 0.45)
    assert row.ours == "0.43 (seeds 1-3: 0.41-0.45)" and row.value == 0.43
    assert _seeds(0.43).ours == "0.43"  # one seed: the text as the analysis wrote it
    assert _seeds(743.0, 743.0, 743.0).ours == "743.00 (seeds 1-3: 743)"
    assert _seeds(0.5, None, 0.55).ours == "0.50 (seeds 1, 3: 0.5-0.55)"
    assert _seeds(None, None).ours == "-"
    rows = merge_seeds(
        [
            (1, [Row("a", "p", "1", 1.0), Row("b", "p", "10", 10.0, (5.0, None))]),
            (2, [Row("a", "p", "2", 2.0), Row("b", "p", "20", 20.0, (5.0, None))]),
            (3, [Row("a", "p", "3", 3.0), Row("b", "p", "30", 30.0, (5.0, None))]),
        ]
    )
    assert [(r.metric, r.ours, r.verdict) for r in rows] == [
        ("a", "1 (seeds 1-3: 1-3)", NO_CLAIM),
        ("b", "10 (seeds 1-3: 10-30)", MATCHES),
    ]


def test_seeds_with_different_rows_are_listed_apart() -> None:
    rows = merge_seeds(
        [
            (1, [Row("a", "p", "1", 1.0, (0.0, None))]),
            (2, [Row("a", "p", "2", 2.0, (0.0, None)), Row("b", "p", "9", 9.0)]),
        ]
    )
    assert [(r.metric, r.ours, r.verdict) for r in rows] == [
        ("seed 1: a", "1", PARTLY),
        ("seed 2: a", "2", PARTLY),
        ("seed 2: b", "9", NO_CLAIM),
    ]


def test_summary_csv_has_the_verdict(tmp_path: Path) -> None:
    exp = Experiment("x", "Fig 0", "x", (), lambda e, o, q: [])
    rows = merge_seeds(
        [
            (s, [Row("m", "about 0.5", f"{v}", v, (0.4, 0.6)), Row("n", "", "7", 7.0)])
            for s, v in ((1, 0.5), (2, 0.9), (3, 0.5))
        ]
    )
    write_summary(tmp_path, exp, rows, False, 1.0)
    with (tmp_path / "summary.csv").open(encoding="utf-8") as f:
        written = list(csv.DictReader(f))
    assert [(r["metric"], r["expect_low"], r["expect_high"], r["verdict"], r["reason"]) for r in written] == [
        ("m", "0.4", "0.6", PARTLY, "2 of 3 seeds in range"),
        ("n", "", "", NO_CLAIM, ""),
    ]
    markdown = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "| m | about 0.5 | 0.5 (seeds 1-3: 0.5-0.9) | 0.4 to 0.6 | partly | 2 of 3 seeds in range |" in markdown
    assert "seeds 1-3" in markdown and "Verdicts: 0 matches, 1 partly, 0 contradicts, 0 not run, 1 n/a." in markdown


class _FakeRun:
    """The outcome of a run that only remembers its scenario (`run_loaded` replaced)."""

    def __init__(self, scenario: dict[str, Any]) -> None:
        self.scenario = scenario

    def write(self, directory: Path, overwrite: bool = False, csv: bool = False) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "seed").write_text(str(self.scenario["seed"]), encoding="utf-8")
        return directory


@pytest.mark.parametrize("quick", [False, True])
def test_each_seed_runs_every_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quick: bool) -> None:
    """The full version runs each run once per seed, the seed set over the run's own; the quick one seed 1."""
    monkeypatch.setattr(framework, "run_loaded", _FakeRun)
    (tmp_path / "s.yaml").write_text("name: s\nseed: 7\n", encoding="utf-8")
    analysed: list[dict[str, int]] = []

    def analyse(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
        seeds = {key: o.scenario["seed"] for key, o in outcomes.items()}
        analysed.append(seeds)
        return [Row("seed", "", str(seeds["a"]), float(seeds["a"]), (1.0, 5.0))]

    exp = Experiment(
        "x",
        "Fig 0",
        "x",
        (Run("a", "A", "s.yaml", overrides={"seed": 99}), Run("b", "B", "s.yaml")),
        analyse,
        seeds=(1, 2, 5),
    )
    ran: list[tuple[str, int]] = []
    rows, _ = run_experiment(exp, tmp_path / "out", quick, lambda run, seed, _: ran.append((run.key, seed)), tmp_path)
    seeds = [1] if quick else [1, 2, 5]
    assert ran == [(key, seed) for seed in seeds for key in ("a", "b")]
    assert analysed == [{"a": seed, "b": seed} for seed in seeds]
    (row,) = rows
    assert (row.ours, row.verdict) == (("1", PARTLY) if quick else ("1 (seeds 1, 2, 5: 1-5)", MATCHES))
    directories = {
        p.name: p.joinpath("seed").read_text(encoding="utf-8") for p in (tmp_path / "out" / "x").iterdir() if p.is_dir()
    }
    expected = {key if seed == 1 else f"{key}.seed{seed}": str(seed) for seed in seeds for key in ("a", "b")}
    assert directories == expected


def test_an_experiment_needs_distinct_seeds() -> None:
    with pytest.raises(ValueError, match="seeds"):
        Experiment("x", "Fig 0", "x", (), phase_analysis, seeds=())
    with pytest.raises(ValueError, match="seeds"):
        Experiment("x", "Fig 0", "x", (), phase_analysis, seeds=(1, 1))


def _sweep(busbw: dict[str, float]) -> SweepResults:
    sweep = SweepResults(["bytes"], [], [])
    sweep.busbw = busbw  # type: ignore[attr-defined]
    return sweep


@pytest.mark.parametrize(
    ("mrc", "verdict", "reason"),
    [
        ({"1MiB": 12.0, "64MiB": 44.0}, MATCHES, "in range at 2 of 2 sizes"),
        ({"1MiB": 8.0, "64MiB": 44.0}, PARTLY, "in range at 1 of 2 sizes"),
        ({"1MiB": 8.0, "64MiB": 30.0}, CONTRADICTS, "in range at 0 of 2 sizes"),
    ],
)
def test_a_collective_claim_at_every_size(
    monkeypatch: pytest.MonkeyPatch, mrc: dict[str, float], verdict: str, reason: str
) -> None:
    monkeypatch.setattr(analysis, "busbw_by_size", lambda sweep: sweep.busbw)
    analyse = collective_analysis(
        [
            ("MRC / RoCE", "above 1 at every size", "mrc", "roce", "every", (1.0, None)),
            ("MRC / RoCE", "above 1", "mrc", "roce", "largest", (1.0, None)),
            ("MRC", "", "mrc", "", "smallest"),
        ]
    )
    exp = Experiment("x", "Fig 0", "x", (Run("mrc", "MRC", "m.yaml"), Run("roce", "RoCE", "r.yaml")), analyse)
    outcomes = {"mrc": _sweep(mrc), "roce": _sweep({"1MiB": 10.0, "64MiB": 40.0})}
    rows = {r.metric: r for r in analyse(exp, outcomes, False)}
    every = rows["MRC / RoCE @ every size"]
    assert (every.verdict, every.reason, every.expect) == (verdict, reason, (1.0, None))
    assert every.value == min(mrc["1MiB"] / 10, mrc["64MiB"] / 40)  # the size with the least margin
    assert every.ours == f"1MiB: {mrc['1MiB'] / 10:.2f}, 64MiB: {mrc['64MiB'] / 40:.2f}"
    assert rows["MRC / RoCE @ 64MiB"].verdict == "" and rows["MRC / RoCE @ 64MiB"].expect == (1.0, None)
    assert rows["MRC @ 1MiB"].expect is None and rows["MRC @ 1MiB"].ours == f"{mrc['1MiB']:.2f} GB/s"
    # Over three seeds the analysis's verdict of each counts as in range or not.
    (merged,) = merge_seeds([(s, [every]) for s in (1, 2, 3)])
    assert merged.verdict == verdict


def test_a_claim_at_large_sizes_is_judged_from_its_size_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "busbw_by_size", lambda sweep: sweep.busbw)
    analyse = collective_analysis([("MRC / RoCE", "about 1 at large sizes", "mrc", "roce", "from 16MiB", (0.9, None))])
    exp = Experiment("x", "Fig 0", "x", (Run("mrc", "MRC", "m.yaml"), Run("roce", "RoCE", "r.yaml")), analyse)
    roce = _sweep({"1MiB": 10.0, "16MiB": 40.0, "64MiB": 40.0})
    # 1 MiB is out of range but not judged; 16 MiB in, 64 MiB out: partly.
    (row,) = [
        r
        for r in analyse(exp, {"mrc": _sweep({"1MiB": 1.0, "16MiB": 40.0, "64MiB": 30.0}), "roce": roce}, False)
        if r.metric.startswith("MRC / RoCE")
    ]
    assert (row.metric, row.verdict, row.reason) == ("MRC / RoCE @ 16MiB and up", PARTLY, "in range at 1 of 2 sizes")
    assert row.ours == "16MiB: 1.00, 64MiB: 0.75" and row.value == 0.75


def test_spectrum_x_fig15d_judges_esr_at_256mib_and_spx_rising_at_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "busbw_by_size", lambda sweep: sweep.busbw)
    monkeypatch.setattr(spectrum_x, "busbw_by_size", lambda sweep: sweep.busbw)
    (exp,) = [e for e in paper_experiments("spectrum-x") if e.key == "fig15d"]
    spx = _sweep({"4MiB": 74.2, "16MiB": 85.5, "64MiB": 90.6, "256MiB": 84.1})
    esr = _sweep({"4MiB": 74.5, "16MiB": 81.0, "64MiB": 76.3, "256MiB": 74.3})
    rows = {r.metric: r for r in exp.analyse(exp, {"spx": spx, "esr": esr}, False)}
    # The paper's ESR claim is from 256 MB up: judged at 256 MiB, no longer
    # held to partly for sizes that stopped short of it.
    esr_alone, esr_over_spx = (
        rows["ESR busbw at the largest size @ 256MiB"],
        rows["ESR / SPX busbw at the largest size @ 256MiB"],
    )
    assert (esr_alone.value, esr_alone.verdict) == (74.3, "")
    assert esr_over_spx.value == pytest.approx(74.3 / 84.1) and not esr_over_spx.verdict
    # "Scales smoothly": SPX's fall at 256 MiB is out of range at its step.
    smooth = rows["SPX busbw at each size / at the size before"]
    assert (smooth.verdict, smooth.reason) == (PARTLY, "in range at 2 of 3 sizes")
    assert smooth.value == pytest.approx(84.1 / 90.6)


def test_spectrum_x_fig9_judges_spx_over_eth_at_every_size_above_the_smallest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    peaks = {
        "eth": ({"256KiB": 184.0, "4MiB": 291.2, "32MiB": 142.4}, 387.2),
        "spx": ({"256KiB": 195.2, "4MiB": 357.6, "32MiB": 375.2}, 386.4),
    }
    monkeypatch.setattr(spectrum_x_jobs, "_peak", lambda sweep: peaks[sweep.design])
    (exp,) = [e for e in paper_experiments("spectrum-x") if e.key == "fig9"]
    outcomes: dict[str, Outcome] = {}
    for design in peaks:
        outcomes[f"alone_{design}"] = _sweep({})
        outcomes[f"alone_{design}"].design = design  # type: ignore[attr-defined]
    rows = {r.metric: r for r in exp.analyse(exp, outcomes, False)}
    # At the peaks SPX / ETH is 1.23, in range; at 32 MiB ETH has fallen to
    # 0.37 of capacity, and the ratio (2.63) is not the paper's 1.13.
    assert not rows["SPX / ETH peak busbw alone"].verdict
    over = rows["SPX / ETH busbw alone, 4MiB and up"]
    assert (over.verdict, over.reason) == (PARTLY, "in range at 1 of 2 sizes")
    assert over.value == pytest.approx(375.2 / 142.4)
    assert over.ours == "4MiB: 1.23, 32MiB: 2.63"


def test_mrc_fig15_judges_every_large_size(monkeypatch: pytest.MonkeyPatch) -> None:
    from fabricsim.experiments import mrc_more

    scenario = load_scenario(scenarios_dir() / "mrc/fig15_sendrecv_scale.yaml")
    scenario.pop("sweep", None)
    sizes = ("1MiB", "16MiB", "64MiB")
    runs = []
    for _ in sizes:
        run = Results.__new__(Results)
        run.scenario, run.summary = scenario, {"packet_hops": 1000}
        runs.append(run)
    key = "jobs.0.phases.0.collective.bytes"
    sweep = SweepResults([key], [SweepPoint(i, {key: size}, {}) for i, size in enumerate(sizes)], runs)
    (exp,) = [e for e in paper_experiments("mrc") if e.key == "fig15"]

    def large_row(busbw: dict[str, float]) -> Row:
        monkeypatch.setattr(mrc_more, "busbw_by_size", lambda _: busbw)
        return {r.metric: r for r in exp.analyse(exp, {"sendrecv": sweep}, False)}[
            "per-NIC bandwidth at large sizes (1024 ranks)"
        ]

    # 1 MiB is latency-bound and not judged; 16 and 64 MiB near 92 GB/s.
    row = large_row({"1MiB": 60.0, "16MiB": 90.5, "64MiB": 92.4})
    assert (row.verdict, row.value) == (MATCHES, 90.5)
    # Reaching 92 at the largest size alone is not "at large sizes".
    row = large_row({"1MiB": 60.0, "16MiB": 70.0, "64MiB": 92.4})
    assert (row.verdict, row.reason) == (PARTLY, "in range at 1 of 2 sizes")


def test_spectrum_x_fig14a_judges_the_flaps_impact_at_every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    from fabricsim.experiments import scale

    def run(p99: float) -> Results:
        out = Results.__new__(Results)
        out.p99 = p99  # type: ignore[attr-defined]
        return out

    monkeypatch.setattr(scale, "_p99_normalized", lambda out: out.p99)
    (exp,) = [e for e in paper_experiments("scale") if e.key == "spx_fig14a"]
    # Flaps cost nothing at 16 MB and 256 MB; at 1 GB each link down costs 1%.
    outcomes: dict[str, Outcome] = {
        f"{size}_down_{k}": run(1.0 + (0.01 * k if size == "1GB" else 0.0))
        for size in ("16MB", "256MB", "1GB")
        for k in range(11)
    }
    rows = {r.metric: r for r in exp.analyse(exp, outcomes, False)}
    impact = rows["expected P99 CCT / ideal with flaps, over pristine"]
    # The Poisson mean is 10/60 x 10 = 1.67 links down: 1 GB's expected impact is 1.0167.
    assert impact.verdict == PARTLY and impact.reason == "in range at 2 of 3 sizes"
    assert impact.value == pytest.approx(1 + 0.01 * 10 / 6, abs=1e-4)
    assert impact.ours.startswith("16MB: 1.00000, 256MB: 1.00000, 1GB: 1.01667")
    assert rows["P99 CCT / ideal @ 1GB, by links down"].ours.startswith("0: 1.0000, 1: 1.0100")


def test_mrc_256_paths_runs_on_a_fabric_with_256_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    from fabricsim.experiments import mrc_more

    (exp,) = [e for e in paper_experiments("mrc") if e.key == "fig16_256evs"]
    scenarios = {run.key: run.load() for run in exp.runs}
    # Until 2026-11-29 the 256 EVs sprayed over Fig 16's 32 paths, as the 128 did.
    for key in ("mrc_256evs", "mrc_128evs"):
        topo = scenarios[key]["topology"]
        assert mrc_more._uplinks(scenarios[key]) * topo["planes"] == 256, key
    assert scenarios["mrc_256evs"]["transport"]["evs"] == 256
    assert scenarios["roce_16qp"]["transport"]["qps"] == 16
    # Every rank's ring neighbour is under the other T0, and both T0s are full.
    for scenario in scenarios.values():
        assert scenario["jobs"][0]["ranks"] == scenario["topology"]["nics"] == 128
        assert scenario["jobs"][0]["placement"] == "cross_t1"

    def sweep(key: str) -> SweepResults:
        run = Results.__new__(Results)
        run.scenario = scenarios[key]
        return SweepResults(["bytes"], [], [run])

    busbw = {
        "mrc_256evs": {"64KiB": 0.24, "16MiB": 30.0, "256MiB": 45.0},
        "mrc_128evs": {"64KiB": 0.24, "16MiB": 30.0, "256MiB": 46.0},
        "roce_16qp": {"64KiB": 0.25, "16MiB": 25.0, "256MiB": 30.0},
    }
    outcomes = {key: sweep(key) for key in busbw}
    monkeypatch.setattr(mrc_more, "busbw_by_size", lambda o: busbw[next(k for k, v in outcomes.items() if v is o)])
    rows = {r.metric: r for r in exp.analyse(exp, outcomes, False)}
    assert rows["distinct paths between two T0s (uplinks per T0 x planes)"].value == 256
    assert rows["MRC 256 EVs / RoCE 16 QPs @ largest size"].value == pytest.approx(1.5)
    assert rows["MRC 256 EVs / RoCE 16 QPs @ smallest size"].value == pytest.approx(0.96)


def test_a_claim_at_every_size_needs_its_range() -> None:
    with pytest.raises(ValueError, match="needs its range"):
        collective_analysis([("a / b", "above 1", "a", "b", "every")])
    with pytest.raises(ValueError, match="size rule 'middle'"):
        collective_analysis([("a / b", "above 1", "a", "b", "middle", (1.0, None))])
    with pytest.raises(ValueError, match="needs its range"):
        collective_analysis([("a / b", "above 1", "a", "b", "from 16MiB")])


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


def test_reproduce_spectrum_x_plane_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Fig 15a and Fig 12 as the paper has them: per-plane contexts hold the bandwidth under asymmetry where one
    shared context halves it, and a host link failure is left within milliseconds, not at the timeout."""
    out = tmp_path / "out"
    assert main(["reproduce", "spectrum-x", "--quick", "--only", "fig15a", "--only", "fig12", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    fig15 = {r["metric"]: r["value"] for r in summary["experiments"]["fig15a"]["rows"]}
    assert fig15["SPX asymmetric / symmetric"] > 0.9, fig15
    assert fig15["Global CC asymmetric / symmetric"] < 0.7, fig15
    fig12 = {r["metric"]: r["value"] for r in summary["experiments"]["fig12"]["rows"]}
    assert fig12["PLB: time to 75% of line rate after the failure"] < 3.0, fig12
    assert 0.7 < fig12["PLB: throughput on three planes / before"] < 0.8, fig12
    assert fig12["SW LB: time to recover"] > 1.0, fig12
    assert fig12["single plane: throughput after the failure"] < 1.0, fig12


def _ping_pong_scenario(load: str | None, forwarding: str, transport: str) -> dict[str, Any]:
    """NIC n pings NIC n + 8 on a 2-tier Clos of 16 NICs; with `load`, each direction of each pair writes at that
    NIC rate limit, as Fig 8b runs ib_send_lat beside rate-limited ib_write_bw."""
    pairs = [(n, n + 8) for n in range(8)]
    traffic = [
        {"kind": "flow", "src": a, "dst": b, "bytes": "1GB", "rate": load}
        for x, y in pairs
        for a, b in ((x, y), (y, x))
        if load
    ]
    phases = [
        {"name": "ping", "collective": {"op": "broadcast", "bytes": "2B", "root": 0, "channels": 1}},
        {"name": "pong", "collective": {"op": "broadcast", "bytes": "2B", "root": 1, "channels": 1}},
    ]
    jobs = [
        {
            "name": f"lat{a}",
            "ranks": 2,
            "placement": {"explicit": [a, b]},
            "start": "100us",
            "iterations": 40,
            "phases": phases,
        }
        for a, b in pairs
    ]
    return {
        "name": "pingpong",
        "duration": "1ms",
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "nics": 16, "link_rate": "100Gbps", "link_delay": "1us"},
        "switch": {"forwarding": forwarding},
        "transport": {"kind": transport},
        "traffic": traffic,
        "jobs": jobs,
    }


def test_fig8b_probe_latency_is_half_a_round_trip_and_grows_under_ecmp_load() -> None:
    """Fig 8b's measurement: on an idle fabric a probe's latency is the path's (4 hops of 1 us plus a small
    frame's serialization), the same for every pair; under 75% rate-limited load ECMP's collisions queue some
    pairs' probes, adaptive routing keeps every pair near the idle latency."""
    from fabricsim.experiments.spectrum_x import pair_latency_p99

    idle = pair_latency_p99(fabricsim_run(_ping_pong_scenario(None, "ecmp", "rocev2")))
    assert len(idle) == 8
    assert idle.min() > 4.0 and idle.max() < 4.1, idle
    eth = pair_latency_p99(fabricsim_run(_ping_pong_scenario("75Gbps", "ecmp", "rocev2")))
    spx = pair_latency_p99(fabricsim_run(_ping_pong_scenario("75Gbps", "adaptive", "spx")))
    assert eth.max() > idle.max() + 0.5, eth
    assert spx.max() < eth.max(), (spx, eth)


def test_pro_jct_slowdown_and_table2_read_a_tiny_ring() -> None:
    """PRO's JCT slowdown is the last completion over the ideal (every flow starts at 0 with the same size,
    so it is the largest flow slowdown); the ECN rows read the per-tier counts of every design."""
    from fabricsim.experiments import pro

    small = {"topology.radix": 4, "traffic.0.bytes": "256KB"}
    runs = {
        key: fabricsim_run(load_scenario(scenarios_dir() / f"pro/ring_{key}.yaml", small)) for key, _ in pro.DESIGNS
    }
    for key, results in runs.items():
        slowdown = pro.jct_slowdown(results)
        assert slowdown is not None and slowdown >= 1.0, key
        assert slowdown == pytest.approx(float(results.flows["slowdown"].max()), rel=1e-6), key
    assert "ooo_degree" in runs["pro"].summary
    exp = next(e for e in PRO if e.key == "table2")
    rows = {r.metric: r for r in exp.analyse(exp, runs, True)}
    marks = runs["ecmp"].summary.get("ecn_marks_by_tier") or {}
    assert rows["ECMP: ECN marks at ToRs / Aggrs"].value == marks.get("tier0", 0) + marks.get("tier1", 0)
    cw = runs["conweave"].summary.get("ecn_marks_by_tier") or {}
    assert rows["ConWeave: ECN marks at ToRs / Aggrs"].value == cw.get("tier0", 0) + cw.get("tier1", 0)
    # ConWeave reorders in the destination ToR: its NICs, on go-back-N, see every flow in order.
    assert "conweave" in runs["conweave"].summary
    assert runs["conweave"].flows["out_of_order_packets"].sum() == 0
    assert runs["conweave"].summary["conweave"]["still_held"] == 0


def _pro_run(
    marks: tuple[int, int] = (0, 0),
    slowdown: float = 1.0,
    load_p50: float = 1.0,
    load_p99: float = 8.0,
    queue_p99: float = 1e5,
) -> Results:
    """A synthetic Ring run of PRO's figures: per-tier ECN marks, two flows whose JCT slowdown is `slowdown`
    (ideal 1 ms each, one per NIC), and the imbalance table's quantiles, the same for both groups."""
    run = Results.__new__(Results)
    run.scenario = {}
    run.summary = {"ecn_marks_by_tier": {"tier0": marks[0], "tier1": marks[1]}, "sim_time_s": 1e-3 * slowdown}
    flows = pl.DataFrame(
        {
            "src": [0, 1],
            "dst": [1, 0],
            "start_s": [0.0, 0.0],
            "end_s": [1e-3, 1e-3 * slowdown],
            "ideal_fct_s": [1e-3, 1e-3],
        }
    )
    imbalance = pl.DataFrame(
        [
            (group, metric, 100, p50, p50, p99, p99)
            for group in ("tier0_up", "tier1_down")
            for metric, p50, p99 in (
                ("load_max_over_mean", load_p50, load_p99),
                ("queue_max_minus_mean_bytes", 0.0, queue_p99),
            )
        ],
        schema=["group", "metric", "samples", "p50", "p90", "p99", "max"],
        orient="row",
    )
    run.frames = {"flows": flows, "imbalance": imbalance}
    run.complete = True
    return run


def _pro_rows(key: str, outcomes: Mapping[str, Outcome]) -> dict[str, Row]:
    """The rows of PRO's experiment `key` over three seeds of the same outcomes, merged and judged."""
    exp = next(e for e in PRO if e.key == key)
    return {r.metric: r for r in merge_seeds([(seed, exp.analyse(exp, outcomes, False)) for seed in (1, 2, 3)])}


def test_pro_designs_add_conweave_except_to_fig12() -> None:
    from fabricsim.experiments import pro

    assert [key for key, _ in pro.DESIGNS] == ["ecmp", "ar", "drill", "conweave", "pro"]
    runs = {e.key: [r.key for r in e.runs] for e in PRO}
    for key in ("fig8", "fig8tree", "table2", "fig9"):
        assert "conweave" in runs[key], key
    assert [f"conweave_{n}" in runs["fig10"] for n in (4, 8, 16)] == [True, True, True]
    assert "conweave" not in runs["fig12"]  # the paper's Fig 12 leaves ConWeave out
    # ConWeave runs plain RoCEv2, as ECMP: no direct placement, its reordering is in the ToRs.
    scenario = next(r for r in next(e for e in PRO if e.key == "table2").runs if r.key == "conweave").load()
    assert scenario["switch"]["forwarding"] == "conweave"
    assert not scenario.get("transport", {}).get("direct_placement", False)


def test_pro_table2_reads_conweave_as_flow_level() -> None:
    outcomes: dict[str, Outcome] = {
        "ecmp": _pro_run((1000, 800)),
        "ar": _pro_run((5, 0)),
        "drill": _pro_run((0, 10)),
        "conweave": _pro_run((1200, 300)),
        "pro": _pro_run((0, 0)),
    }
    rows = _pro_rows("table2", outcomes)
    assert rows["ConWeave: ECN marks at ToRs / Aggrs"].ours.startswith("1,200 / 300")
    above = rows["ConWeave's marks / the most of AR, DRILL"]
    assert (above.value, above.verdict) == (150.0, MATCHES)  # 1,500 over DRILL's 10
    # One order of magnitude is not the paper's "orders of magnitude" (about 1,000x).
    outcomes["drill"] = _pro_run((0, 30))
    above = _pro_rows("table2", outcomes)["ConWeave's marks / the most of AR, DRILL"]
    assert (above.value, above.verdict) == (50.0, CONTRADICTS)
    ecmp = rows["ConWeave's marks / ECMP's, both tiers"]
    assert ecmp.value == pytest.approx(1500 / 1800) and ecmp.verdict == MATCHES  # the paper's 0.80, within 20%
    assert rows["ConWeave's marks at the ToRs / ECMP's"].value == pytest.approx(1.2)
    assert rows["ConWeave's marks at the ToRs / ECMP's"].verdict == MATCHES
    assert rows["PRO's marks / the fewest of ECMP, AR, DRILL, ConWeave"].value == 0.0
    # A ConWeave that marks like a per-packet design contradicts all three.
    outcomes["conweave"] = _pro_run((40, 10))
    rows = _pro_rows("table2", outcomes)
    for metric in (
        "ConWeave's marks / the most of AR, DRILL",
        "ConWeave's marks / ECMP's, both tiers",
        "ConWeave's marks at the ToRs / ECMP's",
    ):
        assert rows[metric].verdict == CONTRADICTS, metric
    assert not any("not run" in r.ours for r in rows.values())


def test_pro_fig9_compares_conweaves_median_link_load_with_the_per_packet_designs() -> None:
    outcomes: dict[str, Outcome] = {
        "ecmp": _pro_run(load_p50=4.0),
        "ar": _pro_run(load_p50=1.2),
        "drill": _pro_run(load_p50=1.1),
        "conweave": _pro_run(load_p50=2.4),
        "pro": _pro_run(load_p50=1.05, queue_p99=5e4),
    }
    rows = _pro_rows("fig9", outcomes)
    for where in ("ToR uplinks", "Aggr downlinks"):
        row = rows[f"{where}: link-load imbalance p50, ConWeave / the worst of AR, DRILL, PRO"]
        assert row.value == pytest.approx(2.0) and row.verdict == MATCHES, row  # 2.4 over AR's 1.2
        assert "ConWeave 2.40" in row.ours
        assert "ConWeave 100.0" in rows[f"{where}: queue imbalance (max - mean) p99"].ours
    outcomes["conweave"] = _pro_run(load_p50=1.0)  # balanced as well as the per-packet designs: not worse
    row = _pro_rows("fig9", outcomes)["ToR uplinks: link-load imbalance p50, ConWeave / the worst of AR, DRILL, PRO"]
    assert row.verdict == CONTRADICTS
    assert not any(r.verdict == NOT_RUN for r in _pro_rows("fig9", outcomes).values())


def test_pro_fig10_reads_conweave_against_ar_drill_and_ecmp() -> None:
    slowdowns = {"ecmp": 5.0, "ar": 2.0, "drill": 2.5, "conweave": 2.2, "pro": 1.2}
    outcomes: dict[str, Outcome] = {f"{k}_{n}": _pro_run(slowdown=v) for k, v in slowdowns.items() for n in (4, 8, 16)}
    rows = _pro_rows("fig10", outcomes)
    for n in (4, 8, 16):
        assert rows[f"{n} links down: JCT slowdown"].ours.startswith("ECMP 5.00, AR 2.00, DRILL 2.50, ConWeave 2.20")
        worst = rows[f"{n} links down: ECMP / the worst of AR, DRILL, ConWeave"]
        assert worst.value == pytest.approx(2.0) and worst.verdict == MATCHES  # 5.0 over DRILL's 2.5
        similar = rows[f"{n} links down: ConWeave / the nearer of AR, DRILL"]
        assert similar.value == pytest.approx(1.1) and similar.verdict == MATCHES  # AR's 2.0 is nearer than 2.5
        assert rows[f"{n} links down: best other / PRO"].value == pytest.approx(2.0 / 1.2)
    # A ConWeave far from AR and DRILL, and worse than ECMP: both claims fail.
    for n in (4, 8, 16):
        outcomes[f"conweave_{n}"] = _pro_run(slowdown=6.0)
    rows = _pro_rows("fig10", outcomes)
    assert rows["16 links down: ECMP / the worst of AR, DRILL, ConWeave"].verdict == CONTRADICTS
    assert rows["16 links down: ConWeave / the nearer of AR, DRILL"].value == pytest.approx(6.0 / 2.5)
    assert rows["16 links down: ConWeave / the nearer of AR, DRILL"].verdict == CONTRADICTS
    # Without ConWeave's runs the failure counts have no rows (as for any missing design).
    partial = {k: v for k, v in outcomes.items() if not k.startswith("conweave")}
    assert _pro_rows("fig10", partial) == {}


def test_pro_fig8_counts_conweave_in_the_reductions() -> None:
    def sweep(*slowdowns: float) -> SweepResults:
        points = [SweepPoint(i, {"traffic.0.bytes": size}, {}) for i, size in enumerate(("4MB", "16MB"))]
        return SweepResults(["traffic.0.bytes"], points, [_pro_run(slowdown=v) for v in slowdowns])

    outcomes: dict[str, Outcome] = {
        "ecmp": sweep(5.0, 6.0),
        "ar": sweep(2.0, 2.0),
        "drill": sweep(1.5, 1.5),
        "conweave": sweep(3.0, 4.0),
        "pro": sweep(1.0, 1.0),
    }
    rows = _pro_rows("fig8", outcomes)
    assert "ConWeave 3.00" in rows["JCT slowdown @ 4MB"].ours
    cut = rows["PRO's JCT slowdown reduction vs ConWeave, every size"]
    assert cut.value == pytest.approx(1 - 1 / 3) and cut.verdict == MATCHES
    assert cut.ours.startswith("4MB: 66.7%, 16MB: 75.0%")
    assert rows["largest reduction over designs and sizes"].value == pytest.approx(1 - 1 / 6)
    assert "ConWeave" not in {r.metric for r in rows.values()}  # the old `not run` row is gone


def test_pro_fig11a_runs_on_the_papers_tree_traffic_too() -> None:
    """Fig 11(a) is the paper's tree pattern: it is run there, not left `not run` beside the two-ToR case."""
    (tree,) = [e for e in PRO if e.key == "fig11a_tree"]
    scenarios = {run.key: run.load() for run in tree.runs}
    for scenario in scenarios.values():
        assert [t["kind"] for t in scenario["traffic"]] == ["double_binary_tree"]
    assert scenarios["unaware"]["nic"]["orchestration"]["destination_aware"] is False
    assert scenarios["pro"]["nic"].get("orchestration", {}).get("destination_aware", True) is True
    not_run = next(e for e in PRO if e.key == "not_run")
    assert [r.metric for r in not_run.analyse(not_run, {}, False)] == [
        "Fig 7: testbed JCT slowdown (MoE, NCCL all-to-all)"
    ]


def test_pro_fig13_reads_the_cut_against_mprdmas_bitmap() -> None:
    outcomes: dict[str, Outcome] = {}
    for n in (4, 8, 16):
        outcomes[f"pro_{n}"] = _pro_run(slowdown=1.2)
        outcomes[f"bitmap_{n}"] = _pro_run(slowdown=10.0)
    rows = _pro_rows("fig13", outcomes)
    for n in (4, 8, 16):
        cut = rows[f"{n} links fail: PRO's JCT slowdown reduction vs MPRDMA's bitmap"]
        assert cut.value == pytest.approx(0.88) and cut.verdict == MATCHES
        assert rows[f"{n} links fail: JCT slowdown"].ours.startswith("PRO 1.20 (0 resent), MPRDMA bitmap 10.00")
    # PRO slower than the bitmap: the cut is negative, a contradiction.
    outcomes["pro_8"] = _pro_run(slowdown=12.0)
    assert _pro_rows("fig13", outcomes)["8 links fail: PRO's JCT slowdown reduction vs MPRDMA's bitmap"].verdict == (
        CONTRADICTS
    )


def _hpn_rows(key: str, outcomes: Mapping[str, Outcome], seeds: tuple[int, ...] = (1, 2, 3)) -> dict[str, Row]:
    """The rows of HPN's experiment `key` over `seeds` of the same outcomes, merged and judged."""
    exp = next(e for e in HPN if e.key == key)
    return {r.metric: r for r in merge_seeds([(seed, exp.analyse(exp, outcomes, False)) for seed in seeds])}


def test_hpn_downlinks_of_a_tiny_all_reduce() -> None:
    """Per NIC the two ToR downlinks' bytes, busier first, and their sampled queues; on the dual plane a ring
    channel keeps to one NIC port end to end, so the two ports carry the same data."""
    from fabricsim.experiments import hpn

    small = {"jobs.0.ranks": 8, "jobs.0.phases.0.collective.bytes": "1MB"}
    runs = {
        key: fabricsim_run(load_scenario(scenarios_dir() / f"hpn/fig13_{key}.yaml", small)) for key in ("plain", "dual")
    }
    for key, results in runs.items():
        nics = hpn.nic_downlinks(results)
        assert nics.height == 8, key  # the job's NICs; the 24 idle ones received nothing
        assert (nics["busier_bytes"] >= nics["idler_bytes"]).all(), key
        downlinks = results.ports.filter(pl.col("peer").str.starts_with("nic"))
        assert nics["busier_bytes"].sum() + nics["idler_bytes"].sum() == downlinks["tx_bytes"].sum(), key
        assert nics["busier_queue"].null_count() == 0, key  # every ToR downlink is sampled
        ((job, algbw),) = hpn.job_algbw(results).items()
        assert (job, algbw) == ("allreduce", pytest.approx(float(results.collectives["algbw_gbps"][0])))
        marks = hpn.ecn_marks_by_link(results)
        assert sum(marks.values()) == results.ports.filter(pl.col("node").str.starts_with("t"))["ecn_marks"].sum()
    assert float(hpn.nic_downlinks(runs["dual"])["ratio"].max()) < 1.01
    assert float(hpn.nic_downlinks(runs["plain"])["ratio"].max()) > 2  # the typical Clos's aggregation chooses
    rows = _hpn_rows("fig13", runs, seeds=(1,))
    assert rows["dual-plane: bytes of the busier / the idler ToR downlink toward a NIC, median over NICs"].value == (
        pytest.approx(1.0, abs=0.01)
    )
    assert "32-rank cross-segment all-reduce algbw: dual-plane's gain" in rows


def _algbw_run(algbw: dict[str, float], path_search: dict[str, int] | None = None) -> Results:
    """A synthetic run whose jobs reached the given algbw (Gb/s), with the disjoint path search's tally."""
    run = Results.__new__(Results)
    run.scenario = {}
    run.summary = {} if path_search is None else {"path_search": path_search}
    run.frames = {"collectives": pl.DataFrame({"job": list(algbw), "algbw_gbps": list(algbw.values())})}
    run.complete = True
    return run


def test_hpn_fig19_judges_every_size() -> None:
    def sweep(*algbw: float) -> SweepResults:
        points = [SweepPoint(i, {"jobs.0.ranks": ranks}, {}) for i, ranks in enumerate((8, 16, 32))]
        return SweepResults(["jobs.0.ranks"], points, [_algbw_run({"allreduce": v}) for v in algbw])

    rows = _hpn_rows("fig19", {"plain": sweep(100.0, 80.0, 50.0), "dual": sweep(160.0, 124.0, 100.0)})
    assert rows["8 ranks: all-reduce algbw, dual-plane's gain"].value == pytest.approx(0.6)
    assert rows["8 ranks: all-reduce algbw, dual-plane's gain"].verdict == MATCHES
    assert rows["32 ranks: all-reduce algbw, dual-plane's gain"].verdict == CONTRADICTS  # +100%: beyond 63.7% x 1.2
    every = rows["dual-plane's gain, every size"]
    assert every.value == pytest.approx(0.55) and every.verdict == PARTLY
    assert every.ours.startswith("8: +60.0%, 16: +55.0%, 32: +100.0%")


def test_hpn_pathsel_reads_the_jobs_and_the_search_over_sizes() -> None:
    tally = {"connections": 64, "qps": 256, "disjoint_qps": 192, "candidates": 300, "links_examined": 1600}
    hashed = {"a": 100.0, "b": 100.0, "c": 120.0, "d": 80.0}
    outcomes: dict[str, Outcome] = {
        # 4 MB: the disjoint paths lose 10%; 32 MB: +20%; 128 MB: +30%.
        "hash_4MB": _algbw_run(hashed),
        "disjoint_4MB": _algbw_run({k: 0.9 * v for k, v in hashed.items()}),
        "hash_32MB": _algbw_run(hashed),
        "disjoint_32MB": _algbw_run({"a": 120.0, "b": 130.0, "c": 120.0, "d": 110.0}, tally),
        "hash_128MB": _algbw_run(hashed),
        "disjoint_128MB": _algbw_run({k: 1.3 * v for k, v in hashed.items()}),
    }
    rows = _hpn_rows("pathsel", outcomes)
    at_32 = rows["all-reduce algbw @ 32MB: disjoint paths' gain over hashing"]
    assert at_32.value == pytest.approx(0.2) and "the slowest job +37.5%" in at_32.ours
    # "Up to 34.7%": the most over sizes, +30% at 128 MB, is in range.
    most = rows["all-reduce algbw, mean over the 4 jobs: disjoint paths' gain over hashing, the most over sizes"]
    assert most.value == pytest.approx(0.3) and most.verdict == MATCHES and most.ours.startswith("+30.0% at 128MB")
    # "Improve": 4 MB loses, so not at every size.
    every = rows["all-reduce algbw, mean over the 4 jobs: disjoint paths' gain over hashing, every size"]
    assert every.value == pytest.approx(-0.1) and every.verdict == PARTLY
    assert every.ours.startswith("4MB: -0.10, 32MB: 0.20, 128MB: 0.30")
    disjoint = rows["QPs on a path disjoint from their connection's other QPs"]
    assert disjoint.value == 0.75 and disjoint.verdict == CONTRADICTS
    assert rows["links examined per connection by the search"].value == 25.0


def test_hpn_tables_read_the_topology_calculator(tmp_path: Path) -> None:
    """Table 1 and Table 2 need no run: the path counts and NIC counts of the shipped topologies."""
    assert main(["reproduce", "hpn", "--only", "table1", "--only", "table2", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    table1 = {r["metric"]: r for r in summary["experiments"]["table1"]["rows"]}
    assert table1["Pod in HPN (hpn_pod.yaml): equal-cost paths a host searches"]["value"] == 60
    assert table1["Fat tree k=48 (fat_tree_k48.yaml): equal-cost paths a host searches"]["value"] == 576
    assert table1["Fat tree k=48 / HPN pod: paths searched"]["value"] == pytest.approx(9.6)
    assert table1["SuperPod-like 3 tiers / HPN pod: paths searched"]["value"] == pytest.approx(1024 / 60)
    assert table1["Jupiter"]["verdict"] == NOT_RUN
    table2 = [r["value"] for r in summary["experiments"]["table2"]["rows"]]
    assert table2 == [128, 4096, 1024, 15360]
    # The counts know no seed; over the three seeds every exact count matches.
    assert {r["verdict"] for r in summary["experiments"]["table2"]["rows"]} == {MATCHES}


def _step_run(step_ms: float, network_ms: float) -> Results:
    """A synthetic run of two equal steps, each communicating for its last `network_ms`."""
    run = Results.__new__(Results)
    run.scenario, run.summary, run.complete = {}, {}, True
    ends = [step_ms * 1e-3, 2 * step_ms * 1e-3]
    run.frames = {
        "steps": pl.DataFrame({"iteration": [0, 1], "start_s": [e - step_ms * 1e-3 for e in ends], "end_s": ends}),
        "collectives": pl.DataFrame(
            {"iteration": [0, 1], "start_s": [e - network_ms * 1e-3 for e in ends], "end_s": ends}
        ),
    }
    return run


def test_hpn_fig16_gains_and_their_order() -> None:
    outcomes: dict[str, Outcome] = {
        "hpn_llama7b": _step_run(1.0, 0.2),
        "dcn_llama7b": _step_run(1.08, 0.28),  # +8%
        "hpn_llama13b": _step_run(2.0, 0.4),
        "dcn_llama13b": _step_run(2.6, 1.0),  # +30%: beyond 14.4% x 1.2
        "hpn_gpt3_175b": _step_run(17.0, 0.5),
        "dcn_gpt3_175b": _step_run(17.5, 1.0),  # +2.9%
    }
    rows = _hpn_rows("fig16", outcomes)
    seven = rows["LLaMa-7B: training throughput, HPN's gain over DCN+"]
    assert seven.value == pytest.approx(0.08) and seven.verdict == MATCHES
    assert "the network 20% of HPN's step" in seven.ours
    assert rows["LLaMa-13B: training throughput, HPN's gain over DCN+"].verdict == CONTRADICTS
    assert rows["the order of the gains"].verdict == MATCHES  # 13B, 7B, 175B
    outcomes["dcn_llama7b"] = _step_run(1.5, 0.7)  # +50%: 7B now gains most
    assert _hpn_rows("fig16", outcomes)["the order of the gains"].verdict == CONTRADICTS


def test_hpn_fig16_proxies_cross_segments_only_on_dcn_plus() -> None:
    """The LLaMa-7B step's NVLS all-reduce on 14 hosts: HPN keeps every rail ring under its ToR pair, DCN+ (3.5
    segments of 4 hosts) sends part of it down the aggregation switches."""
    small = {"jobs.0.iterations": 1, "jobs.0.phases.1.collective.bytes": "2MB"}
    crossing = {}
    for net in ("hpn", "dcn"):
        results = fabricsim_run(load_scenario(scenarios_dir() / f"hpn/fig16_{net}_llama7b.yaml", small))
        assert results.steps.height == 1, net
        down = results.ports.filter(pl.col("node").str.starts_with("t1."), pl.col("peer").str.starts_with("t0."))
        crossing[net] = down["tx_bytes"].sum()
    assert crossing["hpn"] == 0
    assert crossing["dcn"] > 0


def test_mrc_fig18_holds_the_8qp_dip_to_its_depth_and_leaves_fair_shares_unjudged(tmp_path: Path) -> None:
    # The quick runs themselves (a few seconds): RoCE with 8 QPs collapses
    # the victim far below the figure's 100 Gb/s dip, which is not its
    # shape; MRC's senders' shares are not sampled, so not judged.
    exp = next(e for e in MRC if e.key == "fig18")
    rows = {r.metric: r for r in run_experiment(exp, tmp_path / "out", quick=True)[0]}
    dip = rows["RoCE DCQCN 8 QPs (18b): victim lowest 50 us sample"]
    assert dip.expect == (80.0, 120.0) and dip.value is not None and dip.value < 80 and dip.verdict == CONTRADICTS
    for label in ("MRC 1 QP (18c)", "MRC 8 QPs (21c)"):
        assert rows[f"{label}: incast senders' shares"].verdict == NOT_RUN
        assert rows[f"{label}: incast receiver"].paper == "line rate"
