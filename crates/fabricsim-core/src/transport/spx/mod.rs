//! Spectrum-X's transport (spectrum-x.txt s3, s4.2-s4.4): RoCE reliable
//! connection with direct data placement, on a NIC whose ports are planes
//! behind one RoCE device. The QP knows nothing of planes; the NIC's plane
//! load balancer (PLB) chooses one for every packet:
//!
//! 1. planes that failed, or whose congestion-control context's rate
//!    allowance does not let another packet go now, are excluded;
//! 2. of the rest, the one with the shallowest local egress queue. The NIC
//!    asks a QP for a packet when a port's link is free, so the port that
//!    asks is the one whose queue is empty: the shallowest.
//!
//! Each plane has its own congestion-control context (`cc::spx`), fed by
//! the CNPs of its plane and the RTT probes sent on it. A plane fails at
//! once when the NIC's own port goes down, and after `failure_probes` RTT
//! probes in a row go unanswered when the fault is remote (s4.4.1); either
//! way the requester resends what was unacknowledged, and the plane returns
//! when a probe gets through. The variants of the paper's comparisons:
//! `global_cc` (one context for all planes, s6.7), `sw_lb` (software
//! load balancing above the transport, as NCCL splits a transfer over its
//! connections: planes take equal shares, and a dead plane is found only
//! when the transport's retransmission timer fires, s6.5) and `esr`
//! (entropy-based source routing, s6.7: each packet takes an entropy value
//! that names its plane and, through the switches' ECMP hash, its path in
//! the plane; one congestion context steers the rate, and the EV of a
//! marked packet is avoided for a while, so congestion control and load
//! balancing act on the same signal).
//!
//! The contexts are the NIC's, per destination NIC as the paper has them
//! (`destination`): every QP from one NIC to another shares them, except
//! under `sw_lb`, whose QPs are ordinary RoCE QPs each with its own.

mod destination;

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rocev2::{local_ack_timeout, RoceConfig, RoceReceiver, RoceSender};
use super::{
    Action, Control, DataHeaders, DataPacket, End, Framing, Outgoing, QpSetup, QpStats, Timer, Transport, Verb,
};
use crate::cc::SpxCcConfig;
use crate::ids::QpId;
use crate::net::{flag, Packet, PacketKind};
use crate::units::{Bytes, Rate, Time, PS_PER_NS};

pub use destination::Destinations;
use destination::{Destination, Shared};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SpxConfig {
    /// QPs per connection. Default 1.
    pub qps: u32,
    /// Whose the plane contexts (congestion control, rate allowance, RTT
    /// probes, plane failures) are: `destination`, the NIC's per
    /// destination NIC, shared by all its QPs (and connections) there, as
    /// s4.3 has them (the default); or `qp`, each QP's own, as an ordinary
    /// RoCE NIC keeps congestion state, for comparison. `sw_lb` is always
    /// per QP: it runs above ordinary QPs.
    pub plane_contexts: PlaneContexts,
    /// The responder acknowledges every this many packets, and always when
    /// a message completes. Default 1, as `rocev2`.
    pub ack_every: u32,
    /// Local ACK timeout exponent (4.096us x 2^exponent). Unset: as
    /// `rocev2`, NCCL's 20 for a job's QPs, perftest's 14 for a flow's.
    pub timeout_exponent: Option<u8>,
    /// Timeouts in a row without progress before the QP fails. Default 7.
    pub retry_count: u32,
    /// How packets are spread over the planes: `plb`, the NIC's plane load
    /// balancer with a congestion-control context per plane (s4.3);
    /// `global_cc`, the same with one context shared by every plane (s6.7);
    /// `sw_lb`, equal shares per plane chosen above the transport, a dead
    /// plane found only by the retransmission timeout (s6.5); `esr`,
    /// entropy-based source routing over `esr_evs` EVs per plane with one
    /// context (s6.7, Fig 15d; run it with `switch.forwarding: ecmp`, so
    /// that the EV picks the path).
    pub plane_lb: PlaneLb,
    /// `esr`: entropy values per plane. Default 16, MRC's 128 EVs over 8
    /// planes (mrc-srv6-multiplane.txt s2.3); the paper gives none for ESR.
    pub esr_evs: u32,
    /// `esr`: how long an EV whose packet came back ECN-marked is skipped.
    /// Default 10us, about one round trip of a two-tier fabric.
    pub esr_avoid: Time,
    /// RTT probes go out on every plane this often while the QP has data
    /// outstanding. Default 20us: the paper publishes no value; a few round
    /// trips of a two-tier fabric (s4.4.1: detection "within a few RTTs").
    pub probe_interval: Time,
    /// A plane is taken out of use after this many probes in a row time out:
    /// nothing at all (probe reply, ACK, CNP) came back on it while they
    /// were out (the paper: "consecutive RTT probe timeouts", no number).
    /// Default 5: 100us of silence, about ten round trips of a two-tier
    /// fabric (the paper: detection "within a few RTTs"), and far above
    /// the queueing SPX CC is to keep (the paper's p99 latency is 8-9us).
    /// Queues that drain slower than that make planes look dead: Fig 15d's
    /// all-to-all at 256MB builds 3.4MB queues (136us at 200G) and its
    /// NICs drop planes 67 times with no fault; `failure_backoff` 2 stops it.
    pub failure_probes: u32,
    /// Each timeout in a row multiplies the next probe's timeout (the first
    /// is `probe_interval`) by this, as TCP backs off its retransmission
    /// timer (RFC 6298 s5.5), so that a plane whose answers wait behind
    /// deep queues or PFC pauses is not taken for a dead one. Default 1:
    /// fixed timeouts, fast detection as the paper has it. At 2 a dead
    /// plane is found after 20 + 40 + 80 + 160 + 320 = 620us of silence.
    pub failure_backoff: f64,
    /// The responder's NIC sends a source NIC at most one CNP per plane per
    /// interval, whichever of the pair's QPs was marked. Default 4us,
    /// NVIDIA NICs' default (protocols.md s3.6).
    pub cnp_interval: Time,
    /// A gap in the PSNs that outlasts this is a loss, not reordering: the
    /// responder NAKs the first missing PSN and the requester goes back to
    /// it; and a requester with data outstanding that has had no
    /// acknowledgement at all for this long (its last packets lost, no
    /// later one to open a gap) goes back too. A link that fails under
    /// adaptive routing loses what was on it, and without this only the
    /// retransmission timeout, seconds under NCCL, would find it. A false
    /// alarm costs a go-back-N of everything outstanding, so the default is
    /// above the reordering a lossless fabric can cause: 1ms, the time to
    /// drain a 32MB switch buffer (the default) at 400G is 0.64ms. The
    /// paper gives no value.
    pub loss_timeout: Time,
    /// Bytes a QP may have sent on a plane and not yet had acknowledged: the paper's
    /// "transmission windows" that absorb bursts (s4.2) before congestion
    /// control has reacted. Unset: one plane's line rate over 20us, twice
    /// the bandwidth-delay product of a two-tier fabric's 10us round trip
    /// (the paper publishes no value).
    pub window: Option<Bytes>,
    pub cc: SpxCcConfig,
}

