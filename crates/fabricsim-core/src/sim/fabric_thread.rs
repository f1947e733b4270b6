//! The upper side of a run on two threads (`partition`), on a thread of
//! its own, and the windows the edge side leads it through.
//!
//! The upper side is built on its thread from the same scenario, at the
//! same time as the edge side is built on the caller's, and from then on
//! runs one window per order: it takes what crossed to it, runs its events
//! due before the window's end, and answers with what it sent across and
//! when its next event is due. At the end it hands back the state of what
//! it ran, for the report.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use super::partition::{Crossing, PortReading, Side, UpperShare};
use super::{build, Progress, Setup, Simulation};
use crate::error::ScenarioError;
use crate::metrics::StopReason;
use crate::net::PortId;
use crate::scenario::Scenario;
use crate::units::Time;

enum Order {
    /// Take `inbox`, then run the events due before `end`.
    Window { end: Time, inbox: Vec<Crossing> },
    /// Read these ports for a sample.
    Read(Vec<PortId>),
    /// Hand back what it ran.
    Finish,
}

enum Reply {
    Window { outbox: Vec<Crossing>, next: Option<Time>, stop: Option<StopReason>, events: u64 },
    Read(Vec<PortReading>),
    Finished(Box<UpperShare>),
}

/// The edge side's handle on the upper side's thread.
pub(super) struct FabricThread {
    orders: Sender<Order>,
    replies: Receiver<Reply>,
    thread: Option<JoinHandle<()>>,
    /// When the upper side's next event is due, as it last said (before
    /// what crossed to it since).
    next: Option<Time>,
    /// Events it has run.
    events: u64,
}

impl FabricThread {
    /// Starts building the upper side of `scenario` on its own thread.
    fn spawn(scenario: Scenario) -> FabricThread {
        let (orders, their_orders) = channel();
        let (their_replies, replies) = channel();
        let thread = std::thread::Builder::new()
            .name("fabricsim-upper".into())
            .spawn(move || serve(scenario, their_orders, their_replies))
            .expect("a thread for the upper side of the fabric");
        FabricThread { orders, replies, thread: Some(thread), next: Some(Time::ZERO), events: 0 }
    }

    fn reply(&mut self) -> Reply {
        match self.replies.recv() {
            Ok(reply) => reply,
            // Its thread ended without answering: it panicked, and the
            // panic's message is its own.
            Err(_) => match self.thread.take().map(JoinHandle::join) {
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                _ => panic!("the upper side of the fabric stopped answering"),
            },
        }
    }

    pub(super) fn events(&self) -> u64 {
        self.events
    }
}

/// The upper side's thread: builds it, then runs the windows it is ordered.
fn serve(scenario: Scenario, orders: Receiver<Order>, replies: Sender<Reply>) {
    // The edge side checked the scenario and its memory as it was built;
    // the same build here cannot fail otherwise.
    let built = build::build(scenario, None, &mut Setup::default());
    let Ok(Some(mut sim)) = built else { return };
    sim.take_side(Side::Upper);
    let mut countdown = super::HOOK_EVERY;
    while let Ok(order) = orders.recv() {
        let reply = match order {
            Order::Window { end, inbox } => {
                sim.receive(inbox);
                let stop = sim.run_events(end, &mut countdown, &mut |_| true);
                let outbox = std::mem::take(&mut sim.cut.as_mut().expect("a side").outbox);
                Reply::Window { outbox, next: sim.events.peek_time(), stop, events: sim.events.executed() }
            }
            Order::Read(ports) => Reply::Read(sim.read_ports(&ports)),
            Order::Finish => {
                let _ = replies.send(Reply::Finished(Box::new(sim.upper_share())));
                return;
            }
        };
        if replies.send(reply).is_err() {
            return;
        }
    }
}

/// Builds the edge side of `scenario` on this thread while its upper side
/// is built on its own (`Simulation::new_within` for `threads: 2`).
pub(super) fn build_on_two_threads(
    scenario: Scenario,
    setup: &mut Setup<'_>,
) -> Result<Option<Simulation>, ScenarioError> {
    // Started first so that the two builds overlap. If this one fails or
    // is stopped, the other side's thread ends as its orders' channel
    // closes.
    let fabric = FabricThread::spawn(scenario.clone());
    let Some(mut sim) = build::build(scenario, None, setup)? else { return Ok(None) };
    sim.take_side(Side::Edge);
    sim.fabric = Some(fabric);
    Ok(Some(sim))
}

impl Simulation {
    /// `run_until` for the edge side of a run on two threads: windows of
    /// at most the lookahead, from the earliest event either side has.
    pub(super) fn run_windows(&mut self, pause_at: Time, hook: &mut dyn FnMut(Progress) -> bool) -> Option<StopReason> {
        let mut countdown = super::HOOK_EVERY;
        loop {
            let cut = self.cut.as_ref().expect("the edge side of a cut");
            let fabric = self.fabric.as_ref().expect("the upper side's thread");
            let sent_up = cut.outbox.iter().map(|c| c.at).min();
            let upper_next = [fabric.next, sent_up].into_iter().flatten().min();
            let lookahead = cut.lookahead;
            let start = [self.events.peek_time(), upper_next].into_iter().flatten().min();
            if let Some(stop) = self.end_before(start) {
                return Some(stop);
            }
            let start = start.expect("an event left");
            if start > pause_at {
                return None;
            }
            // Exclusive: nothing past the run's end or the pause runs.
            let mut end = (start + lookahead).min(Time(self.limits.end.0.min(pause_at.0).saturating_add(1)));
            // A sample reads the whole fabric as it stands after the events
            // before it: a window ends where one is due, and the next
            // begins by reading the other side's sampled ports.
            match self.samples.next {
                Some(due) if due == start => self.read_upper_ports(),
                Some(due) if due > start => end = end.min(due),
                _ => {}
            }
            let inbox = std::mem::take(&mut self.cut.as_mut().expect("a side").outbox);
            let fabric = self.fabric.as_mut().expect("the upper side's thread");
            if fabric.orders.send(Order::Window { end, inbox }).is_err() {
                fabric.reply();
            }
            let stop = self.run_events(end, &mut countdown, hook);
            let fabric = self.fabric.as_mut().expect("the upper side's thread");
            let Reply::Window { outbox, next, stop: upper_stop, events } = fabric.reply() else {
                unreachable!("a window's reply")
            };
            fabric.next = next;
            fabric.events = events;
            self.receive(outbox);
            if let Some(stop) = stop.or(upper_stop) {
                return Some(self.halt.unwrap_or(stop));
            }
        }
    }

    /// Reads the sampled ports the upper side runs into this side's copies.
    fn read_upper_ports(&mut self) {
        let ports = self.sampled_elsewhere();
        if ports.is_empty() {
            return;
        }
        let fabric = self.fabric.as_mut().expect("the upper side's thread");
        if fabric.orders.send(Order::Read(ports)).is_err() {
            fabric.reply();
        }
        let Reply::Read(readings) = fabric.reply() else { unreachable!("a reading's reply") };
        self.take_readings(readings);
    }

    /// Takes the upper side's state into this one, ending its thread.
    pub(super) fn join_upper(&mut self) {
        let Some(mut fabric) = self.fabric.take() else { return };
        if fabric.orders.send(Order::Finish).is_err() {
            fabric.reply();
        }
        let Reply::Finished(share) = fabric.reply() else { unreachable!("the finishing reply") };
        if let Some(thread) = fabric.thread.take() {
            let _ = thread.join();
        }
        self.absorb(*share);
    }
}
