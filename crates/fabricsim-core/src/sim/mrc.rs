//! MRC at the NIC (mrc-srv6-multiplane.txt s2.1, s2.4): every port of the
//! NIC pulls packets from the QP on EVs of its own plane; the receiver
//! places packets in any order and answers each with a SACK that echoes the
//! EV and the ECN mark, or with a NACK for a trimmed packet; the sender's
//! timer resends what a tail loss left outstanding (`transport::mrc` holds
//! the state machines).

use super::{Event, QpTransport, Simulation};
use crate::net::{flag, Packet, PacketId, PacketKind, PortId};

impl Simulation {
    /// The next packet of MRC QP `q` for NIC `port` (its plane).
    pub(super) fn mrc_data_packet(&mut self, q: usize, port: PortId) -> Option<PacketId> {
        let now = self.now();
        let plane = self.ports[port.0 as usize].index as usize;
        let rto = self.mrc.rto;
        let qp = &mut self.qps[q];
        let QpTransport::Mrc(m) = &mut qp.transport else { unreachable!("an MRC QP") };
        let (data, ev) = m.sender.next_packet(plane, now)?;
        if m.sender.rto_deadline.is_none() {
            m.sender.rto_deadline = Some(now + rto);
            if !qp.rto_pending {
                qp.rto_pending = true;
                self.events.schedule(now + rto, Event::RtoTimer(q as u32));
            }
        }
        Some(self.alloc_data_packet(q, data, ev))
    }

    pub(super) fn mrc_receive(&mut self, port: PortId, q: usize, pkt: &Packet) {
        let now = self.now();
        match pkt.kind {
            PacketKind::Data if pkt.has(flag::TRIMMED) => {
                self.totals.trimmed_received += 1;
                self.send_control(q, port, PacketKind::Nak, pkt.psn, pkt.entropy, 0);
            }
            PacketKind::Data => {
                let QpTransport::Mrc(m) = &mut self.qps[q].transport else { return };
                let arrival = m.receiver.on_data(pkt.psn, pkt.payload());
                if arrival.duplicate {
                    self.totals.discarded_payload += pkt.payload() as u64;
                }
                self.totals.delivered_payload += arrival.delivered as u64;
                self.nic_rx_payload[self.ports[port.0 as usize].node.0 as usize] += arrival.delivered as u64;
                self.messages_arrived(q, arrival.completed);
                // The SACK names the packet, echoes its EV and its ECN mark.
                let echo = if pkt.has(flag::CE) { flag::CE } else { 0 };
                self.send_control(q, port, PacketKind::Ack, pkt.psn, pkt.entropy, echo);
            }
            PacketKind::Ack | PacketKind::Nak => {
                let (avoid, rto) = (self.mrc.ecn_avoid, self.mrc.rto);
                let QpTransport::Mrc(m) = &mut self.qps[q].transport else { return };
                // The SACK's port state bitmap: planes down at the other end.
                m.sender.set_remote_planes(pkt.ports_up);
                let progressed = if pkt.kind == PacketKind::Ack {
                    m.sender.on_sack(pkt.psn, pkt.has(flag::CE), now, avoid)
                } else {
                    m.sender.on_nack(pkt.psn);
                    true
                };
                if progressed {
                    m.sender.rto_deadline = m.sender.outstanding().then_some(now + rto);
                }
                self.make_ready(q);
            }
            PacketKind::Cnp => {}
        }
    }

    pub(super) fn mrc_timeout(&mut self, q: u32) {
        let now = self.now();
        let rto = self.mrc.rto;
        let qp = &mut self.qps[q as usize];
        qp.rto_pending = false;
        let QpTransport::Mrc(m) = &mut qp.transport else { return };
        let Some(deadline) = m.sender.rto_deadline else { return };
        if deadline > now {
            qp.rto_pending = true;
            self.events.schedule(deadline, Event::RtoTimer(q));
            return;
        }
        m.sender.on_timeout();
        m.sender.rto_deadline = Some(now + rto);
        qp.rto_pending = true;
        self.events.schedule(now + rto, Event::RtoTimer(q));
        self.make_ready(q as usize);
    }
}
