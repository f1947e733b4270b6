//! Loading what the coming events will touch while one is handled: at
//! 8,192 hosts the run waits on memory, where a miss costs 120-250 ns
//! (docs/PERFORMANCE.md). The events due at the current instant are known
//! ahead (the queue's first bucket), and an event's data is reached by a
//! chain of reads (an arrival's packet, the port it entered by, its node,
//! then the route or the QP), so it is loaded as a pipeline: each stage,
//! nearer the event, reads what the stage before loaded and starts loading
//! the next link of the chain. Where the instant holds `PACKET` more
//! events after the next one:
//! - `PACKET` ahead: an arrival's packet, a `TxDone`'s port;
//! - `ENTRY` ahead: the link record that names the arrival's node; the
//!   packet the port sends next, or at a NIC with nothing queued its
//!   scheduler;
//! - `NODE` ahead: the switch's state and route row, or the QP's record at
//!   a NIC; for that NIC port, the record of the QP it pulls from first;
//! - `ROUTE` ahead: at a hashing switch, its egress port, worked out and
//!   loaded and kept in `NextHops` (so that `forward` neither waits on the
//!   port nor looks the route up again); at a NIC, the transport's own
//!   lines (`Transport::warm`); a `TxDone`'s next packet, again;
//! - `REACHED` ahead: at a NIC, what the transport's lines point to.
//!
//! Where it holds fewer, the stages are the event after the next and the
//! next, as far ahead as is known, and the second reads no packet the
//! first only began to load. Prefetches are hints: what they load changes
//! no result.

use super::{Event, Simulation};
use crate::engine::{prefetch, prefetch_lines};
use crate::ids::QpId;
use crate::net::{PacketId, PortId, HOT_LINES};
use crate::switch::Balancer;
use crate::topology::NodeId;
use crate::transport::{Transport, Warm};

/// How many events after the next one each stage looks, where that many
/// are known: two events apart along an arrival's chain (about 300-600 ns
/// an event at 8,192 hosts, a miss served in 120-250 ns), one between the
/// transport's two stages; of (5, 4, 3, 2, 1), (7, 5, 3, 2, 1),
/// (8, 6, 4, 2, 1) and (9, 6, 3, 2, 1), the middle two measured fastest
/// there (docs/PERFORMANCE.md).
const PACKET: usize = 8;
const ENTRY: usize = 6;
const NODE: usize = 4;
const ROUTE: usize = 2;
const REACHED: usize = 1;

/// Ports `NextHops` keeps: more than the arrivals between the route's
/// stage and the event (`ROUTE` + 1).
const KEPT: usize = 4;

/// Egress ports worked out ahead for arrivals at switches that hash
/// (ECMP), in the order of their arrivals, which are handled in that
/// order: an arrival takes its own and drops any kept before it (none
/// should be), and the oldest goes when a fifth is kept, so an entry never
/// outlives the arrival it was made for; a change of the routes empties
/// them all. (Kept by packet id in 8 direct-mapped slots instead, 30% of
/// them at 8,192 hosts were overwritten before their arrival, and the
/// route looked up again.)
pub(super) struct NextHops {
    /// (packet, egress port), the oldest at `start`.
    kept: [(u32, PortId); KEPT],
    start: usize,
    len: usize,
}

impl Default for NextHops {
    fn default() -> Self {
        NextHops { kept: [(0, PortId(0)); KEPT], start: 0, len: 0 }
    }
}

impl NextHops {
    /// Keeps `out` for the arrival of `id`, in place of any kept for it
    /// already: an arrival is worked out again when an early event ran
    /// before it, and a second entry would outlive it, to be taken by the
    /// packet's arrival at its next switch.
    pub(super) fn put(&mut self, id: PacketId, out: PortId) {
        if let Some(k) = self.position(id) {
            self.kept[(self.start + k) % KEPT].1 = out;
            return;
        }
        if self.len == KEPT {
            self.start = (self.start + 1) % KEPT;
            self.len -= 1;
        }
        self.kept[(self.start + self.len) % KEPT] = (id.0, out);
        self.len += 1;
    }

