//! MRC: multipath reliable connection (mrc-srv6-multiplane.txt s2.1, s2.4,
//! s4). A QP sprays its packets over a set of entropy values (EVs), equal
//! numbers per plane, striped over the plane's paths (`striping`), rotating
//! through them and through the planes; every data packet carries its
//! RDMA address, so the receiver places packets in any order and
//! acknowledges each one selectively (SACK), echoing its EV and ECN mark. A
//! trimmed packet is NACKed and retransmitted at once. Packets on one EV
//! follow one path and arrive in order, so a packet still unacknowledged
//! when a later packet on the same EV is acknowledged is lost, not late:
//! its EV is retired and replaced by a backup EV of the same plane, and
//! the packet is resent on another EV. Reordering across EVs is expected
//! and never taken for loss beyond a reordering window. An ECN-marked EV is
//! swapped for a backup and avoided for a while (ECN as a load-balancing
//! signal, since the last hop does not mark). A timer resends what is still
//! in flight after a tail loss. The responder's SACKs take a reverse EV per
//! plane, learned from probes or from data of the other direction.
//!
//! The paper does not publish MRC's congestion control; the sender's
//! window follows UET's NSCC (`cc::nscc`): delay and ECN per SACK, trims
//! per NACK and losses as the sender finds them.

mod receiver;
mod sender;
mod striping;

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Action, Control, DataPacket, End, Outgoing, QpSetup, QpStats, Timer, Transport, Verb, Warm};
use crate::cc::NsccConfig;
use crate::engine::Rng;
use crate::net::{flag, Ev, Packet, PacketKind, MAX_PLANES};
use crate::units::{Bytes, Rate, Time};

