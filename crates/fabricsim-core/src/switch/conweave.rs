//! ConWeave (Song et al., SIGCOMM 2023), as its authors' ns-3 model runs
//! it (conweave-ns3, conweave-routing.cc and conweave-voq.cc; protocols.md
//! s6.5). Only ToRs take part, and only in data between two ToRs.
//!
//! The source ToR source-routes each flow (source, destination, UDP source
//! port) on a path it picked and counts its time in epochs. The first
//! packet of an epoch asks for an RTT reply (INIT); if the reply is not
//! back by the base RTT plus `reply_deadline_extra`, the next packet is the
//! old path's last (TAIL) and the packets after it take a new path (phase
//! 1), chosen from two random paths, preferring one not reported congested.
//! The epoch ends when the reply comes in time or the TAIL's CLEAR comes
//! back, or when the flow idles past `tx_expiry`.
//!
//! The destination ToR holds new-path packets that overtake the TAIL in a
//! queue of the flow's own (a VOQ) and releases them when the TAIL arrives,
//! or at its estimate of when the TAIL should have arrived (the old path's
//! last delay plus the sending gap, plus `voq_flush_extra`). It answers
//! INIT and TAIL, and tells the source ToR of every ECN-marked packet's
//! path (NOTIFY), which then avoids it for `path_pause`.
//!
//! As in the ns-3 model, held packets take no room in the shared buffer,
//! the tag takes no bytes on the wire, and tables never age (they are exact
//! per flow; the model's path table is a 64K-entry hash).

use super::Routes;
use crate::engine::{FastMap, Rng};
use crate::net::packet::PacketQueue;
use crate::net::{ConweaveConfig, PacketId, PacketPool, Port, PortId};
use crate::topology::NodeId;
use crate::units::Time;

/// Hops of a path that choose among next hops: one byte each, from the
/// source ToR up (a 3-tier Clos climbs two, then descends by single hops).
const PATH_HOPS: u32 = 4;
/// Next hops one byte of a path can name.
pub const PATH_CHOICES: usize = 256;

/// A flow at a switch: the switch, the flow's source and destination NICs
/// and its UDP source port.
type FlowKey = (u32, u32, u32, u16);

/// What a data packet's tag asks of the destination ToR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mark {
    #[default]
    Data,
    /// The first packet of an epoch: reply at once (RTT_REQUEST).
    Init,
    /// The last packet on the old path: the reorder may end (TAIL).
    Tail,
}

/// ConWeave's header on a data packet, from the source ToR to the
/// destination ToR; epoch 0 is no header (epochs count from 1).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tag {
    /// The next-hop choice at each hop, a byte each.
    path: u32,
    /// Switches passed since the source ToR.
    hop: u8,
    epoch: u32,
    /// 0 before the reroute of this epoch, 1 after.
    phase: u8,
    mark: Mark,
    /// When the source ToR sent it.
    sent: Time,
    /// When the source ToR sent this epoch's TAIL (zero before).
    tail: Time,
}

/// What a ToR sends back to a flow's source ToR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// The answer to an INIT (RTT_REPLY).
    RttReply { epoch: u32 },
    /// The answer to a TAIL (CLEAR).
    Clear { epoch: u32 },
    /// A packet on `path` to `dst_tor` arrived ECN-marked.
    Notify { path: u32, dst_tor: NodeId },
}

impl Signal {
    /// The signal as a control packet's fields: (code, word, word).
    pub fn encode(self) -> (u16, u32, u32) {
        match self {
            Signal::RttReply { epoch } => (1, epoch, 0),
            Signal::Clear { epoch } => (2, epoch, 0),
            Signal::Notify { path, dst_tor } => (3, dst_tor.0, path),
        }
    }

    pub fn decode(code: u16, a: u32, b: u32) -> Option<Signal> {
        match code {
            1 => Some(Signal::RttReply { epoch: a }),
            2 => Some(Signal::Clear { epoch: a }),
            3 => Some(Signal::Notify { path: b, dst_tor: NodeId(a) }),
            _ => None,
        }
    }
}

