//! The NIC side: which QP sends next on each port, posting messages striped
//! over a connection's QPs and completing them, and the seam to the
//! transports. A transport is asked for a port's next data packet, handed
//! the packets of its QP that arrive and the timers it armed, and answers
//! with actions that are carried out here in order. The NIC frames what a
//! transport sends: addresses, sizes, its port bitmap, and the SRv6 path
//! of the packet's port and entropy.

use super::{Event, Message, Owner, Simulation};
use crate::ids::{ConnectionId, FlowId, MessageId, QpId};
use crate::net::{
    flag, headers, Ev, Packet, PacketId, PacketKind, PortId, Usids, CLASS_CONTROL, CLASS_DATA, NO_PORT, USIDS,
};
use crate::nic::repac;
use crate::nic::{MessageSplit, PathSelection, Pick, PortFailover, Qp};
use crate::topology::{LinkId, NodeId};
use crate::transport::{Action, Control, End, Outgoing, QpSetup, Timer, Transport, Verb, TIMERS};
use crate::units::Time;
use crate::workload::{message_part_count, message_parts};

impl Simulation {
    /// The next data packet for this NIC port, from the QP whose turn it is,
    /// queued on the port. Schedules a wake-up if every ready QP is paced.
    pub(super) fn next_data_packet(&mut self, port: PortId) -> Option<PacketId> {
        let p = port.0 as usize;
        if self.ports[p].paused[CLASS_DATA] {
            return None;
        }
        // A port the NIC knows is down carries nothing of a sprayed QP, which
        // has other ports; a QP bound to it still sends, into the dead link
        // (its retransmission timer runs, and it fails if the link does not
        // return), as an RNIC does with the work posted on such a QP.
        let known_down = self.sched[p].known_down;
        let index = self.ports[p].index as usize;
        let now = self.now();
        let first = self.actions.len();
        let actions = &mut self.actions;
        let pick = self.sched[p].pick(&mut self.qps, index, now, self.scenario.nic.batch, |_, qp| {
            if known_down && qp.sprays {
                return None;
            }
            qp.transport.next_packet(index, now, actions)
        });
        match pick {
            Pick::Packet(q, mut out, k) => {
                if let Some(pro) = &mut self.orchestrator {
                    out.entropy = pro.stamp(q, k, out.entropy);
                    if !self.qps[q].transport.has_data() {
                        pro.idle(q);
                    }
                }
                self.qps[q].next_send = out.not_before;
                self.carry_out(q, first);
                if self.recorder.counts_per_ev() && self.qps[q].sprays {
                    self.recorder.data_sent(q, out.entropy);
                }
                let id = self.alloc_data_packet(q, port, out);
                let wire = self.pool.get(id).wire();
                let qp = &mut self.qps[q];
                if let Some(limit) = qp.rate_limit {
                    qp.next_send = qp.next_send.max(now + limit.tx_time(wire as u64));
                }
                self.ports[p].enqueue(CLASS_DATA, id, wire, &mut self.pool);
                Some(id)
            }
            Pick::Wait(earliest) => {
                self.actions.truncate(first);
                if let Some(t) = earliest {
                    if self.sched[p].wake_at.is_none_or(|w| t < w) {
                        self.sched[p].wake_at = Some(t);
                        self.events.schedule(t, Event::NicWake(port));
                    }
                }
                None
            }
        }
    }

    /// Puts a QP with data on the round-robin lists of the ports it sends
    /// on (its own port; every port of the NIC when it sprays) and kicks
    /// them.
    pub(super) fn make_ready(&mut self, q: QpId) {
        if !self.qps[q].transport.has_data() || self.qps[q].destroyed {
            return;
        }
        let nic = self.qps[q].src.0 as usize;
        // A sprayed QP's ports in the order of its plane rotation.
        let (first, count) = if self.qps[q].sprays {
            (self.qps[q].transport.next_port(), self.node_ports[nic].len())
        } else {
            (self.ports[self.qps[q].src_port.0 as usize].index as usize, 1)
        };
        let ports = self.node_ports[nic].len();
        for k in (first..first + count).map(|k| if k >= ports { k - ports } else { k }) {
            let port = self.node_ports[nic][k];
            self.sched[port.0 as usize].join(q, &mut self.qps[q], 1 << k.min(31));
            self.try_transmit(port);
        }
    }