use receiver::MrcReceiver;
use sender::MrcSender;

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MrcConfig {
    /// QPs per connection.
    pub qps: u32,
    /// Active EVs per QP, split equally over the planes. Default 128, the
    /// low end of the paper's 128 to 256 (s2.1).
    pub evs: u32,
    /// Backup EVs per QP that replace retired ones (s2.4, s4).
    pub backup_evs: u32,
    /// How long an EV whose packet came back ECN-marked is skipped. The
    /// paper does not give MRC's value; 5us, about half the base RTT of the
    /// fabrics modelled here, kept every racks-to-racks flow (Fig 20) within
    /// 5% of line rate over three seeds, where 20us and 50us let avoided EVs
    /// pile load onto the others (docs/EXPERIMENTS.md).
    pub ecn_avoid: Time,
    /// Swap an EV whose packet came back ECN-marked for a backup of its
    /// plane; it rejoins the backups, last in line (Fig 14: a flow moves
    /// from the marked EV-A to EV-B). The paper describes the move, not
    /// the rule; one mark is the simplest rule that makes it, and with no
    /// backup left the EV is only avoided for `ecn_avoid`.
    pub ecn_replace: bool,
    /// How much later than a lost packet another packet, on any EV, must
    /// have been sent and acknowledged for the loss to be declared
    /// (RACK's reordering window, RFC 8985), at its widest: the window
    /// starts here, narrows as resent copies confirm losses and widens back
    /// as losses prove spurious. Paths differ only by their queueing; 50us
    /// is above the queueing difference ECN-guided spraying leaves between
    /// the paths of the fabrics modelled here (a fixed 20us retired
    /// thousands of EVs spuriously in the MRC bench), and still detects a
    /// dead path in one RTT plus that, not after the RTO.
    pub reorder_window: Time,
    /// Retransmission timer for tail losses. Default 320us, the IRN
    /// RTO_high ConWeave uses (protocols.md s2.6).
    pub rto: Time,
    /// The timer when at most 3 packets are in flight, the tail of a
    /// message where no later SACK can reveal a loss. Default 100us, IRN's
    /// RTO_low (protocols.md s2.6); once RTTs are measured, the timer is
    /// RFC 6298's SRTT + 4 RTTVAR when that is shorter.
    pub rto_low: Time,
    /// The shortest the measured tail timer gets. Default 25us, a quarter
    /// of IRN's RTO_low: with less, a loss-free 16-rank all-to-all (15-way
    /// incast at every receiver, no ECN on the last hop) fired the timer on
    /// a third of its QPs; with more, tail losses cost more (Fig 16).
    pub rto_min: Time,
    /// Congestion control (NSCC's structure; the paper does not publish
    /// MRC's).
    pub cc: NsccConfig,
    /// Maximum (and initial) window: unset means 1.5 x the NIC's rate x
    /// 12us, NSCC's 1.5 BDP at its reference RTT (protocols.md s5.5).
    pub window: Option<Bytes>,
    /// Restricts each plane to this many distinct paths (EV path choices
    /// 0..n, active EVs first, then backups), as the paper's packet-drop
    /// experiment restricts the system to 2 paths per plane (s5.2.4).
    /// Unset stripes the EVs over every path (`striping`).
    pub paths_per_plane: Option<u32>,
    /// How often a QP probes each of its retired EVs (s2.4: background path
    /// probes). The paper gives no period; 100us is about ten base RTTs
    /// here, so a repaired path is back within a millisecond while probes
    /// cost one header-sized packet per retired EV per period.
    pub probe_interval: Time,
    /// Consecutive answered probes that resurrect a retired EV ("if enough
    /// probes succeed", s2.4; the number is not published).
    pub resurrect_after: u32,
    /// How often a receiver that sends nothing on the QP probes a random EV
    /// to refresh its reverse EV set ("each RTT", s2.4 Reverse Paths). The
    /// receiver does not measure the RTT; 12us is NSCC's reference RTT
    /// (protocols.md s5.5).
    pub reverse_probe_interval: Time,
    /// EVs per plane in the receiver's reverse EV set ("a small reverse EV
    /// set for control packets, with at least one EV per plane", s2.4). Its
    /// SACKs, NACKs and probe answers take one at a time, so that they keep
    /// their order, and move to the next when a duplicate arrival shows
    /// SACKs are lost, without waiting for a probe. The size is not
    /// published; 4 gives a plane three ways out of a dead reverse path.
    pub reverse_evs: u32,
    /// Links (`node:port`) whose paths are never used: the denylist
    /// (s2.4, s3). Needs SRv6, under which an EV names its path.
    pub denylist: Vec<String>,
    /// A QP with data outstanding and no new packet acknowledged for this
    /// long fails, as a NIC reports a fatal completion. The paper gives no
    /// value; the default is IBTA's longest retry (count 7) at RoCE's
    /// timeout exponent 8 (4.096us x 2^8 each, 8.4ms in all), so that a
    /// QP of a dead fabric fails within milliseconds.
    pub error_timeout: Time,
}

impl Default for MrcConfig {
    fn default() -> Self {
        MrcConfig {
            qps: 1,
            evs: 128,
            backup_evs: 32,
            ecn_avoid: Time::from_us(5),
            ecn_replace: true,
            reorder_window: Time::from_us(50),
            rto: Time::from_us(320),
            rto_low: Time::from_us(100),
            rto_min: Time::from_us(25),
            cc: NsccConfig::default(),
            window: None,
            paths_per_plane: None,
            probe_interval: Time::from_us(100),
            resurrect_after: 3,
            reverse_probe_interval: Time::from_us(12),
            reverse_evs: 4,
            denylist: Vec::new(),
            error_timeout: Time::from_ns(8 * 1_048_576),
        }
    }
}

impl MrcConfig {
    /// A QP's maximum (and initial) window on a NIC of `nic_rate`: `window`,
    /// or NSCC's 1.5 BDP at 12us (protocols.md s5.5), and at least one
    /// `mtu` packet however slow the NIC.
    pub fn max_window(&self, nic_rate: Rate, mtu: u64) -> u64 {
        let bdp = (nic_rate.0 as f64 * 12e-6 / 8.0 * 1.5) as u64;
        self.window.map_or(bdp.max(mtu), |w| w.0)
    }
}

/// EVs chosen by hand instead of drawn, as the paper's experiments pin
/// flows to given paths (s5.2.5, Fig 14). Each EV's low 3 bits name its
/// plane.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvSet {
    pub active: Vec<Ev>,
    #[serde(default)]
    pub backup: Vec<Ev>,
}

