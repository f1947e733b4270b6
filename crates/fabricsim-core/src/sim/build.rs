//! Instantiates a scenario: ports from links, switch buffers, routes, QPs
//! and flows, the fault schedule, and the first events.

use super::jobs::Jobs;
use super::recorder::Recorder;
use super::report::Samples;
use super::{footprint, Connection, Event, Flow, RunLimits, Setup, Simulation, Stack, SwitchState, Totals};
use crate::engine::{EventQueue, FastMap, Rng};
use crate::error::{invalid, once_each, ScenarioError};
use crate::faults::{self, FaultAction};
use crate::ids::{Arena, CollectiveId, ConnectionId, FlowId, JobId, QpId, TransferId};
use crate::metrics::{BandwidthHistograms, Facing, Imbalance, ImbalanceConfig, PortGroup};
use crate::net::capture::Capture;
use crate::net::Forwarding;
use crate::net::{headers, PacketPool, Port, PortId, SharedBuffer, MAX_PLANES};
use crate::nic::{repac, NicConfig, Orchestrator, PathSelection, PortScheduler, Qp};
use crate::scenario::Scenario;
use crate::switch::{
    conweave, path_id, AdaptiveRouting, Balancer, Conweave, Drill, Letflow, PathIdForwarding, Routes, Srv6, TomahawkAr,
};
use crate::topology::{LinkId, NodeId, NodeRole, Topology};
use crate::transport::{
    CustomTransport, DataHeaders, EvSet, Framing, PlaneLb, QpFactory, QpSetup, Transport, TransportSpec, Verb, TIMERS,
};
use crate::units::{Rate, Time};
use crate::workload::program::{self, PhaseRun, Program};
use crate::workload::{self, message_parts, split_evenly, FlowSpec};

/// Random-stream keys, one per kind of entity.
pub(super) const STREAM_PORT: u64 = 0x9027;

/// A scenario resolved against its topology. Everything that can be wrong
/// with a scenario that passed its own validation is found while planning,
/// before anything is instantiated: names of NICs, ports and switches, sizes
/// past what the route tables and uSIDs hold, placements that do not fit.
pub(super) struct Plan {
    topo: Topology,
    /// Each node's ports by index: a port's index on its node is the
    /// position of its link in the node's adjacency (a NIC's port number).
    node_ports: Vec<Vec<PortId>>,
    srv6: Option<Srv6>,
    flows: Vec<FlowSpec>,
    program: Program,
    faults: Vec<(Time, FaultAction)>,
    telemetry_ports: Vec<PortId>,
    telemetry_hosts: Vec<NodeId>,
    histogram_ports: Vec<PortId>,
    /// Per port, whether the pcap captures it.
    captured: Option<Vec<bool>>,
    /// Links on the MRC denylist (by index); empty when there is none.
    denied_links: Vec<bool>,
    /// The memory the fabric and the workload will take (`footprint`).
    footprint: footprint::Footprint,
    /// The routes with every link up, made when planning where switches
    /// choose among next hops (their fit is checked then).
    routes: Option<Routes>,
    /// The port groups of imbalance telemetry, when it is on.
    imbalance_groups: Option<Vec<PortGroup>>,
}

