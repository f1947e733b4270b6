//! The memory a scenario will take, estimated before it is built, so that
//! one that cannot fit is refused at once with the numbers, instead of
//! exhausting the machine minutes into the build or the run.
//!
//! The estimate counts what grows with the scenario's numbers (flows, QPs
//! and their EVs, collective transfers over every iteration, time-series
//! samples over the expected run, captured packets) at the size each item
//! takes in the simulator, heap included, and the fabric (links, ports)
//! from the topology's spec before the graph is built. It errs high: a
//! collective is counted at its transfer bound.

use std::mem::size_of;

use crate::error::{invalid, ScenarioError};
use crate::net::Port;
use crate::nic::{PortScheduler, Qp};
use crate::scenario::Scenario;
use crate::switch::Routes;
use crate::topology::{NodeRole, Topology};
use crate::transport::TransportSpec;
use crate::units::{Rate, Time};
use crate::workload::program::{group_shape, Transfer};
use crate::workload::{racks, FlowSpec, TrafficSpec};

/// Bytes of the things that grow, by name: (what, how many, bytes).
#[derive(Clone, Debug, Default)]
pub struct Footprint {
    pub parts: Vec<(&'static str, u64, u64)>,
    /// Copies of the model the run builds: one per thread (`threads`), each
    /// side of a run on two threads being built whole.
    pub copies: u64,
}

/// A heap allocation's bookkeeping beyond the bytes asked for.
const ALLOC_OVERHEAD: u64 = 16;
/// One time-series row: a time, two strings (with their heap) and a value
/// in the core, then its buffers in Python and the frame. The peak RSS of
/// `fabricsim run` grows by 214 B a row in the packet model and 225 B in
/// the flow model (one host sampled every 10ns for 1 and 4 ms, 200,000 to
/// 800,000 rows; 2026-11-29; 1.04 and 1.09 KB while rows crossed as JSON).
pub(crate) const SAMPLE_ROW: u64 = 240;
/// A transfer's state in the run besides its record: its connection,
/// dependents, counters and times (`sim::jobs::Jobs`), the intra-host
/// due time among them.
const TRANSFER_STATE: u64 = 8 + 8 + 4 + 4 + 3 * 16 + 8;
/// A flow's records besides its spec: the flow, its connection's QP list
/// and its message, and its row of the flows table as it crosses into
/// Python (about 300 B: the peak RSS of `fabricsim run` grows by 1.6 KB
/// per one-QP RoCE flow with its QP, from 50,000 to 200,000 flows of
/// `uniform_random`; 4.6 KB while tables crossed as JSON; 2026-11-29).
const FLOW_STATE: u64 = 64 + 24 + ALLOC_OVERHEAD + 16 + 300;
/// A phase of a job's iteration: its record and name, its state in the
/// run, its share of the steps table.
const PHASE: u64 = 96 + 24 + ALLOC_OVERHEAD + 64 + 80;
/// A link in the graph and its adjacency entries (with a node's share).
const LINK: u64 = 24 + 2 * 8 + 40;
/// A port's row of the ports table as it crosses into Python: the peak RSS
/// grows by 0.98 KB per port all told in the packet model and 0.44 KB in
/// the flow model (one RoCE flow on 1,024 and 4,096 planes; 3.7 and 1.3 KB
/// while tables crossed as JSON; 2026-11-29).
const PORT_REPORT: u64 = 700;
const FLOW_PORT_REPORT: u64 = 400;

impl Footprint {
    pub fn total(&self) -> u64 {
        let one = self.parts.iter().fold(0u64, |sum, &(_, _, bytes)| sum.saturating_add(bytes));
        one.saturating_mul(self.copies.max(1))
    }

    fn add(&mut self, what: &'static str, count: u64, each: u64) {
        if count > 0 {
            self.parts.push((what, count, count.saturating_mul(each)));
        }
    }

