"""`telemetry.pcap` captures real frames: a standard decoder (scapy, with its
RoCE layer) reads Ethernet / IPv6 / UDP 4791 / BTH from the file, with the
PSNs, queue pairs and opcodes the simulator sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import fabricsim

scapy_all = pytest.importorskip("scapy.all")
roce = pytest.importorskip("scapy.contrib.roce")


def _scenario() -> dict[str, Any]:
    return {
        "name": "pcap",
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"},
        "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "40000B"}],
        # Run past the flow's end so that its last ACKs come back too.
        "duration": "50us",
        # nic0's only port: its data leaves there, its ACKs arrive there.
        "telemetry": {"pcap": {"ports": ["nic0:0", "t0.p0.0:0"]}},
    }


def test_captured_frames_decode_as_rocev2(tmp_path: Path) -> None:
    results = fabricsim.run(_scenario())
    path = results.write(tmp_path / "run")
    packets = scapy_all.rdpcap(str(path / "telemetry.pcap"))
    data = [p for p in packets if p.haslayer(roce.BTH) and p[roce.BTH].opcode in (6, 7, 8, 10)]
    acks = [p for p in packets if p.haslayer(roce.BTH) and p[roce.BTH].opcode == 0x11]
    # 40000 B in 4096 B packets: 10 data packets out of nic0, one ACK each back.
    assert len(data) == 10 and len(acks) == 10
    assert results.summary["captured_packets"] == len(packets) == 20
    assert [p[roce.BTH].psn for p in data] == list(range(10))
    assert data[0][roce.BTH].opcode == 6 and data[-1][roce.BTH].opcode == 8
    assert all(p[scapy_all.UDP].dport == 4791 for p in packets)
    assert len({p[roce.BTH].dqpn for p in packets}) == 1
    # Each record keeps 128 bytes and the frame's real length.
    assert all(len(bytes(p)) == 128 for p in data)
    assert data[0].wirelen == 14 + 40 + 8 + 12 + 16 + 4096 + 4 + 4


def test_a_run_without_capture_writes_no_pcap(tmp_path: Path) -> None:
    scenario = _scenario()
    del scenario["telemetry"]
    path = fabricsim.run(scenario).write(tmp_path / "run")
    assert not (path / "telemetry.pcap").exists()
