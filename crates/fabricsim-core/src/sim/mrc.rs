//! MRC at the NIC (mrc-srv6-multiplane.txt s2.1, s2.4): every port of the
//! NIC pulls packets from the QP on EVs of its own plane; the receiver
//! places packets in any order and answers each with a SACK that echoes the
//! ECN mark, or with a NACK for a trimmed packet, on its reverse EV of that
//! plane; the sender's timer resends what a tail loss left outstanding.
//! Probes go both ways: the sender probes its retired EVs to bring back the
//! paths that work again, the receiver probes random EVs to keep its
//! reverse EVs on working paths. `transport::mrc` holds the state machines.

use super::{Event, QpTransport, Simulation};
use crate::net::{flag, Packet, PacketId, PacketKind, PortId};

impl Simulation {
    /// The next packet of MRC QP `q` for NIC `port` (its plane).
    pub(super) fn mrc_data_packet(&mut self, q: usize, port: PortId) -> Option<PacketId> {
        let now = self.now();
        let plane = self.ports[port.0 as usize].index as usize;
        let QpTransport::Mrc(m) = &mut self.qps[q].transport else { unreachable!("an MRC QP") };
        let (data, ev) = m.sender.next_packet(plane, now)?;
        if let Some(activity) = self.ev_activity.as_mut() {
            *activity.sent.entry((q as u32, ev)).or_default() += 1;
        }
        if m.sender.rto_deadline.is_none() {
            self.mrc_arm_timer(q);
        }
        Some(self.alloc_data_packet(q, data, ev))
    }

    pub(super) fn mrc_receive(&mut self, port: PortId, q: usize, pkt: &Packet) {
        let now = self.now();
        let plane = self.ports[port.0 as usize].index as usize;
        let at_sender = pkt.dst == self.qps[q].src;
        let QpTransport::Mrc(m) = &mut self.qps[q].transport else { return };
        match pkt.kind {
            PacketKind::Data if pkt.has(flag::TRIMMED) => {
                self.totals.trimmed_received += 1;
                let (ev, ack) = (m.receiver.reverse_ev(plane), m.receiver.cumulative());
                let nack = self.control_packet(q, port, PacketKind::Nak, pkt.psn, ev);
                self.send_control_packet(port, Packet { ack, echo: pkt.entropy, ..nack });
            }
            PacketKind::Data => {
                let arrival = m.receiver.on_data(pkt.psn, pkt.payload());
                let (ev, ack) = (m.receiver.reverse_ev(plane), m.receiver.cumulative());
                let probe = m.receiver.reverse_probe(now, self.mrc.reverse_probe_interval);
                if arrival.duplicate {
                    self.totals.discarded_payload += pkt.payload() as u64;
                }
                self.totals.delivered_payload += arrival.delivered as u64;
                self.nic_rx_payload[self.ports[port.0 as usize].node.0 as usize] += arrival.delivered as u64;
                self.messages_arrived(q, arrival.completed);
                // The SACK names the packet, echoes its EV and its ECN mark,
                // and acknowledges cumulatively.
                let flags = if pkt.has(flag::CE) { flag::CE } else { 0 };
                let sack = self.control_packet(q, port, PacketKind::Ack, pkt.psn, ev);
                self.send_control_packet(port, Packet { flags, ack, echo: pkt.entropy, ..sack });
                if let Some(probe_ev) = probe {
                    self.send_probe(q, false, probe_ev);
                }
            }
            PacketKind::Ack | PacketKind::Nak => {
                let avoid = self.mrc.ecn_avoid;
                // The SACK's port state bitmap: planes down at the other end.
                m.sender.set_remote_planes(pkt.ports_up);
                let progressed = if pkt.kind == PacketKind::Ack {
                    m.sender.on_sack(pkt.psn, pkt.echo, pkt.has(flag::CE), pkt.ack, now, avoid)
                } else {
                    m.sender.on_nack(pkt.psn, now);
                    true
                };
                let progressed = m.sender.on_cumulative_ack(pkt.ack) || progressed;
                if progressed {
                    self.mrc_arm_timer(q);
                }
                self.after_ev_changes(q);
                self.make_ready(q);
            }
            // A probe is answered on an EV known to work: the receiver's
            // reverse EV, or an active EV of the sender.
            PacketKind::Probe => {
                let ev = if at_sender { m.sender.working_ev(plane) } else { Some(m.receiver.reverse_ev(plane)) };
                if let Some(ev) = ev {
                    self.send_control(q, port, PacketKind::ProbeReply, pkt.psn, ev);
                }
            }
            PacketKind::ProbeReply => {
                let probed = pkt.psn as u16;
                if at_sender {
                    m.sender.on_probe_reply(probed);
                    self.after_ev_changes(q);
                    self.make_ready(q);
                } else {
                    m.receiver.on_probe_reply(probed);
                }
            }
            PacketKind::Cnp | PacketKind::MapProbe => {}
        }
    }

