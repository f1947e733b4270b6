//! The `Simulation`: owns the topology instance (ports, switch buffers,
//! routes), the NICs' QPs and flows, the event queue, and runs the loop.
//!
//! Event handlers live in submodules by concern: `build` instantiates a
//! scenario, `fabric` moves packets through ports and switches (queues,
//! buffer, ECN, PFC, trimming, forwarding), `nic` runs the NICs (QP
//! scheduling and the seam to the transports), `jobs` runs phases and
//! collectives, `control` applies faults and reconverges routes,
//! `clustermapper` probes, `recorder` keeps what telemetry asks for,
//! `report` builds the output tables. They share this struct; each handler
//! does one thing and schedules what happens next.

pub(crate) mod build;
mod clustermapper;
mod control;
mod conweave;
mod fabric;
mod fabric_thread;
pub(crate) mod footprint;
pub(crate) mod jobs;
mod nic;
mod partition;
mod recorder;
mod report;
mod shift;
mod warming;

use crate::engine::{EventQueue, Rng};
use crate::error::ScenarioError;
use crate::faults::FaultAction;
use crate::ids::{Arena, ConnectionId, FlowId, JobId, MessageId, PhaseId, QpId, TransferId};
use crate::metrics::{RunOutput, StopReason};
use crate::net::{PacketId, PacketPool, Port, PortId, SharedBuffer};
use crate::nic::{Orchestrator, PortScheduler, Qp};
use crate::scenario::Scenario;
use crate::switch::{Balancer, Routes, Srv6};
use crate::topology::{NodeId, Topology};
use crate::transport::{Action, CustomTransport, Framing, QpFactory, QpSetup, Timer, Verb};
use crate::units::{Rate, Time};

/// Events between two calls of a run's progress hook.
const HOOK_EVERY: u64 = 1 << 14;

#[derive(Clone, Copy, Debug)]
enum Event {
    /// A port finished serializing and has another packet waiting.
    TxDone(PortId),
    /// A packet reaches the far end of the link it was sent on.
    Arrive(PacketId),
    /// A PFC frame reaches the egress `port` it pauses or resumes.
    Pfc {
        port: PortId,
        class: u8,
        pause: bool,
    },
    /// A NIC port's paced QP may send again.
    NicWake(PortId),
    /// A transport's timer (`Timer` by index) is due.
    QpTimer {
        qp: QpId,
        timer: u8,
    },
    /// Clustermapper agents send a round of probes.
    MapperRound,
    /// Clustermapper scores the round it sent (by number).
    MapperScore(u32),
    FlowStart(FlowId),
    JobStart(JobId),
    /// A compute phase ends.
    ComputeDone(PhaseId),
    /// An intra-host transfer has arrived.
    IntraHostDone(TransferId),
    /// A NIC learns that one of its ports went down or came back up.
    NicPortState {
        port: PortId,
        up: bool,
    },
    Fault(u32),
    Reconverge,
    Sample,
    /// Imbalance telemetry compares the groups' queues, or their loads.
    ImbalanceQueues,
    ImbalanceLoads,
    /// A ConWeave VOQ's release is due, unless rescheduled since.
    ConweaveFlush(u32),
    /// A ToR stack re-checks whether its ToRs are in sync.
    StackCheck(u32),
    /// An aborted job starts again from its checkpoint.
    JobRestart(JobId),
    /// SHIFT: a default QP's fallback is done; its path is due a probe.
    ShiftFallback(QpId),
    ShiftProbe(QpId),
}

// The event queue's entries are what its cache footprint is made of: an
// event stays 8 bytes.
const _: () = assert!(std::mem::size_of::<Event>() == 8);

struct SwitchState {
    buffer: SharedBuffer,
    /// Forwards packets.
    up: bool,
    /// Its control plane advertises routes through it.
    advertised: bool,
    ecmp_seed: u64,
}

