"""Scenario files: YAML loading, includes and `-s dotted.key=value` overrides.

The schema itself belongs to the core (`fabricsim._core.resolve` validates and
fills defaults); this module only assembles the dict that is handed to it:

1. a file is read as YAML; its `include:` (a path or a list of paths, relative
   to the including file) is loaded first, in order, and the file's own keys
   are merged on top (mappings merge key by key, everything else is replaced);
2. overrides are applied last, each a dotted path into the merged dict, with
   integer segments indexing lists (`traffic.0.bytes=1MB`, or
   `traffic[0].bytes=1MB` as errors write it).

A scenario with a `sweep` section stands for several runs; `fabricsim.sweep`
expands it, and a single run refuses it.

Whatever the input, a bad one is a `ScenarioError` naming the file or field,
never another exception. A scenario file is UTF-8 text (a UTF-8 byte-order
mark is allowed) of at most `MAX_FILE_BYTES`, without duplicate keys. A
scenario, from a file, a dict or overrides, nests at most `MAX_DEPTH`
levels, holds at most `MAX_VALUES` values once its YAML aliases are expanded,
has string keys, finite numbers and integers that fit in 64 bits: what JSON
carries to the core as it is.
"""

from __future__ import annotations

import codecs
import copy
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ._core import ScenarioError
from .flowlists import expand_traffic_files

__all__ = [
    "builtin_scenario",
    "check_tree",
    "deep_merge",
    "fault_window",
    "is_sweep",
    "load_scenario",
    "parse_override",
    "path_safe",
    "seconds",
    "set_dotted",
    "to_json",
    "top_key",
]

# Written into a run directory's scenario.json so a result names the code that
# made it; dropped again on input so that file can be run as a scenario.
VERSION_KEY = "fabricsim_version"
SWEEP_KEY = "sweep"
INCLUDE_KEY = "include"

ScenarioSource = str | Path | Mapping[str, Any]
Overrides = Iterable[str] | Mapping[str, Any] | None

# Limits of what a scenario may be: far beyond any real one (the largest
# shipped is a few KiB, nested 6 levels), and low enough that reading,
# merging and JSON encoding stay fast and never exhaust the stack or memory.
MAX_FILE_BYTES = 16 * 2**20
MAX_DEPTH = 64
MAX_VALUES = 1_000_000
# What serde reads as an integer: i64 and u64; JSON would carry more digits as a float.
INT_RANGE = (-(2**63), 2**64 - 1)


def builtin_scenario(name: str) -> Path:
    """Path of a scenario shipped with the package (`default`, `bench`)."""
    path = Path(str(resources.files("fabricsim").joinpath("builtin", f"{name}.yaml")))
    if not path.is_file():
        raise FileNotFoundError(f"no built-in scenario named {name!r}")
    return path


def example_scenarios() -> dict[str, Path]:
    """The scenario files shipped in the package (`fabricsim/scenarios/`), by name: `mrc/fig16_ecmp`.

    Fragments (files under a `fragments/` folder, included by others) are
    not scenarios of their own and are left out.
    """
    root = Path(str(resources.files("fabricsim").joinpath("scenarios")))
    found = {}
    for path in sorted(root.rglob("*.yaml")):
        relative = path.relative_to(root)
        if "fragments" in relative.parts:
            continue
        found[relative.with_suffix("").as_posix()] = path
    return found


def example_description(path: Path) -> str:
    """The first sentence of a scenario file's leading comment, or ''."""
    words: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.lstrip("#").strip() if line.startswith("#") else ""
        if not text:
            if words or not line.startswith("#"):
                break
            continue
        words.append(text)
    paragraph = " ".join(words)
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


def is_sweep(scenario: Mapping[str, Any]) -> bool:
    """Whether a loaded scenario has a `sweep` section (a resolved scenario's `sweep: null` is none)."""
    return scenario.get(SWEEP_KEY) is not None