/// Where an EV stands in its QP's sets (s2.4, s4; Figs 12-14 plot these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvState {
    /// In the active set: packets are sprayed on it.
    Active,
    /// In the backup set: replaces the next retired or ECN-swapped EV of
    /// its plane.
    Backup,
    /// Retired after a loss; probed until enough probes succeed.
    Retired,
    /// On the denylist: never used, never probed.
    Denied,
}

impl EvState {
    pub fn name(self) -> &'static str {
        match self {
            EvState::Active => "active",
            EvState::Backup => "backup",
            EvState::Retired => "retired",
            EvState::Denied => "denied",
        }
    }
}

/// One change of an EV's state, for the EV log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvChange {
    pub ev: Ev,
    pub state: EvState,
}

/// A random EV of `plane`: the path choice a random 16-bit value names.
pub(super) fn random_ev(rng: &mut Rng, plane: usize) -> Ev {
    Ev::new(plane, Ev(rng.next_u64() as u16).choice() as u32)
}

/// An MRC QP: the requester's sender and the responder's receiver.
pub struct MrcQp {
    cfg: Arc<MrcConfig>,
    sender: MrcSender,
    receiver: MrcReceiver,
    /// When a packet was last newly acknowledged, or a first transmission
    /// last left with nothing in flight: the error timeout counts from
    /// here. Retries (after a timeout or a NACK) do not restart it.
    last_progress: Time,
    /// The QP gave up (`error_timeout`): it sends and retries nothing more.
    failed: bool,
    /// When the reordering timer's pending wake-up is due, if one is.
    reorder_armed: Option<Time>,
    /// Per plane, when the requester last reported a working EV
    /// (`Action::PathWorks`): at most one report per reverse probe interval.
    reported: [Option<Time>; MAX_PLANES],
}

impl MrcQp {
    pub fn new(cfg: Arc<MrcConfig>, setup: &QpSetup) -> MrcQp {
        let window = cfg.max_window(setup.nic_rate, u64::from(setup.mtu));
        let sender =
            MrcSender::new(&cfg, setup.requester_ports, setup.paths, setup.mtu, window, &mut setup.stream(0xE5));
        let receiver = MrcReceiver::new(setup.responder_ports, cfg.reverse_evs as usize, setup.stream(0xE6));
        MrcQp {
            cfg,
            sender,
            receiver,
            last_progress: Time::ZERO,
            reorder_armed: None,
            failed: false,
            reported: [None; MAX_PLANES],
        }
    }

    /// Restarts the retransmission timer from now, or stops it when nothing
    /// is in flight and the NIC can send what waits (`MrcSender::waiting`).
    fn arm_retransmit(&mut self, now: Time, out: &mut Vec<Action>) {
        let deadline = self.sender.waiting().then(|| now + self.sender.rto());
        self.sender.rto_deadline = deadline;
        if let Some(at) = deadline {
            out.push(Action::Arm { timer: Timer::Retransmit, at });
        }
    }

    /// Asks for a wake-up at the sender's reordering deadline, unless one
    /// no later is pending: the deadline moves on with nearly every SACK,
    /// and a wake-up that comes early re-arms.
    fn arm_reorder(&mut self, out: &mut Vec<Action>) {
        let Some(at) = self.sender.reorder_deadline else { return };
        if self.reorder_armed.is_none_or(|armed| at < armed) {
            self.reorder_armed = Some(at);
            out.push(Action::Arm { timer: Timer::Reorder, at });
        }
    }

    /// Fails the QP when its retransmission timer runs (data in flight, or
    /// waiting with no way out) and nothing new was acknowledged for
    /// `error_timeout`, retries not counting: it stops
    /// sending and reports a fatal completion (`Action::Failed`). An idle
    /// QP waits for nothing, so a late duplicate SACK cannot fail it.
    fn gives_up(&mut self, now: Time, out: &mut Vec<Action>) -> bool {
        let waiting = self.sender.rto_deadline.is_some();
        if !waiting || now.saturating_sub(self.last_progress) < self.cfg.error_timeout {
            return false;
        }
        self.failed = true;
        self.sender.rto_deadline = None;
        out.push(Action::Failed);
        true
    }

