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
//! time has passed, then over the transport's view. An all-to-all run
//! whole (`exchanges`) learns as its pairs' QPs do, from its first start;
//! a ring or tree run whole uses the transport's view throughout.

use super::paths::SprayCache;
use super::routing::Routing;
use super::{Event, FluidSimulation, Learner, Owner};
use crate::units::Time;

pub(super) struct PathLearning {
    /// Per QP: when it first sent (`Time::MAX`: not yet).
    first_sent: Vec<Time>,
    /// Per all-to-all run whole: when it first started.
    exchange_first: Vec<Time>,
    /// How long a QP sprays into a dead path before it stops.
    detection: Time,
    /// Routes over the control plane's view, for QPs yet to learn what the
    /// transport's view knows: made when first needed, dropped when that
    /// view changes.
    pub(super) unaware: Option<Box<(Routing, SprayCache)>>,
}

impl PathLearning {
    pub(super) fn new(qps: usize, exchanges: usize, detection: Time) -> PathLearning {
        PathLearning {
            first_sent: vec![Time::MAX; qps],
            exchange_first: vec![Time::MAX; exchanges],
            detection,
            unaware: None,
        }
    }

    /// Whether a sender that first sent at `first` has yet to learn, at
    /// `now`, what the transport's view knows.
    fn unaware(&self, first: Time, now: Time) -> bool {
        first != Time::MAX && now < first + self.detection
    }
}

impl FluidSimulation {
    /// QP `qp` starts sending a message: the first time, it begins to
    /// learn, and routes over the transport's view once it has.
    pub(super) fn note_sending(&mut self, qp: u32) {
        if let Some(at) = self.first_sending(|learning| &mut learning.first_sent[qp as usize]) {
            self.events.schedule(at, Event::QpLearned(qp));
        }
    }

    /// All-to-all `x`, run whole, starts: the first time, its pairs begin
    /// to learn.
    pub(super) fn note_exchange_sending(&mut self, x: u32) {
        if let Some(at) = self.first_sending(|learning| &mut learning.exchange_first[x as usize]) {
            self.events.schedule(at, Event::ExchangeLearned(x));
        }
    }

    /// Marks a sender's first send as now, if it is; returns when it will
    /// have learned, where there are faults to learn.
    fn first_sending(&mut self, first: impl FnOnce(&mut PathLearning) -> &mut Time) -> Option<Time> {
        let now = self.now();
        let learning = self.learning.as_mut()?;
        let detection = learning.detection;
        let first = first(learning);
        if *first != Time::MAX {
            return None;
        }
        *first = now;
        (!self.faults.is_empty()).then_some(now + detection)
    }

    /// Whether QP `qp` has yet to learn what the transport's view knows:
    /// it first sent less than its detection time ago, after every fault
    /// that view has taken in.
    pub(super) fn is_unaware(&self, qp: u32) -> bool {
        let Some(learning) = self.learning.as_ref() else { return false };
        self.seen_by[Learner::Transport as usize] > 0 && learning.unaware(learning.first_sent[qp as usize], self.now())
    }

    /// Whether all-to-all `x`'s pairs have yet to learn what the
    /// transport's view knows (`is_unaware`).
    pub(super) fn is_exchange_unaware(&self, x: u32) -> bool {
        let Some(learning) = self.learning.as_ref() else { return false };
        self.seen_by[Learner::Transport as usize] > 0
            && learning.unaware(learning.exchange_first[x as usize], self.now())
    }

    /// All-to-all `x` has sprayed for its detection time: if it is still
    /// running, it routes over the transport's view.
    pub(super) fn on_exchange_learned(&mut self, x: u32) {
        self.exchanges[x as usize].routed = None;
        let running = (0..self.streams.len() as u32).find(|&s| {
            let stream = &self.streams[s as usize];
            stream.owner == Owner::Exchange(x) && stream.started && !stream.done
        });
        if let Some(s) = running {
            self.take_current_route(s);
        }
    }

    /// QP `qp` has sprayed for its detection time: its message in progress
    /// (or waiting for what it lost) now routes over the transport's view.
    pub(super) fn on_qp_learned(&mut self, qp: u32) {
        let Some(&s) = self.qp_queue.get(qp as usize).and_then(|queue| queue.front()) else { return };
        let stream = &self.streams[s as usize];
        if !stream.started || stream.done {
            return;
        }
        self.take_current_route(s);
    }

    /// Makes the routes of QPs yet to learn, if they are not made.
    pub(super) fn make_unaware_routes(&mut self) {
        let routing = &self.routing;
        let learning = self.learning.as_mut().expect("only MRC's QPs learn");
        learning.unaware.get_or_insert_with(|| Box::new((routing.unsearched(), SprayCache::default())));
    }

    /// The control plane's view changed: the unaware routes no longer hold,
    /// and QPs routed over them reroute, even where the transport knew of
    /// the change first and the routes' view stays as it was.
    pub(super) fn control_plane_view_changed(&mut self) {
        if self.learning.as_mut().and_then(|learning| learning.unaware.take()).is_some() {
            self.fabric_changed();
            self.reroute = true;
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
