"""Flows from other tools' files: htsim connection matrices and flow tables.

A scenario's traffic may name a file instead of spelling its flows out:

    traffic:
      - {kind: htsim_cm, file: perm_16n_16c_2MB.cm}
      - {kind: flow_table, file: flows.csv}     # or .parquet

`load_scenario` replaces each such entry by the `flow` entries it stands
for, before the core sees the scenario (the core reads no files), so the
resolved scenario of a run lists them. A relative `file` is taken from the
directory of the scenario file (the working directory for a scenario given
as a dict).

htsim's connection matrix (csg-htsim `sim/datacenter/connection_matrix.cpp`):
a header of `Nodes N` and `Connections C` (and `Triggers`, `Failures`),
then a line per connection, `SRC->DST` followed by `start T` (picoseconds,
as htsim reads it), `size B` (bytes) and optionally `id I`. Node i is the
scenario's NIC i. htsim's size 0 is a flow without end: it takes the
entry's `unbounded_bytes`, else it is refused. What fabricsim has no
counterpart for is refused with the file, line and token: flows started by
triggers, priorities and failure lines.

A flow table has columns `src`, `dst`, `bytes` and optionally `start` (a
time with its unit, `10us`, or a number of seconds), one row per flow;
`src` and `dst` are NIC indices or names.
"""

from __future__ import annotations

import math
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._core import ScenarioError

__all__ = ["FILE_KINDS", "expand_traffic_files", "read_flow_table", "read_htsim_cm"]

FILE_KINDS = ("htsim_cm", "flow_table")
# The largest file read: about seven million connections of a matrix.
MAX_FILE_BYTES = 256 << 20
# Fields a file entry takes besides `kind` and `file`, passed to every flow it makes.
_PASSED_ON = ("qps", "rate", "op")