def load_scenario(source: ScenarioSource, overrides: Overrides = None) -> dict[str, Any]:
    """Loads a scenario from a YAML file (or takes a dict): includes, overrides, then traffic files.

    `overrides` is either a list of `dotted.key=value` strings, whose values are
    parsed as YAML scalars (`seed=3`, `topology.link_rate=400Gbps`), or a
    mapping of dotted keys to already-typed values. Whatever is wrong with
    them raises `ScenarioError` (a missing file, `FileNotFoundError`).
    """
    if isinstance(source, Mapping):
        given = dict(source)
        # Checked before anything recursive (deepcopy, merging) walks it.
        _check_shape(given)
        base_dir = Path.cwd()
        scenario = _expand_includes(copy.deepcopy(given), base_dir, ())
    elif isinstance(source, str | Path):
        base_dir = Path(source).parent
        scenario = _load_file(Path(source), ())
    else:
        raise ScenarioError(f"scenario: expected a YAML file path or a mapping, got {type(source).__name__}")
    scenario.pop(VERSION_KEY, None)
    for key, value, given in _override_items(overrides):
        # An override is named as it was given (`-s jobs.0.ranks=4`), so that the message points at it.
        if top_key(key) == INCLUDE_KEY:
            raise ScenarioError(
                f"{given}: an include is read from the scenario file only; add it to the file's include list"
            )
        try:
            _set_dotted(scenario, key, value)
        except _PathError as exc:
            raise ScenarioError(f"{given}: {exc.reason}") from None
    check_tree(scenario)
    # Traffic read from other tools' files (flowlists.py), once its entries are final.
    scenario = expand_traffic_files(scenario, base_dir)
    check_tree(scenario)
    return scenario


def parse_override(text: str) -> tuple[str, Any]:
    """Splits `dotted.key=value` and parses the value as a YAML scalar."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(f"-s {_shorten(text)}: an override is written dotted.key=value, e.g. -s topology.radix=8")
    try:
        value = yaml.load(raw, Loader=_ScenarioLoader) if raw.strip() else None
    except ValueError as exc:
        if "Exceeds the limit" not in str(exc):
            raise ScenarioError(
                f"{_one_line(key)}: cannot parse the value {_shorten(raw)}: {_yaml_problem(exc, raw)}"
            ) from None
        # Python's own limit on integer digits (4300), far past the 64 bits a scenario's integer may hold.
        raise ScenarioError(
            f"-s {_shorten(text)}: the value is too large ({len(raw.strip()):,} characters): "
            "an integer lies within -2^63..2^64-1"
        ) from None
    except Exception as exc:  # PyYAML raises more than YAMLError on odd values, see _parse_yaml
        raise ScenarioError(
            f"{_one_line(key)}: cannot parse the value {_shorten(raw)}: {_yaml_problem(exc, raw)}"
        ) from None
    return key, value


def check_tree(scenario: Any) -> None:
    """Refuses a scenario (or part of one) that JSON would not carry to the core as it is; names the field.

    It must not contain itself, nest deeper than `MAX_DEPTH` levels or hold
    more than `MAX_VALUES` values once shared parts are expanded; its keys
    must be strings, its numbers finite and its integers fit in 64 bits.
    """
    _check_shape(scenario)
    _check_values(scenario)


def set_dotted(scenario: dict[str, Any], key: str, value: Any) -> None:
    """Sets `scenario[a][b][0][c] = value` for the key `a.b.0.c` (or `a.b[0].c`), creating missing mappings."""
    try:
        _set_dotted(scenario, key, value)
    except _PathError as exc:
        raise ScenarioError(f"{exc.path}: {exc.reason}") from None


class _PathError(Exception):
    """Why a dotted key cannot be set, and the part of it (`traffic[3]`) where it failed."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


# A list index as a key segment: a number, or a negative one refused with a reason.
_INDEX = re.compile(r"-?\d+")


