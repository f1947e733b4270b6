//! One end of a link: the egress queues that feed it, the wire it drives,
//! and the ingress accounting PFC needs for packets that arrive on it.
//!
//! Queues are strict priority by class; a class paused by PFC is skipped.
//! A packet that starts serializing goes straight onto the wire: its arrival
//! at the peer is an event naming the packet, which records the port that
//! sent it, so that the event loop can fetch the packet ahead of time. The
//! port needs an event when serialization ends only if another packet is
//! waiting for it.

use super::packet::{PacketId, PacketPool, PacketQueue, CLASSES};
use crate::topology::NodeId;
pub use crate::topology::PortId;
use crate::units::{Rate, Time};

/// Why a packet was lost; each cause has its own counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropCause {
    /// No room in the shared buffer and trimming off (or not trimmable).
    Buffer,
    /// Lossless traffic overflowed the PFC headroom.
    Headroom,
    /// Sent onto, or in flight on, a link that is down.
    LinkDown,
    /// Random loss on the link.
    LinkLoss,
    /// Arrived at a failed switch.
    SwitchDown,
    /// The switch has no route to the destination.
    NoRoute,
}

pub const DROP_CAUSES: [DropCause; 6] = [
    DropCause::Buffer,
    DropCause::Headroom,
    DropCause::LinkDown,
    DropCause::LinkLoss,
    DropCause::SwitchDown,
    DropCause::NoRoute,
];

impl DropCause {
    pub fn name(self) -> &'static str {
        match self {
            DropCause::Buffer => "buffer",
            DropCause::Headroom => "headroom",
            DropCause::LinkDown => "link_down",
            DropCause::LinkLoss => "link_loss",
            DropCause::SwitchDown => "switch_down",
            DropCause::NoRoute => "no_route",
        }
    }
}

/// A port's counters. The ones every packet updates come first, so that
/// they share a cache line with the rest of the packet path.
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct PortCounters {
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_payload: u64,
    pub max_queue_bytes: u64,
    pub ecn_marks: u64,
    pub trims: u64,
    pub trimmed_payload: u64,
    pub dropped_payload: u64,
    pub drops: [u64; DROP_CAUSES.len()],
    pub pauses_sent: u64,
    pub pauses_received: u64,
    pub paused_time: Time,
}

/// One direction of a link, at its sending end. A run is bound by cache
/// misses on ports, so the layout is fixed and cache-line aligned, hottest
/// first: line 0 the egress queues and what serializing and sending read;
/// line 1 the port's state, the ingress accounting of a switch port and
/// the per-packet counters (`HOT_LINES` covers the two); the rest after.
#[repr(C, align(64))]
pub struct Port {
    pub queues: [PacketQueue; CLASSES],
    pub queue_bytes: [u64; CLASSES],
    /// The link is serializing until this time.
    pub busy_until: Time,
    /// Propagation delay plus the receiving switch's forwarding latency.
    pub delay: Time,
    /// Picoseconds per byte when the rate divides 8e12 exactly (every
    /// standard Ethernet speed does): serialization without a division.
    /// Zero when it does not.
    byte_time: u64,
    /// Random loss probability of this direction.
    pub loss: f64,
    pub node: NodeId,
    /// Index of the port on its node (a NIC's port number = its plane).
    pub index: u16,
    /// Direction state: packets sent while down are lost.
    pub up: bool,
    /// Faces a NIC: a switch port of the last hop.
    pub faces_nic: bool,
    /// Bytes held in this switch that arrived through this port, per
    /// lossless class (PFC's account; lossy classes keep none).
    pub ingress_bytes: [u64; CLASSES],
    /// A `TxDone` event is scheduled at `busy_until` to start the next packet.
    pub tx_done_pending: bool,
    /// PFC state of this port's egress, set by pause frames from the peer.
    pub paused: [bool; CLASSES],
    /// Whether this switch has paused the peer's class.
    pub xoff_sent: [bool; CLASSES],
    /// The port is a NIC's (else a switch's): what sending from it asks
    /// for, known without a look at its node.
    pub of_nic: bool,
    pub counters: PortCounters,
    pub rate: Rate,
    pub paused_since: [Time; CLASSES],
    /// Bytes admitted into headroom since the pause was sent.
    pub headroom_used: [u64; CLASSES],
}

/// Cache lines of a port that handling a packet touches.
pub const HOT_LINES: usize = 2;

