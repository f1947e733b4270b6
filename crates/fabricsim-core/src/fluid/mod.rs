//! The flow-level (fluid) model: the same scenario as the packet model, at
//! the scale of whole clusters.
//!
//! Every QP's share of a message is a stream, a fluid flow with a rate.
//! Rates are max-min fair over the fabric's links (`maxmin`), recomputed
//! when a stream starts or ends and when a link fails, comes back or the
//! fabric's view of it changes, and only for the streams a change can reach
//! (the connected component of streams and links around it). A stream
//! sends its bytes at its rate and its last byte arrives one path latency
//! later: propagation and forwarding at every hop, and one packet's
//! serialization at every hop after the first, so a small message is
//! latency-bound as in the packet model.
//!
//! Each design places traffic as it does in the packet model (`paths`):
//! ECMP hashes each QP to one path with the same hash, seeds and UDP source
//! ports, so that the same QPs collide; designs that spray split a stream
//! over every shortest path. A failed link carries nothing; traffic still
//! sent into it is lost until the design reacts (`Reactions`): the control
//! plane's reconvergence for routes, MRC's loss detection, Spectrum-X's
//! probes, a switch's own link state for adaptive routing. A QP whose every
//! path is dead stalls; RoCE then resumes only at its next retransmission
//! timeout, and gives up as its retry count says.
//!
//! What it does not model (queues, PFC, ECN and congestion control, incast
//! loss, packet-level reordering) is listed in docs/ARCHITECTURE.md; a
//! scenario that sets what only the packet model reads is told so in the
//! summary's `flow_mode_ignores`, and one that needs it is refused.

mod exchange;
mod fairness;
mod learning;
mod maxmin;
mod paths;
mod probes;
mod reads;
mod recovery;
mod report;
mod routing;
mod software_lb;
mod work;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use fairness::FairRates;
pub use maxmin::{Demand, Filling};
pub use paths::Placement;
use paths::{Bundles, Fabric, Route, SprayCache};
use probes::Plane;
use routing::{Routing, View};

use crate::engine::{EventQueue, FastMap};
use crate::error::{invalid, ScenarioError};
use crate::faults::FaultAction;
use crate::ids::{CollectiveId, Id, JobId, PhaseId, QpId, TransferId};
use crate::metrics::{RunOutput, StopReason};
use crate::net::{headers, Forwarding, PortId};
use crate::scenario::Scenario;
use crate::sim::jobs::Jobs;
use crate::sim::{Progress, Setup};
use crate::topology::{NodeId, Topology};
use crate::transport::{DataHeaders, QpSetup, TransportSpec, Verb};
use crate::units::Time;
use crate::workload::{self, FlowSpec};

/// The fabric as the route computation sees it now (a macro: it borrows
/// fields of the simulation, not all of it).
macro_rules! fabric {
    ($sim:expr) => {
        Fabric {
            routing: &mut $sim.routing,
            view: &$sim.view,
            alive: &$sim.alive,
            nic_sees: &$sim.nic_sees,
            bundles: &$sim.bundles,
            seeds: &$sim.seeds,
            rate: &$sim.rate,
        }
    };
}

/// Which model runs a scenario.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every packet through every queue.
    #[default]
    Packet,
    /// Max-min fair rates over links, for whole clusters.
    Flow,
}

/// Parameters only the flow model reads.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowModeConfig {
    /// How long a transport that finds failures end to end takes to stop
    /// sending into one. Unset, the packet model's: MRC retires an EV once
    /// a later SACK shows its packet lost (`transport.reorder_window`);
    /// Spectrum-X's NIC drops a plane after `transport.failure_probes`
    /// probes time out in a row (100us with the defaults; longer if their
    /// timeouts back off, `transport.failure_backoff`), counted for each QP from when it
    /// starts sending to that destination (a collective that starts beside
    /// a long-dead plane pays it in full), and takes it back a probe
    /// interval after its link is up (with this set, the interval of the
    /// probing that would take this long).
    /// RoCE has none: it waits for the control plane
    /// (`switch.reconvergence_delay`).
    #[serde(default)]
    pub detection: Option<Time>,
    /// How a collective of pipelines or an all-to-all runs: `transfers`,
    /// cut into its slices with their dependencies as the packet model
    /// runs it (the default), or `pipelined`, whole: each channel's ring,
    /// tree (a tree all-reduce) or chain (a broadcast or reduce) as one
    /// stream whose every hop sends at the rate of the slowest, paying
    /// each ring step's latency where the step's slices cannot hide it (a
    /// hierarchical or NVLS all-reduce: its stages inside the hosts, then
    /// per rail, then inside the hosts, one after the other) and a tree's
    /// or chain's fill (a slice's way through its longest chain of hops); an
    /// all-to-all of equal messages to every peer at once, where the
    /// design sprays, as one stream at one pair's rate loading each link
    /// with every pair's share (it ends when its most loaded link has
    /// carried its bytes, as max-min fair pairs do). Whole collectives are
    /// what makes 100,000 ranks tractable; on 16 and 32 ranks they agree
    /// with `transfers` within 3.5% (rings), 4.2% (hierarchical rings), 2%
    /// (NVLS), 5% (trees and chains) and 1e-6 (all-to-alls; 1-1.5% beside
    /// a NIC's dead plane Spectrum-X or MRC senders have yet to find, under
    /// `partial_loss: deliver`) (tests/fluid.rs); a 16 MB tree of 128 ranks, mostly its fill, takes
    /// 11-21% longer whole, and under ECMP a 16 MB ring of 1,024 ranks on
    /// three tiers 12% longer: latency-bound, the transfers of hops that
    /// share a link drift apart, where whole they all send at once
    /// (docs/EXPERIMENTS.md).
    #[serde(default)]
    pub collectives: CollectiveModel,
    /// What a stream does while part of what it sends is lost (sprayed into
    /// a dead link its design has not stopped using): `deliver`, move at
    /// the share that arrives (the default; under Spectrum-X, and RoCE
    /// with direct placement, a message then ends only once its sender
    /// has gone back for what it lost, at a plane drop, a timer or when
    /// its routes lose nothing: `fluid/recovery.rs`), or `stall`, make no progress
    /// until it loses nothing, as a transport whose lost packets hold its
    /// messages up does. A stream that still delivers part is not given
    /// up on.
    #[serde(default)]
    pub partial_loss: PartialLoss,
    /// How a whole ring's channels sending from the same NICs fall in time
    /// (with `collectives: pipelined`): `lockstep`, every channel's step at
    /// once, sharing the NIC evenly and then all waiting out the step's
    /// latency together, as the flow model's symmetry makes them (the
    /// default); or `independent`, each channel's phase independent of the
    /// others', so that a channel's slice goes out alone, or beside
    /// another's, as often as the others happen to be sending
    /// (`PipelineRun::ring_tail`). The packet model's channels drift apart:
    /// at 128 NICs a whole ring in lockstep takes 1.10 (MRC) and 1.17
    /// (Spectrum-X) of the packet model's time, with independent phases
    /// 0.97-1.00 (seeds 1-3; docs/EXPERIMENTS.md). Only rings run whole
    /// model it: a ring of transfers starts its channels together.
    #[serde(default)]
    pub channel_phases: ChannelPhases,
}

/// How a whole ring's channels fall in time (`flow_mode.channel_phases`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChannelPhases {
    #[default]
    Lockstep,
    Independent,
}

/// What the flow model does with a stream that loses part of its traffic
/// (`flow_mode.partial_loss`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PartialLoss {
    #[default]
    Deliver,
    Stall,
}

/// How the flow model runs a ring collective (`flow_mode.collectives`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveModel {
    #[default]
    Transfers,
    Pipelined,
}

/// When each design stops using a failed link (and uses it again).
#[derive(Clone, Copy, Debug)]
struct Reactions {
    /// The control plane's routes catch up with the fabric this long after
    /// a change it sees; none when the design's paths do not follow routes
    /// (MRC's static SRv6 paths).
    control_plane: Option<Time>,
    /// The transport's own detection, and whether it sees every link
    /// (MRC's EVs name whole paths) or only the NIC links of a plane
    /// (Spectrum-X's probes drop a plane toward a destination).
    transport: Option<(Time, Scope)>,
    /// A NIC notices its own port going down after this.
    nic_notice: Time,
}

/// Who learns of faults, each after its own reaction time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Learner {
    ControlPlane = 0,
    Transport = 1,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    AllLinks,
    /// Spectrum-X's probes, per plane toward a destination, each sender's
    /// own (`probes`): a plane is back once its link has been up for
    /// `recovery` (a probe got through).
    NicLinks {
        recovery: Time,
    },
}

/// What a stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Flow(u32),
    Transfer(TransferId),
    /// A whole ring, chain or tree (`pipelines`): every hop of it at once.
    Pipeline(u32),
    /// A whole all-to-all (`exchanges`): every pair of it at once.
    Exchange(u32),
}

/// One channel's ring, chain or tree of a collective run whole
/// (`flow_mode.collectives: pipelined`, `PipelinePlan`): a stream whose
/// rate is every hop's, and whose bytes are one hop's (`steps` segments).
#[derive(Clone, Debug)]
struct PipelineRun {
    collective: CollectiveId,
    /// The collective's step its first step is: it starts when every
    /// pipeline of the collective that starts earlier has arrived.
    first_step: u32,
    /// Each hop's connection; none between GPUs of one host.
    hops: Vec<Option<u32>>,
    steps: u32,
    segment: u64,
    slice: u64,
    /// Per hop, the hops whose slices it forwards (`PipelinePlan::waits`);
    /// empty for a ring.
    waits: Vec<Vec<u32>>,
    /// Payload bytes per second its intra-host hops allow (a GPU's link,
    /// shared by its collective's channels and by its own hops from one
    /// GPU); infinite when it has none.
    intra_cap: f64,
    /// A ring's step latency (`chain_step_latency`), as routed now.
    step_latency: Time,
    /// A ring's channels that send from its busiest NIC, itself included,
    /// each in its own phase (`flow_mode.channel_phases: independent`); 1
    /// in lockstep.
    independent_channels: u32,
    /// Per hop of a chain or tree, how many hops it waits behind: hops as
    /// deep into the fill send at about the same time.
    depth: Vec<u32>,
    /// The one-packet latency of each hop, as routed now.
    hop_latency: Vec<Time>,
    /// Each hop's goodput while it sends (`FluidSimulation::fill_rates`),
    /// and the fabric version it is of.
    hop_fill_rate: Vec<f64>,
    filled_at: Option<u64>,
    /// Its route and the fabric version it was computed at (a ring's
    /// route crosses every hop's paths: worth keeping).
    routed: Option<(u64, Route)>,
    /// The NICs its hops join, sorted.
    nics: Vec<NodeId>,
    /// When it started sending.
    started: Time,
}

impl PipelineRun {
    /// What one hop sends.
    fn bytes(&self) -> u64 {
        u64::from(self.steps).saturating_mul(self.segment)
    }

    /// Hops over the network (not between GPUs of one host).
    fn network_hops(&self) -> u64 {
        self.hops.iter().flatten().count() as u64
    }

    /// What the pipeline takes beyond its bytes at `average` (over its
    /// run, stalls included), having moved at `while_moving` when it moved.
    fn tail(&self, average: f64, while_moving: f64) -> Time {
        if self.waits.is_empty() {
            self.ring_tail(while_moving)
        } else {
            self.fill(average)
        }
    }

    /// A ring's: a step cannot start before its first slice arrived from
    /// the hop before, so a step whose segment takes less time to send
    /// than one slice's way around (`step_latency` after its
    /// serialization) leaves the hop idle for the difference, and the last
    /// step's data still has to arrive.
    ///
    /// `rate` is the ring's share beside its `independent_channels` - 1
    /// companions on their NIC: alone there it would go that many times
    /// faster. In lockstep (one channel counted) a step is the longer of
    /// its segment at `rate` and its latency plus a slice at `rate`. With
    /// independent phases a channel shares the NIC, while it sends, with
    /// as many companions as are sending at a random instant
    /// (`sharing_while_sending`), so its slice goes out faster and the
    /// step shrinks, to no less than all the channels' segments back to
    /// back.
    fn ring_tail(&self, rate: f64) -> Time {
        if rate <= 0.0 || self.steps == 0 {
            return self.step_latency;
        }
        let latency = self.step_latency.as_secs_f64();
        let channels = f64::from(self.independent_channels);
        let alone = channels * rate;
        let (segment, slice) = (self.segment as f64 / alone, self.slice.min(self.segment) as f64 / alone);
        let sharing = sharing_while_sending(latency, segment, slice, channels);
        let step = (segment * sharing).max(self.slice_around(rate, sharing / channels));
        let idle = step - self.segment as f64 / rate;
        Time::from_secs_f64(idle.max(0.0) * f64::from(self.steps - 1)) + self.step_latency
    }