def expand_traffic_files(scenario: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """The scenario with each traffic entry that names a file replaced by its flows."""
    traffic = scenario.get("traffic")
    if not isinstance(traffic, list) or not any(_names_file(t) for t in traffic):
        return scenario
    expanded: list[Any] = []
    for i, entry in enumerate(traffic):
        if not _names_file(entry):
            expanded.append(entry)
            continue
        field = f"traffic[{i}]"
        extra = set(entry) - {"kind", "file", "unbounded_bytes", *_PASSED_ON}
        if extra:
            raise ScenarioError(f"{field}.{sorted(extra)[0]}: unknown field for kind {entry['kind']}")
        raw = entry.get("file")
        if not isinstance(raw, str) or not raw:
            raise ScenarioError(f"{field}.file: expected the path of a file, found {raw!r}")
        path = Path(raw) if Path(raw).is_absolute() else base_dir / raw
        if entry["kind"] == "htsim_cm":
            flows = read_htsim_cm(path, entry.get("unbounded_bytes"), field)
        else:
            if "unbounded_bytes" in entry:
                raise ScenarioError(f"{field}.unbounded_bytes: only htsim_cm has flows without end")
            flows = read_flow_table(path, field)
        passed = {k: entry[k] for k in _PASSED_ON if k in entry}
        expanded.extend({**flow, **passed} for flow in flows)
    return {**scenario, "traffic": expanded}


def _names_file(entry: Any) -> bool:
    return isinstance(entry, Mapping) and entry.get("kind") in FILE_KINDS


def read_htsim_cm(path: Path, unbounded_bytes: Any, field: str) -> list[dict[str, Any]]:
    """The flows of an htsim connection matrix, as `flow` traffic entries."""
    text = _read_text(path, field)
    flows: list[dict[str, Any]] = []
    nodes = declared = None
    for number, line in enumerate(text.splitlines(), start=1):
        tokens = line.split()
        where = f"{field}.file: {path}, line {number}"
        if not tokens or tokens[0].startswith("#"):
            continue
        head = tokens[0]
        if head in ("Nodes", "Connections", "Triggers", "Failures"):
            value = _integer(tokens[1] if len(tokens) > 1 else "", f"{where}: {head}")
            if head == "Nodes":
                nodes = value
            elif head == "Connections":
                declared = value
            continue
        if head == "failure":
            raise ScenarioError(f"{where}: htsim's failure lines are not read; give faults in the scenario")
        if head == "trigger":
            raise ScenarioError(f"{where}: flows started by triggers are not supported (flows here start at a time)")
        if "->" not in head:
            raise ScenarioError(f"{where}: expected SRC->DST, found {head!r}")
        src_text, _, dst_text = head.partition("->")
        src, dst = _integer(src_text, f"{where}: source"), _integer(dst_text, f"{where}: destination")
        for node, what in ((src, "source"), (dst, "destination")):
            if nodes is not None and node >= nodes:
                raise ScenarioError(f"{where}: {what} {node} is not below Nodes {nodes}")
        flow = _connection(tokens[1:], where, unbounded_bytes)
        flows.append({"kind": "flow", "src": src, "dst": dst, **flow})
    if declared is not None and declared != len(flows):
        raise ScenarioError(f"{field}.file: {path} declares Connections {declared} and has {len(flows)}")
    if not flows:
        raise ScenarioError(f"{field}.file: {path} has no connections")
    return flows


def _read_text(path: Path, field: str) -> str:
    """The file as text; refused when it is no regular file, past `MAX_FILE_BYTES`, or not UTF-8."""
    _check_file(path, field)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"{field}.file: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(f"{field}.file: {path} is larger than {MAX_FILE_BYTES >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(f"{field}.file: {path} is not UTF-8 text") from None


def _check_file(path: Path, field: str) -> None:
    """Refuses what is not a regular file of at most `MAX_FILE_BYTES` (a device, a pipe, a directory)."""
    try:
        status = path.stat()
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"{field}.file: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(status.st_mode):
        raise ScenarioError(f"{field}.file: {path} is not a regular file")
    if status.st_size > MAX_FILE_BYTES:
        raise ScenarioError(f"{field}.file: {path} is larger than {MAX_FILE_BYTES >> 20} MiB")


def _connection(tokens: list[str], where: str, unbounded_bytes: Any) -> dict[str, Any]:
    """`start` and `size` of one connection line's attributes (after SRC->DST)."""
    start: str | None = None
    size: int | None = None
    k = 0
    while k < len(tokens):
        token = tokens[k]
        if token in ("start", "size", "id"):
            if k + 1 >= len(tokens):
                raise ScenarioError(f"{where}: {token} without a value")
            value = tokens[k + 1]
            if token == "start":
                start = _picoseconds(value, where)
            elif token == "size":
                size = _integer(value, f"{where}: size")
            else:
                _integer(value, f"{where}: id")
            k += 2
            continue
        if token in ("trigger", "send_done_trigger", "recv_done_trigger", "addon"):
            raise ScenarioError(f"{where}: {token}: flows started by triggers are not supported")
        if token == "prio":
            raise ScenarioError(f"{where}: prio: fabricsim has no per-flow priority")
        raise ScenarioError(f"{where}: unknown token {token!r}")
    if start is None:
        raise ScenarioError(f"{where}: no start time")
    if size is None:
        raise ScenarioError(f"{where}: no size")
    if size == 0:
        if unbounded_bytes is None:
            raise ScenarioError(
                f"{where}: size 0 is htsim's flow without end; set the entry's unbounded_bytes (e.g. 1GB) "
                "to give such flows a size, and the scenario a duration"
            )
        return {"start": start, "bytes": unbounded_bytes}
    return {"start": start, "bytes": f"{size}B"}


def _picoseconds(text: str, where: str) -> str:
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError(f"{where}: start {text!r} is not a number (picoseconds)") from None
    if not math.isfinite(value) or value < 0:
        raise ScenarioError(f"{where}: start {text!r} is not a time (picoseconds, at least 0)")
    return f"{round(value)}ps"


def _integer(text: str, what: str) -> int:
    if not text.isdigit():
        raise ScenarioError(f"{what}: {text!r} is not a whole number")
    return int(text)


def read_flow_table(path: Path, field: str) -> list[dict[str, Any]]:
    """The flows of a CSV or Parquet table (src, dst, bytes, start), as `flow` traffic entries."""
    import polars as pl

    suffix = path.suffix.lower()
    _check_file(path, field)
    try:
        if suffix == ".csv":
            frame = pl.read_csv(path, infer_schema=False)
        elif suffix == ".parquet":
            frame = pl.read_parquet(path)
        else:
            raise ScenarioError(f"{field}.file: {path}: a flow table is a .csv or .parquet file")
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ScenarioError(f"{field}.file: cannot read {path}: {exc}") from None
    missing = [c for c in ("src", "dst", "bytes") if c not in frame.columns]
    if missing:
        raise ScenarioError(f"{field}.file: {path} has no column {missing[0]!r} (it needs src, dst, bytes)")
    extra = [c for c in frame.columns if c not in ("src", "dst", "bytes", "start")]
    if extra:
        raise ScenarioError(f"{field}.file: {path}: unknown column {extra[0]!r} (src, dst, bytes, start)")
    if frame.is_empty():
        raise ScenarioError(f"{field}.file: {path} has no rows")
    flows = []
    for row, values in enumerate(frame.iter_rows(named=True), start=1):
        flow: dict[str, Any] = {"kind": "flow"}
        for column in ("src", "dst"):
            flow[column] = _nic(values[column])
        flow["bytes"] = _bytes(values["bytes"], f"{field}.file: {path}, row {row}")
        start = _text(values.get("start"))
        if start:
            flow["start"] = f"{start}s" if _is_number(start) else start
        flows.append(flow)
    return flows


def _nic(value: Any) -> Any:
    text = _text(value)
    return int(text) if text.isdigit() else text


def _bytes(value: Any, where: str) -> str:
    text = _text(value)
    if text == "":
        raise ScenarioError(f"{where}: bytes is empty")
    return f"{text}B" if text.isdigit() else text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()