/// Plans `scenario`; `Ok(None)` when `setup`'s hook stopped it between
/// two of its stages.
pub(super) fn plan(scenario: &Scenario, setup: &mut Setup<'_>) -> Result<Option<Plan>, ScenarioError> {
    // Before anything grows with the scenario, refuse what cannot fit: the
    // fabric from its spec, then the workload from its counts.
    let (budget, source) = setup.memory_budget(scenario);
    let fabric = footprint::of_fabric(scenario)?;
    fabric.check(budget, source)?;
    let topo = scenario.topology.build()?;
    let seed = scenario.seed;
    let node_ports = topo.node_ports();
    let entries = Routes::table_entries(&topo);
    if entries > crate::switch::MAX_TABLE_ENTRIES {
        return invalid(
            "topology",
            format!(
                "{} NICs and {} switches are too many for packet-level simulation ({entries} route entries, at most \
                 {}); `fabricsim topo` sizes such a fabric, or set `topology.nics` to simulate part of it",
                topo.nics().len(),
                topo.nodes.len() - topo.nics().len(),
                crate::switch::MAX_TABLE_ENTRIES
            ),
        );
    }
    let mut whole = fabric;
    whole.parts.extend(footprint::of_workload(scenario, &topo)?.parts);
    if scenario.threads > 1 {
        super::partition::check(scenario, &topo)?;
    }
    whole.check(budget, source)?;
    if let Some(shift) = &scenario.nic.shift {
        check_backup_rails(&topo, shift.backup_rail_offset)?;
    }
    let port_node = |p: PortId| topo.port_node(p);
    let srv6 = match scenario.switch.forwarding {
        Forwarding::Ecmp
        | Forwarding::Adaptive
        | Forwarding::Drill
        | Forwarding::Letflow
        | Forwarding::PathId
        | Forwarding::ArTomahawk
        | Forwarding::Conweave => None,
        Forwarding::Srv6 => Some(Srv6::build(&topo, &node_ports, port_node)?),
    };
    check_nic_ports(scenario, &topo, &node_ports)?;
    if !setup.goes_on() {
        return Ok(None);
    }
    if topo.nics().is_empty() {
        return invalid("topology", "it has no NICs: nothing could send");
    }
    let Some((flows, program)) = expand_workload(scenario, &topo, &node_ports, setup)? else { return Ok(None) };
    let port = |text: &str, field: String| faults::resolve_port(&topo, &node_ports, text, &field);
    let faults = faults::expand(&scenario.faults, &topo, &node_ports, seed)?;
    let telemetry = &scenario.telemetry;
    let telemetry_ports = (telemetry.ports.iter().enumerate())
        .map(|(i, text)| port(text, format!("telemetry.ports[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    once_each("telemetry.ports", &telemetry_ports, |i| format!("'{}'", telemetry.ports[i]))?;
    let captured = match &telemetry.pcap {
        None => None,
        Some(pcap) => {
            let ports = (pcap.ports.iter().enumerate())
                .map(|(i, text)| port(text, format!("telemetry.pcap.ports[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            once_each("telemetry.pcap.ports", &ports, |i| format!("'{}'", pcap.ports[i]))?;
            let mut captured = vec![false; topo.links.len() * 2];
            for p in ports {
                captured[p.0 as usize] = true;
            }
            Some(captured)
        }
    };
    let nics = topo.nics();
    let histogram_ports = match &telemetry.histograms {
        None => Vec::new(),
        Some(h) => {
            let ports = (h.ports.iter().enumerate())
                .map(|(i, text)| port(text, format!("telemetry.histograms.ports[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            once_each("telemetry.histograms.ports", &ports, |i| format!("'{}'", h.ports[i]))?;
            ports
        }
    };
    let telemetry_hosts = (telemetry.hosts.iter().enumerate())
        .map(|(i, r)| r.resolve(&topo, &nics, &format!("telemetry.hosts[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    once_each("telemetry.hosts", &telemetry_hosts, |i| topo.name(telemetry_hosts[i]))?;
    let mut denied_links = Vec::new();
    for (i, text) in scenario.transport.denylist().iter().enumerate() {
        let denied = port(text, format!("transport.denylist[{i}]"))?;
        denied_links.resize(topo.links.len(), false);
        denied_links[denied.link().0 as usize] = true;
    }
    let imbalance_groups =
        (telemetry.imbalance.as_ref()).map(|cfg| imbalance_groups(cfg, &topo, &node_ports, port_node)).transpose()?;
    let Some(qps) = check_psn_space(&flows, &program, &topo, setup, scenario.nic.mtu.0)? else { return Ok(None) };
    if footprint::records(scenario) {
        let mut with_recording = whole.clone();
        let last_fault = faults.iter().map(|(at, _)| *at).max().unwrap_or(Time::ZERO);
        let ideal_end = ideal_end_bound(flows.iter(), &program, &topo, &scenario.intra_host);
        with_recording.parts.extend(footprint::of_least_recording(scenario, ideal_end, last_fault, qps).parts);
        with_recording.check(budget, source)?;
    }
    let routes = if chooses(scenario.switch.forwarding) {
        if !setup.goes_on() {
            return Ok(None);
        }
        let routes = Routes::compute(&topo, &node_ports, port_node, |_| true, |_| true, None);
        check_choosers(scenario, &topo, &routes)?;
        Some(routes)
    } else {
        None
    };
    Ok(Some(Plan {
        topo,
        node_ports,
        srv6,
        flows,
        program,
        faults,
        telemetry_ports,
        telemetry_hosts,
        histogram_ports,
        captured,
        denied_links,
        footprint: whole,
        routes,
        imbalance_groups,
    }))
}

/// The scenario's flows and jobs, expanded, every flow's ends and every
/// job's ranks able to reach each other; `Ok(None)` when `setup`'s hook
/// stopped it. Both models start from these.
pub(crate) fn expand_workload(
    scenario: &Scenario,
    topo: &Topology,
    node_ports: &[Vec<PortId>],
    setup: &mut Setup<'_>,
) -> Result<Option<(Vec<FlowSpec>, Program)>, ScenarioError> {
    let component = topo.components();
    let unreachable = |a: NodeId, b: NodeId| {
        (component[a.0 as usize] != component[b.0 as usize])
            .then(|| format!("{} and {} have no path between them", topo.name(a), topo.name(b)))
    };
    let flows = workload::expand(&scenario.traffic, topo, scenario.transport.qps(), scenario.seed)?;
    for (f, spec) in flows.iter().enumerate() {
        if node_ports[spec.src.0 as usize].is_empty() || node_ports[spec.dst.0 as usize].is_empty() {
            return invalid("traffic", format!("flow {f} uses a NIC without ports"));
        }
        if let Some(why) = unreachable(spec.src, spec.dst) {
            return invalid("traffic", format!("flow {f}: {why}"));
        }
    }
    if !setup.goes_on() {
        return Ok(None);
    }
    let whole = crate::fluid::whole_collectives(scenario);
    let program = program::expand(&scenario.jobs, topo, scenario.transport.qps(), scenario.seed, whole)?;
    for (j, job) in program.jobs.iter().enumerate() {
        let first = job.nics[0];
        if let Some(why) = job.nics.iter().find_map(|&nic| unreachable(first, nic)) {
            return invalid(format!("jobs[{j}]"), format!("its ranks cannot all reach each other: {why}"));
        }
    }
    if !scenario.transport.sends_and_reads() {
        if let Some((f, spec)) = flows.iter().enumerate().find(|(_, spec)| matches!(spec.verb, Verb::Send | Verb::Read))
        {
            return invalid("traffic", format!("flow {f}: op: {} {SENDS_NEED}", spec.verb.name()));
        }
        if let Some(run) = program.collectives.iter().find(|c| matches!(c.verb, Verb::Send | Verb::Read)) {
            let j = program.phases[run.phase].job.0;
            return invalid(format!("jobs[{j}]"), format!("a collective's rdma_op: {} {SENDS_NEED}", run.verb.name()));
        }
    }
    Ok(Some((flows, program)))
}

/// The connection of each collective transfer, opened by `connect(src,
/// dst, qps, channel)` the first time it is needed: one per (job, channel,
/// QP count, source NIC, destination NIC), as NCCL opens connections per
/// communicator and channel; none between GPUs of one host. Both models
/// open them in this order, so their QPs are numbered alike; a ring run
/// whole (`CollectiveRun::rings`) opens its hops' where its first step's
/// transfers would have. `None` when `setup`'s hook stopped it.
pub(crate) fn transfer_connections(
    program: &Program,
    topo: &Topology,
    setup: &mut Setup<'_>,
    mut connect: impl FnMut(NodeId, NodeId, u32, usize) -> ConnectionId,
) -> Option<Connections> {
    let mut by_key: FastMap<(JobId, u32, u32, NodeId, NodeId), ConnectionId> = FastMap::default();
    let mut opened = Connections { transfer: Arena::default(), pipeline_hops: Vec::new() };
    let mut asked = 0usize;
    for run in program.collectives.iter() {
        let job = program.phases[run.phase].job;
        let nics = &program.jobs[job].nics;
        let mut open = |src_rank: u32, dst_rank: u32, channel: u32| {
            let (src, dst) = (nics[src_rank as usize], nics[dst_rank as usize]);
            (!topo.same_host(src, dst)).then(|| {
                let key = (job, channel, run.qps, src, dst);
                *by_key.entry(key).or_insert_with(|| connect(src, dst, run.qps, channel as usize))
            })
        };
        for t in program.transfers[run.transfers].iter() {
            asked += 1;
            if asked.is_multiple_of(ASK_EVERY) && !setup.goes_on() {
                return None;
            }
            opened.transfer.push(open(t.src_rank, t.dst_rank, t.channel));
        }
        for pipeline in &run.pipelines {
            let before = asked;
            asked += pipeline.hops.len();
            if before / ASK_EVERY != asked / ASK_EVERY && !setup.goes_on() {
                return None;
            }
            opened
                .pipeline_hops
                .push(pipeline.hops.iter().map(|&(src, dst)| open(src, dst, pipeline.channel)).collect());
        }
    }
    Some(opened)
}

/// The connections `transfer_connections` opened: each transfer's, and each
/// hop's of every ring run whole (rings in collective order), none between
/// GPUs of one host.
pub(crate) struct Connections {
    pub transfer: Arena<TransferId, Option<ConnectionId>>,
    pub pipeline_hops: Vec<Vec<Option<ConnectionId>>>,
}

/// What the NICs' ports must be for the transport, in either model: a
/// spraying transport names a port in an EV's low bits, and Spectrum-X's
/// ways of spreading over planes need planes.
pub(crate) fn check_nic_ports(
    scenario: &Scenario,
    topo: &Topology,
    node_ports: &[Vec<PortId>],
) -> Result<(), ScenarioError> {
    if scenario.transport.sprays() {
        if let Some(nic) = topo.nics().into_iter().find(|n| node_ports[n.0 as usize].len() > MAX_PLANES) {
            return invalid(
                "topology",
                format!(
                    "{} has {} ports: a spraying transport names a NIC port (plane) in an EV's low 3 bits, so at \
                     most {MAX_PLANES}",
                    topo.name(nic),
                    node_ports[nic.0 as usize].len()
                ),
            );
        }
    }
    if let TransportSpec::Spx(c) = &scenario.transport {
        let planes = topo.nics().iter().map(|n| node_ports[n.0 as usize].len()).max().unwrap_or(0);
        if c.plane_lb != PlaneLb::Plb && planes < 2 {
            return invalid(
                "transport.plane_lb",
                format!(
                    "{}: a way of spreading over planes, and no NIC here has more than one port",
                    c.plane_lb.name()
                ),
            );
        }
    }
    Ok(())
}

/// Whether switches forwarding so choose among equal-cost next hops by
/// their own rule (ECMP hashes, SRv6 follows the packet's path).
pub(crate) fn chooses(forwarding: Forwarding) -> bool {
    match forwarding {
        Forwarding::Adaptive
        | Forwarding::Drill
        | Forwarding::Letflow
        | Forwarding::PathId
        | Forwarding::ArTomahawk
        | Forwarding::Conweave => true,
        Forwarding::Ecmp | Forwarding::Srv6 => false,
    }
}

/// Whether the switches' own way of choosing among next hops fits the
/// routes of the fabric with every link up: something to choose between,
/// DRILL's samples within a group, ConWeave's path choices per hop, PRO's
/// PathIDs. Asked by either model where the packet model's tables fit.
pub(crate) fn check_choosers(scenario: &Scenario, topo: &Topology, routes: &Routes) -> Result<(), ScenarioError> {
    let forwarding = scenario.switch.forwarding;
    if chooses(forwarding) && routes.widest_group() < 2 {
        let name = serde_json::to_value(forwarding).expect("a forwarding mode serializes");
        return invalid(
            "switch.forwarding",
            format!(
                "{}: no switch of this topology has two shortest-path next hops toward any NIC, so there is \
                 nothing to choose between",
                name.as_str().unwrap_or_default()
            ),
        );
    }
    let drill = &scenario.switch.drill;
    if forwarding == Forwarding::Drill && drill.samples as usize > routes.widest_group() {
        return invalid(
            "switch.drill.samples",
            format!(
                "{}: more than the {} next hops of this topology's widest group; DRILL samples among a group",
                drill.samples,
                routes.widest_group()
            ),
        );
    }
    if forwarding == Forwarding::Conweave && routes.widest_group() > conweave::PATH_CHOICES {
        return invalid(
            "switch.forwarding",
            format!(
                "conweave: a switch of this topology has {} next hops toward a NIC; a ConWeave path names one of at \
                 most {} per hop",
                routes.widest_group(),
                conweave::PATH_CHOICES
            ),
        );
    }
    if forwarding == Forwarding::PathId {
        let switches = topo.nodes.iter().enumerate().filter_map(|(n, node)| match node.role {
            NodeRole::Switch { tier, .. } => Some((NodeId(n as u32), tier)),
            NodeRole::Nic { .. } => None,
        });
        if let Some(why) = path_id::misfit(routes, switches, &topo.nics()) {
            return invalid("switch.forwarding", format!("path_id: {why}"));
        }
    }
    Ok(())
}

/// Refuses SHIFT where a host's backup rail would be the NIC itself: on a
/// host of `count` NICs, when `offset` is a multiple of `count`. Checked
/// when planning, so that `resolve` finds it before a run.
fn check_backup_rails(topo: &Topology, offset: u32) -> Result<(), ScenarioError> {
    let mut rails: FastMap<u32, u32> = FastMap::default();
    for nic in topo.nics() {
        if let NodeRole::Nic { host, .. } = topo.node(nic).role {
            *rails.entry(host).or_default() += 1;
        }
    }
    match rails.values().copied().filter(|&count| offset.is_multiple_of(count)).min() {
        Some(count) => invalid(
            "nic.shift.backup_rail_offset",
            format!(
                "{offset}: on a host of {count} NIC(s) that names the default NIC itself; SHIFT needs another NIC of \
                 the host as the backup (topology.nics_per_host)"
            ),
        ),
        None => Ok(()),
    }
}

/// How many items a build's loops create between two questions to the
/// caller's `keep_going` hook.
const ASK_EVERY: usize = 1 << 14;

/// Why a transport cannot carry a SEND or a READ.
const SENDS_NEED: &str =
    "needs transport.kind: rocev2 with its in-order responder (no direct_placement, ooo_window or \
                          mprdma_bitmap): a SEND's packets are matched to its RECV, a READ's responses are placed, \
                          in order";

pub(super) fn build(
    scenario: Scenario,
    custom: Option<CustomTransport>,
    setup: &mut Setup<'_>,
) -> Result<Option<Simulation>, ScenarioError> {
    let Some(plan) = plan(&scenario, setup)? else { return Ok(None) };
    let Plan {
        topo,
        node_ports,
        srv6,
        program,
        faults,
        telemetry_ports,
        telemetry_hosts,
        histogram_ports,
        denied_links,
        footprint,
        routes,
        imbalance_groups,
        ..
    } = plan;
    let (flow_specs, captured) = (plan.flows, plan.captured);
    let factory = custom.map_or_else(|| QpFactory::new(&scenario.transport), QpFactory::Custom);
    let seed = scenario.seed;

    let mut ports = Vec::with_capacity(topo.links.len() * 2);
    for link in &topo.links {
        for (from, to) in [(link.a, link.b), (link.b, link.a)] {
            let delay = link.delay + topo.node(to).latency;
            ports.push(Port::new(from, 0, link.rate, delay, topo.is_nic(to), topo.is_nic(from)));
        }
    }
    for list in &node_ports {
        for (i, p) in list.iter().enumerate() {
            ports[p.0 as usize].index = i as u16;
        }
    }
    let port_rng = (0..ports.len() as u64).map(|p| Rng::stream(seed, &[STREAM_PORT, p])).collect();

    let switches: Vec<Option<SwitchState>> = (0..topo.nodes.len() as u32)
        .map(|n| {
            (!topo.is_nic(NodeId(n))).then(|| SwitchState {
                buffer: SharedBuffer::new(scenario.switch.buffer.0),
                up: true,
                advertised: true,
                ecmp_seed: crate::switch::switch_seed(&scenario.switch.ecmp, seed, n),
            })
        })
        .collect();

    let mtu = scenario.nic.mtu.0 as u32;
    let full_wire = headers::data_wire(scenario.nic.ip, mtu, DataHeaders::most().bytes()) as u64;
    let headroom = ports
        .iter()
        .map(|p| match scenario.switch.pfc.headroom {
            Some(h) => h.0,
            // ConWeave: 2 x rate x delay + 2 MTU (protocols.md s4.2).
            None => ((2.0 * p.rate.bytes_in(p.delay)) as u64).saturating_add(2 * full_wire),
        })
        .collect();
    if !setup.goes_on() {
        return Ok(None);
    }
    let routes = routes
        .unwrap_or_else(|| Routes::compute(&topo, &node_ports, |p| ports[p.0 as usize].node, |_| true, |_| true, None));
    let drill = &scenario.switch.drill;
    let balancer = match scenario.switch.forwarding {
        Forwarding::Adaptive => Balancer::Adaptive(AdaptiveRouting::new(&scenario.switch.adaptive, ports.len(), seed)),
        Forwarding::Drill => Balancer::Drill(Drill::new(drill, routes.group_count(), seed)),
        Forwarding::Letflow => Balancer::Letflow(Letflow::new(&scenario.switch.letflow, seed)),
        Forwarding::Conweave => Balancer::Conweave(Box::new(Conweave::new(&scenario.switch.conweave, seed))),
        Forwarding::ArTomahawk => {
            Balancer::ArTomahawk(TomahawkAr::new(&scenario.switch.tomahawk_ar, ports.len(), seed))
        }
        Forwarding::PathId => {
            let fallback = AdaptiveRouting::new(&scenario.switch.adaptive, ports.len(), seed);
            Balancer::PathId(Box::new(PathIdForwarding::new(routes.clone(), fallback)))
        }
        Forwarding::Ecmp | Forwarding::Srv6 => Balancer::Hash,
    };
    let framing = Framing { ip: scenario.nic.ip, encap: if srv6.is_some() { headers::SRV6_OUTER } else { 0 } };

    let mut links = Links {
        qps: Arena::default(),
        connections: Arena::default(),
        seed,
        factory,
        framing,
        mtu: scenario.nic.mtu.0 as u32,
        keep_setups: program.jobs.iter().any(|j| j.checkpoint.is_some()) || scenario.nic.shift.is_some(),
        setups: Arena::default(),
        recv_depth: scenario.transport.recv_depth(),
    };
    let port_node = |p: PortId| ports[p.0 as usize].node;
    let switch_seed = |n: NodeId| switches[n.0 as usize].as_ref().map_or(0, |s| s.ecmp_seed);
    let is_access = |l: LinkId| topo.is_nic(topo.links[l.0 as usize].a);
    let fabric = repac::Fabric { routes: &routes, port_node: &port_node, seed: &switch_seed, is_access: &is_access };
    let mut disjoint = (scenario.nic.path_selection == PathSelection::Disjoint)
        .then(|| Disjoint { fabric, tally: repac::SearchTally::default() });
    let mut flows = Arena::<FlowId, Flow>::default();
    for (f, spec) in flow_specs.iter().enumerate() {
        if f % ASK_EVERY == ASK_EVERY - 1 && !setup.goes_on() {
            return Ok(None);
        }
        let conn = links.connect(
            &ports,
            &node_ports,
            srv6.as_ref(),
            disjoint.as_mut(),
            Ends { src: spec.src, dst: spec.dst, qps: spec.qps, offset: f, job: false },
        );
        if let Some(set) = &spec.ev_set {
            links.pin_evs(conn, set)?;
        }
        if let Some(rate) = spec.rate {
            let qps = &links.connections[conn].qps;
            let share = Rate((rate.0 / qps.len() as u64).max(1));
            for &q in qps {
                links.qps[q].rate_limit = Some(share);
            }
        }
        flows.push(Flow {
            src: spec.src,
            dst: spec.dst,
            bytes: spec.bytes,
            start: spec.start,
            conn,
            end: None,
            ideal: Time::ZERO,
            failed: false,
            verb: spec.verb,
            rate_limit: spec.rate,
        });
    }

    let connect = |src, dst, qps, offset| {
        let ends = Ends { src, dst, qps, offset, job: true };
        links.connect(&ports, &node_ports, srv6.as_ref(), disjoint.as_mut(), ends)
    };
    let Some(opened) = transfer_connections(&program, &topo, setup, connect) else { return Ok(None) };
    let transfer_conn = opened.transfer;
    let path_search = disjoint.map(|d| d.tally);
    links.pair_directions();
    let shift = match scenario.nic.shift {
        Some(cfg) => {
            let pairs = links.backup_qps(&ports, &node_ports, &topo, cfg.backup_rail_offset);
            Some(super::shift::Shift::new(cfg, &pairs, links.qps.len()))
        }
        None => None,
    };
    let orchestrator = (scenario.nic.path_selection == PathSelection::Orchestrated)
        .then(|| orchestrate(&links.qps, &ports, &routes, &topo, &scenario.nic, seed));
    let jobs = Jobs::new(program, transfer_conn, topo.nodes.len(), links.connections.len());

    let capture =
        scenario.telemetry.pcap.as_ref().zip(captured).map(|(pcap, captured)| {
            (Capture::new(pcap.snaplen.0.min(u32::MAX as u64) as u32, pcap.max_packets), captured)
        });

    let mut events = EventQueue::default();
    for (f, flow) in flows.enumerate() {
        events.schedule(flow.start, Event::FlowStart(f));
    }
    for (j, job) in jobs.program.jobs.enumerate() {
        events.schedule(job.start, Event::JobStart(j));
    }
    for (i, (at, _)) in faults.iter().enumerate() {
        events.schedule(*at, Event::Fault(i as u32));
    }
    let first_sample = scenario.telemetry.sample_interval.map(|_| Time::ZERO);
    if let Some(at) = first_sample {
        events.schedule(at, Event::Sample);
    }
    let imbalance = match (&scenario.telemetry.imbalance, imbalance_groups) {
        (Some(cfg), Some(groups)) => {
            events.schedule(cfg.queue_interval, Event::ImbalanceQueues);
            events.schedule(cfg.load_interval, Event::ImbalanceLoads);
            Some(Imbalance::new(groups, &ports))
        }
        _ => None,
    };

    let n_ports = ports.len();
    let n_nodes = topo.nodes.len();
    let mapper = scenario.clustermapper.as_ref().map(|cfg| {
        events.schedule(Time::ZERO, Event::MapperRound);
        super::clustermapper::Mapper::new(cfg.clone(), n_ports, n_nodes)
    });
    let qp_numbers =
        if capture.is_some() { number_qps(&links.qps, topo.nodes.len()) } else { (Vec::new(), Vec::new()) };
    let histograms = scenario.telemetry.histograms.as_ref().map(|h| {
        let named = |p: &PortId| {
            let port = &ports[p.0 as usize];
            (p.0 as usize, format!("{}:{}", topo.name(port.node), port.index), port.rate)
        };
        BandwidthHistograms::new(h.resolution, h.bands, n_ports, histogram_ports.iter().map(named).collect())
    });
    let telemetry = &scenario.telemetry;
    let recorder = Recorder::new(telemetry.ev_activity, telemetry.ev_log, capture, qp_numbers, histograms);
    let mut sim = Simulation {
        events,
        pool: if srv6.is_some() { PacketPool::source_routed() } else { PacketPool::default() },
        port_rng,
        switches,
        sched: vec![PortScheduler::default(); n_ports],
        nic_ports_up: vec![0; n_nodes],
        nic_rx_payload: vec![0; n_nodes],
        routes,
        control: super::control::ControlView::all_up(n_ports, n_nodes),
        balancer,
        orchestrator,
        stacks: stacks(&topo),
        shift,
        path_search,
        srv6,
        framing,
        work_left: flows.len() + jobs.program.jobs.len(),
        total_bytes: flows.iter().fold(jobs.total_bytes(), |sum, f| sum.saturating_add(f.bytes)),
        qps: links.qps,
        connections: links.connections,
        qp_factory: links.factory,
        qp_setups: links.setups,
        messages: Arena::default(),
        flows,
        actions: Vec::new(),
        jobs,
        faults,
        headroom,
        totals: Totals::default(),
        samples: Samples::new(telemetry_ports.len(), telemetry_hosts.len(), first_sample),
        telemetry_ports,
        telemetry_hosts,
        recorder,
        imbalance,
        ev_loss: Vec::new(),
        mapper,
        denied_links,
        // Set below, once the ideal times are known.
        limits: RunLimits { end: Time::MAX, events_per_instant: u64::MAX, sample_rows: u64::MAX },
        instant: (Time::MAX, 0),
        halt: None,
        conweave_signals: Vec::new(),
        conweave_released: Vec::new(),
        cut: None,
        fabric: None,
        absorbed: None,
        node_ports,
        port_up: ports.iter().map(|p| p.up).collect(),
        next_hops: Default::default(),
        ports,
        topo,
        scenario,
    };
    for nic in sim.topo.nics() {
        sim.note_ports_up(nic);
    }
    let mut pipelines = FastMap::default();
    for f in sim.flows.ids() {
        if f.0 as usize % ASK_EVERY == ASK_EVERY - 1 && !setup.goes_on() {
            return Ok(None);
        }
        sim.flows[f].ideal = sim.ideal_fct(f, &mut pipelines);
    }
    for c in sim.jobs.program.collectives.ids() {
        sim.jobs.collective_ideal[c] = sim.ideal_cct(c, &mut pipelines);
    }
    let (ideal_end, last_fault) = (sim.ideal_end(), sim.last_fault());
    sim.limits = sim.run_limits(ideal_end, last_fault);
    // What is recorded grows with the run's length: it must fit for a run
    // of the expected length, known only now, and a run that lasts longer
    // stops sampling where the memory ends (`StopReason::MemoryLimit`).
    let (budget, source) = setup.memory_budget(&sim.scenario);
    let expected_end = footprint::expected_end(&sim.scenario, ideal_end, last_fault, sim.limits.end);
    let recording = footprint::of_recording(&sim.scenario, expected_end, sim.qps.len() as u64);
    let mut whole = footprint.clone();
    whole.parts.extend(recording.parts);
    whole.check(budget, source)?;
    if let Some(budget) = budget {
        sim.limits.sample_rows = budget.saturating_sub(footprint.total()) / footprint::SAMPLE_ROW;
    }
    if sim.recorder.logs_evs() {
        sim.start_ev_log();
    }
    sim.apply_denylist();
    Ok(Some(sim))
}

/// The port groups of imbalance telemetry: per switch of each group's tier,
/// its ports toward the tier above or below.
fn imbalance_groups(
    cfg: &ImbalanceConfig,
    topo: &Topology,
    node_ports: &[Vec<PortId>],
    port_node: impl Fn(PortId) -> NodeId,
) -> Result<Vec<PortGroup>, ScenarioError> {
    let tier_of = |n: NodeId| match topo.node(n).role {
        NodeRole::Switch { tier, .. } => Some(tier),
        NodeRole::Nic { .. } => None,
    };
    let mut groups = Vec::new();
    for (i, g) in cfg.groups.iter().enumerate() {
        let facing = |p: &PortId| match (g.facing, tier_of(port_node(p.peer()))) {
            (Facing::Up, Some(t)) => t > g.tier,
            (Facing::Down, Some(t)) => t < g.tier,
            (Facing::Down, None) => true,
            (Facing::Up, None) => false,
        };
        let switches: Vec<Vec<PortId>> = (0..topo.nodes.len())
            .filter(|&n| tier_of(NodeId(n as u32)) == Some(g.tier))
            .map(|n| node_ports[n].iter().copied().filter(facing).collect::<Vec<_>>())
            .filter(|s| !s.is_empty())
            .collect();
        if switches.is_empty() {
            let facing = if g.facing == Facing::Up { "up" } else { "down" };
            return invalid(
                format!("telemetry.imbalance.groups[{i}]"),
                format!("no switch of tier {} has ports facing {facing}", g.tier),
            );
        }
        let name = format!("tier{}_{}", g.tier, if g.facing == Facing::Up { "up" } else { "down" });
        groups.push(PortGroup { name, switches });
    }
    Ok(groups)
}

/// PRO's path sets: each QP's, from its NIC port to its destination's ToR,
/// with the next hops its packets choose among at the source ToR and at the
/// aggregation switch after it (one where there is no choice).
fn orchestrate(
    qps: &Arena<QpId, Qp>,
    ports: &[Port],
    routes: &Routes,
    topo: &Topology,
    cfg: &NicConfig,
    seed: u64,
) -> Orchestrator {
    let mut orchestrator = Orchestrator::new(cfg.batch, seed);
    if !cfg.orchestration.inter_qp {
        orchestrator = orchestrator.without_inter_qp();
    }
    if !cfg.orchestration.destination_aware {
        orchestrator = orchestrator.packet_level();
    }
    let mut index = crate::engine::FastMap::default();
    let switch_after = |port: PortId| ports[port.peer().0 as usize].node;
    for (q, qp) in qps.enumerate() {
        let (tor, dst_tor) = (switch_after(qp.src_port), switch_after(qp.dst_port));
        let at_tor = routes.next_hops(tor, qp.dst);
        let aggregation = match at_tor.first().map(|&p| switch_after(p)) {
            Some(next) if matches!(topo.node(next).role, NodeRole::Switch { tier: 1, .. }) => {
                routes.next_hops(next, qp.dst).len()
            }
            _ => 1,
        };
        let key = (qp.src_port.0, if cfg.orchestration.destination_aware { dst_tor.0 } else { 0 });
        orchestrator.add_qp(q, key, at_tor.len().max(1) as u32, aggregation.max(1) as u32, &mut index);
    }
    orchestrator
}

/// A QP numbers its packets with 31-bit PSNs over its whole life (a
/// connection of a job carries every iteration): refuses a workload that
/// would post more on one QP, rather than let the numbers wrap. Counted
/// when planning, over the connections the build will open (a flow's own,
/// then `transfer_connections`'), so that a check finds it before any run.
/// Returns the QPs of those connections; `None` when `setup`'s hook
/// stopped it.
fn check_psn_space(
    flows: &[FlowSpec],
    program: &Program,
    topo: &Topology,
    setup: &mut Setup<'_>,
    mtu: u64,
) -> Result<Option<u64>, ScenarioError> {
    const PSNS: u64 = 1 << 31;
    // QPs per connection: the flows' first, by flow.
    let mut qps: Vec<u32> = flows.iter().map(|f| f.qps).collect();
    let connect = |_, _, count, _| {
        qps.push(count);
        ConnectionId(qps.len() as u32 - 1)
    };
    let Some(opened) = transfer_connections(program, topo, setup, connect) else { return Ok(None) };
    let per_qp = |conn: usize, bytes: u64| bytes.div_ceil(u64::from(qps[conn].max(1))).div_ceil(mtu) + 1;
    let mut packets: Vec<u64> = flows.iter().enumerate().map(|(f, flow)| per_qp(f, flow.bytes)).collect();
    packets.resize(qps.len(), 0);
    for (t, conn) in opened.transfer.enumerate() {
        if let Some(conn) = *conn {
            let total = &mut packets[conn.0 as usize];
            *total = total.saturating_add(per_qp(conn.0 as usize, program.transfers[t].bytes));
        }
    }
    match packets.iter().position(|&p| p > PSNS) {
        Some(c) => invalid(
            if c < flows.len() { "traffic" } else { "jobs" },
            format!(
                "a connection would post {} packets on each of its QPs over the run, more than the 2^31 PSNs a QP \
                 numbers; use more QPs, a larger nic.mtu, or fewer iterations",
                packets[c]
            ),
        ),
        None => Ok(Some(qps.iter().map(|&q| u64::from(q)).sum())),
    }
}

/// A bound below the workload's ideal end, known before anything is
/// built: the latest a flow (`flows`) or a job ends if every NIC's bytes
/// left over every port of the NIC at once, each as fast as the fastest (a
/// job's: its phases' longest path, each phase its compute time or its
/// collectives' larger bound). A collective's bound is the larger of what
/// its busiest NIC sends to other hosts and its longest chain of dependent
/// transfers, each no faster than its bytes so sent plus the shortest link
/// of its source and of its destination (`intra`'s time for one within a
/// host). Both models' ideals take at least that: a collective's counts
/// its busiest rank's bytes and its chain of transfers, each over a path
/// that starts on a link of its source and ends on one of its
/// destination, the same link only where two NICs are linked directly.
pub(crate) fn ideal_end_bound<'a>(
    flows: impl Iterator<Item = &'a FlowSpec>,
    program: &Program,
    topo: &Topology,
    intra: &workload::job::IntraHostConfig,
) -> Time {
    // Per node: its ports, its fastest port's rate and its shortest link.
    let mut ports = vec![(0u64, 0u64, Time::MAX); topo.nodes.len()];
    // Whether any two NICs are linked directly.
    let mut nic_to_nic = false;
    for link in &topo.links {
        nic_to_nic |= topo.is_nic(link.a) && topo.is_nic(link.b);
        for end in [link.a, link.b] {
            let (count, fastest, shortest) = &mut ports[end.0 as usize];
            *count += 1;
            *fastest = (*fastest).max(link.rate.0);
            *shortest = (*shortest).min(link.delay);
        }
    }
    let sending = |nic: NodeId, bytes: u64| {
        let (count, fastest, _) = ports[nic.0 as usize];
        Rate(count.saturating_mul(fastest).max(1)).tx_time(bytes)
    };
    let shortest_link = |nic: NodeId| match ports[nic.0 as usize].2 {
        Time::MAX => Time::ZERO,
        delay => delay,
    };
    let least_delay = |src: NodeId, dst: NodeId| {
        if nic_to_nic {
            shortest_link(src).max(shortest_link(dst))
        } else {
            shortest_link(src) + shortest_link(dst)
        }
    };
    // Per collective and NIC: the bytes it sends to other hosts.
    let mut sent: FastMap<(CollectiveId, NodeId), u64> = FastMap::default();
    for transfer in program.transfers.iter() {
        let job = program.phases[program.collectives[transfer.collective].phase].job;
        let nics = &program.jobs[job].nics;
        let (src, dst) = (nics[transfer.src_rank as usize], nics[transfer.dst_rank as usize]);
        if !topo.same_host(src, dst) {
            let bytes = sent.entry((transfer.collective, src)).or_default();
            *bytes = bytes.saturating_add(transfer.bytes);
        }
    }
    let mut collective_bound: Arena<CollectiveId, Time> = vec![Time::ZERO; program.collectives.len()].into();
    for (&(c, nic), &bytes) in &sent {
        collective_bound[c] = collective_bound[c].max(sending(nic, bytes));
    }
    // Latest finish of a chain ending with each transfer of a collective.
    let mut chain_end = Vec::new();
    for c in program.collectives.ids() {
        let run = &program.collectives[c];
        let nics = &program.jobs[program.phases[run.phase].job].nics;
        chain_end.clear();
        for t in run.transfers.iter() {
            let transfer = &program.transfers[t];
            let (src, dst) = (nics[transfer.src_rank as usize], nics[transfer.dst_rank as usize]);
            let time = if topo.same_host(src, dst) {
                intra.alone(transfer.bytes)
            } else {
                least_delay(src, dst) + sending(src, transfer.bytes)
            };
            // Dependencies come earlier in the list, within the collective.
            let ready = transfer.deps.iter().map(|&d| chain_end[run.transfers.offset(d)]).max().unwrap_or(Time::ZERO);
            chain_end.push(ready + time);
        }
        let longest = chain_end.iter().copied().max().unwrap_or(Time::ZERO);
        collective_bound[c] = collective_bound[c].max(longest);
    }
    let flows = flows.map(|f| f.start + sending(f.src, f.bytes));
    let jobs = program.jobs.ids().map(|j| {
        let own = |phase: &PhaseRun| {
            phase
                .compute
                .unwrap_or_else(|| phase.collectives.iter().map(|&c| collective_bound[c]).max().unwrap_or_default())
        };
        program.jobs[j].start + program.longest_path(j, own)
    });
    flows.chain(jobs).max().unwrap_or(Time::ZERO)
}

/// Each QP's number at its requester and its responder: every NIC numbers
/// its QPs from 2 up in the order they are created (0 and 1 are
/// InfiniBand's management QPs).
/// Also returns the number each NIC gives its next QP.
fn number_qps(qps: &Arena<QpId, Qp>, nodes: usize) -> (Vec<[u32; 2]>, Vec<u32>) {
    let mut next = vec![2u32; nodes];
    let mut take = |node: NodeId| {
        let n = next[node.0 as usize];
        next[node.0 as usize] += 1;
        n
    };
    let numbers = qps.iter().map(|qp| [take(qp.src), take(qp.dst)]).collect();
    (numbers, next)
}

/// The two NICs of a connection, its QP count, the port its first QP
/// takes, and whether a job (else a flow) opens it.
struct Ends {
    src: NodeId,
    dst: NodeId,
    qps: u32,
    offset: usize,
    job: bool,
}

/// Creates QPs and connections.
struct Links {
    qps: Arena<QpId, Qp>,
    connections: Arena<ConnectionId, Connection>,
    seed: u64,
    factory: QpFactory,
    framing: Framing,
    mtu: u32,
    /// Each QP's setup, kept when a job may restart and open its QPs again.
    keep_setups: bool,
    setups: Arena<QpId, QpSetup>,
    /// RECVs each connection's QPs start with.
    recv_depth: u64,
}

impl Links {
    /// Pairs each QP with one of the other direction between the same two
    /// NICs (`Qp::reverse`): the k-th connection from A to B with the k-th
    /// from B to A, QP by QP, as a bidirectional RC connection would be,
    /// wrapping around where one direction has fewer.
    fn pair_directions(&mut self) {
        let mut by_ends: FastMap<(NodeId, NodeId), Vec<ConnectionId>> = FastMap::default();
        for c in self.connections.ids() {
            let first = self.connections[c].qps[0];
            by_ends.entry((self.qps[first].src, self.qps[first].dst)).or_default().push(c);
        }
        for (&(a, b), forward) in &by_ends {
            let Some(backward) = by_ends.get(&(b, a)) else { continue };
            // Any QP of the other direction knows the same paths: where the
            // counts differ, the extra ones share.
            for (k, &f) in forward.iter().enumerate() {
                let r = &self.connections[backward[k % backward.len()]].qps;
                for (j, &x) in self.connections[f].qps.iter().enumerate() {
                    self.qps[x].reverse = Some(r[j % r.len()]);
                }
            }
        }
    }

    /// Gives every QP of connection `conn` the hand-picked EVs `set`.
    fn pin_evs(&mut self, conn: ConnectionId, set: &EvSet) -> Result<(), ScenarioError> {
        for &q in &self.connections[conn].qps {
            if !self.qps[q].transport.pin_evs(set) {
                return invalid("traffic", "a flow's ev_set pins MRC EVs: set transport.kind: mrc");
            }
        }
        Ok(())
    }

    /// A connection of `qps` QPs from `src` to `dst`. QP k uses NIC port
    /// (offset + k) mod ports, spreading connections over the planes; the
    /// responder uses the port of the same index (the same plane). Each QP
    /// draws its UDP source port, the ECMP entropy, from its own stream as
    /// Linux folds QPNs into 0xC000-0xFFFF (protocols.md s2.1); under
    /// `disjoint`, the first draw whose path is disjoint from the
    /// connection's other QPs' (RePaC).
    fn connect(
        &mut self,
        ports: &[Port],
        node_ports: &[Vec<PortId>],
        srv6: Option<&Srv6>,
        mut disjoint: Option<&mut Disjoint>,
        ends: Ends,
    ) -> ConnectionId {
        let Ends { src, dst, qps: count, offset, job } = ends;
        let (src_ports, dst_ports) = (&node_ports[src.0 as usize], &node_ports[dst.0 as usize]);
        let mut ids = Vec::with_capacity(count as usize);
        let mut chosen = repac::Chosen::default();
        let per_access = repac::per_access(count, src_ports.len(), dst_ports.len());
        let mut found = 0;
        for k in 0..count as usize {
            let port_index = (offset + k) % src_ports.len();
            let id = self.qps.next_id();
            let src_port = src_ports[port_index];
            let entropy = match disjoint.as_deref_mut() {
                None => QpSetup::entropy_of(self.seed, id),
                Some(d) => {
                    let candidates = repac::candidates(self.seed, id);
                    let (entropy, apart) =
                        d.fabric.pick(&mut chosen, (src_port, src, dst), per_access, candidates, &mut d.tally);
                    found += u64::from(apart);
                    entropy
                }
            };
            let ends = QpEnds { src, dst, port_index, job };
            let q = self.new_qp(ports, node_ports, srv6, ends, entropy);
            // The responder's application posts its RECVs before any SEND
            // can come (SHIFT's backups get theirs moved over at a fallback).
            self.qps[q].transport.post_recvs(self.recv_depth);
            ids.push(q);
        }
        if let Some(d) = disjoint {
            d.tally.add_connection(u64::from(count), found);
        }
        self.connections.push(Connection { qps: ids })
    }

    /// A QP from `src` to `dst` on NIC port `port_index` (the responder on
    /// its port of the same index), with UDP source port `entropy`.
    fn new_qp(
        &mut self,
        ports: &[Port],
        node_ports: &[Vec<PortId>],
        srv6: Option<&Srv6>,
        ends: QpEnds,
        entropy: u16,
    ) -> QpId {
        let QpEnds { src, dst, port_index, job } = ends;
        let (src_ports, dst_ports) = (&node_ports[src.0 as usize], &node_ports[dst.0 as usize]);
        let nic_rate = Rate(src_ports.iter().map(|p| ports[p.0 as usize].rate.0).sum());
        let id = self.qps.next_id();
        let src_port = src_ports[port_index % src_ports.len()];
        let setup = QpSetup {
            qp: id,
            nics: (src, dst),
            seed: self.seed,
            mtu: self.mtu,
            framing: self.framing,
            entropy,
            requester_ports: src_ports.len(),
            responder_ports: dst_ports.len(),
            line_rate: ports[src_port.0 as usize].rate,
            nic_rate,
            paths: srv6.and_then(|s| s.path_space(src_ports[0], dst_ports[0])),
            job,
        };
        let transport = self.factory.build(&setup);
        let dst_port = dst_ports[port_index % dst_ports.len()];
        self.qps.push(Qp {
            sprays: transport.sprays(),
            transport,
            next_send: Time::ZERO,
            rate_limit: None,
            in_ready_lists: 0,
            src,
            dst,
            src_port,
            dst_port,
            src_home: src_port,
            dst_home: dst_port,
            entropy,
            reverse: None,
            timers_queued: [Time::MAX; TIMERS],
            messages: Default::default(),
            outstanding: 0,
            destroyed: false,
        });
        if self.keep_setups {
            self.setups.push(setup);
        }
        id
    }

    /// SHIFT's backup QPs (`check_backup_rails` found each one a backup NIC):
    /// for every QP so far, one between the NICs
    /// `offset` rails on at its two hosts, on the port of the same index.
    fn backup_qps(
        &mut self,
        ports: &[Port],
        node_ports: &[Vec<PortId>],
        topo: &Topology,
        offset: u32,
    ) -> Vec<(QpId, QpId)> {
        let mut by_rail: FastMap<(u32, u16), NodeId> = FastMap::default();
        let mut rails: FastMap<u32, u32> = FastMap::default();
        for nic in topo.nics() {
            if let NodeRole::Nic { host, rail } = topo.node(nic).role {
                by_rail.insert((host, rail), nic);
                *rails.entry(host).or_default() += 1;
            }
        }
        let backup = |nic: NodeId| -> NodeId {
            let NodeRole::Nic { host, rail } = topo.node(nic).role else { unreachable!("QPs join NICs") };
            let other = (u32::from(rail) + offset) % rails[&host];
            by_rail[&(host, other as u16)]
        };
        let mut pairs = Vec::with_capacity(self.qps.len());
        for q in self.qps.ids().collect::<Vec<_>>() {
            let (src, dst, port) = (self.qps[q].src, self.qps[q].dst, self.qps[q].src_port);
            let ends = QpEnds {
                src: backup(src),
                dst: backup(dst),
                port_index: ports[port.0 as usize].index as usize,
                job: self.setups[q].job,
            };
            let entropy = QpSetup::entropy_of(self.seed, self.qps.next_id());
            pairs.push((q, self.new_qp(ports, node_ports, None, ends, entropy)));
        }
        pairs
    }
}

/// The two NICs of a QP, the port index it takes at both, and whether a
/// job (else a flow) opens it.
struct QpEnds {
    src: NodeId,
    dst: NodeId,
    port_index: usize,
    job: bool,
}

/// The stacked ToR pairs: links between two ToRs, the first ToR primary.
fn stacks(topo: &Topology) -> Vec<Stack> {
    let tor = |n: NodeId| matches!(topo.node(n).role, NodeRole::Switch { tier: 0, .. });
    (topo.links.iter().enumerate())
        .filter(|(_, l)| tor(l.a) && tor(l.b))
        .map(|(i, l)| Stack {
            primary: l.a,
            secondary: l.b,
            link: PortId::of_link(LinkId(i as u32), 0),
            suspended: false,
        })
        .collect()
}

/// HPN's disjoint-path search over a run's connections.
struct Disjoint<'a> {
    fabric: repac::Fabric<'a>,
    tally: repac::SearchTally,
}

impl Simulation {
    /// The scenario's `limits`, or their defaults. The time limit is 100
    /// times the workload's ideal completion (no fabric this slow is worth
    /// waiting for), plus the last fault (a run only ends after its faults),
    /// plus twice the transport's give-up time (a QP that cannot progress
    /// reports its failure before the run is cut), plus 10 ms for recovery
    /// (reconvergence, probing). The livelock guard counts events at one
    /// instant: a start or a fault legitimately touches every port, QP,
    /// flow and transfer at once, a few times each.
    /// `ideal_end` is when the workload ends on an ideal fabric.
    fn run_limits(&self, ideal_end: Time, last_fault: Time) -> RunLimits {
        let limits = &self.scenario.limits;
        let end = self.scenario.run_end(ideal_end, last_fault);
        let entities = self.ports.len() + self.qps.len() + self.flows.len() + self.jobs.program.transfers.len();
        let events_per_instant = limits.events_per_instant.unwrap_or(1_000_000 + 16 * entities as u64);
        RunLimits { end, events_per_instant, sample_rows: u64::MAX }
    }

    /// When the last flow or job would finish on an ideal fabric.
    fn ideal_end(&self) -> Time {
        (self.flows.iter().map(|f| f.start + f.ideal))
            .chain(self.jobs.program.jobs.ids().map(|j| self.jobs.program.jobs[j].start + self.jobs.ideal_jct(j)))
            .max()
            .unwrap_or(Time::ZERO)
    }

    /// `ideal_end` and the bound below it that a check weighs recording
    /// over (`ideal_end_bound`), for a run of jobs alone.
    #[cfg(test)]
    pub(crate) fn ideal_end_and_its_bound(&self) -> (Time, Time) {
        let intra = &self.scenario.intra_host;
        (self.ideal_end(), ideal_end_bound(std::iter::empty(), &self.jobs.program, &self.topo, intra))
    }

    fn last_fault(&self) -> Time {
        self.faults.iter().map(|(at, _)| *at).max().unwrap_or(Time::ZERO)
    }

    /// Completion time of flow `f` alone on an idle fabric, its path
    /// following the first equal-cost next hop: exact for a flow of one QP
    /// whose packets all take that path (no spraying, a switch choosing per
    /// flow or flowlet), a store-and-forward pipeline (`pipeline_time`).
    /// Packets spread over paths (sprayed, adaptive, or several QPs) queue
    /// one behind another only where every path crosses the same port
    /// (`hop_widths`), and a stream over parallel planes takes its share
    /// of the packets on each: a bound no spreading beats. A flow paced
    /// below line rate takes no less, nor less than all but its last
    /// packet's wire bytes at that rate, then the last packet's
    /// serialization and latency at every hop. A READ's data leaves only
    /// once the reader's request has reached its sender
    /// (`read_request_trip`).
    fn ideal_fct(&self, f: FlowId, pipelines: &mut Pipelines) -> Time {
        let flow = &self.flows[f];
        self.ideal_message(flow.conn, flow.bytes, flow.verb, flow.dst, flow.rate_limit, pipelines)
    }

    /// `ideal_fct` of a message of `bytes` on connection `conn` to `dst`:
    /// a flow's, or a collective's transfer's, in the parts the NIC posts
    /// (`message_parts`).
    fn ideal_message(
        &self,
        conn: ConnectionId,
        bytes: u64,
        verb: Verb,
        dst: NodeId,
        rate_limit: Option<Rate>,
        pipelines: &mut Pipelines,
    ) -> Time {
        let mtu = self.scenario.nic.mtu.0;
        let (mut wire_total, mut packets, mut first_wire, mut full_wire, mut last_wire) = (0, 0, 0, 0, 0);
        let mut planes = std::collections::BTreeSet::new();
        let conn = &self.connections[conn].qps;
        for (&q, share) in conn.iter().zip(message_parts(bytes, conn.len())) {
            let qp = &self.qps[q];
            planes.insert(qp.src_port);
            let qp_packets = share.div_ceil(mtu).max(1);
            let addressed = qp.transport.addresses_every_packet();
            let wire = |payload: u64, first: bool, last: bool| {
                self.framing.data_wire(payload as u32, DataHeaders::of(verb, first, last, addressed)) as u64
            };
            let tail = wire(share - (qp_packets - 1) * mtu, qp_packets == 1, true);
            let full = wire(mtu, false, false);
            let first = if qp_packets == 1 { tail } else { wire(mtu, true, false) };
            wire_total += if qp_packets == 1 { tail } else { first + full * (qp_packets - 2) + tail };
            packets += qp_packets;
            first_wire = first_wire.max(first);
            full_wire = full_wire.max(full);
            last_wire = last_wire.max(tail);
        }
        let Some(&first) = conn.first() else { return Time::ZERO };
        let hops = self.path(self.qps[first].src_port, dst);
        let bottleneck = hops.iter().map(|p| self.ports[p.0 as usize].rate).min().expect("a path has a hop");
        let sprayed = self.qps[first].sprays;
        let parallel =
            if sprayed { self.node_ports[self.qps[first].src.0 as usize].len() } else { planes.len().max(1) };
        let rate = bottleneck.0 as f64 * parallel as f64;
        let per_plane = packets.div_ceil(parallel as u64).max(1);
        let stream = if conn.len() > 1 && bytes > 0 && per_plane <= FOLLOWED_PACKETS {
            // Several QPs' packets of several sizes, the NIC taking the QPs
            // in turn; a plane carries its share of them.
            Stream::Listed(self.interleaved_wire(conn, bytes, verb).into_iter().step_by(parallel).collect())
        } else {
            Stream::Runs(match per_plane {
                1 => Runs { first: first_wire, middle: 0, middles: 0, last: None },
                n => Runs { first: first_wire, middle: full_wire, middles: n - 2, last: Some(last_wire) },
            })
        };
        let one_path = self.scenario.switch.forwarding.keeps_a_lone_flow_on_one_path();
        let widths =
            if conn.len() == 1 && !sprayed && one_path { vec![1; hops.len()] } else { self.hop_widths(&hops, dst) };
        let path: Vec<Hop> = (hops.iter().zip(widths))
            .map(|(p, ports)| Hop { rate: self.ports[p.0 as usize].rate, delay: self.ports[p.0 as usize].delay, ports })
            .collect();
        let unpaced = *pipelines.entry((path, stream)).or_insert_with_key(|(path, stream)| pipeline_time(path, stream));
        let sent = match rate_limit {
            Some(limit) if (limit.0 as f64) < rate => {
                // The last packet leaves the pacer after the rest's time.
                let mut paced = Time::from_secs_f64((wire_total - last_wire) as f64 * 8.0 / limit.0 as f64);
                for p in &hops {
                    paced += self.ports[p.0 as usize].delay + self.ports[p.0 as usize].rate.tx_time(last_wire);
                }
                paced.max(unpaced)
            }
            _ => unpaced,
        };
        match verb {
            Verb::Read => self.read_request_trip(conn) + sent,
            _ => sent,
        }
    }

    /// What a READ's request takes to reach the end that sends the data, on
    /// the quickest of the connection's QPs: the reader sends it when the
    /// READ is posted, out of its own port, and no response leaves before
    /// it arrives (`transport::reads`).
    fn read_request_trip(&self, qps: &[QpId]) -> Time {
        let wire = headers::read_request_wire(self.framing.ip) + self.framing.encap;
        let trip = |qp: &Qp| {
            let hops = self.path(qp.dst_port, qp.src).into_iter().map(|p| &self.ports[p.0 as usize]);
            hops.fold(Time::ZERO, |t, port| t + port.delay + port.tx_time(wire))
        };
        qps.iter().map(|&q| trip(&self.qps[q])).min().unwrap_or(Time::ZERO)
    }

    /// The wire bytes of the packets of a message of `verb` and `bytes`
    /// split over `qps`, in the order a NIC taking the QPs in turn sends them.
    fn interleaved_wire(&self, qps: &[QpId], bytes: u64, verb: Verb) -> Vec<u64> {
        let mtu = self.scenario.nic.mtu.0;
        let mut left: Vec<(u64, bool, bool)> = (qps.iter().zip(split_evenly(bytes, qps.len() as u64)))
            .map(|(&q, share)| (share, true, self.qps[q].transport.addresses_every_packet()))
            .collect();
        let mut sizes = Vec::new();
        while left.iter().any(|&(share, _, _)| share > 0) {
            for (share, first, addressed) in left.iter_mut().filter(|(share, _, _)| *share > 0) {
                let payload = (*share).min(mtu);
                let carried = DataHeaders::of(verb, *first, payload == *share, *addressed);
                sizes.push(self.framing.data_wire(payload as u32, carried) as u64);
                (*share, *first) = (*share - payload, false);
            }
        }
        sizes
    }

    /// How many ports the equal-cost paths from `hops`' first port to
    /// `dst` cross at each of its hops: one where packets spread over those
    /// paths still queue one behind another (the first port, and the last
    /// hops, where the paths meet again). Equal-cost paths are equally
    /// long, so the paths' ports at a step are those of the nodes they
    /// reach at the step before.
    fn hop_widths(&self, hops: &[PortId], dst: NodeId) -> Vec<u32> {
        let mut widths = vec![1];
        let mut reached = vec![self.ports[hops[0].peer().0 as usize].node];
        for _ in &hops[1..] {
            let ports: Vec<PortId> = (reached.iter().filter(|&&v| !self.topo.is_nic(v)))
                .flat_map(|&v| self.routes.next_hops(v, dst).iter().copied())
                .collect();
            widths.push(ports.len().max(1) as u32);
            reached = ports.iter().map(|q| self.ports[q.peer().0 as usize].node).collect();
            reached.sort_unstable();
            reached.dedup();
        }
        widths
    }

    /// The ports a packet leaving by `from` crosses to reach `dst`, taking
    /// the first equal-cost next hop at every switch.
    fn path(&self, from: PortId, dst: NodeId) -> Vec<PortId> {
        let mut port = from;
        let mut hops = Vec::new();
        for _ in 0..64 {
            hops.push(port);
            let next = self.ports[port.peer().0 as usize].node;
            if next == dst || self.topo.is_nic(next) {
                break;
            }
            match self.routes.next_hops(next, dst).first() {
                Some(&p) => port = p,
                None => break,
            }
        }
        hops
    }

    /// Completion time of collective `c` on an ideal fabric with no
    /// contention, the larger of two bounds. The latency bound is the
    /// longest chain of dependent transfers, each taking what the same
    /// message takes alone as a flow on its connection (`ideal_message`:
    /// its packets over the connection's ports and paths, side by side on
    /// several planes), or over the intra-host link its bytes at the link's
    /// rate and its latency (`IntraHostConfig::alone`: the link carries a
    /// transfer whole, no packet headers): a rank forwards a slice only
    /// once all of it has arrived. A pipeline's fill (a tree's or a chain's
    /// first slice on its way down) is in this chain, once.
    /// The bandwidth bound is the time its busiest rank needs to send or
    /// receive its bytes: over the network at its NICs' payload rate (all
    /// ports, less header overhead) or over the intra-host link at that
    /// link's rate, whichever is longer (the two carry bytes at once), plus
    /// the shortest tail: the smallest packet's way less the one
    /// serialization those bytes already count; the network's READs send
    /// their bytes only once the first request has arrived
    /// (`read_request_trip`). Slices pipeline the latency
    /// under the bandwidth, so the ideal is the larger bound, not their
    /// sum: small collectives are latency-bound, large ones bandwidth-bound.
    fn ideal_cct(&self, c: CollectiveId, pipelines: &mut Pipelines) -> Time {
        let run = &self.jobs.program.collectives[c];
        if run.transfers.is_empty() {
            return Time::ZERO;
        }
        let job = &self.jobs.program.jobs[self.jobs.program.phases[run.phase].job];
        let mtu = self.scenario.nic.mtu.0;
        let transfers = &self.jobs.program.transfers[run.transfers];
        let conns = &self.jobs.transfer_conn[run.transfers];
        let intra = &self.scenario.intra_host;
        // Payload per wire byte of a full packet mid-message, as this fabric
        // carries it (with a RETH where every packet is addressed, with any
        // SRv6 outer header).
        let addressed = self.qps.iter().next().is_some_and(|qp| qp.transport.addresses_every_packet());
        let full = self.framing.data_wire(mtu as u32, DataHeaders::of(run.verb, false, false, addressed));
        let efficiency = mtu as f64 / full as f64;
        // Per connection and size: the message alone, its tail, and what a
        // READ's request takes before its data can leave.
        let mut alone: FastMap<(ConnectionId, u64), (Time, Time, Time)> = FastMap::default();
        // The earliest the network's first data can leave.
        let mut first_data = Time::MAX;
        // Latest finish of a chain ending with each transfer.
        let mut chain_end = vec![Time::ZERO; transfers.len()];
        // Shortest tails of the network's transfers and the intra-host ones.
        let mut min_tail = [Time::MAX; 2];
        // Per rank: (network sent, network received, intra sent, intra received).
        let mut load: std::collections::BTreeMap<u32, [u64; 4]> = Default::default();
        for (k, (transfer, &conn)) in transfers.iter().zip(conns).enumerate() {
            let side = if conn.is_none() { 2 } else { 0 };
            load.entry(transfer.src_rank).or_default()[side] += transfer.bytes;
            load.entry(transfer.dst_rank).or_default()[side + 1] += transfer.bytes;
            let (time, tail) = match conn {
                None => (intra.alone(transfer.bytes), intra.latency),
                Some(conn) => {
                    let (time, tail, asked) = *alone.entry((conn, transfer.bytes)).or_insert_with(|| {
                        let dst = job.nics[transfer.dst_rank as usize];
                        let time = self.ideal_message(conn, transfer.bytes, run.verb, dst, None, pipelines);
                        let tail = self.smallest_packet_tail(conn, transfer.bytes, run.verb, dst);
                        let qps = &self.connections[conn].qps;
                        (time, tail, if run.verb == Verb::Read { self.read_request_trip(qps) } else { Time::ZERO })
                    });
                    first_data = first_data.min(asked);
                    (time, tail)
                }
            };
            let side = usize::from(conn.is_none());
            min_tail[side] = min_tail[side].min(tail);
            // Dependencies come earlier in the list, within this collective.
            let ready = transfer.deps.iter().map(|&d| chain_end[run.transfers.offset(d)]).max().unwrap_or(Time::ZERO);
            chain_end[k] = ready + time;
        }
        let latency = chain_end.into_iter().max().unwrap_or(Time::ZERO);
        let tail = |side: usize| if min_tail[side] == Time::MAX { Time::ZERO } else { min_tail[side] };
        let first_data = if first_data == Time::MAX { Time::ZERO } else { first_data };
        let busiest = load
            .iter()
            .map(|(&rank, l)| {
                let nic = job.nics[rank as usize];
                let nic_rate: u64 =
                    self.node_ports[nic.0 as usize].iter().map(|p| self.ports[p.0 as usize].rate.0).sum();
                // The NIC's ports and the intra-host link carry their bytes at once.
                let network = l[0].max(l[1]) as f64 * 8.0 / (nic_rate as f64 * efficiency);
                let intra = l[2].max(l[3]) as f64 * 8.0 / intra.rate.0 as f64;
                (first_data + Time::from_secs_f64(network) + tail(0)).max(Time::from_secs_f64(intra) + tail(1))
            })
            .max()
            .unwrap_or(Time::ZERO);
        latency.max(busiest)
    }

    /// The way of the smallest packet of a message of `bytes` on `conn` to
    /// `dst`, less its longest serialization: what a sender's last packet
    /// still takes after leaving its NIC, or a receiver's first before
    /// reaching it (the last of the smallest share, the QPs splitting the
    /// message evenly).
    fn smallest_packet_tail(&self, conn: ConnectionId, bytes: u64, verb: Verb, dst: NodeId) -> Time {
        let mtu = self.scenario.nic.mtu.0;
        let qps = &self.connections[conn].qps;
        let qp = &self.qps[qps[0]];
        let share = bytes / qps.len() as u64;
        let packets = share.div_ceil(mtu).max(1);
        let carried = DataHeaders::of(verb, packets == 1, true, qp.transport.addresses_every_packet());
        let wire = self.framing.data_wire((share - (packets - 1) * mtu) as u32, carried);
        let path = self.path(qp.src_port, dst);
        let serializations = path.iter().map(|p| self.ports[p.0 as usize].tx_time(wire));
        let longest = serializations.clone().max().unwrap_or(Time::ZERO);
        let way = path.iter().map(|p| self.ports[p.0 as usize].delay).fold(Time::ZERO, |a, b| a + b);
        serializations.fold(way, |a, b| a + b) - longest
    }
}

/// The packets of a stream in the order they leave, as wire bytes.
#[derive(PartialEq, Eq, Hash)]
enum Stream {
    Runs(Runs),
    /// Every packet: a stream of several sizes (several QPs').
    Listed(Vec<u64>),
}

/// A stream of one QP: the first packet, `middles` alike, then the last,
/// if there is more than one (each with its headers, `DataHeaders`).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Runs {
    first: u64,
    middle: u64,
    middles: u64,
    last: Option<u64>,
}

/// Ideal pipelines already computed, by path and stream: flows of one size
/// on paths alike (a permutation's) share one.
type Pipelines = FastMap<(Vec<Hop>, Stream), Time>;

/// A hop of a stream's path, crossed over `ports` ports alike: with one,
/// each packet there waits for the one before it to leave.
#[derive(PartialEq, Eq, Hash)]
struct Hop {
    rate: Rate,
    delay: Time,
    ports: u32,
}

/// Streams of up to this many packets are followed packet by packet where
/// their paths part (`spread_pipeline_time`).
const FOLLOWED_PACKETS: u64 = 4096;

/// When the last packet of `stream`, every packet ready at time zero,
/// leaves the last of `path`'s hops, each storing a packet whole before
/// forwarding it, and a hop of several ports taking packets in turn (the
/// best any spreading does). Exact where every hop has one port, and for
/// streams of up to `FOLLOWED_PACKETS` packets. Longer streams over paths
/// that part are taken in order, no packet passing another, and no faster
/// than the narrowest hop carries them: a smaller last packet can overtake
/// larger ones where the paths part, so this errs long by at most that
/// packet's serialization at the hops after (under 0.2% of such a
/// stream's time).
fn pipeline_time(path: &[Hop], stream: &Stream) -> Time {
    let stream = match stream {
        Stream::Listed(sizes) => return spread_pipeline_time(path, sizes),
        Stream::Runs(runs) => runs,
    };
    let packets = stream.middles + 1 + u64::from(stream.last.is_some());
    if path.iter().all(|hop| hop.ports == 1) {
        in_order_pipeline_time(path, stream)
    } else if packets <= FOLLOWED_PACKETS {
        let mut sizes = vec![stream.first];
        sizes.extend(std::iter::repeat_n(stream.middle, stream.middles as usize));
        sizes.extend(stream.last);
        spread_pipeline_time(path, &sizes)
    } else {
        let bytes = stream.first + stream.middle * stream.middles + stream.last.unwrap_or(0);
        let delays = path.iter().fold(Time::ZERO, |a, hop| a + hop.delay);
        let narrowest = path
            .iter()
            .map(|hop| Rate(hop.rate.0.saturating_mul(u64::from(hop.ports))))
            .min()
            .expect("a path has a hop");
        in_order_pipeline_time(path, stream).max(narrowest.tx_time(bytes) + delays)
    }
}

/// `pipeline_time` packet by packet: each hop takes packets in the order
/// they reach it, each to the next of its ports in turn.
fn spread_pipeline_time(path: &[Hop], sizes: &[u64]) -> Time {
    let mut packets: Vec<(Time, u64)> = sizes.iter().map(|&bytes| (Time::ZERO, bytes)).collect();
    for hop in path {
        // Stable: packets ready together keep the stream's order.
        packets.sort_by_key(|&(ready, _)| ready);
        let ports = hop.ports.clamp(1, packets.len() as u32) as usize;
        let mut free = vec![Time::ZERO; ports];
        for (k, (ready, bytes)) in packets.iter_mut().enumerate() {
            let port = &mut free[k % ports];
            *port = (*port).max(*ready) + hop.rate.tx_time(*bytes);
            *ready = *port + hop.delay;
        }
    }
    packets.iter().map(|&(ready, _)| ready).max().unwrap_or(Time::ZERO)
}

/// `pipeline_time` with packets kept in the stream's order: the longest
/// monotone path through the (hop, packet) grid of serialization times (a
/// tandem queue's departure recursion, unrolled), plus every delay; where
/// a hop has several ports, the grid path cannot move to the next packet
/// there. Middle packets are alike, so the longest grid path holds all of
/// them but one per hop at the slowest one-port hop it crosses while among
/// them; the search is over the hop `a` where it leaves the first packet
/// and the hop `b` where it reaches the last.
fn in_order_pipeline_time(path: &[Hop], stream: &Runs) -> Time {
    let sum = |cells: &[Time]| cells.iter().fold(Time::ZERO, |a, &b| a + b);
    let delays = path.iter().fold(Time::ZERO, |a, hop| a + hop.delay);
    let cells = |bytes: u64| -> Vec<Time> { path.iter().map(|hop| hop.rate.tx_time(bytes)).collect() };
    let first = cells(stream.first);
    let Some(last_bytes) = stream.last else { return delays + sum(&first) };
    let (middle, last) = (cells(stream.middle), cells(last_bytes));
    let mut longest = Time::ZERO;
    for a in (0..path.len()).filter(|&a| path[a].ports == 1) {
        let head = sum(&first[..=a]);
        if stream.middles == 0 {
            longest = longest.max(head + sum(&last[a..]));
            continue;
        }
        let (mut run, mut slowest) = (Time::ZERO, Time::ZERO);
        for b in a..path.len() {
            run += middle[b];
            if path[b].ports == 1 {
                slowest = slowest.max(middle[b]);
                let rest = Time(slowest.0.saturating_mul(stream.middles - 1));
                longest = longest.max(head + run + rest + sum(&last[b..]));
            }
        }
    }
    delays + longest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_bound_a_check_weighs_recording_over_is_below_both_models_ideals() {
        // A check refuses what recording would take over the bound, so a
        // bound above an ideal would refuse a run its build accepts. Each
        // job's collectives latency-bound (64 B) and bandwidth-bound, over
        // the network, inside hosts and both, on one plane and two.
        let clos = json!({"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"});
        let mut uneven = clos.clone();
        uneven["link_delay"] = json!(["300ns", "2us"]);
        let mut planes = clos.clone();
        planes["planes"] = json!(2);
        let hosts = json!({"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps",
            "nics_per_host": 4, "rail_optimized": true});
        let collectives = [
            json!({"op": "all_reduce", "algorithm": "ring"}),
            json!({"op": "all_reduce", "algorithm": "tree"}),
            json!({"op": "all_gather", "channels": 2}),
            json!({"op": "reduce_scatter"}),
            json!({"op": "all_to_all"}),
            json!({"op": "broadcast", "root": 3}),
            json!({"op": "all_gather", "rdma_op": "read", "slice": "32KiB"}),
        ];
        let mut cases = Vec::new();
        for topology in [&clos, &uneven, &planes, &hosts] {
            for collective in &collectives {
                cases.push((topology.clone(), collective.clone(), 16));
            }
        }
        // Two NICs linked to each other directly: a path of one link.
        let direct = json!({"kind": "explicit",
            "nodes": [{"name": "a", "kind": "nic"}, {"name": "b", "kind": "nic"}],
            "links": [{"a": "a", "b": "b", "rate": "100Gbps", "delay": "1us"}]});
        cases.push((direct, json!({"op": "all_reduce", "algorithm": "ring"}), 2));
        cases.push((hosts.clone(), json!({"op": "all_reduce", "hierarchical": true}), 16));
        cases.push((hosts.clone(), json!({"op": "all_reduce", "algorithm": "nvls"}), 16));
        for (topology, collective, ranks) in cases {
            for bytes in ["64B", "4MiB"] {
                let mut collective = collective.clone();
                collective["bytes"] = json!(bytes);
                for mode in ["packet", "flow"] {
                    let scenario = json!({
                        "mode": mode,
                        "topology": topology,
                        "jobs": [{"name": "j", "ranks": ranks, "iterations": 2, "phases": [
                            {"name": "c", "compute": "3us"},
                            {"name": "x", "collective": collective, "after": ["c"]},
                        ]}],
                    });
                    let parsed = Scenario::from_json(&scenario.to_string()).expect("valid");
                    let built = crate::Model::build(parsed, &mut Setup::default()).expect("builds").expect("whole");
                    let (ideal, bound) = match &built {
                        crate::Model::Packet(sim) => sim.ideal_end_and_its_bound(),
                        crate::Model::Flow(sim) => sim.ideal_end_and_its_bound(),
                    };
                    assert!(bound <= ideal, "{mode}, {topology}, {collective}: bound {bound} over the ideal {ideal}");
                    // Not a bound that says nothing: a ring of 64 B is
                    // weighed by its chain, two links a step (0.79 of it).
                    if bytes == "64B" && collective["algorithm"] == "ring" && topology == clos {
                        assert!(bound.0 * 4 >= ideal.0 * 3, "{mode}: bound {bound} for the ideal {ideal}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_pipeline_matches_the_departure_recursion() {
        // The recursion itself, packet by packet, over paths whose slowest
        // hop is first, in the middle, last, or twice; each with every hop
        // of one port (one path) and with only its first and last of one
        // port (packets spread over 64 paths between).
        let (gbps, us) = (Rate::from_gbps, Time::from_ns(1000));
        let paths = [
            vec![(gbps(100), us); 4],
            vec![(gbps(400), us), (gbps(100), us), (gbps(200), us), (gbps(400), us)],
            vec![(gbps(200), us), (gbps(400), us), (gbps(100), Time::from_ns(300))],
            vec![(gbps(100), us), (gbps(400), us), (gbps(100), us)],
            vec![(gbps(400), us), (gbps(100), us), (gbps(100), us), (gbps(400), us), (gbps(100), us)],
        ];
        let streams = [
            Runs { first: 1_078, middle: 0, middles: 0, last: None },
            Runs { first: 4_174, middle: 0, middles: 0, last: Some(100) },
            Runs { first: 4_174, middle: 4_158, middles: 1, last: Some(700) },
            Runs { first: 4_174, middle: 4_158, middles: 30, last: Some(4_000) },
        ];
        for hops in &paths {
            for spread in [false, true] {
                let path: Vec<Hop> = (hops.iter().enumerate())
                    .map(|(h, &(rate, delay))| Hop {
                        rate,
                        delay,
                        ports: if spread && h > 0 && h < hops.len() - 1 { 64 } else { 1 },
                    })
                    .collect();
                for stream in &streams {
                    let mut sizes = vec![stream.first];
                    sizes.extend(std::iter::repeat_n(stream.middle, stream.middles as usize));
                    sizes.extend(stream.last);
                    // done[i]: when packet i leaves the hop last looked at.
                    let mut done = vec![Time::ZERO; sizes.len()];
                    for (h, hop) in path.iter().enumerate() {
                        let mut free = Time::ZERO;
                        for (i, &bytes) in sizes.iter().enumerate() {
                            let ready = if h == 0 { Time::ZERO } else { done[i] + path[h - 1].delay };
                            let start = if hop.ports == 1 { free.max(ready) } else { ready };
                            free = start + hop.rate.tx_time(bytes);
                            done[i] = free;
                        }
                    }
                    let expected = *done.last().unwrap() + path.last().unwrap().delay;
                    let got = in_order_pipeline_time(&path, stream);
                    assert_eq!(got, expected, "{hops:?}, spread {spread}, {} packets", sizes.len());
                    if !spread {
                        assert_eq!(pipeline_time(&path, &Stream::Runs(stream.clone())), expected);
                    }
                }
            }
        }
    }

    #[test]
    fn a_small_last_packet_overtakes_where_the_paths_part() {
        // Two packets over four hops of 100G, the middle two on paths of
        // their own: the small last packet reaches the last hop first, so
        // the stream ends when the large one has crossed every hop.
        let hop = |ports| Hop { rate: Rate::from_gbps(100), delay: Time::from_ns(1000), ports };
        let path = [hop(1), hop(4), hop(4), hop(1)];
        let stream = Runs { first: 4_174, middle: 0, middles: 0, last: Some(100) };
        let large = Rate::from_gbps(100).tx_time(4_174);
        assert_eq!(pipeline_time(&path, &Stream::Runs(stream.clone())), Time(4 * (large.0 + 1_000_000)));
        // Kept in order, the small one would wait for it at the last hop.
        assert_eq!(
            in_order_pipeline_time(&path, &stream),
            Time(4 * (large.0 + 1_000_000)) + Rate::from_gbps(100).tx_time(100)
        );
    }

    #[test]
    fn a_stream_spread_over_few_ports_goes_no_faster_than_they_carry() {
        // A 400G NIC spreading 100 packets over two 100G paths: 200 Gb/s.
        let (fast, slow, us) = (Rate::from_gbps(400), Rate::from_gbps(100), Time::from_ns(1000));
        let path = [
            Hop { rate: fast, delay: us, ports: 1 },
            Hop { rate: slow, delay: us, ports: 2 },
            Hop { rate: slow, delay: us, ports: 2 },
            Hop { rate: fast, delay: us, ports: 1 },
        ];
        let stream = Runs { first: 4_174, middle: 4_174, middles: 98, last: Some(4_174) };
        let t = pipeline_time(&path, &Stream::Runs(stream));
        let bound = Rate::from_gbps(200).tx_time(100 * 4_174) + Time(4 * us.0);
        let packet = slow.tx_time(4_174);
        assert!(t >= bound && t <= bound + Time(3 * packet.0), "{t} against {bound}");
    }
}