    pub(super) fn on_flow_start(&mut self, f: FlowId) {
        let flow = &self.flows[f];
        self.post_message(flow.conn, flow.bytes, Owner::Flow(f), flow.verb);
    }

    /// Posts an RDMA WRITE or SEND of `bytes` on a connection, striped
    /// evenly over its QPs (QP scaling, `message_parts`).
    pub(super) fn post_message(&mut self, conn: ConnectionId, bytes: u64, owner: Owner, verb: Verb) {
        if self.scenario.nic.message_split == MessageSplit::LeastLoaded {
            // The first of the connection's QPs with the fewest outstanding bytes.
            let qps = &self.connections[conn].qps;
            let q = *qps.iter().min_by_key(|&&q| self.qps[q].outstanding).expect("a connection has a QP");
            let id = self.messages.push(Message { owner, parts_left: 1, verb });
            self.put_on_qp(q, id, bytes, verb);
            return;
        }
        let qps = self.connections[conn].qps.len();
        let parts = message_part_count(bytes, qps) as u32;
        let id = self.messages.push(Message { owner, parts_left: parts, verb });
        for (k, share) in message_parts(bytes, qps).enumerate() {
            let q = self.connections[conn].qps[k];
            self.put_on_qp(q, id, share, verb);
        }
    }

    /// Posts `bytes` of message `id` for QP `q`: on it, or where SHIFT
    /// sends its work now.
    fn put_on_qp(&mut self, q: QpId, id: MessageId, bytes: u64, verb: Verb) {
        if let super::shift::Route::Post(to) = self.shift_route(q, id, bytes) {
            self.post_on_qp(to, id, bytes, verb);
        }
    }

    /// Posts `bytes` of message `id` on QP `q` itself.
    pub(super) fn post_on_qp(&mut self, q: QpId, id: MessageId, bytes: u64, verb: Verb) {
        let (now, first) = (self.now(), self.actions.len());
        let qp = &mut self.qps[q];
        qp.transport.post(bytes, verb, now, &mut self.actions);
        qp.messages.push_back((id, bytes));
        qp.outstanding += bytes;
        self.make_ready(q);
        self.carry_out(q, first);
    }

    /// The responder finished `count` messages of QP `q`, oldest first.
    fn messages_arrived(&mut self, q: QpId, count: u32) {
        for _ in 0..count {
            let (m, bytes) = self.qps[q].messages.pop_front().expect("a completed message was posted");
            self.qps[q].outstanding -= bytes;
            if self.shift.is_some() {
                self.shift_delivered(q, m, bytes);
            }
            // A write with immediate raises its completion at the responder
            // only now that every byte of it has been placed; a SEND
            // completes its RECV, and the application posts another.
            match self.messages[m].verb {
                Verb::WriteImm => self.totals.imm_completions += 1,
                Verb::Send => self.qps[q].transport.post_recvs(1),
                Verb::Write | Verb::Read => {}
            }
            self.messages[m].parts_left -= 1;
            if self.messages[m].parts_left == 0 {
                self.message_done(self.messages[m].owner);
            }
        }
        if self.shift.is_some() {
            self.shift_backup_drained(q);
        }
    }