    /// The egress port worked out for packet `id`, if it is still kept.
    pub(super) fn take(&mut self, id: PacketId) -> Option<PortId> {
        let k = self.position(id)?;
        let (_, out) = self.kept[(self.start + k) % KEPT];
        self.start = (self.start + k + 1) % KEPT;
        self.len -= k + 1;
        Some(out)
    }

    pub(super) fn clear(&mut self) {
        self.len = 0;
    }

    /// Where the entry for `id` is, counted from the oldest.
    fn position(&self, id: PacketId) -> Option<usize> {
        (0..self.len).find(|&k| self.kept[(self.start + k) % KEPT].0 == id.0)
    }
}

impl Simulation {
    /// Starts loading what the coming events will touch (module doc).
    pub(super) fn warm_up_next(&mut self) {
        let ahead = self.events.ahead();
        if ahead.len() <= PACKET {
            let at = |k: usize| ahead.get(k).map(|&(_, e)| e);
            let (next, after) = (at(0), at(1));
            self.warm_up_near(next, after);
            return;
        }
        let [reached, route, node, entry, packet] = [REACHED, ROUTE, NODE, ENTRY, PACKET].map(|k| ahead[k].1);
        if let Event::Arrive(id) = reached {
            if self.at_nic(id, self.entered(id).1) {
                self.warm_up_transport(id, Warm::Reached);
            }
        }
        match route {
            Event::Arrive(id) => self.warm_up_route(id),
            Event::TxDone(port) => self.warm_up_next_packet(port),
            _ => {}
        }
        match node {
            Event::Arrive(id) => {
                let (into, node) = self.entered(id);
                if self.at_nic(id, node) {
                    self.warm_up_qp(id, into);
                } else {
                    prefetch(&self.switches[node.0 as usize]);
                    self.routes.prefetch(node, self.pool.get(id).dst);
                }
            }
            Event::TxDone(port) => self.warm_up_puller(port),
            _ => {}
        }
        match entry {
            Event::Arrive(id) => prefetch(self.topo.port_link(self.entering_port(id))),
            Event::TxDone(port) => self.warm_up_next_packet(port),
            _ => {}
        }
        self.warm_up_first(packet);
    }

    /// The first stage: an arrival's packet, a `TxDone`'s port.
    fn warm_up_first(&self, event: Event) {
        match event {
            Event::Arrive(id) => prefetch(self.pool.get(id)),
            Event::TxDone(port) => prefetch_lines(&self.ports[port.0 as usize], 0..HOT_LINES),
            _ => {}
        }
    }

    /// The two stages where few events are known: the event after the
    /// next loads its packet or its port, the next the line of the port
    /// its packet enters by (a NIC reads the port's index there), or what
    /// its port sends next.
    fn warm_up_near(&self, next: Option<Event>, after: Option<Event>) {
        match next {
            Some(Event::Arrive(id)) => prefetch(&self.ports[self.entering_port(id).0 as usize].node),
            Some(Event::TxDone(port)) => self.warm_up_next_packet(port),
            _ => {}
        }
        if let Some(after) = after {
            self.warm_up_first(after);
        }
    }

    /// Whether packet `id` arrives at a NIC at `node`, without reading the
    /// node's state: NICs never transit, so a NIC it reaches is its
    /// destination, and no switch is one.
    fn at_nic(&self, id: PacketId, node: NodeId) -> bool {
        self.pool.get(id).dst == node
    }

    /// The port packet `id` enters by (it names the one it left by).
    fn entering_port(&self, id: PacketId) -> PortId {
        PortId(self.pool.get(id).port).peer()
    }

    /// The port packet `id` enters by, and its node.
    fn entered(&self, id: PacketId) -> (PortId, NodeId) {
        let into = self.entering_port(id);
        (into, self.topo.port_node(into))
    }

