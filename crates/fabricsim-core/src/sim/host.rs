//! The NIC side common to all transports: QP scheduling on each port,
//! posting messages striped over a connection's QPs, message completion,
//! and control packets back to the sender. `rocev2` and `mrc` hold what
//! each transport does with packets and timers.

use super::{Event, Message, Owner, QpTransport, Simulation};
use crate::net::{flag, headers, Packet, PacketId, PacketKind, PortId, CLASS_CONTROL, CLASS_DATA, NO_PORT};
use crate::transport::DataPacket;
use crate::units::Time;
use crate::workload::split_evenly;

impl Simulation {
    /// Picks the next QP with a packet for this NIC port (round robin,
    /// `batch` packets per turn, skipping paced QPs), builds the packet and
    /// queues it. Schedules a wake-up if every ready QP is paced.
    pub(super) fn next_data_packet(&mut self, port: PortId) -> Option<PacketId> {
        let p = port.0 as usize;
        if self.ports[p].paused[CLASS_DATA] || self.sched[p].known_down {
            return None;
        }
        let bit = 1u32 << self.ports[p].index.min(31);
        let now = self.now();
        let mut earliest: Option<Time> = None;
        let mut tries = self.sched[p].ready.len();
        while tries > 0 {
            tries -= 1;
            let q = *self.sched[p].ready.front()? as usize;
            if !self.qps[q].transport.has_data() {
                self.sched[p].ready.pop_front();
                self.sched[p].batch_used = 0;
                self.qps[q].in_ready_lists &= !bit;
                continue;
            }
            if self.qps[q].next_send > now {
                earliest = Some(earliest.map_or(self.qps[q].next_send, |e: Time| e.min(self.qps[q].next_send)));
                self.sched[p].ready.rotate_left(1);
                self.sched[p].batch_used = 0;
                continue;
            }
            let id = match self.qps[q].transport {
                QpTransport::Roce { .. } => self.roce_data_packet(q),
                QpTransport::Mrc(_) => match self.mrc_data_packet(q, port) {
                    Some(id) => id,
                    None => {
                        // Nothing for this plane now (the window is full, or
                        // the remote port of this plane is down).
                        self.sched[p].ready.pop_front();
                        self.sched[p].batch_used = 0;
                        self.qps[q].in_ready_lists &= !bit;
                        continue;
                    }
                },
            };
            self.sched[p].batch_used += 1;
            if !self.qps[q].transport.has_data() {
                // Nothing more for now (all sent, or the window closed):
                // off the list until a SACK, NAK or new message puts it back,
                // so that a free link does not wake up for it.
                self.sched[p].ready.pop_front();
                self.sched[p].batch_used = 0;
                self.qps[q].in_ready_lists &= !bit;
            } else if self.sched[p].batch_used >= self.scenario.nic.batch {
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

    /// Puts a QP with data on the round-robin lists of the ports it sends
    /// on (its own port; every port of the NIC for MRC) and kicks them.
    pub(super) fn make_ready(&mut self, q: usize) {
        if !self.qps[q].transport.has_data() {
            return;
        }
        let nic = self.qps[q].src.0 as usize;
        let (first, count) = if self.qps[q].transport.is_mrc() {
            (0, self.node_ports[nic].len())
        } else {
            (self.ports[self.qps[q].src_port.0 as usize].index as usize, 1)
        };
        for k in first..first + count {
            let port = self.node_ports[nic][k];
            let bit = 1u32 << k.min(31);
            if self.qps[q].in_ready_lists & bit == 0 {
                self.qps[q].in_ready_lists |= bit;
                self.sched[port.0 as usize].ready.push_back(q as u32);
            }
            self.try_transmit(port);
        }
    }

    pub(super) fn on_flow_start(&mut self, f: u32) {
        let flow = &self.flows[f as usize];
        self.post_message(flow.conn, flow.bytes, Owner::Flow(f), flow.imm);
    }

    /// Posts an RDMA WRITE of `bytes` on a connection, striped evenly over
    /// its QPs (QP scaling). A zero-byte write still sends one packet, as
    /// NCCL still signals every step of a tiny collective.
    pub(super) fn post_message(&mut self, conn: u32, bytes: u64, owner: Owner, imm: bool) {
        let mtu = self.scenario.nic.mtu.0 as u32;
        let id = self.messages.len() as u32;
        let qps = self.connections[conn as usize].qps.len() as u64;
        let parts = bytes.clamp(1, qps) as u32;
        self.messages.push(Message { owner, parts_left: parts, imm });
        for (k, share) in split_evenly(bytes, qps).take(parts as usize).enumerate() {
            let q = self.connections[conn as usize].qps[k] as usize;
            match &mut self.qps[q].transport {
                QpTransport::Roce { sender, .. } => sender.post(share, mtu, imm),
                QpTransport::Mrc(m) => {
                    let (first, packets) = m.sender.post(share, imm);
                    m.receiver.expect(first, packets);
                }
            }
            self.qps[q].messages.push_back(id);
            self.make_ready(q);
        }
    }

    /// The responder finished `count` messages of QP `q`, oldest first.
    pub(super) fn messages_arrived(&mut self, q: usize, count: u32) {
        for _ in 0..count {
            let m = self.qps[q].messages.pop_front().expect("a completed message was posted") as usize;
            // A write with immediate raises its completion at the responder
            // only now that every byte of it has been placed.
            if self.messages[m].imm {
                self.totals.imm_completions += 1;
            }
            self.messages[m].parts_left -= 1;
            if self.messages[m].parts_left == 0 {
                self.message_done(self.messages[m].owner);
            }
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

    /// Wire bytes of a data packet here (with the SRv6 outer header if any,
    /// the RETH when `reth`, the immediate when `imm`).
    pub(super) fn data_wire(&self, payload: u32, reth: bool, imm: bool) -> u32 {
        headers::data_wire(self.scenario.nic.ip, payload, reth) + if imm { headers::IMM_DT } else { 0 } + self.encap
    }

    /// Allocates the data packet a transport chose to send on QP `q` with
    /// UDP source port `entropy` (the QP's own for RoCE, the EV for MRC).
    pub(super) fn alloc_data_packet(&mut self, q: usize, out: DataPacket, entropy: u16) -> PacketId {
        let addressed = self.qps[q].transport.is_mrc();
        let mut flags = flag::ECT;
        for (set, bit) in [
            (out.first, flag::FIRST),
            (out.last, flag::LAST),
            (out.retransmission, flag::RETX),
            (out.imm, flag::IMM),
            (addressed, flag::ADDRESSED),
        ] {
            if set {
                flags |= bit;
            }
        }
        self.totals.sent_payload += out.payload as u64;
        let qp = &self.qps[q];
        self.pool.alloc(Packet {
            kind: PacketKind::Data,
            class: CLASS_DATA as u8,
            flags,
            entropy,
            src: qp.src,
            dst: qp.dst,
            qp: q as u32,
            psn: out.psn,
            payload: out.payload as u16,
            wire: self.data_wire(out.payload, out.first || addressed, out.imm) as u16,
            port: NO_PORT,
            shifts: 0,
            ports_up: 0xFF,
            ack: 0,
            echo: 0,
        })
    }

    /// The bitmap of a NIC's ports it believes up.
    pub(super) fn ports_up(&self, nic: crate::topology::NodeId) -> u8 {
        self.node_ports[nic.0 as usize]
            .iter()
            .enumerate()
            .filter(|(_, p)| !self.sched[p.0 as usize].known_down)
            .fold(0u8, |bits, (i, _)| bits | 1 << i.min(7))
    }

    pub(super) fn on_nic_port_state(&mut self, port: PortId, up: bool) {
        self.sched[port.0 as usize].known_down = !up;
        let nic = self.ports[port.0 as usize].node;
        let plane = self.ports[port.0 as usize].index as usize;
        for q in 0..self.qps.len() {
            if self.qps[q].src != nic {
                continue;
            }
            if let QpTransport::Mrc(m) = &mut self.qps[q].transport {
                m.sender.set_plane_up(plane, up);
            }
            self.make_ready(q);
        }
    }

    /// A control packet of QP `q` sent out of NIC `port` to the other end
    /// of the QP (from the responder to the requester for ACKs, NAKs and
    /// CNPs; either way for MRC's probes), with the given entropy.
    pub(super) fn send_control(&mut self, q: usize, port: PortId, kind: PacketKind, psn: u32, entropy: u16) {
        let packet = self.control_packet(q, port, kind, psn, entropy);
        self.send_control_packet(port, packet);
    }

    /// The control packet `send_control` sends, for callers that set more
    /// of its fields.
    pub(super) fn control_packet(&self, q: usize, port: PortId, kind: PacketKind, psn: u32, entropy: u16) -> Packet {
        let ip = self.scenario.nic.ip;
        let from = self.ports[port.0 as usize].node;
        let qp = &self.qps[q];
        let to = if from == qp.dst { qp.src } else { qp.dst };
        let wire = self.encap
            + match kind {
                PacketKind::Cnp => headers::cnp_wire(ip),
                _ => headers::ack_wire(ip),
            };
        Packet { ports_up: self.ports_up(from), ..Packet::control(kind, from, to, q as u32, psn, entropy, wire) }
    }

    /// Queues a control packet on NIC `port` (high class) and kicks it.
    pub(super) fn send_control_packet(&mut self, port: PortId, packet: Packet) {
        let wire = packet.wire();
        let id = self.pool.alloc(packet);
        self.ports[port.0 as usize].enqueue(CLASS_CONTROL, id, wire);
        self.try_transmit(port);
    }

    pub(super) fn nic_receive(&mut self, port: PortId, id: PacketId) {
        let pkt = *self.pool.get(id);
        self.pool.free(id);
        if pkt.kind == PacketKind::MapProbe {
            self.mapper_receive(&pkt);
            return;
        }
        let q = pkt.qp as usize;
        if self.qps[q].transport.is_mrc() {
            self.mrc_receive(port, q, &pkt);
        } else {
            self.roce_receive(port, q, &pkt);
        }
    }

    pub(super) fn on_rto(&mut self, q: u32) {
        if self.qps[q as usize].transport.is_mrc() {
            self.mrc_timeout(q);
        } else {
            self.roce_timeout(q);
        }
    }
}