/// A stacked dual-ToR pair (alibaba-hpn.txt s4.1): its primary and
/// secondary ToR and the link between them.
struct Stack {
    primary: NodeId,
    secondary: NodeId,
    link: PortId,
    /// The secondary has shut itself down over a split.
    suspended: bool,
}

/// The QPs between two NICs that one flow, or one channel of a job's
/// collectives, uses; a message is striped over them.
struct Connection {
    qps: Vec<QpId>,
}

/// What a message belongs to.
#[derive(Clone, Copy, Debug)]
enum Owner {
    Flow(FlowId),
    Transfer(TransferId),
    /// SHIFT's probe of a default QP's path, and its notification before
    /// traffic returns to it.
    ShiftProbe(QpId),
    ShiftNotify(QpId),
    /// SHIFT's notification of the receiver, on the backup QP, before a
    /// fallback reposts default QP's work there.
    ShiftFallbackNotify(QpId),
    /// A message SHIFT reposted that had already arrived, its
    /// acknowledgement lost: arriving again completes nothing.
    ShiftDuplicate,
}

/// One RDMA write or SEND, striped over the QPs of its connection.
struct Message {
    owner: Owner,
    parts_left: u32,
    /// What each part is posted as.
    verb: Verb,
}

struct Flow {
    src: NodeId,
    dst: NodeId,
    bytes: u64,
    start: Time,
    conn: ConnectionId,
    end: Option<Time>,
    ideal: Time,
    failed: bool,
    /// What it posts: a write, with immediate or not, or a SEND.
    verb: Verb,
    /// The NIC's rate limit for the flow, over all its QPs.
    rate_limit: Option<Rate>,
}

#[derive(Default)]
struct Totals {
    packet_hops: u64,
    sent_payload: u64,
    delivered_payload: u64,
    discarded_payload: u64,
    trimmed_received: u64,
    qp_errors: u64,
    imm_completions: u64,
    /// Data packets dropped (`drops` also counts control packets and probes).
    data_drops: u64,
}

impl Totals {
    /// Adds another side's totals (a run on two threads, `partition`).
    fn absorb(&mut self, other: &Totals) {
        self.packet_hops += other.packet_hops;
        self.sent_payload += other.sent_payload;
        self.delivered_payload += other.delivered_payload;
        self.discarded_payload += other.discarded_payload;
        self.trimmed_received += other.trimmed_received;
        self.qp_errors += other.qp_errors;
        self.imm_completions += other.imm_completions;
        self.data_drops += other.data_drops;
    }
}

/// What the upper side of a run on two threads ran, beside the state the
/// edge side took from it (`partition`).
struct Absorbed {
    events: u64,
    in_flight_payload: u64,
    pool_high_water: usize,
}

/// What the caller tells a build beyond the scenario.
#[derive(Default)]
pub struct Setup<'a> {
    /// Bytes of memory the machine has available (`limits.memory`, when
    /// the scenario sets it, replaces this); unset, only that is enforced.
    pub available_memory: Option<u64>,
    /// Asked now and then while building (Ctrl-C); false stops the build.
    pub keep_going: Option<&'a mut dyn FnMut() -> bool>,
}

impl Setup<'_> {
    /// The memory the scenario may take, and what that figure is.
    pub(crate) fn memory_budget(&self, scenario: &Scenario) -> (Option<u64>, &'static str) {
        match scenario.limits.memory {
            Some(limit) => (Some(limit.0), "set by limits.memory"),
            None => (self.available_memory, "this machine has available"),
        }
    }

    /// Whether to go on building.
    pub(crate) fn goes_on(&mut self) -> bool {
        self.keep_going.as_mut().is_none_or(|hook| hook())
    }
}

/// What the caller's progress hook is told.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub now: Time,
    pub fraction: f64,
    pub events: u64,
}