def _set_dotted(scenario: dict[str, Any], key: str, value: Any) -> None:
    # Errors name list items `traffic[0].bytes`; the same form is accepted (a negative index too, to refuse it).
    parts = re.sub(r"\[(-?\d+)\]", r".\1", key).split(".")
    if any(not p for p in parts):
        raise _PathError(_one_line(key), "empty segment in the override key")
    node: Any = scenario
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        here = _dotted(parts[: depth + 1])
        if isinstance(node, list):
            if not part.isdigit():
                raise _PathError(here, f"{_dotted(parts[:depth])} is a list, index it with a number >= 0")
            index = int(part)
            if index >= len(node):
                raise _PathError(here, f"index {index} is out of range, the list has {len(node)} items")
            if last:
                node[index] = value
            else:
                node = node[index]
        elif isinstance(node, dict):
            if last:
                node[part] = value
                continue
            if _INDEX.fullmatch(parts[depth + 1]) and not isinstance(node.get(part), list):
                # A new mapping keyed "0" would reach the core as a mapping where it expects a list.
                raise _PathError(
                    here, f"the scenario has no {here} list to index (write the whole list, e.g. -s '{here}=[...]')"
                )
            node = node.setdefault(part, {})
        else:
            parent = _dotted(parts[:depth])
            raise _PathError(here, f"{parent} is {node!r}, not a mapping or a list")


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Merges `top` over `base`: mappings merge key by key, anything else in `top` replaces."""
    merged = copy.deepcopy(dict(base))
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


_TIME = re.compile(r"^\s*([0-9._]+(?:[eE][-+]?[0-9]+)?)\s*(ps|ns|us|µs|ms|s)\s*$")
_SECONDS = {"ps": 1e-12, "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def seconds(text: Any) -> float:
    """A scenario's time (`20us`, `1.5ms`, `2s`) in seconds."""
    match = _TIME.match(str(text))
    if match is None:
        raise ScenarioError(f"{text!r} is not a time such as 20us")
    return float(match[1].replace("_", "")) * _SECONDS[match[2]]


def fault_window(fault: Mapping[str, Any]) -> tuple[float, float | None]:
    """When a resolved scenario's fault begins and, if it says, ends (`until`, or `at` plus `duration`), in seconds.

    `random_flaps` has no `at`: its flaps fall anywhere from the start.
    """
    start = seconds(fault["at"]) if "at" in fault else 0.0
    if "until" in fault:
        return start, seconds(fault["until"])
    if "duration" in fault and "at" in fault:
        return start, start + seconds(fault["duration"])
    return start, None


def path_safe(name: str) -> str:
    """`name` as a file or directory name: runs of other characters than letters, digits, `.`, `_`, `-` become `_`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"


def to_json(scenario: Mapping[str, Any]) -> str:
    """The JSON text handed to the core. YAML-only types (dates) become strings the core then rejects by field.

    The scenario is checked first (`check_tree`): a dict changed after
    loading, e.g. by `--seed`, gets the same errors as one loaded.
    """
    check_tree(scenario)
    return json.dumps(scenario, default=str, allow_nan=False)


def top_key(dotted: str) -> str:
    """The top-level key a dotted path (`jobs.0.ranks`, `jobs[0].ranks`) sets."""
    return re.split(r"[.\[]", dotted, maxsplit=1)[0].strip()


def _load_file(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    resolved = _resolve(path)
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise ScenarioError(f"include: include cycle {cycle}")
    try:
        data = _parse_yaml(_decode(_read_bounded(path), path), path)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ScenarioError(f"{path}: a scenario is a mapping of keys, found {type(data).__name__}")
    except (ScenarioError, IsADirectoryError) as exc:
        if not chain:
            raise
        # An included file: the message says so, since the user may never have named the path on a command line.
        raise type(exc)(f"include: {exc} (included by {chain[-1]})") from None
    # Aliases can nest and multiply what the file spells out: checked before merging expands them.
    _check_shape(data, str(path))
    return _expand_includes(data, path.parent, (*chain, resolved))


def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL in the name, ...
        raise ScenarioError(f"{path}: cannot resolve the path: {exc}") from None


def _read_bounded(path: Path) -> bytes:
    """The file's bytes; refuses one larger than MAX_FILE_BYTES without reading further (`/dev/zero`)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise FileNotFoundError(f"scenario file not found: {path}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"scenario path is a directory, not a file: {path}") from None
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"{path}: cannot read the file: {getattr(exc, 'strerror', None) or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB, the limit of a scenario file")
    return data


