"""The contract every scenario gets from fabricsim, shared by the property tests.

For any scenario, `fabricsim.run` returns Results (a run, perhaps stopped
short: its `stop_reason` says why) or raises `ScenarioError` with one line
`<field>: <what is wrong>`. Nothing else: no `SimulationError` (a panic in
the core, i.e. a bug), no other Python exception, no crash, no hang, no
runaway memory.

The tests run scenarios the way `fabricsim.run` does (`load_scenario`, then
`runner.run_loaded`), in a worker process (`Worker`), so that a scenario
that crashes the core (an abort, a failed allocation) or hangs it fails its
test instead of taking the test session down, and is named. Three bounds
keep each run small:

- memory: every scenario carries `limits.memory` (512 MiB), which the core
  checks its estimate against before it builds anything (`bound_memory`
  puts it back when a mutation removed it or raised it); the worker's
  address space is limited to `WORKER_ADDRESS_SPACE`, and a worker whose
  resident memory passes `WORKER_MAX_RSS` fails the scenario that took it
  there (and is replaced, so that the next one is measured alone);
- wall clock: the progress callback (called about five times a second while
  the core runs) raises `TooSlow` after `WALL_LIMIT` seconds, which stops the
  run; such a run is counted as slow, not as a failure;
- a run that goes `SILENCE_LIMIT` seconds without calling its progress
  callback fails (nothing could stop it then), and one that does not
  answer within `HANG_LIMIT` seconds is a hang: the worker is killed and
  the scenario fails.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import itertools
import json
import os
import re
import resource
import selectors
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricsim import ScenarioError, _core, load_scenario
from fabricsim.runner import run_loaded
from fabricsim.scenario import is_sweep, to_json

STOP_REASONS = frozenset({"completed", "duration", "time_limit", "livelock", "stalled", "memory_limit", "interrupted"})
MEMORY = "512MiB"
MEMORY_BYTES = 512 * 2**20
SIM_TIME = "2ms"
LIMITS = {"memory": MEMORY, "sim_time": SIM_TIME}
# Seconds of wall time a run may take before the progress callback stops it.
WALL_LIMIT = 3.0
# Seconds a run may go without calling its progress callback (five times a second, when it works): longer, and
# neither the wall-clock guard nor Ctrl-C can stop it.
SILENCE_LIMIT = 10.0
# Seconds after which a run that did not stop is a hang: the worker is killed.
HANG_LIMIT = 120.0
# The worker's address space (RLIMIT_AS): room for Python, polars and a run of 512 MiB, not for gigabytes more.
WORKER_ADDRESS_SPACE = 4 * 2**30
# Resident memory past which a run broke its limits.memory (the core's estimate is calibrated on resident
# memory; this leaves room for Python, polars and the results' frames).
WORKER_MAX_RSS = 3 * MEMORY_BYTES

# A message names its field first: `topology.radix: ...`, `traffic[0].kind: ...`, `scenario: ...`, or a file. A
# field is named as the user wrote it, even a key of spaces (` : unknown field ...`).
_MESSAGE = re.compile(r"^(?P<field>[^\n]+?): (?P<text>\S[^\n]*)$")
_SIZE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


class TooSlow(Exception):
    """Raised by the progress callback: the run took longer than WALL_LIMIT seconds of wall time."""


@dataclass(frozen=True)
class Outcome:
    """What a scenario got: `run` (Results, with its stop reason), `refused` (ScenarioError) or `slow`."""

    kind: str
    detail: str
    seconds: float
    # The longest time without a progress call (from the start, between calls, to the end).
    silent: float = 0.0


def tiny() -> dict[str, Any]:
    """The smallest useful scenario: 8 NICs on a 2-tier Clos of radix 4, a 64 KiB permutation over RoCEv2."""
    return {
        "name": "tiny",
        "seed": 1,
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"},
        "traffic": [{"kind": "permutation", "bytes": "64KiB"}],
        "transport": {"kind": "rocev2"},
        "limits": dict(LIMITS),
    }


_MRC_FABRIC = {
    "forwarding": "srv6",
    "pfc": {"enabled": False},
    "trimming": {"enabled": True},
    "ecn": {"last_hop": False},
}


def mrc() -> dict[str, Any]:
    """MRC on two planes over SRv6 with trimming: a flow with pinned EVs, one with immediate."""
    scenario = tiny()
    scenario["name"] = "mrc"
    scenario["topology"].update(nics=8, planes=2)
    scenario["switch"] = copy.deepcopy(_MRC_FABRIC)
    scenario["transport"] = {"kind": "mrc", "evs": 16, "backup_evs": 8}
    scenario["traffic"] = [
        {"kind": "flow", "src": 0, "dst": 3, "bytes": "64KiB", "ev_set": {"active": [0, 1, 8, 9], "backup": [16]}},
        {"kind": "flow", "src": 1, "dst": 6, "bytes": "32KiB", "op": "write_with_imm", "qps": 2},
    ]
    return scenario


def spx() -> dict[str, Any]:
    """Spectrum-X on two planes: adaptive routing, the plane load balancer, one flow."""
    scenario = tiny()
    scenario["name"] = "spx"
    scenario["topology"].update(nics=8, planes=2)
    scenario["switch"] = {"forwarding": "adaptive"}
    scenario["transport"] = {"kind": "spx"}
    scenario["traffic"] = [{"kind": "flow", "src": 0, "dst": 5, "bytes": "64KiB"}]
    scenario["telemetry"] = {"sample_interval": "5us", "hosts": [0], "histograms": {"ports": ["nic0:0", "nic0:1"]}}
    return scenario


def balancers() -> dict[str, Any]:
    """Switches balancing by DRILL's sampled queues, a rate-limited permutation and a LetFlow-ready config."""
    scenario = tiny()
    scenario["name"] = "balancers"
    scenario["switch"] = {
        "forwarding": "drill",
        "drill": {"samples": 2, "memory": 1},
        "letflow": {"flowlet_timeout": "50us"},
        "tomahawk_ar": {"update_interval": "1us", "load_weight": 50, "queue_max": "400KB", "ewma_exponent": 2},
    }
    scenario["traffic"] = [{"kind": "permutation", "bytes": "64KiB", "rate": "50Gbps"}]
    return scenario


