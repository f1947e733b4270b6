//! Whether a switch buffers a packet it has routed to an egress port: the
//! shared buffer's dynamic thresholds for lossy classes, the whole free
//! pool for lossless ones (PFC keeps them from overflowing it) and for
//! control packets, and packet trimming when a data packet does not fit
//! (mrc-srv6-multiplane.txt s2.1; protocols.md s4).

use crate::net::{flag, headers, Admission, Packet, SharedBuffer, SwitchConfig, CLASS_CONTROL, CLASS_DATA};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Buffer it as it is, `wire` bytes in its class.
    Accept { wire: u64 },
    /// No room for it, but for its headers: cut it to `wire` bytes and
    /// queue it in the control class.
    Trim { wire: u64 },
    /// No room: drop it at the egress.
    Drop,
}

/// Whether `class` is lossless here: paused by PFC instead of dropped.
pub fn lossless(cfg: &SwitchConfig, class: usize) -> bool {
    cfg.pfc.enabled && class == CLASS_DATA
}

/// The verdict on `packet` for an egress queue of its class holding
/// `egress_queue` bytes.
pub fn admit(cfg: &SwitchConfig, buffer: &SharedBuffer, packet: &Packet, egress_queue: u64) -> Verdict {
    let class = packet.class as usize;
    let wire = packet.wire() as u64;
    let admitted = if lossless(cfg, class) || class == CLASS_CONTROL {
        buffer.admit_lossless(wire)
    } else {
        buffer.admit_lossy(egress_queue, wire, cfg.egress_alpha)
    };
    if admitted == Admission::Accept {
        return Verdict::Accept { wire };
    }
    let trim = &cfg.trimming;
    if !(trim.enabled && class == CLASS_DATA && !packet.has(flag::TRIMMED)) {
        return Verdict::Drop;
    }
    let wire = headers::trimmed_wire(packet.wire(), trim.size.0 as u32) as u64;
    match buffer.admit_lossless(wire) {
        Admission::Accept => Verdict::Trim { wire },
        Admission::Reject => Verdict::Drop,
    }
}
