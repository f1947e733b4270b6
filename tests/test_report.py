"""`report.html` of run, comparison and sweep directories; one test renders them in headless Chromium."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

import fabricsim
from fabricsim import ScenarioError
from fabricsim.report import MAX_LINES, MAX_POINTS, NO_SERIES, write_report
from fabricsim.results import INCOMPLETE_MARKER

SCENARIO = Path(fabricsim.__file__).parent / "scenarios" / "compare" / "uplink_down_midrun.yaml"
# The all-reduce of SCENARIO plus two flows, sampled ports, a flap beside the uplink failure and
# Clustermapper, so that one small run (0.4 ms simulated) has something for every section.
RICH = [
    'telemetry.ports=["t0.p0.0:2", "t1.p0.0:0"]',
    "traffic=[{kind: flow, src: 0, dst: 6, bytes: 256KB}, {kind: flow, src: 1, dst: 7, bytes: 256KB, start: 10us}]",
    'faults=[{kind: link_down, at: 20us, port: "t0.p0.0:2"}, {kind: link_flap, at: 100us, duration: 50us, '
    'port: "t0.p1.0:2"}]',
    "clustermapper.period=40us",
    "clustermapper.timeout=10us",
]
PROBE = """<script>
window.reportErrors = [];
window.addEventListener("error", (e) => window.reportErrors.push(String(e.message)));
window.addEventListener("unhandledrejection", (e) => window.reportErrors.push("rejected: " + String(e.reason)));
window.addEventListener("load", () => setTimeout(() => {
  const plots = [...document.querySelectorAll(".js-plotly-plot")].filter((d) => d.querySelector(".main-svg"));
  const probe = document.createElement("pre");
  probe.id = "report-probe";
  probe.textContent = JSON.stringify({errors: window.reportErrors, plots: plots.length});
  document.body.appendChild(probe);
}, 500));
</script>"""


def _run(directory: Path, *overrides: str) -> Path:
    # 4 MB, not the example's 64 MB: the run stays a fraction of a millisecond.
    small = "jobs.0.phases.0.collective.bytes=4MB"
    return fabricsim.run(SCENARIO, overrides=["design=mrc", small, *overrides]).write(directory)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("report") / "run", *RICH)


@pytest.fixture(scope="module")
def run_report(run_dir: Path) -> str:
    return write_report(run_dir).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def compare_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A comparison directory as `fabricsim compare` writes it: MRC on two seeds, Spectrum-X on one."""
    root = tmp_path_factory.mktemp("report") / "cmp"
    rows = []
    for design, seed in (("mrc", 1), ("mrc", 2), ("spectrum-x", 1)):
        run = _run(root / design / f"seed_{seed}", f"design={design}", f"seed={seed}", *RICH[:3])
        summary = json.loads((run / "summary.json").read_text())
        rows.append(
            {"design": design, "seed": seed, "complete": True, "fct_p99_us": summary["fct_p99_us"]}
            | {"drops": summary["drops"], "qp_errors": None}
        )
    pl.DataFrame(rows).write_parquet(root / "compare.parquet")
    write_report(root / "mrc" / "seed_1")
    return root


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep directory of the all-reduce's size, stopped before its third point."""
    root = tmp_path_factory.mktemp("report") / "sweep"
    parameter = "jobs.0.phases.0.collective.bytes"
    runs, frames = [], []
    for index, size in enumerate(("1MB", "4MB", "16MB")):
        directory = f"{index:03d}_{size}"
        state = "not run"
        if index < 2:
            run = _run(root / directory, f"{parameter}={size}")
            collectives = pl.read_parquet(run / "collectives.parquet")
            tags = [
                pl.lit(index, pl.UInt64).alias("sweep_index"),
                pl.lit(size).alias(parameter),
                pl.lit(1).alias("seed"),
            ]
            frames.append(collectives.select(*tags, pl.all()))
            state = "complete"
        runs.append({"index": index, "values": {parameter: size}, "seed": 1, "directory": directory, "state": state})
    (root / "sweep.json").write_text(json.dumps({"complete": False, "parameters": [parameter], "runs": runs}))
    pl.concat(frames).write_parquet(root / "sweep.parquet")
    return root


def _figures(text: str) -> list[str]:
    """The data and layout each figure of a report passes to Plotly.newPlot."""
    return re.findall(r"Plotly\.newPlot\(\s*\"figure-\d+\",(.*?)\)\s*\};", text, re.DOTALL)


