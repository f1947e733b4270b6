"""Hostile input and a hostile file system: one `error:` line and a clean exit code, never a traceback.

Scenario files that are huge, binary, UTF-16, nested without end, alias
bombs, with duplicate keys or non-finite numbers; overrides and API
arguments of the wrong type; output directories that cannot be written; a
disk that fills while results are written; a stdout closed early.
"""

from __future__ import annotations

import codecs
import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

import fabricsim
from fabricsim import ScenarioError, _core, cli, load_scenario, scenario
from fabricsim.results import INCOMPLETE_MARKER, WriteFailedError
from fabricsim.scenario import MAX_DEPTH, MAX_FILE_BYTES, parse_override, to_json

TINY_YAML = "name: tiny\nseed: 1\ntopology: {kind: clos, tiers: 2, radix: 4, link_rate: 100Gbps}\n"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def fabricsim_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], err


def _write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def _refused(path: Path, *fragments: str) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


# --- size and encoding ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    # A subprocess with a timeout: reading the endless stream would hang rather than fail.
    proc = subprocess.run(
        [sys.executable, "-m", "fabricsim", "run", "/dev/zero"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    _one_error_line(proc.stderr, "/dev/zero", f"larger than {MAX_FILE_BYTES // 2**20} MiB")
    assert not (tmp_path / "runs").exists()


def test_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    big = _write(tmp_path / "big.yaml", b"#" * MAX_FILE_BYTES + b"\n")
    _refused(big, "big.yaml", "larger than 16 MiB")


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (bytes(range(256)) * 4, "NUL bytes, a binary file"),
        (b"\x89PNG\r\n\x1a\n\xff\xd8 name: x\n", "byte 0x89 on line 1"),
        (b"name: x\nseed: \xff\xfe\n", "byte 0xff on line 2"),
    ],
)
def test_binary_file_is_not_utf8(tmp_path: Path, data: bytes, fragment: str) -> None:
    _refused(_write(tmp_path / "binary.yaml", data), "binary.yaml", "not UTF-8 text", fragment)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_file_is_named_as_such(tmp_path: Path, encoding: str) -> None:
    path = _write(tmp_path / "wide.yaml", TINY_YAML.encode(encoding))
    _refused(path, "wide.yaml", "not UTF-8 text", "UTF-16")


def test_utf32_file_is_named_as_such(tmp_path: Path) -> None:
    _refused(_write(tmp_path / "wider.yaml", TINY_YAML.encode("utf-32")), "wider.yaml", "not UTF-8", "UTF-32")


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path / "bom.yaml", codecs.BOM_UTF8 + TINY_YAML.encode())
    assert load_scenario(path)["name"] == "tiny"


# --- nesting and aliases -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [1_000, 100_000])
@pytest.mark.parametrize(("opening", "closing"), [("[", "]"), ("{a: ", "}")], ids=["sequences", "mappings"])
def test_deep_nesting_in_a_file_names_file_and_line(tmp_path: Path, levels: int, opening: str, closing: str) -> None:
    path = _write(tmp_path / "deep.yaml", "name: x\nseed: " + opening * levels + "1" + closing * levels)
    _refused(path, "deep.yaml", "line 2, column", f"nested deeper than {MAX_DEPTH} levels")