    /// How long a slice takes to come around the ring, per step: each hop
    /// passes it on after its latency and the slice's time at its own rate
    /// (`hop_fill_rate`, no less than the ring's `rate`), times `sharing`
    /// (how many of the ring's `rate`s it shares while sending, over the
    /// channels); averaged as the step's latency is (`chain_step_latency`).
    /// A hop slowed by a shared link thus sends its segments back to back
    /// while the ring's others wait for it, rather than waiting out every
    /// step's latency on top, as it does when the ring is cut into
    /// transfers.
    fn slice_around(&self, rate: f64, sharing: f64) -> f64 {
        let slice = self.slice.min(self.segment) as f64 * sharing;
        let hop_time: Vec<Time> = (self.hop_latency.iter().enumerate())
            .map(|(h, &latency)| {
                let moving = self.hop_fill_rate.get(h).copied().unwrap_or(rate).max(rate);
                latency + Time::from_secs_f64(slice / moving)
            })
            .collect();
        chain_step_latency(&hop_time, self.steps).as_secs_f64()
    }

    /// A chain's or tree's: a hop forwards a slice once it arrived whole
    /// from every hop it waits for, so a slice crosses the longest chain of
    /// hops, each taking its latency and the slice's time at its rate
    /// while the pipelines fill (no less than `rate`); the bytes at `rate`
    /// hold one slice's time of it. Never less than the chain's latencies
    /// (when `rate` is an average over a stall, its slice's time is long).
    fn fill(&self, rate: f64) -> Time {
        let slice = self.slice.min(self.segment) as f64;
        let (mut done, mut waited) = (vec![0.0f64; self.hops.len()], vec![0.0f64; self.hops.len()]);
        for h in 0..self.hops.len() {
            let ready = self.waits[h].iter().map(|&w| done[w as usize]).fold(0.0, f64::max);
            let latency = self.hop_latency.get(h).map_or(0.0, |t| t.as_secs_f64());
            let moving = self.hop_fill_rate.get(h).copied().unwrap_or(rate).max(rate);
            done[h] = ready + latency + if moving > 0.0 { slice / moving } else { 0.0 };
            waited[h] = self.waits[h].iter().map(|&w| waited[w as usize]).fold(0.0, f64::max) + latency;
        }
        let longest = done.iter().copied().fold(0.0, f64::max);
        let latencies = waited.iter().copied().fold(0.0, f64::max);
        let in_bytes = if rate > 0.0 { slice / rate } else { 0.0 };
        Time::from_secs_f64((longest - in_bytes).max(latencies))
    }
}

/// One QP of the fluid model: the ends and the entropy of the packet
/// model's QP with the same id.
#[derive(Clone, Copy, Debug)]
struct Qp {
    src: NodeId,
    dst: NodeId,
    port_index: u32,
    entropy: u16,
}

/// The largest packet of a message: its first, of the MTU or the whole of
/// a smaller message, with the headers its operation gives it.
#[derive(Clone, Copy, Debug)]
struct LargestPacket {
    payload: u32,
    wire: u32,
}

/// One QP's share of one message, flowing.
#[derive(Clone, Debug)]
struct Stream {
    owner: Owner,
    /// Its QP; a ring's first network QP (its line rate is the ring's),
    /// the ring being on no QP's queue.
    qp: u32,
    /// Payload bytes not yet sent.
    left: f64,
    /// Its message's largest packet: what each hop serializes before
    /// passing its last data on.
    packet: LargestPacket,
    /// Payload bytes per second sent, of which `route.delivered` arrives.
    rate: f64,
    cap: f64,
    route: Route,
    /// While flowing, where each of its route's uses has it in that
    /// bundle's users: leaving is then a swap per bundle, not a search of
    /// lists thousands long (a spine's under a large collective).
    places: Vec<u32>,
    /// When `left` was last brought up to date.
    updated: Time,
    /// Seconds it moved (flowing, delivering something): a pipeline's
    /// rate while moving, for its tail, leaves its stalls out.
    moving: f64,
    /// Bumped whenever its rate changes: older finish events are stale.
    epoch: u32,
    /// When its first byte may leave: when posted, or a READ's once the
    /// reader's request has reached the sender (`read_request_trip`);
    /// never while the READ waits to be asked for (`reads`).
    data_from: Time,
    /// Its QP has sent every message posted before it (since `began`).
    started: bool,
    began: Time,
    /// In the rate computation (not stalled, not waiting, not done).
    flowing: bool,
    done: bool,
    /// Since when nothing it sends arrives.
    stalled_since: Option<Time>,
    /// A stall ended: it sends again only from here (RoCE's next timeout).
    resume_at: Time,
    /// Its message's payload bytes.
    bytes: f64,
    /// Payload bytes it sent into dead links its design had not stopped
    /// using, since its route last delivered everything: sent again only
    /// when its sender goes back for them (`recovery.rs`).
    lost: f64,
    /// Payload bytes it sent while losing them: the stretch of its message
    /// its losses are spread over, which a sender with cumulative ACKs
    /// sends again.
    lost_over: f64,
    /// Payload bytes it sent after its first loss into routes that lost
    /// nothing: with `lost_over`, the most its sender can send again when
    /// it goes back.
    after_loss: f64,
    /// When it began to lose what `lost` counts, and when it last lost.
    lost_since: Time,
    lost_until: Time,
    /// Its message does not end before this: when its sender went back for
    /// what it lost.
    recover_at: Time,
    /// Payload bytes of `left` its receiver already has, sent again after
    /// a drop: carried, not delivered twice.
    resent: f64,
    /// Payload bytes of `left` its receiver's telemetry already counted
    /// as they were sent, lost on a link as it failed (`lose_what_is_on`):
    /// not counted again when they arrive, so that a host's series never
    /// falls and sums to what it received.
    rx_counted: f64,
    /// It has sent its last byte while still losing: its message waits,
    /// first on its QP, for its sender to go back for what it lost.
    held: bool,
    /// Timeouts in a row its RoCE requester went back at into routes
    /// that still lose (`recovery.rs`).
    timeouts: u32,
}

#[derive(Clone, Copy, Debug)]
enum Event {
    FlowStart(u32),
    JobStart(JobId),
    ComputeDone(PhaseId),
    IntraHostDone(TransferId),
    Fault(u32),
    /// The control plane (or a transport, `true`: NIC links only when the
    /// scope says so) catches up with the fabric.
    Reconverge {
        transport: bool,
    },
    NicNotice {
        port: PortId,
        up: bool,
    },
    Finish {
        stream: u32,
        epoch: u32,
    },
    Arrived(u32),
    Resume(u32),
    /// An MRC QP, or an all-to-all run whole, has sprayed for its
    /// detection time (`learning`).
    QpLearned(u32),
    ExchangeLearned(u32),
    GiveUp {
        stream: u32,
        since: Time,
    },
    /// A QP balanced in software (`sw_lb`) has stalled for its
    /// retransmission timeout (`software_lb`).
    SoftwareTimeout(u32),
    Sample,
}

struct FlowRun {
    spec: FlowSpec,
    conn: u32,
    parts_left: u32,
    end: Option<Time>,
    failed: bool,
    ideal: Time,
}

pub struct FluidSimulation {
    scenario: Scenario,
    topo: Topology,
    routing: Routing,
    placement: Placement,
    bundles: Bundles,
    reactions: Reactions,
    /// Per port: its link end is up (faults), and its node is too.
    port_up: Vec<bool>,
    /// Spectrum-X's probes: what each sender has found of NIC links.
    probes: Option<probes::Probes>,
    /// Spectrum-X's `sw_lb`: the planes each QP has taken out.
    software_lb: software_lb::SoftwareLb,
    node_up: Vec<bool>,
    /// Per node: a switch its control plane advertises (a gray one still).
    advertised: Vec<bool>,
    /// Per port: carrying traffic now.
    alive: Vec<bool>,
    view: View,
    nic_sees: Vec<bool>,
    seeds: Vec<u64>,
    rate: Vec<u64>,
    delay: Vec<Time>,
    /// Payload per wire byte of a full packet.
    efficiency: f64,
    /// Payload bytes per second each bundle carries at most, and has carried.
    capacity: Vec<f64>,
    carried: Vec<f64>,
    spray_cache: SprayCache,
    /// MRC's QPs, each learning the dead paths for itself.
    learning: Option<learning::PathLearning>,
    qps: Vec<Qp>,
    connections: Vec<Vec<u32>>,
    flows: Vec<FlowRun>,
    jobs: Jobs,
    /// Streams of each transfer not yet arrived.
    transfer_parts: Vec<u32>,
    pipelines: Vec<PipelineRun>,
    /// Each collective's pipelines: `pipelines[pipeline_start[c]..pipeline_start[c + 1]]`,
    /// by their first step.
    pipeline_start: Vec<u32>,
    /// Each collective's first pipeline not started yet.
    pipeline_next: Vec<u32>,
    /// All-to-alls run whole, and each collective's (if it is one).
    exchanges: Vec<exchange::ExchangeRun>,
    exchange_of: Vec<Option<u32>>,
    /// Rings or all-to-alls of each collective run whole not yet arrived.
    whole_left: Vec<u32>,
    streams: Vec<Stream>,
    /// Slots of streams that arrived, for new ones.
    free_streams: Vec<u32>,
    /// Each QP's streams in the order posted; the first is sending.
    qp_queue: Vec<std::collections::VecDeque<u32>>,
    /// Each QP's READs asked for, and those waiting their turn.
    reads: reads::ReadDepth,
    /// Flowing streams of each bundle, each with the index of the bundle
    /// in its route's uses (`Stream::places` holds the way back).
    users: Vec<Vec<(u32, u32)>>,
    dirty: Vec<u32>,
    is_dirty: Vec<bool>,
    reroute: bool,
    /// NICs whose links changed this instant: the routes from and to them
    /// are to be computed again (when not every route is).
    reroute_nics: Vec<NodeId>,
    /// Counts `fabric_changed`: a route computed at one version holds
    /// until the next.
    fabric_version: u64,
    /// Faults changed the fabric this instant: `alive` is to be brought up
    /// to date.
    refresh: bool,
    /// When the control plane's and the transport's last catch-up is due
    /// (one per instant of faults).
    reconverge_due: [Time; 2],
    /// The faults in time order, and how many of them the control plane
    /// and the transport have seen: each sees a fault its own reaction
    /// time after it happened.
    fault_order: Vec<u32>,
    seen_by: [usize; 2],
    /// The fabric as the control plane and as the transport know it;
    /// `view` is what both still believe up.
    known_by: [View; 2],
    /// Scratch: streams already in the component being gathered.
    seen: Vec<bool>,
    fairness: FairRates,
    faults: Vec<(Time, FaultAction)>,
    events: EventQueue<Event>,
    work_left: usize,
    end: Time,
    /// Time-series rows the memory left after the build has room for.
    sample_rows: u64,
    /// Why the run must stop now, where an event decided it.
    halt: Option<StopReason>,
    recomputes: u64,
    rate_updates: u64,
    posted_streams: u64,
    qp_errors: u64,
    delivered: f64,
    /// Payload bytes each NIC has received.
    nic_rx: Vec<f64>,
    samples: report::Samples,
    telemetry_ports: Vec<PortId>,
    telemetry_hosts: Vec<NodeId>,
    /// Each port's place among its node's ports (its name's number).
    port_index: Vec<u32>,
    ignored: Vec<&'static str>,
}

impl FluidSimulation {
    /// Builds the flow model of `scenario`; `Ok(None)` when `setup`'s hook
    /// stopped it.
    pub fn new_within(scenario: Scenario, setup: &mut Setup<'_>) -> Result<Option<FluidSimulation>, ScenarioError> {
        let Some(mut sim) = FluidSimulation::build(scenario, setup)? else { return Ok(None) };
        sim.set_ideals();
        sim.end = sim.run_end();
        sim.check_recording(setup)?;
        Ok(Some(sim))
    }

