//! MRC's QPs each learn the dead paths for themselves.
//!
//! MRC's sender retires an EV once its own packets on it are found lost (a
//! SACK of a packet sent a reordering window later, or RACK's timer): a
//! QP knows nothing of a path that died before it first sent until it has
//! sprayed into it for its detection time. The flow model's transport view
//! (`Learner::Transport`) is what every QP that was sending when a fault
//! happened has found by now; a QP that first sends after the transport
//! found a fault routes over the control plane's view alone (`unaware`:
//! every SRv6 path, the dead ones' share lost) until its own detection
//! time has passed, then over the transport's view. Whole collectives'
//! streams (`pipelines`, `exchanges`) use the transport's view throughout.

use super::paths::SprayCache;
use super::routing::Routing;
use super::{Event, FluidSimulation, Learner};
use crate::units::Time;

pub(super) struct PathLearning {
    /// Per QP: when it first sent (`Time::MAX`: not yet).
    first_sent: Vec<Time>,
    /// How long a QP sprays into a dead path before it stops.
    detection: Time,
    /// Routes over the control plane's view, for QPs yet to learn what the
    /// transport's view knows: made when first needed, dropped when that
    /// view changes.
    pub(super) unaware: Option<Box<(Routing, SprayCache)>>,
}

impl PathLearning {
    pub(super) fn new(qps: usize, detection: Time) -> PathLearning {
        PathLearning { first_sent: vec![Time::MAX; qps], detection, unaware: None }
    }
}

impl FluidSimulation {
    /// QP `qp` starts sending a message: the first time, it begins to
    /// learn, and routes over the transport's view once it has.
    pub(super) fn note_sending(&mut self, qp: u32) {
        let now = self.now();
        let Some(learning) = self.learning.as_mut() else { return };
        let first = &mut learning.first_sent[qp as usize];
        if *first != Time::MAX {
            return;
        }
        *first = now;
        if !self.faults.is_empty() {
            let at = now + learning.detection;
            self.events.schedule(at, Event::QpLearned(qp));
        }
    }

    /// Whether QP `qp` has yet to learn what the transport's view knows:
    /// it first sent less than its detection time ago, after every fault
    /// that view has taken in.
    pub(super) fn is_unaware(&self, qp: u32) -> bool {
        let Some(learning) = self.learning.as_ref() else { return false };
        let first = learning.first_sent[qp as usize];
        self.seen_by[Learner::Transport as usize] > 0 && first != Time::MAX && self.now() < first + learning.detection
    }

    /// QP `qp` has sprayed for its detection time: its message in progress
    /// (or waiting for what it lost) now routes over the transport's view.
    pub(super) fn on_qp_learned(&mut self, qp: u32) {
        let Some(&s) = self.qp_queue.get(qp as usize).and_then(|queue| queue.front()) else { return };
        let stream = &self.streams[s as usize];
        if !stream.started || stream.done {
            return;
        }
        let route = self.route_of(s);
        if route != self.streams[s as usize].route {
            self.set_route(s, route);
        }
    }

    /// Makes the routes of QPs yet to learn, if they are not made.
    pub(super) fn make_unaware_routes(&mut self) {
        let routing = &self.routing;
        let learning = self.learning.as_mut().expect("only MRC's QPs learn");
        learning.unaware.get_or_insert_with(|| Box::new((routing.unsearched(), SprayCache::default())));
    }

    /// The control plane's view changed: the unaware routes no longer hold.
    pub(super) fn control_plane_view_changed(&mut self) {
        if let Some(learning) = self.learning.as_mut() {
            learning.unaware = None;
        }
    }

    /// The fabric carrying traffic changed: spreads over the unaware routes
    /// no longer hold (their searches, over a view, do).
    pub(super) fn unaware_spreads_changed(&mut self) {
        if let Some(unaware) = self.learning.as_mut().and_then(|l| l.unaware.as_mut()) {
            unaware.1.clear();
        }
    }
}
