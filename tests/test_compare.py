"""`fabricsim compare`: one scenario under each design, side by side. Runs the core."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from fabricsim import _core, cli


def _compare(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main(["compare", *(str(a) for a in args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _scenario(tmp_path: Path, **topology: Any) -> Path:
    """A permutation on a small Clos; `topology` adds to it (planes, nics_per_host)."""
    data = {
        "name": "tiny",
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "nics": 8, "link_rate": "100Gbps", **topology},
        "traffic": [{"kind": "permutation", "bytes": "64KB"}],
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_compare_runs_each_design_and_seed_and_writes_one_row_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = _scenario(tmp_path, planes=2)
    out = tmp_path / "cmp"
    code, stdout, _ = _compare(capsys, source, "--designs", "roce,mrc", "--seeds", "2", "-j", "2", "-o", out, "--plot")
    assert code == 0
    rows = pl.read_parquet(out / "compare.parquet")
    assert rows.select("design", "seed").rows() == [("roce", 1), ("roce", 2), ("mrc", 1), ("mrc", 2)]
    assert rows["complete"].all()
    # Each run has its own directory, with the design's transport in its resolved scenario.
    assert (out / "mrc" / "seed_2" / "summary.json").exists()
    assert '"kind": "mrc"' in (out / "mrc" / "seed_1" / "scenario.json").read_text()
    assert "FCT p99" in stdout and "roce" in stdout and "mrc" in stdout
    assert (out / "fct_cdf.png").read_bytes()[:4] == b"\x89PNG"
    # A second seed is another run: the spread shows as (min-max) where they differ.
    assert rows.filter(pl.col("design") == "roce")["fct_max_us"].n_unique() >= 1


def test_the_same_comparison_on_one_or_two_processes_gives_the_same_rows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = _scenario(tmp_path, planes=2)
    tables = []
    for jobs, name in (("1", "one"), ("2", "two")):
        code, _, _ = _compare(capsys, source, "--designs", "spectrum-x,pro", "-j", jobs, "-o", tmp_path / name)
        assert code == 0
        tables.append(pl.read_parquet(tmp_path / name / "compare.parquet"))
    assert tables[0].equals(tables[1])


def test_designs_that_cannot_run_are_left_out_with_the_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # One NIC a host: SHIFT has no backup NIC.
    code, _, err = _compare(capsys, _scenario(tmp_path), "-o", tmp_path / "cmp")
    assert code == 0
    assert "shift left out" in err and "nic.shift.backup_rail_offset" in err
    designs = pl.read_parquet(tmp_path / "cmp" / "compare.parquet")["design"].unique(maintain_order=True).to_list()
    assert "shift" not in designs and designs[:2] == ["roce", "mrc"]
    # Asked for by name, it is an error before anything runs.
    code, _, err = _compare(capsys, _scenario(tmp_path), "--designs", "shift", "-o", tmp_path / "named")
    assert code == 2 and "--designs: shift cannot run this scenario" in err
    assert not (tmp_path / "named").exists()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--designs", "infiniband"), "'infiniband' is not a design"),
        (("--designs", "mrc,mrc"), "names a design twice"),
        (("--seeds", "0"), "--seeds: 0"),
        (("-j", "0"), "--jobs: 0"),
    ],
)
def test_bad_arguments_exit_2_naming_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...], fragment: str
) -> None:
    code, _, err = _compare(capsys, _scenario(tmp_path), *args, "-o", tmp_path / "cmp")
    assert code == 2 and fragment in err, err
    assert not (tmp_path / "cmp").exists()


def test_the_designs_are_the_ones_the_core_knows() -> None:
    assert _core.designs() == ["roce", "mrc", "spectrum-x", "pro", "hpn", "shift"]