    /// Sends an EV probe on QP `q`: from the sender (probing a retired EV)
    /// or from the receiver (probing a candidate reverse EV). The probe
    /// names the EV it tests in its PSN field.
    fn send_probe(&mut self, q: usize, from_sender: bool, ev: u16) {
        let nic = if from_sender { self.qps[q].src } else { self.qps[q].dst };
        let ports = &self.node_ports[nic.0 as usize];
        let Some(&port) = ports.get(ev as usize & 7) else { return };
        if self.sched[port.0 as usize].known_down {
            return;
        }
        self.send_control(q, port, PacketKind::Probe, ev as u32, ev);
    }

    /// Keeps the retired-EV probe timer running while the QP has retired
    /// EVs, and records EV changes when telemetry asks for them.
    fn after_ev_changes(&mut self, q: usize) {
        let now = self.now();
        let interval = self.mrc.probe_interval;
        let QpTransport::Mrc(m) = &mut self.qps[q].transport else { return };
        if m.sender.has_retired() && !m.probe_pending {
            m.probe_pending = true;
            self.events.schedule(now + interval, Event::ProbeTimer(q as u32));
        }
        if let Some(log) = self.ev_log.as_mut() {
            log.extend(m.sender.take_ev_changes().into_iter().map(|c| (now, q as u32, c)));
        }
    }

    pub(super) fn mrc_probe_timer(&mut self, q: u32) {
        let q = q as usize;
        let QpTransport::Mrc(m) = &mut self.qps[q].transport else { return };
        m.probe_pending = false;
        let evs = m.sender.probe_retired();
        for ev in evs {
            self.send_probe(q, true, ev);
        }
        self.after_ev_changes(q);
    }

    /// Restarts the retransmission timer from now (or stops it when nothing
    /// is outstanding). A timer event is queued only when the deadline comes
    /// before the one already queued; a later one re-arms when it fires.
    fn mrc_arm_timer(&mut self, q: usize) {
        let now = self.now();
        let QpTransport::Mrc(m) = &mut self.qps[q].transport else { return };
        let deadline = m.sender.outstanding().then(|| now + m.sender.rto());
        m.sender.rto_deadline = deadline;
        if let Some(d) = deadline {
            if m.timer_at.is_none_or(|t| d < t) {
                m.timer_at = Some(d);
                self.events.schedule(d, Event::RtoTimer(q as u32));
            }
        }
    }

    pub(super) fn mrc_timeout(&mut self, q: u32) {
        let now = self.now();
        let QpTransport::Mrc(m) = &mut self.qps[q as usize].transport else { return };
        if m.timer_at != Some(now) {
            return; // superseded by an earlier deadline
        }
        m.timer_at = None;
        let Some(deadline) = m.sender.rto_deadline else { return };
        if deadline > now {
            m.timer_at = Some(deadline);
            self.events.schedule(deadline, Event::RtoTimer(q));
            return;
        }
        m.sender.on_timeout();
        self.mrc_arm_timer(q as usize);
        self.after_ev_changes(q as usize);
        self.make_ready(q as usize);
    }

    /// Starts the EV log with every MRC QP's initial sets.
    pub(super) fn start_ev_log(&mut self) {
        let mut log = Vec::new();
        for (q, qp) in self.qps.iter_mut().enumerate() {
            if let QpTransport::Mrc(m) = &mut qp.transport {
                m.sender.log_evs();
                log.extend(m.sender.take_ev_changes().into_iter().map(|c| (self.events.now(), q as u32, c)));
            }
        }
        self.ev_log = Some(log);
    }

    /// Takes every EV whose static path crosses a denied link out of use,
    /// and returns those no longer denied to probing (s2.4, s3).
    pub(super) fn apply_denylist(&mut self) {
        let Some(srv6) = self.srv6.as_ref() else { return };
        if self.denied_links.is_empty() {
            return;
        }
        for q in 0..self.qps.len() {
            let (src, dst) = (self.qps[q].src.0 as usize, self.qps[q].dst.0 as usize);
            let QpTransport::Mrc(m) = &mut self.qps[q].transport else { continue };
            let (src_ports, dst_ports) = (&self.node_ports[src], &self.node_ports[dst]);
            let ports = &self.ports;
            let denied = &self.denied_links;
            m.sender.set_denied(|ev| {
                let plane = ev as usize & 7;
                let (Some(&from), Some(&to)) = (src_ports.get(plane), dst_ports.get(plane)) else { return false };
                srv6.path(from, to, ev).is_some_and(|path| {
                    srv6.links(from, &path, |p| ports[p.peer().0 as usize].node).iter().any(|&l| denied[l])
                })
            });
        }
        for q in 0..self.qps.len() {
            self.after_ev_changes(q);
        }
    }
}
