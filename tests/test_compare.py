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
    args = ("--designs", "roce,mrc", "--seeds", "2", "-j", "2", "-o", out, "--plot", "--report")
    code, stdout, _ = _compare(capsys, source, *args)
    assert code == 0
    rows = pl.read_parquet(out / "compare.parquet")
    assert rows.select("design", "seed").rows() == [("roce", 1), ("roce", 2), ("mrc", 1), ("mrc", 2)]
    assert rows["complete"].all()
    # Each run has its own directory, with the design's transport in its resolved scenario.
    assert (out / "mrc" / "seed_2" / "summary.json").exists()
    assert '"kind": "mrc"' in (out / "mrc" / "seed_1" / "scenario.json").read_text()
    assert "FCT p99" in stdout and "roce" in stdout and "mrc" in stdout
    assert (out / "fct_cdf.png").read_bytes()[:4] == b"\x89PNG"
    page = (out / "report.html").read_text()
    assert "roce" in page and "mrc" in page
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


class _Sampled:
    """A run's results as recovery_times reads them: its faults and the NICs' sampled goodput."""

    def __init__(
        self, goodput: list[float], faults: list[dict[str, Any]], interval_us: float = 10.0, finished: bool = False
    ) -> None:
        self.scenario = {"faults": faults}
        self.complete = True
        self.summary = {"flows": 4, "flows_completed": 4 if finished else 3}
        self.collectives = pl.DataFrame()
        times = [k * interval_us * 1e-6 for k in range(len(goodput))]
        # Two NICs, each half of the total.
        self.timeseries = pl.DataFrame(
            {
                "time_s": times + times,
                "entity": ["nic0"] * len(times) + ["nic1"] * len(times),
                "metric": ["rx_goodput_bps"] * (2 * len(times)),
                "value": [g / 2 for g in goodput] * 2,
            }
        )


def test_recovery_is_timed_from_the_fault_to_the_first_whole_interval_back_at_its_level() -> None:
    from fabricsim.compare import NEVER, recovery_times

    level = 100e9
    # Samples every 10 us; the fault at 35 us; the rate is down from 40 us to 80 us, back at 90 us.
    goodput = [0, level, level, level, 0.8 * level, 0, 0, 0, 0.5 * level, 0.95 * level, level]
    faults = [{"kind": "link_down", "at": "35us", "port": "t0.p0.0:2"}]
    assert recovery_times(_Sampled(goodput, faults)) == [pytest.approx(55e-6)]
    # A design that never dips shows the resolution: the first interval wholly after the fault.
    assert recovery_times(_Sampled([0, level, level, level, level, level, level], faults)) == [pytest.approx(15e-6)]
    # Never back at its level, and the workload never finished: the fault cost it for good.
    limping = [0, level, level, level, 0.5 * level, 0.5 * level, 0.1 * level, 0, 0]
    assert recovery_times(_Sampled(limping, faults)) == [NEVER]
    # The same, but every flow finished: the cost ended with the traffic, its last sample with any (60 us).
    assert recovery_times(_Sampled(limping, faults, finished=True)) == [pytest.approx(25e-6)]
    # Nothing flowed before the fault: no level to recover to.
    early = [{"kind": "link_down", "at": "5us", "port": "t0.p0.0:2"}]
    assert recovery_times(_Sampled([0, level, level], early)) == [None]
    # A fault without a time (random flaps) is not timed; no faults, nothing to time.
    assert recovery_times(_Sampled(goodput, [{"kind": "random_flaps", "rate": "1/s"}])) == []


def test_recovery_needs_sampled_nics() -> None:
    from fabricsim.compare import recovery_times

    unsampled = _Sampled([], [{"kind": "link_down", "at": "35us", "port": "t0.p0.0:2"}])
    unsampled.timeseries = pl.DataFrame()
    assert recovery_times(unsampled) == [None]


def test_a_fault_without_sampled_nics_says_why_there_is_no_recovery_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = yaml.safe_load(_scenario(tmp_path, planes=2).read_text())
    source["faults"] = [{"kind": "link_down", "at": "2us", "port": "t0.p0.0:2"}]
    path = tmp_path / "faulted.yaml"
    path.write_text(yaml.safe_dump(source), encoding="utf-8")
    code, stdout, stderr = _compare(capsys, path, "--designs", "mrc", "-j", "1", "-o", tmp_path / "cmp")
    assert code == 0
    assert "recovery after" not in stdout
    assert "note: no recovery times: they are read from sampled NICs" in stderr