def conweave() -> dict[str, Any]:
    """ConWeave's ToRs: per-flow paths rerouted on late RTT replies, reordering at the destination ToR, a link down."""
    scenario = tiny()
    scenario["name"] = "conweave"
    scenario["switch"] = {
        "forwarding": "conweave",
        "conweave": {
            "reply_deadline_extra": "4us",
            "path_pause": "16us",
            "tx_expiry": "300us",
            "voq_flush_extra": "16us",
            "voq_default_wait": "200us",
        },
        "reconvergence_delay": "5us",
    }
    scenario["traffic"] = [{"kind": "permutation", "bytes": "256KiB"}]
    scenario["faults"] = [{"kind": "link_down", "at": "3us", "port": "t0.p0.0:2"}]
    return scenario


def dual_tor() -> dict[str, Any]:
    """A dual-ToR fabric with LACP at the NICs: a NIC-ToR link fails and returns under flows both ways."""
    scenario = tiny()
    scenario["name"] = "dual_tor"
    scenario["topology"]["nic_ports"] = 2
    scenario["switch"] = {"reconvergence_delay": "5us"}
    scenario["nic"] = {"port_failover": "lacp", "remap_delay": "1us"}
    scenario["transport"] = {"kind": "rocev2", "qps": 2, "timeout_exponent": 8}
    scenario["traffic"] = [
        {"kind": "flow", "src": 0, "dst": 3, "bytes": "256KiB"},
        {"kind": "flow", "src": 3, "dst": 0, "bytes": "256KiB"},
    ]
    scenario["faults"] = [
        {"kind": "link_down", "at": "3us", "port": "nic0:0"},
        {"kind": "link_up", "at": "20us", "port": "nic0:0"},
    ]
    return scenario


