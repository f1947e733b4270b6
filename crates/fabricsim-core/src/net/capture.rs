//! Packet capture: the real bytes of simulated packets, in pcap format, so
//! that Wireshark, tshark or scapy decode fabricsim's traffic.
//!
//! A captured frame is Ethernet / IPv6 or IPv4 / UDP (destination port 4791)
//! / BTH, then RETH on the first packet of an RDMA WRITE, AETH on ACKs and
//! NAKs, 16 reserved bytes on CNPs, then the payload (zeros), ICRC and FCS.
//! Header layouts follow IBTA Vol.1 s9.2 and Annex A17 as summarized in
//! protocols.md s2.2-s2.3. Frames are cut to `snaplen` bytes; the record keeps
//! the original length. Addresses are made from node ids: MAC
//! 02:00:00:xx:xx:xx of the sending and receiving node of the hop, IPv6
//! fd00::<nic> (IPv4 10.x.y.z). A packet's entropy is its IPv6 flow label
//! whole, and its UDP source port in RoCEv2's range 0xC000-0xFFFF, as Linux
//! writes it (`IB_ROCE_UDP_ENCAP_VALID_PORT_MIN`, protocols.md s2.1): MRC's
//! EVs, striped across the two (mrc-srv6-multiplane.txt s2.1), may be any
//! 16-bit value, and a source port of 464 or 520 made Wireshark decode
//! RoCE as Kerberos or RIP. The ICRC (IBTA Annex A17.3.3), the IPv4
//! header checksum, IPv6's UDP checksum and the Ethernet FCS are computed,
//! so that a decoder checking them finds them right.

use super::headers::IpVersion;
use super::packet::{flag, Packet, PacketKind, CLASS_CONTROL};
use crate::units::Time;

/// pcap file header with nanosecond timestamps and Ethernet link type.
const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
const LINKTYPE_ETHERNET: u32 = 1;
const ROCE_UDP_PORT: u16 = 4791;
/// The two top bits every RoCEv2 UDP source port has (0xC000-0xFFFF).
const ROCE_SOURCE_PORTS: u16 = 0xC000;
/// DSCP of RoCE data (CS3/AF31 class commonly used for RDMA) and of CNPs
/// (NVIDIA's CNP_DSCP 48, protocols.md s2.3).
const DSCP_DATA: u8 = 26;
const DSCP_CONTROL: u8 = 48;

/// BTH opcodes of the RC transport (IBTA; protocols.md s2.3).
mod opcode {
    pub const SEND_FIRST: u8 = 0x00;
    pub const SEND_MIDDLE: u8 = 0x01;
    pub const SEND_LAST: u8 = 0x02;
    pub const SEND_ONLY: u8 = 0x04;
    pub const READ_REQUEST: u8 = 0x0C;
    pub const READ_RESPONSE_FIRST: u8 = 0x0D;
    pub const READ_RESPONSE_MIDDLE: u8 = 0x0E;
    pub const READ_RESPONSE_LAST: u8 = 0x0F;
    pub const READ_RESPONSE_ONLY: u8 = 0x10;
    pub const WRITE_FIRST: u8 = 0x06;
    pub const WRITE_MIDDLE: u8 = 0x07;
    pub const WRITE_LAST: u8 = 0x08;
    pub const WRITE_LAST_WITH_IMM: u8 = 0x09;
    pub const WRITE_ONLY: u8 = 0x0A;
    pub const WRITE_ONLY_WITH_IMM: u8 = 0x0B;
    pub const ACKNOWLEDGE: u8 = 0x11;
    pub const CNP: u8 = 0x81;
}

/// A pcap file being written into memory.
pub struct Capture {
    bytes: Vec<u8>,
    snaplen: u32,
    limit: u64,
    packets: u64,
}

