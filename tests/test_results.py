"""The run directory: atomic, complete, deterministic. Uses hand-made core output, not a simulation."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import fabricsim
from fabricsim.results import (
    INCOMPLETE_MARKER,
    OutputExistsError,
    OutputNotWritableError,
    Results,
    WriteFailedError,
    check_output_dir,
)


def _raw(complete: bool = True) -> dict[str, Any]:
    """Output shaped like `fabricsim._core.run`'s."""
    return {
        "resolved": json.dumps({"name": "fake", "seed": 7, "topology": {"kind": "clos"}}),
        "complete": complete,
        "summary": {"sim_time_s": 1.5e-3, "flows": 3, "flows_completed": 2, "drops_by_cause": {"buffer": 2}},
        "tables": {
            "flows": {
                "flow": [0, 1, 2],
                "src": [0, 1, 2],
                "dst": [1, 2, 0],
                "bytes": [65536, 65536, 65536],
                "start_s": [0.0, 0.0, 1e-6],
                "end_s": [5.2e-6, 6.1e-6, None],
                "fct_s": [5.2e-6, 6.1e-6, None],
            },
            "ports": {"node": ["tor0", "tor0"], "port": [0, 1], "tx_bytes": [100, 200], "max_queue_bytes": [0, 4096]},
            "timeseries": {
                "time_s": [0.0, 1e-6],
                "entity": ["tor0:1", "tor0:1"],
                "metric": ["queue_bytes"] * 2,
                "value": [0, 4096.5],
            },
        },
    }


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_frames_keep_nulls_and_widen_numbers() -> None:
    results = Results(_raw())
    assert results.flows.height == 3
    assert results.flows["end_s"].null_count() == 1
    assert results.flows["end_s"].dtype == pl.Float64
    assert results.timeseries["value"].dtype == pl.Float64
    assert results.ports.columns == ["node", "port", "tx_bytes", "max_queue_bytes"]
    assert results.scenario["seed"] == 7
    assert set(results.frames) == {"flows", "ports", "timeseries"}


def test_write_produces_a_complete_directory(tmp_path: Path) -> None:
    out = Results(_raw()).write(tmp_path / "run", csv=True)
    names = set(_files(out))
    assert names == {
        "scenario.json",
        "summary.json",
        "flows.parquet",
        "ports.parquet",
        "timeseries.parquet",
        "flows.csv",
        "ports.csv",
        "timeseries.csv",
    }
    scenario = json.loads((out / "scenario.json").read_text())
    assert scenario["seed"] == 7
    assert scenario["fabricsim_version"] == fabricsim.__version__
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["flows_completed"] == 2
    flows = pl.read_parquet(out / "flows.parquet")
    assert flows.equals(Results(_raw()).flows)
    assert pl.read_csv(out / "ports.csv").height == 2


def test_a_table_without_rows_is_not_written_and_an_old_one_goes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    Results(_raw()).write(out)
    raw = _raw()
    raw["tables"]["timeseries"] = {"time_s": [], "entity": [], "metric": [], "value": []}
    raw["tables"]["ev_log"] = {"time_s": [], "qp": []}
    results = Results(raw)
    assert set(results.frames) == {"flows", "ports", "timeseries", "ev_log"}, "Results holds every table"
    results.write(out, overwrite=True)
    assert set(_files(out)) == {"scenario.json", "summary.json", "flows.parquet", "ports.parquet"}


def test_incomplete_run_is_marked(tmp_path: Path) -> None:
    out = Results(_raw(complete=False)).write(tmp_path / "run")
    assert (out / INCOMPLETE_MARKER).exists()
    assert json.loads((out / "summary.json").read_text())["complete"] is False


def test_existing_directory_needs_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match=str(out)):
        Results(_raw()).write(out)
    assert _files(out) == {"notes.txt": b"mine"}


def test_overwrite_replaces_results_and_removes_stale_ones(tmp_path: Path) -> None:
    out = tmp_path / "run"
    Results(_raw(complete=False)).write(out, csv=True)
    (out / "notes.txt").write_text("mine")
    Results(_raw()).write(out, overwrite=True)
    assert set(_files(out)) == {
        "scenario.json",
        "summary.json",
        "flows.parquet",
        "ports.parquet",
        "timeseries.parquet",
        "notes.txt",
    }
    assert json.loads((out / "summary.json").read_text())["complete"] is True


