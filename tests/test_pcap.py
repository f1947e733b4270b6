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
    # Each NIC numbers its QPs from 2 up (0 and 1 are InfiniBand's management
    # QPs): data goes to the responder's first QP, ACKs to the requester's.
    assert {p[roce.BTH].dqpn for p in data} == {2}
    assert {p[roce.BTH].dqpn for p in acks} == {2}
    # Each record keeps 128 bytes and the frame's real length.
    assert all(len(bytes(p)) == 128 for p in data)
    assert data[0].wirelen == 14 + 40 + 8 + 12 + 16 + 4096 + 4 + 4


def test_a_run_without_capture_writes_no_pcap(tmp_path: Path) -> None:
    scenario = _scenario()
    del scenario["telemetry"]
    path = fabricsim.run(scenario).write(tmp_path / "run")
    assert not (path / "telemetry.pcap").exists()


def test_srv6_frames_carry_the_micro_sid_path_in_an_outer_ipv6_header(tmp_path: Path) -> None:
    scenario = _scenario()
    scenario["switch"] = {"forwarding": "srv6"}
    # Capture where the data leaves nic0 and where it leaves its ToR upward.
    scenario["telemetry"] = {"pcap": {"ports": ["nic0:0", "t0.p0.0:2", "t0.p0.0:3"]}}
    path = fabricsim.run(scenario).write(tmp_path / "run")
    packets = [p for p in scapy_all.rdpcap(str(path / "telemetry.pcap")) if p.haslayer(roce.BTH)]
    data = [p for p in packets if p[roce.BTH].opcode in (6, 7, 8, 10)]
    at_nic = [p for p in data if p.src == "02:00:00:00:00:00"]
    above_tor = [p for p in data if p.src != "02:00:00:00:00:00"]
    assert at_nic and above_tor
    for p in data:
        outer, inner = p[scapy_all.IPv6], p[scapy_all.IPv6].payload
        assert outer.nh == 41 and isinstance(inner, scapy_all.IPv6)
        assert outer.dst.startswith("2001:db8:")
        assert inner[scapy_all.UDP].dport == 4791
    # The ToR shifted its own uSID out: the address one hop on starts with
    # the uSID that followed it.
    first = at_nic[0][scapy_all.IPv6].dst.split(":")
    after = above_tor[0][scapy_all.IPv6].dst.split(":")
    assert after[2:5] == first[3:6]
    # One outer IPv6 header more on the wire than without SRv6.
    assert at_nic[0].wirelen == 14 + 40 + 40 + 8 + 12 + 16 + 4096 + 4 + 4


def test_mrc_packets_each_carry_their_address_and_the_last_its_immediate(tmp_path: Path) -> None:
    scenario = _scenario()
    scenario["switch"] = {"pfc": {"enabled": False}, "trimming": {"enabled": True}}
    scenario["transport"] = {"kind": "mrc"}
    scenario["traffic"][0]["op"] = "write_with_imm"
    path = fabricsim.run(scenario).write(tmp_path / "run")
    packets = [p for p in scapy_all.rdpcap(str(path / "telemetry.pcap")) if p.haslayer(roce.BTH)]
    data = [p for p in packets if p[roce.BTH].opcode in (0x0A, 0x0B)]
    assert len(data) == 10
    # Every packet is an RDMA WRITE Only with its own RETH (4096 B each,
    # the last 40000 - 9 * 4096 B) and the last carries the immediate.
    assert [p[roce.BTH].opcode for p in data] == [0x0A] * 9 + [0x0B]
    assert [p.wirelen for p in data[:9]] == [14 + 40 + 8 + 12 + 16 + 4096 + 4 + 4] * 9
    assert data[-1].wirelen == 14 + 40 + 8 + 12 + 16 + 4 + (40000 - 9 * 4096) + 4 + 4


def test_each_end_numbers_its_own_qps(tmp_path: Path) -> None:
    # nic0 creates its QP of flow 0 first (number 2) and answers flow 1 on
    # its second (3); toward nic0, flow 1's data names 3 and flow 0's ACKs 2.
    scenario = {
        **_scenario(),
        "traffic": [
            {"kind": "flow", "src": 0, "dst": 2, "bytes": "8192B"},
            {"kind": "flow", "src": 2, "dst": 0, "bytes": "8192B"},
        ],
        "telemetry": {"pcap": {"ports": ["t0.p0.0:0"]}},
    }
    path = fabricsim.run(scenario).write(tmp_path / "run")
    packets = scapy_all.rdpcap(str(path / "telemetry.pcap"))
    data = [p for p in packets if p.haslayer(roce.BTH) and p[roce.BTH].opcode in (6, 7, 8, 10)]
    acks = [p for p in packets if p.haslayer(roce.BTH) and p[roce.BTH].opcode == 0x11]
    assert data and acks
    assert {p[roce.BTH].dqpn for p in data} == {3}
    assert {p[roce.BTH].dqpn for p in acks} == {2}


def test_udp_checksums_over_ipv6_are_valid(tmp_path: Path) -> None:
    # IPv6 forbids a zero UDP checksum outside tunnels that opt in (RFC 8200
    # s8.1, RFC 6936), so the NIC computes it; decoders then accept it. The
    # ACKs are captured whole (data frames are cut at 128 bytes).
    from scapy.layers.inet6 import in6_chksum

    results = fabricsim.run(_scenario())
    packets = scapy_all.rdpcap(str(results.write(tmp_path / "run") / "telemetry.pcap"))
    acks = [p for p in packets if p.haslayer(roce.BTH) and p[roce.BTH].opcode == 0x11]
    assert acks
    for p in acks:
        udp = p[scapy_all.UDP]
        zeroed = bytearray(bytes(udp)[: udp.len])  # without the FCS scapy reads as padding
        zeroed[6:8] = b"\0\0"
        assert udp.chksum != 0 and udp.chksum == in6_chksum(17, p[scapy_all.IPv6], bytes(zeroed))


@pytest.mark.parametrize(
    "design",
    [{}, {"nic": {"ip": "ipv4"}}, {"switch": {"forwarding": "srv6"}, "transport": {"kind": "mrc"}}],
    ids=["rocev2-ipv6", "rocev2-ipv4", "mrc-srv6"],
)
def test_whole_frames_carry_their_icrc_and_fcs(tmp_path: Path, design: dict[str, Any]) -> None:
    # Captured whole, every frame ends in the RoCEv2 ICRC (CRC-32 over the
    # IP datagram with the fields switches rewrite masked) that scapy
    # computes, then the Ethernet FCS.
    import zlib

    scenario = {**_scenario(), **design}
    scenario["telemetry"] = {"pcap": {"ports": ["nic0:0", "t0.p0.0:0", "t0.p0.0:2"], "snaplen": "9000B"}}
    packets = scapy_all.rdpcap(str(fabricsim.run(scenario).write(tmp_path / "run") / "telemetry.pcap"))
    assert len(packets) >= 20
    for p in packets:
        frame = bytes(p)
        assert len(frame) == p.wirelen
        assert zlib.crc32(frame[:-4]).to_bytes(4, "little") == frame[-4:]
        udp = p[scapy_all.UDP]
        ip = udp.underlayer
        datagram = bytes(ip)[: (40 if isinstance(ip, scapy_all.IPv6) else 20) + udp.len]
        again = type(ip)(datagram)
        assert again[roce.BTH].compute_icrc(None) == datagram[-4:]