    /// The QP has data for its ports again (a NIC needs telling only then).
    fn ready(&self, out: &mut Vec<Action>) {
        if self.sender.has_data() {
            out.push(Action::Ready);
        }
    }

    /// Keeps the retired-EV probe timer running while the QP has retired
    /// EVs, and reports EV changes.
    fn after_ev_changes(&mut self, now: Time, out: &mut Vec<Action>) {
        if self.sender.has_retired() {
            out.push(Action::Arm { timer: Timer::Probe, at: now + self.cfg.probe_interval });
        }
        out.extend(self.sender.take_ev_changes().into_iter().map(Action::EvChanged));
    }

    /// An EV probe from `end` on the port of the EV's plane, naming the EV
    /// it tests in its PSN field.
    fn probe(end: End, ev: Ev, out: &mut Vec<Action>) {
        let control = Control::new(PacketKind::Probe, ev.0 as u32, ev.0);
        out.push(Action::Send { end, port: ev.plane() as u8, control });
    }

    /// A SACK without a mark showed data arrived on `ev`: tell the QP of
    /// the other direction, at most once per plane per reverse probe
    /// interval.
    fn report_working(&mut self, ev: Ev, now: Time, out: &mut Vec<Action>) {
        let last = &mut self.reported[ev.plane()];
        if last.is_none_or(|at| now >= at + self.cfg.reverse_probe_interval) {
            *last = Some(now);
            out.push(Action::PathWorks(ev));
        }
    }

    /// The receiver's answer to a data packet: a NACK for a trimmed one
    /// (resent first), else a SACK that names the packet, echoes its EV and
    /// ECN mark and acknowledges cumulatively; both on the reverse EV of
    /// the plane it came on.
    fn on_data(&mut self, port: usize, pkt: &Packet, now: Time, out: &mut Vec<Action>) {
        let trimmed = pkt.has(flag::TRIMMED);
        let mut probe = None;
        let (kind, flags) = if trimmed {
            out.push(Action::TrimmedArrived);
            (PacketKind::Nak, 0)
        } else {
            let arrival = self.receiver.placement.on_data(pkt.psn, pkt.payload());
            if arrival.duplicate {
                self.receiver.move_on(port);
            }
            let resent_on = arrival.duplicate.then_some(port);
            probe = self.receiver.reverse_probe(now, self.cfg.reverse_probe_interval, resent_on);
            let discarded = if arrival.duplicate { pkt.payload() } else { 0 };
            out.push(Action::Received { delivered: arrival.delivered, discarded, messages: arrival.completed });
            let duplicate = if arrival.duplicate { flag::DUPLICATE } else { 0 };
            (PacketKind::Ack, pkt.flags & flag::CE | duplicate)
        };
        let (entropy, ack) = (self.receiver.reverse_ev(port).0, self.receiver.placement.cumulative());
        let control = Control { kind, psn: pkt.psn, entropy, flags, ack, echo: pkt.entropy, in_band: false };
        out.push(Action::Send { end: End::Responder, port: port as u8, control });
        if let Some(ev) = probe {
            Self::probe(End::Responder, ev, out);
        }
    }
}

impl Transport for MrcQp {
    fn post(&mut self, bytes: u64, verb: Verb, _now: Time, _out: &mut Vec<Action>) {
        let (first, packets) = self.sender.post(bytes, verb);
        self.receiver.placement.expect(first, packets);
    }

    #[inline]
    fn has_data(&self) -> bool {
        !self.failed && self.sender.has_data()
    }

    fn sprays(&self) -> bool {
        true
    }

    fn next_port(&self) -> usize {
        self.sender.next_plane()
    }

    #[inline]
    fn next_packet(&mut self, port: usize, now: Time, out: &mut Vec<Action>) -> Option<Outgoing> {
        if self.failed {
            return None;
        }
        let (data, ev) = self.sender.next_packet(port, now)?;
        if self.sender.rto_deadline.is_none() {
            // Nothing was in flight: unless this is a retry, the wait for
            // progress starts now.
            if !data.retransmission {
                self.last_progress = now;
            }
            self.arm_retransmit(now, out);
        }
        Some(Outgoing { data: DataPacket { addressed: true, ..data }, entropy: ev.0, not_before: now })
    }