def test_run_report_has_every_section(run_report: str) -> None:
    for section in (
        "Summary",
        "Flow completion times",
        "Collective completion times",
        "Faults",
        "Time series",
        "Link utilization",
        "Tables",
        "Scenario (scenario.json)",
    ):
        assert f"<h2>{section}</h2>" in run_report
    assert "<title>fabricsim run: uplink_down_midrun</title>" in run_report
    assert f"fabricsim {fabricsim.__version__}" in run_report
    assert "drops_by_cause.link_down" in run_report
    figures = "\n".join(_figures(run_report))
    for title in ("FCT CDF", "Slowdown CDF", "CCT CDF per job and phase", "Port throughput", "Port queue length"):
        assert f'"text":"{title}' in figures
    assert "NIC receive goodput" in figures and "NIC sending per plane" in figures
    assert '"name":"nic0:1"' in figures  # a line per plane
    assert 'class="warn"' not in run_report


def test_run_report_draws_faults_and_verdicts_over_the_time_plots(run_report: str) -> None:
    series = [f for f in _figures(run_report) if '"title":{"text":"time (us)"}' in f]
    assert len(series) == 4
    for figure in series:
        # The uplink failure as a line at 20 us, the flap as a span from 100 to 150 us, Clustermapper's verdicts.
        assert '"text":"link_down port t0.p0.0:2"' in figure
        assert re.search(r'"type":"line","x0":20\.0,"x1":20\.0', figure)
        assert re.search(r'"type":"rect","x0":100\.0,"x1":150\.0', figure)
        assert "clustermapper: t0.p0.0:2 down" in figure


def test_run_report_has_a_heat_map_per_tier(run_report: str) -> None:
    heat_maps = [f for f in _figures(run_report) if '"type":"heatmap"' in f]
    titles = [re.search(r'"title":\{"text":"([^"]*): utilization', f)[1] for f in heat_maps]
    assert titles == ["NICs", "tier 0 switches", "tier 1 switches"]


def test_run_report_is_self_contained_and_deterministic(run_dir: Path, run_report: str) -> None:
    assert not re.search(r"<script[^>]*\bsrc=", run_report)
    assert not re.search(r"<link[^>]*\bhref=", run_report)
    assert run_report.count("<script>") == 1 + len(_figures(run_report))  # plotly.js once, then the figures
    assert write_report(run_dir).read_text(encoding="utf-8") == run_report
    assert not list(run_dir.glob(".report.html.*"))  # no temporary file left behind


def test_incomplete_run_is_flagged_and_empty_sections_say_why(run_dir: Path, tmp_path: Path) -> None:
    run = shutil.copytree(run_dir, tmp_path / "run")
    (run / INCOMPLETE_MARKER).write_text("stopped\n")
    (run / "flows.parquet").unlink()
    (run / "timeseries.parquet").unlink()
    text = write_report(run).read_text(encoding="utf-8")
    assert '<p class="warn">INCOMPLETE' in text
    assert '<p class="note">no flows</p>' in text
    assert f'<p class="note">{html.escape(NO_SERIES)}</p>' in text


def test_long_series_are_capped_and_downsampled(run_dir: Path, tmp_path: Path) -> None:
    run = shutil.copytree(run_dir, tmp_path / "run")
    samples = 3 * MAX_POINTS
    entities = MAX_LINES + 4
    pl.DataFrame(
        {
            "time_s": [k * 1e-6 for k in range(samples)] * entities,
            "entity": [f"t0.p0.{e}:0" for e in range(entities) for _ in range(samples)],
            "metric": ["tx_bps"] * (samples * entities),
            "value": [float(e) for e in range(entities) for _ in range(samples)],
        }
    ).write_parquet(run / "timeseries.parquet")
    text = write_report(run).read_text(encoding="utf-8")
    shown = f"the {MAX_LINES} of {entities} lines with the largest total shown"
    assert f"{shown}; each point the mean of up to 3 samples" in text
    (figure,) = [f for f in _figures(text) if "Port throughput" in f]
    assert figure.count('"mode":"lines"') == MAX_LINES
    assert '"name":"t0.p0.0:0"' not in figure  # the smallest totals are the ones left out
    assert len(re.search(r'"y":\[([^\]]*)\]', figure)[1].split(",")) == MAX_POINTS


@pytest.mark.parametrize(("name", "why"), [("missing", "not a directory"), ("notes", "not a results directory")])
def test_a_directory_without_results_is_refused_by_name(tmp_path: Path, name: str, why: str) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("not results\n")
    path = tmp_path / name
    with pytest.raises(ScenarioError, match=re.escape(f"{path}: {why}")):
        write_report(path)


