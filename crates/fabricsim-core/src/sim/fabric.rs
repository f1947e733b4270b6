//! Packets through ports and switches: transmission and the wire, switch
//! forwarding and buffer admission, ECN marking at dequeue, PFC pause and
//! resume, packet trimming, and drops by cause.

use super::partition::{Across, Crossing};
use super::{Event, Simulation, SwitchState};
use crate::ids::QpId;
use crate::net::capture::Hop;
use crate::net::{flag, headers, DropCause, Packet, PacketId, PacketKind, PortId, CLASS_CONTROL, CLASS_DATA, NO_PORT};
use crate::switch::admission::{self, Verdict};
use crate::switch::{ecmp_pick, ecn, srv6, Balancer};
use crate::topology::{NodeId, NodeRole};
use crate::transport::{Transport, TransportSpec};
use crate::units::Time;

impl Simulation {
    /// Starts serializing the next packet if the link is free, or makes sure
    /// the port wakes up when it becomes free.
    pub(super) fn try_transmit(&mut self, port: PortId) {
        let p = port.0 as usize;
        let now = self.now();
        if self.ports[p].busy_until > now {
            if !self.ports[p].tx_done_pending && self.has_work(port) {
                self.ports[p].tx_done_pending = true;
                self.events.schedule(self.ports[p].busy_until, Event::TxDone(port));
            }
            return;
        }
        let is_switch = !self.ports[p].of_nic;
        let class = match self.ports[p].next_class() {
            Some(c) => c,
            // A NIC port pulls its next data packet from the QPs.
            None if !is_switch && self.next_data_packet(port).is_some() => CLASS_DATA,
            None => return,
        };
        let Some(id) = self.ports[p].queues[class].front() else { return };
        let wire = self.pool.get(id).wire();
        self.ports[p].dequeue(class, wire, &mut self.pool);
        if is_switch {
            self.on_switch_dequeue(port, id, class);
        }
        let done = self.ports[p].start_serializing(now, wire);
        self.put_on_wire(port, id, done);
        if self.has_work(port) {
            self.ports[p].tx_done_pending = true;
            self.events.schedule(done, Event::TxDone(port));
        }
    }

    /// Whether a port has something to send once the link is free.
    fn has_work(&self, port: PortId) -> bool {
        let p = &self.ports[port.0 as usize];
        // Only a NIC's port has QPs to ask (and a switch's scheduler is
        // never read: a cache miss saved per packet).
        p.next_class().is_some() || (p.of_nic && !p.paused[CLASS_DATA] && !self.sched[port.0 as usize].ready.is_empty())
    }

    /// Counts the packet as sent and puts it on the wire, where it arrives at
    /// the peer `delay` after its last bit leaves at `done`, unless the link
    /// is down or loses it.
    fn put_on_wire(&mut self, port: PortId, id: PacketId, done: Time) {
        let p = port.0 as usize;
        if self.recorder.captures(port) {
            self.capture_packet(port, id);
        }
        let pkt = self.pool.get(id);
        self.ports[p].count_sent(pkt.wire(), pkt.payload());
        self.recorder.sent(port, self.events.now(), done, pkt.wire() as u64);
        self.totals.packet_hops += 1;
        if !self.ports[p].up {
            self.drop_packet(port, id, DropCause::LinkDown);
        } else if (self.ports[p].loss > 0.0 && self.port_rng[p].chance(self.ports[p].loss))
            || (!self.ev_loss.is_empty() && self.ev_lost(port, id))
        {
            self.drop_packet(port, id, DropCause::LinkLoss);
        } else {
            self.pool.get_mut(id).port = port.0;
            let at = done + self.ports[p].delay;
            if self.cut.as_ref().is_some_and(|cut| cut.crosses(port)) {
                self.send_across(id, at);
            } else {
                self.events.schedule(at, Event::Arrive(id));
            }
        }
    }

    /// Whether injected EV loss takes this packet leaving `port`: data and
    /// the probes that test the EV are lost alike.
    fn ev_lost(&mut self, port: PortId, id: PacketId) -> bool {
        let pkt = self.pool.get(id);
        if !pkt.kind.carries_data() && pkt.kind != PacketKind::Probe {
            return false;
        }
        let ev = pkt.entropy;
        let rate = self.ev_loss.iter().find(|&&(p, e, _)| p == port && e == ev).map(|&(_, _, r)| r);
        rate.is_some_and(|r| self.port_rng[port.0 as usize].chance(r))
    }