pub struct Simulation {
    scenario: Scenario,
    topo: Topology,
    events: EventQueue<Event>,
    pool: PacketPool,
    ports: Vec<Port>,
    /// Each port's `up`, beside the ports and dense: an arrival asks it of
    /// the port that sent the packet, whose own line would be a miss a
    /// hop. Set with the port's (`set_port_up`).
    port_up: Vec<bool>,
    /// Egress ports worked out ahead for arrivals at hashing switches.
    next_hops: warming::NextHops,
    port_rng: Vec<Rng>,
    node_ports: Vec<Vec<PortId>>,
    switches: Vec<Option<SwitchState>>,
    sched: Vec<PortScheduler>,
    /// Per NIC, the bitmap of its ports it believes up (MRC's port state
    /// bitmap, which control packets carry).
    nic_ports_up: Vec<u8>,
    nic_rx_payload: Vec<u64>,
    routes: Routes,
    /// The fabric as the control plane knows it, which `routes` follow.
    control: control::ControlView,
    /// How switches choose among equal-cost next hops, and its state.
    balancer: Balancer,
    /// PRO's orchestrated round robin, when NICs pick paths by it.
    orchestrator: Option<Orchestrator>,
    /// Stacked dual-ToR pairs.
    stacks: Vec<Stack>,
    /// SHIFT's default QPs and their backups, when NICs run it.
    shift: Option<shift::Shift>,
    /// What HPN's disjoint-path search found, when QPs' paths were picked by it.
    path_search: Option<crate::nic::repac::SearchTally>,
    /// Static SRv6 routes, when switches forward by SRv6.
    srv6: Option<Srv6>,
    /// How NICs frame packets (IP version, SRv6 encapsulation).
    framing: Framing,
    qps: Arena<QpId, Qp>,
    connections: Arena<ConnectionId, Connection>,
    /// Builds the transports of the QPs a restarting job opens again, from
    /// each QP's setup (kept only when a job has a checkpoint).
    qp_factory: QpFactory,
    qp_setups: Arena<QpId, QpSetup>,
    messages: Arena<MessageId, Message>,
    flows: Arena<FlowId, Flow>,
    /// Actions transports asked for and not yet carried out (a stack:
    /// carrying one out can run another transport).
    actions: Vec<Action>,
    jobs: jobs::Jobs,
    faults: Vec<(Time, FaultAction)>,
    headroom: Vec<u64>,
    /// Flows and jobs not yet finished (or failed).
    work_left: usize,
    total_bytes: u64,
    totals: Totals,
    telemetry_ports: Vec<PortId>,
    telemetry_hosts: Vec<NodeId>,
    samples: report::Samples,
    /// What telemetry asked to record as the run goes.
    recorder: recorder::Recorder,
    /// Imbalance telemetry, when asked for.
    imbalance: Option<crate::metrics::Imbalance>,
    /// Injected per-EV loss: (NIC port, EV, probability).
    ev_loss: Vec<(PortId, u16, f64)>,
    /// Links (by index) on the MRC denylist; empty when there is none.
    denied_links: Vec<bool>,
    /// Clustermapper agents and their fault map, when the scenario has them.
    mapper: Option<clustermapper::Mapper>,
    /// When the run gives up.
    limits: RunLimits,
    /// The simulated instant of the last event, and how many events have
    /// run at it (the livelock guard).
    instant: (Time, u64),
    /// Set by a handler that found the run must end (checked with the hook).
    halt: Option<StopReason>,
    /// ConWeave's scratch lists, kept to spare allocations.
    conweave_signals: Vec<crate::switch::conweave::Signal>,
    conweave_released: Vec<PacketId>,
    /// The side of the cut this simulation runs, on two threads.
    cut: Option<partition::Cut>,
    /// On the edge side of two threads, the upper side's thread.
    fabric: Option<fabric_thread::FabricThread>,
    /// On the edge side of two threads, once the run ended: what the upper
    /// side ran.
    absorbed: Option<Absorbed>,
}

/// When a run ends if its work does not: the scenario's `limits`, or their
/// defaults (`build::run_limits`).
struct RunLimits {
    /// The run's end: its `duration`, or else its time limit.
    end: Time,
    events_per_instant: u64,
    /// Time-series rows the memory budget leaves room for.
    sample_rows: u64,
}