    /// Every part of a message has arrived.
    fn message_done(&mut self, owner: Owner) {
        match owner {
            Owner::Flow(f) => {
                self.flows[f].end = Some(self.now());
                self.work_left -= 1;
            }
            Owner::Transfer(t) => super::jobs::transfer_done(self, t),
            Owner::ShiftProbe(_) | Owner::ShiftNotify(_) | Owner::ShiftFallbackNotify(_) => {
                self.shift_write_done(owner)
            }
            Owner::ShiftDuplicate => {}
        }
    }

    /// QP `q` failed: everything still posted on it is lost with it.
    fn fail_qp(&mut self, q: QpId) {
        self.totals.qp_errors += 1;
        if self.shift_takes_failure(q) {
            return;
        }
        let mut lost: Vec<Owner> = self.qps[q].messages.iter().map(|&(m, _)| self.messages[m].owner).collect();
        lost.extend(self.shift_stranded(q).into_iter().map(|m| self.messages[m].owner));
        for owner in lost {
            match owner {
                Owner::Flow(f) if !self.flows[f].failed && self.flows[f].end.is_none() => {
                    self.flows[f].failed = true;
                    self.work_left -= 1;
                }
                Owner::Flow(_)
                | Owner::ShiftProbe(_)
                | Owner::ShiftNotify(_)
                | Owner::ShiftFallbackNotify(_)
                | Owner::ShiftDuplicate => {}
                Owner::Transfer(t) => self.transfer_failed(t),
            }
        }
    }

    /// Tears QP `q` down with its job: what it had posted is gone, and it
    /// leaves every ready list.
    pub(super) fn destroy_qp(&mut self, q: QpId) {
        let qp = &mut self.qps[q];
        (qp.destroyed, qp.outstanding) = (true, 0);
        qp.messages.clear();
        let ports = &self.node_ports[qp.src.0 as usize];
        for (k, port) in ports.iter().enumerate() {
            if qp.in_ready_lists & (1 << k.min(31)) != 0 {
                self.sched[port.0 as usize].ready.retain(|&x| x != q);
            }
        }
        qp.in_ready_lists = 0;
    }

    /// Opens connection `conn` again on new QPs, one for each of its old
    /// ones, bound to the ports the old ones used, each with a UDP source
    /// port of its own (a new QPN); under `disjoint` path selection, the
    /// paths are searched again over the routes as they are now, around
    /// what failed (alibaba-hpn.txt s6.1).
    pub(super) fn reconnect(&mut self, conn: ConnectionId) {
        let first = self.qps.len();
        let entropies = match self.scenario.nic.path_selection {
            PathSelection::Disjoint => self.disjoint_entropies(conn, first),
            _ => (0..self.connections[conn].qps.len())
                .map(|k| QpSetup::entropy_of(self.scenario.seed, QpId((first + k) as u32)))
                .collect(),
        };
        let mut renamed = Vec::new();
        for (k, entropy) in entropies.into_iter().enumerate() {
            let old = self.connections[conn].qps[k];
            let id = self.qps.next_id();
            let setup = QpSetup { qp: id, entropy, ..self.qp_setups[old] };
            let before = &self.qps[old];
            let qp = Qp {
                transport: self.qp_factory.build(&setup),
                next_send: Time::ZERO,
                in_ready_lists: 0,
                entropy: setup.entropy,
                reverse: None,
                timers_queued: [Time::MAX; TIMERS],
                messages: Default::default(),
                outstanding: 0,
                destroyed: false,
                ..*before
            };
            let (src, dst) = (qp.src, qp.dst);
            self.qps.push(qp);
            self.qps[id].transport.post_recvs(self.scenario.transport.recv_depth());
            self.qp_setups.push(setup);
            self.recorder.number_qp(id, src, dst);
            self.connections[conn].qps[k] = id;
            renamed.push((old, id));
        }
        // A QP paired with an old one pairs with its successor.
        for q in self.qps.ids() {
            if let Some(r) = self.qps[q].reverse {
                if let Some(&(_, new)) = renamed.iter().find(|(old, _)| *old == r) {
                    self.qps[q].reverse = Some(new);
                }
            }
        }
        for &(old, new) in &renamed {
            self.qps[new].reverse = self.qps[old].reverse;
            self.shift_renamed(old, new);
        }
    }

