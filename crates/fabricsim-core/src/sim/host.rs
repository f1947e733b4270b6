//! The NIC side: QP scheduling on each port, the RoCEv2 requester and
//! responder, DCQCN's notification and reaction points, retransmission
//! timers, and flow completion.

use super::{Event, Message, Owner, Simulation};
use crate::net::{flag, headers, Packet, PacketId, PacketKind, PortId, CLASS_CONTROL, CLASS_DATA, NO_PORT};
use crate::units::Time;
use crate::workload::split_evenly;

impl Simulation {
    /// Picks the next QP with a packet for this NIC port (round robin,
    /// `batch` packets per turn, skipping paced QPs), builds the packet and
    /// queues it. Schedules a wake-up if every ready QP is paced.
    pub(super) fn next_data_packet(&mut self, port: PortId) -> Option<PacketId> {
        let p = port.0 as usize;
        if self.ports[p].paused[CLASS_DATA] {
            return None;
        }
        let now = self.now();
        let mut earliest: Option<Time> = None;
        let mut tries = self.sched[p].ready.len();
        while tries > 0 {
            tries -= 1;
            let q = *self.sched[p].ready.front()? as usize;
            if !self.qps[q].sender.has_data() {
                self.sched[p].ready.pop_front();
                self.sched[p].batch_used = 0;
                self.qps[q].in_ready_list = false;
                continue;
            }
            if self.qps[q].next_send > now {
                earliest = Some(earliest.map_or(self.qps[q].next_send, |e: Time| e.min(self.qps[q].next_send)));
                self.sched[p].ready.rotate_left(1);
                self.sched[p].batch_used = 0;
                continue;
            }
            let id = self.make_data_packet(q);
            self.sched[p].batch_used += 1;
            if self.sched[p].batch_used >= self.scenario.nic.batch {
                self.sched[p].batch_used = 0;
                self.sched[p].ready.rotate_left(1);
            }
            let wire = self.pool.get(id).wire();
            self.ports[p].enqueue(CLASS_DATA, id, wire);
            return Some(id);
        }
        if let Some(t) = earliest {
            if self.sched[p].wake_at.is_none_or(|w| t < w) {
                self.sched[p].wake_at = Some(t);
                self.events.schedule(t, Event::NicWake(port));
            }
        }
        None
    }

    fn make_data_packet(&mut self, q: usize) -> PacketId {
        let now = self.now();
        let mtu = self.scenario.nic.mtu.0 as u32;
        let ip = self.scenario.nic.ip;
        let qp = &mut self.qps[q];
        let data = qp.sender.next_packet(mtu).expect("the QP has data");
        let wire = headers::data_wire(ip, data.payload, data.first) + self.encap;
        let mut flags = flag::ECT;
        if data.first {
            flags |= flag::FIRST;
        }
        if data.last {
            flags |= flag::LAST;
        }
        if data.retransmission {
            flags |= flag::RETX;
        }
        let dcqcn = &self.roce.dcqcn;
        if dcqcn.enabled {
            qp.cc.on_sent(dcqcn, wire as u64);
            let line = self.ports[qp.src_port.0 as usize].rate;
            let rate = qp.cc.rate();
            qp.next_send = if rate < line { now + rate.tx_time(wire as u64) } else { now };
        }
        if qp.sender.rto_deadline.is_none() {
            qp.sender.rto_deadline = Some(now + self.roce.retransmit_timeout());
            if !qp.rto_pending {
                qp.rto_pending = true;
                self.events.schedule(now + self.roce.retransmit_timeout(), Event::RtoTimer(q as u32));
            }
        }
        self.totals.sent_payload += data.payload as u64;
        self.pool.alloc(Packet {
            kind: PacketKind::Data,
            class: CLASS_DATA as u8,
            flags,
            entropy: qp.entropy,
            src: qp.src,
            dst: qp.dst,
            qp: q as u32,
            psn: data.psn,
            payload: data.payload as u16,
            wire: wire as u16,
            ingress: NO_PORT,
            shifts: 0,
        })
    }

    /// Puts a QP with data on its port's round-robin list and kicks the port.
    fn make_ready(&mut self, q: usize) {
        let port = self.qps[q].src_port;
        if !self.qps[q].in_ready_list && self.qps[q].sender.has_data() {
            self.qps[q].in_ready_list = true;
            self.sched[port.0 as usize].ready.push_back(q as u32);
        }
        self.try_transmit(port);
    }

    pub(super) fn on_flow_start(&mut self, f: u32) {
        let flow = &self.flows[f as usize];
        self.post_message(flow.conn, flow.bytes, Owner::Flow(f));
    }

    /// Posts an RDMA WRITE of `bytes` on a connection, striped evenly over
    /// its QPs (QP scaling). A zero-byte write still sends one packet, as
    /// NCCL still signals every step of a tiny collective.
    pub(super) fn post_message(&mut self, conn: u32, bytes: u64, owner: Owner) {
        let mtu = self.scenario.nic.mtu.0 as u32;
        let id = self.messages.len() as u32;
        let qps = self.connections[conn as usize].qps.len() as u64;
        let parts = bytes.clamp(1, qps) as u32;
        self.messages.push(Message { owner, parts_left: parts });
        for (k, share) in split_evenly(bytes, qps).take(parts as usize).enumerate() {
            let q = self.connections[conn as usize].qps[k] as usize;
            self.qps[q].sender.post(share, mtu);
            self.qps[q].messages.push_back(id);
            self.make_ready(q);
        }
    }