impl Simulation {
    /// Builds the packet model of a validated scenario, whatever its
    /// `mode` says (`Model::build` follows it), within its `limits.memory`
    /// if it sets one.
    pub fn new(scenario: Scenario) -> Result<Simulation, ScenarioError> {
        let built = Simulation::new_within(scenario, &mut Setup::default())?;
        Ok(built.expect("a build without a hook is never interrupted"))
    }

    /// Builds a simulation as `setup` says: within the memory the machine
    /// has, asking whether to go on as it goes. `Ok(None)` when the hook
    /// stopped it.
    pub fn new_within(scenario: Scenario, setup: &mut Setup<'_>) -> Result<Option<Simulation>, ScenarioError> {
        if scenario.threads > 1 {
            return fabric_thread::build_on_two_threads(scenario, setup);
        }
        build::build(scenario, None, setup)
    }

    /// Checks a scenario against its topology (every name, size and
    /// placement) and against the memory it would take, without
    /// instantiating the simulation: what `new_within` would refuse before
    /// building, this refuses.
    pub fn check(scenario: &Scenario, available_memory: Option<u64>) -> Result<(), ScenarioError> {
        let mut setup = Setup { available_memory, keep_going: None };
        build::plan(scenario, &mut setup).map(drop)
    }

    /// `check` as `setup` says; `Ok(false)` when its hook stopped it.
    pub fn check_within(scenario: &Scenario, setup: &mut Setup<'_>) -> Result<bool, ScenarioError> {
        build::plan(scenario, setup).map(|plan| plan.is_some())
    }