    /// A `TxDone`'s port lines and the packet it sends next (control
    /// packets go first), or, at a NIC with nothing queued, the scheduler
    /// that pulls one from its QPs.
    #[inline(always)]
    fn warm_up_next_packet(&self, port: PortId) {
        let at = &self.ports[port.0 as usize];
        prefetch_lines(at, 0..HOT_LINES);
        match at.next_class().and_then(|class| at.queues[class].front()) {
            Some(id) => prefetch(self.pool.get(id)),
            None if at.of_nic => prefetch(&self.sched[port.0 as usize]),
            None => {}
        }
    }

    /// A `TxDone` at a NIC with nothing queued: the record of the QP its
    /// scheduler asks first.
    fn warm_up_puller(&self, port: PortId) {
        let at = &self.ports[port.0 as usize];
        if at.of_nic && at.next_class().is_none() {
            if let Some(qp) = self.sched[port.0 as usize].ready.front().and_then(|&q| self.qps.get(q)) {
                prefetch(&qp.transport);
            }
        }
    }

    /// An arrival at a NIC: the record of its QP and the port's index.
    fn warm_up_qp(&self, id: PacketId, into: PortId) {
        // A probe's `qp` names no QP.
        if let Some(qp) = self.qps.get(QpId(self.pool.get(id).qp)) {
            prefetch(&qp.transport);
        }
        prefetch(&self.ports[into.0 as usize].index);
    }

    /// An arrival at a hashing switch: its egress port, worked out, loaded
    /// and kept; at a NIC, the transport's own lines.
    fn warm_up_route(&mut self, id: PacketId) {
        let (_, node) = self.entered(id);
        if self.at_nic(id, node) {
            self.warm_up_transport(id, Warm::Own);
            return;
        }
        match &self.switches[node.0 as usize] {
            Some(sw) if self.srv6.is_none() && matches!(self.balancer, Balancer::Hash) => {
                if let Some(out) = self.hashed_next_hop(node, sw, self.pool.get(id)) {
                    prefetch_lines(&self.ports[out.0 as usize], 0..HOT_LINES);
                    self.next_hops.put(id, out);
                }
            }
            _ => {}
        }
    }

    /// `Transport::warm` for an arrival at a NIC.
    fn warm_up_transport(&self, id: PacketId, stage: Warm) {
        let pkt = self.pool.get(id);
        if let Some(qp) = self.qps.get(QpId(pkt.qp)) {
            qp.transport.warm(stage, pkt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_next_hop_is_taken_once_by_its_own_packet() {
        let mut hops = NextHops::default();
        hops.put(PacketId(3), PortId(40));
        hops.put(PacketId(11), PortId(41));
        assert_eq!(hops.take(PacketId(7)), None, "an arrival not worked out ahead");
        assert_eq!(hops.take(PacketId(3)), Some(PortId(40)));
        assert_eq!(hops.take(PacketId(3)), None, "taken");
        // Packets whose ids share a residue are both kept (they shared a
        // slot when kept by id).
        hops.put(PacketId(19), PortId(42));
        assert_eq!(hops.take(PacketId(11)), Some(PortId(41)));
        assert_eq!(hops.take(PacketId(19)), Some(PortId(42)));
        // Worked out twice (an early event ran before the arrival): one
        // entry, taken once, not left for the packet's next arrival.
        hops.put(PacketId(23), PortId(43));
        hops.put(PacketId(23), PortId(43));
        assert_eq!(hops.take(PacketId(23)), Some(PortId(43)));
        assert_eq!(hops.take(PacketId(23)), None, "no second entry for the packet's next switch");
        // An arrival drops what was kept before it; the oldest goes first.
        for id in 0..KEPT as u32 + 1 {
            hops.put(PacketId(100 + id), PortId(id));
        }
        assert_eq!(hops.take(PacketId(100)), None, "the oldest went for the fifth");
        assert_eq!(hops.take(PacketId(102)), Some(PortId(2)));
        assert_eq!(hops.take(PacketId(101)), None, "dropped as kept before 102");
        hops.clear();
        assert_eq!(hops.take(PacketId(103)), None, "cleared with the routes");
    }
}
