"""Scenario files: YAML loading, includes and `-s dotted.key=value` overrides.

The schema itself belongs to the core (`fabricsim._core.resolve` validates and
fills defaults); this module only assembles the dict that is handed to it:

1. a file is read as YAML; its `include:` (a path or a list of paths, relative
   to the including file) is loaded first, in order, and the file's own keys
   are merged on top (mappings merge key by key, everything else is replaced);
2. overrides are applied last, each a dotted path into the merged dict, with
   integer segments indexing lists (`traffic.0.bytes=1MB`).

A scenario with a `sweep` section stands for several runs; `fabricsim.sweep`
expands it, and a single run refuses it.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ._core import ScenarioError

__all__ = [
    "builtin_scenario",
    "deep_merge",
    "is_sweep",
    "load_scenario",
    "parse_override",
    "path_safe",
    "set_dotted",
    "to_json",
]

# Written into a run directory's scenario.json so a result names the code that
# made it; dropped again on input so that file can be run as a scenario.
VERSION_KEY = "fabricsim_version"
SWEEP_KEY = "sweep"

ScenarioSource = str | Path | Mapping[str, Any]
Overrides = Iterable[str] | Mapping[str, Any] | None


def builtin_scenario(name: str) -> Path:
    """Path of a scenario shipped with the package (`default`, `bench`)."""
    path = Path(str(resources.files("fabricsim").joinpath("builtin", f"{name}.yaml")))
    if not path.is_file():
        raise FileNotFoundError(f"no built-in scenario named {name!r}")
    return path


def is_sweep(scenario: Mapping[str, Any]) -> bool:
    """Whether a loaded scenario has a `sweep` section (a resolved scenario's `sweep: null` is none)."""
    return scenario.get(SWEEP_KEY) is not None


def load_scenario(source: ScenarioSource, overrides: Overrides = None) -> dict[str, Any]:
    """Loads a scenario from a YAML file (or takes a dict), resolves includes and applies overrides.

    `overrides` is either a list of `dotted.key=value` strings, whose values are
    parsed as YAML scalars (`seed=3`, `topology.link_rate=400Gbps`), or a
    mapping of dotted keys to already-typed values.
    """
    if isinstance(source, Mapping):
        scenario = _expand_includes(copy.deepcopy(dict(source)), Path.cwd(), ())
    else:
        scenario = _load_file(Path(source), ())
    scenario.pop(VERSION_KEY, None)
    if overrides is None:
        return scenario
    items = overrides.items() if isinstance(overrides, Mapping) else (parse_override(o) for o in overrides)
    for key, value in items:
        set_dotted(scenario, key, value)
    return scenario


def parse_override(text: str) -> tuple[str, Any]:
    """Splits `dotted.key=value` and parses the value as a YAML scalar."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(f"-s {text}: an override is written dotted.key=value, e.g. -s topology.radix=8")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{key}: cannot parse the value {raw!r}: {_yaml_problem(exc)}") from None
    return key, value


def set_dotted(scenario: dict[str, Any], key: str, value: Any) -> None:
    """Sets `scenario[a][b][0][c] = value` for the key `a.b.0.c`, creating missing mappings."""
    parts = key.split(".")
    if any(not p for p in parts):
        raise ScenarioError(f"{key}: empty segment in the override key")
    node: Any = scenario
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        here = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            if not part.isdigit():
                raise ScenarioError(f"{here}: {'.'.join(parts[:depth])} is a list, index it with a number")
            index = int(part)
            if index >= len(node):
                raise ScenarioError(f"{here}: index {index} is out of range, the list has {len(node)} items")
            if last:
                node[index] = value
            else:
                node = node[index]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            parent = ".".join(parts[:depth])
            raise ScenarioError(f"{here}: {parent} is {node!r}, not a mapping or a list")


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Merges `top` over `base`: mappings merge key by key, anything else in `top` replaces."""
    merged = copy.deepcopy(dict(base))
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def path_safe(name: str) -> str:
    """`name` as a file or directory name: runs of other characters than letters, digits, `.`, `_`, `-` become `_`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"


def to_json(scenario: Mapping[str, Any]) -> str:
    """The JSON text handed to the core. YAML-only types (dates) become strings the core then rejects by field."""
    return json.dumps(scenario, default=str)


def _load_file(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    resolved = path.resolve()
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise ScenarioError(f"include: include cycle {cycle}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"scenario file not found: {path}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"scenario path is a directory, not a file: {path}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: invalid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping of keys, found {type(data).__name__}")
    return _expand_includes(data, path.parent, (*chain, resolved))


def _expand_includes(data: dict[str, Any], base_dir: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    if "include" not in data:
        return data
    own = dict(data)
    include = own.pop("include")
    paths = [include] if isinstance(include, str) else include
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ScenarioError(f"include: expected a path or a list of paths, found {include!r}")
    merged: dict[str, Any] = {}
    for relative in paths:
        merged = deep_merge(merged, _load_file(base_dir / relative, chain))
    return deep_merge(merged, own)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return problem
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
