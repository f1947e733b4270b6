"""The results of one run: the core's columns as polars frames, and the run directory.

A run directory holds the resolved scenario (`scenario.json`, with the seed and
the fabricsim version), one Parquet file per table the core returned (`flows`,
`ports`, `timeseries`, `collectives`, `steps`, `transfers`, ...),
`summary.json`, and CSV copies on request. Every file is written
under a temporary name in the same directory and renamed into place; a marker
file `INCOMPLETE` exists while the directory is being written and stays when
the run itself was stopped early, or when writing failed (`WriteFailedError`,
naming the file and the system's reason), so a directory without it is whole.

`check_output_dir` tells before a run whether its directory could be
written, by trying: it creates what is missing and a probe file, then
removes them again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ._core import version
from .scenario import VERSION_KEY

__all__ = [
    "INCOMPLETE_MARKER",
    "OutputExistsError",
    "OutputNotWritableError",
    "Results",
    "WriteFailedError",
    "check_output_dir",
    "nccl_rows",
    "nccl_tests_table",
    "write_atomic",
    "write_failures",
    "write_json",
]

INCOMPLETE_MARKER = "INCOMPLETE"
PCAP_FILE = "telemetry.pcap"
TABLES = (
    "flows",
    "ports",
    "timeseries",
    "collectives",
    "steps",
    "transfers",
    "ev_log",
    "clustermapper",
    "histograms",
    "imbalance",
)


class OutputExistsError(FileExistsError):
    """The output directory exists and overwriting was not asked for."""


class OutputNotWritableError(OSError):
    """The output directory cannot be created or written to; found before anything is written."""


class WriteFailedError(OSError):
    """Writing results failed partway (a full disk, an I/O error); what was written is marked incomplete."""


def check_output_dir(directory: str | Path, overwrite: bool = False) -> Path:
    """Checks that results may be written to `directory`, leaving nothing behind; returns it as a Path.

    An existing directory is refused unless `overwrite`, anything else in
    the way always. The rest is tried for real: the missing directories are
    created and a probe file written in the last, then all of it removed, so
    a read-only parent or a name the file system refuses (too long) shows
    now rather than after the run.
    """
    path = Path(directory)
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except OSError as exc:  # e.g. a name too long to look up
        raise OutputNotWritableError(f"output directory {path}: {_reason(exc)}") from None
    if exists and not is_dir:
        raise OutputExistsError(f"output path {path} exists and is not a directory")
    if exists and not overwrite:
        raise OutputExistsError(f"output directory {path} exists; pass --overwrite to replace its results")
    _try_writing(path)
    return path


def _try_writing(path: Path) -> None:
    """Creates the missing directories of `path` and a probe file in it, then removes all it created."""
    created: list[Path] = []
    try:
        _create_missing(path, created)
        probe = path / f".fabricsim-probe.{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise OutputNotWritableError(f"output directory {path}: cannot write in it: {_reason(exc)}") from None
    finally:
        for directory in reversed(created):
            with suppress(OSError):
                directory.rmdir()


def _create_missing(path: Path, created: list[Path]) -> None:
    """Creates `path` and its missing parents, top down, recording each in `created` as it is made."""
    for directory in reversed((path, *path.parents)):
        try:
            if directory.exists():
                continue
            directory.mkdir()
        except OSError as exc:
            which = "it" if directory == path else directory
            raise OutputNotWritableError(f"output directory {path}: cannot create {which}: {_reason(exc)}") from None
        created.append(directory)


def _reason(exc: BaseException) -> str:
    """The system's words for an OSError (`No space left on device`), else the error's own message."""
    return getattr(exc, "strerror", None) or str(exc)


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
        # The capture of `telemetry.pcap`, as the bytes of a pcap file.
        self.pcap: bytes | None = raw.get("pcap")

    @classmethod
    def read(cls, directory: str | Path) -> Results:
        """The results of a run directory, each table read from its Parquet file when first asked for.

        Complete when the directory is not marked `INCOMPLETE`; a directory
        without `scenario.json` and `summary.json` is not a run's.
        """
        path = Path(directory)
        try:
            scenario = read_json(path / "scenario.json")
            summary = read_json(path / "summary.json")
        except OSError as e:
            raise FileNotFoundError(
                f"{path}: not a run directory (no readable scenario.json and summary.json): {e}"
            ) from None
        except ValueError as e:
            # FileNotFoundError as before (callers tell a run directory by it); the message names the file.
            raise FileNotFoundError(str(e)) from None
        if not isinstance(scenario, dict) or not isinstance(summary, dict):
            raise FileNotFoundError(f"{path}: not a run directory: scenario.json and summary.json hold no mapping")
        results = cls.__new__(cls)
        results.scenario = {k: v for k, v in scenario.items() if k != VERSION_KEY}
        results.complete = not (path / INCOMPLETE_MARKER).exists()
        results.summary = {k: v for k, v in summary.items() if k != "complete"}
        results.frames = _ParquetTables(path)
        capture = path / PCAP_FILE
        results.pcap = capture.read_bytes() if capture.is_file() else None
        return results

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

    @property
    def collectives(self) -> pl.DataFrame:
        """One row per collective of each group and iteration: CCT, algbw and busbw (Gb/s), ideal, slowdown."""
        return self._table("collectives")

    @property
    def steps(self) -> pl.DataFrame:
        """One row per training-step iteration of each job: start, end, step time."""
        return self._table("steps")

    @property
    def transfers(self) -> pl.DataFrame:
        """One row per collective transfer, when the scenario's `telemetry.transfers` asks for them."""
        return self._table("transfers")

    @property
    def ev_log(self) -> pl.DataFrame:
        """One row per MRC EV state change (active, backup, retired, denied), when `telemetry.ev_log` asks."""
        return self._table("ev_log")

    @property
    def clustermapper(self) -> pl.DataFrame:
        """Clustermapper's verdicts: when an element (link or switch) turned healthy, lossy or down."""
        return self._table("clustermapper")

    @property
    def histograms(self) -> pl.DataFrame:
        """Per-microsecond bandwidth histograms of ports, when `telemetry.histograms` asks: port, band, share."""
        return self._table("histograms")

    @property
    def imbalance(self) -> pl.DataFrame:
        """Queue and load imbalance per port group, when `telemetry.imbalance` asks: samples and quantiles."""
        return self._table("imbalance")

    def _table(self, name: str) -> pl.DataFrame:
        # A table the core did not return (a run without jobs, or without
        # transfer telemetry) reads as an empty frame.
        return self.frames.get(name, pl.DataFrame())

    def __repr__(self) -> str:
        state = "complete" if self.complete else "incomplete"
        shapes = ", ".join(f"{name}={frame.height} rows" for name, frame in self.frames.items())
        return f"<Results {self.scenario.get('name', '?')!r} {state}: {shapes}>"

    def write(self, directory: str | Path, overwrite: bool = False, csv: bool = False) -> Path:
        """Writes the run directory; returns its path.

        Tables without rows are not written. An existing directory is an
        error unless `overwrite`; then the files this method writes are replaced (and stale ones of an earlier run, such
        as CSV copies, removed) while other files are left alone.
        """
        path = check_output_dir(directory, overwrite)
        with write_failures(path):
            path.mkdir(parents=True, exist_ok=True)
            marker = path / INCOMPLETE_MARKER
            write_atomic(marker, lambda f: f.write(b"this run directory is incomplete\n"))

            written = {INCOMPLETE_MARKER}
            scenario = {VERSION_KEY: version(), **self.scenario}
            written.add(write_json(path / "scenario.json", scenario))
            # Only tables the run has rows for: a run without jobs has no
            # collectives, one without `telemetry.ev_log` no EV log.
            for name, frame in self.frames.items():
                if frame.is_empty():
                    continue
                written.add(write_atomic(path / f"{name}.parquet", lambda f, df=frame: df.write_parquet(f)))
                if csv:
                    written.add(write_atomic(path / f"{name}.csv", lambda f, df=frame: df.write_csv(f)))
            if self.pcap is not None:
                written.add(write_atomic(path / PCAP_FILE, lambda f: f.write(self.pcap)))
            for stale in _known_outputs(self.frames) - written:
                (path / stale).unlink(missing_ok=True)
            summary = {"complete": self.complete} | {k: v for k, v in self.summary.items() if k != "complete"}
            written.add(write_json(path / "summary.json", summary))

            if self.complete:
                marker.unlink()
        return path