/// A path from a source ToR toward a NIC, as a walk of the routes found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walk {
    /// The choices, each reduced to its group's size.
    pub path: u32,
    pub dst_tor: NodeId,
    /// Propagation from the source ToR to the destination ToR.
    pub one_way: Time,
}

/// Follows `raw`'s choices from `from` toward `dst`: the path, where it
/// ends and how long it takes. None where the routes have no way on or the
/// path climbs further than a tag names.
pub fn walk(routes: &Routes, ports: &[Port], from: NodeId, dst: NodeId, raw: u32) -> Option<Walk> {
    let (mut node, mut path, mut one_way) = (from, 0u32, Time::ZERO);
    for hop in 0..=PATH_HOPS {
        let hops = routes.next_hops(node, dst);
        if hops.is_empty() {
            return None;
        }
        let digit = if hop < PATH_HOPS { (raw >> (8 * hop)) as usize % PATH_CHOICES % hops.len() } else { 0 };
        let port = &ports[hops[digit].0 as usize];
        if port.faces_nic {
            return Some(Walk { path, dst_tor: node, one_way });
        }
        if hop == PATH_HOPS {
            return None;
        }
        path |= (digit as u32) << (8 * hop);
        one_way += port.delay;
        node = ports[hops[digit].peer().0 as usize].node;
    }
    None
}

/// A source ToR's state of one flow.
#[derive(Clone, Copy, Debug)]
struct Sender {
    stabilized: bool,
    active: Time,
    /// When the INIT's reply is due; `Time::MAX` once answered or late.
    reply_due: Time,
    epoch: u32,
    phase: u8,
    path: u32,
    /// Propagation there and back between the two ToRs.
    base_rtt: Time,
    tail: Time,
}

/// A destination ToR's state of one flow.
#[derive(Clone, Copy, Debug)]
struct Receiver {
    epoch: u32,
    phase: u8,
    /// The source ToR's send time and this ToR's arrival time of the last
    /// old-path packet.
    phase0_sent: Time,
    phase0_arrived: Time,
    /// Whether an old-path packet of this epoch has been seen.
    phase0_seen: bool,
    tail: Time,
    /// Holding packets in the flow's VOQ.
    reordering: bool,
}

impl Default for Receiver {
    fn default() -> Self {
        // The sender's first epoch is 1.
        Receiver {
            epoch: 1,
            phase: 0,
            phase0_sent: Time::ZERO,
            phase0_arrived: Time::ZERO,
            phase0_seen: false,
            tail: Time::ZERO,
            reordering: false,
        }
    }
}

/// A flow's held packets at its destination ToR.
struct Voq {
    flow: FlowKey,
    packets: PacketQueue,
    held: u32,
    /// When it is to be flushed: of the flush events scheduled for it, the
    /// one due at this time (the latest schedule) flushes it.
    flush_at: Time,
    open: bool,
}

/// What the destination ToR does with a data packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Hold it in this VOQ (`hold`) instead of delivering it.
    pub hold: Option<u32>,
    /// (Re)schedule a VOQ's flush: (VOQ, when).
    pub flush: Option<(u32, Time)>,
}

/// Counts of what ConWeave did, for the summary.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConweaveCounters {
    pub reroutes: u64,
    pub rtt_replies: u64,
    pub timely_replies: u64,
    pub clears: u64,
    pub notifies: u64,
    pub held_packets: u64,
    pub voq_flushes: u64,
    pub flushes_by_tail: u64,
    pub max_voq_packets: u32,
}

pub struct Conweave {
    cfg: ConweaveConfig,
    senders: FastMap<FlowKey, Sender>,
    receivers: FastMap<FlowKey, Receiver>,
    /// Per source ToR, destination ToR and path: until when it is avoided.
    paused: FastMap<(u32, u32, u32), Time>,
    /// Tags of packets in flight, by packet id.
    tags: Vec<Tag>,
    voqs: Vec<Voq>,
    free_voqs: Vec<u32>,
    voq_of: FastMap<FlowKey, u32>,
    rng: Rng,
    counters: ConweaveCounters,
}