def test_nesting_up_to_the_limit_loads(tmp_path: Path) -> None:
    # The root mapping is the first level.
    path = _write(tmp_path / "deep.yaml", "x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    assert "x" in load_scenario(path)


def _nested_dict(levels: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(levels):
        node["a"] = {}
        node = node["a"]
    return root


def test_deep_dict_from_the_api_is_refused() -> None:
    with pytest.raises(ScenarioError, match=rf"^a\.a\.a.*: nested deeper than {MAX_DEPTH} levels$"):
        load_scenario(_nested_dict(100_000))


def test_deep_override_values_are_refused() -> None:
    with pytest.raises(ScenarioError, match=rf"^x: cannot parse .*nested deeper than {MAX_DEPTH} levels$"):
        parse_override("x=" + "[" * 100_000)
    with pytest.raises(ScenarioError, match=rf"^x\.a\.a.*: nested deeper than {MAX_DEPTH} levels$"):
        load_scenario({"name": "x"}, {"x": _nested_dict(100_000)})


def test_a_dict_that_contains_itself_is_refused() -> None:
    looped: dict[str, Any] = {"traffic": []}
    looped["traffic"].append(looped)
    with pytest.raises(ScenarioError, match=r"^traffic\[0\]\.traffic: contains itself"):
        load_scenario(looped)


def _billion_laughs() -> str:
    """9 levels of 10 aliases each: a few hundred bytes that expand to 10**9 values."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    path = _write(tmp_path / "laughs.yaml", _billion_laughs())
    _refused(path, "laughs.yaml", "more than 1,000,000 values once its aliases are expanded")


def test_too_many_values_are_refused_while_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A smaller limit stands in for 1,000,000, which takes the pure-Python parser seconds to reach.
    monkeypatch.setattr(scenario, "MAX_VALUES", 1_000)
    path = _write(tmp_path / "flat.yaml", "name: x\nflows: [" + "1, " * 5_000 + "]\n")
    _refused(path, "flat.yaml", "line 2, column", "more than 1,000 values")


def test_aliases_within_the_limits_still_work(tmp_path: Path) -> None:
    path = _write(tmp_path / "shared.yaml", "a: &rate 100Gbps\nb: *rate\n")
    assert load_scenario(path) == {"a": "100Gbps", "b": "100Gbps"}


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    _refused(_write(tmp_path / "loop.yaml", "traffic: &t [*t]\n"), "loop.yaml", "traffic[0]: contains itself")


def test_aliases_that_nest_too_deep_are_refused(tmp_path: Path) -> None:
    # Each level of the file is shallow; the alias puts one 40-deep list inside another.
    half = "[" * 40 + "]" * 40
    path = _write(tmp_path / "stacked.yaml", f"a: &a {half}\nb: {'[' * 40}*a{']' * 40}\n")
    _refused(path, "stacked.yaml", f"nested deeper than {MAX_DEPTH} levels")


# --- keys ----------------------------------------------------------------------------------------------------------


def test_duplicate_key_names_key_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "twice.yaml", "name: x\nseed: 1\ntopology:\n  radix: 4\n  radix: 8\n")
    _refused(path, "twice.yaml", "line 5", "duplicate key 'radix'", "first on line 4")


def test_duplicate_top_level_key_is_refused(tmp_path: Path) -> None:
    _refused(_write(tmp_path / "twice.yaml", "seed: 1\nname: x\nseed: 2\n"), "line 3", "duplicate key 'seed'")


def test_merge_keys_still_merge(tmp_path: Path) -> None:
    path = _write(tmp_path / "merge.yaml", "base: &b {kind: clos, radix: 4}\ntopology:\n  <<: *b\n  radix: 8\n")
    assert load_scenario(path)["topology"] == {"kind": "clos", "radix": 8}


def test_non_string_key_in_a_file_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"^topology: the key 1 is not a string \(int\)"):
        load_scenario(_write(tmp_path / "intkey.yaml", "topology: {1: x}\n"))


def test_unhashable_key_names_file_and_line(tmp_path: Path) -> None:
    _refused(_write(tmp_path / "listkey.yaml", "name: x\n? [a]\n: 1\n"), "listkey.yaml", "line 2")


def test_lone_surrogate_in_a_value_or_a_key_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # YAML's "\ud800" escape reads as a lone surrogate, which no UTF-8 (nor the core's JSON) can carry.
    flow = 'traffic: [{kind: flow, src: "\\ud800", dst: 1, bytes: 1KB}]\n'
    path = _write(tmp_path / "surrogate.yaml", TINY_YAML + flow)
    with pytest.raises(ScenarioError, match=r"^traffic\[0\]\.src: '\\ud800' holds \\ud800, a lone UTF-16 surrogate"):
        load_scenario(path)
    key = _write(tmp_path / "surrogate_key.yaml", 'topology: {"a\\udc00": 1}\n')
    with pytest.raises(ScenarioError, match=r"^topology: the key 'a\\udc00' holds \\udc00"):
        load_scenario(key)
    with pytest.raises(ScenarioError, match=r"^name: '\\udfff' holds"):
        load_scenario({"name": "\udfff"})
    code, _, err = fabricsim_cli(capsys, "run", path)
    assert code == 2
    _one_error_line(err, "traffic[0].src", "lone UTF-16 surrogate")


def test_non_string_key_from_the_api_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"^topology: the key \('a',\) is not a string"):
        load_scenario({"topology": {("a",): 1}})


# --- numbers -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spelled", "message"),
    [(".nan", ".nan is not a number"), (".inf", ".inf is not a finite number"), ("-.inf", "-.inf is not a finite")],
)
def test_non_finite_number_in_a_file_names_the_field(tmp_path: Path, spelled: str, message: str) -> None:
    path = _write(tmp_path / "nan.yaml", f"traffic: [{{kind: permutation, bytes: {spelled}}}]\n")
    with pytest.raises(ScenarioError, match=rf"^traffic\[0\]\.bytes: {message}"):
        load_scenario(path)


def test_non_finite_number_from_overrides_or_a_dict_names_the_field(tiny_scenario: dict[str, Any]) -> None:
    with pytest.raises(ScenarioError, match=r"^traffic\[0\]\.bytes: \.nan is not a number$"):
        load_scenario(tiny_scenario, ["traffic.0.bytes=.nan"])
    with pytest.raises(ScenarioError, match=r"^faults\.loss: \.inf is not a finite number$"):
        load_scenario(tiny_scenario, {"faults.loss": float("inf")})
    tiny_scenario["traffic"][0]["bytes"] = float("nan")
    # Named as the core names fields (`traffic[0].bytes`), not with the index dotted.
    with pytest.raises(ScenarioError, match=r"^traffic\[0\]\.bytes: \.nan is not a number$"):
        load_scenario(tiny_scenario)


def test_to_json_refuses_what_json_cannot_carry() -> None:
    with pytest.raises(ScenarioError, match=r"^x\[0\]: \.nan"):
        to_json({"x": [float("nan")]})
    with pytest.raises(ScenarioError, match=r"^seed: 18446744073709551616 is out of range"):
        to_json({"seed": 2**64})


@pytest.mark.parametrize(
    ("value", "spelled"),
    [(2**64, "18446744073709551616"), (-(2**63) - 1, "-9223372036854775809"), (10**5000, "an integer of 16610 bits")],
    ids=["2^64", "-2^63-1", "10^5000"],
)
def test_integer_beyond_64_bits_names_the_field(tiny_scenario: dict[str, Any], value: int, spelled: str) -> None:
    tiny_scenario["seed"] = value
    with pytest.raises(ScenarioError, match=rf"^seed: {spelled} is out of range"):
        load_scenario(tiny_scenario)


def test_integers_at_the_64_bit_bounds_load(tiny_scenario: dict[str, Any]) -> None:
    tiny_scenario["seed"] = 2**64 - 1
    tiny_scenario["x"] = -(2**63)
    assert load_scenario(tiny_scenario)["seed"] == 2**64 - 1


# --- API argument types --------------------------------------------------------------------------------------------


def test_overrides_as_a_string_is_refused(tiny_scenario: dict[str, Any]) -> None:
    message = "overrides: expected a list of 'key=value' strings, got a string"
    with pytest.raises(ScenarioError) as info:
        load_scenario(tiny_scenario, "seed=3")  # type: ignore[arg-type]
    assert str(info.value) == message
    for api in (fabricsim.run, fabricsim.sweep):
        with pytest.raises(ScenarioError, match=message):
            api(tiny_scenario, overrides="seed=3")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [([3], "expected 'key=value' strings, got 3"), (5, "got int"), ({3: 4}, "a key is a dotted path")],
)
def test_overrides_of_other_types_are_refused(tiny_scenario: dict[str, Any], overrides: Any, fragment: str) -> None:
    with pytest.raises(ScenarioError, match=f"^overrides: .*{fragment}"):
        load_scenario(tiny_scenario, overrides)


@pytest.mark.parametrize("source", [3, None, b"x.yaml", ["x.yaml"]])
def test_source_of_another_type_is_refused(source: Any) -> None:
    with pytest.raises(ScenarioError, match=r"^scenario: expected a YAML file path or a mapping, got "):
        load_scenario(source)


# --- errors PyYAML lets through ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("seed: 2024-02-30\n", "day is out of range"),
        ("seed: !!int abc\n", "invalid literal"),
        ("name: x\nseed: \x01\n", "line 2, column 7: unacceptable character #x0001"),
    ],
)
def test_values_pyyaml_cannot_build_are_one_clean_error(tmp_path: Path, text: str, fragment: str) -> None:
    _refused(_write(tmp_path / "odd.yaml", text), "odd.yaml", fragment)


# --- through the command line: one line, exit 2, nothing written -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "fragment"),
    [
        ("binary.yaml", bytes(range(256)), "not UTF-8 text"),
        ("wide.yaml", TINY_YAML.encode("utf-16"), "UTF-16"),
        ("deep.yaml", "seed: " + "[" * 100_000, "nested deeper than 64 levels"),
        ("laughs.yaml", _billion_laughs(), "more than 1,000,000 values"),
        ("twice.yaml", TINY_YAML + "seed: 2\n", "duplicate key 'seed'"),
        ("nan.yaml", TINY_YAML + "traffic: [{kind: permutation, bytes: .nan}]\n", "traffic[0].bytes: .nan is not"),
        ("big_seed.yaml", TINY_YAML.replace("seed: 1", "seed: 18446744073709551616"), "seed: 18446744073709551616"),
        ("date.yaml", TINY_YAML + "duration: 2024-02-30\n", "day is out of range"),
        # The core names the key as it is, newline included.
        ("newline.yaml", TINY_YAML + '"a\\nb": 1\n', "unknown field"),
    ],
)
def test_hostile_file_is_one_error_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, data: str | bytes, fragment: str
) -> None:
    path = _write(tmp_path / name, data)
    code, _, err = fabricsim_cli(capsys, "run", path)
    assert code == 2
    _one_error_line(err, fragment)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["-s", "traffic.0.bytes=.nan"], ["traffic[0].bytes: .nan is not a number"]),
        (["--seed", str(2**64)], ["seed: 18446744073709551616 is out of range"]),
        (["-s", "seed=18446744073709551616"], ["seed: 18446744073709551616 is out of range"]),
        (["-s", "traffic=[{kind: flow, src: 0, dst: -1, bytes: 1KB}]"], ["traffic", "dst"]),
        (["-s", "x=" + "{a: " * 1000], ["x: cannot parse the value", "nested deeper than 64 levels"]),
    ],
)
def test_hostile_values_on_the_command_line_are_one_error_line(
    capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path, args: list[str], fragments: list[str]
) -> None:
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, *args)
    assert code == 2
    _one_error_line(err, *fragments)
    assert not Path("runs").exists()


@pytest.mark.parametrize(
    ("include", "fragments"),
    [
        ('"a\\0b.yaml"', ["include: scenario file not found: ", "a\\x00b.yaml (included by "]),
        ("x" * 5000 + ".yaml", ["include: scenario file not found: ", "xxx ...[", " characters]... xxx"]),
        ("missing.yaml", ["include: scenario file not found: ", "missing.yaml (included by ", "main.yaml)"]),
    ],
    ids=["NUL", "too-long", "missing"],
)
def test_an_include_that_cannot_be_read_is_named_as_an_include(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, include: str, fragments: list[str]
) -> None:
    path = _write(tmp_path / "main.yaml", f"include: {include}\n")
    code, _, err = fabricsim_cli(capsys, "run", path)
    assert code == 2
    _one_error_line(err, *fragments)


def test_an_error_line_is_bounded_and_cannot_drive_the_terminal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A path quoted in the message holds a tab and an escape sequence that would clear the screen.
    code, _, err = fabricsim_cli(capsys, "run", "a\tb\x1b[2J.yaml")
    assert code == 2
    _one_error_line(err, "scenario file not found: a\\tb\\x1b[2J.yaml")
    assert "\x1b" not in err and "\t" not in err
    code, _, err = fabricsim_cli(capsys, "run", "y" * 5000 + ".yaml")
    assert code == 2
    _one_error_line(err, "error: yyy", "characters]... yyy", "y.yaml: cannot read the file: File name too long")
    assert len(err.strip()) <= cli.MAX_ERROR_CHARS + 40


# --- the output directory ------------------------------------------------------------------------------------------


@pytest.fixture
def core_never_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if the simulation starts: a bad output directory must be found before."""

    def run(*_: Any, **__: Any) -> Any:
        pytest.fail("the simulation ran before the output directory was checked")

    monkeypatch.setattr(_core, "run", run)


def _tree(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*")}


@pytest.mark.usefixtures("core_never_runs")
def test_file_in_the_way_of_the_output_is_refused_before_running(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario_file: Path
) -> None:
    (tmp_path / "taken").write_text("mine")
    before = _tree(tmp_path)
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-o", "taken")
    assert code == 2
    _one_error_line(err, "taken", "not a directory")
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-o", "taken/run")
    assert code == 2
    _one_error_line(err, "taken/run", "Not a directory")
    assert _tree(tmp_path) == before


@pytest.mark.usefixtures("core_never_runs")
def test_name_too_long_is_refused_before_running_leaving_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario_file: Path
) -> None:
    before = _tree(tmp_path)
    output = f"new/deeper/{'x' * 300}"
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-o", output)
    assert code == 2
    _one_error_line(err, output, "File name too long")
    # The parents it created to try are gone again.
    assert _tree(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
@pytest.mark.usefixtures("core_never_runs")
def test_read_only_parent_is_refused_before_running(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario_file: Path
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file, "-o", locked / "a" / "run")
        assert code == 2
        _one_error_line(err, str(locked / "a" / "run"), "Permission denied")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


# --- writing fails partway -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)),
        OSError(errno.EIO, os.strerror(errno.EIO)),
        PermissionError(errno.EACCES, os.strerror(errno.EACCES)),
        # What polars raises when the disk fills under write_parquet.
        pl.exceptions.ComputeError("parquet: underlying IO error: No space left on device (os error 28)"),
    ],
    ids=["ENOSPC", "EDQUOT", "EIO", "EACCES", "polars"],
)
def test_failed_write_exits_4_and_leaves_the_run_marked_incomplete(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tiny_scenario_file: Path,
    failure: Exception,
) -> None:
    real_write = pl.DataFrame.write_parquet
    calls = []

    def failing_write(self: pl.DataFrame, file: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            file.write(b"PAR1 partial")
            raise failure
        real_write(self, file, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", failing_write)
    code, _, err = fabricsim_cli(capsys, "run", tiny_scenario_file)
    assert code == 4
    reason = failure.strerror if isinstance(failure, OSError) else "No space left on device"
    _one_error_line(err, "runs/tiny/", ".parquet: cannot write", reason)
    names = {p.name for p in Path("runs/tiny").iterdir()}
    assert INCOMPLETE_MARKER in names
    assert "summary.json" not in names
    assert not [n for n in names if n.endswith(".tmp")]


def test_failed_write_in_the_api_is_a_write_failed_error(
    monkeypatch: pytest.MonkeyPatch, tiny_scenario: dict[str, Any]
) -> None:
    results = fabricsim.run(tiny_scenario)

    def full_disk(self: pl.DataFrame, file: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full_disk)
    with pytest.raises(WriteFailedError, match=r"flows\.parquet: cannot write: No space left on device") as info:
        results.write("out")
    assert isinstance(info.value, OSError)
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.ENOSPC


# --- stdout closed early -------------------------------------------------------------------------------------------


def _into_a_closed_pipe(args: list[str]) -> subprocess.CompletedProcess[str]:
    """`fabricsim ARGS` with stdout a pipe whose reader has gone: its first write meets a broken pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "fabricsim", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


def test_schema_into_a_closed_pipe_exits_quietly() -> None:
    # The read end is closed before the command starts, so its first write meets a broken pipe.
    proc = _into_a_closed_pipe(["schema"])
    assert proc.returncode in (0, 141), proc.stderr
    assert proc.stderr == ""


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["compare", "{scenario}", "--designs", "", "-o", "{tmp}/out"], ["--designs: '' is not a design"]),
        (["compare", "{scenario}", "--seeds", "1000000000", "-o", "{tmp}/out"], ["--seeds: 1,000,000,000 seeds"]),
        (["examples", "copy", "baseline/link_failure", "{tmp}/file"], ["examples copy: ", "file is not a directory"]),
        (["reproduce", "hpn", "--quick", "--out", "{tmp}/file"], ["--out: ", "file is not a directory"]),
        (["report", "{tmp}/bogus"], ["cannot be read as a sweep directory", "sweep.json has no list of runs"]),
        (["run", "{sweep}", "--ray", "256.0.0.1:1", "-o", "{tmp}/out"], ["--ray: '256.0.0.1:1': ", "not an IP"]),
        (["run", "{sweep}", "--ray", "head", "-o", "{tmp}/out"], ["--ray: 'head': no port"]),
    ],
    ids=["no-design", "a-billion-seeds", "copy-into-a-file", "out-is-a-file", "bogus-sweep", "bad-ip", "no-port"],
)
def test_command_options_that_cannot_be_are_one_error_line_and_write_nothing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    tiny_scenario: dict[str, Any],
    tiny_scenario_file: Path,
    args: list[str],
    fragments: list[str],
) -> None:
    """What the hostile-input probe found on 2026-11-29: each was accepted, hung, or printed an OS error's repr."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "bogus").mkdir()
    (tmp_path / "bogus" / "sweep.json").write_text('{"points": 5}')
    sweep = _write(
        tmp_path / "sweep.yaml",
        yaml.safe_dump({**tiny_scenario, "sweep": {"parameter": "seed", "values": [1, 2]}}),
    )
    filled = [a.format(scenario=tiny_scenario_file, sweep=sweep, tmp=tmp_path) for a in args]
    code, _, err = fabricsim_cli(capsys, *filled)
    assert code == 2
    _one_error_line(err, *fragments)
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "bogus" / "report.html").exists()


def test_an_empty_output_path_is_refused(capsys: pytest.CaptureFixture[str], tiny_scenario_file: Path) -> None:
    # argparse's own refusal (usage, then the error): an empty path would be the current directory.
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", str(tiny_scenario_file), "-o", ""])
    assert exit_info.value.code == 2
    assert "argument -o/--output: an empty path" in capsys.readouterr().err


def test_running_out_of_memory_is_one_error_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tiny_scenario_file: Path
) -> None:
    def exhausted(args: Any) -> int:
        raise MemoryError

    monkeypatch.setattr(cli, "_cmd_topo", exhausted)
    code, _, err = fabricsim_cli(capsys, "topo", tiny_scenario_file)
    assert code == 3
    _one_error_line(err, "out of memory")


def test_an_os_error_is_named_by_its_path_not_its_errno(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tiny_scenario_file: Path
) -> None:
    def unreadable(args: Any) -> int:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/gone/x.yaml")

    monkeypatch.setattr(cli, "_cmd_topo", unreadable)
    code, _, err = fabricsim_cli(capsys, "topo", tiny_scenario_file)
    assert code == 2
    _one_error_line(err, "/gone/x.yaml: No such file or directory")
    assert "Errno" not in err


def test_a_process_address_limit_bounds_the_memory_a_run_may_take(tmp_path: Path) -> None:
    """Under `ulimit -v` the run's budget is what the limit leaves, not the machine's memory: sampling every
    nanosecond over a stalled job's 34 s stops at `memory_limit` (exit 5) instead of dying in an allocation."""
    if sys.platform != "linux" or not Path("/proc/self/limits").exists():
        pytest.skip("the address-space limit is read from /proc (Linux)")
    scenario = _write(
        tmp_path / "stalled.yaml",
        "topology: {kind: clos, tiers: 2, radix: 4, link_rate: 100Gbps}\n"
        "jobs: [{name: j, ranks: 4, phases: [{name: ar, collective: {op: all_reduce, bytes: 64KB}}]}]\n"
        "faults: [{kind: nic_port_down, at: 5us, nic: 0, port: 0}]\n"
        "telemetry: {sample_interval: 10us, hosts: [0], ports: ['t0.p0.0:2']}\n",
    )
    command = f"ulimit -v 4000000; exec {sys.executable} -m fabricsim run {scenario} -o {tmp_path / 'out'}"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)
    assert done.returncode == 5, done.stderr
    assert "Traceback" not in done.stderr
    assert "memory_limit" in done.stderr