def hpn() -> dict[str, Any]:
    """HPN's mechanisms together: stacked dual-ToR whose primary's data plane fails (the pair goes offline until it
    returns), disjoint source ports, least-loaded posting, a job that restarts from its checkpoint when its QPs
    fail, an NVLS all-reduce on 2-GPU hosts, a NIC that misses the remote fault of its dead transmit direction."""
    scenario = tiny()
    scenario["name"] = "hpn"
    scenario["topology"].update({"nic_ports": 2, "nics_per_host": 2, "tor_stack": True})
    scenario["switch"] = {"reconvergence_delay": "5us", "stack_failover_delay": "10us"}
    scenario["nic"] = {
        "path_selection": "disjoint",
        "message_split": "least_loaded",
        "port_failover": "lacp",
        "link_fault_signaling": False,
        "lacp_timeout": "20us",
    }
    scenario["transport"] = {"kind": "rocev2", "qps": 2, "timeout_exponent": 3}
    scenario["traffic"] = []
    scenario["jobs"] = [
        {
            "name": "j",
            "ranks": 4,
            "iterations": 3,
            "checkpoint": {"every": 1, "restart_delay": "10us"},
            "phases": [
                {"name": "fwd", "compute": "5us"},
                {"name": "ar", "collective": {"op": "all_reduce", "algorithm": "nvls", "bytes": "64KiB"}},
            ],
        }
    ]
    scenario["faults"] = [
        {"kind": "switch_down", "at": "8us", "switch": "t0.p0.0", "gray": True},
        {"kind": "switch_up", "at": "300us", "switch": "t0.p0.0"},
        {"kind": "link_down", "at": "9us", "port": "nic1:1", "direction": "egress"},
    ]
    return scenario


def shift() -> dict[str, Any]:
    """SHIFT on hosts of 2 NICs: NIC 0's link flaps past RoCE's retries under a job; its QPs fall back to the backup
    NICs, probe, and return. Beside it a flow of SENDs, with few RECVs posted, and a READ."""
    scenario = tiny()
    scenario["name"] = "shift"
    scenario["topology"]["nics_per_host"] = 2
    scenario["nic"] = {"shift": {"backup_rail_offset": 1, "fallback_time": "20us", "probe_interval": "50us"}}
    scenario["transport"] = {"kind": "rocev2", "timeout_exponent": 3, "recv_depth": 4, "rnr_timer": "20us"}
    scenario["traffic"] = [
        {"kind": "flow", "src": 1, "dst": 5, "bytes": "64KiB", "op": "send"},
        {"kind": "flow", "src": 5, "dst": 1, "bytes": "64KiB", "op": "read"},
    ]
    scenario["jobs"] = [
        {
            "name": "j",
            "ranks": 2,
            "placement": {"explicit": [0, 4]},
            "iterations": 6,
            "phases": [
                {"name": "c", "compute": "20us"},
                {"name": "p", "collective": {"op": "send_recv", "bytes": "64KiB", "channels": 1}},
            ],
        }
    ]
    scenario["faults"] = [{"kind": "link_flap", "at": "30us", "port": "nic0:0", "duration": "400us"}]
    return scenario


def pro() -> dict[str, Any]:
    """PRO's load balancing: NICs stamp orchestrated PathIDs, switches forward by them."""
    scenario = tiny()
    scenario["name"] = "pro"
    scenario["switch"] = {"forwarding": "path_id", "reconvergence_delay": "5us"}
    scenario["nic"] = {
        "path_selection": "orchestrated",
        "batch": 2,
        "orchestration": {"destination_aware": True, "inter_qp": True},
    }
    scenario["transport"] = {
        "kind": "rocev2",
        "direct_placement": True,
        "ooo_window": True,
        "ooo_window_initial": 8,
        "retransmit_timeout": "80us",
    }
    scenario["faults"] = [{"kind": "link_down", "at": "2us", "port": "t0.p0.0:2"}]
    scenario["telemetry"] = {
        "imbalance": {
            "groups": [{"tier": 0, "facing": "up"}, {"tier": 1, "facing": "down"}],
            "queue_interval": "100ns",
            "load_interval": "10us",
        }
    }
    return scenario


def job() -> dict[str, Any]:
    """A job of 4 ranks on hosts of 2 GPUs: compute, then an all-reduce of 64 KiB, for 2 iterations."""
    scenario = tiny()
    scenario["name"] = "job"
    scenario["topology"]["nics_per_host"] = 2
    scenario["traffic"] = []
    scenario["jobs"] = [
        {
            "name": "j",
            "ranks": 4,
            "iterations": 2,
            "phases": [
                {"name": "fwd", "compute": "5us"},
                {"name": "ar", "collective": {"op": "all_reduce", "bytes": "64KiB"}},
            ],
        }
    ]
    scenario["intra_host"] = {"rate": "3600Gbps", "latency": "1us"}
    return scenario


