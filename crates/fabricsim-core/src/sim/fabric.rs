//! Packets through ports and switches: transmission and the wire, switch
//! forwarding and buffer admission, ECN marking at dequeue, PFC pause and
//! resume, packet trimming, and drops by cause.

use super::{Event, Simulation};
use crate::net::{
    ecn_mark_probability, flag, headers, Admission, DropCause, PacketId, PortId, CLASS_CONTROL, CLASS_DATA, NO_PORT,
};
use crate::switch::ecmp_hash;
use crate::topology::NodeId;
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
        let is_switch = self.switches[self.ports[p].node.0 as usize].is_some();
        let class = match self.ports[p].next_class() {
            Some(c) => c,
            // A NIC port pulls its next data packet from the QPs.
            None if !is_switch && self.next_data_packet(port).is_some() => CLASS_DATA,
            None => return,
        };
        let Some(id) = self.ports[p].queues[class].front().copied() else { return };
        let wire = self.pool.get(id).wire();
        self.ports[p].dequeue(class, wire);
        if is_switch {
            self.on_switch_dequeue(port, id, class);
        }
        let done = now + self.ports[p].tx_time(wire);
        self.ports[p].busy_until = done;
        self.put_on_wire(port, id, done);
        if self.has_work(port) {
            self.ports[p].tx_done_pending = true;
            self.events.schedule(done, Event::TxDone(port));
        }
    }

    /// Whether a port has something to send once the link is free.
    fn has_work(&self, port: PortId) -> bool {
        let p = &self.ports[port.0 as usize];
        p.next_class().is_some() || (!p.paused[CLASS_DATA] && !self.sched[port.0 as usize].ready.is_empty())
    }

    /// Counts the packet as sent and puts it on the wire, where it arrives at
    /// the peer `delay` after its last bit leaves at `done`, unless the link
    /// is down or loses it.
    fn put_on_wire(&mut self, port: PortId, id: PacketId, done: Time) {
        let p = port.0 as usize;
        if self.capture.as_ref().is_some_and(|(_, on)| on[p]) {
            self.capture_packet(port, id);
        }
        let pkt = self.pool.get(id);
        let c = &mut self.ports[p].counters;
        c.tx_bytes += pkt.wire() as u64;
        c.tx_packets += 1;
        c.tx_payload += pkt.payload() as u64;
        self.totals.packet_hops += 1;
        if !self.ports[p].up {
            self.drop_packet(port, id, DropCause::LinkDown);
        } else if (self.ports[p].loss > 0.0 && self.port_rng[p].chance(self.ports[p].loss))
            || (!self.ev_loss.is_empty() && self.ev_lost(port, id))
        {
            self.drop_packet(port, id, DropCause::LinkLoss);
        } else {
            self.pool.get_mut(id).port = port.0;
            self.events.schedule(done + self.ports[p].delay, Event::Arrive(id));
        }
    }

    /// Whether injected EV loss takes this packet leaving `port`: data and
    /// the probes that test the EV are lost alike.
    fn ev_lost(&mut self, port: PortId, id: PacketId) -> bool {
        let pkt = self.pool.get(id);
        if !matches!(pkt.kind, crate::net::PacketKind::Data | crate::net::PacketKind::Probe) {
            return false;
        }
        let ev = pkt.entropy;
        let rate = self.ev_loss.iter().find(|&&(p, e, _)| p == port.0 && e == ev).map(|&(_, _, r)| r);
        rate.is_some_and(|r| self.port_rng[port.0 as usize].chance(r))
    }

    /// Buffer release, PFC resume and ECN marking when a switch dequeues.
    fn on_switch_dequeue(&mut self, port: PortId, id: PacketId, class: usize) {
        self.release_switch_buffer(port, id, class);
        let ecn = &self.scenario.switch.ecn;
        let out = &self.ports[port.0 as usize];
        let pkt = self.pool.get(id);
        if ecn.enabled && pkt.has(flag::ECT) && class == CLASS_DATA && (ecn.last_hop || !out.faces_nic) {
            // The queue as this packet saw it, including itself.
            let p = ecn_mark_probability(out.queue_bytes[class] + pkt.wire() as u64, ecn);
            if p > 0.0 && self.port_rng[port.0 as usize].chance(p) {
                self.pool.get_mut(id).flags |= flag::CE;
                self.ports[port.0 as usize].counters.ecn_marks += 1;
            }
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
        let threshold = sw.buffer.xoff_threshold(self.scenario.switch.pfc.xoff_alpha);
        if ingress == NO_PORT {
            return;
        }
        let inp = &mut self.ports[ingress as usize];
        inp.ingress_bytes[class] -= wire;
        let below_xon = inp.ingress_bytes[class] + self.scenario.switch.pfc.xon_offset.0 <= threshold;
        if inp.xoff_sent[class] && below_xon {
            inp.xoff_sent[class] = false;
            inp.headroom_used[class] = 0;
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
        let port = PortId(self.pool.get(id).port);
        if !self.ports[port.0 as usize].up {
            // The link failed while the packet was on it.
            self.drop_packet(port, id, DropCause::LinkDown);
            return;
        }
        let into = port.peer();
        let node = self.ports[into.0 as usize].node;
        if self.switches[node.0 as usize].is_some() {
            self.switch_receive(node, into, id);
        } else {
            self.nic_receive(into, id);
        }
    }

    /// Forwards a packet that entered `switch` by `ingress`.
    fn switch_receive(&mut self, switch: NodeId, ingress: PortId, id: PacketId) {
        let sw = self.switches[switch.0 as usize].as_ref().expect("a switch");
        if !sw.up {
            self.drop_packet(ingress, id, DropCause::SwitchDown);
            return;
        }
        let pkt = *self.pool.get(id);
        let out = if self.srv6.is_some() {
            match self.srv6_next_hop(switch, &pkt) {
                Some(port) => {
                    self.pool.get_mut(id).shifts += 1;
                    port
                }
                None => {
                    self.drop_packet(ingress, id, DropCause::NoRoute);
                    return;
                }
            }
        } else {
            let hops = self.routes.next_hops(switch, pkt.dst);
            match hops.len() {
                0 => {
                    self.drop_packet(ingress, id, DropCause::NoRoute);
                    return;
                }
                1 => hops[0],
                // Lemire's multiply-shift maps the hash onto the group without a division.
                n => {
                    hops[((ecmp_hash(pkt.src.0, pkt.dst.0, pkt.entropy, sw.ecmp_seed) as u64 * n as u64) >> 32)
                        as usize]
                }
            }
        };
        if !self.ports[out.0 as usize].up {
            self.drop_packet(out, id, DropCause::LinkDown);
            return;
        }
        let mut class = pkt.class as usize;
        let wire = pkt.wire() as u64;
        let pfc = &self.scenario.switch.pfc;
        let lossless = pfc.enabled && class == CLASS_DATA;
        let buffer = &self.switches[switch.0 as usize].as_ref().expect("a switch").buffer;
        let admitted = if lossless || class == CLASS_CONTROL {
            buffer.admit_lossless(wire)
        } else {
            buffer.admit_lossy(self.ports[out.0 as usize].queue_bytes[class], wire, self.scenario.switch.egress_alpha)
        };
        let mut wire = wire;
        if admitted == Admission::Reject {
            let trim = &self.scenario.switch.trimming;
            if !(trim.enabled && class == CLASS_DATA && !pkt.has(flag::TRIMMED)) {
                self.drop_packet(out, id, DropCause::Buffer);
                return;
            }
            wire = headers::trimmed_wire(pkt.wire(), trim.size.0 as u32) as u64;
            if buffer.admit_lossless(wire) == Admission::Reject {
                self.drop_packet(out, id, DropCause::Buffer);
                return;
            }
            let counters = &mut self.ports[out.0 as usize].counters;
            counters.trims += 1;
            counters.trimmed_payload += pkt.payload() as u64;
            let pkt = self.pool.get_mut(id);
            pkt.flags |= flag::TRIMMED;
            pkt.payload = 0;
            pkt.wire = wire as u16;
            pkt.class = CLASS_CONTROL as u8;
            class = CLASS_CONTROL;
        }
        if lossless && class == CLASS_DATA && self.ports[ingress.0 as usize].xoff_sent[class] {
            let inp = &mut self.ports[ingress.0 as usize];
            inp.headroom_used[class] += wire;
            if inp.headroom_used[class] > self.headroom[ingress.0 as usize] {
                inp.headroom_used[class] -= wire;
                self.drop_packet(ingress, id, DropCause::Headroom);
                return;
            }
        }
        let sw = self.switches[switch.0 as usize].as_mut().expect("a switch");
        sw.buffer.take(wire);
        let threshold = sw.buffer.xoff_threshold(pfc.xoff_alpha);
        self.pool.get_mut(id).port = ingress.0;
        let inp = &mut self.ports[ingress.0 as usize];
        inp.ingress_bytes[class] += wire;
        if lossless && class == CLASS_DATA && !inp.xoff_sent[class] && inp.ingress_bytes[class] > threshold {
            inp.xoff_sent[class] = true;
            self.send_pfc(ingress, class, true);
        }
        self.ports[out.0 as usize].enqueue(class, id, wire as u32);
        self.try_transmit(out);
    }

    /// Sends a PFC frame out of `port` to pause or resume `class` at the
    /// peer's egress. A MAC control frame goes ahead of queued data; it
    /// reaches the peer after its own serialization and the propagation
    /// delay (its link time is not taken from data: 84 bytes per event).
    fn send_pfc(&mut self, port: PortId, class: usize, pause: bool) {
        let p = &mut self.ports[port.0 as usize];
        if pause {
            p.counters.pauses_sent += 1;
        }
        let arrival = self.events.now() + p.rate.tx_time(headers::pause_wire() as u64) + p.delay;
        self.events.schedule(arrival, Event::Pfc { port: port.peer(), class: class as u8, pause });
    }

    pub(super) fn on_pfc(&mut self, port: PortId, class: usize, pause: bool) {
        let now = self.now();
        self.ports[port.0 as usize].set_paused(class, pause, now);
        if !pause {
            self.try_transmit(port);
        }
    }

    /// The SRv6 path a packet follows: from its QP's sending NIC port to the
    /// receiving one (reversed for control packets), picked by its EV.
    fn srv6_path(&self, pkt: &crate::net::Packet) -> Option<crate::switch::srv6::Path> {
        if pkt.kind == crate::net::PacketKind::MapProbe {
            // Out of the NIC port named by the entropy and back to it.
            let from = *self.node_ports[pkt.src.0 as usize].get(pkt.entropy as usize)?;
            let target = (pkt.psn & 0xFF) as usize;
            return self.srv6.as_ref()?.loop_path(from, target.checked_sub(1));
        }
        let qp = &self.qps[pkt.qp as usize];
        let (from, to) = if qp.transport.is_mrc() {
            // An MRC EV names its plane in its low bits (s2.3).
            let plane = (pkt.entropy & 7) as usize;
            (*self.node_ports[pkt.src.0 as usize].get(plane)?, *self.node_ports[pkt.dst.0 as usize].get(plane)?)
        } else if pkt.kind == crate::net::PacketKind::Data {
            (qp.src_port, qp.dst_port)
        } else {
            (qp.dst_port, qp.src_port)
        };
        self.srv6.as_ref()?.path(from, to, pkt.entropy)
    }

    /// uN: the switch's own uSID must be at the front of the destination
    /// address; after the shift, the next uSID is looked up in its static
    /// table. `None` drops the packet.
    fn srv6_next_hop(&self, switch: NodeId, pkt: &crate::net::Packet) -> Option<PortId> {
        let srv6 = self.srv6.as_ref()?;
        let path = self.srv6_path(pkt)?;
        let front = pkt.shifts as usize;
        if front + 1 >= path.len as usize || path.usids[front] != srv6.usid(switch) {
            return None;
        }
        srv6.lookup(switch, path.usids[front + 1])
    }

    /// Writes a packet starting to leave `port` into the capture.
    fn capture_packet(&mut self, port: PortId, id: PacketId) {
        let pkt = *self.pool.get(id);
        let message_len = match pkt.kind {
            crate::net::PacketKind::Data if pkt.has(flag::FIRST) => match &self.qps[pkt.qp as usize].transport {
                super::QpTransport::Roce { sender, .. } => sender.message_bytes(pkt.psn),
                super::QpTransport::Mrc(m) => m.sender.message_bytes(pkt.psn),
            },
            _ => 0,
        };
        let (from, to) = (self.ports[port.0 as usize].node.0, self.ports[port.peer().0 as usize].node.0);
        let now = self.now();
        let ip = self.scenario.nic.ip;
        let outer = self.srv6_path(&pkt).map(|path| path.address(pkt.shifts as usize));
        if let Some((capture, _)) = self.capture.as_mut() {
            capture.record(now, &pkt, from, to, ip, message_len, outer);
        }
    }

    /// Counts a lost packet at `port` and frees it.
    pub(super) fn drop_packet(&mut self, port: PortId, id: PacketId, cause: DropCause) {
        let payload = self.pool.get(id).payload();
        let pkt = self.pool.get(id);
        if pkt.kind == crate::net::PacketKind::Data {
            self.totals.data_drops += 1;
            if let Some(activity) = self.ev_activity.as_mut().filter(|_| self.qps[pkt.qp as usize].transport.is_mrc()) {
                *activity.dropped.entry((pkt.qp, pkt.entropy)).or_default() += 1;
            }
        }
        self.ports[port.0 as usize].count_drop(cause, payload);
        self.pool.free(id);
    }
}
