"""Every numeric field of the schema, driven to its limits: a run or one clean ScenarioError, never anything else.

The fields are found by walking the core's JSON Schema (`fabricsim._core.schema()`):
every leaf that is an integer, a number or a quantity with a unit (`Time`,
`Bytes`, `Rate`, or a string with a `pattern`), with its dotted path; a
`kind`-tagged variant is written in braces (`transport{mrc}.evs`), a list
item as `0`. Each is set, in a small valid scenario that has its section and
kind, to the extremes of its type:

- integers: 0, 1, the largest of the schema's `format` (uint8, uint16, uint32,
  uint64), that plus one, and -1;
- numbers: 0, -1, 1e308, 1e-308;
- times: 0ns, 1ps, 2^62 ps (the largest a scenario may write) and 1 ps more;
- sizes: 0B, 1B, 2^50 B (the largest) and one byte more;
- rates: 1bps, 2^50 b/s (the largest) and 1 b/s more.

Every value must give a run (any `stop_reason`) or a `ScenarioError` of the
form `<field>: <what is wrong>`; the values out of range (the largest plus
one, -1 for an unsigned integer) must be refused naming the field itself,
and no value may be refused as an unknown field (the field is where the
schema says). Runs are bounded by `limits` (512 MiB, 2 ms of simulated
time) and by a wall-clock guard, in a worker process that a crash or a hang
fails the field's test without ending the session (`scenario_contract`).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import scenario_contract as contract
from scenario_contract import Field, schema_fields, set_field

EXTREMES: dict[str, list[Any]] = {
    "number": [0, -1, 1e308, 1e-308],
    "Time": ["0ns", "1ps", "4611686.018427387904s", "4611686.018427387905s"],
    "Bytes": ["0B", "1B", "1125899906842624B", "1125899906842625B"],
    "Rate": ["1bps", "1125899906842624bps", "1125899906842625bps"],
}
OUT_OF_RANGE = {"Time": "4611686.018427387905s", "Bytes": "1125899906842625B", "Rate": "1125899906842625bps"}


def extremes(field: Field) -> list[tuple[Any, bool]]:
    """Each extreme value of the field's type and whether it is out of range."""
    if field.type == "integer":
        top = field.maximum if field.maximum is not None else 2**64 - 1
        return [(0, False), (1, False), (top, False), (top + 1, True), (-1, True)]
    return [(value, value == OUT_OF_RANGE.get(field.type)) for value in EXTREMES[field.type]]


# --- a base scenario for each field ---------------------------------------------------------------------------------


def _with_traffic(kind: str, name: str) -> dict[str, Any]:
    """The traffic_kinds base with only one generator of `kind`, the first that has the field (a flow: MRC's)."""
    if kind == "flow":
        return contract.mrc()
    if kind == "permutation":
        return contract.tiny()
    scenario = contract.traffic_kinds()
    mine = [t for t in scenario["traffic"] if t["kind"] == kind]
    scenario["traffic"] = [next((t for t in mine if name in t), mine[0])]
    return scenario


def _with_fault(kind: str) -> dict[str, Any]:
    """The faults base (or MRC's, for the faults it alone uses) with only its first fault of `kind`, first.

    A fault that brings something back up keeps the one that took it down (listed after it): alone it would change
    nothing, and be refused.
    """
    for base in (contract.faults(), contract.mrc_faults()):
        chosen = [f for f in base["faults"] if f["kind"] == kind]
        if chosen:
            downs = [f for f in base["faults"] if kind.endswith("_up") and f["kind"] == kind.replace("_up", "_down")]
            base["faults"] = chosen[:1] + downs[:1]
            return base
    raise LookupError(f"no base has a fault of kind {kind}")


def _with_collective(op: str | None = None) -> dict[str, Any]:
    """The job base with its collective first (phases.0) and, if given, of another `op`."""
    scenario = contract.job()
    phases = scenario["jobs"][0]["phases"]
    phases.reverse()
    phases[1]["after"] = [phases[0]["name"]]
    if op is not None:
        phases[0]["collective"]["op"] = op
    return scenario


# The collective op that uses each collective field, when it is not all_reduce's.
_COLLECTIVE_OP = {"root": "broadcast", "peer_offset": "send_recv", "concurrent_peers": "all_to_all"}