    /// Builds a simulation whose QPs run a transport defined outside this
    /// crate, built for each QP by `transport`, instead of the scenario's.
    pub fn with_transport(scenario: Scenario, transport: CustomTransport) -> Result<Simulation, ScenarioError> {
        if scenario.threads > 1 {
            return Err(ScenarioError::new(
                "threads",
                format!("{}: a transport defined outside the core runs on one thread", scenario.threads),
            ));
        }
        let built = build::build(scenario, Some(transport), &mut Setup::default())?;
        Ok(built.expect("a build without a hook is never interrupted"))
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    pub fn now(&self) -> Time {
        self.events.now()
    }

    /// Events handled so far.
    pub fn events_executed(&self) -> u64 {
        self.events.executed() + self.fabric.as_ref().map_or(0, |f| f.events())
    }

    /// Runs to the end: every flow and job done, the scenario's duration,
    /// or a limit (`limits`). `hook` is called every few thousand events
    /// with the progress; returning false stops the run early. The output
    /// says why it ended and is whole only when it completed or ran its
    /// duration.
    pub fn run(&mut self, hook: &mut dyn FnMut(Progress) -> bool) -> RunOutput {
        let stop = self.run_until(Time::MAX, hook).expect("a run ends by its time limit");
        hook(self.progress());
        self.join_upper();
        self.report(stop)
    }

    /// Runs until the run ends (returning why) or until simulated time
    /// would pass `pause_at` (returning None; `run` can continue).
    pub fn run_until(&mut self, pause_at: Time, hook: &mut dyn FnMut(Progress) -> bool) -> Option<StopReason> {
        if self.fabric.is_some() {
            return self.run_windows(pause_at, hook);
        }
        let mut countdown = HOOK_EVERY;
        loop {
            let next = self.events.peek_time();
            if let Some(stop) = self.end_before(next) {
                return Some(stop);
            }
            let next = next.expect("an event left");
            if next > pause_at {
                return None;
            }
            let before = Time(self.limits.end.0.min(pause_at.0).saturating_add(1));
            if let Some(stop) = self.run_events(before, &mut countdown, hook) {
                return Some(stop);
            }
        }
    }

    /// Why the run ends before its next event, due at `next` (None: there
    /// is none), if it does: its work done, nothing left to happen, or its
    /// end passed (the clock then moves to the end). A handler's halt
    /// (sampling out of memory) outranks the reason: what it recorded is
    /// cut short.
    fn end_before(&mut self, next: Option<Time>) -> Option<StopReason> {
        let until_duration = self.scenario.duration.is_some();
        let reason = if !until_duration && self.work_left == 0 {
            StopReason::Completed
        } else {
            match next {
                None if self.work_left == 0 => StopReason::Completed,
                None => StopReason::Stalled,
                Some(next) if next > self.limits.end => {
                    self.events.advance_to(self.limits.end);
                    if until_duration {
                        StopReason::Duration
                    } else {
                        StopReason::TimeLimit
                    }
                }
                Some(_) => return None,
            }
        };
        Some(self.halt.unwrap_or(reason))
    }

    /// The event loop: runs the events due before `before`, while work is
    /// left. None when the next event is not (or there is none); why the
    /// run ends otherwise. `countdown`: events left before `hook` is next
    /// asked. The only caller of the queue's `pop` and of the warming, so
    /// that both are inlined here.
    fn run_events(
        &mut self,
        before: Time,
        countdown: &mut u64,
        hook: &mut dyn FnMut(Progress) -> bool,
    ) -> Option<StopReason> {
        let ended = |sim: &Simulation, reason: StopReason| Some(sim.halt.unwrap_or(reason));
        loop {
            if self.scenario.duration.is_none() && self.work_left == 0 {
                return ended(self, StopReason::Completed);
            }
            let next = self.events.peek_time().filter(|&next| next < before)?;
            if next == self.instant.0 {
                self.instant.1 += 1;
                if self.instant.1 > self.limits.events_per_instant {
                    return ended(self, StopReason::Livelock);
                }
            } else {
                self.instant = (next, 1);
            }
            let (_, event) = self.events.pop().expect("peeked");
            self.warm_up_next();
            self.handle(event);
            *countdown -= 1;
            if *countdown == 0 {
                *countdown = HOOK_EVERY;
                if let Some(reason) = self.halt {
                    return Some(reason);
                }
                if !hook(self.progress()) {
                    return Some(StopReason::Interrupted);
                }
            }
        }
    }

    fn progress(&self) -> Progress {
        let fraction = match self.scenario.duration {
            Some(d) => self.now().0 as f64 / d.0 as f64,
            None if self.total_bytes > 0 => self.totals.delivered_payload as f64 / self.total_bytes as f64,
            None => 1.0,
        };
        Progress { now: self.now(), fraction: fraction.min(1.0), events: self.events_executed() }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::TxDone(port) => self.on_tx_done(port),
            Event::Arrive(id) => self.on_arrive(id),
            Event::Pfc { port, class, pause } => self.on_pfc(port, class as usize, pause),
            Event::NicWake(port) => {
                self.sched[port.0 as usize].wake_at = None;
                self.try_transmit(port);
            }
            Event::QpTimer { qp, timer } => self.on_qp_timer(qp, Timer::from_index(timer)),
            Event::MapperRound => self.mapper_round(),
            Event::MapperScore(round) => self.mapper_score(round),
            Event::FlowStart(flow) => self.on_flow_start(flow),
            Event::JobStart(job) => jobs::start_job(self, job),
            Event::ComputeDone(phase) => jobs::compute_done(self, phase),
            Event::IntraHostDone(transfer) => jobs::intra_host_done(self, transfer),
            Event::NicPortState { port, up } => self.on_nic_port_state(port, up),
            Event::Fault(i) => self.on_fault(i),
            Event::Reconverge => self.reconverge(),
            Event::Sample => self.on_sample(),
            Event::ImbalanceQueues => self.on_imbalance(false),
            Event::ImbalanceLoads => self.on_imbalance(true),
            Event::ConweaveFlush(voq) => self.on_conweave_flush(voq),
            Event::StackCheck(stack) => self.on_stack_check(stack),
            Event::JobRestart(job) => self.on_job_restart(job),
            Event::ShiftFallback(qp) => self.on_shift_fallback(qp),
            Event::ShiftProbe(qp) => self.on_shift_probe(qp),
        }
    }
}