def test_a_failed_write_leaves_no_file_that_looks_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = pl.DataFrame.write_parquet
    calls = []

    def failing_write(self: pl.DataFrame, file: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            file.write(b"PAR1 partial")
            raise OSError("disk full")
        real_write(self, file, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", failing_write)
    with pytest.raises(OSError, match="disk full"):
        Results(_raw()).write(tmp_path / "run")
    assert set(_files(tmp_path / "run")) == {INCOMPLETE_MARKER, "scenario.json", "flows.parquet"}


def test_a_write_failure_names_the_file_and_cleans_its_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(self: pl.DataFrame, file: Any, **kwargs: Any) -> None:
        file.write(b"PAR1 partial")
        raise pl.exceptions.ComputeError("parquet: underlying IO error: No space left on device (os error 28)")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full_disk)
    with pytest.raises(WriteFailedError, match=r"run/flows\.parquet: cannot write: .*No space left on device"):
        Results(_raw()).write(tmp_path / "run")
    assert set(_files(tmp_path / "run")) == {INCOMPLETE_MARKER, "scenario.json"}


def test_overwriting_a_complete_run_that_fails_leaves_it_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = Results(_raw()).write(tmp_path / "run")

    def full_disk(self: pl.DataFrame, file: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full_disk)
    with pytest.raises(WriteFailedError):
        Results(_raw()).write(out, overwrite=True)
    assert (out / INCOMPLETE_MARKER).exists()


def test_output_check_creates_nothing_that_stays(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "run"
    assert check_output_dir(target) == target
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("relative", "error", "fragment"),
    [
        ("file", OutputExistsError, "exists and is not a directory"),
        ("file/run", OutputNotWritableError, "cannot create it: Not a directory"),
        ("new/" + "x" * 300, OutputNotWritableError, "cannot create it: File name too long"),
        ("x" * 300, OutputNotWritableError, "File name too long"),
    ],
)
def test_output_check_refuses_what_cannot_be_written(
    tmp_path: Path, relative: str, error: type[OSError], fragment: str
) -> None:
    (tmp_path / "file").write_text("mine")
    with pytest.raises(error, match=fragment):
        check_output_dir(tmp_path / relative)
    assert _files(tmp_path) == {"file": b"mine"}


def test_output_check_tries_writing_into_an_existing_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    out.mkdir()

    def read_only(self: Path, data: bytes) -> int:
        raise PermissionError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "write_bytes", read_only)
    with pytest.raises(OutputNotWritableError, match="cannot write in it: Read-only file system"):
        check_output_dir(out, overwrite=True)


def test_writing_is_byte_deterministic(tmp_path: Path) -> None:
    first = Results(_raw()).write(tmp_path / "a", csv=True)
    second = Results(_raw()).write(tmp_path / "b", csv=True)
    assert _files(first) == _files(second)


def test_a_panic_in_the_core_becomes_a_python_exception() -> None:
    from fabricsim import SimulationError, _core

    with pytest.raises(SimulationError, match="internal error: boom"):
        _core._panic_for_tests("boom")


def test_tables_cross_from_the_core_as_one_buffer_per_column(tiny_scenario: dict[str, Any]) -> None:
    """A table crossed as JSON cost 1-4 KB a row at the peak; as buffers, a few bytes a value. The frame holds
    the same values either way: a time series' names come as their distinct strings and a code per row."""
    from fabricsim import _core

    scenario = {**tiny_scenario, "telemetry": {"sample_interval": "1us", "hosts": [0, 1]}}
    raw = _core.run(json.dumps(scenario))
    series = raw["tables"]["timeseries"]
    assert isinstance(series["time_s"], bytes)
    words, codes = series["entity"]
    assert sorted(words) == ["nic0", "nic0:0", "nic1", "nic1:0"], "each name once (a host, its plane)"
    assert len(codes) == 4 * (len(series["time_s"]) // 8)
    frame = Results(raw).timeseries
    assert frame.schema == {"time_s": pl.Float64, "entity": pl.String, "metric": pl.String, "value": pl.Float64}
    assert frame.height > 10
    assert set(frame["entity"]) == set(words)
    assert set(frame["metric"]) == {"rx_goodput_bps", "plane_tx_bps"}
    flows = Results(raw).flows
    assert flows["flow"].dtype == pl.UInt64 and flows["flow"].to_list() == list(range(flows.height))
    # A missing float (a flow without an end) is null, as JSON's null was.
    assert flows["fct_s"].null_count() == flows["end_s"].null_count()
