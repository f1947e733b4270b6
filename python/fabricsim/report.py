"""`report.html`: one self-contained page showing a run, a comparison or a sweep directory.

A run's report holds its summary; the distributions of flow completion times
(and slowdowns) and of collective completion times; the sampled time series
(throughput and queue length of the ports in `telemetry.ports`, receive
goodput and per-plane sending of the NICs in `telemetry.hosts`, MRC's EV
activity) with the scenario's faults and Clustermapper's verdicts drawn over
them; link utilization as a heat map per tier; and the scenario. A
comparison's report (`fabricsim compare`) holds its metrics per design and
each design's first seed overlaid: FCT and CCT distributions and the
sampled NICs' throughput. A sweep's report lists its runs and draws bus
bandwidth against the swept value. Every report links to the reports of its
runs that exist. A section without data is replaced by a one-line note.

The figures are plotly's, interactive (zoom, hover, lines toggled from the
legend) without JavaScript of ours. plotly.js (about 4.8 MB) is embedded once
and inline, so the page opens offline and from any copy of the directory;
each figure is a div with its data. Figure ids are numbered in page order
and nothing depends on the clock, so the same directory gives the same
bytes. To keep the page of a large run light and quick to open, a figure
draws at most `MAX_LINES` lines (those with the largest total; the rest are
counted), a series at most `MAX_POINTS` points (means over consecutive
samples), a CDF `MAX_POINTS` quantiles and a heat map `MAX_HEAT_ROWS` nodes
(the busiest).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import plotly.graph_objects as go
import plotly.io as pio
import plotly.offline
import polars as pl
import yaml

from ._core import ScenarioError
from .compare import faults_with_times
from .results import INCOMPLETE_MARKER, Results, polars_problem, read_json, read_parquet, write_atomic
from .scenario import VERSION_KEY, fault_window

__all__ = ["MAX_HEAT_ROWS", "MAX_LINES", "MAX_POINTS", "REPORT_FILE", "write_report"]

REPORT_FILE = "report.html"
MAX_LINES = 16
MAX_POINTS = 2000
MAX_HEAT_ROWS = 256
# More marks than this along one axis and their labels would cover the plot: lines only, the table names them.
MAX_LABELED_MARKS = 12
MAX_TABLE_ROWS = 200
# A scenario with long flow lists (read from htsim or CSV files) would outweigh everything else.
MAX_SCENARIO_CHARS = 256 * 1024

NO_SERIES = "no time series: set telemetry.sample_interval and telemetry.ports / telemetry.hosts"
FAULT_COLOR = "#d62728"
VERDICT_COLOR = "#9467bd"
# A small template of our own: plotly's named ones add about 7 KB to every figure.
_LAYOUT = {
    "template": {
        "layout": {
            "plot_bgcolor": "white",
            "xaxis": {"gridcolor": "#e5e5e5", "linecolor": "#999", "showline": True, "zeroline": False},
            "yaxis": {"gridcolor": "#e5e5e5", "linecolor": "#999", "showline": True, "zeroline": False},
        }
    },
    "height": 380,
    "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
    "hovermode": "closest",
}
_CONFIG = {"displaylogo": False, "responsive": True}
_STYLE = """
body { font-family: system-ui, sans-serif; color: #222; max-width: 1200px; margin: 1em auto; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
th, td { padding: 2px 10px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.note { color: #666; }
.warn { background: #fff3cd; border: 1px solid #d4a000; padding: 0.6em 1em; font-weight: bold; }
dl.pairs { columns: 3 20em; font-size: 0.9em; }
dl.pairs div { display: flex; justify-content: space-between; gap: 1em; break-inside: avoid; }
dl.pairs div { border-bottom: 1px solid #eee; }
dl.pairs dt { color: #444; } dl.pairs dd { margin: 0; }
pre { background: #f6f6f6; padding: 1em; overflow: auto; max-height: 40em; font-size: 0.85em; }
"""

# Node names of generated topologies: `nic12`, `t1.p0.3` (tier 1, plane 0, switch 3).
_NIC = re.compile(r"^nic\d+$")
_RECOVERY = re.compile(r"^recovery_(\d+)_ms$")
_SWITCH = re.compile(r"^t(\d+)\.p\d+\.\d+$")
# The fields of a fault that say what it hits, in the order they are shown.
_FAULT_TARGETS = ("port", "switch", "nic", "ev", "rate", "mtbf", "count", "fraction")
# Sampled metrics drawn one line per entity: (metric, title, y axis, scale of the values).
_SERIES = (
    ("tx_bps", "Port throughput (telemetry.ports)", "Gb/s", 1e-9),
    ("queue_bytes", "Port queue length (telemetry.ports)", "KB", 1e-3),
    ("rx_goodput_bps", "NIC receive goodput (telemetry.hosts)", "Gb/s", 1e-9),
    ("plane_tx_bps", "NIC sending per plane, nic:plane (telemetry.hosts)", "Gb/s", 1e-9),
)
_EV_METRICS = ("ev_packets", "ev_drops")


class _Html(str):
    """Text that is already HTML (a link), put into a table as it is."""

    __slots__ = ()


@dataclass(frozen=True)
class _Mark:
    """A fault or a Clustermapper verdict drawn over the time plots: a line at `start`, or a span to `end`."""

    start: float
    end: float | None
    label: str
    color: str


class _Page:
    """A report being built: its parts in order, its figures numbered so that their div ids are fixed."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.parts: list[str] = [f"<h1>{html.escape(title)}</h1>"]
        self.figures = 0

    def heading(self, text: str) -> None:
        self.parts.append(f"<h2>{html.escape(text)}</h2>")

    def note(self, text: str, warn: bool = False) -> None:
        self.parts.append(f'<p class="{"warn" if warn else "note"}">{html.escape(text)}</p>')

    def table(self, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in rows[:MAX_TABLE_ROWS])
        self.parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        if len(rows) > MAX_TABLE_ROWS:
            self.note(f"{len(rows) - MAX_TABLE_ROWS} more rows not shown.")

    def pairs(self, items: Iterable[tuple[str, Any]]) -> None:
        """Names and values in columns across the page: a summary's sixty quantities on one screen."""
        entries = "".join(f"<div><dt>{html.escape(k)}</dt><dd>{_cell(v)}</dd></div>" for k, v in items)
        self.parts.append(f'<dl class="pairs">{entries}</dl>')

    def pre(self, text: str) -> None:
        self.parts.append(f"<pre>{html.escape(text)}</pre>")

    def figure(self, fig: go.Figure) -> None:
        self.figures += 1
        div = pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=f"figure-{self.figures}", config=_CONFIG)
        self.parts.append(div)

    def html(self) -> str:
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(self.title)}</title>\n<style>{_STYLE}</style>\n"
            f"<script>{plotly.offline.get_plotlyjs()}</script>\n</head>\n<body>\n"
            + "\n".join(self.parts)
            + "\n</body>\n</html>\n"
        )


def write_report(directory: str | Path) -> Path:
    """Writes `report.html` into a run, comparison or sweep directory (atomically); returns its path.

    Which one it is comes from its files: `compare.parquet` makes a
    comparison, `sweep.json` a sweep, `scenario.json` with `summary.json` a
    run. Anything else raises ScenarioError naming the directory.
    """
    path = Path(directory)
    if not path.is_dir():
        raise ScenarioError(f"{path}: not a directory; expected a run, sweep or comparison directory")
    if (path / "compare.parquet").is_file():
        kind, build = "comparison", _comparison_page
    elif (path / "sweep.json").is_file():
        kind, build = "sweep", _sweep_page
    elif (path / "scenario.json").is_file() and (path / "summary.json").is_file():
        kind, build = "run", _run_page
    else:
        raise ScenarioError(
            f"{path}: not a results directory: expected scenario.json and summary.json (a run), "
            "sweep.json (a sweep) or compare.parquet (a comparison)"
        )
    try:
        page = build(path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, pl.exceptions.PolarsError) as e:
        # Files that are not what fabricsim wrote (edited, truncated, another tool's): one line, no traceback.
        raise ScenarioError(f"{path}: cannot be read as a {kind} directory: {_unreadable(e)}") from None
    text = page.html().encode("utf-8")
    report = path / REPORT_FILE
    write_atomic(report, lambda f: f.write(text))
    return report


def _run_page(path: Path) -> _Page:
    results = Results.read(path)
    scenario, summary = results.scenario, results.summary
    # As written, with the version that wrote it, which `Results.read` leaves out.
    written = _json(path / "scenario.json")
    page = _Page(f"fabricsim run: {scenario.get('name') or path.name}")
    state = "complete" if results.complete else "incomplete"
    page.note(
        f"{state}, stop reason {summary.get('stop_reason', '?')}; seed {scenario.get('seed', '?')}; "
        f"fabricsim {written.get(VERSION_KEY, '?')}"
    )
    if not results.complete:
        page.note(
            "INCOMPLETE: this run stopped early or its directory was not fully written "
            f"(the {INCOMPLETE_MARKER} marker is present); what follows is what was measured.",
            warn=True,
        )
    end_s = float(summary.get("sim_time_s") or 0.0)
    marks = _fault_marks(scenario, end_s) + _verdict_marks(_table(results, "clustermapper"))

    page.heading("Summary")
    page.pairs(_flatten(summary))
    _flows_section(page, _table(results, "flows"))
    _collectives_section(page, _table(results, "collectives"))
    _faults_section(page, scenario, _table(results, "clustermapper"))
    _series_section(page, _table(results, "timeseries"), marks, end_s)
    _utilization_section(page, _table(results, "ports"), scenario, end_s)
    page.heading("Tables")
    tables = sorted(path.glob("*.parquet"))
    page.table(("file", "rows"), ((f.name, pl.scan_parquet(f).select(pl.len()).collect().item()) for f in tables))
    page.heading("Scenario (scenario.json)")
    text = yaml.safe_dump(written, sort_keys=False, allow_unicode=True, width=100)
    if len(text) > MAX_SCENARIO_CHARS:
        page.note(f"The scenario is {len(text):,} characters; its first {MAX_SCENARIO_CHARS:,} are shown.")
        text = text[:MAX_SCENARIO_CHARS]
    page.pre(text)
    return page


def _flows_section(page: _Page, flows: pl.DataFrame) -> None:
    page.heading("Flow completion times")
    if flows.is_empty():
        page.note("no flows")
        return
    unfinished = flows["fct_s"].null_count()
    page.note(
        f"{flows.height:,} flows, {unfinished:,} unfinished (no FCT: the CDFs end below 1 by their share). "
        "Slowdown is the FCT over the flow's FCT alone on an idle fabric."
    )
    unit, scale = _unit(flows["fct_s"].max() or 0.0)
    fig = _cdf_figure("FCT CDF", f"flow completion time ({unit})", "fraction of flows")
    _add_cdf(fig, flows["fct_s"] / scale, flows.height, "flows")
    page.figure(fig)
    fig = _cdf_figure("Slowdown CDF", "slowdown (FCT / ideal FCT)", "fraction of flows")
    fig.update_xaxes(type="log")
    _add_cdf(fig, flows["slowdown"], flows.height, "flows")
    page.figure(fig)


def _collectives_section(page: _Page, collectives: pl.DataFrame) -> None:
    page.heading("Collective completion times")
    if collectives.is_empty():
        page.note("no collectives")
        return
    unit, scale = _unit(collectives["cct_s"].max() or 0.0)
    groups = list(collectives.group_by("job", "phase", maintain_order=True))
    rows = []
    for (job, phase), rows_of in groups:
        cct = rows_of["cct_s"] / scale
        rows.append(
            (
                job,
                phase,
                rows_of["op"][0],
                rows_of["algorithm"][0],
                rows_of["bytes"].max(),
                rows_of.height,
                cct.null_count(),
                cct.quantile(0.5),
                cct.quantile(0.99),
                cct.max(),
                rows_of["busbw_gbps"].mean(),
            )
        )
    header = ("job", "phase", "op", "algorithm", "bytes", "collectives", "unfinished")
    page.table((*header, f"CCT p50 ({unit})", f"CCT p99 ({unit})", f"CCT max ({unit})", "busbw mean (Gb/s)"), rows)
    fig = _cdf_figure("CCT CDF per job and phase", f"collective completion time ({unit})", "fraction of collectives")
    for (job, phase), rows_of in groups[:MAX_LINES]:
        _add_cdf(fig, rows_of["cct_s"] / scale, rows_of.height, f"{job} / {phase}")
    page.figure(fig)
    if len(groups) > MAX_LINES:
        page.note(f"{len(groups) - MAX_LINES} more (job, phase) pairs in the table only.")


def _faults_section(page: _Page, scenario: Mapping[str, Any], clustermapper: pl.DataFrame) -> None:
    page.heading("Faults")
    faults = scenario.get("faults") or []
    if faults:
        page.table(("at", "until", "kind", "target"), (_fault_row(f) for f in faults))
        page.note("Drawn in red over every time plot: a line at each fault, a shaded span while it lasts.")
    else:
        page.note("no faults")
    if not clustermapper.is_empty():
        page.note(f"{clustermapper.height:,} Clustermapper verdicts, drawn in purple over the time plots:")
        page.table(clustermapper.columns, clustermapper.rows())


def _series_section(page: _Page, timeseries: pl.DataFrame, marks: list[_Mark], end_s: float) -> None:
    page.heading("Time series")
    if timeseries.is_empty():
        page.note(NO_SERIES)
        return
    unit, scale = _unit(max(end_s, timeseries["time_s"].max() or 0.0))
    for metric, title, label, value_scale in _SERIES:
        series = timeseries.filter(pl.col("metric") == metric)
        if not series.is_empty():
            _lines(page, series, title, f"{metric} ({label})", value_scale, (unit, scale), marks)
    ev = timeseries.filter(pl.col("metric").is_in(_EV_METRICS))
    if not ev.is_empty():
        # Every EV of every QP is an entity: thousands of lines. Their sum says when EVs lose packets.
        total = ev.group_by("time_s", "metric").agg(pl.col("value").sum()).rename({"metric": "entity"})
        title = "MRC EV activity, all EVs of all QPs"
        _lines(page, total, title, "packets per sample", 1.0, (unit, scale), marks)


def _utilization_section(page: _Page, ports: pl.DataFrame, scenario: Mapping[str, Any], end_s: float) -> None:
    page.heading("Link utilization")
    if ports.is_empty() or end_s <= 0:
        page.note("no ports table or no simulated time")
        return
    page.note("What each port sent over the run (headers included), as a share of its rate; hover for its peer.")
    # An explicit topology names its NICs as it likes; its node list says which they are.
    nodes = scenario.get("topology", {}).get("nodes") or []
    nics = {n.get("name") for n in nodes if isinstance(n, Mapping) and n.get("kind") == "nic"}
    tiers = {node: _tier(node, nics) for node in ports["node"].unique()}
    used = ports.with_columns(
        (pl.col("tx_bytes") * 8.0 / (pl.col("rate_bps") * end_s) * 100.0).fill_nan(None).round(2).alias("util"),
        pl.col("node").replace_strict(tiers, return_dtype=pl.String).alias("tier"),
    )
    for tier in sorted(used["tier"].unique(), key=_tier_order):
        _heat_map(page, used.filter(pl.col("tier") == tier), tier)


def _heat_map(page: _Page, ports: pl.DataFrame, tier: str) -> None:
    load = ports.group_by("node").agg(pl.col("util").mean()).sort(["util", "node"], descending=[True, False])
    nodes = sorted(load["node"].head(MAX_HEAT_ROWS), key=_natural)
    shown = ports.filter(pl.col("node").is_in(nodes))
    columns = sorted(shown["port"].unique().to_list())
    util: dict[tuple[str, int], float | None] = {}
    peers: dict[tuple[str, int], str] = {}
    for row in shown.select("node", "port", "peer", "util").iter_rows():
        util[(row[0], row[1])], peers[(row[0], row[1])] = row[3], row[2]
    z = [[util.get((n, c)) for c in columns] for n in nodes]
    custom = [[peers.get((n, c), "") for c in columns] for n in nodes]
    heat = go.Heatmap(
        z=z,
        x=[str(c) for c in columns],
        y=nodes,
        customdata=custom,
        zmin=0,
        zmax=100,
        colorscale="Viridis",
        colorbar={"title": {"text": "%"}},
        hovertemplate="%{y}:%{x} to %{customdata}<br>%{z}%<extra></extra>",
    )
    fig = go.Figure(heat, layout=_LAYOUT)
    fig.update_layout(
        title=f"{tier}: utilization (%)",
        height=150 + min(20 * len(nodes), 1000),
        xaxis={"title": {"text": "port"}, "type": "category"},
        yaxis={"type": "category", "autorange": "reversed"},
    )
    page.figure(fig)
    if load.height > len(nodes):
        page.note(f"{tier}: the {len(nodes)} busiest of {load.height} nodes shown.")


def _comparison_page(path: Path) -> _Page:
    table = read_parquet(path / "compare.parquet")
    designs = table["design"].unique(maintain_order=True).to_list()
    firsts = {d: path / f"{d}/seed_{table.filter(pl.col('design') == d)['seed'][0]}" for d in designs}
    scenario = _json(next(iter(firsts.values()), path) / "scenario.json")
    page = _Page(f"fabricsim comparison: {scenario.get('name') or path.name}")
    incomplete = table.filter(~pl.col("complete"))
    if not incomplete.is_empty():
        runs = ", ".join(f"{r['design']} seed {r['seed']}" for r in incomplete.iter_rows(named=True))
        page.note(f"INCOMPLETE runs: {runs}; their metrics are what was measured.", warn=True)

    page.heading("Metrics")
    page.note("Per design: the mean over seeds, and (min-max) when the seeds differ; - where a seed lacks the value.")
    metrics = [c for c in table.columns if c not in ("design", "seed", "complete")]
    rows = [("seeds", *(table.filter(pl.col("design") == d).height for d in designs))]
    faults = faults_with_times(scenario)
    for metric in metrics:
        cells = [_spread(table.filter(pl.col("design") == d)[metric]) for d in designs]
        if any(c != "-" for c in cells):
            rows.append((_metric_label(metric, faults), *cells))
    page.table(("metric", *designs), rows)

    page.heading("Distributions, first seed of each design")
    _overlaid_cdf(page, firsts, "flows", "fct_s", "flow completion time")
    _overlaid_cdf(page, firsts, "collectives", "cct_s", "collective completion time")

    page.heading("Throughput over time, first seed of each design")
    received = []
    for design, run in firsts.items():
        series = _read(run, "timeseries", ["time_s", "metric", "value"])
        if not series.is_empty():
            series = series.filter(pl.col("metric") == "rx_goodput_bps")
            received.append(series.group_by("time_s").agg(pl.col("value").sum()).with_columns(entity=pl.lit(design)))
    if received:
        series = pl.concat(received)
        end_s = max([float(_json(run / "summary.json").get("sim_time_s") or 0.0) for run in firsts.values()])
        unit = _unit(max(end_s, series["time_s"].max() or 0.0))
        title = "Received by the sampled NICs (sum of rx_goodput_bps)"
        _lines(page, series, title, "Gb/s", 1e-9, unit, _fault_marks(scenario, end_s), zoom=True)
    else:
        page.note(NO_SERIES)
    _faults_section(page, scenario, pl.DataFrame())

    page.heading("Runs")
    page.table(
        ("design", "seed", "complete", "report"),
        (
            (r["design"], r["seed"], r["complete"], _report_link(path, f"{r['design']}/seed_{r['seed']}"))
            for r in table.iter_rows(named=True)
        ),
    )
    return page


def _overlaid_cdf(page: _Page, runs: Mapping[str, Path], table: str, column: str, quantity: str) -> None:
    """The CDF of a time `column` of `table` per design, one run each; a note when no run has the table."""
    frames = {design: _read(run, table, [column]) for design, run in runs.items()}
    times = {design: frame[column] for design, frame in frames.items() if not frame.is_empty()}
    if not times:
        page.note(f"no {table}")
        return
    unit, scale = _unit(max(t.max() or 0.0 for t in times.values()))
    fig = _cdf_figure(f"{quantity} per design, CDF", f"{quantity} ({unit})", f"fraction of {table}")
    for design, values in times.items():
        _add_cdf(fig, values / scale, len(values), design)
    page.figure(fig)


def _sweep_page(path: Path) -> _Page:
    description = _json(path / "sweep.json")
    runs = description.get("runs") if isinstance(description, dict) else None
    if not isinstance(runs, list) or not all(isinstance(run, dict) for run in runs):
        raise ValueError("sweep.json has no list of runs")
    parameters = description.get("parameters") or list(
        dict.fromkeys(k for run in runs for k in run.get("values") or {})
    )
    scenarios = (path / run.get("directory", "") / "scenario.json" for run in runs)
    scenario = next((_json(s) for s in scenarios if s.is_file()), {})
    page = _Page(f"fabricsim sweep: {scenario.get('name') or path.name}")
    page.note(f"over {', '.join(parameters) or '?'}; {len(runs)} runs")
    if not description.get("complete") or (path / INCOMPLETE_MARKER).exists():
        page.note("INCOMPLETE: the sweep stopped early; the runs that ran are shown.", warn=True)
    if description.get("failure"):
        page.note(f"failed: {json.dumps(description['failure'])}", warn=True)

    page.heading("Runs")
    columns = ("sim_time_s", "fct_p99_us", "goodput_gbps", "drops")
    rows = []
    for run in runs:
        directory = run.get("directory", "")
        summary = _json(path / directory / "summary.json") if (path / directory / "summary.json").is_file() else {}
        values = run.get("values") or {}
        rows.append(
            (
                run.get("index"),
                *(values.get(p) for p in parameters),
                run.get("seed"),
                run.get("state"),
                *(summary.get(c) for c in columns),
                _report_link(path, directory),
            )
        )
    page.table(("index", *parameters, "seed", "state", *columns, "report"), rows)

    page.heading("Bus bandwidth")
    collectives = read_parquet(path / "sweep.parquet") if (path / "sweep.parquet").is_file() else pl.DataFrame()
    if collectives.is_empty() or not parameters or parameters[0] not in collectives.columns:
        page.note("no collectives")
        return page
    first, others = parameters[0], [p for p in parameters[1:] if p in collectives.columns]
    page.note(
        f"Mean busbw over groups, iterations and seeds, against {first}; a line per (job, phase) and other value."
    )
    means = (
        collectives.with_columns(pl.col(first, *others).cast(pl.String))
        .group_by("job", "phase", *others, first, maintain_order=True)
        .agg(pl.col("busbw_gbps").mean(), pl.col("sweep_index").min())
        .sort("sweep_index")
    )
    fig = _figure(f"Bus bandwidth against {first}", first, "busbw (Gb/s)")
    order = means[first].unique(maintain_order=True).to_list()
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=order)
    lines = list(means.group_by("job", "phase", *others, maintain_order=True))
    for key, line in lines[:MAX_LINES]:
        busbw = line["busbw_gbps"].round_sig_figs(5).to_list()
        fig.add_scatter(x=line[first].to_list(), y=busbw, name=" / ".join(map(str, key)))
    page.figure(fig)
    if len(lines) > MAX_LINES:
        page.note(f"{len(lines) - MAX_LINES} more lines not drawn.")
    return page


def _figure(title: str, x: str, y: str) -> go.Figure:
    fig = go.Figure(layout=_LAYOUT)
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y)
    return fig


def _cdf_figure(title: str, x: str, y: str) -> go.Figure:
    fig = _figure(title, x, y)
    fig.update_yaxes(range=[0, 1.02])
    return fig


def _add_cdf(fig: go.Figure, values: pl.Series, total: int, name: str) -> None:
    """The empirical CDF of `values` over `total` items; those without a value never finished and keep it below 1."""
    done = values.drop_nulls().drop_nans().sort()
    count = len(done)
    if count == 0 or total == 0:
        return
    # Evenly spaced order statistics: a CDF of a million flows drawn from MAX_POINTS of them.
    step = (count - 1) / (MAX_POINTS - 1)
    ranks = list(range(count)) if count <= MAX_POINTS else [round(i * step) for i in range(MAX_POINTS)]
    xs = done.gather(ranks).round_sig_figs(6).to_list()
    ys = [round((r + 1) / total, 6) for r in ranks]
    mode = "lines+markers" if count <= 50 else "lines"
    fig.add_scatter(x=xs, y=ys, name=name, mode=mode, line={"shape": "hv"})


def _lines(
    page: _Page,
    series: pl.DataFrame,
    title: str,
    label: str,
    value_scale: float,
    unit: tuple[str, float],
    marks: Sequence[_Mark],
    zoom: bool = False,
) -> None:
    """One figure of a long table (time_s, entity, value), a line per entity: the `MAX_LINES` with the largest total.

    With `zoom`, a figure opens on the lines that end within a tenth of the
    longest (designs done in 5 ms beside one that waited 4 s for a
    timeout); the whole is a double-click away.
    """
    totals = series.group_by("entity").agg(pl.col("value").sum()).sort(["value", "entity"], descending=[True, False])
    shown = totals["entity"].head(MAX_LINES).to_list()
    series = series.filter(pl.col("entity").is_in(shown))
    ends = series.group_by("entity").agg(pl.col("time_s").max())["time_s"].to_list()
    # The lines that end within a tenth of the longest: the figure opens on them.
    quick = [end for end in ends if 0 < 10 * end < max(ends, default=0.0)] if zoom else []
    window = 1.5 * max(quick) if quick else -1.0
    # What the figure opens on keeps its samples; only the rest is averaged down.
    head, step_head = _downsample(series.filter(pl.col("time_s") <= window))
    tail, step = _downsample(series.filter(pl.col("time_s") > window))
    series, step = pl.concat([head, tail]).sort("entity", "time_s"), max(step, step_head)
    fig = _figure(title, f"time ({unit[0]})", label)
    for entity in sorted(shown, key=_natural):
        line = series.filter(pl.col("entity") == entity)
        xs = (line["time_s"] / unit[1]).round_sig_figs(9).to_list()
        fig.add_scatter(x=xs, y=(line["value"] * value_scale).round_sig_figs(5).to_list(), name=entity, mode="lines")
    _draw_marks(fig, marks, unit[1])
    if quick:
        fig.update_xaxes(range=[0, window / unit[1]])
    page.figure(fig)
    notes = []
    if quick:
        notes.append(f"opened on the first {_format(window / unit[1])} {unit[0]}, every sample: double-click for all")
    if totals.height > len(shown):
        notes.append(f"the {len(shown)} of {totals.height} lines with the largest total shown")
    if step > 1:
        notes.append(f"each point{' after that' if quick else ''} the mean of up to {step} samples")
    if notes:
        page.note(f"{title}: {'; '.join(notes)}.")


def _downsample(series: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """At most MAX_POINTS points a line: means over runs of consecutive samples, at each run's last time.

    Each line its own runs: in a comparison, a design whose run lasted 5 ms
    keeps its samples beside one that lasted 4 s. Returns the longest run.
    """
    counts = series.group_by("entity").agg(pl.len().alias("samples"))
    step = math.ceil((counts["samples"].max() or 0) / MAX_POINTS)
    if step <= 1:
        return series.select("entity", "time_s", "value").sort("entity", "time_s"), 1
    per_line = (pl.col("samples") / MAX_POINTS).ceil().cast(pl.Int64)
    bucket = (pl.col("time_s").rank("ordinal").over("entity").cast(pl.Int64) - 1) // per_line
    means = (
        series.join(counts, on="entity")
        .with_columns(bucket.alias("bucket"))
        .group_by("entity", "bucket")
        .agg(pl.col("time_s").max(), pl.col("value").mean())
        .sort("entity", "bucket")
        .select("entity", "time_s", "value")
    )
    return means, step


def _draw_marks(fig: go.Figure, marks: Sequence[_Mark], scale: float) -> None:
    labeled = len({m.start for m in marks}) <= MAX_LABELED_MARKS
    for mark in marks:
        label = {"text": mark.label, "font": {"size": 10, "color": mark.color}} if labeled else None
        if mark.end is None:
            line = {"color": mark.color, "dash": "dash", "width": 1}
            fig.add_vline(x=mark.start / scale, line=line, annotation=label)
        else:
            x0, x1 = mark.start / scale, mark.end / scale
            fig.add_vrect(x0=x0, x1=x1, fillcolor=mark.color, opacity=0.12, line_width=0, annotation=label)


def _fault_marks(scenario: Mapping[str, Any], end_s: float) -> list[_Mark]:
    """The faults that fall within the run (`end_s`) as marks; one with a duration or `until` as a span."""
    marks = []
    for fault in scenario.get("faults") or []:
        start, end = fault_window(fault)
        if end is not None and end_s > 0:
            end = min(end, end_s)  # a span past the run's end would stretch the time axis
        if end_s <= 0 or start <= end_s:
            label = f"{fault.get('kind', 'fault')} {_fault_target(fault)}".strip()
            marks.append(_Mark(start, end, label, FAULT_COLOR))
    return marks


def _verdict_marks(clustermapper: pl.DataFrame) -> list[_Mark]:
    """Clustermapper's verdicts, one mark per time at which it gave any."""
    if clustermapper.is_empty():
        return []
    marks = []
    for (time_s,), verdicts in clustermapper.group_by("time_s", maintain_order=True):
        said = [f"{v['element']} {v['health']}" for v in verdicts.iter_rows(named=True)]
        more = f" (+{len(said) - 3})" if len(said) > 3 else ""
        marks.append(_Mark(float(time_s), None, "clustermapper: " + ", ".join(said[:3]) + more, VERDICT_COLOR))
    return marks


def _fault_row(fault: Mapping[str, Any]) -> tuple[Any, ...]:
    until = fault.get("until") or (f"+{fault['duration']}" if "duration" in fault and "at" in fault else None)
    return fault.get("at", "0s"), until, fault.get("kind"), _fault_target(fault)


def _fault_target(fault: Mapping[str, Any]) -> str:
    return " ".join(f"{key} {fault[key]}" for key in _FAULT_TARGETS if key in fault)


def _unit(seconds: float) -> tuple[str, float]:
    """The largest of s, ms and us in which `seconds` is at least 1, and its length in seconds."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= scale:
            return unit, scale
    return "us", 1e-6


def _tier(node: str, nics: set[str]) -> str:
    """The heat map a node's ports go to: NICs, a switch tier, or else the name's stem (`spine` of `spine3.a`)."""
    if node in nics or _NIC.match(node):
        return "NICs"
    switch = _SWITCH.match(node)
    if switch:
        return f"tier {switch[1]} switches"
    return re.sub(r"\d+$", "", node.split(".")[0]) or node


def _tier_order(tier: str) -> tuple[int, int, str]:
    if tier == "NICs":
        return 0, 0, ""
    switch = re.fullmatch(r"tier (\d+) switches", tier)
    return (1, int(switch[1]), "") if switch else (2, 0, tier)


def _natural(name: str) -> list[Any]:
    """Sorts `t0.p0.10` after `t0.p0.9`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of nested mappings: `jobs.allreduce.jct_s`, `drops_by_cause.link_down`."""
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _metric_label(metric: str, faults: Sequence[tuple[float, str]]) -> str:
    """A comparison's column as a row label; `recovery_<k>_ms` names its fault."""
    match = _RECOVERY.match(metric)
    if match is None or not 0 < int(match[1]) <= len(faults):
        return metric
    at, what = faults[int(match[1]) - 1]
    return f"recovery_ms after {what} at {_format(at * 1e3)} ms"


def _spread(values: pl.Series) -> str:
    numbers = values.cast(pl.Float64, strict=False)
    if numbers.is_empty() or numbers.null_count() or numbers.is_nan().any():
        return "-"
    mean, low, high = numbers.mean(), numbers.min(), numbers.max()
    if math.isinf(high):
        # A recovery that some seed never saw.
        return "never" if math.isinf(low) else f"never ({_format(low)}-never)"
    return _format(mean) if low == high else f"{_format(mean)} ({_format(low)}-{_format(high)})"


def _report_link(root: Path, directory: str) -> _Html | str:
    """A relative link to a run's report when it has one, else the directory's name."""
    if directory and (root / directory / REPORT_FILE).is_file():
        href = html.escape(quote(f"{directory}/{REPORT_FILE}"), quote=True)
        return _Html(f'<a href="{href}">{html.escape(directory)}</a>')
    return directory


def _table(results: Results, name: str) -> pl.DataFrame:
    """One of a run's tables; an empty frame when the run wrote none (it had no rows)."""
    return results.frames.get(name, pl.DataFrame())


def _read(run: Path, table: str, columns: list[str]) -> pl.DataFrame:
    """Some columns of a run's table; an empty frame when the run wrote none (it had no rows)."""
    path = run / f"{table}.parquet"
    return read_parquet(path, columns=columns) if path.is_file() else pl.DataFrame()


def _json(path: Path) -> dict[str, Any]:
    return read_json(path)


def _unreadable(error: Exception) -> str:
    """What is wrong with a results file, in words: no Python or polars exception names, which mean nothing to a
    user; the file's own errors (read_json, read_parquet) name it."""
    if isinstance(error, KeyError):
        return f"a field is missing: {error}"
    if isinstance(error, OSError) and error.strerror:
        return f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    if isinstance(error, pl.exceptions.PolarsError):
        return polars_problem(error)
    return str(error)


def _cell(value: Any) -> str:
    if isinstance(value, _Html):
        return value
    return html.escape(_format(value))


def _format(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, Mapping | list):
        return json.dumps(value) if value else "none"
    return str(value)