impl Conweave {
    pub fn new(cfg: &ConweaveConfig, seed: u64) -> Conweave {
        Conweave {
            cfg: cfg.clone(),
            senders: FastMap::default(),
            receivers: FastMap::default(),
            paused: FastMap::default(),
            tags: Vec::new(),
            voqs: Vec::new(),
            free_voqs: Vec::new(),
            voq_of: FastMap::default(),
            rng: Rng::stream(seed, &[0xC0_3EA5E]),
            counters: ConweaveCounters::default(),
        }
    }

    pub fn counters(&self) -> ConweaveCounters {
        self.counters
    }

    /// Packets held in VOQs now.
    pub fn held(&self) -> u64 {
        self.voq_of.values().map(|&v| self.voqs[v as usize].held as u64).sum()
    }

    /// A data packet `id` of flow (`src`, `dst`, `entropy`) enters its
    /// source ToR `switch` at `now`: stamps its tag and returns its path.
    /// `sample` walks a path from a random choice; None when the routes
    /// give no path (the packet goes untagged, and is routed by ECMP).
    pub fn on_source(
        &mut self,
        switch: NodeId,
        (src, dst, entropy): (NodeId, NodeId, u16),
        id: PacketId,
        now: Time,
        sample: &dyn Fn(u32) -> Option<Walk>,
    ) -> Option<u32> {
        if let Some(tag) = self.tags.get_mut(id.0 as usize) {
            tag.epoch = 0;
        }
        let cfg = &self.cfg;
        let s = self.senders.entry((switch.0, src.0, dst.0, entropy)).or_insert(Sender {
            stabilized: false,
            active: Time::ZERO,
            reply_due: Time::ZERO,
            epoch: 0,
            phase: 0,
            path: 0,
            base_rtt: Time::ZERO,
            tail: Time::ZERO,
        });
        // A flow's first packet finds epoch 0.
        let fresh = s.epoch == 0;
        let expired = fresh || s.active + cfg.tx_expiry < now;
        let new_epoch = expired || s.stabilized;
        let timed_out = !new_epoch && s.reply_due < now;
        // Where the flow may move: two random candidates, the first not
        // reported congested (the model draws them for every packet and
        // reads them only here).
        let mut good = None;
        if expired || timed_out {
            let a = sample(self.rng.next_u64() as u32)?;
            let b = sample(self.rng.next_u64() as u32)?;
            let avoided =
                |w: &Walk| self.paused.get(&(switch.0, w.dst_tor.0, w.path)).is_some_and(|&until| until > now);
            good = [a, b].into_iter().find(|w| !avoided(w));
            if fresh {
                s.path = good.unwrap_or(a).path;
            }
            s.base_rtt = a.one_way + a.one_way;
        }
        s.stabilized = false;
        s.active = now;
        if new_epoch {
            s.reply_due = now + s.base_rtt + cfg.reply_deadline_extra;
            s.epoch += 1;
            s.phase = 0;
            s.tail = Time::ZERO;
        } else if timed_out {
            s.reply_due = Time::MAX;
            s.phase = 1;
            s.tail = now;
        }
        // A new epoch after idling takes the good path at once; a late
        // reply sends this packet, the TAIL, on the old path and the next
        // ones on the new.
        let taken = s.path;
        if let Some(g) = good.filter(|g| g.path != s.path) {
            self.counters.reroutes += 1;
            s.path = g.path;
        }
        let (path, mark, phase) = if timed_out {
            (taken, Mark::Tail, 0)
        } else if new_epoch {
            (s.path, Mark::Init, 0)
        } else {
            (s.path, Mark::Data, s.phase)
        };
        // The source ToR is hop 0 and takes the path's first choice itself.
        let tag = Tag { path, hop: 1, epoch: s.epoch, phase, mark, sent: now, tail: s.tail };
        let i = id.0 as usize;
        if self.tags.len() <= i {
            self.tags.resize(i + 1, Tag::default());
        }
        self.tags[i] = tag;
        Some(path)
    }

