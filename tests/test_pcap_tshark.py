"""`telemetry.pcap` read by Wireshark's own dissectors (tshark): every
whole frame of each design decodes as RoCEv2 (RRoCE), none malformed, with
the opcodes the simulator sent. Skipped, saying so, where tshark is not
installed (`apt-get install tshark` on Debian or Ubuntu)."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import fabricsim

TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(TSHARK is None, reason="no tshark: install it with `apt-get install tshark`")

# RoCEv2's CNP (IBTA Annex A17): Wireshark 4.0 names only InfiniBand's own CNP opcode (0x80).
CNP = 0x81


def _fields(pcap: Path, *fields: str) -> list[list[str]]:
    args = [str(TSHARK), "-r", str(pcap), "-T", "fields", "-E", "separator=;"]
    for field in fields:
        args += ["-e", field]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [line.split(";") for line in out.splitlines()]


DESIGNS: dict[str, dict[str, Any]] = {
    # DCQCN over a 2:1 incast: ECN marks and CNPs.
    "rocev2": {"traffic": [{"kind": "incast", "receiver": 2, "senders": [0, 1, 3], "bytes": "200KB"}]},
    "mrc-srv6": {"switch": {"forwarding": "srv6"}, "transport": {"kind": "mrc"}},
    # Many EVs, any 16-bit value each, and trimmed packets: as source ports,
    # EVs such as 464 or 520 were decoded as Kerberos or RIP.
    "mrc-srv6-incast": {
        "switch": {"forwarding": "srv6"},
        "transport": {"kind": "mrc"},
        "traffic": [{"kind": "incast", "receiver": 2, "senders": [0, 1, 3], "bytes": "400KB"}],
    },
    "spx": {"topology": {"planes": 2}, "switch": {"forwarding": "adaptive"}, "transport": {"kind": "spx"}},
}


@pytest.mark.parametrize("design", list(DESIGNS), ids=list(DESIGNS))
def test_tshark_decodes_every_whole_frame(tmp_path: Path, design: str) -> None:
    scenario: dict[str, Any] = {
        "name": "tshark",
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"},
        "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "40000B"}],
        "duration": "100us",
        "telemetry": {"pcap": {"ports": ["nic0:0", "nic1:0", "t0.p0.0:0", "t0.p0.0:2"], "snaplen": "9000B"}},
    }
    for key, value in DESIGNS[design].items():
        scenario[key] = {**scenario.get(key, {}), **value} if isinstance(value, dict) else value
    path = fabricsim.run(scenario).write(tmp_path / "run") / "telemetry.pcap"
    rows = _fields(path, "frame.protocols", "infiniband.bth.opcode", "_ws.malformed", "_ws.expert.severity")
    assert rows
    opcodes = Counter(int(r[1]) for r in rows if r[1])
    # The payload, whole, after the transport headers.
    assert all(":udp:infiniband" in r[0] for r in rows), {r[0] for r in rows}
    assert not [r for r in rows if r[2] or r[3]], "malformed frames or expert warnings"
    assert sum(opcodes.values()) == len(rows)
    data = {0x06, 0x07, 0x08, 0x0A, 0x0B}
    assert set(opcodes) <= data | {0x11, CNP}
    assert opcodes.keys() & data and opcodes[0x11] > 0
    if design == "rocev2":
        assert opcodes[CNP] > 0
