//! Wire sizes of RoCEv2 packets from their real headers.
//!
//! Eth 14 + FCS 4, IPv4 20 or IPv6 40, UDP 8, BTH 12, then a data packet's
//! RETH 16, AETH 4 or ImmDt 4 (which, `transport::DataHeaders` says), an
//! ACK/NAK's AETH 4, ICRC 4; on the wire add the
//! preamble+SFD (8) and minimum inter-frame gap (12). A frame is at least
//! 64 bytes. (IBTA Vol.1 s9.2 and Annex A17; ../shared/reference/protocols.md
//! s2.1-s2.4: 4096 B payload over IPv6 gives a 4198 B wire packet, 97.57%
//! payload efficiency.)

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const ETH: u32 = 14 + 4;
const UDP: u32 = 8;
const BTH: u32 = 12;
pub const RETH: u32 = 16;
pub const AETH: u32 = 4;
/// Immediate data of a write with immediate (IBTA ImmDt).
pub const IMM_DT: u32 = 4;
const ICRC: u32 = 4;
/// Preamble + SFD + minimum inter-frame gap: wire time but not frame bytes.
pub const WIRE_OVERHEAD: u32 = 8 + 12;
const MIN_FRAME: u32 = 64;
/// A CNP carries 16 reserved bytes after the BTH (RoCEv2 Annex A17).
const CNP_BODY: u32 = 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IpVersion {
    Ipv4,
    #[default]
    Ipv6,
}

impl IpVersion {
    fn header(self) -> u32 {
        match self {
            IpVersion::Ipv4 => 20,
            IpVersion::Ipv6 => 40,
        }
    }
}

fn on_wire(frame: u32) -> u32 {
    frame.max(MIN_FRAME) + WIRE_OVERHEAD
}

/// Wire bytes of a data packet carrying `payload` bytes (padded to a
/// multiple of 4, the BTH PadCnt) after `extension` bytes of headers past
/// its BTH (`transport::DataHeaders::bytes`).
pub fn data_wire(ip: IpVersion, payload: u32, extension: u32) -> u32 {
    on_wire(ETH + ip.header() + UDP + BTH + extension + payload.next_multiple_of(4) + ICRC)
}

/// Wire bytes of an RDMA READ request: its RETH names what to read.
pub fn read_request_wire(ip: IpVersion) -> u32 {
    on_wire(ETH + ip.header() + UDP + BTH + RETH + ICRC)
}

/// Wire bytes of an ACK or NAK.
pub fn ack_wire(ip: IpVersion) -> u32 {
    on_wire(ETH + ip.header() + UDP + BTH + AETH + ICRC)
}

/// Wire bytes of a CNP.
pub fn cnp_wire(ip: IpVersion) -> u32 {
    on_wire(ETH + ip.header() + UDP + BTH + CNP_BODY + ICRC)
}

/// The outer IPv6 header of an SRv6-encapsulated packet (IPv6 in IPv6,
/// no segment routing header: the path is all in the destination address).
pub const SRV6_OUTER: u32 = 40;

/// Wire bytes of a PFC pause frame (a minimum-size MAC control frame).
pub fn pause_wire() -> u32 {
    on_wire(MIN_FRAME)
}

/// Wire bytes of a packet after a switch trimmed it to `trim_frame` bytes.
pub fn trimmed_wire(wire: u32, trim_frame: u32) -> u32 {
    wire.min(on_wire(trim_frame))
}

/// Payload bytes per wire byte for full packets of `mtu` payload.
pub fn payload_efficiency(ip: IpVersion, mtu: u32) -> f64 {
    mtu as f64 / data_wire(ip, mtu, 0) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_sizes() {
        assert_eq!(data_wire(IpVersion::Ipv6, 4096, 0), 4198);
        assert_eq!(data_wire(IpVersion::Ipv4, 4096, 0), 4178);
        assert!((payload_efficiency(IpVersion::Ipv6, 4096) - 0.9757).abs() < 1e-4);
    }
}