    /// Spectrum-X's marking (s4.2): a packet routed adaptively is marked
    /// by how deep the shallowest queue of its group is, `ahead`: only when
    /// no next hop could take it without queueing.
    fn mark_on_exhaustion(&mut self, egress: PortId, id: PacketId, ahead: u64) {
        let p = egress.0 as usize;
        let pkt = self.pool.get(id);
        let mark =
            ecn::mark_probability_behind(&self.scenario.switch.ecn, pkt, pkt.class as usize, &self.ports[p], ahead);
        if mark > 0.0 && self.port_rng[p].chance(mark) {
            self.pool.get_mut(id).flags |= flag::CE;
            self.ports[p].count_ecn_mark();
        }
    }

    /// Buffer release, PFC resume and ECN marking when a switch dequeues
    /// (unless adaptive routing marked on exhaustion as it routed).
    fn on_switch_dequeue(&mut self, port: PortId, id: PacketId, class: usize) {
        self.release_switch_buffer(port, id, class);
        if matches!(self.balancer, Balancer::Adaptive(_)) && self.scenario.switch.adaptive.mark_on_exhaustion {
            return;
        }
        let p = port.0 as usize;
        let mark = ecn::mark_probability(&self.scenario.switch.ecn, self.pool.get(id), class, &self.ports[p]);
        if mark > 0.0 && self.port_rng[p].chance(mark) {
            self.pool.get_mut(id).flags |= flag::CE;
            self.ports[p].count_ecn_mark();
        }
    }

    /// Returns a dequeued packet's bytes to the shared buffer and to its
    /// ingress port's PFC account, resuming the upstream below XON.
    pub(super) fn release_switch_buffer(&mut self, port: PortId, id: PacketId, class: usize) {
        let (wire, ingress) = {
            let pkt = self.pool.get(id);
            (pkt.wire() as u64, pkt.port)
        };
        let node = self.ports[port.0 as usize].node.0 as usize;
        let sw = self.switches[node].as_mut().expect("a switch");
        sw.buffer.release(wire);
        let cfg = &self.scenario.switch;
        let threshold = sw.buffer.xoff_threshold(cfg.pfc.xoff_alpha);
        if ingress != NO_PORT
            && admission::lossless(cfg, class)
            && self.ports[ingress as usize].released_from(class, wire, threshold, cfg.pfc.xon_offset.0)
        {
            self.send_pfc(PortId(ingress), class, false);
        }
    }

    pub(super) fn on_tx_done(&mut self, port: PortId) {
        // A packet sent from elsewhere at the very time this event was due
        // (a switch forwarding into an idle port) moved the port on and
        // scheduled its own wake-up; this one is stale. Letting it clear the
        // flag would leave two wake-ups per packet from then on, and they
        // multiply.
        if self.ports[port.0 as usize].busy_until > self.now() {
            return;
        }
        self.ports[port.0 as usize].tx_done_pending = false;
        self.try_transmit(port);
    }

    pub(super) fn on_arrive(&mut self, id: PacketId) {
        // Taken whatever becomes of the packet: a hint never outlives the
        // arrival it was worked out for.
        let next_hop = self.next_hops.take(id);
        let port = PortId(self.pool.get(id).port);
        if !self.port_up[port.0 as usize] {
            // The link failed while the packet was on it.
            self.drop_packet(port, id, DropCause::LinkDown);
            return;
        }
        let into = port.peer();
        let node = self.topo.port_node(into);
        if self.switches[node.0 as usize].is_some() {
            self.switch_receive(node, into, id, next_hop);
        } else {
            self.nic_receive(into, id);
        }
    }

    /// Sets whether `port` sends (a fault, or its end).
    pub(super) fn set_port_up(&mut self, port: PortId, up: bool) {
        self.ports[port.0 as usize].up = up;
        self.port_up[port.0 as usize] = up;
    }