def base_for(field: Field) -> dict[str, Any]:
    """A small valid scenario in which `field` exists, with the section and kind it belongs to."""
    keys, kinds = field.keys, field.kinds
    section = str(keys[0])
    if section == "topology":
        if kinds["topology"] == "explicit":
            scenario = contract.explicit()
            if field.name == "host":
                # Only a NIC has a host: the NICs first, so that nodes.0 is one.
                scenario["topology"]["nodes"].reverse()
            return scenario
        # `ports` and the per-tier lists are in the base that writes its Clos tier by tier;
        # oversubscription (a list too) goes with `radix`.
        tier_by_tier = field.name != "oversubscription" and ("ports" in keys or 0 in keys[2:])
        return contract.traffic_kinds() if tier_by_tier else contract.tiny()
    if section == "transport":
        bases = {"mrc": contract.mrc, "spx": contract.spx}
        return bases.get(kinds["transport"], contract.tiny)()
    if section == "traffic":
        return _with_traffic(kinds["traffic.0"], field.name)
    if section == "faults":
        return _with_fault(kinds["faults.0"])
    if section == "jobs":
        if "matrix" in keys or "explicit" in keys:
            return contract.all_to_allv()
        if "compute" in keys:
            return contract.job()
        if "collective" in keys:
            return _with_collective(_COLLECTIVE_OP.get(field.name))
        return contract.job()
    if section == "intra_host":
        return contract.job()
    if section == "switch":
        return contract.mrc() if "trimming" in keys else contract.tiny()
    if section == "nic":
        return contract.faults() if field.name == "remap_delay" else contract.tiny()
    if section == "telemetry":
        return contract.faults()
    if section == "clustermapper":
        return contract.clustermapper()
    return contract.tiny()


# Fields no small scenario can hold, and why; the test of this list keeps it short and explicit.
SKIPPED: dict[str, str] = {}

# Genuine core bugs: a field whose extremes raise something other than a clean ScenarioError. Each is
# marked xfail(strict=True), so the test fails again, as it should, once the core is fixed.
KNOWN_BUGS: dict[str, str] = {}

FIELDS = schema_fields()


def _params() -> list[Any]:
    params = []
    for field in FIELDS:
        marks = []
        if field.id in SKIPPED:
            marks.append(pytest.mark.skip(reason=SKIPPED[field.id]))
        if field.id in KNOWN_BUGS:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[field.id]))
        params.append(pytest.param(field, id=field.id, marks=marks))
    return params


def _not_naming(field: Field, message: str) -> str | None:
    """What is wrong with a refusal of an out-of-range value: its message must start with the field's path."""
    names = [s for s in contract.field_segments(contract.check_message(message)) if not s.isdigit()]
    if not names or names[-1] != field.name:
        return f"refused, but not naming {field.name}: {message}"
    return None


@pytest.mark.parametrize("field", _params())
def test_extremes_of_each_numeric_field(field: Field) -> None:
    base = base_for(field)
    assert contract.WORKER.run(copy.deepcopy(base)).kind == "run", "the base scenario itself must run"
    problems = []
    for value, out_of_range in extremes(field):
        scenario = copy.deepcopy(base)
        set_field(scenario, field.keys, value)
        if field.id != "limits.memory":
            contract.bound_memory(scenario)
        try:
            outcome = contract.WORKER.run(scenario)
        except Exception as exc:  # the contract allows nothing else: each is listed, not just the first
            problems.append(f"{value!r}: {type(exc).__name__}: {exc}\n  scenario: {json.dumps(scenario)}")
            continue
        if outcome.kind == "refused" and "unknown field" in outcome.detail:
            problems.append(f"{value!r}: the field is not where the schema says: {outcome.detail}")
        elif out_of_range:
            if outcome.kind != "refused":
                problems.append(f"{value!r} is out of range, but the scenario was not refused: {outcome}")
            elif problem := _not_naming(field, outcome.detail):
                problems.append(f"{value!r}: {problem}")
    assert not problems, f"{field.id}:\n" + "\n".join(problems)


def test_the_walk_finds_the_fields_it_should() -> None:
    ids = {field.id for field in FIELDS}
    # One of each family, from each kind of place: a tagged variant, a list item, an untagged union, a nested list.
    for expected in (
        "seed",
        "topology{clos}.radix",
        "topology{clos}.link_rate.0",
        "topology{explicit}.links.0.rate",
        "transport{mrc}.cc.gamma",
        "transport{rocev2}.dcqcn.byte_counter",
        "traffic.0{flow}.src",
        "traffic.0{flow}.ev_set.active.0",
        "jobs.0.placement.explicit.0",
        "jobs.0.phases.0.collective.matrix.0.0",
        "faults.0{nic_port_down}.port",
        "telemetry.pcap.max_packets",
        "clustermapper.window",
        "limits.memory",
    ):
        assert expected in ids, expected
    assert len(FIELDS) > 120


def test_skipped_fields_are_few_and_exist() -> None:
    ids = {field.id for field in FIELDS}
    assert set(SKIPPED) <= ids, set(SKIPPED) - ids
    assert set(KNOWN_BUGS) <= ids, set(KNOWN_BUGS) - ids
    assert len(SKIPPED) <= 5, SKIPPED
