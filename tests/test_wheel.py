"""The package as a user installs it: the wheel, in a fresh environment, run from outside the checkout.

The wheel is built with maturin (a dev dependency) into a temporary
directory and installed into a new virtual environment with its
dependencies taken from this one (no network: a `.pth` file points at this
environment's site-packages, after the wheel's own). Every command is run
from a directory that is not the checkout, so nothing may depend on it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin` directory of a fresh environment with the wheel installed."""
    maturin = shutil.which("maturin", path=str(Path(sys.executable).parent))
    if maturin is None:
        pytest.skip("maturin is not installed here (pip install -e '.[dev]' installs it)")
    root = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [maturin, "build", "--release", "--quiet", "--out", str(root / "dist")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYO3_PYTHON": sys.executable},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (root / "dist").glob("fabricsim-*.whl")
    env_dir = root / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    bin_dir = env_dir / "bin"
    site = Path(
        subprocess.run(
            [str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # The dependencies from this environment, found after the wheel's own files.
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    return bin_dir


def _run(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(bin_dir / "python"), *args], cwd=cwd, capture_output=True, text=True, env=env)


def test_the_installed_package_is_the_wheels_not_the_checkouts(installed: Path, tmp_path: Path) -> None:
    done = _run(installed, tmp_path, "-c", "import fabricsim, json; print(json.dumps([fabricsim.__file__]))")
    assert done.returncode == 0, done.stderr
    (where,) = json.loads(done.stdout)
    assert Path(where).is_relative_to(installed.parent), where
    assert not Path(where).is_relative_to(REPO), where


def test_run_reproduce_and_the_api_work_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    cli = ("-m", "fabricsim")
    done = _run(installed, tmp_path, *cli, "run", "-o", "runs/default")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "runs" / "default" / "summary.json").is_file()
    done = _run(installed, tmp_path, *cli, "reproduce", "mrc", "--only", "fig20", "--quick", "--out", "out")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "summary.md").is_file()
    done = _run(installed, tmp_path, *cli, "examples", "copy", "compare/nic_port_failure_mrc", "mine")
    assert done.returncode == 0, done.stderr
    api = (
        "import fabricsim; r = fabricsim.run('mine/nic_port_failure_mrc.yaml'); "
        "print(r.complete, r.summary['qp_errors'])"
    )
    done = _run(installed, tmp_path, "-c", api)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[0] == "True"
    done = _run(installed, tmp_path, *cli, "--version")
    assert done.returncode == 0 and done.stdout.startswith("fabricsim "), done.stdout


def test_a_sweep_on_two_processes_and_its_report_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    # The pool's workers are spawned: they too must find the installed package, not the checkout's.
    cli = ("-m", "fabricsim")
    done = _run(installed, tmp_path, *cli, "examples", "copy", "collectives/all_reduce", "mine")
    assert done.returncode == 0, done.stderr
    args = ("run", "mine/all_reduce.yaml", "-o", "sw", "-j", "2", "-s", "sweep.values=[8B, 4KiB]", "--report")
    done = _run(installed, tmp_path, *cli, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "sw" / "sweep.json").read_text())["complete"] is True
    assert (tmp_path / "sw" / "report.html").stat().st_size > 1_000_000  # plotly.js inline
    done = _run(installed, tmp_path, *cli, "compare", "mine/all_reduce.yaml", "--designs", "mrc", "-s", "sweep=null")
    assert done.returncode == 0, done.stderr[-3000:]