    /// The next hop of tagged packet `id` among `hops` at a switch past its
    /// source ToR (`hop` counted from 0 there), counting the hop.
    pub fn on_transit(&mut self, id: PacketId, hops: &[PortId]) -> Option<PortId> {
        let tag = self.tags.get_mut(id.0 as usize).filter(|t| t.epoch != 0)?;
        let port = Self::hop_along(tag.path, tag.hop, hops);
        tag.hop = tag.hop.saturating_add(1);
        port
    }

    /// The port `path` takes among `hops` at its `hop`th switch.
    pub fn hop_along(path: u32, hop: u8, hops: &[PortId]) -> Option<PortId> {
        let digit = if (hop as u32) < PATH_HOPS { (path >> (8 * hop as u32)) as usize & 0xFF } else { 0 };
        (!hops.is_empty()).then(|| hops[digit % hops.len()])
    }

    /// A tagged data packet `id` of flow (`src`, `dst`, `entropy`) reaches
    /// its destination ToR `switch` at `now`, ECN-marked or not: whether to
    /// hold it, and the signals to send its source ToR.
    pub fn on_destination(
        &mut self,
        switch: NodeId,
        (src, dst, entropy): (NodeId, NodeId, u16),
        id: PacketId,
        marked: bool,
        now: Time,
        signals: &mut Vec<Signal>,
    ) -> Arrival {
        let key = (switch.0, src.0, dst.0, entropy);
        let Some(tag) = self.tags.get_mut(id.0 as usize).map(std::mem::take).filter(|t| t.epoch != 0) else {
            return Arrival::default();
        };
        let cfg = &self.cfg;
        let r = self.receivers.entry(key).or_default();
        if r.epoch > tag.epoch {
            // A straggler of an earlier epoch: nothing to order it against.
            return Arrival::default();
        }
        let new_epoch = r.epoch < tag.epoch;
        r.epoch = tag.epoch;
        if tag.phase == 0 {
            r.phase0_sent = tag.sent;
            r.phase0_arrived = now;
        }
        let mut out_of_order = false;
        if new_epoch {
            r.phase = u8::from(tag.mark == Mark::Tail);
            out_of_order = tag.phase > r.phase;
            r.phase0_seen = tag.phase == 0;
        } else {
            if tag.mark == Mark::Tail {
                // While reordering, the phase turns when the VOQ is flushed.
                if !r.reordering {
                    r.phase = 1;
                }
            } else if r.phase < tag.phase {
                out_of_order = true;
            }
            r.phase0_seen |= tag.phase == 0;
        }
        if tag.mark == Mark::Tail || tag.phase == 1 {
            r.tail = tag.tail;
        }
        // When the old path's TAIL should arrive: the last old-path packet's
        // arrival plus the gap the source ToR left between it and the TAIL.
        let gap = if r.phase0_seen { r.tail.saturating_sub(r.phase0_sent) } else { cfg.voq_default_wait };
        let flush_at = if tag.phase == 1 {
            let from = if r.phase0_seen { r.phase0_arrived } else { now };
            from + gap + cfg.voq_flush_extra
        } else if tag.mark == Mark::Tail {
            // Almost at once, 1ns, as the model schedules it.
            now + Time::from_ns(1)
        } else {
            now + gap + cfg.voq_flush_extra
        }
        .max(now);
        let mut arrival = Arrival::default();
        if tag.phase == 0 && r.reordering {
            if tag.mark == Mark::Tail {
                self.counters.flushes_by_tail += 1;
            }
            let v = self.voq_of[&key];
            arrival.flush = Some(self.reschedule(v, flush_at));
        } else if tag.phase == 1 && out_of_order {
            let v = match self.voq_of.get(&key) {
                Some(&v) => v,
                None => {
                    r.reordering = true;
                    let v = self.open_voq(key);
                    arrival.flush = Some(self.reschedule(v, flush_at));
                    v
                }
            };
            arrival.hold = Some(v);
        }
        if marked {
            self.counters.notifies += 1;
            signals.push(Signal::Notify { path: tag.path, dst_tor: switch });
        }
        match tag.mark {
            Mark::Init => {
                self.counters.rtt_replies += 1;
                signals.push(Signal::RttReply { epoch: tag.epoch });
            }
            Mark::Tail => {
                self.counters.clears += 1;
                signals.push(Signal::Clear { epoch: tag.epoch });
            }
            Mark::Data => {}
        }
        arrival
    }