    /// Forwards a packet that entered `switch` by `ingress`: the route, the
    /// buffer's verdict, PFC's account of the ingress, the egress queue.
    /// `next_hop`: its egress port, when a hashing switch's was worked out
    /// ahead (`warming`).
    fn switch_receive(&mut self, switch: NodeId, ingress: PortId, id: PacketId, next_hop: Option<PortId>) {
        let sw = self.switches[switch.0 as usize].as_ref().expect("a switch");
        if !sw.up {
            self.drop_packet(ingress, id, DropCause::SwitchDown);
            return;
        }
        if matches!(self.balancer, Balancer::Conweave(_)) {
            self.conweave_receive(switch, ingress, id);
            return;
        }
        let mut group_depth = None;
        let pkt = self.pool.get(id);
        let out = match (self.srv6.as_ref(), &mut self.balancer) {
            (Some(srv6), _) => srv6.forward(switch, self.pool.usids_mut(id)),
            (None, Balancer::Adaptive(adaptive)) => {
                let (hops, weights) = self.routes.weighted_next_hops(switch, pkt.dst);
                let (hop, shallowest) = adaptive.route(hops, weights, &self.ports, self.events.now()).unzip();
                group_depth = shallowest;
                hop
            }
            (None, Balancer::Drill(drill)) => {
                let (group, hops) = self.routes.next_hop_group(switch, pkt.dst);
                drill.pick(group, hops, &self.ports)
            }
            (None, Balancer::Letflow(letflow)) => {
                let flow = (pkt.src, pkt.dst, pkt.entropy);
                letflow.pick(switch, flow, self.routes.next_hops(switch, pkt.dst), &self.ports, self.events.now())
            }
            (None, Balancer::ArTomahawk(ar)) => {
                ar.pick(self.routes.next_hops(switch, pkt.dst), &self.ports, self.events.now())
            }
            (None, Balancer::PathId(pro)) => {
                let tier = match self.topo.node(switch).role {
                    NodeRole::Switch { tier, .. } => tier,
                    NodeRole::Nic { .. } => 0,
                };
                pro.forward(switch, tier, pkt.dst, pkt.entropy, &self.routes, &self.ports, self.events.now())
            }
            (None, Balancer::Hash | Balancer::Conweave(_)) => {
                let pick = || self.hashed_next_hop(switch, sw, pkt);
                debug_assert!(next_hop.is_none() || next_hop == pick(), "a next hop worked out ahead holds");
                next_hop.or_else(pick)
            }
        };
        self.forward(switch, Some(ingress), id, out, group_depth);
    }

    /// Where ECMP at `switch` (its state `sw`) sends `pkt`.
    pub(super) fn hashed_next_hop(&self, switch: NodeId, sw: &SwitchState, pkt: &Packet) -> Option<PortId> {
        ecmp_pick(self.routes.next_hops(switch, pkt.dst), pkt.src.0, pkt.dst.0, pkt.entropy, sw.ecmp_seed)
    }

    /// Queues a packet in `switch` at egress `out` as routed (None: no
    /// route), if the buffer admits it and the link is up, and accounts it
    /// to its `ingress` port for PFC (None: the switch made the packet).
    /// `group_depth`: the shallowest queue of its group, where adaptive
    /// routing marks on exhaustion.
    pub(super) fn forward(
        &mut self,
        switch: NodeId,
        ingress: Option<PortId>,
        id: PacketId,
        out: Option<PortId>,
        group_depth: Option<u64>,
    ) {
        let Some(out) = out else {
            let at = ingress.unwrap_or_else(|| self.node_ports[switch.0 as usize][0]);
            self.drop_packet(at, id, DropCause::NoRoute);
            return;
        };
        let o = out.0 as usize;
        if !self.ports[o].up {
            self.drop_packet(out, id, DropCause::LinkDown);
            return;
        }
        if let Some(ahead) = group_depth.filter(|_| self.scenario.switch.adaptive.mark_on_exhaustion) {
            self.mark_on_exhaustion(out, id, ahead);
        }
        let cfg = &self.scenario.switch;
        let pkt = self.pool.get(id);
        let mut class = pkt.class as usize;
        let buffer = &self.switches[switch.0 as usize].as_ref().expect("a switch").buffer;
        let wire = match admission::admit(cfg, buffer, pkt, self.ports[o].queue_bytes[class]) {
            Verdict::Accept { wire } => wire,
            Verdict::Drop => {
                self.drop_packet(out, id, DropCause::Buffer);
                return;
            }
            Verdict::Trim { wire } => {
                self.ports[o].count_trim(pkt.payload());
                let pkt = self.pool.get_mut(id);
                pkt.flags |= flag::TRIMMED;
                pkt.payload = 0;
                pkt.wire = wire as u16;
                pkt.class = CLASS_CONTROL as u8;
                class = CLASS_CONTROL;
                wire
            }
        };
        let lossless = admission::lossless(cfg, class);
        if let Some(ingress) = ingress {
            let headroom = self.headroom[ingress.0 as usize];
            if lossless && !self.ports[ingress.0 as usize].absorb_in_headroom(class, wire, headroom) {
                self.drop_packet(ingress, id, DropCause::Headroom);
                return;
            }
        }
        let sw = self.switches[switch.0 as usize].as_mut().expect("a switch");
        sw.buffer.take(wire);
        let threshold = sw.buffer.xoff_threshold(cfg.pfc.xoff_alpha);
        self.pool.get_mut(id).port = ingress.map_or(NO_PORT, |p| p.0);
        // Only a lossless class's bytes are counted per ingress: PFC alone
        // reads them, and a lossy packet's release then need not load the
        // port it came in by.
        if let Some(ingress) = ingress.filter(|_| lossless) {
            if self.ports[ingress.0 as usize].buffered_from(class, wire, threshold) {
                self.send_pfc(ingress, class, true);
            }
        }
        self.ports[o].enqueue(class, id, wire as u32, &mut self.pool);
        self.try_transmit(out);
    }