// The layout above, kept honest: the queues and serializing's fields fill
// line 0, and the per-packet counters end within the hot lines.
const _: () = assert!(std::mem::offset_of!(Port, loss) + 8 <= 64);
const _: () = assert!(std::mem::offset_of!(Port, counters) + 4 * 8 <= HOT_LINES * 64);

impl Port {
    pub fn new(node: NodeId, index: u16, rate: Rate, delay: Time, faces_nic: bool, of_nic: bool) -> Port {
        let ps_per_s_bits = 8 * crate::units::PS_PER_S;
        Port {
            node,
            rate,
            byte_time: if ps_per_s_bits.is_multiple_of(rate.0) { ps_per_s_bits / rate.0 } else { 0 },
            delay,
            up: true,
            loss: 0.0,
            faces_nic,
            of_nic,
            index,
            queues: Default::default(),
            queue_bytes: [0; CLASSES],
            busy_until: Time::ZERO,
            tx_done_pending: false,
            paused: [false; CLASSES],
            paused_since: [Time::ZERO; CLASSES],
            ingress_bytes: [0; CLASSES],
            xoff_sent: [false; CLASSES],
            headroom_used: [0; CLASSES],
            counters: PortCounters::default(),
        }
    }

    /// Time to serialize `wire` bytes.
    pub fn tx_time(&self, wire: u32) -> Time {
        match self.byte_time {
            0 => self.rate.tx_time(wire as u64),
            ps => Time(ps * wire as u64),
        }
    }

    /// Queues packet `id` of `pool` in `class`.
    #[inline]
    pub fn enqueue(&mut self, class: usize, id: PacketId, wire: u32, pool: &mut PacketPool) {
        pool.push_back(&mut self.queues[class], id);
        self.queue_bytes[class] += wire as u64;
        let total = self.total_queue_bytes();
        self.counters.max_queue_bytes = self.counters.max_queue_bytes.max(total);
    }

    /// The highest-priority class that has a packet and is not paused.
    pub fn next_class(&self) -> Option<usize> {
        (0..CLASSES).find(|&c| !self.paused[c] && !self.queues[c].is_empty())
    }

    /// Takes the packet at the front of `class`, of `wire` bytes.
    pub fn dequeue(&mut self, class: usize, wire: u32, pool: &mut PacketPool) -> Option<PacketId> {
        let id = pool.pop_front(&mut self.queues[class])?;
        self.queue_bytes[class] -= wire as u64;
        Some(id)
    }

    pub fn total_queue_bytes(&self) -> u64 {
        self.queue_bytes.iter().sum()
    }

    /// Starts serializing `wire` bytes at `now`; returns when the last bit
    /// leaves (the link is busy until then).
    #[inline]
    pub fn start_serializing(&mut self, now: Time, wire: u32) -> Time {
        self.busy_until = now + self.tx_time(wire);
        self.busy_until
    }

    /// A packet of `wire` bytes carrying `payload` left on the wire.
    #[inline]
    pub fn count_sent(&mut self, wire: u32, payload: u32) {
        let c = &mut self.counters;
        c.tx_bytes += wire as u64;
        c.tx_packets += 1;
        c.tx_payload += payload as u64;
    }

    /// A packet queued here was cut to its headers, losing `payload` bytes.
    pub fn count_trim(&mut self, payload: u32) {
        self.counters.trims += 1;
        self.counters.trimmed_payload += payload as u64;
    }

    pub fn count_ecn_mark(&mut self) {
        self.counters.ecn_marks += 1;
    }

    pub fn count_pause_sent(&mut self) {
        self.counters.pauses_sent += 1;
    }

    pub fn count_drop(&mut self, cause: DropCause, payload: u32) {
        self.counters.drops[cause as usize] += 1;
        self.counters.dropped_payload += payload as u64;
    }

    /// Applies a received PFC frame for `class` at `now`.
    pub fn set_paused(&mut self, class: usize, pause: bool, now: Time) {
        if pause == self.paused[class] {
            return;
        }
        if pause {
            self.counters.pauses_received += 1;
            self.paused_since[class] = now;
        } else {
            self.counters.paused_time += now - self.paused_since[class];
        }
        self.paused[class] = pause;
    }

    /// Paused time including a pause still in force at `now`.
    pub fn paused_time_at(&self, now: Time) -> Time {
        let mut t = self.counters.paused_time;
        for c in 0..CLASSES {
            if self.paused[c] {
                t += now - self.paused_since[c];
            }
        }
        t
    }
}