    /// Source ports for connection `conn`'s QPs, to be numbered from
    /// `first`, whose paths over the current routes are disjoint (RePaC).
    fn disjoint_entropies(&mut self, conn: ConnectionId, first: usize) -> Vec<u16> {
        let (ports, switches, topo) = (&self.ports, &self.switches, &self.topo);
        let port_node = |p: PortId| ports[p.0 as usize].node;
        let seed = |n: NodeId| switches[n.0 as usize].as_ref().map_or(0, |s| s.ecmp_seed);
        let is_access = |l: LinkId| topo.is_nic(topo.links[l.0 as usize].a);
        let fabric = repac::Fabric { routes: &self.routes, port_node: &port_node, seed: &seed, is_access: &is_access };
        let qps = &self.connections[conn].qps;
        let (src, dst) = (self.qps[qps[0]].src, self.qps[qps[0]].dst);
        let (src_ports, dst_ports) = (self.node_ports[src.0 as usize].len(), self.node_ports[dst.0 as usize].len());
        let per_access = repac::per_access(qps.len() as u32, src_ports, dst_ports);
        let tally = self.path_search.get_or_insert_with(Default::default);
        let mut chosen = repac::Chosen::default();
        let mut found = 0;
        let entropies = (qps.iter().enumerate())
            .map(|(k, &old)| {
                let id = QpId((first + k) as u32);
                let from = self.qps[old].src_port;
                let candidates = repac::candidates(self.scenario.seed, id);
                let (entropy, apart) = fabric.pick(&mut chosen, (from, src, dst), per_access, candidates, tally);
                found += u64::from(apart);
                entropy
            })
            .collect();
        tally.add_connection(qps.len() as u64, found);
        entropies
    }

    /// Carries out, in order, the actions QP `q`'s transport appended to
    /// `self.actions` from `first` on. Carrying one out can append more
    /// (another QP's transport runs); those are carried out and removed
    /// before it returns, so the buffer is used as a stack.
    #[inline(always)]
    fn carry_out(&mut self, q: QpId, first: usize) {
        if self.actions.len() > first {
            self.carry_out_all(q, first);
        }
    }

    #[inline(never)]
    fn carry_out_all(&mut self, q: QpId, first: usize) {
        let end = self.actions.len();
        for i in first..end {
            // The packet path's two actions are tested first, each with a
            // branch of its own: a jump table over every kind mispredicted
            // on nearly every packet (they alternate: received, then send).
            match self.actions[i] {
                Action::Send { end, port, control } => self.send_control(q, end, port as usize, control),
                Action::Received { delivered, discarded, messages } => self.received(q, delivered, discarded, messages),
                other => self.carry_out_one(q, other),
            }
        }
        self.actions.truncate(first);
    }

    #[inline(never)]
    fn carry_out_one(&mut self, q: QpId, action: Action) {
        match action {
            Action::Send { end, port, control } => self.send_control(q, end, port as usize, control),
            Action::Arm { timer, at } => self.arm(q, timer, at),
            Action::Received { delivered, discarded, messages } => self.received(q, delivered, discarded, messages),
            Action::TrimmedArrived => self.totals.trimmed_received += 1,
            Action::Ready => self.make_ready(q),
            Action::Failed => self.fail_qp(q),
            Action::EvChanged(change) => self.recorder.ev_changed(self.events.now(), q, change),
            Action::PathWorks(ev) => {
                if let Some(other) = self.qps[q].reverse {
                    let now = self.events.now();
                    self.qps[other].transport.reverse_path_works(ev, now);
                }
            }
        }
    }