def all_to_allv() -> dict[str, Any]:
    """An all-to-allv of 4 ranks with a size matrix, placed explicitly."""
    scenario = tiny()
    scenario["name"] = "all_to_allv"
    scenario["traffic"] = []
    row = ["1KiB", "2KiB", "3KiB", "4KiB"]
    scenario["jobs"] = [
        {
            "name": "moe",
            "ranks": 4,
            "placement": {"explicit": [0, 2, 4, 6]},
            "phases": [
                {
                    "name": "dispatch",
                    "collective": {"op": "all_to_allv", "concurrent_peers": 2, "matrix": [list(row) for _ in range(4)]},
                }
            ],
        }
    ]
    return scenario


def faults() -> dict[str, Any]:
    """Failures of every scheduled kind on the tiny fabric, with sampled telemetry and a pcap."""
    scenario = tiny()
    scenario["name"] = "faults"
    scenario["switch"] = {"reconvergence_delay": "20us"}
    scenario["nic"] = {"remap_delay": "5us"}
    scenario["faults"] = [
        {"kind": "link_down", "at": "5us", "port": "t0.p0.0:2"},
        {"kind": "link_up", "at": "50us", "port": "t0.p0.0:2"},
        {"kind": "link_flap", "at": "10us", "port": "t0.p0.1:3", "duration": "10us"},
        {"kind": "nic_port_down", "at": "1us", "nic": 1, "port": 0},
        {"kind": "nic_port_up", "at": "30us", "nic": 1, "port": 0},
        {"kind": "loss_rate", "at": "0us", "port": "t0.p0.2:2", "rate": 0.01},
        {"kind": "switch_down", "at": "20us", "switch": "t1.p0.1"},
        {"kind": "switch_up", "at": "60us", "switch": "t1.p0.1"},
        {"kind": "random_links_down", "at": "40us", "count": 1, "control_plane": False},
    ]
    scenario["telemetry"] = {
        "sample_interval": "10us",
        "ports": ["t0.p0.0:2"],
        "hosts": [0, 1],
        "pcap": {"ports": ["nic0:0"], "snaplen": "96B", "max_packets": 100},
        "transfers": True,
    }
    return scenario


def mrc_faults() -> dict[str, Any]:
    """MRC with the faults only it has a use for: loss on one EV, random loss at the NICs, random flaps."""
    scenario = mrc()
    scenario["name"] = "mrc_faults"
    scenario["faults"] = [
        {"kind": "ev_loss", "at": "2us", "nic": 0, "ev": 1, "rate": 0.2},
        {"kind": "nic_loss", "at": "0us", "rate": 0.001},
        {"kind": "random_flaps", "mtbf": "200us", "duration": "10us", "until": "500us"},
    ]
    scenario["telemetry"] = {"sample_interval": "20us", "ev_log": True, "ev_activity": True}
    return scenario


def clustermapper() -> dict[str, Any]:
    """MRC over SRv6 with Clustermapper probing every 200 us and feeding the denylist."""
    scenario = mrc()
    scenario["name"] = "clustermapper"
    scenario["transport"]["denylist"] = ["t0.p0.0:3"]
    scenario["clustermapper"] = {"period": "200us", "timeout": "50us", "update_denylist": True}
    return scenario


def explicit() -> dict[str, Any]:
    """Two ToRs back to back, two NICs on each, one flow across."""
    scenario = tiny()
    scenario["name"] = "explicit"
    scenario["topology"] = {
        "kind": "explicit",
        "nodes": [
            {"name": "tor0", "kind": "switch", "latency": "500ns", "tier": 0},
            {"name": "tor1", "kind": "switch", "latency": "500ns", "tier": 0},
            {"name": "gpu0", "kind": "nic", "host": 0},
            {"name": "gpu1", "kind": "nic", "host": 1},
            {"name": "gpu2", "kind": "nic", "host": 2},
            {"name": "gpu3", "kind": "nic", "host": 3},
        ],
        "links": [
            {"a": "gpu0", "b": "tor0", "rate": "100Gbps", "delay": "1us"},
            {"a": "gpu1", "b": "tor0", "rate": "100Gbps", "delay": "1us"},
            {"a": "gpu2", "b": "tor1", "rate": "100Gbps"},
            {"a": "gpu3", "b": "tor1", "rate": "100Gbps"},
            {"a": "tor0", "b": "tor1", "rate": "200Gbps", "delay": "1us"},
        ],
    }
    scenario["traffic"] = [{"kind": "flow", "src": "gpu0", "dst": "gpu3", "bytes": "16KiB"}]
    return scenario