    /// Every part of a message has arrived.
    fn message_done(&mut self, owner: Owner) {
        match owner {
            Owner::Flow(f) => {
                self.flows[f as usize].end = Some(self.now());
                self.work_left -= 1;
            }
            Owner::Transfer(t) => self.transfer_done(t),
        }
    }

    /// A control packet from the responder (or the NP) back to the requester.
    fn send_control(&mut self, q: usize, kind: PacketKind, psn: u32) {
        let ip = self.scenario.nic.ip;
        let qp = &self.qps[q];
        let wire = self.encap
            + match kind {
                PacketKind::Cnp => headers::cnp_wire(ip),
                _ => headers::ack_wire(ip),
            };
        let id = self.pool.alloc(Packet {
            kind,
            class: CLASS_CONTROL as u8,
            flags: 0,
            entropy: qp.entropy,
            src: qp.dst,
            dst: qp.src,
            qp: q as u32,
            psn,
            payload: 0,
            wire: wire as u16,
            ingress: NO_PORT,
            shifts: 0,
        });
        let port = qp.dst_port;
        self.ports[port.0 as usize].enqueue(CLASS_CONTROL, id, wire);
        self.try_transmit(port);
    }

    pub(super) fn nic_receive(&mut self, port: PortId, id: PacketId) {
        let pkt = *self.pool.get(id);
        self.pool.free(id);
        let q = pkt.qp as usize;
        match pkt.kind {
            PacketKind::Data => self.on_data(port, q, &pkt),
            PacketKind::Ack | PacketKind::Nak => {
                let now = self.now();
                let rto = self.roce.retransmit_timeout();
                let sender = &mut self.qps[q].sender;
                let progressed = if pkt.kind == PacketKind::Nak {
                    sender.on_nak(pkt.psn);
                    true
                } else {
                    sender.on_ack(pkt.psn)
                };
                if progressed {
                    sender.rto_deadline = sender.outstanding().then_some(now + rto);
                }
                if pkt.kind == PacketKind::Nak {
                    self.make_ready(q);
                }
            }
            PacketKind::Cnp => {
                let now = self.now();
                let dcqcn = &self.roce.dcqcn;
                if dcqcn.enabled {
                    let qp = &mut self.qps[q];
                    let next = qp.cc.on_cnp(dcqcn, now);
                    if qp.cc_timer_at.is_none() {
                        qp.cc_timer_at = Some(next);
                        self.events.schedule(next, Event::CcTimer(q as u32));
                    }
                }
            }
        }
    }

    fn on_data(&mut self, port: PortId, q: usize, pkt: &Packet) {
        let now = self.now();
        let trimmed = pkt.has(flag::TRIMMED);
        if trimmed {
            self.totals.trimmed_received += 1;
        }
        let ack_every = self.roce.ack_every;
        let reply = self.qps[q].receiver.on_data(pkt.psn, pkt.payload(), pkt.has(flag::LAST), trimmed, ack_every);
        self.totals.delivered_payload += reply.delivered as u64;
        self.totals.discarded_payload += reply.discarded as u64;
        self.nic_rx_payload[self.ports[port.0 as usize].node.0 as usize] += reply.delivered as u64;
        if reply.message_done {
            let m = self.qps[q].messages.pop_front().expect("a completed message was posted") as usize;
            self.messages[m].parts_left -= 1;
            if self.messages[m].parts_left == 0 {
                self.message_done(self.messages[m].owner);
            }
        }
        if let Some((kind, psn)) = reply.reply {
            self.send_control(q, kind, psn);
        }
        let dcqcn = &self.roce.dcqcn;
        if dcqcn.enabled && pkt.has(flag::CE) {
            let rx = &mut self.qps[q].receiver;
            if rx.last_cnp.is_none_or(|t| now - t >= dcqcn.cnp_interval) {
                rx.last_cnp = Some(now);
                self.send_control(q, PacketKind::Cnp, 0);
            }
        }
    }

    pub(super) fn on_rto(&mut self, q: u32) {
        let now = self.now();
        let qp = &mut self.qps[q as usize];
        qp.rto_pending = false;
        let Some(deadline) = qp.sender.rto_deadline else { return };
        if deadline > now {
            qp.rto_pending = true;
            self.events.schedule(deadline, Event::RtoTimer(q));
            return;
        }
        qp.sender.on_timeout(self.roce.retry_count);
        if qp.sender.failed {
            qp.sender.rto_deadline = None;
            self.totals.qp_errors += 1;
            // Everything still posted on the QP is lost with it.
            let lost: Vec<Owner> = qp.messages.iter().map(|&m| self.messages[m as usize].owner).collect();
            for owner in lost {
                match owner {
                    Owner::Flow(f) if !self.flows[f as usize].failed && self.flows[f as usize].end.is_none() => {
                        self.flows[f as usize].failed = true;
                        self.work_left -= 1;
                    }
                    Owner::Flow(_) => {}
                    Owner::Transfer(t) => self.transfer_failed(t),
                }
            }
            return;
        }
        let next = now + self.roce.retransmit_timeout();
        qp.sender.rto_deadline = Some(next);
        qp.rto_pending = true;
        self.events.schedule(next, Event::RtoTimer(q));
        self.make_ready(q as usize);
    }

    pub(super) fn on_cc_timer(&mut self, q: u32) {
        let now = self.now();
        let qp = &mut self.qps[q as usize];
        qp.cc_timer_at = qp.cc.on_timer(&self.roce.dcqcn, now);
        if let Some(next) = qp.cc_timer_at {
            self.events.schedule(next, Event::CcTimer(q));
        }
    }
}