    fn open_voq(&mut self, flow: FlowKey) -> u32 {
        let voq = Voq { flow, packets: PacketQueue::default(), held: 0, flush_at: Time::MAX, open: true };
        let v = match self.free_voqs.pop() {
            Some(v) => {
                self.voqs[v as usize] = voq;
                v
            }
            None => {
                self.voqs.push(voq);
                (self.voqs.len() - 1) as u32
            }
        };
        self.voq_of.insert(flow, v);
        v
    }

    fn reschedule(&mut self, v: u32, at: Time) -> (u32, Time) {
        self.voqs[v as usize].flush_at = at;
        (v, at)
    }

    /// Holds packet `id` in VOQ `v`.
    pub fn hold(&mut self, v: u32, id: PacketId, pool: &mut PacketPool) {
        let voq = &mut self.voqs[v as usize];
        pool.push_back(&mut voq.packets, id);
        voq.held += 1;
        self.counters.held_packets += 1;
        self.counters.max_voq_packets = self.counters.max_voq_packets.max(voq.held);
    }

    /// A flush event of VOQ `v` is due at `now`: if it is the one the VOQ
    /// waits for (an earlier schedule's event finds the VOQ waiting for a
    /// later time; a later one's finds it flushed), appends its packets, in
    /// order, to `out`, ends the flow's reordering and frees the VOQ.
    pub fn flush(&mut self, v: u32, now: Time, pool: &mut PacketPool, out: &mut Vec<PacketId>) {
        let voq = &mut self.voqs[v as usize];
        if !voq.open || now < voq.flush_at {
            return;
        }
        while let Some(id) = pool.pop_front(&mut voq.packets) {
            out.push(id);
        }
        voq.held = 0;
        voq.open = false;
        let flow = voq.flow;
        self.voq_of.remove(&flow);
        self.free_voqs.push(v);
        self.counters.voq_flushes += 1;
        if let Some(r) = self.receivers.get_mut(&flow) {
            r.reordering = false;
            r.phase = 1;
        }
    }

