//! ECN marking at dequeue (RED-style between `kmin` and `kmax`, protocols.md
//! s3.6): only ECN-capable data, and on ports facing a NIC only when the
//! last hop marks (MRC turns that off so that ECN reports fabric
//! congestion only, mrc-srv6-multiplane.txt s2.1).

use crate::net::{ecn_mark_probability, flag, EcnConfig, Packet, Port, CLASS_DATA};

/// The probability that `packet`, leaving `egress` from `class`, is marked
/// CE: zero when it may not be.
pub fn mark_probability(cfg: &EcnConfig, packet: &Packet, class: usize, egress: &Port) -> f64 {
    mark_probability_behind(cfg, packet, class, egress, egress.queue_bytes[class])
}

/// `mark_probability` for a packet with `ahead` bytes queued before it
/// (adaptive routing's marking on exhaustion passes the shallowest queue of
/// the packet's group).
pub fn mark_probability_behind(cfg: &EcnConfig, packet: &Packet, class: usize, egress: &Port, ahead: u64) -> f64 {
    let silent_last_hop = egress.faces_nic && !cfg.last_hop;
    if !cfg.enabled || !packet.has(flag::ECT) || class != CLASS_DATA || silent_last_hop {
        return 0.0;
    }
    // The queue as this packet saw it, including itself.
    ecn_mark_probability(ahead + packet.wire() as u64, cfg)
}