    /// Refuses the scenario when the estimate exceeds `budget` bytes.
    pub fn check(&self, budget: Option<u64>, source: &str) -> Result<(), ScenarioError> {
        let Some(budget) = budget else { return Ok(()) };
        let total = self.total();
        if total <= budget {
            return Ok(());
        }
        let mut parts = self.parts.clone();
        parts.sort_by_key(|&(_, _, bytes)| std::cmp::Reverse(bytes));
        let biggest: Vec<String> = parts
            .iter()
            .take(3)
            .map(|(what, count, bytes)| format!("{count} {what}: {}", human_size(*bytes)))
            .collect();
        let copies = match self.copies {
            0 | 1 => String::new(),
            n => format!("; all {n} times, once per thread"),
        };
        invalid(
            "scenario",
            format!(
                "needs about {} of memory ({}{copies}), more than the {} {source}; make it smaller, or set \
                 limits.memory to run it anyway",
                human_size(total),
                biggest.join(", "),
                human_size(budget)
            ),
        )
    }
}

/// `bytes` in the largest binary unit it reaches, e.g. `1.50 GiB`.
fn human_size(bytes: u64) -> String {
    let (unit, scale) = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        .into_iter()
        .find(|&(_, scale)| bytes >= scale)
        .unwrap_or(("B", 1));
    if scale == 1 {
        return format!("{bytes} B");
    }
    format!("{:.2} {unit}", bytes as f64 / scale as f64)
}

/// What the fabric takes, counted from the topology's spec before it is
/// built: a link, its two ports and their rows of the ports table.
pub(super) fn of_fabric(scenario: &Scenario) -> Result<Footprint, ScenarioError> {
    let mut footprint = Footprint { copies: u64::from(scenario.threads), ..Footprint::default() };
    let links = scenario.topology.links()?;
    footprint.add("links", links, LINK);
    let port = (size_of::<Port>() + size_of::<PortScheduler>() + 64) as u64 + PORT_REPORT;
    footprint.add("ports", links.saturating_mul(2), port);
    Ok(footprint)
}

/// What a scenario's traffic and jobs count, before they are expanded.
struct Counts {
    flows: u64,
    qps: u64,
    /// The QPs of flows, each with a share of its flow's bytes.
    flow_qps: u64,
    /// Packets of the flows' messages.
    packets: u64,
    phases: u64,
    transfers: u64,
    /// Packets of collectives posted at once (MRC).
    posted: u64,
}

fn count_workload(scenario: &Scenario, topo: &Topology) -> Result<Counts, ScenarioError> {
    let nics = topo.nics();
    let n = nics.len() as u64;
    let default_qps = u64::from(scenario.transport.qps());
    let mtu = scenario.nic.mtu.0.max(1);
    let (mut flows, mut qps, mut packets) = (0u64, 0u64, 0u64);
    for spec in &scenario.traffic {
        let (count, per_flow, bytes) = match spec {
            TrafficSpec::Flow(f) => (1, f.qps, f.bytes),
            TrafficSpec::Permutation(p) => (n, p.qps, p.bytes),
            TrafficSpec::Incast(i) => {
                (i.senders.as_ref().map_or(u64::from(i.count.unwrap_or(0)), |s| s.len() as u64), i.qps, i.bytes)
            }
            TrafficSpec::AllToAll(a) => (n * n.saturating_sub(1), a.qps, a.bytes),
            TrafficSpec::UniformRandom(u) => (u64::from(u.flows), u.qps, u.bytes),
            TrafficSpec::RacksToRacks(r) => {
                let placement = racks(topo, &nics);
                let mut per_rack = std::collections::BTreeMap::<u32, u64>::new();
                for (rack, _) in placement {
                    *per_rack.entry(rack).or_default() += 1;
                }
                let largest = per_rack.values().copied().max().unwrap_or(0);
                ((r.src_racks.len() as u64).saturating_mul(largest), r.qps, r.bytes)
            }
            // Every NIC but the root of each of the two trees sends once.
            TrafficSpec::DoubleBinaryTree(t) => (2 * n.saturating_sub(1), t.qps, t.bytes),
        };
        flows = flows.saturating_add(count);
        packets = packets.saturating_add(count.saturating_mul(bytes.0.div_ceil(mtu)));
        qps = qps.saturating_add(count.saturating_mul(per_flow.map_or(default_qps, u64::from)));
    }
    let flow_qps = qps;
    let (mut transfers, mut phases, mut posted) = (0u64, 0u64, 0u64);
    let whole = crate::fluid::whole_collectives(scenario);
    let mut per_host = crate::engine::FastMap::<u32, u64>::default();
    for &nic in &nics {
        if let NodeRole::Nic { host, .. } = topo.node(nic).role {
            *per_host.entry(host).or_default() += 1;
        }
    }
    let gpus = per_host.values().copied().max().unwrap_or(1);
    for (j, job) in scenario.jobs.iter().enumerate() {
        let iterations = u64::from(job.iterations);
        phases = phases.saturating_add(iterations.saturating_mul(job.phases.len() as u64));
        let mut per_iteration = 0u64;
        for (p, phase) in job.phases.iter().enumerate() {
            let Some(c) = &phase.collective else { continue };
            let field = format!("jobs[{j}].phases[{p}].collective.group");
            let (count, size) = group_shape(job.ranks, c, &field)?;
            let (count, size) = (u64::from(count), u64::from(size));
            // A pipeline run whole keeps its hops, a few per rank and
            // channel; an all-to-all run whole, its ranks only.
            let bound = if whole.pipelines && c.runs_as_pipelines() {
                size.saturating_mul(c.pipeline_hops_per_rank(gpus) * u64::from(c.channels))
            } else if whole.all_to_all && c.is_plain_all_to_all() {
                0
            } else {
                c.transfer_bound(size)
            };
            per_iteration = per_iteration.saturating_add(bound.saturating_mul(count));
            // A connection per rank pair and channel, at most one per transfer.
            let pairs = c.pair_bound(size).saturating_mul(u64::from(c.channels));
            let connections = bound.min(pairs);
            let qps_each = c.qps.map_or(default_qps, u64::from);
            qps = qps.saturating_add(connections.saturating_mul(qps_each).saturating_mul(count));
            // MRC posts each transfer's packets whole: at most `credits`
            // slices per connection at once, and no more than it moves.
            let in_flight = connections.saturating_mul(u64::from(c.credits())).saturating_mul(c.slice().div_ceil(mtu));
            let moved = (c.moved_bound(size) / mtu).saturating_add(bound);
            posted = posted.saturating_add(in_flight.min(moved).saturating_mul(count));
        }
        transfers = transfers.saturating_add(per_iteration.saturating_mul(iterations));
    }
    Ok(Counts { flows, qps, flow_qps, packets, phases, transfers, posted })
}

/// What the scenario's routes, flows, QPs and jobs will take, counted
/// before any of them is expanded.
pub(super) fn of_workload(scenario: &Scenario, topo: &Topology) -> Result<Footprint, ScenarioError> {
    let mut footprint = Footprint::default();
    footprint.add("route entries", Routes::table_entries(topo), 8);
    let qp_bytes = qp_size(scenario, topo);
    let Counts { flows, qps, packets, phases, transfers, posted, .. } = count_workload(scenario, topo)?;
    footprint.add("flows", flows, size_of::<FlowSpec>() as u64 + FLOW_STATE);
    if scenario.transport.sprays() {
        // MRC posts a flow's whole message at its start: a slot and a
        // resend entry for every packet of it.
        footprint.add("posted MRC packets", packets, 28);
    }
    footprint.add("job phases", phases, PHASE);
    footprint.add("collective transfers", transfers, transfer_size(scenario));
    footprint.add("QPs", qps, qp_bytes);
    if scenario.transport.sprays() {
        footprint.add("posted MRC packets of collectives", posted, 28);
    }
    Ok(footprint)
}

/// A collective transfer's plan and run-time state, and its row of the
/// transfers table when asked for.
fn transfer_size(scenario: &Scenario) -> u64 {
    // A row of the transfers table into Python: the peak RSS of 161,280
    // rows is 57 MB above the same run without them, 353 B a row (2.83 KB
    // while tables crossed as JSON; 2026-11-29).
    let transfer_row = if scenario.telemetry.transfers { 400 } else { 0 };
    size_of::<Transfer>() as u64 + 2 * 4 + ALLOC_OVERHEAD + TRANSFER_STATE + transfer_row
}

/// What the flow model of a scenario takes: the fabric (a port's state, its
/// bundle and its row of the ports table), flows, QPs, a stream for every
/// QP of a flow, and for every collective transfer its plan, state and
/// stream (the stream's route crosses a few bundles per plane).
pub(crate) fn of_flow_model(scenario: &Scenario, topo: &Topology) -> Result<Footprint, ScenarioError> {
    let mut footprint = Footprint::default();
    let links = topo.links.len() as u64;
    footprint.add("links", links, LINK);
    // The flow model's ports table has five columns, not the packet
    // model's fifteen: `bench --case flow-mode` peaks at 1.43 GiB all told
    // with 4.2 million ports (5.65 GiB while tables crossed as JSON).
    footprint.add("ports", links * 2, 64 + FLOW_PORT_REPORT);
    let Counts { flows, qps, flow_qps, phases, transfers, .. } = count_workload(scenario, topo)?;
    // A QP's record, queue of messages and probe state, and a stream with
    // its route: the peak RSS of `fabricsim run --mode flow` grows by 68 B
    // a QP of a flow too small to give each QP a message, and by 737 B a
    // QP that has one (one flow of 0.2 to 8 million QPs; 2026-11-29), to
    // which a stream's start time has since added 8 B.
    const QP: u64 = 72;
    const STREAM: u64 = 680;
    footprint.add("flows", flows, size_of::<FlowSpec>() as u64 + FLOW_STATE);
    footprint.add("streams of flows", flow_qps, STREAM);
    footprint.add("job phases", phases, PHASE);
    footprint.add("collective transfers", transfers, transfer_size(scenario) + STREAM);
    footprint.add("QPs", qps, QP);
    Ok(footprint)
}

/// What the flow model's build holds at its peak: its own state, and the
/// packet model's routes, built for a while to check the switches'
/// choosers as it does (`fluid::check_choosers`), then freed.
pub(crate) fn of_flow_model_build(scenario: &Scenario, topo: &Topology) -> Result<Footprint, ScenarioError> {
    let mut footprint = of_flow_model(scenario, topo)?;
    let entries = Routes::table_entries(topo);
    if crate::sim::build::chooses(scenario.switch.forwarding) && entries <= crate::switch::MAX_TABLE_ENTRIES {
        footprint.add("route entries", entries, 8);
    }
    Ok(footprint)
}

/// How long a run is expected to last, for what its recording will take:
/// its duration, else twice its ideal end after its last fault, at most
/// its time limit `end`.
pub(crate) fn expected_end(scenario: &Scenario, ideal_end: Time, last_fault: Time, end: Time) -> Time {
    scenario.duration.unwrap_or((ideal_end + last_fault).times(2).min(end))
}

/// Whether the scenario records anything whose size grows with the run:
/// a time series or a capture.
pub(crate) fn records(scenario: &Scenario) -> bool {
    scenario.telemetry.sample_interval.is_some() || scenario.telemetry.pcap.is_some()
}

/// What recording takes at the least, known before a run is built: over
/// its expected length with `ideal_end_bound`, a bound below its ideal
/// end, for that end (the expected length only grows with it), for at
/// least `qps` QPs. What this refuses, the build would refuse too, so a
/// check (a sweep's of every point) refuses it before anything runs.
pub(crate) fn of_least_recording(scenario: &Scenario, ideal_end_bound: Time, last_fault: Time, qps: u64) -> Footprint {
    let end = scenario.run_end(ideal_end_bound, last_fault);
    of_recording(scenario, expected_end(scenario, ideal_end_bound, last_fault, end), qps)
}

/// What recording takes over a run that ends by `end`: samples and the
/// capture.
pub(crate) fn of_recording(scenario: &Scenario, end: Time, qps: u64) -> Footprint {
    let mut footprint = Footprint::default();
    let telemetry = &scenario.telemetry;
    if let Some(interval) = telemetry.sample_interval {
        let samples = end.0 / interval.0.max(1) + 1;
        let mut rows = 2 * telemetry.ports.len() as u64 + telemetry.hosts.len() as u64;
        if telemetry.ev_activity {
            // Two rows per EV a QP used in the interval: at most all of them.
            if let TransportSpec::Mrc(c) = &scenario.transport {
                rows = rows.saturating_add(2 * qps.saturating_mul(u64::from(c.evs + c.backup_evs)));
            }
        }
        footprint.add("time-series rows", samples.saturating_mul(rows), SAMPLE_ROW);
    }
    if let Some(pcap) = &telemetry.pcap {
        // Each captured frame: its record header and up to snaplen bytes.
        let frame = 16 + pcap.snaplen.0.min(scenario.nic.mtu.0 + 128);
        footprint.add("captured packets", pcap.max_packets, frame);
    }
    footprint
}

/// A QP's record and its transport's heap: MRC keeps a slot per EV and
/// two records per packet its window holds (at the fastest NIC).
fn qp_size(scenario: &Scenario, topo: &Topology) -> u64 {
    let own = size_of::<Qp>() as u64 + 2 * ALLOC_OVERHEAD;
    let TransportSpec::Mrc(c) = &scenario.transport else { return own };
    let mut nic_rate = vec![0u64; topo.nodes.len()];
    for link in &topo.links {
        for end in [link.a, link.b] {
            if topo.is_nic(end) {
                nic_rate[end.0 as usize] = nic_rate[end.0 as usize].saturating_add(link.rate.0);
            }
        }
    }
    let fastest = Rate(nic_rate.into_iter().max().unwrap_or(0));
    let mtu = scenario.nic.mtu.0.max(1);
    let packets = c.max_window(fastest, mtu) / mtu;
    // An active EV's slot and queue header take 64 B (the peak RSS grows by
    // 8.7 KB more per MRC QP than per RoCE QP at 128 + 32 EVs).
    own + (u64::from(c.evs) + u64::from(c.backup_evs)) * 64 + packets * 48
}
