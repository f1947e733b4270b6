//! The `Simulation`: owns the topology instance (ports, switch buffers,
//! routes), the NICs' QPs and flows, the event queue, and runs the loop.
//!
//! Event handlers live in submodules by concern: `fabric` moves packets
//! through ports and switches (queues, buffer, ECN, PFC, trimming,
//! forwarding), `host` runs the NIC side (QP scheduling and the transport),
//! `jobs` runs phases and collectives, `control` applies faults and
//! reconverges routes, `report` builds the output tables. They share this struct; each handler does one thing and
//! schedules what happens next.

mod build;
mod clustermapper;
mod control;
mod fabric;
mod host;
mod jobs;
mod mrc;
mod report;
mod rocev2;

use crate::cc::Dcqcn;
use crate::engine::{prefetch, prefetch_lines, EventQueue, Rng};
use crate::error::ScenarioError;
use crate::faults::FaultAction;
use crate::metrics::RunOutput;
use crate::net::{PacketId, PacketPool, Port, PortId, SharedBuffer, CLASS_DATA, HOT_LINES};
use crate::nic::PortScheduler;
use crate::scenario::Scenario;
use crate::switch::{Routes, Srv6};
use crate::topology::{NodeId, Topology};
use crate::transport::mrc::{EvChange, MrcConfig, MrcReceiver, MrcSender};
use crate::transport::{RoceConfig, RoceReceiver, RoceSender};
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
    RtoTimer(u32),
    CcTimer(u32),
    /// An MRC QP probes its retired EVs.
    ProbeTimer(u32),
    /// Clustermapper agents send a round of probes.
    MapperRound,
    /// Clustermapper scores the round it sent (by number).
    MapperScore(u32),
    FlowStart(u32),
    JobStart(u32),
    /// A compute phase ends.
    ComputeDone(u32),
    /// An intra-host transfer has arrived.
    IntraHostDone(u32),
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

/// One queue pair: the requester at `src`, the responder at `dst`.
struct Qp {
    src: NodeId,
    dst: NodeId,
    src_port: PortId,
    dst_port: PortId,
    entropy: u16,
    transport: QpTransport,
    /// Earliest time the pacer lets the next data packet go.
    next_send: Time,
    /// Ports of the sending NIC (by index) whose ready list holds this QP.
    in_ready_lists: u32,
    rto_pending: bool,
    cc_timer_at: Option<Time>,
    /// Messages posted on this QP, oldest first; the responder completes
    /// them in order.
    messages: std::collections::VecDeque<u32>,
}

/// A QP's transport state machines, by transport. Both inline, though MRC's
/// is larger: a scenario runs one transport, and the MRC state is read on
/// every packet (boxing it cost 7% of the MRC bench).
#[allow(clippy::large_enum_variant)]
enum QpTransport {
    /// RoCEv2 RC: one path (the QP's port and UDP source port), DCQCN.
    Roce { sender: RoceSender, receiver: RoceReceiver, cc: Dcqcn },
    /// MRC: sprays over EVs on every port (plane) of the NIC.
    Mrc(MrcQp),
}

struct MrcQp {
    sender: MrcSender,
    receiver: MrcReceiver,
    probe_pending: bool,
    /// When the earliest retransmission-timer event still queued fires.
    timer_at: Option<Time>,
}

impl QpTransport {
    fn retransmitted_packets(&self) -> u64 {
        match self {
            QpTransport::Roce { sender, .. } => sender.retransmitted_packets,
            QpTransport::Mrc(m) => m.sender.retransmitted_packets,
        }
    }

    fn timeouts(&self) -> u64 {
        match self {
            QpTransport::Roce { sender, .. } => sender.timeouts,
            QpTransport::Mrc(m) => m.sender.timeouts,
        }
    }

    fn failed(&self) -> bool {
        matches!(self, QpTransport::Roce { sender, .. } if sender.failed)
    }

    fn has_data(&self) -> bool {
        match self {
            QpTransport::Roce { sender, .. } => sender.has_data(),
            QpTransport::Mrc(m) => m.sender.has_data(),
        }
    }

    fn is_mrc(&self) -> bool {
        matches!(self, QpTransport::Mrc(_))
    }
}

/// Per (MRC QP, EV) counts of the current sample interval.
#[derive(Default)]
struct EvActivity {
    sent: std::collections::BTreeMap<(u32, u16), u64>,
    dropped: std::collections::BTreeMap<(u32, u16), u64>,
}

/// The QPs between two NICs that one flow, or one channel of a job's
/// collectives, uses; a message is striped over them.
struct Connection {
    qps: Vec<u32>,
}

/// What a message belongs to.
#[derive(Clone, Copy, Debug)]
enum Owner {
    Flow(u32),
    Transfer(u32),
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
    conn: u32,
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
    roce: RoceConfig,
    mrc: MrcConfig,
    topo: Topology,
    events: EventQueue<Event>,
    pool: PacketPool,
    ports: Vec<Port>,
    port_rng: Vec<Rng>,
    node_ports: Vec<Vec<PortId>>,
    switches: Vec<Option<SwitchState>>,
    sched: Vec<PortScheduler>,
    nic_rx_payload: Vec<u64>,
    routes: Routes,
    /// Static SRv6 routes, when switches forward by SRv6.
    srv6: Option<Srv6>,
    /// Bytes of encapsulation every packet carries (the SRv6 outer header).
    encap: u32,
    qps: Vec<Qp>,
    connections: Vec<Connection>,
    messages: Vec<Message>,
    flows: Vec<Flow>,
    jobs: jobs::Jobs,
    faults: Vec<(Time, FaultAction)>,
    headroom: Vec<u64>,
    /// Flows and jobs not yet finished (or failed).
    work_left: usize,
    total_bytes: u64,
    totals: Totals,
    telemetry_ports: Vec<PortId>,
    /// The pcap being written and, per port, whether it is captured.
    capture: Option<(crate::net::capture::Capture, Vec<bool>)>,
    telemetry_hosts: Vec<NodeId>,
    samples: report::Samples,
    /// Data packets sent and dropped per (MRC QP, EV) since the last
    /// sample, when telemetry asks.
    ev_activity: Option<EvActivity>,
    /// MRC EV state changes (time, QP, change), when telemetry asks.
    ev_log: Option<Vec<(Time, u32, EvChange)>>,
    /// Injected per-EV loss: (NIC port, EV, probability).
    ev_loss: Vec<(u32, u16, f64)>,
    /// Links (by index) on the MRC denylist; empty when there is none.
    denied_links: Vec<bool>,
    /// Clustermapper agents and their fault map, when the scenario has them.
    mapper: Option<clustermapper::Mapper>,
}

impl Simulation {
    /// Builds a simulation from a validated scenario.
    pub fn new(scenario: Scenario) -> Result<Simulation, ScenarioError> {
        build::build(scenario)
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
            Event::RtoTimer(qp) => self.on_rto(qp),
            Event::CcTimer(qp) => self.on_cc_timer(qp),
            Event::ProbeTimer(qp) => self.mrc_probe_timer(qp),
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