def test_topo_refuses_a_scenario_run_would_refuse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_scenario: dict[str, Any]
) -> None:
    """`topo` builds only the topology, but a bad reference elsewhere is still bad input (it printed the topology)."""
    bad = _write(
        tmp_path / "bad.yaml",
        yaml.safe_dump({**tiny_scenario, "telemetry": {"sample_interval": "1us", "ports": ["nic99999:7"]}}),
    )
    code, out, err = fabricsim_cli(capsys, "topo", bad)
    assert code == 2
    _one_error_line(err, "telemetry.ports[0]", "nic99999")
    assert out == ""


# --- the probe's second round (2026-11-29): closed stdout, argparse, --ray, overrides, blame -----------------------

BASE_YAML = (
    "name: base\nduration: 50us\n"
    "topology: {kind: clos, tiers: 2, radix: 4, link_rate: 100Gbps, link_delay: 1us}\n"
    "traffic: [{kind: permutation, bytes: 64KB}]\n"
)
SWEEP_YAML = BASE_YAML + "sweep: {parameter: traffic.0.bytes, values: [1KB, 2KB]}\n"


def _whole_runs(directory: Path) -> int:
    """How many whole run directories `directory` holds (itself, or a sweep's), none marked incomplete."""
    assert not (directory / INCOMPLETE_MARKER).exists()
    runs = [d for d in [directory, *directory.iterdir()] if (d / "summary.json").is_file()]
    assert all(not (d / INCOMPLETE_MARKER).exists() for d in runs)
    return len(runs)