impl Capture {
    pub fn new(snaplen: u32, limit: u64) -> Capture {
        let mut bytes = Vec::with_capacity(1 << 16);
        for word in [PCAP_MAGIC_NS, 0x0004_0002] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        // Version 2.4 above; then this zone, accuracy, snaplen, link type.
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&snaplen.to_le_bytes());
        bytes.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        Capture { bytes, snaplen, limit, packets: 0 }
    }

    /// Records `packet` as it starts to leave at `now`, framed as `hop` says.
    pub fn record(&mut self, now: Time, packet: &Packet, hop: &Hop) {
        if self.packets >= self.limit {
            return;
        }
        self.packets += 1;
        let frame = frame(packet, hop);
        let kept = frame.len().min(self.snaplen as usize);
        let (secs, nanos) = (now.0 / 1_000_000_000_000, (now.0 % 1_000_000_000_000) / 1_000);
        for word in [secs as u32, nanos as u32, kept as u32, frame.len() as u32] {
            self.bytes.extend_from_slice(&word.to_le_bytes());
        }
        self.bytes.extend_from_slice(&frame[..kept]);
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

fn mac(node: u32) -> [u8; 6] {
    let n = node.to_be_bytes();
    [0x02, 0x00, n[0], n[1], n[2], n[3]]
}

/// Whether a data packet is coded as the first and the last of its
/// message. An MRC packet carries its own address and length, so each is
/// an RDMA WRITE Only that standard decoders read whole (with immediate on
/// the message's last packet, if any).
fn data_position(packet: &Packet) -> (bool, bool) {
    if packet.has(flag::ADDRESSED) {
        (true, true)
    } else {
        (packet.has(flag::FIRST), packet.has(flag::LAST))
    }
}

/// What a frame says beyond its packet record: where it is on the wire
/// and what its headers name.
#[derive(Clone, Copy, Debug)]
pub struct Hop {
    /// The nodes at the two ends of the link it crosses (its MACs).
    pub from: u32,
    pub to: u32,
    /// The QP's number at the packet's destination (the BTH's DestQP).
    pub dest_qp: u32,
    pub ip: IpVersion,
    /// The RDMA WRITE's length, for the RETH of its first packet.
    pub message_len: u64,
    /// The SRv6 destination address of an encapsulated packet.
    pub outer: Option<u128>,
    /// An RNR NAK's timer field: the IBTA code of the wait it asks for.
    pub rnr_code: u8,
}

/// The frame's bytes, from the Ethernet header through the FCS. With an
/// SRv6 `outer` destination, the IP packet is carried in an outer IPv6
/// header from the source NIC to that address (IPv6 in IPv6, next header 41).
pub fn frame(packet: &Packet, hop: &Hop) -> Vec<u8> {
    let Hop { from, to, dest_qp, ip, message_len, outer, rnr_code } = *hop;
    let mut transport = Vec::with_capacity(64);
    let (op, ack_req) = match packet.kind {
        PacketKind::Data => {
            let (first, last) = data_position(packet);
            let op = match (first, last, packet.has(flag::IMM)) {
                (true, true, false) => opcode::WRITE_ONLY,
                (true, true, true) => opcode::WRITE_ONLY_WITH_IMM,
                (true, false, _) => opcode::WRITE_FIRST,
                (false, true, false) => opcode::WRITE_LAST,
                (false, true, true) => opcode::WRITE_LAST_WITH_IMM,
                (false, false, _) => opcode::WRITE_MIDDLE,
            };
            (op, packet.has(flag::LAST))
        }
        PacketKind::Send => {
            let op = match (packet.has(flag::FIRST), packet.has(flag::LAST)) {
                (true, true) => opcode::SEND_ONLY,
                (true, false) => opcode::SEND_FIRST,
                (false, true) => opcode::SEND_LAST,
                (false, false) => opcode::SEND_MIDDLE,
            };
            (op, packet.has(flag::LAST))
        }
        PacketKind::ReadResponse => {
            let op = match (packet.has(flag::FIRST), packet.has(flag::LAST)) {
                (true, true) => opcode::READ_RESPONSE_ONLY,
                (true, false) => opcode::READ_RESPONSE_FIRST,
                (false, true) => opcode::READ_RESPONSE_LAST,
                (false, false) => opcode::READ_RESPONSE_MIDDLE,
            };
            (op, false)
        }
        PacketKind::ReadRequest => (opcode::READ_REQUEST, true),
        // MRC's probe format is not published: probes travel as RoCE
        // acknowledgements naming the probed EV in the PSN field; so do
        // ConWeave's signals (the model's own header is a simulator tag).
        PacketKind::Ack
        | PacketKind::Nak
        | PacketKind::RnrNak
        | PacketKind::Probe
        | PacketKind::ProbeReply
        | PacketKind::MapProbe
        | PacketKind::Conweave => (opcode::ACKNOWLEDGE, false),
        PacketKind::Cnp => (opcode::CNP, false),
    };
    let payload = packet.payload() as usize;
    let pad = (4 - payload % 4) % 4;
    // BTH: opcode; SE, MigReq, PadCnt, TVer; P_Key; reserved; DestQP;
    // AckReq; PSN (24 bits).
    transport.push(op);
    transport.push((pad as u8) << 4);
    transport.extend_from_slice(&0xFFFFu16.to_be_bytes());
    transport.push(0);
    transport.extend_from_slice(&dest_qp.to_be_bytes()[1..]);
    transport.push(if ack_req { 0x80 } else { 0 });
    transport.extend_from_slice(&(packet.psn & 0x00FF_FFFF).to_be_bytes()[1..]);
    match packet.kind {
        PacketKind::Data => {
            if data_position(packet).0 {
                // RETH: virtual address, R_Key, DMA length (the message's,
                // or the packet's own when every packet is addressed).
                let length = if packet.has(flag::ADDRESSED) { packet.payload() as u64 } else { message_len };
                transport.extend_from_slice(&(packet.psn as u64 * 4096).to_be_bytes());
                transport.extend_from_slice(&packet.qp.to_be_bytes());
                transport.extend_from_slice(&(length as u32).to_be_bytes());
            }
            if packet.has(flag::IMM) {
                // ImmDt: the immediate the responder's completion carries.
                transport.extend_from_slice(&packet.psn.to_be_bytes());
            }
        }
        // A SEND carries no RETH: its RECV says where it goes.
        PacketKind::Send => {}
        // The first and last READ responses carry an AETH (an ACK).
        PacketKind::ReadResponse => {
            if packet.has(flag::FIRST) || packet.has(flag::LAST) {
                transport.extend_from_slice(&[0x1F, 0, 0, 0]);
            }
        }
        // RETH: what to read, from the PSN asked for (the DMA length is
        // the model's to know, not the frame's: zero).
        PacketKind::ReadRequest => {
            transport.extend_from_slice(&(packet.psn as u64 * 4096).to_be_bytes());
            transport.extend_from_slice(&packet.qp.to_be_bytes());
            transport.extend_from_slice(&0u32.to_be_bytes());
        }
        PacketKind::Ack
        | PacketKind::Nak
        | PacketKind::RnrNak
        | PacketKind::Probe
        | PacketKind::ProbeReply
        | PacketKind::MapProbe
        | PacketKind::Conweave => {
            // AETH: syndrome (ACK with unlimited credits; NAK "PSN sequence
            // error"; RNR NAK with the code of the wait it asks for), MSN.
            transport.push(match packet.kind {
                PacketKind::Nak => 0x60,
                PacketKind::RnrNak => 0x20 | (rnr_code & 0x1F),
                _ => 0x1F,
            });
            transport.extend_from_slice(&[0, 0, 0]);
        }
        PacketKind::Cnp => transport.extend_from_slice(&[0; 16]),
    }
    transport.resize(transport.len() + payload + pad, 0);

    let udp_len = 8 + transport.len() + 4;
    let mut udp = Vec::with_capacity(udp_len);
    udp.extend_from_slice(&source_port(packet.entropy).to_be_bytes());
    udp.extend_from_slice(&ROCE_UDP_PORT.to_be_bytes());
    udp.extend_from_slice(&(udp_len as u16).to_be_bytes());
    udp.extend_from_slice(&0u16.to_be_bytes()); // checksum, below
    udp.extend_from_slice(&transport);
    let dscp = if packet.class as usize == CLASS_CONTROL { DSCP_CONTROL } else { DSCP_DATA };
    let ecn = if packet.has(flag::CE) {
        3
    } else if packet.has(flag::ECT) {
        2
    } else {
        0
    };
    let tos = dscp << 2 | ecn;
    let header = ip_header(ip, packet, tos, udp_len);
    udp.extend_from_slice(&icrc(ip, &header, &udp).to_le_bytes());
    if ip == IpVersion::Ipv6 {
        // IPv4 RoCEv2 leaves the UDP checksum zero (the ICRC covers the
        // packet); IPv6 forbids a zero checksum outside tunnels that opt in
        // (RFC 8200 s8.1, RFC 6936), so it is computed over the pseudo-header.
        let checksum = udp_checksum_ipv6(nic_address(packet.src.0), nic_address(packet.dst.0), &udp);
        udp[6..8].copy_from_slice(&checksum.to_be_bytes());
    }
    let mut inner = header;
    inner.extend_from_slice(&udp);
    let mut out = Vec::with_capacity(14 + 40 + inner.len() + 4);
    out.extend_from_slice(&mac(to));
    out.extend_from_slice(&mac(from));
    match outer {
        Some(destination) => {
            out.extend_from_slice(&0x86DDu16.to_be_bytes());
            let word = 6u32 << 28 | (tos as u32) << 20 | packet.entropy as u32;
            out.extend_from_slice(&word.to_be_bytes());
            out.extend_from_slice(&(inner.len() as u16).to_be_bytes());
            out.push(if ip == IpVersion::Ipv6 { 41 } else { 4 });
            out.push(64);
            out.extend_from_slice(&nic_address(packet.src.0).to_be_bytes());
            out.extend_from_slice(&destination.to_be_bytes());
        }
        None => out.extend_from_slice(&(if ip == IpVersion::Ipv6 { 0x86DDu16 } else { 0x0800 }).to_be_bytes()),
    }
    out.extend_from_slice(&inner);
    let fcs = crc32(!0, &out);
    out.extend_from_slice(&(!fcs).to_le_bytes());
    out
}

/// The UDP source port carrying `entropy`: its low 14 bits in RoCEv2's
/// source port range (an entropy in that range already is its own port).
fn source_port(entropy: u16) -> u16 {
    ROCE_SOURCE_PORTS | entropy
}

/// The IP header of a RoCEv2 packet carrying `udp_len` bytes of UDP.
fn ip_header(ip: IpVersion, packet: &Packet, tos: u8, udp_len: usize) -> Vec<u8> {
    match ip {
        IpVersion::Ipv6 => {
            let mut header = Vec::with_capacity(40 + udp_len);
            let flow_label = packet.entropy as u32;
            let word = 6u32 << 28 | (tos as u32) << 20 | flow_label;
            header.extend_from_slice(&word.to_be_bytes());
            header.extend_from_slice(&(udp_len as u16).to_be_bytes());
            header.push(17); // UDP
            header.push(64); // hop limit
            for nic in [packet.src.0, packet.dst.0] {
                header.extend_from_slice(&nic_address(nic).to_be_bytes());
            }
            header
        }
        IpVersion::Ipv4 => {
            let total = 20 + udp_len;
            let mut header = [0u8; 20];
            header[0] = 0x45;
            header[1] = tos;
            header[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            header[6] = 0x40; // don't fragment
            header[8] = 64;
            header[9] = 17;
            for (k, nic) in [packet.src.0, packet.dst.0].into_iter().enumerate() {
                let b = nic.to_be_bytes();
                header[12 + 4 * k..16 + 4 * k].copy_from_slice(&[10, b[1], b[2], b[3]]);
            }
            let checksum = !fold(sum16(0, &header));
            header[10..12].copy_from_slice(&checksum.to_be_bytes());
            let mut v = Vec::with_capacity(20 + udp_len);
            v.extend_from_slice(&header);
            v
        }
    }
}

/// RoCEv2's invariant CRC (IBTA Annex A17.3.3; protocols.md s2.3): CRC-32
/// over eight bytes of ones standing for the LRH, the IP header, the UDP
/// header and the transport headers and payload, with the fields a switch
/// may rewrite set to ones (IPv4 TOS, TTL, checksum; IPv6 traffic class,
/// flow label, hop limit; the UDP checksum; the BTH's FECN, BECN and
/// reserved bits). `udp` is the datagram without the ICRC.
fn icrc(ip: IpVersion, header: &[u8], udp: &[u8]) -> u32 {
    let mut ip_masked = header.to_vec();
    match ip {
        IpVersion::Ipv6 => {
            ip_masked[0] |= 0x0F;
            ip_masked[1..4].fill(0xFF);
            ip_masked[7] = 0xFF;
        }
        IpVersion::Ipv4 => {
            ip_masked[1] = 0xFF;
            ip_masked[8] = 0xFF;
            ip_masked[10..12].fill(0xFF);
        }
    }
    let mut udp_bth = [0u8; 8 + 12];
    udp_bth.copy_from_slice(&udp[..20]);
    udp_bth[6..8].fill(0xFF);
    udp_bth[8 + 4] = 0xFF;
    let mut crc = crc32(!0, &[0xFF; 8]);
    crc = crc32(crc, &ip_masked);
    crc = crc32(crc, &udp_bth);
    !crc32(crc, &udp[20..])
}

/// CRC-32 of IEEE 802.3 (reflected, polynomial 0xEDB88320), the Ethernet
/// FCS's and the ICRC's: `state` carried on over `bytes` (start at `!0`,
/// complement at the end).
fn crc32(state: u32, bytes: &[u8]) -> u32 {
    bytes.iter().fold(state, |crc, &b| CRC32_TABLE[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8))
}

const CRC32_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// `sum` plus the 16-bit big-endian words of `bytes` (a last odd byte
/// padded with zero), the Internet checksum's sum before folding.
fn sum16(sum: u64, bytes: &[u8]) -> u64 {
    sum + bytes.chunks(2).map(|w| u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]))).sum::<u64>()
}