    fn on_packet(&mut self, end: End, port: usize, pkt: &Packet, now: Time, out: &mut Vec<Action>) {
        if self.failed && end == End::Requester {
            return;
        }
        match pkt.kind {
            PacketKind::Data => self.on_data(port, pkt, now, out),
            PacketKind::Ack | PacketKind::Nak => {
                // The SACK's port state bitmap: planes down at the other end.
                self.sender.set_remote_planes(pkt.ports_up);
                let sacked = pkt.kind == PacketKind::Ack
                    && if pkt.has(flag::DUPLICATE) {
                        self.sender.on_duplicate_sack(pkt.psn, Ev(pkt.echo))
                    } else {
                        self.sender.on_sack(pkt.psn, Ev(pkt.echo), pkt.has(flag::CE), pkt.ack, now, self.cfg.ecn_avoid)
                    };
                if pkt.kind == PacketKind::Nak {
                    self.sender.on_nack(pkt.psn, now);
                }
                if sacked && !pkt.has(flag::CE) {
                    self.report_working(Ev(pkt.echo), now, out);
                }
                let acknowledged = self.sender.on_cumulative_ack(pkt.ack) || sacked;
                if acknowledged {
                    self.last_progress = now;
                }
                // A NACK restarts the timer too (the packet it names is resent
                // now), so NACKs alone must not keep a stuck QP alive.
                if !acknowledged && self.gives_up(now, out) {
                    return;
                }
                if acknowledged || pkt.kind == PacketKind::Nak {
                    self.arm_retransmit(now, out);
                }
                self.arm_reorder(out);
                self.after_ev_changes(now, out);
                self.ready(out);
            }
            // A probe is answered on an EV known to work: the receiver's
            // reverse EV, or an active EV of the sender.
            PacketKind::Probe => {
                let ev = match end {
                    End::Requester => self.sender.reply_ev(port),
                    End::Responder => Some(self.receiver.reverse_ev(port)),
                };
                if let Some(ev) = ev {
                    let control = Control::new(PacketKind::ProbeReply, pkt.psn, ev.0);
                    out.push(Action::Send { end, port: port as u8, control });
                }
            }
            PacketKind::ProbeReply => {
                // A probe names the EV it tests in its PSN field.
                let probed = Ev(pkt.psn as u16);
                match end {
                    End::Requester => {
                        self.sender.on_probe_reply(probed);
                        self.after_ev_changes(now, out);
                        self.ready(out);
                    }
                    End::Responder => self.receiver.on_probe_reply(probed),
                }
            }
            // MRC carries no SENDs or READs (s2.1).
            PacketKind::Cnp
            | PacketKind::MapProbe
            | PacketKind::Conweave
            | PacketKind::Send
            | PacketKind::RnrNak
            | PacketKind::ReadRequest
            | PacketKind::ReadResponse => {}
        }
    }

    /// A SACK or NACK reads the sender's slot of its PSN, its planes' EVs
    /// and its oldest transmissions; data reads the receiver's arrival map.
    fn warm(&self, stage: Warm, pkt: &Packet) {
        match pkt.kind {
            PacketKind::Ack | PacketKind::Nak => self.sender.warm(stage, pkt.psn),
            PacketKind::Data => self.receiver.placement.warm(stage, pkt.psn),
            _ => {}
        }
    }

    fn on_timer(&mut self, timer: Timer, now: Time, out: &mut Vec<Action>) {
        match timer {
            Timer::Retransmit => {
                let Some(deadline) = self.sender.rto_deadline else { return };
                if deadline > now {
                    out.push(Action::Arm { timer, at: deadline });
                    return;
                }
                if self.gives_up(now, out) {
                    return;
                }
                self.sender.on_timeout();
                self.arm_retransmit(now, out);
                self.after_ev_changes(now, out);
                self.ready(out);
            }
            Timer::Probe if self.failed => {}
            Timer::Probe => {
                for ev in self.sender.probe_retired() {
                    Self::probe(End::Requester, ev, out);
                }
                self.after_ev_changes(now, out);
            }
            Timer::Reorder if self.failed => {}
            Timer::Reorder => {
                self.reorder_armed = None;
                let Some(deadline) = self.sender.reorder_deadline else { return };
                if deadline <= now && self.sender.on_reorder_timer(now) {
                    self.after_ev_changes(now, out);
                    self.ready(out);
                }
                self.arm_reorder(out);
            }
            Timer::Congestion | Timer::Wake => {}
        }
    }