    /// QP `q`'s responder took a data packet (see `Action::Received`).
    #[inline]
    fn received(&mut self, q: QpId, delivered: u32, discarded: u32, messages: u32) {
        self.totals.delivered_payload += delivered as u64;
        self.totals.discarded_payload += discarded as u64;
        self.nic_rx_payload[self.qps[q].dst.0 as usize] += delivered as u64;
        if self.shift.is_some() {
            self.shift_placed(q, u64::from(delivered));
        }
        self.messages_arrived(q, messages);
    }

    /// Queues a wake-up of QP `q`'s `timer` at `at`, unless one no later is
    /// queued already. A deadline already past wakes it now (a transport may
    /// compute one: MRC's reordering deadline under a 1ns window).
    fn arm(&mut self, q: QpId, timer: Timer, at: Time) {
        let at = at.max(self.events.now());
        let queued = &mut self.qps[q].timers_queued[timer.index()];
        if at < *queued {
            *queued = at;
            self.events.schedule(at, Event::QpTimer { qp: q, timer: timer.index() as u8 });
        }
    }

    pub(super) fn on_qp_timer(&mut self, q: QpId, timer: Timer) {
        let now = self.now();
        let queued = &mut self.qps[q].timers_queued[timer.index()];
        if *queued != now {
            return; // superseded by an earlier wake-up
        }
        *queued = Time::MAX;
        if self.qps[q].destroyed {
            return;
        }
        let first = self.actions.len();
        self.qps[q].transport.on_timer(timer, now, &mut self.actions);
        self.carry_out(q, first);
    }

    /// The data packet a transport chose to send on QP `q` out of `port`.
    fn alloc_data_packet(&mut self, q: QpId, port: PortId, out: Outgoing) -> PacketId {
        let data = out.data;
        let mut flags = flag::ECT;
        for (set, bit) in [
            (data.first, flag::FIRST),
            (data.last, flag::LAST),
            (data.retransmission, flag::RETX),
            (data.headers().imm, flag::IMM),
            (data.addressed, flag::ADDRESSED),
        ] {
            if set {
                flags |= bit;
            }
        }
        self.totals.sent_payload += data.payload as u64;
        let qp = &self.qps[q];
        let packet = Packet {
            kind: match data.verb {
                Verb::Write | Verb::WriteImm => PacketKind::Data,
                Verb::Send => PacketKind::Send,
                Verb::Read => PacketKind::ReadResponse,
            },
            class: CLASS_DATA as u8,
            flags,
            entropy: out.entropy,
            src: qp.src,
            dst: qp.dst,
            qp: q.0,
            psn: data.psn,
            payload: data.payload as u16,
            wire: self.framing.wire_of(&data) as u16,
            port: NO_PORT,
            ports_up: 0xFF,
            ack: 0,
            echo: 0,
        };
        let usids = self.srv6_usids(q, End::Requester, port, out.entropy);
        self.pool.alloc_routed(packet, usids)
    }

    /// The uSIDs of the SRv6 path a packet of QP `q` leaving `from` at
    /// `end` takes to the other end, picked by its entropy: to the port of
    /// the same plane there for a sprayed QP, else to the QP's own port.
    /// None when switches do not forward by SRv6 or there is no such path
    /// (the first switch then drops the packet).
    #[inline(always)]
    fn srv6_usids(&self, q: QpId, end: End, from: PortId, entropy: u16) -> Usids {
        match self.srv6 {
            None => [0; USIDS],
            Some(_) => self.srv6_path_usids(q, end, from, entropy),
        }
    }

    fn srv6_path_usids(&self, q: QpId, end: End, from: PortId, entropy: u16) -> Usids {
        let Some(srv6) = self.srv6.as_ref() else { return [0; USIDS] };
        let qp = &self.qps[q];
        let to = match (qp.sprays, end) {
            (true, End::Requester) => {
                self.node_ports[qp.dst.0 as usize].get(self.ports[from.0 as usize].index as usize)
            }
            (true, End::Responder) => {
                self.node_ports[qp.src.0 as usize].get(self.ports[from.0 as usize].index as usize)
            }
            (false, End::Requester) => Some(&qp.dst_port),
            (false, End::Responder) => Some(&qp.src_port),
        };
        to.and_then(|&to| srv6.path(from, to, entropy)).map_or([0; USIDS], |p| p.usids)
    }