    /// Everything but the ideal times (which route every flow and ring).
    fn build(scenario: Scenario, setup: &mut Setup<'_>) -> Result<Option<FluidSimulation>, ScenarioError> {
        let ignored = refuse_unsupported(&scenario)?;
        let topo = scenario.topology.build_within(setup.available_memory)?;
        check_memory(&scenario, &topo, setup)?;
        let seed = scenario.seed;
        let node_ports = topo.node_ports();
        crate::sim::build::check_nic_ports(&scenario, &topo, &node_ports)?;
        if topo.nics().is_empty() {
            return invalid("topology", "it has no NICs: nothing could send");
        }
        let Some((flow_specs, program)) = crate::sim::build::expand_workload(&scenario, &topo, &node_ports, setup)?
        else {
            return Ok(None);
        };
        refuse_sends_without_recvs(&scenario, &flow_specs, &program)?;
        let faults = crate::faults::expand(&scenario.faults, &topo, &node_ports, seed)?;
        let nics = topo.nics();
        let port = |text: &str, field: String| crate::faults::resolve_port(&topo, &node_ports, text, &field);
        let telemetry_ports = (scenario.telemetry.ports.iter().enumerate())
            .map(|(i, text)| port(text, format!("telemetry.ports[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let telemetry_hosts = (scenario.telemetry.hosts.iter().enumerate())
            .map(|(i, r)| r.resolve(&topo, &nics, &format!("telemetry.hosts[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let telemetry = &scenario.telemetry;
        crate::error::once_each("telemetry.ports", &telemetry_ports, |i| format!("'{}'", telemetry.ports[i]))?;
        crate::error::once_each("telemetry.hosts", &telemetry_hosts, |i| topo.name(telemetry_hosts[i]))?;
        check_choosers(&scenario, &topo, &node_ports)?;

        // QPs numbered as the packet model numbers them, so that each has
        // the same UDP source port: the flows' first, then one connection
        // per (job, channel, QP count, source, destination) in transfer order.
        let mut qps = Vec::new();
        let mut connections: Vec<Vec<u32>> = Vec::new();
        let mut connect = |src: NodeId, dst: NodeId, count: u32, offset: usize| {
            let ports = node_ports[src.0 as usize].len();
            let ids: Vec<u32> = (0..count as usize)
                .map(|k| {
                    let id = qps.len() as u32;
                    let entropy = QpSetup::entropy_of(seed, QpId(id));
                    qps.push(Qp { src, dst, port_index: ((offset + k) % ports) as u32, entropy });
                    id
                })
                .collect();
            connections.push(ids);
            connections.len() as u32 - 1
        };
        let mut flows = Vec::with_capacity(flow_specs.len());
        for (f, spec) in flow_specs.into_iter().enumerate() {
            let conn = connect(spec.src, spec.dst, spec.qps, f);
            flows.push(FlowRun { spec, conn, parts_left: 0, end: None, failed: false, ideal: Time::ZERO });
        }
        let connect_job = |src, dst, qps, channel| crate::ids::ConnectionId(connect(src, dst, qps, channel));
        let Some(opened) = crate::sim::build::transfer_connections(&program, &topo, setup, connect_job) else {
            return Ok(None);
        };
        let mut pipelines = Vec::new();
        let mut pipeline_start = vec![0u32];
        let mut opened_hops = opened.pipeline_hops.into_iter();
        for (c, run) in program.collectives.iter().enumerate() {
            // A GPU is in one pipeline per channel at a time.
            let channels = run.pipelines.iter().map(|plan| plan.channel + 1).max().unwrap_or(1) as f64;
            let mine: Vec<Vec<Option<u32>>> = (&mut opened_hops)
                .take(run.pipelines.len())
                .map(|hops| hops.into_iter().map(|h| h.map(|c| c.0)).collect())
                .collect();
            for (plan, hops) in run.pipelines.iter().zip(mine) {
                // A tree's GPU sends to its parent and its children over
                // its one intra-host link, one transfer at a time.
                let mut intra_sends: FastMap<u32, u32> = FastMap::default();
                for (&(src, _), hop) in plan.hops.iter().zip(&hops) {
                    if hop.is_none() {
                        *intra_sends.entry(src).or_default() += 1;
                    }
                }
                let sharing = channels * f64::from(intra_sends.values().copied().max().unwrap_or(0));
                let mut nics: Vec<NodeId> = (hops.iter().flatten())
                    .flat_map(|&c| {
                        let qp = &qps[connections[c as usize][0] as usize];
                        [qp.src, qp.dst]
                    })
                    .collect();
                nics.sort_unstable_by_key(|n| n.0);
                nics.dedup();
                pipelines.push(PipelineRun {
                    collective: CollectiveId::new(c),
                    first_step: plan.first_step,
                    hops,
                    steps: plan.steps,
                    segment: plan.segment,
                    slice: plan.slice,
                    waits: plan.waits.clone(),
                    intra_cap: if sharing > 0.0 {
                        scenario.intra_host.rate.0 as f64 / 8.0 / sharing
                    } else {
                        f64::INFINITY
                    },
                    step_latency: Time::ZERO,
                    independent_channels: 1,
                    depth: fill_depths(plan),
                    hop_latency: Vec::new(),
                    hop_fill_rate: Vec::new(),
                    filled_at: None,
                    started: Time::ZERO,
                    routed: None,
                    nics,
                });
            }
            let built = pipeline_start[pipeline_start.len() - 1] as usize..pipelines.len();
            if scenario.flow_mode.channel_phases == ChannelPhases::Independent {
                count_independent_channels(&mut pipelines[built]);
            }
            pipeline_start.push(pipelines.len() as u32);
        }
        let mut exchanges = Vec::new();
        let mut exchange_of = vec![None; program.collectives.len()];
        for (c, run) in program.collectives.iter().enumerate() {
            let Some(plan) = &run.exchange else { continue };
            let job_nics = &program.jobs[program.phases[run.phase].job].nics;
            let nics: Vec<NodeId> = plan.members.iter().map(|&m| job_nics[m as usize]).collect();
            let hosts = plan.hosts.clone();
            let ports = node_ports[nics[0].0 as usize].len();
            let shares = exchange::port_shares(ports, plan.channels, run.qps);
            let intra_rate = scenario.intra_host.rate.0 as f64 / 8.0;
            exchange_of[c] = Some(exchanges.len() as u32);
            exchanges.push(exchange::ExchangeRun::new(
                CollectiveId::new(c),
                nics,
                hosts,
                plan.pair_bytes,
                intra_rate,
                shares,
            ));
        }
        let n_transfers = program.transfers.len();
        let n_collectives = program.collectives.len();
        let jobs = Jobs::new(program, opened.transfer, topo.nodes.len(), connections.len());

        let placement = placement_of(&scenario);
        let bundles = match placement {
            Placement::Hash => Bundles::single(topo.links.len() * 2),
            Placement::Spray { .. } => Bundles::tiered(&topo),
        };
        let n_ports = topo.links.len() * 2;
        let mut rate = vec![0u64; n_ports];
        let mut delay = vec![Time::ZERO; n_ports];
        for (l, link) in topo.links.iter().enumerate() {
            for (side, to) in [link.b, link.a].into_iter().enumerate() {
                rate[2 * l + side] = link.rate.0;
                delay[2 * l + side] = link.delay + topo.node(to).latency;
            }
        }
        let mtu = scenario.nic.mtu.0 as u32;
        let encap = if scenario.switch.forwarding == Forwarding::Srv6 { headers::SRV6_OUTER } else { 0 };
        let addressed = scenario.transport.addresses_every_packet();
        // A full packet mid-message carries the same headers whatever its verb.
        let full = DataHeaders::of(Verb::Write, false, false, addressed);
        let efficiency = mtu as f64 / (headers::data_wire(scenario.nic.ip, mtu, full.bytes()) + encap) as f64;
        let seeds =
            (0..topo.nodes.len()).map(|n| crate::switch::switch_seed(&scenario.switch.ecmp, seed, n as u32)).collect();
        let mut events = EventQueue::default();
        for (f, flow) in flows.iter().enumerate() {
            events.schedule(flow.spec.start, Event::FlowStart(f as u32));
        }
        for (j, job) in jobs.program.jobs.enumerate() {
            events.schedule(job.start, Event::JobStart(j));
        }
        for (i, (at, _)) in faults.iter().enumerate() {
            events.schedule(*at, Event::Fault(i as u32));
        }
        let mut fault_order: Vec<u32> = (0..faults.len() as u32).collect();
        fault_order.sort_by_key(|&i| faults[i as usize].0);
        if scenario.telemetry.sample_interval.is_some() {
            events.schedule(Time::ZERO, Event::Sample);
        }
        let n_nodes = topo.nodes.len();
        let n_bundles = bundles.len();
        let mut port_index = vec![0; n_ports];
        for ports in &node_ports {
            for (i, p) in ports.iter().enumerate() {
                port_index[p.0 as usize] = i as u32;
            }
        }
        let mut sim = FluidSimulation {
            reactions: reactions_of(&scenario),
            routing: Routing::new(&topo, node_ports),
            placement,
            port_up: vec![true; n_ports],
            probes: None,
            software_lb: Default::default(),
            node_up: vec![true; n_nodes],
            advertised: vec![true; n_nodes],
            nic_rx: vec![0.0; n_nodes],
            alive: vec![true; n_ports],
            view: View::all_up(n_ports, n_nodes),
            nic_sees: vec![true; n_ports],
            seeds,
            rate,
            delay,
            efficiency,
            capacity: vec![0.0; n_bundles],
            carried: vec![0.0; n_bundles],
            spray_cache: SprayCache::default(),
            learning: None,
            work_left: flows.len() + jobs.program.jobs.len(),
            qps,
            connections,
            flows,
            transfer_parts: vec![0; n_transfers],
            pipelines,
            pipeline_next: pipeline_start[..pipeline_start.len() - 1].to_vec(),
            pipeline_start,
            exchanges,
            exchange_of,
            whole_left: vec![0; n_collectives],
            jobs,
            streams: Vec::new(),
            free_streams: Vec::new(),
            qp_queue: Vec::new(),
            reads: Default::default(),
            users: vec![Vec::new(); n_bundles],
            dirty: Vec::new(),
            is_dirty: vec![false; n_bundles],
            reroute: false,
            reroute_nics: Vec::new(),
            fabric_version: 0,
            refresh: false,
            reconverge_due: [Time::MAX; 2],
            fault_order,
            seen_by: [0; 2],
            known_by: [View::all_up(n_ports, n_nodes), View::all_up(n_ports, n_nodes)],
            seen: Vec::new(),
            fairness: FairRates::default(),
            faults,
            events,
            end: Time::MAX,
            sample_rows: u64::MAX,
            halt: None,
            recomputes: 0,
            rate_updates: 0,
            posted_streams: 0,
            qp_errors: 0,
            delivered: 0.0,
            samples: report::Samples::new(telemetry_ports.len(), telemetry_hosts.len()),
            telemetry_ports,
            telemetry_hosts,
            port_index,
            ignored,
            bundles,
            topo,
            scenario,
        };
        if let Some((detection, Scope::NicLinks { recovery })) = sim.reactions.transport {
            sim.probes = Some(probes::Probes::new(detection, recovery, &sim.topo, sim.probe_groups()));
        }
        if sim.balances_in_software() {
            sim.software_lb = software_lb::SoftwareLb::new(sim.qps.len());
        }
        for b in 0..n_bundles {
            sim.capacity[b] = sim.bundle_capacity(b as u32);
        }
        sim.qp_queue = vec![Default::default(); sim.qps.len()];
        let read_depth = match &sim.scenario.transport {
            TransportSpec::Rocev2(c) => c.read_depth,
            _ => u32::MAX,
        };
        sim.reads = reads::ReadDepth::new(read_depth);
        if let (TransportSpec::Mrc(_), Some((detection, _))) = (&sim.scenario.transport, sim.reactions.transport) {
            sim.learning = Some(learning::PathLearning::new(sim.qps.len(), sim.exchanges.len(), detection));
        }
        Ok(Some(sim))
    }

    /// Checks a scenario as `new_within` would, without keeping what it
    /// built (nor routing it: what can be refused is refused before);
    /// false when `setup`'s hook stopped it.
    pub fn check_within(scenario: &Scenario, setup: &mut Setup<'_>) -> Result<bool, ScenarioError> {
        let Some(sim) = FluidSimulation::build(scenario.clone(), setup)? else { return Ok(false) };
        if crate::sim::footprint::records(scenario) {
            sim.check_least_recording(setup)?;
        }
        Ok(true)
    }

    fn now(&self) -> Time {
        self.events.now()
    }

    /// Runs to the end, telling `hook` how far it got now and then (it
    /// returns false to stop).
    pub fn run(&mut self, hook: &mut dyn FnMut(Progress) -> bool) -> RunOutput {
        let stop = self.run_loop(hook);
        hook(self.progress());
        self.report(stop)
    }

    fn progress(&self) -> Progress {
        let now = self.now();
        let end = self.scenario.duration.unwrap_or(self.ideal_end());
        let fraction = if end.0 == 0 { 1.0 } else { (now.as_secs_f64() / end.as_secs_f64()).min(1.0) };
        Progress { now, fraction, events: self.events.executed() }
    }

    fn run_loop(&mut self, hook: &mut dyn FnMut(Progress) -> bool) -> StopReason {
        let mut instants = 0u64;
        loop {
            if self.work_left == 0 && self.scenario.duration.is_none() {
                return StopReason::Completed;
            }
            let Some(at) = self.events.peek_time() else {
                return match self.scenario.duration {
                    Some(d) => {
                        self.advance_all(d);
                        self.events.advance_to(d);
                        StopReason::Duration
                    }
                    None => StopReason::Stalled,
                };
            };
            if at > self.end {
                self.advance_all(self.end);
                self.events.advance_to(self.end);
                return match self.scenario.duration {
                    Some(d) if d <= self.end => StopReason::Duration,
                    _ => StopReason::TimeLimit,
                };
            }
            // Everything due at this instant, then one rate computation.
            while self.events.peek_time() == Some(at) {
                let (_, event) = self.events.pop().expect("an event is due");
                self.handle(event);
            }
            if std::mem::take(&mut self.refresh) {
                self.refresh_alive();
            }
            if std::mem::take(&mut self.reroute) {
                self.reroute_nics.clear();
                self.reroute_all();
            } else if !self.reroute_nics.is_empty() {
                self.reroute_touching();
            }
            self.recompute();
            if let Some(stop) = self.halt {
                return stop;
            }
            instants += 1;
            if instants.is_multiple_of(256) && !hook(self.progress()) {
                return StopReason::Interrupted;
            }
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::FlowStart(f) => self.on_flow_start(f),
            Event::JobStart(j) => crate::sim::jobs::start_job(self, j),
            Event::ComputeDone(p) => crate::sim::jobs::compute_done(self, p),
            Event::IntraHostDone(t) => crate::sim::jobs::intra_host_done(self, t),
            Event::Fault(i) => self.on_fault(i),
            Event::Reconverge { transport } => {
                self.catch_up(if transport { Learner::Transport } else { Learner::ControlPlane })
            }
            Event::NicNotice { port, up } => {
                self.nic_sees[port.0 as usize] = up;
                if up && self.balances_in_software() {
                    self.software_plane_back(port);
                }
                self.nic_changed(self.routing.peer(port.peer()));
            }
            Event::Finish { stream, epoch } => self.on_finish(stream, epoch),
            Event::Arrived(s) => self.on_arrived(s),
            Event::Resume(s) => self.on_resume(s),
            Event::QpLearned(qp) => self.on_qp_learned(qp),
            Event::ExchangeLearned(x) => self.on_exchange_learned(x),
            Event::GiveUp { stream, since } => self.on_give_up(stream, since),
            Event::SoftwareTimeout(qp) => self.on_software_timeout(qp),
            Event::Sample => self.on_sample(),
        }
    }

    /// Payload bytes per second bundle `b` can carry: its working links.
    fn bundle_capacity(&self, b: u32) -> f64 {
        let bits: u64 = (self.bundles.members(b).iter())
            .filter(|p| self.alive[p.0 as usize])
            .map(|p| self.rate[p.0 as usize])
            .sum();
        bits as f64 / 8.0 * self.efficiency
    }

    /// What carries traffic, or what a design believes, changed: routes
    /// computed before no longer hold.
    fn fabric_changed(&mut self) {
        self.spray_cache.clear();
        self.unaware_spreads_changed();
        self.fabric_version += 1;
    }

    /// What NIC `nic` has (its links, or what it sees of them) changed:
    /// the routes from and to it, and those of pipelines through it, kept or
    /// not yet started, no longer hold.
    fn nic_changed(&mut self, nic: NodeId) {
        for pipeline in &mut self.pipelines {
            if pipeline.nics.binary_search_by_key(&nic.0, |n| n.0).is_ok() {
                pipeline.routed = None;
                pipeline.filled_at = None;
            }
        }
        for run in &mut self.exchanges {
            if run.nics.contains(&nic) {
                run.routed = None;
            }
        }
        self.reroute_nics.push(nic);
    }

    /// Port `port` changed: alive, or in the routes' view (`in_view`). A
    /// NIC's link changes only the routes from and to that NIC (spreads
    /// stop at the switches attached to a NIC, and its class is searched
    /// again); a link between switches, every route (and, in the view,
    /// every search).
    fn port_changed(&mut self, port: PortId, in_view: bool) {
        match self.nic_of_link(port) {
            Some(nic) => {
                self.routing.forget(nic);
                self.nic_changed(nic);
            }
            None => {
                if in_view {
                    self.routing.clear();
                }
                self.fabric_changed();
                self.reroute = true;
            }
        }
    }

    /// The NIC at either end of `port`'s link, if one is.
    fn nic_of_link(&self, port: PortId) -> Option<NodeId> {
        let (from, to) = (self.routing.peer(port.peer()), self.routing.peer(port));
        [from, to].into_iter().find(|&n| self.routing.is_nic(n))
    }

    fn mark(&mut self, b: u32) {
        if !std::mem::replace(&mut self.is_dirty[b as usize], true) {
            self.dirty.push(b);
        }
    }

    // ---- the fabric: faults and the views that follow them ----

    fn on_fault(&mut self, i: u32) {
        let (_, action) = self.faults[i as usize];
        let routed = match action {
            FaultAction::PortUp { port, up, routed } => {
                self.port_up[port.0 as usize] = up;
                routed
            }
            FaultAction::SwitchUp { node, up, gray } => {
                self.node_up[node.0 as usize] = up;
                self.advertised[node.0 as usize] = up || gray;
                !gray
            }
            FaultAction::PortLoss { .. } | FaultAction::EvLoss { .. } => unreachable!("refused when built"),
        };
        // Faults of one instant (a thousand links failing at once) are
        // applied together, and their views catch up once.
        self.refresh = true;
        let now = self.now();
        if let Some(delay) = self.reactions.control_plane.filter(|_| routed) {
            if std::mem::replace(&mut self.reconverge_due[0], now + delay) != now + delay {
                self.events.schedule_in(delay, Event::Reconverge { transport: false });
            }
        }
        // Spectrum-X's probes watch what NIC links carry, whatever the
        // cause (`refresh_alive`).
        if let Some((detection, Scope::AllLinks)) = self.reactions.transport {
            self.schedule_transport_catch_up(now + detection);
        }
    }

    /// Brings `alive` and the bundles' capacities up to the fault state,
    /// and tells NICs of their ports (loss of signal, after their notice
    /// delay going down, at once coming up).
    fn refresh_alive(&mut self) {
        // A NIC's ports whose link changed in either direction: it is told
        // once both directions are up to date.
        let mut nic_ports = Vec::new();
        for p in 0..self.alive.len() {
            let port = PortId(p as u32);
            let from = self.routing.peer(port.peer());
            let to = self.routing.peer(port);
            let now_alive = self.port_up[p] && self.node_up[from.0 as usize] && self.node_up[to.0 as usize];
            if now_alive == self.alive[p] {
                continue;
            }
            if !now_alive {
                self.lose_what_is_on(port);
            }
            self.alive[p] = now_alive;
            self.port_changed(port, false);
            let b = self.bundles.of_port[p];
            self.capacity[b as usize] = self.bundle_capacity(b);
            self.mark(b);
            match (self.routing.is_nic(from), self.routing.is_nic(to)) {
                (true, _) => nic_ports.push(port),
                (_, true) => nic_ports.push(port.peer()),
                _ => {}
            }
        }
        nic_ports.sort_unstable_by_key(|p| p.0);
        nic_ports.dedup();
        for port in nic_ports {
            let sees = self.alive[port.0 as usize] && self.alive[port.peer().0 as usize];
            let delay = if sees { Time::ZERO } else { self.reactions.nic_notice };
            self.events.schedule_in(delay, Event::NicNotice { port, up: sees });
            self.probes_watch(port, sees);
        }
    }

    /// The control plane's routes, or the transport's view of its paths,
    /// take in the faults that happened at least its reaction time ago, one
    /// by one in the order they happened: a failure is seen on its own
    /// schedule, not when another's is due. The control plane, as the
    /// packet model's, hears only the faults it is told of (`control_plane:
    /// false` links and gray switches never) and takes in the link's or
    /// switch's state as it is when it looks (a flap shorter than its delay
    /// is never seen); MRC's transport finds each change in turn, on every
    /// link. Spectrum-X's probes look at NIC links only, for each sender
    /// apart (`probes_find`), and are not in the routes' view.
    fn catch_up(&mut self, who: Learner) {
        let delay = match (who, self.reactions.transport) {
            (Learner::ControlPlane, _) => self.reactions.control_plane,
            (Learner::Transport, Some((_, Scope::NicLinks { .. }))) => {
                self.probes_find();
                return;
            }
            (Learner::Transport, transport) => transport.map(|(delay, _)| delay),
        };
        let Some(seen_until) = delay.and_then(|delay| self.now().0.checked_sub(delay.0)).map(Time) else { return };
        let mut nodes_changed = false;
        while let Some(&i) = self.fault_order.get(self.seen_by[who as usize]) {
            let (at, action) = self.faults[i as usize];
            if at > seen_until {
                break;
            }
            self.seen_by[who as usize] += 1;
            match (who, action) {
                (Learner::ControlPlane, FaultAction::PortUp { port, routed: true, .. }) => {
                    self.learn_port(who, port, self.port_up[port.0 as usize])
                }
                (Learner::Transport, FaultAction::PortUp { port, up, .. }) => self.learn_port(who, port, up),
                // The control plane withdraws a switch that stops
                // advertising itself; the transport finds one that stops
                // forwarding, gray or not.
                (Learner::ControlPlane, FaultAction::SwitchUp { node, gray: false, .. }) => {
                    nodes_changed |= self.learn_node(who, node, self.advertised[node.0 as usize])
                }
                (Learner::Transport, FaultAction::SwitchUp { node, up, .. }) => {
                    nodes_changed |= self.learn_node(who, node, up)
                }
                _ => {}
            }
        }
        if nodes_changed {
            self.nodes_changed_in_view();
        }
    }

    /// `who` now believes `port` up or down; the routes use it while both
    /// the control plane and the transport believe it up.
    fn learn_port(&mut self, who: Learner, port: PortId, up: bool) {
        let known = std::mem::replace(&mut self.known_by[who as usize].port_up[port.0 as usize], up);
        if who == Learner::ControlPlane && known != up {
            self.control_plane_view_changed();
        }
        let believed = self.known_by.iter().all(|known| known.port_up[port.0 as usize]);
        if std::mem::replace(&mut self.view.port_up[port.0 as usize], believed) != believed {
            self.port_changed(port, true);
        }
    }

    /// `who` now believes switch `node` up or down; whether the routes'
    /// view of it changed (the caller clears the searches once).
    fn learn_node(&mut self, who: Learner, node: NodeId, up: bool) -> bool {
        let known = std::mem::replace(&mut self.known_by[who as usize].node_up[node.0 as usize], up);
        if who == Learner::ControlPlane && known != up {
            self.control_plane_view_changed();
        }
        let believed = self.known_by.iter().all(|known| known.node_up[node.0 as usize]);
        std::mem::replace(&mut self.view.node_up[node.0 as usize], believed) != believed
    }

    fn nodes_changed_in_view(&mut self) {
        self.routing.clear();
        self.fabric_changed();
        self.reroute = true;
    }

    // ---- streams ----

    /// Where stream `s`'s traffic goes now.
    fn route_of(&mut self, s: u32) -> Route {
        match self.streams[s as usize].owner {
            Owner::Pipeline(r) => self.pipeline_route(r),
            Owner::Exchange(x) => self.exchange_route(x),
            Owner::Flow(_) | Owner::Transfer(_) => {
                let qp = self.streams[s as usize].qp;
                let unaware = self.is_unaware(qp);
                self.qp_route_as(qp, unaware)
            }
        }
    }

    /// The end of the stage pipeline `first` begins among pipelines
    /// `first..end` of one collective: those that start at its first step.
    fn pipeline_stage_end(&self, first: u32, end: u32) -> u32 {
        let step = self.pipelines[first as usize].first_step;
        (first..end).find(|&r| self.pipelines[r as usize].first_step != step).unwrap_or(end)
    }

    /// Where pipeline `r`'s traffic goes now: every hop's QPs' routes, each
    /// carrying its share of the hop's rate, adding up on the bundles they
    /// cross. The pipeline delivers what its worst QP delivers (it moves as
    /// fast as its slowest hop); a ring's steps wait for its slowest paths
    /// (`PipelineRun::step_latency`), a chain's or tree's fill for each
    /// hop's latency at its rate while filling.
    fn pipeline_route(&mut self, r: u32) -> Route {
        if let Some((version, route)) = &self.pipelines[r as usize].routed {
            if *version == self.fabric_version {
                return route.clone();
            }
        }
        let mut uses: FastMap<u32, f64> = Default::default();
        let mut delivered = 1.0f64;
        let mut slowest = Time::ZERO;
        let mut path = Vec::new();
        let mut hop_latency = Vec::with_capacity(self.pipelines[r as usize].hops.len());
        for h in 0..self.pipelines[r as usize].hops.len() {
            let Some(conn) = self.pipelines[r as usize].hops[h] else {
                hop_latency.push(self.scenario.intra_host.latency);
                continue;
            };
            let count = self.connections[conn as usize].len();
            // A slice is split over the hop's QPs, as its transfers are.
            let pipeline = &self.pipelines[r as usize];
            let piece = pipeline.slice.min(pipeline.segment).div_ceil(count as u64);
            let wire = self.largest_packet(piece, self.verb_of(Owner::Pipeline(r))).wire;
            let mut hop_slowest = Time::ZERO;
            for k in 0..count {
                let route = self.qp_route(self.connections[conn as usize][k]);
                for &(b, share) in &route.uses {
                    *uses.entry(b).or_default() += share / count as f64;
                }
                delivered = delivered.min(route.delivered);
                let latency = self.message_latency(&route, piece as f64, wire, self.rate_alone(&route, f64::INFINITY));
                hop_slowest = hop_slowest.max(latency);
                if latency > slowest || path.is_empty() {
                    slowest = slowest.max(latency);
                    path = route.path;
                }
            }
            hop_latency.push(hop_slowest);
        }
        let pipeline = &mut self.pipelines[r as usize];
        pipeline.step_latency = chain_step_latency(&hop_latency, pipeline.steps);
        pipeline.hop_latency = hop_latency;
        if pipeline.filled_at != Some(self.fabric_version) {
            let collective = pipeline.collective;
            self.fill_rates(collective);
        }
        let mut uses: Vec<(u32, f64)> = uses.into_iter().collect();
        uses.sort_unstable_by_key(|&(b, _)| b);
        let route = Route { uses, delivered, path };
        self.pipelines[r as usize].routed = Some((self.fabric_version, route.clone()));
        route
    }

    /// Each hop's own payload rate among collective `c`'s pipelines: its
    /// paths' capacity shared, on every bundle it crosses, with the hops of
    /// the collective's pipelines of its stage as deep into the fill, which
    /// send at about the same time (a ring's hops all at once; a tree
    /// node's hops down to its children share its NIC, its children's hops
    /// up to it the link into it, a chain's hop in every channel its NICs;
    /// the two trees of a double tree few links), times the fraction of it
    /// that arrives (a hop sprayed partly into a dead link is slower by
    /// what it loses). A hop within a host goes at its GPU's intra-host
    /// rate: a GPU sends a tree's intra-host transfers one at a time, a
    /// ring's beside its other channels'. The pipeline's stream moves at
    /// its slowest hop's rate; a faster hop passes a slice on sooner.
    fn fill_rates(&mut self, c: CollectiveId) {
        let runs: Vec<u32> = (self.pipeline_start[c.index()]..self.pipeline_start[c.index() + 1]).collect();
        // Per hop: the bundles it uses with their shares, and the fraction
        // of what it sends that arrives (its slowest QP's).
        type HopUses = (Vec<(u32, f64)>, f64);
        let mut hop_uses: Vec<Vec<HopUses>> = Vec::with_capacity(runs.len());
        let mut load: FastMap<(u32, u32, u32), f64> = FastMap::default();
        for &r in &runs {
            let mut per_hop = Vec::with_capacity(self.pipelines[r as usize].hops.len());
            for h in 0..self.pipelines[r as usize].hops.len() {
                let mut uses: FastMap<u32, f64> = FastMap::default();
                let mut delivered = 1.0f64;
                if let Some(conn) = self.pipelines[r as usize].hops[h] {
                    let count = self.connections[conn as usize].len();
                    for k in 0..count {
                        let route = self.qp_route(self.connections[conn as usize][k]);
                        for &(b, share) in &route.uses {
                            *uses.entry(b).or_default() += share / count as f64;
                        }
                        delivered = delivered.min(route.delivered);
                    }
                }
                let (stage, depth) = (self.pipelines[r as usize].first_step, self.pipelines[r as usize].depth[h]);
                for (&b, &share) in &uses {
                    *load.entry((stage, b, depth)).or_default() += share;
                }
                per_hop.push((uses.into_iter().collect(), delivered));
            }
            hop_uses.push(per_hop);
        }
        let intra = self.scenario.intra_host.rate.0 as f64 / 8.0;
        for (&r, per_hop) in runs.iter().zip(hop_uses) {
            let pipeline = &self.pipelines[r as usize];
            let rates = (per_hop.iter().enumerate())
                .map(|(h, (uses, delivered))| match pipeline.hops[h] {
                    // A ring's GPU shares its link with its other channels.
                    None if pipeline.waits.is_empty() => pipeline.intra_cap,
                    None => intra,
                    Some(_) => {
                        let sending = (uses.iter())
                            .map(|&(b, _)| {
                                self.capacity[b as usize] / load[&(pipeline.first_step, b, pipeline.depth[h])]
                            })
                            .fold(f64::INFINITY, f64::min);
                        sending * delivered
                    }
                })
                .collect();
            let pipeline = &mut self.pipelines[r as usize];
            pipeline.hop_fill_rate = rates;
            pipeline.filled_at = Some(self.fabric_version);
        }
    }

    /// Where QP `qp`'s traffic goes now.
    fn qp_route(&mut self, id: u32) -> Route {
        self.qp_route_as(id, false)
    }

    /// QP `id`'s route; `unaware`: an MRC QP's own messages yet to learn
    /// what the transport's view knows (`learning`).
    fn qp_route_as(&mut self, id: u32, unaware: bool) -> Route {
        let qp = self.qps[id as usize];
        match self.placement {
            Placement::Hash => {
                let src_ports = self.routing.node_ports(qp.src);
                let first = src_ports[qp.port_index as usize % src_ports.len()];
                let mut fabric = fabric!(self);
                paths::hashed(&mut fabric, first, qp.src, qp.dst, qp.entropy)
            }
            Placement::Spray { avoid, .. } if self.balances_in_software() => self.software_route(id, avoid, unaware),
            Placement::Spray { nic, avoid } => {
                let since = self.qp_probing_since(id);
                self.sprayed_route(qp.src, qp.dst, (nic, since), (avoid, unaware), &[(qp.port_index as usize, 1.0)])
            }
        }
    }

    /// Where traffic from NIC `src` to NIC `dst` goes in a design that
    /// sprays: over the ports the NIC sees up whose plane reaches the
    /// destination in its view and has not been found dead by the sender's
    /// probes (probing since `since`), by their rates (`nic`: the NIC
    /// sprays), or over the ports `bound` gives, with their shares (QPs
    /// bound to ports, by index). `unaware`: over the control plane's view
    /// alone, for an MRC QP yet to learn what its transport's view knows
    /// (`learning`).
    fn sprayed_route(
        &mut self,
        src: NodeId,
        dst: NodeId,
        (nic, since): (bool, Time),
        (avoid, unaware): (bool, bool),
        bound: &[(usize, f64)],
    ) -> Route {
        let src_ports = self.routing.node_ports(src).to_vec();
        let probed = if nic { self.planes_toward(&src_ports, dst, since) } else { Vec::new() };
        let probes_say = |k: usize| probed.get(k).copied().flatten();
        if unaware {
            self.make_unaware_routes();
        }
        let unaware_routes = self.learning.as_mut().and_then(|l| l.unaware.as_deref_mut()).filter(|_| unaware);
        let (routing, spray_cache, view) = match unaware_routes {
            Some((routing, cache)) => (routing, cache, &self.known_by[Learner::ControlPlane as usize]),
            None => (&mut self.routing, &mut self.spray_cache, &self.view),
        };
        let mut fabric = Fabric {
            routing,
            view,
            alive: &self.alive,
            nic_sees: &self.nic_sees,
            bundles: &self.bundles,
            seeds: &self.seeds,
            rate: &self.rate,
        };
        let first: Vec<(PortId, f64)> = if nic {
            let usable: Vec<PortId> = (src_ports.iter().copied().enumerate())
                .filter(|&(_, p)| fabric.nic_sees[p.0 as usize] && fabric.view.usable(p))
                .filter(|&(k, p)| {
                    let tor = fabric.routing.peer(p);
                    match probes_say(k) {
                        Some(Plane::Found) => false,
                        Some(Plane::Unfound) => true,
                        None => tor == dst || fabric.routing.distance(tor, dst, fabric.view).is_some(),
                    }
                })
                .map(|(_, p)| p)
                .collect();
            let total: u64 = usable.iter().map(|p| fabric.rate[p.0 as usize]).sum();
            usable.iter().map(|&p| (p, fabric.rate[p.0 as usize] as f64 / total as f64)).collect()
        } else {
            bound.iter().map(|&(k, share)| (src_ports[k % src_ports.len()], share)).collect()
        };
        if first.is_empty() {
            return Route::stalled_at(src_ports[0]);
        }
        paths::sprayed(&mut fabric, spray_cache, avoid, &first, dst)
    }

    /// Posts a stream of `bytes` on QP `qp` for `owner`: it starts once
    /// the QP has sent the messages posted before it (a QP sends its
    /// messages in order, as the packet model's does).
    fn post_stream(&mut self, owner: Owner, qp: u32, bytes: u64, cap: f64) {
        let s = self.new_stream(owner, qp, bytes, cap);
        self.qp_queue[qp as usize].push_back(s);
        if self.qp_queue[qp as usize].len() == 1 && !self.reads.is_waiting(qp, s) {
            self.start_stream(s);
        }
    }

    /// A stream of `bytes` for `owner`, not yet started, in a free slot.
    fn new_stream(&mut self, owner: Owner, qp: u32, bytes: u64, cap: f64) -> u32 {
        let now = self.now();
        let verb = self.verb_of(owner);
        let stream = Stream {
            owner,
            qp,
            left: bytes as f64,
            packet: self.largest_packet(bytes, verb),
            rate: 0.0,
            cap,
            route: Route::default(),
            places: Vec::new(),
            updated: now,
            moving: 0.0,
            epoch: 0,
            data_from: now,
            started: false,
            began: now,
            flowing: false,
            done: false,
            stalled_since: None,
            resume_at: now,
            bytes: bytes as f64,
            lost: 0.0,
            lost_over: 0.0,
            after_loss: 0.0,
            lost_since: now,
            lost_until: now,
            recover_at: now,
            resent: 0.0,
            rx_counted: 0.0,
            held: false,
            timeouts: 0,
        };
        // A slot freed by a stream that arrived; its epoch goes on counting,
        // so that the old stream's events stay stale.
        let s = match self.free_streams.pop() {
            Some(s) => {
                let epoch = self.streams[s as usize].epoch + 1;
                self.streams[s as usize] = Stream { epoch, ..stream };
                s
            }
            None => {
                self.streams.push(stream);
                self.streams.len() as u32 - 1
            }
        };
        self.posted_streams += 1;
        // The reader asks when the READ is posted, or when an earlier READ
        // arrives if its initiator depth is taken (a collective run whole
        // stands for many messages and asks nothing).
        if matches!(owner, Owner::Flow(_) | Owner::Transfer(_)) && verb == Verb::Read {
            self.streams[s as usize].data_from =
                if self.reads.post(qp, s) { now + self.read_request_trip(qp) } else { Time::MAX };
        }
        s
    }

    /// The QP's first message starts sending.
    fn start_stream(&mut self, s: u32) {
        if let Owner::Flow(_) | Owner::Transfer(_) = self.streams[s as usize].owner {
            self.start_probing(self.streams[s as usize].qp);
            self.note_sending(self.streams[s as usize].qp);
        }
        let now = self.now();
        let stream = &mut self.streams[s as usize];
        let begins = now.max(stream.data_from);
        stream.started = true;
        stream.began = begins;
        stream.updated = now;
        stream.resume_at = begins;
        let route = self.route_of(s);
        self.set_route(s, route);
    }

    /// Stream `s` has sent its last byte: the next message of its QP starts.
    fn next_on_qp(&mut self, s: u32) {
        let qp = self.streams[s as usize].qp as usize;
        debug_assert_eq!(self.qp_queue[qp].front(), Some(&s));
        self.qp_queue[qp].pop_front();
        match self.qp_queue[qp].front() {
            // A READ not yet asked for starts when it is (`read_arrived`).
            Some(&next) if self.reads.is_waiting(qp as u32, next) => {}
            Some(&next) => self.start_stream(next),
            None => self.stop_probing(qp as u32),
        }
    }

    /// A READ of QP `qp` wholly arrived: the READ waiting for its turn, if
    /// any, is asked for, and starts if it is the QP's next message.
    fn read_arrived(&mut self, qp: u32) {
        let Some(next) = self.reads.arrived(qp) else { return };
        self.streams[next as usize].data_from = self.now() + self.read_request_trip(qp);
        if self.qp_queue[qp as usize].front() == Some(&next) {
            self.start_stream(next);
        }
    }

    /// Gives stream `s` a new route, joining or leaving the rate
    /// computation as it can or cannot deliver.
    fn set_route(&mut self, s: u32, route: Route) {
        let now = self.now();
        self.advance(s, now);
        if self.streams[s as usize].lost > 0.0 && route.delivered >= 1.0 - 1e-9 {
            let at = self.goes_back_at(s);
            let held = self.streams[s as usize].held;
            self.go_back(s, 0.0);
            let stream = &mut self.streams[s as usize];
            stream.recover_at = at;
            if held {
                // Not at the timer it was waiting for.
                stream.resume_at = at;
            }
        }
        self.leave(s);
        let delivers = route.delivered > 0.0;
        let resume = match self.streams[s as usize].stalled_since {
            Some(since) => self.resume_after_stall(s, since, now),
            None => now,
        };
        let stream = &mut self.streams[s as usize];
        stream.route = route;
        match (delivers, stream.stalled_since) {
            (false, None) => {
                stream.stalled_since = Some(now);
                if self.balances_in_software() {
                    self.arm_software_timer(s);
                }
                // Every QP of a job, whole collectives' too, has NCCL's timeout.
                let job = !matches!(self.streams[s as usize].owner, Owner::Flow(_));
                let give_up = self.scenario.transport.give_up_time(job);
                self.events.schedule_in(give_up, Event::GiveUp { stream: s, since: now });
            }
            (true, Some(_)) => {
                stream.stalled_since = None;
                stream.resume_at = resume;
                if stream.held {
                    // Its timer may have gone off in the stall, unheeded:
                    // it goes back at the next one.
                    let at = self.goes_back_at(s).max(resume);
                    self.streams[s as usize].resume_at = at;
                    self.events.schedule(at, Event::Resume(s));
                }
            }
            _ => {}
        }
        let stream = &self.streams[s as usize];
        if stream.held || !self.progresses(&stream.route) {
            return;
        }
        if stream.resume_at <= now {
            self.join(s);
        } else {
            let at = stream.resume_at;
            self.events.schedule(at, Event::Resume(s));
        }
    }

    /// Whether a stream on `route` moves at all: it delivers something, and
    /// everything when lost packets hold it up (`PartialLoss::Stall`).
    fn progresses(&self, route: &Route) -> bool {
        match self.scenario.flow_mode.partial_loss {
            PartialLoss::Deliver => route.delivered > 0.0,
            PartialLoss::Stall => route.delivered >= 1.0 - 1e-9,
        }
    }

    /// When a QP whose paths were all dead from `since` until `now` sends
    /// again. RoCE (go-back-N, one path) kept sending into the dead path,
    /// at its port's line rate (no congestion notification comes back to
    /// slow it): if it is still sending when the path comes back, the
    /// receiver sees the gap and NAKs it, and the QP goes back at once;
    /// if it had sent all it had, only its next retransmission timeout
    /// recovers it. Transports that spray retransmit as soon as a path
    /// works.
    fn resume_after_stall(&self, s: u32, since: Time, now: Time) -> Time {
        match (&self.scenario.transport, self.placement) {
            (TransportSpec::Rocev2(c), Placement::Hash) => {
                let stream = &self.streams[s as usize];
                let qp = self.qps[stream.qp as usize];
                let ports = self.routing.node_ports(qp.src);
                let port = ports[qp.port_index as usize % ports.len()];
                let line = self.rate[port.0 as usize] as f64 / 8.0 * self.efficiency;
                let lost = line * (now - since).as_secs_f64();
                let queued: f64 = match stream.owner {
                    // A pipeline's hop has posted at most its connection's
                    // credits of slices, as its transfers would have.
                    Owner::Pipeline(r) => {
                        let pipeline = &self.pipelines[r as usize];
                        let credits = self.jobs.program.collectives[pipeline.collective].credits;
                        stream.left.min((u64::from(credits) * pipeline.slice.min(pipeline.segment)) as f64)
                    }
                    Owner::Exchange(_) => stream.left,
                    Owner::Flow(_) | Owner::Transfer(_) => {
                        self.qp_queue[stream.qp as usize].iter().map(|&q| self.streams[q as usize].left).sum()
                    }
                };
                if queued > lost {
                    return now;
                }
                // Every QP of a job, whole collectives' too, has NCCL's timeout.
                let rto = c.retransmit_timeout(!matches!(stream.owner, Owner::Flow(_)));
                let waited = (now - since).0;
                since + Time(waited.div_ceil(rto.0.max(1)) * rto.0.max(1))
            }
            _ => now,
        }
    }

    fn join(&mut self, s: u32) {
        if self.streams[s as usize].flowing || self.streams[s as usize].done {
            return;
        }
        self.streams[s as usize].flowing = true;
        self.streams[s as usize].updated = self.now();
        if self.streams[s as usize].route.uses.is_empty() {
            // It crosses no link of the fabric (a ring between the GPUs of
            // one host): its own cap is its rate.
            self.set_rate(s, self.streams[s as usize].cap);
            return;
        }
        let mut places = std::mem::take(&mut self.streams[s as usize].places);
        places.clear();
        for (i, &(b, _)) in self.streams[s as usize].route.uses.iter().enumerate() {
            places.push(self.users[b as usize].len() as u32);
            self.users[b as usize].push((s, i as u32));
        }
        self.streams[s as usize].places = places;
        for i in 0..self.streams[s as usize].route.uses.len() {
            self.mark(self.streams[s as usize].route.uses[i].0);
        }
    }

    fn leave(&mut self, s: u32) {
        if !std::mem::replace(&mut self.streams[s as usize].flowing, false) {
            return;
        }
        self.streams[s as usize].rate = 0.0;
        self.streams[s as usize].epoch += 1;
        for i in 0..self.streams[s as usize].route.uses.len() {
            let b = self.streams[s as usize].route.uses[i].0;
            let place = self.streams[s as usize].places[i];
            let list = &mut self.users[b as usize];
            list.swap_remove(place as usize);
            if let Some(&(moved, use_index)) = list.get(place as usize) {
                self.streams[moved as usize].places[use_index as usize] = place;
            }
            self.mark(b);
        }
    }

    /// Brings stream `s`'s bytes left (and its links' counts) up to `now`.
    fn advance(&mut self, s: u32, now: Time) {
        let counts_losses = self.counts_losses();
        let stream = &mut self.streams[s as usize];
        if stream.flowing && now > stream.updated {
            let dt = (now - stream.updated).as_secs_f64();
            if stream.rate * stream.route.delivered > 0.0 {
                stream.moving += dt;
            }
            let sent = (stream.rate * dt).min(stream.left / stream.route.delivered.max(f64::MIN_POSITIVE));
            stream.left = (stream.left - sent * stream.route.delivered).max(0.0);
            // A message's packets lost in a dead link: the sender sends the
            // others on (the accounting above), and the lost ones when it
            // goes back for them (`recovery.rs`). Whole collectives'
            // streams are not messages: a ring's steps are held by `stall`.
            // What a go-back sends again into links that still lose is not
            // counted again, but for RoCE's timeout rounds (`recovery.rs`).
            if counts_losses
                && stream.resent == 0.0
                && stream.route.delivered < 1.0 - 1e-9
                && !matches!(stream.owner, Owner::Pipeline(_))
            {
                if stream.lost == 0.0 {
                    stream.lost_since = stream.updated;
                }
                stream.lost += sent * (1.0 - stream.route.delivered);
                stream.lost_over += sent;
                stream.lost_until = now;
            } else if stream.lost > 0.0 {
                stream.after_loss += sent;
            }
            // What one of the stream's messages received; a whole ring or
            // all-to-all receives it on every hop or pair over the network.
            let arrived = sent * stream.route.delivered;
            let again = arrived.min(stream.resent);
            stream.resent -= again;
            let fresh = arrived - again;
            let counted = fresh.min(stream.rx_counted);
            stream.rx_counted -= counted;
            // What the receiver's telemetry has not counted yet: the packet
            // model's hosts count payload they place, once.
            let received = fresh - counted;
            self.delivered += fresh
                * match stream.owner {
                    Owner::Pipeline(r) => self.pipelines[r as usize].network_hops() as f64,
                    Owner::Exchange(x) => self.exchanges[x as usize].network_pairs() as f64,
                    Owner::Flow(_) | Owner::Transfer(_) => 1.0,
                };
            match stream.owner {
                // Every hop's receiver gets the ring's bytes; only hosts
                // sampled read them, and a ring may have 100,000 hops.
                Owner::Pipeline(r) if !self.telemetry_hosts.is_empty() => {
                    for conn in self.pipelines[r as usize].hops.iter().flatten() {
                        let dst = self.qps[self.connections[*conn as usize][0] as usize].dst;
                        self.nic_rx[dst.0 as usize] += received;
                    }
                }
                Owner::Exchange(x) if !self.telemetry_hosts.is_empty() => {
                    let run = &self.exchanges[x as usize];
                    for (&nic, &peers) in run.nics.iter().zip(&run.network_peers) {
                        self.nic_rx[nic.0 as usize] += received * f64::from(peers);
                    }
                }
                Owner::Pipeline(_) | Owner::Exchange(_) => {}
                Owner::Flow(_) | Owner::Transfer(_) => {
                    self.nic_rx[self.qps[stream.qp as usize].dst.0 as usize] += received
                }
            }
            for &(b, share) in &stream.route.uses {
                self.carried[b as usize] += sent * share;
            }
        }
        stream.updated = stream.updated.max(now);
    }

    fn advance_all(&mut self, now: Time) {
        for s in 0..self.streams.len() as u32 {
            self.advance(s, now);
        }
    }

    /// Every stream from or to a NIC in `reroute_nics` takes the route the
    /// fabric gives it now.
    fn reroute_touching(&mut self) {
        let mut nics = std::mem::take(&mut self.reroute_nics);
        nics.sort_unstable_by_key(|n| n.0);
        nics.dedup();
        let touches = |n: &NodeId| nics.binary_search_by_key(&n.0, |m| m.0).is_ok();
        for s in 0..self.streams.len() as u32 {
            let stream = &self.streams[s as usize];
            if !stream.started || stream.done {
                continue;
            }
            let touched = match stream.owner {
                Owner::Pipeline(r) => self.pipelines[r as usize].nics.iter().any(touches),
                Owner::Exchange(x) => self.exchanges[x as usize].nics.iter().any(touches),
                Owner::Flow(_) | Owner::Transfer(_) => {
                    let qp = &self.qps[stream.qp as usize];
                    touches(&qp.src) || touches(&qp.dst)
                }
            };
            if !touched {
                continue;
            }
            self.take_current_route(s);
        }
    }

    /// Stream `s` takes the route the fabric gives it now, if that changed.
    fn take_current_route(&mut self, s: u32) {
        let route = self.route_of(s);
        if route != self.streams[s as usize].route {
            self.set_route(s, route);
        }
    }

    /// Every stream not done takes the route the fabric gives it now.
    fn reroute_all(&mut self) {
        for s in 0..self.streams.len() as u32 {
            if !self.streams[s as usize].started || self.streams[s as usize].done {
                continue;
            }
            self.take_current_route(s);
        }
    }

    /// New rates for every stream a change this instant can reach: the
    /// connected component of flowing streams and bundles around the
    /// bundles marked.
    fn recompute(&mut self) {
        if self.dirty.is_empty() {
            return;
        }
        self.recomputes += 1;
        let mut bundles: Vec<u32> = std::mem::take(&mut self.dirty);
        let mut streams: Vec<u32> = Vec::new();
        self.seen.resize(self.streams.len(), false);
        let mut i = 0;
        while i < bundles.len() {
            let b = bundles[i] as usize;
            i += 1;
            for k in 0..self.users[b].len() {
                let s = self.users[b][k].0;
                if std::mem::replace(&mut self.seen[s as usize], true) {
                    continue;
                }
                streams.push(s);
                for &(c, _) in &self.streams[s as usize].route.uses {
                    if !std::mem::replace(&mut self.is_dirty[c as usize], true) {
                        bundles.push(c);
                    }
                }
            }
        }
        for &b in &bundles {
            self.is_dirty[b as usize] = false;
        }
        for &s in &streams {
            self.seen[s as usize] = false;
        }
        // A fixed order.
        streams.sort_unstable();
        bundles.sort_unstable();
        let users: Vec<(&[(u32, f64)], f64)> =
            streams.iter().map(|&s| (&self.streams[s as usize].route.uses[..], self.streams[s as usize].cap)).collect();
        let rates = self.fairness.solve(&self.capacity, &bundles, &users);
        for (&s, &rate) in streams.iter().zip(&rates) {
            self.set_rate(s, rate);
        }
    }

    /// Stream `s` moves at `rate` from now, and finishes when its bytes
    /// left are delivered at that rate.
    fn set_rate(&mut self, s: u32, rate: f64) {
        let now = self.now();
        self.advance(s, now);
        let stream = &mut self.streams[s as usize];
        // A rate that did not change (but for rounding) keeps its finish
        // event: a stream far from the change is not rescheduled, and the
        // queue does not fill with stale events.
        if stream.rate > 0.0 && (rate - stream.rate).abs() <= 1e-12 * stream.rate {
            return;
        }
        stream.epoch += 1;
        stream.rate = rate;
        self.rate_updates += 1;
        let goodput = rate * stream.route.delivered;
        if goodput > 0.0 {
            let at = now + Time::from_secs_f64(stream.left / goodput).max(Time(1));
            let epoch = stream.epoch;
            self.events.schedule(at, Event::Finish { stream: s, epoch });
        }
    }

    fn on_finish(&mut self, s: u32, epoch: u32) {
        if self.streams[s as usize].epoch != epoch || !self.streams[s as usize].flowing {
            return;
        }
        let now = self.now();
        self.advance(s, now);
        self.leave(s);
        let stream = &mut self.streams[s as usize];
        stream.left = 0.0;
        if stream.lost > 0.0 {
            // Its last packets are sent; those lost wait, the QP behind
            // them, for its routes to lose nothing (`set_route`) or its
            // sender's next timer to go back while they still lose.
            stream.held = true;
            let at = self.goes_back_at(s);
            self.streams[s as usize].resume_at = at;
            self.events.schedule(at, Event::Resume(s));
            return;
        }
        if now < stream.recover_at {
            // What it lost is sent again only then.
            stream.resume_at = stream.recover_at;
            let at = stream.recover_at;
            self.events.schedule(at, Event::Resume(s));
            return;
        }
        stream.done = true;
        if let Owner::Pipeline(r) = stream.owner {
            let pipeline = &self.pipelines[r as usize];
            let average = pipeline.bytes() as f64 / (now - pipeline.started).as_secs_f64().max(f64::MIN_POSITIVE);
            let while_moving = pipeline.bytes() as f64 / stream.moving.max(f64::MIN_POSITIVE);
            self.events.schedule_in(pipeline.tail(average, while_moving), Event::Arrived(s));
            return;
        }
        if let Owner::Exchange(x) = stream.owner {
            self.events.schedule_in(self.exchanges[x as usize].latency, Event::Arrived(s));
            return;
        }
        let stream = &self.streams[s as usize];
        // Its first packet went whole over one port: the message ends no
        // sooner than that packet's serialization after it began, even when
        // sprayed over planes or smaller than a packet (`first_packet_wait`).
        let wire = stream.packet.wire;
        let first = stream.route.path.first().map_or(Time::ZERO, |&p| self.serialization(p, wire));
        let latency = self.latency(&stream.route.path, wire) + (stream.began + first).saturating_sub(now);
        self.events.schedule_in(latency, Event::Arrived(s));
        self.next_on_qp(s);
    }

    /// A message's last data's way after a stream moving `rate` payload
    /// bytes a second on `route` sent its `bytes`: the path's latency and
    /// what its one packet of `wire` bytes waits beyond the fluid rate
    /// (`first_packet_wait`).
    pub(super) fn message_latency(&self, route: &Route, bytes: f64, wire: u32, rate: f64) -> Time {
        self.latency(&route.path, wire) + self.first_packet_wait(route, bytes, wire, rate)
    }

    /// What a message of `bytes` takes beyond its fluid time at `rate`
    /// payload bytes a second: a packet goes whole over one port, so a
    /// message no larger than a packet is not served faster than one
    /// packet's serialization (the alpha of the ideal's alpha-beta bound,
    /// `report.rs`), also when it is sprayed over several planes, or when
    /// the rate counts headers at the average of full packets. For the
    /// collectives run whole, whose streams stand for many messages, at
    /// their rate alone.
    fn first_packet_wait(&self, route: &Route, bytes: f64, wire: u32, rate: f64) -> Time {
        let Some(&first) = route.path.first() else { return Time::ZERO };
        let fluid = Time::from_secs_f64(bytes / rate);
        self.serialization(first, wire).saturating_sub(fluid)
    }

    /// The largest packet of a message of `bytes` and `verb`.
    fn largest_packet(&self, bytes: u64, verb: Verb) -> LargestPacket {
        let mtu = self.scenario.nic.mtu.0;
        let payload = bytes.clamp(1, mtu) as u32;
        let carried = DataHeaders::of(verb, true, bytes <= mtu, self.scenario.transport.addresses_every_packet());
        LargestPacket { payload, wire: headers::data_wire(self.scenario.nic.ip, payload, carried.bytes()) }
    }

    /// What QP `q`'s READ request takes to reach the end that sends the
    /// data: from the reader's port of the QP's plane along the path its
    /// hash picks back, serialized at every hop (the packet model's
    /// `read_request_trip`).
    pub(super) fn read_request_trip(&mut self, q: u32) -> Time {
        let qp = self.qps[q as usize];
        let ports = self.routing.node_ports(qp.dst);
        let first = ports[qp.port_index as usize % ports.len()];
        let back = paths::hashed(&mut fabric!(self), first, qp.dst, qp.src, qp.entropy);
        let wire = headers::read_request_wire(self.scenario.nic.ip);
        back.path.iter().fold(Time::ZERO, |t, &p| t + self.delay[p.0 as usize] + self.serialization(p, wire))
    }

    /// What the messages of `owner` post.
    fn verb_of(&self, owner: Owner) -> Verb {
        let collective = match owner {
            Owner::Flow(f) => return self.flows[f as usize].spec.verb,
            Owner::Transfer(t) => self.jobs.program.transfers[t].collective,
            Owner::Pipeline(r) => self.pipelines[r as usize].collective,
            Owner::Exchange(x) => self.exchanges[x as usize].collective,
        };
        self.jobs.program.collectives[collective].verb
    }

    /// A packet of `wire` bytes on the wire of `port`'s link.
    fn serialization(&self, port: PortId, wire: u32) -> Time {
        crate::units::Rate(self.rate[port.0 as usize]).tx_time(u64::from(wire))
    }

    /// One packet of `wire` bytes' way along `path`: each hop's
    /// propagation and the next node's latency, and its serialization at
    /// every hop but the first (which the stream's rate counts, bar
    /// `first_packet_wait`).
    fn latency(&self, path: &[PortId], wire: u32) -> Time {
        path.iter().enumerate().fold(Time::ZERO, |t, (i, &p)| {
            let serialize = if i == 0 { Time::ZERO } else { self.serialization(p, wire) };
            t + self.delay[p.0 as usize] + serialize
        })
    }

    fn on_resume(&mut self, s: u32) {
        let stream = &self.streams[s as usize];
        if !stream.started || stream.done || stream.stalled_since.is_some() || stream.resume_at > self.now() {
            return;
        }
        if stream.held {
            let losing = 1.0 - stream.route.delivered;
            self.go_back(s, losing);
            if self.retries_exhausted(s, losing) {
                self.fail_qp(s);
                return;
            }
        }
        if self.progresses(&self.streams[s as usize].route) {
            self.join(s);
        }
    }

    /// A stall that lasted the transport's whole retry budget fails the QP
    /// and every message posted on it.
    fn on_give_up(&mut self, s: u32, since: Time) {
        let stream = &self.streams[s as usize];
        if !stream.started || stream.done || stream.stalled_since != Some(since) {
            return;
        }
        self.fail_qp(s);
    }

    /// Stream `s`'s QP fails: its job, or every message posted on it.
    fn fail_qp(&mut self, s: u32) {
        let stream = &self.streams[s as usize];
        self.qp_errors += 1;
        let whole = match stream.owner {
            Owner::Pipeline(r) => Some(self.pipelines[r as usize].collective),
            Owner::Exchange(x) => Some(self.exchanges[x as usize].collective),
            Owner::Flow(_) | Owner::Transfer(_) => None,
        };
        if let Some(collective) = whole {
            self.streams[s as usize].done = true;
            self.fail_job(self.jobs.job_of_collective(collective));
            return;
        }
        let qp = stream.qp as usize;
        self.reads.forget(qp as u32);
        for failed in std::mem::take(&mut self.qp_queue[qp]) {
            self.streams[failed as usize].done = true;
            match self.streams[failed as usize].owner {
                Owner::Flow(f) => self.flow_failed(f),
                Owner::Transfer(t) => self.fail_job(self.jobs.job_of(t)),
                Owner::Pipeline(_) | Owner::Exchange(_) => unreachable!("whole collectives are on no QP's queue"),
            }
        }
    }
}

/// The latency of one step of a ring whose hops take `hop_latency` each,
/// over its `steps` steps: a slice's way through the ring passes
/// `steps` consecutive hops (step k at a hop follows step k - 1 at the hop
/// before), so the ring's latency is that of its slowest run of `steps`
/// consecutive hops, spread over its steps. Equal hops give each hop's
/// latency; a ring of GPUs on multi-GPU hosts, or of rails under different
/// ToRs, waits on its network hops only as often as its slices cross them.
fn chain_step_latency(hop_latency: &[Time], steps: u32) -> Time {
    let n = hop_latency.len();
    if n == 0 || steps == 0 {
        return hop_latency.iter().copied().max().unwrap_or(Time::ZERO);
    }
    let steps = steps as usize;
    let total: u64 = hop_latency.iter().map(|t| t.0).sum();
    let (laps, rest) = ((steps / n) as u64, steps % n);
    // The largest sum of `rest` consecutive hops, cyclically.
    let mut window: u64 = hop_latency[..rest].iter().map(|t| t.0).sum();
    let mut largest = window;
    for start in 1..n {
        window = window + hop_latency[(start + rest - 1) % n].0 - hop_latency[start - 1].0;
        largest = largest.max(window);
    }
    Time((laps * total + largest).div_ceil(steps as u64))
}

/// How many channels, on average, share a ring channel's NIC while it
/// sends (itself included), when `channels` rings' phases are independent:
/// each sends its segment (`segment` seconds alone) and waits `latency`
/// plus a slice (`slice` seconds alone) a step, so it is sending for the
/// fraction `p = segment x / step` of its step, where the sharing is
/// `x = 1 + (channels - 1) p` and the step `max(segment x, latency +
/// slice x)`. Latency-bound, `x` is the positive root of
/// `slice x^2 + (latency - slice - (channels - 1) segment) x - latency`;
/// bandwidth-bound, every channel always sends and `x` is `channels`. One
/// channel: 1.
fn sharing_while_sending(latency: f64, segment: f64, slice: f64, channels: f64) -> f64 {
    if channels <= 1.0 || slice <= 0.0 {
        return channels.max(1.0);
    }
    let b = latency - slice - (channels - 1.0) * segment;
    let root = (b * b + 4.0 * slice * latency).sqrt();
    // The two forms of the root, each where it does not cancel.
    let x = if b >= 0.0 { 2.0 * latency / (b + root) } else { (root - b) / (2.0 * slice) };
    let x = x.clamp(1.0, channels);
    if segment * x >= latency + slice * x {
        channels
    } else {
        x
    }
}

/// How many hops of `plan` each hop waits behind (none for a ring's: they
/// all send at once).
fn fill_depths(plan: &crate::workload::program::PipelinePlan) -> Vec<u32> {
    let mut depth = vec![0u32; plan.hops.len()];
    for h in 0..plan.waits.len() {
        depth[h] = plan.waits[h].iter().map(|&w| depth[w as usize] + 1).max().unwrap_or(0);
    }
    depth
}

/// Which collectives the scenario runs whole (`flow_mode.collectives:
/// pipelined`): pipelines in any design; all-to-alls where the design sprays,
/// since one stream then stands for every pair (`exchange`), where ECMP
/// would hash each pair's QPs apart.
pub fn whole_collectives(scenario: &Scenario) -> crate::workload::program::Whole {
    let pipelined = scenario.mode == Mode::Flow && scenario.flow_mode.collectives == CollectiveModel::Pipelined;
    crate::workload::program::Whole {
        pipelines: pipelined,
        all_to_all: pipelined && placement_of(scenario) != Placement::Hash,
    }
}

/// How the scenario's design places traffic.
pub fn placement_of(scenario: &Scenario) -> Placement {
    let switches_choose = matches!(
        scenario.switch.forwarding,
        Forwarding::Adaptive | Forwarding::Drill | Forwarding::Letflow | Forwarding::ArTomahawk | Forwarding::Conweave
    );
    let nic = scenario.transport.sprays();
    let orchestrated = scenario.nic.path_selection == crate::nic::PathSelection::Orchestrated
        || scenario.switch.forwarding == Forwarding::PathId;
    if nic || switches_choose || orchestrated {
        Placement::Spray { nic, avoid: switches_choose }
    } else {
        Placement::Hash
    }
}

fn reactions_of(scenario: &Scenario) -> Reactions {
    let detection = scenario.flow_mode.detection;
    let srv6 = scenario.switch.forwarding == Forwarding::Srv6;
    let transport = match &scenario.transport {
        TransportSpec::Rocev2(_) => None,
        TransportSpec::Mrc(c) => Some((detection.unwrap_or(c.reorder_window), Scope::AllLinks)),
        // Software load balancing has no probes (`software_lb`).
        TransportSpec::Spx(c) if c.plane_lb == crate::transport::spx::PlaneLb::SwLb => None,
        TransportSpec::Spx(c) => {
            // A plane is back once one probe gets through: with `detection`
            // set, a probe interval of the probing that takes that long.
            let interval = detection
                .map_or(c.probe_interval, |d| Time((d.0 as f64 / c.remote_failure_intervals()).round() as u64));
            Some((detection.unwrap_or(c.remote_failure_detection()), Scope::NicLinks { recovery: interval }))
        }
    };
    let mrc = matches!(scenario.transport, TransportSpec::Mrc(_));
    Reactions {
        control_plane: (!(srv6 && mrc)).then_some(scenario.switch.reconvergence_delay),
        transport: transport.or(detection.map(|d| (d, Scope::AllLinks))),
        nic_notice: scenario.nic.remap_delay,
    }
}

/// Refuses what the flow model cannot run, naming the field; returns the
/// settings it runs without (they shape queues and packets only).
fn refuse_unsupported(s: &Scenario) -> Result<Vec<&'static str>, ScenarioError> {
    let no = |field: &str, what: &str| -> Result<Vec<&'static str>, ScenarioError> {
        invalid(field, format!("{what} is not modelled by the flow model (mode: flow): run it in the packet model"))
    };
    if s.clustermapper.is_some() {
        return no("clustermapper", "Clustermapper's probing");
    }
    if s.nic.shift.is_some() {
        return no("nic.shift", "SHIFT's failover to a backup NIC");
    }
    if let Some(j) = s.jobs.iter().position(|j| j.checkpoint.is_some()) {
        return no(&format!("jobs[{j}].checkpoint"), "a job's restart from its checkpoint");
    }
    if s.nic.path_selection == crate::nic::PathSelection::Disjoint {
        return no("nic.path_selection", "disjoint (RePaC) path selection");
    }
    if s.nic.port_failover == crate::nic::PortFailover::Lacp {
        return no("nic.port_failover", "LACP's move of a QP to its NIC's other port");
    }
    let t = &s.telemetry;
    for (set, field) in [
        (t.pcap.is_some(), "telemetry.pcap"),
        (t.histograms.is_some(), "telemetry.histograms"),
        (t.imbalance.is_some(), "telemetry.imbalance"),
        (t.ev_log, "telemetry.ev_log"),
        (t.ev_activity, "telemetry.ev_activity"),
    ] {
        if set {
            return no(field, "per-packet telemetry");
        }
    }
    if let Some(f) = s.traffic.iter().position(|t| matches!(t, workload::TrafficSpec::Flow(f) if f.ev_set.is_some())) {
        return no(&format!("traffic[{f}].ev_set"), "a hand-picked EV set");
    }
    let lossy = |f: &crate::faults::FaultSpec| {
        use crate::faults::FaultSpec::*;
        matches!(f, LossRate(_) | NicLoss(_) | EvLoss(_))
    };
    if let Some(i) = s.faults.iter().position(lossy) {
        return no(&format!("faults[{i}]"), "random packet loss");
    }
    if s.flow_mode.channel_phases == ChannelPhases::Independent && s.flow_mode.collectives != CollectiveModel::Pipelined
    {
        return invalid(
            "flow_mode.channel_phases",
            "independent is modelled for rings run whole: set flow_mode.collectives: pipelined (a ring run as \
             transfers starts its channels together)",
        );
    }
    let mut ignored = Vec::new();
    if let TransportSpec::Spx(c) = &s.transport {
        use crate::transport::spx::PlaneLb;
        match c.plane_lb {
            PlaneLb::SwLb if s.flow_mode.collectives == CollectiveModel::Pipelined && !s.jobs.is_empty() => {
                return no(
                    "transport.plane_lb",
                    "sw_lb with collectives run whole (flow_mode.collectives: pipelined; run them as transfers)",
                )
            }
            PlaneLb::SwLb => {}
            PlaneLb::GlobalCc | PlaneLb::Esr => ignored.push(
                "transport.plane_lb: one congestion context over the planes (rates are max-min fair; the NIC \
                 spreads over its planes as the PLB does)",
            ),
            PlaneLb::Plb => {}
        }
    }
    // Switches that choose among next hops spread a stream over them by
    // the capacity left (`placement_of`), whatever their own way of
    // choosing: said, as it is what the forwarding's name promises.
    let own_choices = match s.switch.forwarding {
        Forwarding::Drill => Some("switch.forwarding: drill's sampled queues (spread by remaining capacity)"),
        Forwarding::Letflow => Some("switch.forwarding: letflow's flowlets (spread by remaining capacity)"),
        Forwarding::ArTomahawk => Some("switch.forwarding: ar_tomahawk's port quality (spread by remaining capacity)"),
        Forwarding::Conweave => {
            Some("switch.forwarding: conweave's rerouting and reordering (spread by remaining capacity)")
        }
        Forwarding::Ecmp | Forwarding::Srv6 | Forwarding::Adaptive | Forwarding::PathId => None,
    };
    ignored.extend(own_choices);
    if s.switch.pfc.enabled {
        ignored.push("switch.pfc: PFC pauses (no queues in the flow model)");
    }
    if s.switch.trimming.enabled {
        ignored.push("switch.trimming: packet trimming (no queues)");
    }
    if s.switch.ecn.enabled {
        ignored.push("switch.ecn: ECN marking and congestion control (rates are max-min fair)");
    }
    Ok(ignored)
}

/// Refuses SENDs where the responder posts no RECV (`recv_depth: 0`):
/// every SEND then meets an RNR NAK, which the flow model does not model
/// (the packet model retries `rnr_retry` times, or for ever).
fn refuse_sends_without_recvs(
    s: &Scenario,
    flows: &[FlowSpec],
    program: &workload::program::Program,
) -> Result<(), ScenarioError> {
    let TransportSpec::Rocev2(c) = &s.transport else { return Ok(()) };
    let sends = flows.iter().any(|f| f.verb == Verb::Send) || program.collectives.iter().any(|c| c.verb == Verb::Send);
    if c.recv_depth == 0 && sends {
        return invalid(
            "transport.recv_depth",
            "0: every SEND meets an RNR NAK, which is not modelled by the flow model (mode: flow): run it in the \
             packet model",
        );
    }
    Ok(())
}

/// Each ring of one collective's pipelines (`runs`) counts the rings of
/// its stage sending from its busiest NIC, itself included: the channels
/// whose phases are independent of its own.
fn count_independent_channels(runs: &mut [PipelineRun]) {
    let mut on_nic: FastMap<(u32, NodeId), u32> = FastMap::default();
    let is_ring = |run: &PipelineRun| run.waits.is_empty();
    for run in runs.iter().filter(|r| is_ring(r)) {
        for &nic in &run.nics {
            *on_nic.entry((run.first_step, nic)).or_default() += 1;
        }
    }
    for run in runs.iter_mut().filter(|r| is_ring(r)) {
        run.independent_channels = run.nics.iter().map(|&nic| on_nic[&(run.first_step, nic)]).max().unwrap_or(1);
    }
}

/// Refuses the switches' own way of choosing among next hops where it
/// does not fit the fabric, as the packet model does, on every fabric the
/// packet model can route; a larger one, which the packet model refuses
/// whole, is run as it is (the flow model spreads by remaining capacity
/// whatever the switches' way of choosing, and says so).
fn check_choosers(scenario: &Scenario, topo: &Topology, node_ports: &[Vec<PortId>]) -> Result<(), ScenarioError> {
    let chooses = crate::sim::build::chooses(scenario.switch.forwarding);
    if !chooses || crate::switch::Routes::table_entries(topo) > crate::switch::MAX_TABLE_ENTRIES {
        return Ok(());
    }
    let routes = crate::switch::Routes::compute(topo, node_ports, |p| topo.port_node(p), |_| true, |_| true, None);
    crate::sim::build::check_choosers(scenario, topo, &routes)
}

/// Refuses a flow-model run that cannot fit, before anything grows with
/// the scenario but the graph.
fn check_memory(scenario: &Scenario, topo: &Topology, setup: &Setup<'_>) -> Result<(), ScenarioError> {
    let (budget, source) = setup.memory_budget(scenario);
    crate::sim::footprint::of_flow_model_build(scenario, topo)?.check(budget, source)
}

impl FluidSimulation {
    /// `check_recording` before the ideal times are known: over the
    /// expected length that a bound below the ideal end gives
    /// (`footprint::of_least_recording`), so that a check refuses what the
    /// run would.
    fn check_least_recording(&self, setup: &Setup<'_>) -> Result<(), ScenarioError> {
        use crate::sim::footprint;
        let (budget, source) = setup.memory_budget(&self.scenario);
        let flows = self.flows.iter().map(|f| &f.spec);
        let intra = &self.scenario.intra_host;
        let ideal_end = crate::sim::build::ideal_end_bound(flows, &self.jobs.program, &self.topo, intra);
        let qps = self.qps.len() as u64;
        let mut whole = footprint::of_flow_model(&self.scenario, &self.topo)?;
        whole.parts.extend(footprint::of_least_recording(&self.scenario, ideal_end, self.last_fault(), qps).parts);
        whole.check(budget, source)
    }

    /// `ideal_end` and the bound below it that a check weighs recording
    /// over (`ideal_end_bound`).
    #[cfg(test)]
    pub(crate) fn ideal_end_and_its_bound(&self) -> (Time, Time) {
        let flows = self.flows.iter().map(|f| &f.spec);
        let intra = &self.scenario.intra_host;
        (self.ideal_end(), crate::sim::build::ideal_end_bound(flows, &self.jobs.program, &self.topo, intra))
    }

    /// Refuses a run whose time series would not fit over its expected
    /// length (as the packet model: twice the ideal end after the last
    /// fault), and bounds the rows of one that lasts longer: it stops
    /// sampling where the memory ends (`StopReason::MemoryLimit`).
    fn check_recording(&mut self, setup: &Setup<'_>) -> Result<(), ScenarioError> {
        use crate::sim::footprint;
        let (budget, source) = setup.memory_budget(&self.scenario);
        let expected_end = footprint::expected_end(&self.scenario, self.ideal_end(), self.last_fault(), self.end);
        let built = footprint::of_flow_model(&self.scenario, &self.topo)?;
        let mut whole = built.clone();
        whole.parts.extend(footprint::of_recording(&self.scenario, expected_end, self.qps.len() as u64).parts);
        whole.check(budget, source)?;
        if let Some(budget) = budget {
            self.sample_rows = budget.saturating_sub(built.total()) / footprint::SAMPLE_ROW;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::sharing_while_sending;

    /// The sharing is the fixed point it is defined by: a channel sending
    /// for `segment x` of a step of `max(segment x, latency + slice x)`
    /// shares with `1 + (channels - 1)` times that fraction; one channel
    /// shares with none, a bandwidth-bound ring with every channel, and
    /// latency makes overlap rarer.
    #[test]
    fn channels_share_as_often_as_the_others_happen_to_send() {
        for channels in [2.0, 3.0, 4.0, 16.0] {
            for latency in [0.0, 0.1, 1.0, 6.5, 100.0] {
                for (segment, slice) in [(1.0, 1.0), (1.3, 1.3), (4.0, 1.0), (1.0, 0.25)] {
                    let x = sharing_while_sending(latency, segment, slice, channels);
                    assert!((1.0..=channels).contains(&x), "{x}");
                    let step = (segment * x).max(latency + slice * x);
                    let fixed = 1.0 + (channels - 1.0) * (segment * x / step).min(1.0);
                    assert!(
                        (x - fixed).abs() < 1e-9 * channels,
                        "{channels} {latency} {segment} {slice}: {x} vs {fixed}"
                    );
                }
            }
        }
        assert_eq!(sharing_while_sending(6.5, 1.3, 1.3, 1.0), 1.0);
        assert_eq!(sharing_while_sending(0.0, 1.0, 1.0, 2.0), 2.0);
        // Two channels, 1 us a segment, 5 us of latency: x^2 + 3x - 5 = 0.
        assert!((sharing_while_sending(5.0, 1.0, 1.0, 2.0) - (29f64.sqrt() - 3.0) / 2.0).abs() < 1e-12);
        assert!(sharing_while_sending(100.0, 1.0, 1.0, 2.0) < sharing_while_sending(1.0, 1.0, 1.0, 2.0));
    }
}