impl Default for SpxConfig {
    fn default() -> Self {
        SpxConfig {
            qps: 1,
            plane_contexts: PlaneContexts::Destination,
            ack_every: 1,
            timeout_exponent: None,
            retry_count: 7,
            plane_lb: PlaneLb::Plb,
            esr_evs: 16,
            esr_avoid: Time::from_us(10),
            probe_interval: Time::from_us(20),
            failure_probes: 5,
            failure_backoff: 1.0,
            cnp_interval: Time::from_us(4),
            loss_timeout: Time::from_ms(1),
            window: None,
            cc: SpxCcConfig::default(),
        }
    }
}

impl SpxConfig {
    /// How long a probe may go unanswered after `missed` timeouts in a row.
    fn probe_timeout(&self, missed: u32) -> Time {
        let missed = missed.min(self.failure_probes.saturating_sub(1));
        Time((self.probe_interval.0 as f64 * self.failure_backoff.powi(missed as i32)).round() as u64)
    }

    /// The silence after which a plane whose fault is remote is taken out,
    /// in probe intervals: `failure_probes` probe timeouts in a row.
    pub fn remote_failure_intervals(&self) -> f64 {
        let (b, n) = (self.failure_backoff, f64::from(self.failure_probes));
        if b == 1.0 {
            n
        } else {
            (b.powf(n) - 1.0) / (b - 1.0)
        }
    }

    /// That silence as a time.
    pub fn remote_failure_detection(&self) -> Time {
        Time((self.probe_interval.0 as f64 * self.remote_failure_intervals()).round() as u64)
    }