    /// Sends a control packet of QP `q` from its `end` out of that NIC's
    /// port `index` (for a QP that does not spray, its own port there). A
    /// NIC sends no probe on a port it knows is down.
    fn send_control(&mut self, q: QpId, end: End, index: usize, control: Control) {
        let qp = &self.qps[q];
        let (from, to, own_port) = match end {
            End::Requester => (qp.src, qp.dst, qp.src_port),
            End::Responder => (qp.dst, qp.src, qp.dst_port),
        };
        let port = if qp.sprays {
            let Some(&port) = self.node_ports[from.0 as usize].get(index) else { return };
            port
        } else {
            own_port
        };
        if control.kind == PacketKind::Probe && self.sched[port.0 as usize].known_down {
            return;
        }
        let ip = self.framing.ip;
        let wire = self.framing.encap
            + match control.kind {
                PacketKind::Cnp => headers::cnp_wire(ip),
                PacketKind::ReadRequest => headers::read_request_wire(ip),
                _ => headers::ack_wire(ip),
            };
        let base = Packet::control(control.kind, from, to, q.0, control.psn, control.entropy, wire);
        let class = if control.in_band { CLASS_DATA } else { CLASS_CONTROL } as u8;
        let packet = Packet {
            class,
            flags: control.flags,
            ack: control.ack,
            echo: control.echo,
            ports_up: self.ports_up(from),
            ..base
        };
        let usids = self.srv6_usids(q, end, port, control.entropy);
        self.send_control_packet(port, packet, usids);
    }

    /// Queues a control packet carrying `usids` on NIC `port` (high class)
    /// and kicks it.
    pub(super) fn send_control_packet(&mut self, port: PortId, packet: Packet, usids: Usids) {
        let (wire, class) = (packet.wire(), packet.class as usize);
        let id = self.pool.alloc_routed(packet, usids);
        self.ports[port.0 as usize].enqueue(class, id, wire, &mut self.pool);
        self.try_transmit(port);
    }

    /// The bitmap of a NIC's ports it believes up (ports past the eighth
    /// share the last bit).
    #[inline]
    pub(super) fn ports_up(&self, nic: NodeId) -> u8 {
        self.nic_ports_up[nic.0 as usize]
    }

    /// Recomputes NIC `nic`'s bitmap of the ports it believes up.
    pub(super) fn note_ports_up(&mut self, nic: NodeId) {
        self.nic_ports_up[nic.0 as usize] = self.node_ports[nic.0 as usize]
            .iter()
            .enumerate()
            .filter(|(_, p)| !self.sched[p.0 as usize].known_down)
            .fold(0u8, |bits, (i, _)| bits | 1 << i.min(7));
    }

    /// A packet reached the NIC by `port`: a Clustermapper probe back home,
    /// or a packet of one of its QPs for the transport.
    pub(super) fn nic_receive(&mut self, port: PortId, id: PacketId) {
        let pkt = *self.pool.get(id);
        self.pool.free(id);
        if pkt.kind == PacketKind::MapProbe {
            self.mapper_receive(&pkt);
            return;
        }
        if pkt.kind == PacketKind::Conweave {
            // Meant for the source ToR; a NIC behind another ToR ignores it.
            return;
        }
        let q = QpId(pkt.qp);
        if self.qps[q].destroyed {
            return;
        }
        let end = if pkt.dst == self.qps[q].src { End::Requester } else { End::Responder };
        let index = self.ports[port.0 as usize].index as usize;
        let (now, first) = (self.now(), self.actions.len());
        self.qps[q].transport.on_packet(end, index, &pkt, now, &mut self.actions);
        self.carry_out(q, first);
    }