    fn on_port_state(&mut self, port: usize, up: bool) {
        self.sender.set_plane_up(port, up);
    }

    fn message_bytes(&self, psn: u32) -> u64 {
        self.sender.message_bytes(psn)
    }

    fn stats(&self) -> QpStats {
        let s = &self.sender;
        QpStats {
            retransmitted_packets: s.retransmitted_packets,
            timeouts: s.timeouts,
            failed: self.failed,
            retired_evs: s.retired_evs,
            resurrected_evs: s.resurrected_evs,
            spurious_losses: s.spurious_losses,
            ecn_replacements: s.ecn_replacements,
            out_of_order_packets: self.receiver.placement.out_of_order(),
            max_reorder_distance: self.receiver.placement.max_distance() as u64,
            plane_failovers: 0,
            rnr_naks: 0,
        }
    }

    fn ooo_degrees(&self) -> Option<&crate::transport::DegreeHistogram> {
        Some(self.receiver.placement.degrees())
    }

    fn log_evs(&mut self, out: &mut Vec<Action>) {
        self.sender.log_evs();
        out.extend(self.sender.take_ev_changes().into_iter().map(Action::EvChanged));
    }

    fn reverse_path_works(&mut self, ev: Ev, now: Time) {
        self.receiver.on_working_ev(ev, now);
    }

    fn deny_evs(&mut self, denied: &dyn Fn(Ev) -> bool, now: Time, out: &mut Vec<Action>) {
        self.sender.set_denied(denied, now);
        self.after_ev_changes(now, out);
    }