def test_comparison_report(compare_dir: Path) -> None:
    text = write_report(compare_dir).read_text(encoding="utf-8")
    assert "<title>fabricsim comparison: uplink_down_midrun</title>" in text
    assert "<th>metric</th><th>mrc</th><th>spectrum-x</th>" in text
    assert "<td>seeds</td><td>2</td><td>1</td>" in text
    # A metric no design has is left out; one some lack shows `-` for them.
    assert "<td>qp_errors</td>" not in text
    figures = "\n".join(_figures(text))
    assert "flow completion time per design" in figures and "collective completion time per design" in figures
    assert "Received by the sampled NICs" in figures and '"name":"spectrum-x"' in figures
    assert '"text":"link_down port t0.p0.0:2"' in figures
    assert '<a href="mrc/seed_1/report.html">mrc/seed_1</a>' in text
    assert "<td>spectrum-x/seed_1</td>" in text  # no report of its own: no link


def test_sweep_report(sweep_dir: Path) -> None:
    write_report(sweep_dir / "000_1MB")
    text = write_report(sweep_dir).read_text(encoding="utf-8")
    assert "<title>fabricsim sweep: uplink_down_midrun</title>" in text
    assert '<p class="warn">INCOMPLETE' in text
    assert "<th>jobs.0.phases.0.collective.bytes</th>" in text
    assert "<td>not run</td>" in text
    assert '<a href="000_1MB/report.html">000_1MB</a>' in text
    (figure,) = _figures(text)
    assert '"x":["1MB","4MB"]' in figure and r'"name":"allreduce \u002f allreduce"' in figure


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip("no Chromium: install it with `apt-get install chromium` to run the report's browser test")


@pytest.mark.parametrize("kind", ["run", "comparison", "sweep"])
def test_reports_render_in_a_browser(
    kind: str, run_dir: Path, compare_dir: Path, sweep_dir: Path, tmp_path: Path
) -> None:
    """Chromium loads the report without a script error and draws every figure."""
    browser = _chromium()
    report = write_report({"run": run_dir, "comparison": compare_dir, "sweep": sweep_dir}[kind])
    text = report.read_text(encoding="utf-8")
    probed = tmp_path / "probed.html"
    probed.write_text(text.replace("<head>", "<head>\n" + PROBE, 1), encoding="utf-8")
    command = [
        browser,
        "--headless",
        "--no-sandbox",  # needed as root, as in containers
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        probed.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    found = re.search(r'<pre id="report-probe">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, f"no probe in the page Chromium rendered (exit {done.returncode}): {done.stderr[-2000:]}"
    probe = json.loads(html.unescape(found[1]))
    assert probe["errors"] == []
    assert probe["plots"] == text.count('class="plotly-graph-div"') > 0


@pytest.mark.parametrize(
    ("files", "kind"),
    [
        ({"sweep.json": "garbage"}, "sweep"),
        ({"sweep.json": '{"runs": [7]}'}, "sweep"),
        ({"compare.parquet": "not parquet"}, "comparison"),
        ({"scenario.json": "{}", "summary.json": "[1, 2]"}, "run"),
        ({"scenario.json": "{", "summary.json": "{}"}, "run"),
    ],
)
def test_files_fabricsim_did_not_write_are_one_clear_error(tmp_path: Path, files: dict[str, str], kind: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ScenarioError, match=re.escape(f"{tmp_path}: cannot be read as a {kind} directory")):
        write_report(tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_a_quick_line_beside_a_long_one_keeps_its_samples_and_the_figure_opens_on_it() -> None:
    from fabricsim import report

    # A design done in 5 ms (100 samples) beside one that ran 4 s (80,000): the long one is averaged down
    # after the window the figure opens on, the quick one not at all.
    quick = pl.DataFrame({"time_s": [k * 50e-6 for k in range(100)], "value": [1e9] * 100, "entity": "mrc"})
    slow = pl.DataFrame({"time_s": [k * 50e-6 for k in range(80_000)], "value": [2e9] * 80_000, "entity": "roce"})
    page = report._Page("t")
    report._lines(page, pl.concat([quick, slow]), "goodput", "Gb/s", 1e-9, ("s", 1.0), [], zoom=True)
    figure = next(part for part in page.parts if "figure-1" in part)
    data = json.loads(figure[figure.index("[{") : figure.index("}],") + 2])
    points = {trace["name"]: len(trace["x"]) for trace in data}
    assert points["mrc"] == 100
    window = 1.5 * 99 * 50e-6
    assert points["roce"] < 100 + 2 * report.MAX_POINTS  # every sample of its first 7.4 ms, then at most 2,000
    assert '"range":[0,' in figure.replace(" ", "") and f"{window:.6g}" in "".join(page.parts)