# nccl-tests reports bandwidth in GB/s of 1e9 bytes; the core's tables in Gb/s.
GBPS_PER_GB_S = 8.0
# nccl-tests' default data type, float: its `count` column is elements of 4 bytes.
NCCL_TYPE = "float"
NCCL_TYPE_BYTES = 4


def nccl_rows(collectives: pl.DataFrame) -> pl.DataFrame:
    """The rows of nccl-tests tables: one per (job, phase) and size, in the order the core listed them.

    A size is one run of a sweep when the frame has the `sweep_index` and
    `sweep_value` columns of a sweep's combined frame, else one `bytes` of a
    single run. `time_us` is the mean CCT over the row's groups and
    iterations; `algbw` and `busbw` the mean of the core's figures in
    nccl-tests' GB/s (1e9 bytes/s); `value` the sweep value (null outside a
    sweep).
    """
    key = "sweep_index" if "sweep_index" in collectives.columns else "bytes"
    value = pl.col("sweep_value").first() if "sweep_value" in collectives.columns else pl.lit(None, pl.String)
    return (
        collectives.group_by("job", "phase", key, maintain_order=True)
        .agg(
            pl.col("op").first(),
            pl.col("algorithm").first(),
            pl.col("ranks").first(),
            pl.col("group").n_unique().alias("groups"),
            pl.col("bytes").max().alias("size"),
            (pl.col("cct_s").mean() * 1e6).alias("time_us"),
            (pl.col("algbw_gbps").mean() / GBPS_PER_GB_S).alias("algbw"),
            (pl.col("busbw_gbps").mean() / GBPS_PER_GB_S).alias("busbw"),
            value.alias("value"),
        )
        .rename({key: "key"})
    )