# Byte-order marks of what an editor may save instead of UTF-8; UTF-32's
# little-endian mark starts like UTF-16's, so it is tried first.
_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _decode(data: bytes, path: Path) -> str:
    """The file as text; refuses what is not UTF-8, saying when it looks like UTF-16 or a binary file."""
    for bom, encoding in _OTHER_BOMS:
        if data.startswith(bom):
            raise ScenarioError(
                f"{path}: not UTF-8 text: it is {encoding}, it starts with a {encoding} byte-order mark"
            )
    if b"\0" in data:
        looks = "it looks like UTF-16 (a NUL in every other byte)" if _looks_like_utf16(data) else "a binary file?"
        raise ScenarioError(f"{path}: not UTF-8 text: it holds NUL bytes, {looks}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ScenarioError(f"{path}: not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line}") from None


def _looks_like_utf16(data: bytes) -> bool:
    # Mostly-ASCII UTF-16 has a NUL in every other byte: the odd ones in
    # little-endian order, the even ones in big-endian.
    sample = data[:4096]
    even, odd = sample[0::2], sample[1::2]
    return (odd.count(0) > len(odd) // 2 and 0 not in even) or (even.count(0) > len(even) // 2 and 0 not in odd)


def _parse_yaml(text: str, path: Path) -> Any:
    try:
        _prescan(text)
        return yaml.load(text, Loader=_ScenarioLoader)
    except _RefusedYAML as exc:
        raise ScenarioError(f"{path}: {_yaml_problem(exc, text)}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: invalid YAML: {_yaml_problem(exc, text)}") from None
    except Exception as exc:  # PyYAML lets some bad values through as other errors: `2024-02-30`, `!!int x`
        raise ScenarioError(f"{path}: cannot read the YAML: {_yaml_problem(exc, text)}") from None


class _RefusedYAML(yaml.MarkedYAMLError):
    """Valid YAML that is no scenario: a duplicate key, too deep a nesting."""


def _prescan(text: str) -> None:
    """Refuses too deep a nesting or too many values from libyaml's events, before the pure-Python loader runs.

    The loader is about twenty times slower: a hostile 16 MiB file of a
    million values took it 17 s to refuse, the C events take under one. A
    file libyaml cannot read is left to the loader, which says why.
    """
    if not yaml.__with_libyaml__:
        return
    depth = values = 0
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _RefusedYAML(problem=f"nested deeper than {MAX_DEPTH} levels", problem_mark=event.start_mark)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            if isinstance(event, yaml.NodeEvent):
                values += 1
                if values > MAX_VALUES:
                    problem = f"more than {MAX_VALUES:,} values, the limit of a scenario"
                    raise _RefusedYAML(problem=problem, problem_mark=event.start_mark)
    except _RefusedYAML:
        raise
    except yaml.YAMLError:
        return


class _ScenarioLoader(yaml.SafeLoader):
    """The safe loader, refusing duplicate keys, nesting deeper than MAX_DEPTH and more than MAX_VALUES nodes.

    All three are refused while it composes, before anything is built:
    composing recurses once per level, so the depth is counted before each
    level is entered (a file of 100,000 `[` stops at the 65th), and a file
    of millions of values stops at the limit rather than after minutes of
    parsing. Merge keys (`<<: *base`) still merge, their keys overridden by
    the mapping's own.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self._nodes += 1
        if self._nodes > MAX_VALUES:
            mark = self.peek_event().start_mark
            raise _RefusedYAML(problem=f"more than {MAX_VALUES:,} values, the limit of a scenario", problem_mark=mark)
        return super().compose_node(parent, index)

    def compose_sequence_node(self, anchor: str | None) -> yaml.SequenceNode:
        self._enter()
        try:
            return super().compose_sequence_node(anchor)
        finally:
            self._depth -= 1

    def compose_mapping_node(self, anchor: str | None) -> yaml.MappingNode:
        self._enter()
        try:
            node = super().compose_mapping_node(anchor)
        finally:
            self._depth -= 1
        _refuse_duplicate_keys(node)
        return node

    def _enter(self) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise _RefusedYAML(problem=f"nested deeper than {MAX_DEPTH} levels", problem_mark=mark)


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _refuse_duplicate_keys(node: yaml.MappingNode) -> None:
    first: dict[tuple[str, str], yaml.Node] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE_TAG:
            continue
        seen = first.setdefault((key.tag, key.value), key)
        if seen is not key:
            problem = f"duplicate key {_shorten(key.value)} (first on line {seen.start_mark.line + 1})"
            raise _RefusedYAML(problem=problem, problem_mark=key.start_mark)


def _override_items(overrides: Overrides) -> list[tuple[str, Any, str]]:
    """The (dotted key, value, how errors name it) of `overrides`; refuses a string (which would iterate its
    characters). A string override is named as given (`-s traffic.0.bytes=1MB`), a mapping's by its key."""
    if overrides is None:
        return []
    if isinstance(overrides, str | bytes):
        raise ScenarioError("overrides: expected a list of 'key=value' strings, got a string")
    if isinstance(overrides, Mapping):
        items = [(key, value, _one_line(str(key))) for key, value in overrides.items()]
    elif isinstance(overrides, Iterable):
        texts = list(overrides)
        for text in texts:
            if not isinstance(text, str):
                raise ScenarioError(f"overrides: expected 'key=value' strings, got {_shorten(text)}")
        items = [(*parse_override(text), f"-s {_one_line(text)}") for text in texts]
    else:
        raise ScenarioError(f"overrides: expected a list of 'key=value' strings, got {type(overrides).__name__}")
    for key, _, _ in items:
        if not isinstance(key, str):
            raise ScenarioError(f"overrides: a key is a dotted path such as topology.radix, got {_shorten(key)}")
    return items


@dataclass
class _Level:
    """A container being walked by `_check_shape`, and what is known of it so far."""

    node: Any
    key: Any
    children: Iterator[tuple[Any, Any]]
    values: int = 1
    levels: int = 1

    def add(self, values: int, levels: int) -> None:
        self.values += values
        self.levels = max(self.levels, levels + 1)


def _check_shape(root: Any, where: str | None = None) -> None:
    """Refuses a tree that contains itself, nests deeper than MAX_DEPTH, or holds more than MAX_VALUES.

    YAML aliases make one object appear in several places, so a small file
    can stand for a huge tree ("billion laughs"): each container is walked
    once, its expanded size and depth remembered by id, and the walk stops
    as soon as the count passes the limit. No recursion, so no depth blows
    the stack. `where` names the file the tree came from.
    """
    if not _is_container(root):
        return
    walked: dict[int, tuple[int, int]] = {}
    stack = [_Level(root, None, _children(root))]
    on_stack = {id(root)}
    counted = 1
    while stack:
        top = stack[-1]
        step = next(top.children, None)
        if step is None:
            stack.pop()
            on_stack.discard(id(top.node))
            walked[id(top.node)] = (top.values, top.levels)
            if stack:
                stack[-1].add(top.values, top.levels)
            continue
        key, child = step
        if not _is_container(child):
            top.add(1, 0)
            counted += 1
        elif id(child) in on_stack:
            raise ScenarioError(_located(where, stack, key, "contains itself (a recursive alias)"))
        elif id(child) in walked:
            values, levels = walked[id(child)]
            if len(stack) + levels > MAX_DEPTH:
                raise ScenarioError(_located(where, stack, key, f"nested deeper than {MAX_DEPTH} levels"))
            top.add(values, levels)
            counted += values
        elif len(stack) == MAX_DEPTH:
            raise ScenarioError(_located(where, stack, key, f"nested deeper than {MAX_DEPTH} levels"))
        else:
            stack.append(_Level(child, key, _children(child)))
            on_stack.add(id(child))
            counted += 1
        if counted > MAX_VALUES:
            raise ScenarioError(
                f"{where or 'scenario'}: more than {MAX_VALUES:,} values once its aliases are expanded, "
                "the limit of a scenario"
            )


def _check_values(root: Any) -> None:
    """Refuses keys that are not strings, non-finite numbers and integers beyond 64 bits, naming the field.

    Runs after `_check_shape`, so the tree is finite and shallow; a part
    shared by aliases is checked once.
    """
    seen: set[int] = set()
    stack: list[tuple[list[Any], Any]] = [([], root)]
    while stack:
        path, value = stack.pop()
        if not _is_container(value):
            _check_scalar(path, value)
        elif id(value) not in seen:
            seen.add(id(value))
            children = [([*path, key], child) for key, child in _children(value)]
            if isinstance(value, dict):
                for child_path, _ in children:
                    _check_key(child_path)
            # Reversed onto the stack, so the first bad field in document order is the one named.
            stack.extend(reversed(children))


def _check_key(path: list[Any]) -> None:
    key = path[-1]
    field = _dotted(path[:-1]) or "scenario"
    if not isinstance(key, str):
        kind = type(key).__name__
        raise ScenarioError(f"{field}: the key {_shorten(key)} is not a string ({kind}); keys are field names")
    _check_text(field, f"the key {_shorten(key)}", key)


def _check_text(name: str, what: str, text: str) -> None:
    """Refuses a string that is not Unicode text: YAML's `"\\ud800"` escape writes a lone UTF-16 surrogate."""
    if text.isascii():
        return
    lone = next((char for char in text if "\ud800" <= char <= "\udfff"), None)
    if lone is not None:
        raise ScenarioError(f"{name}: {what} holds \\u{ord(lone):04x}, a lone UTF-16 surrogate, not a character")


def _check_scalar(path: list[Any], value: Any) -> None:
    name = _dotted(path) or "scenario"
    if isinstance(value, str):
        _check_text(name, _shorten(value), value)
    if isinstance(value, float) and not math.isfinite(value):
        spelled = ".nan" if math.isnan(value) else ".inf" if value > 0 else "-.inf"
        raise ScenarioError(f"{name}: {spelled} is not a {'number' if math.isnan(value) else 'finite number'}")
    if isinstance(value, int) and not isinstance(value, bool) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        # str() of an int beyond 4,300 digits raises; such a one is named by its size.
        spelled = str(value) if value.bit_length() < 1024 else f"an integer of {value.bit_length()} bits"
        raise ScenarioError(f"{name}: {spelled} is out of range: an integer lies within -2^63..2^64-1")


def _is_container(value: Any) -> bool:
    # What json.dumps walks into; other objects it writes with str().
    return isinstance(value, dict | list | tuple)


def _children(container: Any) -> Iterator[tuple[Any, Any]]:
    return iter(container.items()) if isinstance(container, dict) else enumerate(container)


def _dotted(path: list[Any]) -> str:
    """A field's path as errors name it everywhere: `faults[0].rate` (a list's index in brackets)."""
    named = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            named += f"[{part}]"
        else:
            named += ("." if named else "") + _one_line(str(part))
    return named


def _one_line(text: str) -> str:
    """`text` with its line breaks escaped (`a\\nb`): a message that names a key stays one line, whatever the key."""
    return "".join(
        char.encode("unicode_escape").decode("ascii") if char.splitlines() != [char] else char for char in text
    )


def _located(where: str | None, stack: list[_Level], key: Any, problem: str) -> str:
    path = _dotted([level.key for level in stack[1:]] + [key])
    return ": ".join(part for part in (where, path, problem) if part)


def _shorten(value: Any, limit: int = 60) -> str:
    """`repr(value)` cut to `limit` characters: input quoted in a message stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _expand_includes(data: dict[str, Any], base_dir: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    if "include" not in data:
        return data
    own = dict(data)
    include = own.pop("include")
    paths = [include] if isinstance(include, str) else include
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ScenarioError(f"include: expected a path or a list of paths, found {_shorten(include)}")
    merged: dict[str, Any] = {}
    for relative in paths:
        path = base_dir / relative
        # lexists: False, not an exception, for a name too long or holding a NUL.
        if not os.path.lexists(path):
            by = f" (included by {chain[-1]})" if chain else ""
            raise FileNotFoundError(f"include: scenario file not found: {path}{by}")
        merged = deep_merge(merged, _load_file(path, chain))
    return deep_merge(merged, own)


def _yaml_problem(exc: Exception, text: str) -> str:
    """What PyYAML (or an error it let through) says is wrong, on one line, with the line and column when known."""
    if isinstance(exc, yaml.reader.ReaderError):
        # A character YAML does not allow; PyYAML knows only its offset.
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        return f"line {line}, column {column}: unacceptable character #x{exc.character:04x}: {exc.reason}"
    mark = getattr(exc, "problem_mark", None)
    problem = " ".join((getattr(exc, "problem", None) or str(exc)).split())
    if mark is None:
        return problem
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
