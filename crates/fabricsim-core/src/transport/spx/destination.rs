//! What a Spectrum-X NIC keeps per destination NIC (spectrum-x.txt s4.3:
//! for each destination, one independent CC context per plane; s3.2:
//! "per-destination rate control"): each plane's congestion
//! context and rate allowance, its RTT probes and whether it failed. Every
//! QP from this NIC to that one reads and feeds the same contexts, so that
//! several QPs (or connections) to one destination share a plane's
//! allowance rather than each taking all of it.
//!
//! What stays a QP's own: its packets' windows and retransmission, its
//! EVs (`esr`), and everything under `plane_contexts: qp` or `sw_lb`, as
//! software load balancing runs above ordinary RoCE QPs, each with its
//! own congestion control. The destination's side of the pair keeps its
//! CNP pacing here too.

use std::cell::RefCell;
use std::rc::Rc;

use super::{PlaneContexts, PlaneLb, SpxConfig};
use crate::cc::{SpxCc, SpxCcConfig};
use crate::engine::FastMap;
use crate::ids::QpId;
use crate::topology::NodeId;
use crate::transport::QpSetup;
use crate::units::{Rate, Time};

/// One plane, towards one destination.
#[derive(Clone, Debug)]
pub struct PlaneContext {
    pub cc: SpxCc,
    /// The rate allowance lets the next packet go at this time.
    pub next_send: Time,
    /// The NIC's own port is up (as the NIC reported it).
    pub port_up: bool,
    /// Taken out of use: probes went unanswered (or, under `sw_lb`, the
    /// retransmission timer fired while it was silent).
    pub failed: bool,
    /// When the probe still out left, until a round finds it answered or
    /// timed out.
    pub probe_sent: Option<Time>,
    /// Its probes that timed out in a row.
    pub missed: u32,
    /// An ACK, CNP or probe reply last arrived on it.
    pub heard: Time,
}

impl PlaneContext {
    pub fn usable(&self, lb: PlaneLb) -> bool {
        // Software load balancing above the transport does not see the
        // NIC's port state; the NIC simply stops asking a dead port.
        !self.failed && (self.port_up || lb == PlaneLb::SwLb)
    }
}

/// The NIC's state towards one destination NIC.
#[derive(Debug)]
pub struct Destination {
    pub planes: Vec<PlaneContext>,
    /// `global_cc`'s and `esr`'s one context, at the NIC's whole rate, and
    /// the time its allowance lets the next packet go.
    pub global: SpxCc,
    pub global_next_send: Time,
    /// Planes failed so far, and failures and returns: a QP that has seen
    /// fewer catches up (`SpxQp::catch_up`).
    pub failures: u64,
    pub changes: u64,
    /// The QP that runs the probe rounds, and when it last ran one: one
    /// round per `probe_interval` for the destination, however many QPs
    /// go there.
    prober: Option<(QpId, Time)>,
    /// The next recovery step of the contexts is due then.
    next_increase: Time,
    /// The destination's side: the last CNP it sent back per plane, so
    /// that one context hears at most one per `cnp_interval` however many
    /// QPs' packets were marked.
    pub cnp_sent: Vec<Option<Time>>,
}

impl Destination {
    fn new(planes: usize, responder_planes: usize, plane_rate: Rate, nic_rate: Rate) -> Destination {
        let plane = PlaneContext {
            cc: SpxCc::new(plane_rate),
            next_send: Time::ZERO,
            port_up: true,
            failed: false,
            probe_sent: None,
            missed: 0,
            heard: Time::ZERO,
        };
        Destination {
            planes: vec![plane; planes],
            global: SpxCc::new(nic_rate),
            global_next_send: Time::ZERO,
            failures: 0,
            changes: 0,
            prober: None,
            next_increase: Time::ZERO,
            cnp_sent: vec![None; responder_planes],
        }
    }

    /// The context that `plane`'s signals feed.
    pub fn cc_of(&mut self, lb: PlaneLb, plane: usize) -> &mut SpxCc {
        match lb {
            PlaneLb::GlobalCc | PlaneLb::Esr => &mut self.global,
            PlaneLb::Plb | PlaneLb::SwLb => &mut self.planes[plane].cc,
        }
    }

    /// The earliest time the allowances let a packet go on `plane`.
    pub fn paced_until(&self, plane: usize) -> Time {
        self.planes.get(plane).map_or(Time::ZERO, |p| p.next_send).max(self.global_next_send)
    }

    /// Takes `plane` out of use; true if it was in use.
    pub fn fail(&mut self, plane: usize) -> bool {
        let p = &mut self.planes[plane];
        if p.failed {
            return false;
        }
        p.failed = true;
        self.failures += 1;
        self.changes += 1;
        true
    }

    /// Puts `plane` back in use (its port is up, or a probe got through).
    pub fn restore(&mut self, plane: usize) {
        let p = &mut self.planes[plane];
        if p.failed {
            p.failed = false;
            self.changes += 1;
        }
    }

    /// Whether QP `qp` runs this probe round at `now`: none runs them, it
    /// does already, or the one that did has not for two intervals (it has
    /// nothing outstanding, or is gone).
    pub fn take_round(&mut self, qp: QpId, now: Time, interval: Time) -> bool {
        let free = match self.prober {
            None => true,
            Some((owner, last)) => owner == qp || now >= last + interval.times(2),
        };
        if free {
            self.prober = Some((qp, now));
        }
        free
    }

    /// QP `qp` stops probing: another may take the rounds over at once.
    pub fn leave_rounds(&mut self, qp: QpId) {
        if self.prober.is_some_and(|(owner, _)| owner == qp) {
            self.prober = None;
        }
    }

    /// A recovery step of every context, at most one per
    /// `increase_interval` whichever QP's timer asks; whether a context is
    /// still below its line rate (the timer goes on).
    pub fn recover(&mut self, cfg: &SpxCcConfig, lb: PlaneLb, now: Time) -> bool {
        if now >= self.next_increase {
            self.next_increase = now + cfg.increase_interval;
            let oldest_probe = self.planes.iter().filter_map(|p| p.probe_sent).min();
            self.global.on_increase_timer(cfg, now, oldest_probe);
            for plane in &mut self.planes {
                plane.cc.on_increase_timer(cfg, now, plane.probe_sent);
            }
        }
        let global = matches!(lb, PlaneLb::GlobalCc | PlaneLb::Esr) && !self.global.at_line_rate();
        global || self.planes.iter().any(|p| !p.cc.at_line_rate())
    }
}

/// A NIC's state towards one destination, as its QPs there hold it.
pub type Shared = Rc<RefCell<Destination>>;

/// The destinations of every NIC, shared by the QPs the factory builds.
#[derive(Debug, Default)]
pub struct Destinations {
    of_pair: RefCell<FastMap<(NodeId, NodeId), Shared>>,
}

impl Destinations {
    /// The state of a QP's requester NIC towards its responder's, made on
    /// first use; the QP's own where the contexts are per QP.
    pub fn of(&self, cfg: &SpxConfig, setup: &QpSetup) -> Shared {
        let (planes, responder_planes) = (setup.requester_ports.max(1), setup.responder_ports.max(1));
        let make = || {
            let dest = Destination::new(planes, responder_planes, setup.line_rate, setup.nic_rate);
            Rc::new(RefCell::new(dest))
        };
        if cfg.plane_lb == PlaneLb::SwLb || cfg.plane_contexts == PlaneContexts::Qp {
            return make();
        }
        self.of_pair.borrow_mut().entry(setup.nics).or_insert_with(make).clone()
    }
}
