"""`fabricsim examples`: the scenarios shipped in the package, listed and copied to stand alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fabricsim import cli
from fabricsim.scenario import example_scenarios, load_scenario


def _examples(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main(["examples", *(str(a) for a in args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_paper_has_examples_and_fragments_are_not_listed() -> None:
    names = example_scenarios()
    for folder in ("baseline", "mrc", "spectrum-x", "pro", "hpn", "shift", "compare", "scale"):
        assert any(n.startswith(f"{folder}/") for n in names), folder
    assert not any("fragments" in n for n in names)


def test_list_names_them_with_what_each_is(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _examples(capsys)
    assert code == 0
    assert "compare/nic_port_failure_mrc" in out.replace("\n", "")


def test_a_copy_stands_alone_and_loads_as_the_example_does(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # An example that includes others: the copy has them merged in.
    name = "pro/fig10_links4_pro"
    assert "include" in yaml.safe_load(example_scenarios()[name].read_text())
    code, out, _ = _examples(capsys, "copy", name, tmp_path / "mine")
    assert code == 0 and "copied" in out
    copy = tmp_path / "mine" / "fig10_links4_pro.yaml"
    assert copy.read_text().startswith("# pro-deterministic-lb.txt")
    assert "include" not in yaml.safe_load(copy.read_text())
    assert load_scenario(copy) == load_scenario(example_scenarios()[name])
    # Copying over it again is refused, naming the file.
    code, _, err = _examples(capsys, "copy", name, tmp_path / "mine")
    assert code == 2 and str(copy) in err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [(("copy",), "which example"), (("copy", "nope"), "no example named 'nope'"), (("list", "x"), "takes no name")],
)
def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], fragment: str) -> None:
    code, _, err = _examples(capsys, *args)
    assert code == 2 and fragment in err