def nccl_tests_table(collectives: pl.DataFrame, parameter: str | None = None) -> str:
    """The collectives in nccl-tests' output layout, one block per (job, phase); rows as `nccl_rows`.

    When a block's sizes repeat, as in a sweep of something other than its
    size, a last column gives each row's value of the sweep's `parameter`.
    """
    if collectives.is_empty():
        return ""
    rows = nccl_rows(collectives)
    blocks = [
        _nccl_block(block.sort("key", maintain_order=True), parameter or "value")
        for _, block in rows.group_by("job", "phase", maintain_order=True)
    ]
    return "\n".join(blocks)


def _nccl_block(rows: pl.DataFrame, parameter: str) -> str:
    first = rows.row(0, named=True)
    groups = int(first["groups"])
    with_value = rows["size"].n_unique() < rows.height
    lines = [
        f"# {first['job']} / {first['phase']}: {first['op']} ({first['algorithm']}), "
        f"{first['ranks']} ranks, {groups} group{'' if groups == 1 else 's'}",
        "#",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'time':>7}  {'algbw':>6}  {'busbw':>6}",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}",
    ]
    if with_value:
        lines[2] += f"  {parameter}"
    busbw = []
    for row in rows.iter_rows(named=True):
        size = int(row["size"])
        line = (
            f"{size:>12}  {size // NCCL_TYPE_BYTES:>12}  {NCCL_TYPE:>8}  {_nccl_time(row['time_us']):>7}"
            f"  {_nccl_bw(row['algbw']):>6}  {_nccl_bw(row['busbw']):>6}"
        )
        if with_value:
            line += f"  {row['value']}"
        lines.append(line)
        if row["busbw"] is not None:
            busbw.append(row["busbw"])
    if busbw:
        lines.append(f"# Avg bus bandwidth    : {sum(busbw) / len(busbw):g}")
    return "\n".join(lines) + "\n"


def _nccl_time(time_us: float | None) -> str:
    # nccl-tests keeps the time column 7 characters wide by dropping decimals.
    if time_us is None:
        return "N/A"
    if time_us >= 10000.0:
        return f"{time_us:7.0f}"
    if time_us >= 100.0:
        return f"{time_us:7.1f}"
    return f"{time_us:7.2f}"


def _nccl_bw(gb_per_s: float | None) -> str:
    return "N/A" if gb_per_s is None else f"{gb_per_s:6.2f}"


