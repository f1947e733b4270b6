"""Figures of results, drawn with matplotlib's Agg canvas into files.

Figures are made without pyplot, so drawing one neither needs a display nor
changes the backend of a program or notebook that imports fabricsim.

`plot_busbw` draws a sweep's bus bandwidth against message size, the figure
nccl-tests results are usually shown as: one line per (job, phase), sizes on
a log axis. A sweep of something other than size is drawn against its values
instead, one tick each.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from .results import nccl_rows, write_atomic

__all__ = ["plot_busbw", "plot_compare", "size_label"]

_SIZE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def size_label(size: int) -> str:
    """A byte count the way scenarios write it: `8B`, `4KiB`, `16MiB`; decimal units when binary ones do not fit."""
    for unit, scale in _SIZE_UNITS:
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def plot_busbw(collectives: pl.DataFrame, path: Path, title: str = "", parameter: str = "") -> str:
    """Writes a PNG of busbw (GB/s, as nccl-tests) against size for each (job, phase); returns the file name.

    `collectives` is a sweep's combined frame or one run's table; `parameter`
    labels the x axis when the sizes repeat (a sweep of another field).
    """
    fig = Figure(figsize=(7, 4.5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if not collectives.is_empty():
        _draw(ax, nccl_rows(collectives), parameter or "sweep value")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    # No software version in the file: the same sweep gives the same bytes.
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return write_atomic(path, lambda f: f.write(buffer.getvalue()))


def _draw(ax: Axes, rows: pl.DataFrame, parameter: str) -> None:
    blocks = list(rows.group_by("job", "phase", maintain_order=True))
    # The collectives whose size the sweep varies; if none, every collective against the swept values.
    sized = [(name, block) for name, block in blocks if block["size"].n_unique() > 1]
    by_size = bool(sized) or len(rows["key"].unique()) == 1
    labels: dict[float, str] = {}
    for (job, phase), block in sized or blocks:
        block = block.sort("key", maintain_order=True)
        xs = block["size"].to_list() if by_size else block["key"].to_list()
        ax.plot(xs, block["busbw"].to_list(), marker="o", label=f"{job} / {phase} ({block['op'][0]})")
        for x, size, value in zip(xs, block["size"], block["value"], strict=True):
            labels[float(x)] = size_label(size) if by_size else str(value)
    if by_size:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size")
    else:
        ax.set_xlabel(parameter)
    ticks = sorted(labels)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    crowded = len(ticks) > 6
    ax.set_xticklabels([labels[t] for t in ticks], rotation=45 if crowded else 0, ha="right" if crowded else "center")
    ax.legend(fontsize="small")


def plot_compare(output: Path, runs: Sequence[Any]) -> list[str]:
    """Draws a comparison's figures from its run directories (each design's first seed); returns their names.

    `fct_cdf.png`: the CDF of flow completion times per design, when the
    workload has flows. `throughput.png`: the payload every NIC sampled
    received over time per design, when the scenario samples hosts
    (`telemetry.hosts` with `sample_interval`).
    """
    first: dict[str, Path] = {}
    for run in runs:
        first.setdefault(run.design, output / run.directory)
    written = []
    fig, ax = _figure()
    for design, flows in _tables(first, "flows"):
        fct = flows["fct_s"].drop_nulls().sort()
        if fct.is_empty():
            continue
        ys = [(k + 1) / len(fct) for k in range(len(fct))]
        ax.step((fct * 1e6).to_list(), ys, where="post", label=design)
    if ax.lines:
        ax.set_xlabel("flow completion time (us)")
        ax.set_ylabel("fraction of flows")
        written.append(_save(fig, ax, output / "fct_cdf.png"))
    fig, ax = _figure()
    for design, series in _tables(first, "timeseries"):
        received = series.filter(pl.col("metric") == "rx_goodput_bps")
        total = received.group_by("time_s").agg(pl.col("value").sum()).sort("time_s")
        if not total.is_empty():
            ax.plot((total["time_s"] * 1e3).to_list(), (total["value"] / 1e9).to_list(), label=design)
    if ax.lines:
        ax.set_xlabel("time (ms)")
        ax.set_ylabel("received by the sampled NICs (Gb/s)")
        written.append(_save(fig, ax, output / "throughput.png"))
    return written


def _tables(directories: dict[str, Path], table: str) -> Iterator[tuple[str, pl.DataFrame]]:
    """Each design's `table` from its run directory, where the run wrote one (it has rows)."""
    for design, directory in directories.items():
        path = directory / f"{table}.parquet"
        if path.exists():
            yield design, pl.read_parquet(path)


def _figure() -> tuple[Figure, Axes]:
    fig = Figure(figsize=(7, 4.5), dpi=120)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _save(fig: Figure, ax: Axes, path: Path) -> str:
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return write_atomic(path, lambda f: f.write(buffer.getvalue()))