    fn pin_evs(&mut self, set: &EvSet) -> bool {
        self.sender.set_evs(set);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::QpId;
    use crate::net::IpVersion;
    use crate::topology::NodeId;
    use crate::transport::Framing;

    fn qp() -> MrcQp {
        let setup = QpSetup {
            qp: QpId(0),
            nics: (NodeId(0), NodeId(1)),
            seed: 1,
            mtu: 4096,
            framing: Framing { ip: IpVersion::Ipv6, encap: 0 },
            entropy: 0xC000,
            requester_ports: 1,
            responder_ports: 1,
            line_rate: Rate::from_gbps(100),
            nic_rate: Rate::from_gbps(100),
            paths: None,
            job: false,
        };
        MrcQp::new(Arc::new(MrcConfig { evs: 1, backup_evs: 0, ..MrcConfig::default() }), &setup)
    }

    fn failed(out: &[Action]) -> bool {
        out.iter().any(|a| matches!(a, Action::Failed))
    }

    /// Warming runs for whatever packet is due a few events ahead, stale
    /// or foreign ones too: it reads and loads, and changes nothing.
    #[test]
    fn warming_changes_nothing_for_any_packet() {
        let state = |qp: &MrcQp| format!("{:?} {:?}", qp.sender, qp.receiver);
        for posted in [0, 3 * 4096] {
            let mut qp = qp();
            if posted > 0 {
                qp.post(posted, Verb::Write, Time::ZERO, &mut Vec::new());
                qp.next_packet(0, Time::ZERO, &mut Vec::new()).expect("a packet");
            }
            let before = state(&qp);
            for kind in [PacketKind::Data, PacketKind::Ack, PacketKind::Nak, PacketKind::Probe, PacketKind::Cnp] {
                for psn in [0, 1, 2, 7, u32::MAX] {
                    let pkt = Packet::control(kind, NodeId(1), NodeId(0), 0, psn, 0, 84);
                    qp.warm(Warm::Own, &pkt);
                    qp.warm(Warm::Reached, &pkt);
                }
            }
            assert_eq!(state(&qp), before, "{posted} B posted");
        }
    }

    #[test]
    fn a_late_duplicate_sack_does_not_fail_an_idle_qp() {
        let mut qp = qp();
        let mut out = Vec::new();
        qp.post(100, Verb::Write, Time::ZERO, &mut Vec::new());
        let sent = qp.next_packet(0, Time::ZERO, &mut out).expect("a packet");
        let mut sack = Packet::control(PacketKind::Ack, NodeId(1), NodeId(0), 0, 0, 0, 84);
        (sack.ack, sack.echo, sack.ports_up) = (1, sent.entropy, 1);
        qp.on_packet(End::Requester, 0, &sack, Time::from_us(10), &mut out);
        // The same SACK again, long after: nothing is outstanding, nothing is waited for.
        qp.on_packet(End::Requester, 0, &sack, Time::from_ms(20), &mut out);
        assert!(!failed(&out) && !qp.stats().failed);
    }

    /// A data SACK tells the QP of the other direction which EV works
    /// (s2.4: "the reverse EV is updated from data SACKs"), at most once
    /// per plane per reverse probe interval.
    #[test]
    fn a_data_sack_reports_a_working_path_to_the_other_direction() {
        let mut qp = qp();
        let mut out = Vec::new();
        qp.post(10_000, Verb::Write, Time::ZERO, &mut Vec::new());
        let sent: Vec<Outgoing> = (0..3).map(|_| qp.next_packet(0, Time::ZERO, &mut out).unwrap()).collect();
        let works = |out: &[Action]| out.iter().filter(|a| matches!(a, Action::PathWorks(_))).count();
        let sack = |psn: u32, echo: u16| {
            let mut p = Packet::control(PacketKind::Ack, NodeId(1), NodeId(0), 0, psn, 0, 84);
            (p.ack, p.echo, p.ports_up) = (psn + 1, echo, 1);
            p
        };
        out.clear();
        qp.on_packet(End::Requester, 0, &sack(0, sent[0].entropy), Time::from_us(10), &mut out);
        assert!(out.iter().any(|a| matches!(a, Action::PathWorks(ev) if ev.0 == sent[0].entropy)));
        qp.on_packet(End::Requester, 0, &sack(1, sent[1].entropy), Time::from_us(15), &mut out);
        assert_eq!(works(&out), 1, "within the interval: no second report");
        qp.on_packet(End::Requester, 0, &sack(2, sent[2].entropy), Time::from_us(30), &mut out);
        assert_eq!(works(&out), 2);
    }

    /// A QP whose every packet is trimmed only ever resends: NACKs and the
    /// retries they cause are no progress, and it fails at its error
    /// timeout as one whose packets vanish does.
    #[test]
    fn a_qp_that_only_gets_nacks_fails_at_its_error_timeout() {
        let mut qp = qp();
        let mut out = Vec::new();
        qp.post(100, Verb::Write, Time::ZERO, &mut Vec::new());
        let mut nack = Packet::control(PacketKind::Nak, NodeId(1), NodeId(0), 0, 0, 0, 84);
        nack.ports_up = 1;
        for ms in 0..10 {
            let now = Time::from_ms(ms);
            qp.next_packet(0, now, &mut out).expect("a retry after each NACK");
            qp.on_packet(End::Requester, 0, &nack, now + Time::from_us(10), &mut out);
        }
        assert!(failed(&out) && qp.stats().failed);
    }

    #[test]
    fn a_qp_waiting_without_progress_fails_at_its_error_timeout() {
        let mut qp = qp();
        let mut out = Vec::new();
        qp.post(100, Verb::Write, Time::ZERO, &mut Vec::new());
        qp.next_packet(0, Time::ZERO, &mut out).expect("a packet");
        qp.on_timer(Timer::Retransmit, Time::from_ms(5), &mut out);
        assert!(!failed(&out));
        // The NIC resends it; a retry does not restart the wait.
        qp.next_packet(0, Time::from_ms(5), &mut out).expect("the retry");
        qp.on_timer(Timer::Retransmit, Time::from_ms(9), &mut out);
        assert!(failed(&out) && qp.stats().failed && !qp.has_data());
    }
}