def traffic_kinds() -> dict[str, Any]:
    """Every traffic generator once, small, on a Clos given by its ports per tier."""
    scenario = tiny()
    scenario["name"] = "traffic_kinds"
    scenario["topology"] = {
        "kind": "clos",
        "tiers": 2,
        "ports": [{"down": 2, "up": 2}, {"down": 4}],
        "link_rate": ["100Gbps", "100Gbps"],
        "link_delay": ["1us", "1us"],
        "switch_latency": ["0ns", "100ns"],
        "native_port_rate": ["100Gbps", "100Gbps"],
    }
    scenario["traffic"] = [
        {"kind": "incast", "receiver": 0, "senders": [1, 2, 3], "bytes": "8KiB", "qps": 1},
        {"kind": "incast", "receiver": 5, "count": 2, "bytes": "8KiB", "start": "3us"},
        {"kind": "all_to_all", "bytes": "2KiB"},
        {"kind": "uniform_random", "flows": 6, "bytes": "4KiB", "window": "10us"},
        {"kind": "racks_to_racks", "src_racks": [0], "dst_racks": [1], "bytes": "4KiB"},
        {"kind": "double_binary_tree", "bytes": "4KiB", "start": "5us", "rate": "50Gbps"},
    ]
    return scenario


def flow_job() -> dict[str, Any]:
    """The flow model: the job's all-reduce beside a permutation, a spine link down and back."""
    scenario = job()
    scenario["name"] = "flow_job"
    scenario["mode"] = "flow"
    scenario["traffic"] = [{"kind": "permutation", "bytes": "64KiB", "rate": "50Gbps"}]
    scenario["faults"] = [
        {"kind": "link_down", "at": "2us", "port": "t0.p0.0:2"},
        {"kind": "link_up", "at": "30us", "port": "t0.p0.0:2"},
    ]
    scenario["switch"] = {"reconvergence_delay": "5us"}
    return scenario


def flow_spray() -> dict[str, Any]:
    """The flow model spraying: Spectrum-X on two planes, a NIC port down, a switch down and back."""
    scenario = spx()
    scenario["name"] = "flow_spray"
    scenario["mode"] = "flow"
    scenario["flow_mode"] = {"detection": "3us"}
    scenario.pop("telemetry", None)
    scenario["traffic"].append({"kind": "all_to_all", "bytes": "16KiB"})
    scenario["faults"] = [
        {"kind": "nic_port_down", "at": "1us", "nic": 0, "port": 1},
        {"kind": "switch_down", "at": "4us", "switch": "t1.p1.0"},
        {"kind": "switch_up", "at": "20us", "switch": "t1.p1.0"},
    ]
    return scenario


def two_threads() -> dict[str, Any]:
    """MRC over SRv6 on two threads (the NICs and a third of the leaves on one), beside a job's all-reduce."""
    scenario = mrc()
    scenario["name"] = "two_threads"
    scenario["threads"] = 2
    scenario["topology"]["nics_per_host"] = 2
    scenario["jobs"] = job()["jobs"]
    scenario["intra_host"] = {"rate": "3600Gbps", "latency": "1us"}
    return scenario


def two_threads_pfc() -> dict[str, Any]:
    """RoCE with PFC under an incast on two threads, adaptive routing: PAUSE frames cross between the threads."""
    scenario = tiny()
    scenario["name"] = "two_threads_pfc"
    scenario["threads"] = 2
    scenario["switch"] = {"forwarding": "adaptive", "pfc": {"enabled": True}}
    scenario["traffic"] = [{"kind": "incast", "receiver": 0, "senders": [2, 3, 4, 5, 6, 7], "bytes": "64KiB"}]
    return scenario


BASES = {
    f.__name__: f
    for f in (
        tiny,
        mrc,
        spx,
        balancers,
        conweave,
        dual_tor,
        hpn,
        shift,
        pro,
        job,
        all_to_allv,
        faults,
        mrc_faults,
        clustermapper,
        explicit,
        traffic_kinds,
        flow_job,
        flow_spray,
        two_threads,
        two_threads_pfc,
    )
}


# --- the schema's numeric fields -------------------------------------------------------------------------------------

UNIT_REFS = ("Time", "Bytes", "Rate")
FORMAT_MAX = {"uint8": 2**8 - 1, "uint16": 2**16 - 1, "uint32": 2**32 - 1, "uint64": 2**64 - 1}
# A segment of a field's path: a key, a list index, or the `kind` of a tagged variant at that point.
Segment = str | int


