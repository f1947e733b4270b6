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

mod build;
mod clustermapper;
mod control;
mod fabric;
mod jobs;
mod nic;
mod recorder;
mod report;

use crate::engine::{prefetch, prefetch_lines, EventQueue, Rng};
use crate::error::ScenarioError;
use crate::faults::FaultAction;
use crate::ids::{Arena, ConnectionId, FlowId, JobId, MessageId, PhaseId, QpId, TransferId};
use crate::metrics::RunOutput;
use crate::net::{PacketId, PacketPool, Port, PortId, SharedBuffer, CLASS_DATA, HOT_LINES};
use crate::nic::{PortScheduler, Qp};
use crate::scenario::Scenario;
use crate::switch::{Routes, Srv6};
use crate::topology::{NodeId, Topology};
use crate::transport::{Action, CustomTransport, Framing, Timer};
use crate::units::Time;

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
}

struct SwitchState {
    buffer: SharedBuffer,
    /// Forwards packets.
    up: bool,
    /// Its control plane advertises routes through it.
    advertised: bool,
    ecmp_seed: u64,
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
}

/// One RDMA write, striped over the QPs of its connection.
struct Message {
    owner: Owner,
    parts_left: u32,
    /// Each part is a write with immediate.
    imm: bool,
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
    /// Posted as a write with immediate.
    imm: bool,
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
    port_rng: Vec<Rng>,
    node_ports: Vec<Vec<PortId>>,
    switches: Vec<Option<SwitchState>>,
    sched: Vec<PortScheduler>,
    /// Per NIC, the bitmap of its ports it believes up (MRC's port state
    /// bitmap, which control packets carry).
    nic_ports_up: Vec<u8>,
    nic_rx_payload: Vec<u64>,
    routes: Routes,
    /// Static SRv6 routes, when switches forward by SRv6.
    srv6: Option<Srv6>,
    /// How NICs frame packets (IP version, SRv6 encapsulation).
    framing: Framing,
    qps: Arena<QpId, Qp>,
    connections: Arena<ConnectionId, Connection>,
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
    /// Injected per-EV loss: (NIC port, EV, probability).
    ev_loss: Vec<(PortId, u16, f64)>,
    /// Links (by index) on the MRC denylist; empty when there is none.
    denied_links: Vec<bool>,
    /// Clustermapper agents and their fault map, when the scenario has them.
    mapper: Option<clustermapper::Mapper>,
}

impl Simulation {
    /// Builds a simulation from a validated scenario.
    pub fn new(scenario: Scenario) -> Result<Simulation, ScenarioError> {
        build::build(scenario, None)
    }

    /// Checks a scenario against its topology (every name, size and
    /// placement) without instantiating the simulation: what `new` would
    /// refuse, this refuses.
    pub fn check(scenario: &Scenario) -> Result<(), ScenarioError> {
        build::plan(scenario).map(drop)
    }

    /// Builds a simulation whose QPs run a transport defined outside this
    /// crate, built for each QP by `transport`, instead of the scenario's.
    pub fn with_transport(scenario: Scenario, transport: CustomTransport) -> Result<Simulation, ScenarioError> {
        build::build(scenario, Some(transport))
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    pub fn now(&self) -> Time {
        self.events.now()
    }

    /// Events handled so far.
    pub fn events_executed(&self) -> u64 {
        self.events.executed()
    }

    /// Runs to the end (every flow done, no events left, or the scenario's
    /// duration). `hook` is called every few thousand events with the
    /// progress; returning false stops the run early, marked incomplete.
    pub fn run(&mut self, hook: &mut dyn FnMut(Progress) -> bool) -> RunOutput {
        let complete = self.run_until(Time::MAX, hook);
        hook(self.progress());
        self.report(complete)
    }

    /// Runs until the end or until simulated time would pass `pause_at`,
    /// whichever is first; `run` can continue afterwards. Returns false if
    /// the hook stopped it.
    pub fn run_until(&mut self, pause_at: Time, hook: &mut dyn FnMut(Progress) -> bool) -> bool {
        const HOOK_EVERY: u64 = 1 << 14;
        let limit = self.scenario.duration.unwrap_or(Time::MAX).min(pause_at);
        let mut countdown = HOOK_EVERY;
        while let Some(next) = self.events.peek_time() {
            if next > limit || (self.scenario.duration.is_none() && self.work_left == 0) {
                break;
            }
            let (_, event) = self.events.pop().expect("peeked");
            self.warm_up_next();
            self.handle(event);
            countdown -= 1;
            if countdown == 0 {
                countdown = HOOK_EVERY;
                if !hook(self.progress()) {
                    return false;
                }
            }
        }
        true
    }

    fn progress(&self) -> Progress {
        let fraction = match self.scenario.duration {
            Some(d) => self.now().0 as f64 / d.0 as f64,
            None if self.total_bytes > 0 => self.totals.delivered_payload as f64 / self.total_bytes as f64,
            None => 1.0,
        };
        Progress { now: self.now(), fraction: fraction.min(1.0), events: self.events.executed() }
    }

    /// Starts loading what the following event will touch while this one
    /// is handled: the run is bound by cache misses on ports and packets.
    /// An arrival reads its packet first; a `TxDone` the hot part of its
    /// port and the packet at the head of its queue.
    fn warm_up_next(&mut self) {
        match self.events.peek().copied() {
            Some(Event::Arrive(id)) => prefetch(self.pool.get(id)),
            Some(Event::TxDone(port)) => {
                let at = &self.ports[port.0 as usize];
                prefetch_lines(at, 0..HOT_LINES);
                if let Some(&id) = at.queues[CLASS_DATA].front() {
                    prefetch(self.pool.get(id));
                }
            }
            _ => {}
        }
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
            Event::JobStart(job) => self.on_job_start(job),
            Event::ComputeDone(phase) => self.phase_part_done(phase),
            Event::IntraHostDone(transfer) => self.transfer_done(transfer),
            Event::NicPortState { port, up } => self.on_nic_port_state(port, up),
            Event::Fault(i) => self.on_fault(i),
            Event::Reconverge => self.reconverge(),
            Event::Sample => self.on_sample(),
        }
    }
}