@pytest.mark.parametrize(("scenario_text", "runs"), [(BASE_YAML, 1), (SWEEP_YAML, 2)], ids=["run", "sweep"])
def test_a_run_into_a_closed_pipe_is_written_whole_and_exits_quietly(
    tmp_path: Path, scenario_text: str, runs: int
) -> None:
    # rich exited 1 at its first write into the broken pipe; a sweep stopped between runs.
    scenario_file = _write(tmp_path / "s.yaml", scenario_text)
    proc = _into_a_closed_pipe(["run", str(scenario_file), "-o", str(tmp_path / "out")])
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr
    assert _whole_runs(tmp_path / "out") == runs


@pytest.mark.parametrize("command", [["schema"], ["run", "{scenario}", "-o", "{out}"]], ids=["schema", "run"])
def test_a_closed_stdout_is_no_traceback(tmp_path: Path, command: list[str]) -> None:
    # `>&-`: Python starts with sys.stdout None, and main's flush raised AttributeError.
    scenario_file = _write(tmp_path / "s.yaml", BASE_YAML)
    args = [a.format(scenario=scenario_file, out=tmp_path / "out") for a in command]
    shell = f"exec {sys.executable} -m fabricsim {' '.join(args)} >&-"
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    if command[0] == "run":
        assert _whole_runs(tmp_path / "out") == 1