@dataclass(frozen=True)
class Kind:
    """The `kind` a tagged variant takes at its place in the path."""

    name: str


@dataclass(frozen=True)
class Field:
    """A numeric leaf of the schema: its path, what it holds and its largest integer."""

    path: tuple[Segment | Kind, ...]
    type: str  # integer, number, Time, Bytes, Rate
    maximum: int | None = None

    @property
    def id(self) -> str:
        text = ""
        for part in self.path:
            if isinstance(part, Kind):
                text += f"{{{part.name}}}"
            else:
                text += f"{'.' if text else ''}{part}"
        return text

    @property
    def keys(self) -> list[Segment]:
        """The path without its kinds: where the value goes in a scenario."""
        return [part for part in self.path if not isinstance(part, Kind)]

    @property
    def kinds(self) -> dict[str, str]:
        """The kind of each tagged section, by the path (dotted) of the section."""
        found = {}
        for i, part in enumerate(self.path):
            if isinstance(part, Kind):
                found[".".join(str(p) for p in self.path[:i] if not isinstance(p, Kind))] = part.name
        return found

    @property
    def name(self) -> str:
        """The field's own name: its last key that is not a list index."""
        return next(str(p) for p in reversed(self.keys) if isinstance(p, str))


def schema_fields() -> list[Field]:
    """Every numeric leaf of the scenario schema, in schema order, each once."""
    schema = json.loads(_core.schema())
    defs = schema["$defs"]
    found: dict[str, Field] = {}

    def leaf(field: Field) -> None:
        found.setdefault(field.id, field)

    def walk(node: Any, path: tuple[Segment | Kind, ...], seen: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return  # `items: true`: any value, e.g. a sweep's values
        ref = node.get("$ref")
        if ref is not None:
            name = ref.rsplit("/", 1)[-1]
            if name in UNIT_REFS:
                leaf(Field(path, name))
            elif name not in seen:
                walk(defs[name], path, (*seen, name))
            return
        for variant in node.get("oneOf", []) + node.get("anyOf", []):
            kind = variant.get("properties", {}).get("kind", {}).get("const")
            walk(variant, (*path, Kind(kind)) if kind else path, seen)
        types = node.get("type", [])
        types = [types] if isinstance(types, str) else types
        if "integer" in types:
            maximum = node.get("maximum", FORMAT_MAX.get(node.get("format", "")))
            leaf(Field(path, "integer", maximum))
        elif "number" in types:
            leaf(Field(path, "number"))
        elif "string" in types and "pattern" in node:
            leaf(Field(path, _unit_of_pattern(node["pattern"])))
        if "array" in types:
            walk(node.get("items"), (*path, 0), seen)
        if "object" in types:
            for key, sub in node.get("properties", {}).items():
                # A sweep is expanded in Python before the core sees the scenario (tests/test_sweep.py
                # probes its bounds), so its numbers are not the core's fields.
                if key != "kind" and (path, key) != ((), "sweep"):
                    walk(sub, (*path, key), seen)

    walk(schema, (), ())
    return list(found.values())


def _unit_of_pattern(pattern: str) -> str:
    for unit, marker in (("Rate", "bps"), ("Bytes", "KiB"), ("Time", "ns")):
        if marker in pattern:
            return unit
    raise AssertionError(f"a pattern of no known quantity: {pattern}")


def set_field(scenario: dict[str, Any], keys: list[Segment], value: Any) -> None:
    """Sets the field at `keys`, creating the mappings and lists on the way (a new list holds the one value)."""
    node: Any = scenario
    for key, following in zip(keys, [*keys[1:], None], strict=True):
        if following is None:
            _put(node, key, value)
            return
        child = node[key] if _has(node, key) else None
        wanted = list if isinstance(following, int) else dict
        if not isinstance(child, wanted):
            # A scalar where the field is written as a list (`link_rate: 100Gbps`): the list of it.
            child = [child] if wanted is list and child is not None else wanted()
            _put(node, key, child)
        node = child


def _has(node: Any, key: Segment) -> bool:
    return key in node if isinstance(node, dict) else key < len(node)


def _put(node: Any, key: Segment, value: Any) -> None:
    if isinstance(node, list) and key == len(node):
        node.append(value)
    else:
        node[key] = value


def check_message(error: ScenarioError | str) -> str:
    """Asserts the error (or its message) is one line `<field>: <what is wrong>`; returns the field."""
    message = str(error)
    match = _MESSAGE.match(message)
    assert match is not None and len(message.splitlines()) == 1, f"not one line '<field>: <what is wrong>': {message!r}"
    return match["field"]


def field_segments(field: str) -> list[str]:
    """`traffic[0].kind` and `traffic.0.kind` both as ['traffic', '0', 'kind']."""
    return [part for part in re.split(r"[.\[\]]", field) if part]


def resolved_memory(limits: Any) -> int | str | None:
    """What the core makes of a `limits` section: its memory in bytes, None when unset, 'invalid' when refused.

    Asked of the core itself with the smallest topology, so that this agrees
    with the core's own parser, whatever the text.
    """
    if isinstance(limits, Mapping):
        limits = {"memory": limits["memory"]} if "memory" in limits else {}
    probe = {"topology": {"kind": "clos", "tiers": 2, "radix": 2, "link_rate": "1Gbps"}, "limits": limits}
    try:
        resolved = json.loads(_core.resolve(to_json(probe), MEMORY_BYTES, to_run=False))
    except ScenarioError:
        return "invalid"
    memory = resolved["limits"]["memory"]
    if memory is None:
        return None
    number, unit = re.fullmatch(r"(\d+)([A-Za-z]+)", memory).groups()  # type: ignore[union-attr]
    return int(number) * _SIZE_UNITS[unit]


def bound_memory(scenario: dict[str, Any]) -> bool:
    """Puts `limits.memory` back to MEMORY when the scenario's limits leave it unset or larger; True if it did.

    An invalid `limits` section is left as it is: the core refuses the
    scenario before it builds anything.
    """
    if "limits" not in scenario:
        scenario["limits"] = {"memory": MEMORY}
        return True
    memory = resolved_memory(scenario["limits"])
    if memory == "invalid" or (isinstance(memory, int) and memory <= MEMORY_BYTES):
        return False
    if isinstance(scenario["limits"], dict):
        scenario["limits"]["memory"] = MEMORY
    else:
        # A sequence the core reads positionally; replaced by the mapping it stands for.
        scenario["limits"] = {"memory": MEMORY}
    return True


def run_guarded(source: Mapping[str, Any] | Path) -> Outcome:
    """Runs a scenario (a dict, or a YAML file) as `fabricsim.run` does, under the wall-clock guard, in this process.

    Returns the outcome; raises whatever breaks the contract (and asserts on
    a ScenarioError's form or a run's stop reason). The tests call it
    through `Worker.run`, in a process of its own.
    """
    start = time.perf_counter()
    calls = [start]

    def guard(_fraction: float) -> None:
        calls.append(time.perf_counter())
        if calls[-1] - start > WALL_LIMIT:
            raise TooSlow

    def outcome(kind: str, detail: str) -> Outcome:
        times = [*calls, time.perf_counter()]
        silent = max(later - earlier for earlier, later in itertools.pairwise(times))
        return Outcome(kind, detail, times[-1] - start, silent)

    try:
        loaded = load_scenario(source)
        if is_sweep(loaded):
            # fabricsim.run refuses a sweep in Python; the core is still asked about the rest.
            loaded.pop("sweep")
        results = run_loaded(loaded, progress=guard)
    except ScenarioError as error:
        check_message(error)
        return outcome("refused", str(error))
    except TooSlow:
        return outcome("slow", "")
    reason = results.summary.get("stop_reason")
    assert reason in STOP_REASONS, f"unknown stop_reason {reason!r}"
    return outcome("run", str(reason))


def resolve_guarded(source: Mapping[str, Any] | Path) -> Outcome:
    """Loads a scenario and has the core check it (`_core.resolve`, no run): `run` if it would run, or `refused`."""
    start = time.perf_counter()
    try:
        _core.resolve(to_json(load_scenario(source)), MEMORY_BYTES)
    except ScenarioError as error:
        check_message(error)
        return Outcome("refused", str(error), time.perf_counter() - start)
    return Outcome("run", "resolved", time.perf_counter() - start)


class ContractBroken(AssertionError):
    """A scenario got something the contract does not allow: an exception, a crash, a hang, too much memory."""


class Worker:
    """A process that runs scenarios for the tests, one at a time, and is replaced when one breaks it.

    Requests and answers are JSON lines on its stdin and stdout; its stderr
    goes to a file, emptied before each request and quoted when the worker
    dies (a Rust abort prints its reason and a backtrace there).
    """

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self._pending = b""

    def run(self, source: Mapping[str, Any] | Path, op: str = "run") -> Outcome:
        """The outcome of `run_guarded` (or `resolve_guarded`, op="resolve") of the scenario, in the worker.

        Raises ContractBroken, naming the scenario, if it raised anything
        else, crashed the worker, hung, or left it using more than
        WORKER_MAX_RSS.
        """
        process = self._start()
        request = {"op": op, "path": str(source)} if isinstance(source, Path) else {"op": op, "scenario": source}
        what = describe(source)
        self._stderr.seek(0)
        self._stderr.truncate()
        try:
            assert process.stdin is not None
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
            line = self._read_line(HANG_LIMIT)
        except (BrokenPipeError, EOFError):
            raise ContractBroken(f"the worker died: {self._death()}\nscenario: {what}") from None
        except TimeoutError:
            self.close()
            raise ContractBroken(f"no answer in {HANG_LIMIT:.0f} s (a hang)\nscenario: {what}") from None
        answer = json.loads(line)
        if "error" in answer:
            raise ContractBroken(f"{answer['error']}\nscenario: {what}\n{answer['traceback']}")
        if answer["max_rss"] > WORKER_MAX_RSS:
            self.close()
            raise ContractBroken(
                f"the run took {answer['max_rss'] / 2**20:.0f} MiB of memory, beyond limits.memory {MEMORY}"
                f"\nscenario: {what}"
            )
        if answer["silent"] > SILENCE_LIMIT:
            raise ContractBroken(
                f"{answer['silent']:.1f} s without a progress call (nor a look at Ctrl-C), "
                f"{answer['kind']} after {answer['seconds']:.1f} s\nscenario: {what}"
            )
        return Outcome(answer["kind"], answer["detail"], answer["seconds"], answer["silent"])

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._forget()

    def _forget(self) -> int:
        """Waits for the worker's end, closes its pipes and file; its exit code."""
        assert self._process is not None
        code = self._process.wait()
        for stream in (self._process.stdin, self._process.stdout):
            # A dead worker's stdin may still hold a request in its buffer.
            with contextlib.suppress(BrokenPipeError):
                if stream is not None:
                    stream.close()
        self._process = None
        self._stderr.close()
        return code

    def _start(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self.close()
            self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - kept open as long as the worker lives
            here = str(Path(__file__).resolve().parent)
            code = f"import sys; sys.path.insert(0, {here!r}); import scenario_contract; scenario_contract.serve()"
            self._process = subprocess.Popen(
                [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
            )
            self._pending = b""
        return self._process

    def _read_line(self, timeout: float) -> bytes:
        assert self._process is not None and self._process.stdout is not None
        fd = self._process.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._pending:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise TimeoutError
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError
                self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def _death(self) -> str:
        assert self._process is not None
        self._process.wait()
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").splitlines()
        code = self._forget()
        # A Rust abort says why first, then a backtrace: its first frames in the core say where.
        frames = [line.strip() for line in lines if "fabricsim" in line][:3]
        return f"exit {code}: " + " | ".join(lines[:1] + frames)


WORKER = Worker()
atexit.register(WORKER.close)


def serve() -> None:
    """The worker's loop: a request per line on stdin, an answer per line on the original stdout."""
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_ADDRESS_SPACE, WORKER_ADDRESS_SPACE))
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever else prints goes to stderr, not into the answers
    for line in sys.stdin:
        request = json.loads(line)
        source = Path(request["path"]) if "path" in request else request["scenario"]
        try:
            outcome = (resolve_guarded if request["op"] == "resolve" else run_guarded)(source)
            answer: dict[str, Any] = {
                "kind": outcome.kind,
                "detail": outcome.detail,
                "seconds": outcome.seconds,
                "silent": outcome.silent,
            }
        except BaseException as exc:  # every one is the test's to report
            answer = {
                "error": f"{type(exc).__module__}.{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
        answer["max_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def describe(source: Mapping[str, Any] | Path) -> str:
    """The scenario as JSON (a file: its path and text), cut to 20,000 characters, to name it in a failure."""
    if isinstance(source, Path):
        try:
            text = f"{source}: {source.read_bytes()[:20_000]!r}"
        except OSError as exc:
            text = f"{source}: {exc}"
    else:
        try:
            text = json.dumps(source, default=repr)
        except (ValueError, TypeError, RecursionError):
            text = repr(source)
    return text[:20_000]