    /// The retransmission timeout of a job's QP (`job`) or a flow's.
    pub fn retransmit_timeout(&self, job: bool) -> Time {
        let roce = RoceConfig { timeout_exponent: self.timeout_exponent, ..RoceConfig::default() };
        local_ack_timeout(roce.timeout_exponent_for(job))
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlaneLb {
    #[default]
    Plb,
    GlobalCc,
    SwLb,
    Esr,
}

impl PlaneLb {
    /// The name a scenario gives it.
    pub fn name(self) -> &'static str {
        match self {
            PlaneLb::Plb => "plb",
            PlaneLb::GlobalCc => "global_cc",
            PlaneLb::SwLb => "sw_lb",
            PlaneLb::Esr => "esr",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlaneContexts {
    #[default]
    Destination,
    Qp,
}

/// What a QP keeps per plane of its own; the plane's contexts are its
/// destination's (`destination::PlaneContext`).
#[derive(Clone, Debug, Default)]
struct QpPlane {
    /// `esr`: its entropy values, each with the time until which it is
    /// avoided, and the one to take next.
    evs: Vec<(u16, Time)>,
    next_ev: usize,
    /// Bytes sent on it (`sw_lb`'s equal shares), and sent but not yet
    /// acknowledged (the window).
    sent: u64,
    in_flight: u64,
    /// A data packet last left on it.
    last_sent: Time,
}

pub struct SpxQp {
    cfg: Arc<SpxConfig>,
    id: QpId,
    sender: RoceSender,
    receiver: RoceReceiver,
    planes: Vec<QpPlane>,
    /// The NIC's contexts towards the destination, shared with every
    /// other QP there.
    dest: Shared,
    /// The destination's plane failures, and failures and returns, this
    /// QP has acted on.
    seen_failures: u64,
    seen_changes: u64,
    /// The responder's oldest gap: since when PSN `.1` (its next expected)
    /// has been missing while later ones arrived, and the port the latest
    /// of them came by (a working plane, for the NAK).
    gap: Option<(Time, u32, u8)>,
    framing: Framing,
    mtu: u32,
    /// Line rate of one port (plane) and of the NIC.
    line: Rate,
    nic_line: Rate,
    entropy: u16,
    timeout: Time,
    window: u64,
    /// What one acknowledgement covers, as an estimate: `ack_every` full
    /// packets (ACKs are cumulative, each on the plane its packet came).
    acked_per_ack: u64,
    probing: bool,
    recovering: bool,
    /// The requester last had an acknowledgement (or started sending).
    acked_at: Time,
    /// Where the make-ready order of ports starts: rotates so that no port
    /// is always asked first when several are free.
    rotation: usize,
    plane_failovers: u64,
}

impl SpxQp {
    /// A QP whose plane contexts are `dest`'s (`Destinations::of`).
    pub fn new(cfg: Arc<SpxConfig>, setup: &QpSetup, dest: Shared) -> SpxQp {
        let planes = setup.requester_ports.max(1);
        let evs = if cfg.plane_lb == PlaneLb::Esr { cfg.esr_evs as usize } else { 0 };
        let plane = |k: usize| QpPlane {
            // RoCEv2 source ports (0xC000 up), distinct over the QP's planes.
            evs: (0..evs)
                .map(|e| (0xC000 | (setup.entropy.wrapping_add((k * evs + e) as u16) & 0x3FFF), Time::ZERO))
                .collect(),
            ..QpPlane::default()
        };
        // Every packet is addressed; a full one mid-message carries nothing else.
        let full = setup.framing.data_wire(setup.mtu, DataHeaders::of(Verb::Write, false, false, true)) as u64;
        let (seen_failures, seen_changes) = {
            let d = dest.borrow();
            (d.failures, d.changes)
        };
        SpxQp {
            timeout: cfg.retransmit_timeout(setup.job),
            window: cfg.window.map_or(setup.line_rate.bytes_in(Time::from_us(20)) as u64, |w| w.0).max(full),
            acked_per_ack: full * u64::from(cfg.ack_every),
            cfg,
            id: setup.qp,
            sender: RoceSender::default(),
            receiver: RoceReceiver::new(true),
            planes: (0..planes).map(plane).collect(),
            dest,
            seen_failures,
            seen_changes,
            gap: None,
            framing: setup.framing,
            mtu: setup.mtu,
            line: setup.line_rate,
            nic_line: setup.nic_rate,
            entropy: setup.entropy,
            probing: false,
            recovering: false,
            acked_at: Time::ZERO,
            rotation: 0,
            plane_failovers: 0,
        }
    }

    fn lb(&self) -> PlaneLb {
        self.cfg.plane_lb
    }

    /// Whether `sw_lb`'s equal shares let `plane` send the next packet:
    /// it is not a packet ahead of the plane furthest behind.
    fn has_its_share(&self, dest: &Destination, plane: usize) -> bool {
        let lb = self.lb();
        let usable = self.planes.iter().zip(&dest.planes).filter(|(_, c)| c.usable(lb));
        let behind = usable.map(|(p, _)| p.sent).min().unwrap_or(0);
        self.planes[plane].sent <= behind
    }

    /// A plane is out of use from now on, for every QP to the destination;
    /// this one resends what it has not had acknowledged on the others.
    fn fail_plane(&mut self, plane: usize, out: &mut Vec<Action>) {
        if self.dest.borrow_mut().fail(plane) {
            self.plane_failovers += 1;
        }
        self.catch_up(out);
    }

    /// Acts on what this QP or another to the same destination found since
    /// it last looked: after a plane failure, what was outstanding may be
    /// lost on it and is sent again; after a failure or a return, the
    /// planes it may use changed, and it asks the NIC for its ports again.
    fn catch_up(&mut self, out: &mut Vec<Action>) {
        if self.take_news() {
            out.push(Action::Ready);
        }
    }

    /// Takes in the planes' failures and returns since it last looked,
    /// going back after a failure; whether there were any.
    fn take_news(&mut self) -> bool {
        let (failures, changes) = {
            let d = self.dest.borrow();
            (d.failures, d.changes)
        };
        if changes == self.seen_changes {
            return false;
        }
        if failures != self.seen_failures {
            self.go_back();
        }
        (self.seen_failures, self.seen_changes) = (failures, changes);
        true
    }

    /// Resends everything unacknowledged; the windows start over.
    fn go_back(&mut self) {
        self.sender.go_back();
        self.planes.iter_mut().for_each(|p| p.in_flight = 0);
    }

    /// Sends an RTT probe on every plane whose port is up and that has none
    /// out, in the data class so that it waits behind data as data does. It
    /// carries its send time (in ns, 32 bits, as a probe's timestamp field
    /// would), which the reply echoes.
    fn send_probes(&mut self, now: Time, out: &mut Vec<Action>) {
        let stamp = (now.0 / PS_PER_NS) as u32;
        for (k, plane) in self.dest.borrow_mut().planes.iter_mut().enumerate() {
            if !plane.port_up || plane.probe_sent.is_some() {
                continue;
            }
            plane.probe_sent = Some(now);
            let probe = Control { in_band: true, ack: stamp, ..Control::new(PacketKind::Probe, 0, self.entropy) };
            out.push(Action::Send { end: End::Requester, port: k as u8, control: probe });
        }
    }

    /// Starts probing the planes if it is not running: only while data is
    /// outstanding, as a liveness check need not run on an idle QP. The
    /// first probes leave from the timer, as the port is mid-pull now.
    fn start_probing(&mut self, now: Time, out: &mut Vec<Action>) {
        if self.probing || self.lb() == PlaneLb::SwLb {
            return;
        }
        self.probing = true;
        out.push(Action::Arm { timer: Timer::Probe, at: now });
    }

    /// A probe round, every `probe_interval`, run for the destination by
    /// one of the QPs probing it. A plane's probe is answered once anything
    /// at all (probe reply, ACK, CNP) came back on the plane after it left,
    /// so a plane whose probes wait behind a long queue is slow, not dead;
    /// it times out when nothing did within its timeout, which grows with
    /// each timeout in a row (`failure_backoff`); after `failure_probes` in
    /// a row the plane fails, and from then on it is probed every round, to
    /// be back as soon as one gets through.
    fn on_probe_timer(&mut self, now: Time, out: &mut Vec<Action>) {
        let round = self.dest.borrow_mut().take_round(self.id, now, self.cfg.probe_interval);
        if round {
            let limit = self.cfg.failure_probes;
            for k in 0..self.planes.len() {
                let mut d = self.dest.borrow_mut();
                let plane = &mut d.planes[k];
                let Some(sent) = plane.probe_sent else { continue };
                if !plane.port_up {
                    plane.probe_sent = None;
                    continue;
                }
                if plane.heard >= sent {
                    plane.probe_sent = None;
                    plane.missed = 0;
                    continue;
                }
                let timeout = if plane.failed { self.cfg.probe_interval } else { self.cfg.probe_timeout(plane.missed) };
                if now < sent + timeout {
                    continue;
                }
                plane.probe_sent = None;
                plane.missed += 1;
                if plane.missed >= limit && !plane.failed {
                    drop(d);
                    self.fail_plane(k, out);
                }
            }
        }
        self.catch_up(out);
        // Tail loss: data outstanding, and not one acknowledgement for a
        // whole `loss_timeout`.
        let sent = self.planes.iter().map(|p| p.last_sent).max().unwrap_or(Time::ZERO);
        if self.sender.outstanding() && now >= self.acked_at.max(sent) + self.cfg.loss_timeout {
            self.acked_at = now;
            self.go_back();
            out.push(Action::Ready);
        }
        let any_failed = self.dest.borrow().planes.iter().any(|p| p.failed);
        if !(self.sender.outstanding() || any_failed) || self.sender.failed {
            self.probing = false;
            self.dest.borrow_mut().leave_rounds(self.id);
            return;
        }
        if round {
            self.send_probes(now, out);
        }
        out.push(Action::Arm { timer: Timer::Probe, at: now + self.cfg.probe_interval });
    }

    fn on_probe_reply(&mut self, plane: usize, stamp: u32, now: Time, out: &mut Vec<Action>) {
        {
            let mut d = self.dest.borrow_mut();
            let Some(p) = d.planes.get_mut(plane) else { return };
            p.heard = now;
            p.missed = 0;
            // Its own probe's reply: the probe's age no longer bounds the
            // round trip from below (a reply to an older one says nothing).
            if p.probe_sent.is_some_and(|t| (t.0 / PS_PER_NS) as u32 == stamp) {
                p.probe_sent = None;
            }
            let rtt = Time(u64::from(((now.0 / PS_PER_NS) as u32).wrapping_sub(stamp)) * PS_PER_NS);
            p.cc.on_rtt(rtt);
            if p.port_up {
                d.restore(plane);
            }
            d.global.on_rtt(rtt);
        }
        self.catch_up(out);
    }

    /// `esr`: the next EV of `plane` not avoided now (or the next one, if
    /// all are).
    fn esr_ev(&mut self, plane: usize, now: Time) -> u16 {
        let p = &mut self.planes[plane];
        let n = p.evs.len();
        let pick = (0..n).map(|k| (p.next_ev + k) % n).find(|&i| p.evs[i].1 <= now).unwrap_or(p.next_ev % n);
        p.next_ev = (pick + 1) % n;
        p.evs[pick].0
    }

    /// A CNP for `plane` echoing the EV `ev` of the marked packet.
    fn on_cnp(&mut self, plane: usize, ev: u16, now: Time, out: &mut Vec<Action>) {
        if plane >= self.planes.len() || !self.cfg.cc.enabled {
            return;
        }
        let until = now + self.cfg.esr_avoid;
        if let Some(marked) = self.planes[plane].evs.iter_mut().find(|(e, _)| *e == ev) {
            marked.1 = until;
        }
        let lb = self.lb();
        let mut d = self.dest.borrow_mut();
        d.planes[plane].heard = now;
        let probe_sent = match lb {
            PlaneLb::GlobalCc | PlaneLb::Esr => d.planes.iter().filter_map(|p| p.probe_sent).min(),
            PlaneLb::Plb | PlaneLb::SwLb => d.planes[plane].probe_sent,
        };
        d.cc_of(lb, plane).on_cnp(&self.cfg.cc, now, probe_sent);
        if !self.recovering {
            self.recovering = true;
            out.push(Action::Arm { timer: Timer::Congestion, at: now + self.cfg.cc.increase_interval });
        }
    }

    /// The responder's part: place the packet, acknowledge on its plane,
    /// and turn an ECN mark into a CNP for that plane's context.
    fn on_data(&mut self, port: usize, pkt: &Packet, now: Time, out: &mut Vec<Action>) {
        let trimmed = pkt.has(flag::TRIMMED);
        let reply =
            self.receiver.on_data(pkt.psn, pkt.payload(), pkt.has(flag::LAST), false, trimmed, self.cfg.ack_every);
        out.push(Action::Received { delivered: reply.delivered, discarded: reply.discarded, messages: reply.messages });
        self.watch_gap(now, port as u8, out);
        if let Some((kind, psn)) = reply.reply {
            out.push(Action::Send {
                end: End::Responder,
                port: port as u8,
                control: Control::new(kind, psn, self.entropy),
            });
        }
        if !self.cfg.cc.enabled || !pkt.has(flag::CE) {
            return;
        }
        let mut d = self.dest.borrow_mut();
        let Some(last) = d.cnp_sent.get_mut(port) else { return };
        if last.is_none_or(|t| now - t >= self.cfg.cnp_interval) {
            *last = Some(now);
            // It names the marked packet's EV (`esr` avoids it).
            let cnp = Control { echo: pkt.entropy, ..Control::new(PacketKind::Cnp, 0, self.entropy) };
            out.push(Action::Send { end: End::Responder, port: port as u8, control: cnp });
        }
    }

    /// The responder keeps the age of its oldest gap: a new one starts the
    /// loss timer, one filled stops it. Not under `sw_lb`: there each plane
    /// is a QP of its own, which can resend only on its dead port.
    fn watch_gap(&mut self, now: Time, port: u8, out: &mut Vec<Action>) {
        if self.lb() == PlaneLb::SwLb {
            return;
        }
        let expected = self.receiver.expected();
        match self.gap {
            _ if !self.receiver.has_gap() => self.gap = None,
            Some((since, at, _)) if at == expected => self.gap = Some((since, at, port)),
            _ => {
                self.gap = Some((now, expected, port));
                out.push(Action::Arm { timer: Timer::Reorder, at: now + self.cfg.loss_timeout });
            }
        }
    }

    /// The loss timer: a gap as old as `loss_timeout` is NAKed, and
    /// watched again.
    fn on_loss_timer(&mut self, now: Time, out: &mut Vec<Action>) {
        let Some((since, at, port)) = self.gap else { return };
        if now < since + self.cfg.loss_timeout {
            out.push(Action::Arm { timer: Timer::Reorder, at: since + self.cfg.loss_timeout });
            return;
        }
        self.gap = Some((now, at, port));
        let nak = Control::new(PacketKind::Nak, at, self.entropy);
        out.push(Action::Send { end: End::Responder, port, control: nak });
        out.push(Action::Arm { timer: Timer::Reorder, at: now + self.cfg.loss_timeout });
    }
}

impl Transport for SpxQp {
    fn post(&mut self, bytes: u64, verb: Verb, _now: Time, _out: &mut Vec<Action>) {
        let (first, packets) = self.sender.post(bytes, self.mtu, verb);
        self.receiver.expect(first, packets);
    }

    fn has_data(&self) -> bool {
        self.sender.has_data()
    }

    fn sprays(&self) -> bool {
        true
    }

    fn next_port(&self) -> usize {
        self.rotation
    }

    fn paced_until(&self, port: usize) -> Time {
        self.dest.borrow().paced_until(port)
    }

    fn next_packet(&mut self, port: usize, now: Time, out: &mut Vec<Action>) -> Option<Outgoing> {
        let lb = self.lb();
        let mut d = self.dest.borrow_mut();
        let context = d.planes.get(port)?;
        // (The NIC asks only once `paced_until` has passed.)
        if !context.usable(lb) || context.next_send > now {
            return None;
        }
        if lb == PlaneLb::SwLb && !self.has_its_share(&d, port) {
            return None;
        }
        if self.planes[port].in_flight >= self.window {
            // An acknowledgement on this plane makes the QP ready again.
            return None;
        }
        let data = DataPacket { addressed: true, ..self.sender.next_packet()? };
        let wire = self.framing.wire_of(&data) as u64;
        let plane = &mut self.planes[port];
        plane.last_sent = now;
        plane.in_flight += wire;
        if lb == PlaneLb::SwLb {
            plane.sent += wire;
            // The planes held back for their share may go again, once this
            // packet is on its way (a timer: the port is mid-pull).
            out.push(Action::Arm { timer: Timer::Wake, at: now });
        }
        if self.cfg.cc.enabled {
            match lb {
                PlaneLb::Plb | PlaneLb::SwLb if d.planes[port].cc.rate() < self.line => {
                    d.planes[port].next_send = now + d.planes[port].cc.rate().tx_time(wire);
                }
                PlaneLb::GlobalCc | PlaneLb::Esr if d.global.rate() < self.nic_line => {
                    d.global_next_send = now + d.global.rate().tx_time(wire);
                }
                _ => {}
            }
        }
        drop(d);
        self.rotation = (port + 1) % self.planes.len();
        if self.sender.rto_deadline.is_none() {
            let at = now + self.timeout;
            self.sender.rto_deadline = Some(at);
            self.acked_at = now;
            out.push(Action::Arm { timer: Timer::Retransmit, at });
        }
        self.start_probing(now, out);
        let entropy = if lb == PlaneLb::Esr { self.esr_ev(port, now) } else { self.entropy };
        Some(Outgoing { data, entropy, not_before: now })
    }

    fn on_packet(&mut self, _end: End, port: usize, pkt: &Packet, now: Time, out: &mut Vec<Action>) {
        match pkt.kind {
            PacketKind::Data => self.on_data(port, pkt, now, out),
            PacketKind::Ack | PacketKind::Nak => {
                self.acked_at = now;
                if let Some(context) = self.dest.borrow_mut().planes.get_mut(port) {
                    context.heard = now;
                }
                if let Some(plane) = self.planes.get_mut(port) {
                    if plane.in_flight >= self.window {
                        out.push(Action::Ready);
                    }
                    plane.in_flight = plane.in_flight.saturating_sub(self.acked_per_ack);
                }
                let progressed = if pkt.kind == PacketKind::Nak {
                    self.sender.on_nak(pkt.psn);
                    self.planes.iter_mut().for_each(|p| p.in_flight = 0);
                    out.push(Action::Ready);
                    true
                } else {
                    self.sender.on_ack(pkt.psn)
                };
                if progressed {
                    self.sender.rto_deadline = self.sender.in_flight().then_some(now + self.timeout);
                    if self.sender.all_acknowledged() {
                        // The estimates start over from what is known.
                        self.planes.iter_mut().for_each(|p| p.in_flight = 0);
                    }
                }
                self.catch_up(out);
            }
            PacketKind::Cnp => self.on_cnp(port, pkt.echo, now, out),
            PacketKind::Probe => {
                let echo = Control::new(PacketKind::ProbeReply, 0, self.entropy);
                let reply = Control { in_band: true, ack: pkt.ack, ..echo };
                out.push(Action::Send { end: End::Responder, port: port as u8, control: reply });
            }
            PacketKind::ProbeReply => self.on_probe_reply(port, pkt.ack, now, out),
            // Writes only: no SENDs or READs.
            PacketKind::MapProbe
            | PacketKind::Conweave
            | PacketKind::Send
            | PacketKind::RnrNak
            | PacketKind::ReadRequest
            | PacketKind::ReadResponse => {}
        }
    }

    fn on_timer(&mut self, timer: Timer, now: Time, out: &mut Vec<Action>) {
        match timer {
            Timer::Retransmit => {
                if !self.sender.on_retransmit_timer(now, self.timeout, self.cfg.retry_count, out) {
                    return;
                }
                self.planes.iter_mut().for_each(|p| p.in_flight = 0);
                if self.lb() == PlaneLb::SwLb {
                    // Software learns of a dead plane only now: a plane that
                    // has heard nothing back for a whole timeout, and sent
                    // since it last heard or could not send (its port is
                    // down: its share held the others up), is taken out.
                    let silent_since = Time(now.0.saturating_sub(self.timeout.0));
                    for k in 0..self.planes.len() {
                        let dead = {
                            let c = &self.dest.borrow().planes[k];
                            !c.failed && (self.planes[k].last_sent > c.heard || !c.port_up) && c.heard <= silent_since
                        };
                        if dead {
                            self.fail_plane(k, out);
                        }
                    }
                }
            }
            Timer::Congestion => {
                self.recovering = self.dest.borrow_mut().recover(&self.cfg.cc, self.lb(), now);
                if self.recovering {
                    out.push(Action::Arm { timer, at: now + self.cfg.cc.increase_interval });
                }
            }
            Timer::Probe => self.on_probe_timer(now, out),
            // `sw_lb`: a plane that waited for the others' shares may go.
            Timer::Wake => out.push(Action::Ready),
            Timer::Reorder => self.on_loss_timer(now, out),
        }
    }

    fn on_port_state(&mut self, port: usize, up: bool) {
        let lb = self.lb();
        let mut d = self.dest.borrow_mut();
        let Some(context) = d.planes.get_mut(port) else { return };
        context.port_up = up;
        if up {
            context.missed = 0;
            d.restore(port);
        } else if lb != PlaneLb::SwLb && d.fail(port) {
            // The PLB sees its own port go down and moves at once.
            self.plane_failovers += 1;
        }
        drop(d);
        // Every QP of the NIC is told, and made ready after: each goes back
        // (a failure) and takes its ports again without waiting.
        self.take_news();
    }

    fn message_bytes(&self, psn: u32) -> u64 {
        self.sender.message_bytes(psn)
    }

    fn stats(&self) -> QpStats {
        let (out_of_order, distance) = self.receiver.reordering();
        QpStats {
            retransmitted_packets: self.sender.retransmitted_packets,
            timeouts: self.sender.timeouts,
            failed: self.sender.failed,
            out_of_order_packets: out_of_order,
            max_reorder_distance: distance as u64,
            plane_failovers: self.plane_failovers,
            ..QpStats::default()
        }
    }

    fn ooo_degrees(&self) -> Option<&super::DegreeHistogram> {
        self.receiver.degrees()
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;
    use crate::net::IpVersion;
    use crate::topology::NodeId;

    /// QPs from NIC 0, two planes of 100G each, built as the factory does.
    struct Nic {
        cfg: Arc<SpxConfig>,
        destinations: Destinations,
    }

    impl Nic {
        fn new() -> Nic {
            Nic::with(SpxConfig::default())
        }

        fn with(cfg: SpxConfig) -> Nic {
            Nic { cfg: Arc::new(cfg), destinations: Destinations::default() }
        }

        fn qp(&self, qp: u32, dst: u32) -> SpxQp {
            let setup = QpSetup {
                qp: QpId(qp),
                nics: (NodeId(0), NodeId(dst)),
                seed: 1,
                mtu: 4096,
                framing: Framing { ip: IpVersion::Ipv4, encap: 0 },
                entropy: 0xC000 + qp as u16,
                requester_ports: 2,
                responder_ports: 2,
                line_rate: Rate::from_gbps(100),
                nic_rate: Rate::from_gbps(200),
                paths: None,
                job: false,
            };
            SpxQp::new(self.cfg.clone(), &setup, self.destinations.of(&self.cfg, &setup))
        }
    }

    fn arrive(qp: &mut SpxQp, kind: PacketKind, port: usize, ack: u32, now: Time) -> Vec<Action> {
        let mut pkt = Packet::control(kind, NodeId(1), NodeId(0), 0, 0, 0, 64);
        pkt.ack = ack;
        let mut out = Vec::new();
        qp.on_packet(End::Requester, port, &pkt, now, &mut out);
        out
    }

    /// A probe reply on `port` at `now` that measured `rtt`.
    fn reply(qp: &mut SpxQp, port: usize, rtt: Time, now: Time) {
        let stamp = ((now.0 - rtt.0) / PS_PER_NS) as u32;
        arrive(qp, PacketKind::ProbeReply, port, stamp, now);
    }

    fn probes(out: &[Action]) -> usize {
        out.iter().filter(|a| matches!(a, Action::Send { control, .. } if control.kind == PacketKind::Probe)).count()
    }

    #[test]
    fn qps_to_one_destination_share_each_planes_allowance() {
        let nic = Nic::new();
        let (mut a, mut b, mut elsewhere) = (nic.qp(0, 1), nic.qp(1, 1), nic.qp(2, 2));
        // QP a learns plane 0's base round trip (2us), then 30us of it
        // queueing, and a CNP cuts plane 0's rate to half.
        reply(&mut a, 0, Time::from_us(2), Time::from_us(10));
        reply(&mut a, 0, Time::from_us(30), Time::from_us(50));
        let now = Time::from_us(51);
        arrive(&mut a, PacketKind::Cnp, 0, 0, now);
        let mut out = Vec::new();
        for qp in [&mut b, &mut elsewhere] {
            qp.post(1 << 20, Verb::Write, now, &mut out);
            assert!(qp.next_packet(0, now, &mut out).is_some());
        }
        // QP b's packet is paced by the context a's CNP cut: half of 100G.
        let gap = Time(b.paced_until(0).0.saturating_sub(now.0));
        let half = Rate::from_gbps(50).tx_time(4096 + 100);
        assert!(gap >= Rate::from_gbps(50).tx_time(4096) && gap <= half, "b paced {gap:?} after its packet");
        assert_eq!(a.paced_until(0), b.paced_until(0), "one allowance for the destination");
        assert_eq!(b.paced_until(1), Time::ZERO, "plane 1 is not congested");
        assert_eq!(elsewhere.paced_until(0), Time::ZERO, "another destination's contexts are its own");
    }

    #[test]
    fn an_answered_probe_does_not_count_its_age_as_the_round_trip() {
        let nic = Nic::new();
        let mut qp = nic.qp(0, 1);
        let mut out = Vec::new();
        qp.post(1 << 20, Verb::Write, Time::ZERO, &mut out);
        assert!(qp.next_packet(0, Time::ZERO, &mut out).is_some());
        // A round at 10us sends the probes; plane 0's comes back in 2us.
        let sent = Time::from_us(10);
        qp.on_timer(Timer::Probe, sent, &mut out);
        reply(&mut qp, 0, Time::from_us(2), sent + Time::from_us(2));
        // A CNP 15us after the probe left finds no queueing: the probe was
        // answered, and its age is not a round trip still under way.
        let now = sent + Time::from_us(15);
        arrive(&mut qp, PacketKind::Cnp, 0, 0, now);
        assert!(qp.next_packet(0, now, &mut out).is_some());
        assert_eq!(qp.paced_until(0), Time::ZERO, "the mark cut nothing: the rate is still the line's");
    }

    #[test]
    fn a_destination_is_probed_once_per_round_however_many_qps_go_there() {
        let nic = Nic::new();
        let (mut a, mut b, mut elsewhere) = (nic.qp(0, 1), nic.qp(1, 1), nic.qp(2, 2));
        let now = Time::from_us(1);
        let mut sent = Vec::new();
        for qp in [&mut a, &mut b, &mut elsewhere] {
            let mut out = Vec::new();
            qp.post(1 << 20, Verb::Write, now, &mut out);
            qp.next_packet(0, now, &mut out);
            qp.on_timer(Timer::Probe, now, &mut out);
            sent.push(probes(&out));
        }
        assert_eq!(sent, [2, 0, 2], "a probes both planes of destination 1 for b too");
    }

    #[test]
    fn contexts_are_per_qp_only_when_asked_or_under_software_load_balancing() {
        let shared = |cfg: SpxConfig| {
            let nic = Nic::with(cfg);
            Rc::ptr_eq(&nic.qp(0, 1).dest, &nic.qp(1, 1).dest)
        };
        assert!(shared(SpxConfig::default()));
        assert!(!shared(SpxConfig { plane_contexts: PlaneContexts::Qp, ..SpxConfig::default() }));
        // Above the transport, each QP is an ordinary RoCE QP on one plane.
        assert!(!shared(SpxConfig { plane_lb: PlaneLb::SwLb, ..SpxConfig::default() }));
    }

    #[test]
    fn a_destination_sends_one_cnp_per_interval_for_all_the_qps_of_a_pair() {
        let nic = Nic::new();
        let mut qps = [nic.qp(0, 1), nic.qp(1, 1)];
        let mut cnps = 0;
        for (k, q) in [0, 1, 0].into_iter().enumerate() {
            let mut pkt = Packet::control(PacketKind::Data, NodeId(0), NodeId(1), 0, 0, 0, 4200);
            pkt.flags |= flag::CE;
            let mut out = Vec::new();
            qps[q].on_packet(End::Responder, 0, &pkt, Time::from_us(1 + k as u64), &mut out);
            let cnp = |a: &Action| matches!(a, Action::Send { control, .. } if control.kind == PacketKind::Cnp);
            cnps += out.iter().filter(|a| cnp(a)).count();
        }
        assert_eq!(cnps, 1, "three marked packets within 4us, of two QPs: one CNP");
    }

    #[test]
    fn a_plane_one_qp_finds_dead_is_left_by_every_qp_to_that_destination() {
        let nic = Nic::new();
        let (mut a, mut b) = (nic.qp(0, 1), nic.qp(1, 1));
        let mut out = Vec::new();
        for qp in [&mut a, &mut b] {
            qp.post(1 << 20, Verb::Write, Time::ZERO, &mut out);
            assert!(qp.next_packet(1, Time::ZERO, &mut out).is_some());
        }
        // Only a probes: plane 1 answers nothing, and after
        // `failure_probes` rounds a takes it out.
        let interval = nic.cfg.probe_interval;
        for round in 1..=nic.cfg.failure_probes + 1 {
            let now = interval.times(u64::from(round));
            reply(&mut a, 0, Time::from_us(2), now);
            a.on_timer(Timer::Probe, now, &mut out);
        }
        assert_eq!(a.stats().plane_failovers, 1);
        assert!(b.next_packet(1, Time::from_us(200), &mut out).is_none(), "b sends nothing more on plane 1");
        // b learns of it at its next event, and sends again what it had
        // out on the failed plane.
        let mut told = Vec::new();
        b.on_timer(Timer::Probe, Time::from_us(200), &mut told);
        assert!(told.iter().any(|a| matches!(a, Action::Ready)));
        assert!(b.next_packet(0, Time::from_us(200), &mut out).is_some_and(|o| o.data.psn == 0), "goes back");
        assert_eq!(b.stats().plane_failovers, 0, "one failover, counted once");
    }
}