/// The one's-complement fold of a sum to 16 bits (RFC 1071).
fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// The UDP checksum over IPv6: the pseudo-header (addresses, length,
/// next header 17) and the datagram with its checksum field zero; a zero
/// result is sent as 0xFFFF (RFC 8200 s8.1, RFC 768).
fn udp_checksum_ipv6(src: u128, dst: u128, datagram: &[u8]) -> u16 {
    let mut sum = sum16(0, &src.to_be_bytes());
    sum = sum16(sum, &dst.to_be_bytes());
    sum += datagram.len() as u64 + 17;
    match !fold(sum16(sum, datagram)) {
        0 => 0xFFFF,
        checksum => checksum,
    }
}

/// The IPv6 address of a NIC: fd00::<node id>.
fn nic_address(nic: u32) -> u128 {
    0xfd00u128 << 112 | nic as u128
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ipv6_udp_checksum_verifies_and_matches_a_worked_example() {
        // Summed again with the checksum in place, a datagram folds to 0xFFFF.
        let mut udp = vec![0xC0, 0x01, 0x12, 0xB7, 0, 12, 0, 0, 1, 2, 3, 4];
        let (src, dst) = (nic_address(1), nic_address(2));
        let checksum = udp_checksum_ipv6(src, dst, &udp);
        udp[6..8].copy_from_slice(&checksum.to_be_bytes());
        let sum = sum16(sum16(sum16(0, &src.to_be_bytes()), &dst.to_be_bytes()), &udp) + 12 + 17;
        assert_eq!(fold(sum), 0xFFFF);
        // By hand: fd00 + 1 + fd00 + 2 + c001 + 12b7 + 000c + 0102 + 0304
        // + length 12 + 17 = 0x2_d0ea, folded 0xd0ec, complemented 0x2f13.
        assert_eq!(checksum, 0x2F13);
    }

    #[test]
    fn crc32_gives_the_standard_check_value() {
        // The CRC-32 catalogue's check: "123456789" -> 0xCBF43926.
        assert_eq!(!crc32(!0, b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn the_fcs_closes_the_frame_to_the_crc_residue() {
        // A frame with its FCS appended (least significant byte first)
        // leaves IEEE 802.3's residue in the register, 0xDEBB20E3.
        let f = frame(&data(true, true, 64), &hop(2, IpVersion::Ipv6, 64));
        assert_eq!(crc32(!0, &f), 0xDEBB_20E3);
    }

    #[test]
    fn any_entropy_leaves_in_roce_source_ports_and_whole_in_the_flow_label() {
        // MRC's EVs are any 16-bit value: 464 (Kerberos) or 4789 (VXLAN) as
        // a source port turned RoCE into another protocol in Wireshark.
        for entropy in [0, 464, 520, 4789, 0x4141, 0xBFFF, 0xC000, 0xC123, 0xFFFF] {
            let mut p = data(true, true, 64);
            p.entropy = entropy;
            let f = frame(&p, &hop(2, IpVersion::Ipv6, 64));
            let (ip, udp) = (14, 14 + 40);
            let port = u16::from_be_bytes([f[udp], f[udp + 1]]);
            assert!(port >= 0xC000, "entropy {entropy:#x}: source port {port:#x}");
            assert_eq!(port & 0x3FFF, entropy & 0x3FFF);
            let label = u32::from_be_bytes([f[ip], f[ip + 1], f[ip + 2], f[ip + 3]]) & 0xF_FFFF;
            assert_eq!(label, u32::from(entropy));
            assert_eq!(u16::from_be_bytes([f[udp + 2], f[udp + 3]]), ROCE_UDP_PORT);
        }
        // A QP's RoCE entropy is its own port, as before.
        let f = frame(&data(true, true, 64), &hop(2, IpVersion::Ipv6, 64));
        assert_eq!(u16::from_be_bytes([f[54], f[55]]), 0xC123);
    }

    fn hop(dest_qp: u32, ip: IpVersion, message_len: u64) -> Hop {
        Hop { from: 1, to: 2, dest_qp, ip, message_len, outer: None, rnr_code: 12 }
    }
    use crate::net::headers;
    use crate::topology::NodeId;
    use crate::transport::{DataHeaders, Verb};

    /// The wire bytes the simulator charges a data packet of `verb`.
    fn charged(verb: Verb, first: bool, last: bool, addressed: bool, payload: u32) -> u16 {
        headers::data_wire(IpVersion::Ipv6, payload, DataHeaders::of(verb, first, last, addressed).bytes()) as u16
    }

    fn data(first: bool, last: bool, payload: u16) -> Packet {
        let mut flags = flag::ECT;
        if first {
            flags |= flag::FIRST;
        }
        if last {
            flags |= flag::LAST;
        }
        Packet {
            kind: PacketKind::Data,
            class: 1,
            flags,
            entropy: 0xC123,
            src: NodeId(3),
            dst: NodeId(9),
            qp: 0x0102_0304,
            psn: 0x0123_4567,
            payload,
            wire: charged(Verb::Write, first, last, false, payload as u32),
            port: 0,
            ports_up: 0xFF,
            ack: 0,
            echo: 0,
        }
    }

    /// A header-only packet of `kind`, `wire` bytes on the wire.
    fn control(kind: PacketKind, wire: u32) -> Packet {
        Packet { kind, class: 0, flags: 0, payload: 0, wire: wire as u16, ..data(false, false, 0) }
    }

    #[test]
    fn frames_have_the_wire_sizes_the_simulator_charges() {
        for (first, last) in [(true, false), (false, false), (false, true), (true, true)] {
            let p = data(first, last, 4096);
            let f = frame(&p, &hop(p.qp, IpVersion::Ipv6, 8192));
            assert_eq!(f.len() as u32 + headers::WIRE_OVERHEAD, p.wire(), "first={first} last={last}");
        }
    }

    #[test]
    fn addressed_and_immediate_frames_match_their_wire_sizes() {
        for (first, last) in [(true, false), (false, false), (false, true)] {
            let mut p = data(first, last, 4096);
            p.flags |= flag::ADDRESSED;
            p.wire = charged(Verb::Write, first, last, true, 4096);
            let f = frame(&p, &hop(p.qp, IpVersion::Ipv6, 8192));
            assert_eq!(f.len() as u32 + headers::WIRE_OVERHEAD, p.wire(), "first={first} last={last}");
            assert_eq!(f[62], opcode::WRITE_ONLY);
        }
        let mut p = data(false, true, 100);
        p.flags |= flag::IMM;
        p.wire = charged(Verb::WriteImm, false, true, false, 100);
        let f = frame(&p, &hop(p.qp, IpVersion::Ipv6, 8192));
        assert_eq!(f.len() as u32 + headers::WIRE_OVERHEAD, p.wire());
        assert_eq!(f[62], opcode::WRITE_LAST_WITH_IMM);
    }

    #[test]
    fn send_frames_carry_send_opcodes_and_no_reth() {
        for (first, last, op) in [
            (true, false, opcode::SEND_FIRST),
            (false, false, opcode::SEND_MIDDLE),
            (false, true, opcode::SEND_LAST),
            (true, true, opcode::SEND_ONLY),
        ] {
            let mut p = data(first, last, 4096);
            p.kind = PacketKind::Send;
            p.wire = charged(Verb::Send, first, last, false, 4096);
            let f = frame(&p, &hop(p.qp, IpVersion::Ipv6, 8192));
            assert_eq!(f.len() as u32 + headers::WIRE_OVERHEAD, p.wire(), "first={first} last={last}");
            assert_eq!(f[62], op);
        }
        // An RNR NAK is an acknowledgement whose AETH syndrome is 001 and
        // its timer code (IBTA Vol.1 9.7.5.2.8).
        let wire = headers::ack_wire(IpVersion::Ipv6);
        let p = control(PacketKind::RnrNak, wire);
        let f = frame(&p, &hop(p.qp, IpVersion::Ipv6, 0));
        assert_eq!(f.len() as u32 + headers::WIRE_OVERHEAD, wire);
        assert_eq!((f[62], f[74] >> 5, f[74] & 0x1F), (opcode::ACKNOWLEDGE, 0b001, 12));
    }

    #[test]
    fn read_frames_carry_read_opcodes_and_their_headers() {
        for (first, last, op) in [
            (true, false, opcode::READ_RESPONSE_FIRST),
            (false, false, opcode::READ_RESPONSE_MIDDLE),
            (false, true, opcode::READ_RESPONSE_LAST),
            (true, true, opcode::READ_RESPONSE_ONLY),
        ] {
            let mut p = data(first, last, 4096);
            p.kind = PacketKind::ReadResponse;
            p.wire = charged(Verb::Read, first, last, false, 4096);
            let f = frame(&p, &hop(p.qp, IpVersion::Ipv6, 8192));
            assert_eq!(f.len() as u32 + headers::WIRE_OVERHEAD, p.wire(), "first={first} last={last}");
            assert_eq!(f[62], op);
        }
        let wire = headers::read_request_wire(IpVersion::Ipv6);
        let p = control(PacketKind::ReadRequest, wire);
        let f = frame(&p, &hop(p.qp, IpVersion::Ipv6, 0));
        assert_eq!(f.len() as u32 + headers::WIRE_OVERHEAD, wire);
        assert_eq!(f[62], opcode::READ_REQUEST);
    }

    #[test]
    fn control_frames_match_their_wire_sizes() {
        for (kind, class, wire) in [
            (PacketKind::Ack, 0, headers::ack_wire(IpVersion::Ipv4)),
            (PacketKind::Nak, 0, headers::ack_wire(IpVersion::Ipv4)),
            (PacketKind::Cnp, 0, headers::cnp_wire(IpVersion::Ipv4)),
        ] {
            let p = Packet { kind, class, flags: 0, payload: 0, wire: wire as u16, ..data(false, false, 0) };
            let f = frame(&p, &hop(p.qp, IpVersion::Ipv4, 0));
            assert_eq!(f.len() as u32 + headers::WIRE_OVERHEAD, wire, "{kind:?}");
        }
        let odd = data(false, true, 577);
        assert_eq!(frame(&odd, &hop(odd.qp, IpVersion::Ipv6, 577)).len() as u32 + headers::WIRE_OVERHEAD, odd.wire());
    }

    #[test]
    fn headers_are_where_decoders_look() {
        let first = data(true, false, 4096);
        let f = frame(&first, &hop(first.qp, IpVersion::Ipv6, 8192));
        assert_eq!(&f[12..14], &[0x86, 0xDD]);
        // UDP destination port 4791 after Ethernet (14) and IPv6 (40).
        assert_eq!(u16::from_be_bytes([f[56], f[57]]), 4791);
        assert_eq!(u16::from_be_bytes([f[54], f[55]]), 0xC123);
        let bth = &f[62..74];
        assert_eq!(bth[0], opcode::WRITE_FIRST);
        assert_eq!(&bth[5..8], &[0x02, 0x03, 0x04]);
        assert_eq!(&bth[9..12], &[0x23, 0x45, 0x67]);
        // ECT(0) in the traffic class, DSCP 26.
        let tc = (u32::from_be_bytes([f[14], f[15], f[16], f[17]]) >> 20) as u8;
        assert_eq!(tc, 26 << 2 | 2);
    }
}