    /// A signal from `from_tor` about flow (`src`, `dst`, `entropy`) (the
    /// data's direction) reaches its source ToR `switch` at `now`.
    pub fn on_signal(&mut self, switch: NodeId, (src, dst, entropy): (NodeId, NodeId, u16), signal: Signal, now: Time) {
        let key = (switch.0, src.0, dst.0, entropy);
        match signal {
            Signal::Notify { path, dst_tor } => {
                self.paused.insert((switch.0, dst_tor.0, path), now + self.cfg.path_pause);
            }
            Signal::RttReply { epoch } => {
                let Some(s) = self.senders.get_mut(&key) else { return };
                if epoch == s.epoch && s.phase == 0 && now < s.reply_due && s.reply_due != Time::MAX {
                    s.stabilized = true;
                    s.reply_due = Time::MAX;
                    self.counters.timely_replies += 1;
                }
            }
            Signal::Clear { epoch } => {
                let Some(s) = self.senders.get_mut(&key) else { return };
                if epoch == s.epoch && s.phase == 1 {
                    s.stabilized = true;
                    s.reply_due = Time::MAX;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::{Packet, PacketKind};

    const TOR: NodeId = NodeId(0);
    const DST_TOR: NodeId = NodeId(9);
    const FLOW: (NodeId, NodeId, u16) = (NodeId(100), NodeId(200), 4791);

    /// Paths by the low bit of the random choice: 0 or 1, 2us each way.
    fn two_paths(raw: u32) -> Option<Walk> {
        Some(Walk { path: raw & 1, dst_tor: DST_TOR, one_way: Time::from_us(2) })
    }

    fn packets(pool: &mut PacketPool, n: usize) -> Vec<PacketId> {
        (0..n)
            .map(|i| pool.alloc(Packet::control(PacketKind::Data, FLOW.0, FLOW.1, 0, i as u32, FLOW.2, 100)))
            .collect()
    }

    fn tag(cw: &Conweave, id: PacketId) -> Tag {
        cw.tags[id.0 as usize]
    }

    #[test]
    fn a_timely_reply_opens_a_new_epoch_and_a_late_one_sends_a_tail_and_moves_the_flow() {
        let mut pool = PacketPool::default();
        let ids = packets(&mut pool, 6);
        let mut cw = Conweave::new(&ConweaveConfig::default(), 1);
        let us = Time::from_us;
        let first = cw.on_source(TOR, FLOW, ids[0], us(0), &two_paths).unwrap();
        assert_eq!((tag(&cw, ids[0]).epoch, tag(&cw, ids[0]).mark), (1, Mark::Init));
        // The reply within the base RTT (4us) plus 4us: the next packet starts epoch 2.
        cw.on_signal(TOR, FLOW, Signal::RttReply { epoch: 1 }, us(5));
        assert_eq!(cw.on_source(TOR, FLOW, ids[1], us(6), &two_paths), Some(first));
        assert_eq!((tag(&cw, ids[1]).epoch, tag(&cw, ids[1]).mark), (2, Mark::Init));
        // No reply by 6 + 8us: the next packet is the TAIL, still on the old path...
        cw.on_source(TOR, FLOW, ids[2], us(10), &two_paths);
        assert_eq!(tag(&cw, ids[2]).mark, Mark::Data, "within the deadline");
        assert_eq!(cw.on_source(TOR, FLOW, ids[3], us(15), &two_paths), Some(first));
        let tail = tag(&cw, ids[3]);
        assert_eq!((tail.epoch, tail.phase, tail.mark, tail.tail), (2, 0, Mark::Tail, us(15)));
        // ...and the packets after it take phase 1 on a good path drawn then.
        let next = cw.on_source(TOR, FLOW, ids[4], us(16), &two_paths).unwrap();
        let t = tag(&cw, ids[4]);
        assert_eq!((t.epoch, t.phase, t.mark, t.tail), (2, 1, Mark::Data, us(15)));
        // A reply to the INIT now is too late to count; the CLEAR ends the epoch.
        cw.on_signal(TOR, FLOW, Signal::RttReply { epoch: 2 }, us(17));
        cw.on_source(TOR, FLOW, ids[5], us(18), &two_paths);
        assert_eq!(tag(&cw, ids[5]).epoch, 2);
        cw.on_signal(TOR, FLOW, Signal::Clear { epoch: 2 }, us(19));
        assert_eq!(cw.on_source(TOR, FLOW, ids[5], us(20), &two_paths), Some(next));
        assert_eq!((tag(&cw, ids[5]).epoch, tag(&cw, ids[5]).mark), (3, Mark::Init));
    }

    #[test]
    fn a_notified_path_is_avoided_for_the_pause() {
        let mut pool = PacketPool::default();
        let ids = packets(&mut pool, 1);
        let cfg = ConweaveConfig::default();
        let mut cw = Conweave::new(&cfg, 1);
        cw.on_signal(TOR, FLOW, Signal::Notify { path: 0, dst_tor: DST_TOR }, Time::ZERO);
        // New flows draw two paths and take the first not paused: path 0
        // only when both draws are it, a quarter of the time...
        let on_path_0 = |cw: &mut Conweave, flows: std::ops::Range<u16>, at: Time| {
            flows.filter(|&k| cw.on_source(TOR, (FLOW.0, FLOW.1, k), ids[0], at, &two_paths) == Some(0)).count()
        };
        let paused = on_path_0(&mut cw, 0..400, Time::from_us(1));
        // ...and half the time once the pause is over.
        let after = on_path_0(&mut cw, 1000..1400, cfg.path_pause + Time::from_us(1));
        assert!((60..140).contains(&paused), "{paused} of 400");
        assert!((160..240).contains(&after), "{after} of 400");
    }

    /// Tags packets as the source ToR would: `(phase, mark, sent)`, epoch 1.
    fn stamp(cw: &mut Conweave, id: PacketId, phase: u8, mark: Mark, sent: Time, tail: Time) {
        let i = id.0 as usize;
        if cw.tags.len() <= i {
            cw.tags.resize(i + 1, Tag::default());
        }
        cw.tags[i] = Tag { path: phase as u32, hop: 2, epoch: 1, phase, mark, sent, tail };
    }

    #[test]
    fn new_path_packets_that_overtake_the_tail_wait_for_it_and_leave_in_order() {
        let mut pool = PacketPool::default();
        let ids = packets(&mut pool, 5);
        let mut cw = Conweave::new(&ConweaveConfig::default(), 1);
        let us = Time::from_us;
        let mut signals = Vec::new();
        // Old path: a packet sent at 0 arrives at 3.
        stamp(&mut cw, ids[0], 0, Mark::Init, us(0), Time::ZERO);
        let a = cw.on_destination(DST_TOR, FLOW, ids[0], false, us(3), &mut signals);
        assert_eq!(a, Arrival::default());
        assert_eq!(signals, [Signal::RttReply { epoch: 1 }]);
        // The TAIL left at 10; two new-path packets overtake it.
        stamp(&mut cw, ids[1], 1, Mark::Data, us(11), us(10));
        let a = cw.on_destination(DST_TOR, FLOW, ids[1], false, us(12), &mut signals);
        let voq = a.hold.expect("held");
        // Expected: old path's last arrival 3 + the 10us gap + 16us slack.
        assert_eq!(a.flush.map(|f| f.1), Some(us(29)));
        cw.hold(voq, ids[1], &mut pool);
        stamp(&mut cw, ids[2], 1, Mark::Data, us(12), us(10));
        let b = cw.on_destination(DST_TOR, FLOW, ids[2], true, us(13), &mut signals);
        assert_eq!(b, Arrival { hold: Some(voq), flush: None });
        cw.hold(voq, ids[2], &mut pool);
        assert_eq!(signals.last(), Some(&Signal::Notify { path: 1, dst_tor: DST_TOR }));
        // The TAIL arrives: it goes on, and the VOQ is released 1ns later, in order.
        stamp(&mut cw, ids[3], 0, Mark::Tail, us(10), us(10));
        let t = cw.on_destination(DST_TOR, FLOW, ids[3], false, us(14), &mut signals);
        assert_eq!(t.hold, None);
        let (v, at) = t.flush.expect("rescheduled");
        assert_eq!((v, at), (voq, us(14) + Time::from_ns(1)));
        assert_eq!(signals.last(), Some(&Signal::Clear { epoch: 1 }));
        let mut out = Vec::new();
        cw.flush(voq, at, &mut pool, &mut out);
        assert_eq!(out, [ids[1], ids[2]]);
        // The first schedule's event, later, finds it flushed.
        cw.flush(voq, us(29), &mut pool, &mut out);
        assert_eq!(out.len(), 2);
        // In order from now on: phase 1 passes.
        stamp(&mut cw, ids[4], 1, Mark::Data, us(14), us(10));
        assert_eq!(cw.on_destination(DST_TOR, FLOW, ids[4], false, us(15), &mut signals), Arrival::default());
        assert_eq!(cw.counters().held_packets, 2);
    }

    #[test]
    fn without_the_old_paths_timing_the_voq_waits_the_default() {
        let mut pool = PacketPool::default();
        let ids = packets(&mut pool, 1);
        let cfg = ConweaveConfig::default();
        let mut cw = Conweave::new(&cfg, 1);
        stamp(&mut cw, ids[0], 1, Mark::Data, Time::from_us(1), Time::from_us(1));
        let a = cw.on_destination(DST_TOR, FLOW, ids[0], false, Time::from_us(5), &mut Vec::new());
        assert!(a.hold.is_some());
        let expected = Time::from_us(5) + cfg.voq_default_wait + cfg.voq_flush_extra;
        assert_eq!(a.flush.map(|f| f.1), Some(expected));
    }
}
