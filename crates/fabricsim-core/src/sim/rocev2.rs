//! RoCEv2 RC at the NIC: data packets on the QP's one path, the in-order
//! responder with go-back-N NAKs, DCQCN's CNPs and rate control, and the
//! retransmission timer that can fail the QP (`transport::rocev2` holds the
//! state machines).

use super::{Event, Owner, QpTransport, Simulation};
use crate::net::{flag, Packet, PacketId, PacketKind, PortId};

impl Simulation {
    pub(super) fn roce_data_packet(&mut self, q: usize) -> PacketId {
        let now = self.now();
        let QpTransport::Roce { sender, .. } = &mut self.qps[q].transport else { unreachable!("a RoCE QP") };
        let data = sender.next_packet().expect("the QP has data");
        let wire = self.data_wire(data.payload, data.first, data.imm);
        let rto = self.roce.retransmit_timeout();
        let line = self.ports[self.qps[q].src_port.0 as usize].rate;
        let qp = &mut self.qps[q];
        let QpTransport::Roce { sender, cc, .. } = &mut qp.transport else { unreachable!("a RoCE QP") };
        let dcqcn = &self.roce.dcqcn;
        if dcqcn.enabled {
            cc.on_sent(dcqcn, wire as u64);
            let rate = cc.rate();
            qp.next_send = if rate < line { now + rate.tx_time(wire as u64) } else { now };
        }
        if sender.rto_deadline.is_none() {
            sender.rto_deadline = Some(now + rto);
            if !qp.rto_pending {
                qp.rto_pending = true;
                self.events.schedule(now + rto, Event::RtoTimer(q as u32));
            }
        }
        let entropy = qp.entropy;
        self.alloc_data_packet(q, data, entropy)
    }

    pub(super) fn roce_receive(&mut self, port: PortId, q: usize, pkt: &Packet) {
        match pkt.kind {
            PacketKind::Data => self.roce_data(port, q, pkt),
            PacketKind::Ack | PacketKind::Nak => {
                let now = self.now();
                let rto = self.roce.retransmit_timeout();
                let QpTransport::Roce { sender, .. } = &mut self.qps[q].transport else { return };
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
            // RoCE does not probe.
            PacketKind::Probe | PacketKind::ProbeReply | PacketKind::MapProbe => {}
            PacketKind::Cnp => {
                let now = self.now();
                let dcqcn = &self.roce.dcqcn;
                if dcqcn.enabled {
                    let qp = &mut self.qps[q];
                    let QpTransport::Roce { cc, .. } = &mut qp.transport else { return };
                    let next = cc.on_cnp(dcqcn, now);
                    if qp.cc_timer_at.is_none() {
                        qp.cc_timer_at = Some(next);
                        self.events.schedule(next, Event::CcTimer(q as u32));
                    }
                }
            }
        }
    }

    fn roce_data(&mut self, port: PortId, q: usize, pkt: &Packet) {
        let now = self.now();
        let trimmed = pkt.has(flag::TRIMMED);
        if trimmed {
            self.totals.trimmed_received += 1;
        }
        let ack_every = self.roce.ack_every;
        let QpTransport::Roce { receiver, .. } = &mut self.qps[q].transport else { return };
        let reply = receiver.on_data(pkt.psn, pkt.payload(), pkt.has(flag::LAST), trimmed, ack_every);
        self.totals.delivered_payload += reply.delivered as u64;
        self.totals.discarded_payload += reply.discarded as u64;
        self.nic_rx_payload[self.ports[port.0 as usize].node.0 as usize] += reply.delivered as u64;
        self.messages_arrived(q, u32::from(reply.message_done));
        let entropy = self.qps[q].entropy;
        if let Some((kind, psn)) = reply.reply {
            self.send_control(q, port, kind, psn, entropy);
        }
        let dcqcn = &self.roce.dcqcn;
        if dcqcn.enabled && pkt.has(flag::CE) {
            let QpTransport::Roce { receiver, .. } = &mut self.qps[q].transport else { return };
            if receiver.last_cnp.is_none_or(|t| now - t >= dcqcn.cnp_interval) {
                receiver.last_cnp = Some(now);
                self.send_control(q, port, PacketKind::Cnp, 0, entropy);
            }
        }
    }

    pub(super) fn roce_timeout(&mut self, q: u32) {
        let now = self.now();
        let qp = &mut self.qps[q as usize];
        qp.rto_pending = false;
        let QpTransport::Roce { sender, .. } = &mut qp.transport else { return };
        let Some(deadline) = sender.rto_deadline else { return };
        if deadline > now {
            qp.rto_pending = true;
            self.events.schedule(deadline, Event::RtoTimer(q));
            return;
        }
        sender.on_timeout(self.roce.retry_count);
        if sender.failed {
            sender.rto_deadline = None;
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
        sender.rto_deadline = Some(next);
        qp.rto_pending = true;
        self.events.schedule(next, Event::RtoTimer(q));
        self.make_ready(q as usize);
    }

    pub(super) fn on_cc_timer(&mut self, q: u32) {
        let now = self.now();
        let qp = &mut self.qps[q as usize];
        let QpTransport::Roce { cc, .. } = &mut qp.transport else { return };
        qp.cc_timer_at = cc.on_timer(&self.roce.dcqcn, now);
        if let Some(next) = qp.cc_timer_at {
            self.events.schedule(next, Event::CcTimer(q));
        }
    }
}
