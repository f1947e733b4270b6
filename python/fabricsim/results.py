"""The results of one run: the core's columns as polars frames, and the run directory.

A run directory holds the resolved scenario (`scenario.json`, with the seed and
the fabricsim version), one Parquet file per table (`flows`, `ports`,
`timeseries`), `summary.json`, and CSV copies on request. Every file is written
under a temporary name in the same directory and renamed into place; a marker
file `INCOMPLETE` exists while the directory is being written and stays when
the run itself was stopped early, so a directory without it is whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ._core import version
from .scenario import VERSION_KEY

__all__ = ["INCOMPLETE_MARKER", "OutputExistsError", "Results", "check_output_dir"]

INCOMPLETE_MARKER = "INCOMPLETE"
TABLES = ("flows", "ports", "timeseries")


class OutputExistsError(FileExistsError):
    """The output directory exists and overwriting was not asked for."""


def check_output_dir(directory: str | Path, overwrite: bool = False) -> Path:
    """Checks that results may be written to `directory` without writing anything; returns it as a Path."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise OutputExistsError(f"output path {path} exists and is not a directory")
    if path.exists() and not overwrite:
        raise OutputExistsError(f"output directory {path} exists; pass --overwrite to replace its results")
    return path


class Results:
    """What the core returned for one run, with frames built from its columns."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.scenario: dict[str, Any] = json.loads(raw["resolved"])
        self.complete: bool = bool(raw["complete"])
        self.summary: dict[str, Any] = dict(raw["summary"])
        dtypes = raw.get("dtypes", {})
        self.frames: dict[str, pl.DataFrame] = {
            name: _frame(cols, dtypes.get(name, {})) for name, cols in raw["tables"].items()
        }

    @property
    def flows(self) -> pl.DataFrame:
        """One row per flow: endpoints, bytes, start, end, FCT, ideal FCT, slowdown, retransmissions."""
        return self.frames["flows"]

    @property
    def ports(self) -> pl.DataFrame:
        """One row per port: bytes and packets sent, drops by cause, ECN marks, trims, pauses, maximum queue."""
        return self.frames["ports"]

    @property
    def timeseries(self) -> pl.DataFrame:
        """Sampled series in long format: time_s, entity, metric, value."""
        return self.frames["timeseries"]

    def __repr__(self) -> str:
        state = "complete" if self.complete else "incomplete"
        shapes = ", ".join(f"{name}={frame.height} rows" for name, frame in self.frames.items())
        return f"<Results {self.scenario.get('name', '?')!r} {state}: {shapes}>"

    def write(self, directory: str | Path, overwrite: bool = False, csv: bool = False) -> Path:
        """Writes the run directory; returns its path.

        An existing directory is an error unless `overwrite`; then the files
        this method writes are replaced (and stale ones of an earlier run, such
        as CSV copies, removed) while other files are left alone.
        """
        path = check_output_dir(directory, overwrite)
        path.mkdir(parents=True, exist_ok=True)
        marker = path / INCOMPLETE_MARKER
        _write_atomic(marker, lambda f: f.write(b"this run directory is incomplete\n"))

        written = {INCOMPLETE_MARKER}
        scenario = {VERSION_KEY: version(), **self.scenario}
        written.add(_write_json(path / "scenario.json", scenario))
        for name, frame in self.frames.items():
            written.add(_write_atomic(path / f"{name}.parquet", lambda f, df=frame: df.write_parquet(f)))
            if csv:
                written.add(_write_atomic(path / f"{name}.csv", lambda f, df=frame: df.write_csv(f)))
        for stale in _known_outputs(self.frames) - written:
            (path / stale).unlink(missing_ok=True)
        summary = {"complete": self.complete} | {k: v for k, v in self.summary.items() if k != "complete"}
        written.add(_write_json(path / "summary.json", summary))

        if self.complete:
            marker.unlink()
        return path


_DTYPES = {"int": pl.UInt64, "float": pl.Float64, "str": pl.String}


def _frame(columns: Mapping[str, list[Any]], dtypes: Mapping[str, str]) -> pl.DataFrame:
    # The core names each column's type, so an empty table keeps its schema.
    schema = {name: _DTYPES[dtypes[name]] for name in columns if name in dtypes}
    return pl.DataFrame(dict(columns), schema=schema or None, strict=False, infer_schema_length=None)


def _known_outputs(frames: Mapping[str, pl.DataFrame]) -> set[str]:
    names = set(TABLES) | set(frames)
    return {"scenario.json", "summary.json"} | {f"{n}.{ext}" for n in names for ext in ("parquet", "csv")}


def _write_json(path: Path, data: Mapping[str, Any]) -> str:
    text = json.dumps(data, indent=2) + "\n"
    return _write_atomic(path, lambda f: f.write(text.encode("utf-8")))


def _write_atomic(path: Path, write: Callable[[Any], object]) -> str:
    """Writes through a temporary file in the same directory, then renames it over `path`."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path.name