    /// Sends a PFC frame out of `port` to pause or resume `class` at the
    /// peer's egress. A MAC control frame goes ahead of queued data; it
    /// reaches the peer after its own serialization and the propagation
    /// delay (its link time is not taken from data: 84 bytes per event).
    fn send_pfc(&mut self, port: PortId, class: usize, pause: bool) {
        let p = &mut self.ports[port.0 as usize];
        if pause {
            p.count_pause_sent();
        }
        let arrival = self.events.now() + p.rate.tx_time(headers::pause_wire() as u64) + p.delay;
        let (peer, class) = (port.peer(), class as u8);
        match self.cut.as_mut().filter(|cut| cut.crosses(port)) {
            Some(cut) => cut.outbox.push(Crossing { at: arrival, what: Across::Pfc { port: peer, class, pause } }),
            None => self.events.schedule(arrival, Event::Pfc { port: peer, class, pause }),
        }
    }

    pub(super) fn on_pfc(&mut self, port: PortId, class: usize, pause: bool) {
        let now = self.now();
        self.ports[port.0 as usize].set_paused(class, pause, now);
        if !pause {
            self.try_transmit(port);
        }
    }

    /// Writes a packet starting to leave `port` into the capture.
    fn capture_packet(&mut self, port: PortId, id: PacketId) {
        let pkt = *self.pool.get(id);
        let message_len = match pkt.kind {
            PacketKind::Data if pkt.has(flag::FIRST) => self.qps[QpId(pkt.qp)].transport.message_bytes(pkt.psn),
            _ => 0,
        };
        let (from, to) = (self.ports[port.0 as usize].node.0, self.ports[port.peer().0 as usize].node.0);
        let outer = self.srv6.is_some().then(|| srv6::address(&self.pool.usids(id)));
        let dest_qp = match pkt.kind {
            // Clustermapper's probes are management traffic: the GSI QP.
            PacketKind::MapProbe => 1,
            _ => {
                let q = QpId(pkt.qp);
                self.recorder.qp_number(q, pkt.dst == self.qps[q].dst)
            }
        };
        let rnr_code = match &self.scenario.transport {
            TransportSpec::Rocev2(c) if pkt.kind == PacketKind::RnrNak => c.rnr_timer_code(),
            _ => 0,
        };
        let hop = Hop { from, to, dest_qp, ip: self.framing.ip, message_len, outer, rnr_code };
        self.recorder.capture(self.now(), &pkt, &hop);
    }

    /// Counts a lost packet at `port` and frees it.
    pub(super) fn drop_packet(&mut self, port: PortId, id: PacketId, cause: DropCause) {
        let pkt = self.pool.get(id);
        if pkt.kind.carries_data() {
            self.totals.data_drops += 1;
            let q = QpId(pkt.qp);
            if self.recorder.counts_per_ev() && self.qps[q].sprays {
                self.recorder.data_dropped(q, pkt.entropy);
            }
        }
        self.ports[port.0 as usize].count_drop(cause, pkt.payload());
        self.pool.free(id);
    }
}