    pub(super) fn on_nic_port_state(&mut self, port: PortId, up: bool) {
        // A change undone before the NIC noticed it is not noticed.
        if self.nic_sees_up(port) != up {
            return;
        }
        self.sched[port.0 as usize].known_down = !up;
        let nic = self.ports[port.0 as usize].node;
        self.note_ports_up(nic);
        if self.scenario.nic.port_failover == PortFailover::Lacp {
            self.rebind_to_bond(nic);
        }
        let index = self.ports[port.0 as usize].index as usize;
        for q in self.qps.ids() {
            if self.qps[q].src != nic {
                continue;
            }
            self.qps[q].transport.on_port_state(index, up);
            self.make_ready(q);
        }
    }

    /// LACP failover: binds each QP of `nic` that does not spray, at either
    /// end, to its own port if that is up, else to a port of the bond that
    /// is, chosen by the QP's UDP source port (all down: it stays).
    fn rebind_to_bond(&mut self, nic: NodeId) {
        let up: Vec<PortId> =
            self.node_ports[nic.0 as usize].iter().copied().filter(|p| !self.sched[p.0 as usize].known_down).collect();
        let bound = |home: PortId, now: PortId, entropy: u16| match up.as_slice() {
            [] => now,
            _ if up.contains(&home) => home,
            ports => ports[entropy as usize % ports.len()],
        };
        for q in self.qps.ids() {
            let qp = &self.qps[q];
            if qp.sprays {
                continue;
            }
            if qp.dst == nic {
                self.qps[q].dst_port = bound(qp.dst_home, qp.dst_port, qp.entropy);
            }
            let qp = &self.qps[q];
            if qp.src != nic {
                continue;
            }
            let (old, new) = (qp.src_port, bound(qp.src_home, qp.src_port, qp.entropy));
            if new == old {
                continue;
            }
            // Off the old port's round robin, onto the new one's.
            let bit = 1u32 << (self.ports[old.0 as usize].index as u32).min(31);
            if self.qps[q].in_ready_lists & bit != 0 {
                self.sched[old.0 as usize].ready.retain(|&x| x != q);
                self.qps[q].in_ready_lists &= !bit;
            }
            self.qps[q].src_port = new;
            self.make_ready(q);
        }
    }

    /// Starts the EV log with every QP's initial EV sets.
    pub(super) fn start_ev_log(&mut self) {
        for q in self.qps.ids() {
            let first = self.actions.len();
            self.qps[q].transport.log_evs(&mut self.actions);
            self.carry_out(q, first);
        }
    }

    /// Takes every EV whose static path crosses a denied link out of use,
    /// and returns those no longer denied to probing (s2.4, s3).
    pub(super) fn apply_denylist(&mut self) {
        if self.srv6.is_none() || self.denied_links.is_empty() {
            return;
        }
        let now = self.now();
        for q in self.qps.ids() {
            let first = self.actions.len();
            let Some(srv6) = self.srv6.as_ref() else { return };
            let (ports, denied_links) = (&self.ports, &self.denied_links);
            let qp = &mut self.qps[q];
            let (src_ports, dst_ports) = (&self.node_ports[qp.src.0 as usize], &self.node_ports[qp.dst.0 as usize]);
            let denied = |ev: Ev| {
                let (Some(&from), Some(&to)) = (src_ports.get(ev.plane()), dst_ports.get(ev.plane())) else {
                    return false;
                };
                srv6.path(from, to, ev.0).is_some_and(|path| {
                    srv6.links(from, &path, |p| ports[p.peer().0 as usize].node).iter().any(|&l| denied_links[l])
                })
            };
            qp.transport.deny_evs(&denied, now, &mut self.actions);
            self.carry_out(q, first);
        }
    }
}