def test_an_argument_error_is_one_line_and_help_still_shows_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "--seed", "abc"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["fabricsim run: error: argument --seed: invalid int value: 'abc'"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bogus"])
    assert exit_info.value.code == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: fabricsim run")


def _closed_port() -> int:
    """A local TCP port nothing listens on (it was just free)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("command", ["run", "compare"])
def test_a_ray_address_nobody_answers_at_is_refused_before_anything_is_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    # Ray retried for minutes, having already made the output directory.
    address = f"127.0.0.1:{_closed_port()}"
    scenario_file = _write(tmp_path / "s.yaml", SWEEP_YAML if command == "run" else BASE_YAML)
    extra = ["--designs", "roce"] if command == "compare" else []
    code, _, err = fabricsim_cli(capsys, command, scenario_file, *extra, "--ray", address, "-o", tmp_path / "out")
    assert code == 2
    _one_error_line(err, f"--ray: cannot reach {address} (")
    assert not (tmp_path / "out").exists()


class _Server:
    """A local TCP server that greets each connection with `greeting` (bytes), says nothing (None), or closes it at
    once (empty bytes)."""

    def __init__(self, greeting: bytes | None) -> None:
        import socket
        import threading

        self.greeting = greeting
        self.listening = socket.socket()
        self.listening.bind(("127.0.0.1", 0))
        self.listening.listen()
        self.address = f"127.0.0.1:{self.listening.getsockname()[1]}"
        self.accepted: list[Any] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listening.accept()
            except OSError:
                return
            self.accepted.append(conn)
            if self.greeting == b"":
                conn.close()
            elif self.greeting is not None:
                conn.sendall(self.greeting)

    def __enter__(self) -> _Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.listening.close()
        for conn in self.accepted:
            conn.close()


# A gRPC server's first frame: HTTP/2 SETTINGS (type 0x4) on stream 0, here with one setting (6 bytes).
_SETTINGS_FRAME = bytes([0, 0, 6, 0x4, 0, 0, 0, 0, 0]) + bytes([0, 3, 0, 0, 0, 100])


def test_a_ray_address_that_answers_in_grpc_and_the_special_forms_pass_the_check() -> None:
    from fabricsim.batch import check_backend

    with _Server(_SETTINGS_FRAME) as grpc:
        check_backend(1, grpc.address)
        check_backend(1, f"ray://{grpc.address}")
    # `auto` and `local` name no address to try.
    check_backend(1, "auto")
    check_backend(1, "local")


@pytest.mark.parametrize(
    ("greeting", "said"),
    [
        (b"SSH-2.0-OpenSSH_9.2\r\n", "it sent b'SSH-2.0-OpenSSH_9.2\\r\\n'"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "it sent b'HTTP/1.1 400 Bad Request\\r"),
        (bytes([0, 0, 0, 0x1, 0, 0, 0, 0, 1]), "it sent b'\\x00\\x00\\x00\\x01"),
        # A fourth byte of 4 is not enough: a SETTINGS frame is on stream 0.
        (bytes([0, 0, 0, 0x4, 0, 0, 0, 0, 1]), "it sent b'\\x00\\x00\\x00\\x04\\x00\\x00\\x00\\x00\\x01'"),
        (b"", "it closed the connection"),
    ],
    ids=["ssh", "http1", "http2-headers-first", "settings-off-stream-0", "closes"],
)
@pytest.mark.parametrize("command", ["run", "compare"])
def test_a_ray_address_that_answers_in_another_protocol_is_refused_before_anything_is_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, greeting: bytes, said: str
) -> None:
    # Ray took it for a cluster and retried for minutes, logging, having already made the output directories.
    scenario_file = _write(tmp_path / "s.yaml", SWEEP_YAML if command == "run" else BASE_YAML)
    extra = ["--designs", "roce"] if command == "compare" else []
    with _Server(greeting) as other:
        code, _, err = fabricsim_cli(
            capsys, command, scenario_file, *extra, "--ray", other.address, "-o", tmp_path / "out"
        )
    assert code == 2
    _one_error_line(err, f"--ray: {other.address} answers, but not as a Ray cluster: {said}")
    assert not (tmp_path / "out").exists()


def test_a_ray_address_that_accepts_and_says_nothing_is_refused() -> None:
    from fabricsim.batch import _not_ray

    with _Server(None) as silent:
        assert _not_ray(silent.address, timeout=0.2) == (
            f"{silent.address} answers, but not as a Ray cluster: it sent nothing back within 0.2 s, where a Ray "
            "head (gRPC) opens with HTTP/2 SETTINGS"
        )


def test_a_sweep_on_ray_where_ray_is_not_installed_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sweep's index was written before Ray was found missing.
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else find_spec(name, *a))
    scenario_file = _write(tmp_path / "s.yaml", SWEEP_YAML)
    code, _, err = fabricsim_cli(capsys, "run", scenario_file, "--ray", "local", "-o", tmp_path / "out")
    assert code == 2
    _one_error_line(err, "--ray: local: Ray is not installed")
    assert not (tmp_path / "out").exists()


def test_a_ray_clusters_own_address_passes_the_check() -> None:
    try:
        import ray
    except ImportError:
        pytest.skip("Ray is not installed: `pip install fabricsim[ray]` (CI installs it) to ask a real Ray head")
    from fabricsim.batch import check_backend

    ray.init(include_dashboard=False, log_to_driver=False, logging_level="error")
    try:
        check_backend(1, ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("jobs.0.ranks=4", ["-s jobs.0.ranks=4: the scenario has no jobs list to index", "-s 'jobs=[...]'"]),
        ("jobs[0].ranks=1", ["-s jobs[0].ranks=1: the scenario has no jobs list to index"]),
        ("traffic[-1].bytes=1KB", ["-s traffic[-1].bytes=1KB: ", "index it with a number >= 0"]),
        ("traffic.-1.bytes=1KB", ["-s traffic.-1.bytes=1KB: ", "index it with a number >= 0"]),
        ("include=x.yaml", ["-s include=x.yaml: ", "include is read from the scenario file only"]),
        ("topology.radix=" + "9" * 5000, ["-s 'topology.radix=999", "the value is too large"]),
    ],
    ids=["no-list", "no-list-brackets", "negative-index-brackets", "negative-index", "include", "5000-digits"],
)
def test_an_override_that_cannot_apply_names_itself(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, override: str, fragments: list[str]
) -> None:
    code, out, err = fabricsim_cli(capsys, "topo", _write(tmp_path / "s.yaml", BASE_YAML), "-s", override)
    assert code == 2
    _one_error_line(err, *fragments)
    assert "Exceeds the limit" not in err
    assert out == ""


@pytest.mark.parametrize(
    ("damage", "fragments"),
    [
        ({"summary.json": "{bad"}, ["summary.json is not valid JSON (", "line 1, column 2"]),
        ({"flows.parquet": "garbage"}, ["flows.parquet: not a Parquet file fabricsim can read"]),
    ],
    ids=["json", "parquet"],
)
def test_a_corrupt_results_file_is_named_without_exception_classes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, damage: dict[str, str], fragments: list[str]
) -> None:
    scenario_file = _write(tmp_path / "s.yaml", BASE_YAML)
    assert fabricsim_cli(capsys, "run", scenario_file, "-o", tmp_path / "out")[0] == 0
    for name, text in damage.items():
        _write(tmp_path / "out" / name, text)
    code, _, err = fabricsim_cli(capsys, "report", tmp_path / "out")
    assert code == 2
    _one_error_line(err, "cannot be read as a run directory", *fragments)
    assert "Error" not in err


@pytest.mark.parametrize(
    ("args", "fragments", "absent"),
    [
        (["run", "{long}"], ["error: name: 'xxx", "too long to name the output directory"], "File name too long"),
        (["topo", "{include_dir}"], ["include: scenario path is a directory", "included by"], None),
        (["topo", "{include_binary}"], ["include: ", "binary: not UTF-8 text", "included by"], None),
        (["reproduce", "mrc", "--out", "{tmp}/file/sub"], ["--out: ", "file/sub: cannot create"], None),
        (["examples", "copy", "baseline/link_failure", "{tmp}/file/sub"], ["examples copy: DIRECTORY: "], None),
        (["compare", "{base}", "-s", "topology.radix=x", "--designs", "roce"], ["topology.radix: "], "--designs"),
    ],
    ids=["long-name", "include-dir", "include-binary", "reproduce-out", "examples-copy-into", "compare-bad-field"],
)
def test_an_error_blames_what_the_user_wrote(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], fragments: list[str], absent: str | None
) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    _write(tmp_path / "binary", b"\x7fELF\0\0\0")
    files = {
        "base": _write(tmp_path / "base.yaml", BASE_YAML),
        "long": _write(tmp_path / "long.yaml", BASE_YAML.replace("name: base", "name: " + "x" * 300)),
        "include_dir": _write(tmp_path / "inc_dir.yaml", f"include: {tmp_path / 'dir'}\n{BASE_YAML}"),
        "include_binary": _write(tmp_path / "inc_bin.yaml", f"include: {tmp_path / 'binary'}\n{BASE_YAML}"),
    }
    code, _, err = fabricsim_cli(capsys, *[a.format(tmp=tmp_path, **files) for a in args])
    assert code == 2
    _one_error_line(err, *fragments)
    if absent is not None:
        assert absent not in err
    assert not (tmp_path / "runs").exists()


# --- the probe's third round (2026-11-29): input that is well formed but impossible or meaningless -----------------

EXPLICIT_YAML = (
    "name: explicit\n"
    "topology:\n"
    "  kind: explicit\n"
    "  nodes: [{name: tor, kind: switch}, {name: spine, kind: switch, tier: 1},\n"
    "          {name: a, kind: nic}, {name: b, kind: nic}]\n"
    "  links: [{a: a, b: tor, rate: 100Gbps}, {a: b, b: tor, rate: 100Gbps}, {a: tor, b: spine, rate: 100Gbps}]\n"
    "traffic: [{kind: flow, src: a, dst: b, bytes: 64KB}]\n"
)


@pytest.mark.parametrize(
    ("text", "args", "fragment"),
    [
        (EXPLICIT_YAML, ["-s", "topology.nodes.1.tier=99"], "topology.nodes[1].tier: 99: a switch is of tier 0 (ToR)"),
        (EXPLICIT_YAML, ["-s", "topology.nodes.1.tier=2"], "topology.nodes[1].tier: 2, but no switch is of tier 1"),
        (
            EXPLICIT_YAML,
            ["-s", "topology.nodes.0.tier=1", "-s", "topology.nodes.1.tier=0"],
            "topology.links[0]: NIC 'a' is linked to 'tor' of tier 1",
        ),
        (
            BASE_YAML,
            ["-s", "faults=[{kind: link_down, at: 50us, port: 't0.p0.0:2'}]"],
            "faults[0].at: 50us: not before",
        ),
        (BASE_YAML, ["-s", "faults=[{kind: link_flap, at: 1us, port: 't0.p0.0:2', duration: 0ns}]"], "duration: 0ns"),
        (BASE_YAML, ["-s", "faults=[{kind: random_links_down, at: 1us, count: 0}]"], "faults[0].count: 0"),
        (
            BASE_YAML,
            [
                "-s",
                "faults=[{kind: switch_down, at: 1us, switch: t1.p0.0}, {kind: switch_down, at: 2us, switch: t1.p0.0}]",
            ],
            "faults[1]: switch_down at 2us: switch 't1.p0.0' is down already then",
        ),
        (BASE_YAML, ["-s", "traffic=[{kind: incast, receiver: 0, senders: [], bytes: 1KB}]"], "traffic[0].senders: []"),
        (
            BASE_YAML,
            ["-s", "traffic=[{kind: racks_to_racks, src_racks: [0], dst_racks: [0], bytes: 1KB}]"],
            "themselves",
        ),
        (BASE_YAML, ["-s", "jobs=[{name: '', ranks: 2, phases: [{name: c, compute: 1us}]}]"], "jobs[0].name: is empty"),
        (BASE_YAML, ["-s", "telemetry.ports=['t0.p0.0:1']"], "telemetry.ports: 1 port(s) listed, but"),
        (BASE_YAML, ["-s", "telemetry.pcap={ports: []}"], "telemetry.pcap.ports: []"),
        (BASE_YAML, ["-s", "topology.link_rate=1bps"], "topology.link_rate: 1bps: below 1Mbps"),
        (BASE_YAML, ["-s", "traffic.0.rate=1bps"], "traffic[0].rate: 1bps: below 1Kbps"),
        (
            BASE_YAML,
            ["-s", "telemetry={sample_interval: 1ms, hosts: [0]}"],
            "telemetry.sample_interval: 1ms: not shorter than duration 50us",
        ),
        (
            BASE_YAML,
            ["-s", "telemetry.imbalance={groups: [{tier: 0, facing: up}, {tier: 0, facing: up}]}"],
            "telemetry.imbalance.groups[1]: {tier: 0, facing: up}: listed already",
        ),
        (BASE_YAML, ["-s", "traffic=[]"], "traffic: [], and no jobs: a run would send nothing"),
        (BASE_YAML, ["-s", "topology.link_delay=1s"], "topology.link_delay: 1s: longer than 1ms"),
        (BASE_YAML + "sweep: {parameter: seed, values: [1, 2]}\n", ["-s", "traffic=[]"], "a run would send nothing"),
        (BASE_YAML + "sweep: {parameter: traffic.0.bytes, values: [1KB, 1000B]}\n", [], "the same scenario as point 1"),
    ],
    ids=[
        "tier-99",
        "tier-gap",
        "nic-above-tier-0",
        "fault-after-duration",
        "flap-of-0ns",
        "no-link-down",
        "switch-down-twice",
        "incast-of-none",
        "rack-to-itself",
        "unnamed-job",
        "ports-unsampled",
        "pcap-of-nothing",
        "link-of-1bps",
        "flow-paced-at-1bps",
        "sampled-after-the-end",
        "imbalance-group-twice",
        "nothing-to-send",
        "link-of-1s",
        "sweep-of-nothing-to-send",
        "sweep-point-twice",
    ],
)
def test_impossible_or_meaningless_input_is_one_error_line_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, args: list[str], fragment: str
) -> None:
    code, _, err = fabricsim_cli(capsys, "run", _write(tmp_path / "s.yaml", text), "-o", tmp_path / "out", *args)
    assert code == 2
    _one_error_line(err, fragment)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "args"),
    [
        (EXPLICIT_YAML, ["-s", "topology.nodes.0.tier=0"]),
        (BASE_YAML, ["-s", "faults=[{kind: link_down, at: 49us, port: 't0.p0.0:2'}]"]),
        (
            BASE_YAML,
            [
                "-s",
                "faults=[{kind: link_flap, at: 20us, port: 't0.p0.0:2', duration: 10us},"
                " {kind: link_flap, at: 10us, port: 't0.p0.0:2', duration: 10us}]",
            ],
        ),
        (BASE_YAML, ["-s", "jobs=[{name: j, ranks: 1, phases: [{name: c, collective: {op: all_reduce, bytes: 0B}}]}]"]),
    ],
    ids=["explicit-two-tiers", "fault-just-before-the-end", "back-to-back-flaps", "one-rank-job-of-0B"],
)
def test_edge_cases_that_are_valid_still_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, args: list[str]
) -> None:
    code, _, err = fabricsim_cli(capsys, "run", _write(tmp_path / "s.yaml", text), "-o", tmp_path / "out", *args)
    assert code == 0, err
    assert (tmp_path / "out" / "summary.json").is_file()


def test_a_file_that_sends_nothing_is_a_topology_to_topo_not_a_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A topology-only file (scenarios/topologies/) is read by `topo`; `run` would have "completed" sending nothing."""
    path = _write(tmp_path / "fabric.yaml", TINY_YAML)
    code, out, err = fabricsim_cli(capsys, "topo", path)
    assert code == 0, err
    assert out
    code, _, err = fabricsim_cli(capsys, "run", path, "-o", tmp_path / "out")
    assert code == 2
    _one_error_line(err, "traffic: [], and no jobs: a run would send nothing")
    assert not (tmp_path / "out").exists()
