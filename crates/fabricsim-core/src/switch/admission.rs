//! Whether a switch buffers a packet it has routed to an egress port: the
//! shared buffer's dynamic thresholds for lossy classes, the whole free
//! pool for lossless ones (PFC keeps them from overflowing it) and for
//! control packets, and packet trimming when a data packet does not fit or
//! its queue is at the trimming threshold (mrc-srv6-multiplane.txt s2.1;
//! protocols.md s4, s5.2).

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
    // The queue's depth first: it is below the threshold for nearly every
    // packet, and this runs for every packet at every switch.
    let at_threshold = cfg.trimming.enabled && egress_queue >= cfg.trim_threshold();
    let admitted = if at_threshold && trimmable(cfg, packet, class) {
        Admission::Reject
    } else if lossless(cfg, class) || class == CLASS_CONTROL {
        buffer.admit_lossless(wire)
    } else {
        buffer.admit_lossy(egress_queue, wire, cfg.egress_alpha)
    };
    if admitted == Admission::Accept {
        return Verdict::Accept { wire };
    }
    if !trimmable(cfg, packet, class) {
        return Verdict::Drop;
    }
    let wire = headers::trimmed_wire(packet.wire(), cfg.trimming.size.0 as u32) as u64;
    match buffer.admit_lossless(wire) {
        Admission::Accept => Verdict::Trim { wire },
        Admission::Reject => Verdict::Drop,
    }
}

/// Whether `packet` may be trimmed: lossy data not trimmed already.
/// Lossless data is paused, never trimmed: PFC keeps it in the buffer.
fn trimmable(cfg: &SwitchConfig, packet: &Packet, class: usize) -> bool {
    cfg.trimming.enabled && class == CLASS_DATA && !packet.has(flag::TRIMMED) && !lossless(cfg, class)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::PacketKind;
    use crate::topology::NodeId;
    use crate::units::Bytes;

    fn data_packet() -> Packet {
        let mut p = Packet::control(PacketKind::Data, NodeId(0), NodeId(1), 0, 0, 0, 4200);
        (p.class, p.payload) = (CLASS_DATA as u8, 4096);
        p
    }

    fn trimming(threshold: Option<u64>) -> SwitchConfig {
        let mut cfg = SwitchConfig::default();
        cfg.pfc.enabled = false;
        cfg.trimming.enabled = true;
        cfg.trimming.threshold = threshold.map(Bytes);
        cfg
    }

    #[test]
    fn data_is_trimmed_once_its_queue_reaches_the_threshold_though_the_buffer_has_room() {
        let buffer = SharedBuffer::new(32 << 20);
        let cfg = trimming(Some(64_000));
        assert_eq!(admit(&cfg, &buffer, &data_packet(), 63_999), Verdict::Accept { wire: 4200 });
        assert!(matches!(admit(&cfg, &buffer, &data_packet(), 64_000), Verdict::Trim { .. }));
        // Unset, the threshold is ECN's kmax.
        let cfg = trimming(None);
        assert_eq!(admit(&cfg, &buffer, &data_packet(), cfg.ecn.kmax.0 - 1), Verdict::Accept { wire: 4200 });
        assert!(matches!(admit(&cfg, &buffer, &data_packet(), cfg.ecn.kmax.0), Verdict::Trim { .. }));
        // Without trimming the same queue takes the packet.
        let mut off = trimming(Some(64_000));
        off.trimming.enabled = false;
        assert_eq!(admit(&off, &buffer, &data_packet(), 1 << 20), Verdict::Accept { wire: 4200 });
    }
}
