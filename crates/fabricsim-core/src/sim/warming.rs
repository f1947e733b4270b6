//! Loading what the coming events will touch while one is handled: at
//! 8,192 hosts the run waits on memory, where a miss costs 120-250 ns
//! (docs/PERFORMANCE.md). The events due at the current instant are known
//! ahead (the queue's first bucket), and their data is loaded in two
//! stages, the second using what the first brought in. Where the instant
//! holds `FIRST_STAGE` more events after the next one, the first stage
//! loads that event's packet (an arrival) or port (a `TxDone`), and the
//! second, `SECOND_STAGE` after the next, works out where an arrival at a
//! hashing switch leaves (its egress port, loaded and kept in `NextHops`
//! so that `forward` neither waits on the port nor looks the route up
//! again), or loads the QP an arrival at a NIC is for, or the packet a
//! `TxDone` sends. Where it holds fewer, the stages are the event after
//! the next and the next, as far ahead as is known, and the second reads
//! no packet the first only began to load. Prefetches are hints: what
//! they load changes no result.

use super::{Event, Simulation};
use crate::engine::{prefetch, prefetch_lines};
use crate::ids::QpId;
use crate::net::{PacketId, PortId, HOT_LINES};
use crate::switch::Balancer;

/// How many events after the next one each stage looks, where that many
/// are known: three events apart, for a miss to be served (about 300 ns
/// an event at 8,192 hosts); 5 and 2 measured fastest of (3, 1), (5, 2)
/// and (8, 3) there (docs/PERFORMANCE.md).
const FIRST_STAGE: usize = 5;
const SECOND_STAGE: usize = 2;

/// Slots of `NextHops`: more than the arrivals between the two stages.
const SLOTS: usize = 8;

/// Egress ports worked out ahead for arrivals at switches that hash
/// (ECMP), by packet, direct-mapped. An arrival always takes its packet's
/// slot, so an entry never outlives the arrival it was made for; a change
/// of the routes empties them all.
pub(super) struct NextHops {
    /// (packet, egress port); `EMPTY` for none.
    slots: [(u32, PortId); SLOTS],
}

const EMPTY: u32 = u32::MAX;

impl Default for NextHops {
    fn default() -> Self {
        NextHops { slots: [(EMPTY, PortId(0)); SLOTS] }
    }
}

impl NextHops {
    pub(super) fn put(&mut self, id: PacketId, out: PortId) {
        self.slots[id.0 as usize % SLOTS] = (id.0, out);
    }

    /// The egress port worked out for packet `id`, if it is still kept.
    pub(super) fn take(&mut self, id: PacketId) -> Option<PortId> {
        let slot = &mut self.slots[id.0 as usize % SLOTS];
        (slot.0 == id.0).then(|| {
            slot.0 = EMPTY;
            slot.1
        })
    }

    pub(super) fn clear(&mut self) {
        self.slots = [(EMPTY, PortId(0)); SLOTS];
    }
}

impl Simulation {
    /// Starts loading what the coming events will touch (module doc).
    pub(super) fn warm_up_next(&mut self) {
        if self.events.peek_ahead(FIRST_STAGE).is_some() {
            self.warm_up_stages(FIRST_STAGE, SECOND_STAGE);
        } else {
            self.warm_up_stages(1, 0);
        }
    }

    /// The second stage for the event `second` after the next, the first
    /// for the one `first` after it.
    fn warm_up_stages(&mut self, first: usize, second: usize) {
        match self.events.peek_ahead(second).copied() {
            Some(Event::Arrive(id)) if second > 0 => self.warm_up_arrival(id),
            // The next event: its packet, on its way from the first stage,
            // is read here rather than where it is handled, for the line of
            // the port it enters by (a NIC reads the port's index there).
            Some(Event::Arrive(id)) => prefetch(&self.ports[PortId(self.pool.get(id).port).peer().0 as usize].node),
            Some(Event::TxDone(port)) => {
                let at = &self.ports[port.0 as usize];
                prefetch_lines(at, 0..HOT_LINES);
                // Control packets go first.
                if let Some(id) = at.next_class().and_then(|class| at.queues[class].front()) {
                    prefetch(self.pool.get(id));
                }
            }
            _ => {}
        }
        match self.events.peek_ahead(first).copied() {
            Some(Event::Arrive(id)) => prefetch(self.pool.get(id)),
            Some(Event::TxDone(port)) => prefetch_lines(&self.ports[port.0 as usize], 0..HOT_LINES),
            _ => {}
        }
    }

    /// The second stage of an arrival, its packet loaded by the first.
    fn warm_up_arrival(&mut self, id: PacketId) {
        let pkt = self.pool.get(id);
        let into = PortId(pkt.port).peer();
        let node = self.topo.port_node(into);
        match &self.switches[node.0 as usize] {
            Some(sw) if self.srv6.is_none() && matches!(self.balancer, Balancer::Hash) => {
                if let Some(out) = self.hashed_next_hop(node, sw, pkt) {
                    prefetch_lines(&self.ports[out.0 as usize], 0..HOT_LINES);
                    self.next_hops.put(id, out);
                }
            }
            Some(_) => {}
            None => {
                // A probe's `qp` names no QP.
                if (pkt.qp as usize) < self.qps.len() {
                    prefetch(&self.qps[QpId(pkt.qp)]);
                }
                prefetch(&self.ports[into.0 as usize].index);
            }
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
        hops.put(PacketId(12), PortId(41));
        assert_eq!(hops.take(PacketId(3 + SLOTS as u32)), None, "another packet of the same slot");
        assert_eq!(hops.take(PacketId(3)), Some(PortId(40)));
        assert_eq!(hops.take(PacketId(3)), None, "taken");
        // A later packet of the same slot replaces an entry.
        hops.put(PacketId(12 + SLOTS as u32), PortId(42));
        assert_eq!(hops.take(PacketId(12)), None);
        hops.clear();
        assert_eq!(hops.take(PacketId(12 + SLOTS as u32)), None, "cleared with the routes");
    }
}