def read_json(path: Path) -> Any:
    """A JSON file's value; a file that is not JSON raises ValueError naming it, without Python's exception name."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON ({e.msg}, line {e.lineno}, column {e.colno})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not valid JSON (not UTF-8 text)") from None


def read_parquet(path: Path, columns: list[str] | None = None) -> pl.DataFrame:
    """A Parquet file as a frame; a file that is not one raises ValueError naming it, not polars' ComputeError."""
    try:
        return pl.read_parquet(path, columns=columns)
    except pl.exceptions.PolarsError as e:
        raise ValueError(f"{path}: not a Parquet file fabricsim can read ({polars_problem(e)})") from None


def polars_problem(error: pl.exceptions.PolarsError) -> str:
    """polars' message on one line, without its error class or its `parquet:` prefix."""
    return " ".join(str(error).removeprefix("parquet: ").split())


class _ParquetTables(dict):  # type: ignore[type-arg]
    """A run directory's tables by name, each read from its Parquet file on first access."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._files = {f.stem: f for f in sorted(path.glob("*.parquet"))}

    def __missing__(self, name: str) -> pl.DataFrame:
        if name not in self._files:
            # A table the run had no rows for was not written: as the core's results, it reads empty.
            if name in TABLES:
                return pl.DataFrame()
            raise KeyError(name)
        frame = read_parquet(self._files[name])
        self[name] = frame
        return frame

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self._files else default

    def __contains__(self, name: object) -> bool:
        return name in self._files

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def keys(self) -> Any:
        return self._files.keys()

    def items(self) -> Any:
        return [(name, self[name]) for name in self._files]

    def values(self) -> Any:
        return [self[name] for name in self._files]


_DTYPES = {"int": pl.UInt64, "float": pl.Float64, "str": pl.String}


def _frame(columns: Mapping[str, Any], dtypes: Mapping[str, str]) -> pl.DataFrame:
    """A table from the core's buffers (`_series`), or from lists of values."""
    if columns and all(name in dtypes and not isinstance(data, list) for name, data in columns.items()):
        return pl.DataFrame([_series(name, dtypes[name], data) for name, data in columns.items()])
    # The core names each column's type, so an empty table keeps its schema.
    schema = {name: _DTYPES[dtypes[name]] for name in columns if name in dtypes}
    return pl.DataFrame(dict(columns), schema=schema or None, strict=False, infer_schema_length=None)


def _series(name: str, dtype: str, data: Any) -> pl.Series:
    """A column as the core hands it over (crates/fabricsim-py/src/tables.rs): no Python object per value."""
    if dtype == "int":
        return pl.Series(name, np.frombuffer(data, dtype="<u8"))
    if dtype == "float":
        return pl.Series(name, np.frombuffer(data, dtype="<f8")).fill_nan(None)
    words, codes = data
    return pl.Series(name, words, dtype=pl.String).gather(np.frombuffer(codes, dtype="<u4")).alias(name)


def _known_outputs(frames: Mapping[str, pl.DataFrame]) -> set[str]:
    names = set(TABLES) | set(frames)
    tables = {f"{n}.{ext}" for n in names for ext in ("parquet", "csv")}
    return {"scenario.json", "summary.json", PCAP_FILE} | tables


def write_json(path: Path, data: Mapping[str, Any]) -> str:
    """Writes `data` as indented JSON through `write_atomic`; returns the file name."""
    text = json.dumps(data, indent=2) + "\n"
    return write_atomic(path, lambda f: f.write(text.encode("utf-8")))


def write_atomic(path: Path, write: Callable[[Any], object]) -> str:
    """Writes through a temporary file in the same directory, then renames it over `path`.

    A failure removes the temporary file and raises `WriteFailedError` naming `path`.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with write_failures(path):
        try:
            with tmp.open("wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(path)
        except BaseException:
            with suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise
    return path.name


@contextmanager
def write_failures(path: Path) -> Iterator[None]:
    """Raises a failure of the file system while writing `path` as `WriteFailedError`, naming `path` and the reason.

    polars reports an I/O error of `write_parquet` as its own ComputeError,
    so its errors count as write failures too.
    """
    try:
        yield
    except (WriteFailedError, OutputExistsError, OutputNotWritableError):
        raise
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise WriteFailedError(f"{path}: cannot write: {_reason(exc)}") from exc
