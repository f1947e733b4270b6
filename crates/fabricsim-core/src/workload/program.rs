//! A job's work expanded before the run: ranks placed on NICs, phases
//! instantiated per iteration with their dependencies, and every collective
//! cut into transfers (one RDMA write each) with the transfers each one
//! waits for. The simulation only counts down dependencies at run time.

use std::collections::BTreeMap;

use super::collective::{Algorithm, CollectiveOp, CollectiveSpec, RingOrder};
use super::job::{CheckpointSpec, JobSpec, Placement};
use super::split_evenly as split;
use crate::engine::Rng;
use crate::error::{invalid, named, ScenarioError};
use crate::ids::{Arena, CollectiveId, Id, IdRange, JobId, PhaseId, TransferId};
use crate::topology::{NodeId, NodeRole, Topology};
use crate::transport::Verb;
use crate::units::Time;

/// One RDMA write (or intra-host copy) of a collective.
#[derive(Clone, Debug, PartialEq)]
pub struct Transfer {
    pub collective: CollectiveId,
    /// Ranks of the job.
    pub src_rank: u32,
    pub dst_rank: u32,
    pub bytes: u64,
    pub channel: u32,
    /// Ring step, tree level or peer order: what a trace groups by.
    pub step: u32,
    /// Which piece of the data (segment and slice) this is.
    pub chunk: u32,
    /// Transfers that must complete first.
    pub deps: Vec<TransferId>,
}

impl CollectiveRun {
    /// How its data moves: `ring`, `tree`, `chain` (broadcast, reduce) or
    /// `p2p` (send/recv, all-to-all).
    pub fn pattern(&self) -> &'static str {
        match (self.op, self.algorithm) {
            (_, Algorithm::Tree) => "tree",
            (_, Algorithm::Nvls) => "nvls",
            (CollectiveOp::Broadcast | CollectiveOp::Reduce, _) => "chain",
            (CollectiveOp::SendRecv | CollectiveOp::AllToAll | CollectiveOp::AllToAllv, _) => "p2p",
            _ => "ring",
        }
    }
}

/// One collective run by one group in one phase instance.
#[derive(Clone, Debug)]
pub struct CollectiveRun {
    pub phase: PhaseId,
    pub group: u32,
    pub op: CollectiveOp,
    pub algorithm: Algorithm,
    pub ranks: u32,
    pub bytes: u64,
    pub qps: u32,
    /// Transfers a connection may have in flight (NCCL's buffer slots).
    pub credits: u32,
    /// What each of its network transfers is posted as.
    pub verb: Verb,
    /// Its transfers, pushed together.
    pub transfers: IdRange<TransferId>,
    /// Longest chain of dependent transfers: the alpha-beta model's steps.
    pub chain: u32,
    /// Its rings, one per channel, when it runs whole rather than as
    /// transfers (`Whole::rings`); its `transfers` are then empty.
    pub pipelines: Vec<PipelinePlan>,
    /// The all-to-all itself, when it runs whole (`Whole::all_to_all`);
    /// its `transfers` are then empty.
    pub exchange: Option<ExchangePlan>,
}

/// Which collectives `expand` keeps whole instead of cutting them into
/// transfers: the flow model's pipelined collectives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Whole {
    /// A collective made of pipelines (`CollectiveSpec::runs_as_pipelines`).
    pub pipelines: bool,
    /// An all-to-all of equal messages with every peer at once
    /// (`CollectiveSpec::is_plain_all_to_all`).
    pub all_to_all: bool,
}

/// An all-to-all run whole: every rank sends `pair_bytes` to every other.
#[derive(Clone, Debug, PartialEq)]
pub struct ExchangePlan {
    /// Its ranks (positions in the job), and each one's host.
    pub members: Vec<u32>,
    pub hosts: Vec<u32>,
    pub pair_bytes: u64,
    pub channels: u32,
}

/// One channel's pipeline of a collective run whole: a ring, a chain or a
/// tree of hops, each sending its `steps` segments back to back, slice by
/// slice. In a ring every hop sends its own data each step, after the
/// slice it forwards arrived at the step before; in a chain or tree
/// (`waits`) a hop forwards each slice once the hops before it delivered
/// it, so a slice's way through the longest chain of hops fills the
/// pipeline. A collective's pipelines that start at one step run at once;
/// those that start later wait for them all (a hierarchical all-reduce's
/// rings inside the hosts, then per rail, then inside the hosts again).
#[derive(Clone, Debug, PartialEq)]
pub struct PipelinePlan {
    pub channel: u32,
    /// The collective's step its first step is.
    pub first_step: u32,
    /// (sending rank, receiving rank) of every hop: in ring order, or
    /// every hop after those it waits for.
    pub hops: Vec<(u32, u32)>,
    pub steps: u32,
    /// The largest segment a hop sends in one step.
    pub segment: u64,
    /// The slice a segment is pipelined in.
    pub slice: u64,
    /// Per hop, the earlier hops whose slices it forwards (a tree's hop
    /// to a parent waits for its children's); empty for a ring.
    pub waits: Vec<Vec<u32>>,
}

/// One phase in one iteration.
#[derive(Clone, Debug)]
pub struct PhaseRun {
    pub job: JobId,
    pub iteration: u32,
    pub name: String,
    pub compute: Option<Time>,
    pub collectives: Vec<CollectiveId>,
    /// Phase runs that must finish first.
    pub after: Vec<PhaseId>,
}

#[derive(Clone, Debug)]
pub struct JobPlan {
    pub name: String,
    pub start: Time,
    /// NIC of each rank.
    pub nics: Vec<NodeId>,
    pub iterations: u32,
    /// Its phase runs, iteration by iteration.
    pub phases: IdRange<PhaseId>,
    pub checkpoint: Option<CheckpointSpec>,
}

#[derive(Clone, Debug, Default)]
pub struct Program {
    pub jobs: Arena<JobId, JobPlan>,
    pub phases: Arena<PhaseId, PhaseRun>,
    pub collectives: Arena<CollectiveId, CollectiveRun>,
    pub transfers: Arena<TransferId, Transfer>,
}

impl Program {
    /// The longest path through job `job`'s phases from its start, each
    /// phase taking `own` of it after the latest of those it waits for.
    pub fn longest_path(&self, job: JobId, own: impl Fn(&PhaseRun) -> Time) -> Time {
        let mut finish: Arena<PhaseId, Time> = vec![Time::ZERO; self.phases.len()].into();
        // Phases of a job are stored in iteration order and reference only
        // earlier iterations or their own; resolve in dependency order.
        let range = self.jobs[job].phases;
        let mut done: Arena<PhaseId, bool> = vec![false; self.phases.len()].into();
        let mut remaining = range.len();
        while remaining > 0 {
            let before = remaining;
            for q in range.iter() {
                let phase = &self.phases[q];
                if done[q] || !phase.after.iter().all(|&a| done[a]) {
                    continue;
                }
                let start = phase.after.iter().map(|&a| finish[a]).max().unwrap_or(Time::ZERO);
                finish[q] = start + own(phase);
                done[q] = true;
                remaining -= 1;
            }
            if remaining == before {
                break;
            }
        }
        range.iter().map(|q| finish[q]).max().unwrap_or(Time::ZERO)
    }
}

/// Expands the scenario's jobs. `default_qps` is the transport's QPs per
/// connection; `whole` says which collectives are kept whole.
pub fn expand(
    jobs: &[JobSpec],
    topo: &Topology,
    default_qps: u32,
    seed: u64,
    whole: Whole,
) -> Result<Program, ScenarioError> {
    let nics = topo.nics();
    let mut free = vec![true; nics.len()];
    let tors = tor_of(topo, &nics);
    let mut program = Program::default();
    let mut names = std::collections::BTreeSet::new();
    for (j, spec) in jobs.iter().enumerate() {
        let field = |name: &str| format!("jobs[{j}].{name}");
        named(field("name"), &spec.name, "job")?;
        if !names.insert(spec.name.as_str()) {
            return invalid(field("name"), format!("'{}' names two jobs", spec.name));
        }
        if spec.ranks == 0 {
            return invalid(field("ranks"), "0: a job needs at least one rank");
        }
        if spec.iterations == 0 {
            return invalid(field("iterations"), "0: a job runs at least once");
        }
        if spec.checkpoint.is_some_and(|c| c.every == 0) {
            return invalid(field("checkpoint.every"), "0: a checkpoint is taken after every 1 or more iterations");
        }
        let mut rng = Rng::stream(seed, &[0x70B, j as u64]);
        let placed = place(spec, topo, &nics, &tors, &mut free, &mut rng, &field("placement"))?;
        let hosts: Vec<u32> = placed.iter().map(|&n| topo.host(n).unwrap_or(u32::MAX)).collect();
        let job = program.jobs.next_id();
        let first_phase = program.phases.next_id();
        if spec.phases.is_empty() {
            return invalid(field("phases"), "a job needs at least one phase");
        }
        let after = phase_order(spec, &field("phases"))?;
        for iteration in 0..spec.iterations {
            let base = program.phases.len();
            for (p, phase) in spec.phases.iter().enumerate() {
                let pfield = |name: &str| format!("jobs[{j}].phases[{p}].{name}");
                let mut deps: Vec<PhaseId> = after[p].iter().map(|&q| PhaseId::new(base + q)).collect();
                if deps.is_empty() && iteration > 0 {
                    // A phase that waits for nothing in its iteration waits
                    // for the whole previous iteration.
                    deps = (base - spec.phases.len()..base).map(PhaseId::new).collect();
                }
                let phase_id = program.phases.next_id();
                let mut collectives = Vec::new();
                match (phase.compute, &phase.collective) {
                    (Some(_), None) => {}
                    (None, Some(c)) => {
                        for (g, members) in groups(spec.ranks, c, &pfield("collective.group"))?.into_iter().enumerate()
                        {
                            let id = program.collectives.next_id();
                            let run = expand_collective(
                                c,
                                &members,
                                &hosts,
                                id,
                                phase_id,
                                g as u32,
                                default_qps,
                                whole,
                                &mut program.transfers,
                                &pfield("collective"),
                            )?;
                            program.collectives.push(run);
                            collectives.push(id);
                        }
                    }
                    _ => return invalid(pfield("compute"), "a phase is either `compute` or `collective`"),
                }
                program.phases.push(PhaseRun {
                    job,
                    iteration,
                    name: phase.name.clone(),
                    compute: phase.compute,
                    collectives,
                    after: deps,
                });
            }
        }
        program.jobs.push(JobPlan {
            name: spec.name.clone(),
            start: spec.start,
            nics: placed,
            iterations: spec.iterations,
            phases: IdRange { start: first_phase, end: program.phases.next_id() },
            checkpoint: spec.checkpoint,
        });
    }
    Ok(program)
}

/// For each phase, the phases (by index) it runs after; rejects unknown
/// names, self-dependencies and cycles.
fn phase_order(spec: &JobSpec, field: &str) -> Result<Vec<Vec<usize>>, ScenarioError> {
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, phase) in spec.phases.iter().enumerate() {
        named(format!("{field}[{i}].name"), &phase.name, "phase")?;
        if let Some(first) = index.insert(&phase.name, i) {
            return invalid(
                format!("{field}[{i}].name"),
                format!("'{}' is already the name of {field}[{first}]", phase.name),
            );
        }
    }
    let mut after = Vec::new();
    for (i, phase) in spec.phases.iter().enumerate() {
        let deps = match &phase.after {
            None if i == 0 => vec![],
            None => vec![i - 1],
            Some(names) => names
                .iter()
                .map(|n| match index.get(n.as_str()) {
                    Some(&k) if k == i => {
                        invalid(format!("{field}[{i}].after"), format!("phase '{n}' cannot run after itself"))
                    }
                    Some(&k) => Ok(k),
                    None => invalid(format!("{field}[{i}].after"), format!("there is no phase named '{n}'")),
                })
                .collect::<Result<_, _>>()?,
        };
        after.push(deps);
    }
    // Depth-first search for a cycle.
    fn visit(i: usize, after: &[Vec<usize>], state: &mut [u8]) -> bool {
        match state[i] {
            1 => return false,
            2 => return true,
            _ => {}
        }
        state[i] = 1;
        let ok = after[i].iter().all(|&k| visit(k, after, state));
        state[i] = 2;
        ok
    }
    let mut state = vec![0u8; after.len()];
    for i in 0..after.len() {
        if !visit(i, &after, &mut state) {
            return invalid(
                format!("{field}[{i}].after"),
                format!("phase '{}' depends on itself through others", spec.phases[i].name),
            );
        }
    }
    Ok(after)
}

/// The ToR (plane-0 index) and pod of each NIC's first port.
fn tor_of(topo: &Topology, nics: &[NodeId]) -> Vec<(u32, u32)> {
    let adj = topo.adjacency();
    nics.iter()
        .map(|&nic| {
            adj[nic.0 as usize]
                .first()
                .map(|&l| topo.peer(l, nic))
                .and_then(|tor| match topo.node(tor).role {
                    NodeRole::Switch { pod, .. } => Some((topo.node(tor).index, pod)),
                    NodeRole::Nic { .. } => None,
                })
                .unwrap_or((u32::MAX, u32::MAX))
        })
        .collect()
}

fn place(
    spec: &JobSpec,
    topo: &Topology,
    nics: &[NodeId],
    tors: &[(u32, u32)],
    free: &mut [bool],
    rng: &mut Rng,
    field: &str,
) -> Result<Vec<NodeId>, ScenarioError> {
    let want = spec.ranks as usize;
    let available: Vec<usize> = (0..nics.len()).filter(|&i| free[i]).collect();
    let too_few = |what: &str| {
        let how = serde_json::to_value(&spec.placement).map(|v| v.to_string()).unwrap_or_default();
        invalid(field, format!("{} ranks do not fit {how}: {what} (the topology has {} NICs)", spec.ranks, nics.len()))
    };
    let chosen: Vec<usize> = match &spec.placement {
        Placement::Contiguous => {
            if available.len() < want {
                return too_few(&format!("{} NICs are free", available.len()));
            }
            available[..want].to_vec()
        }
        Placement::Random => {
            if available.len() < want {
                return too_few(&format!("{} NICs are free", available.len()));
            }
            let mut pool = available;
            rng.shuffle(&mut pool);
            pool.truncate(want);
            pool
        }
        Placement::T0Local => {
            let mut by_tor: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            for &i in &available {
                by_tor.entry(tors[i].0).or_default().push(i);
            }
            match by_tor.values().find(|v| v.len() >= want) {
                Some(v) => v[..want].to_vec(),
                None => return too_few("no ToR has that many free NICs"),
            }
        }
        Placement::CrossT1 => {
            // Round robin over ToRs ordered so that consecutive ToRs are in
            // different pods where there are pods.
            let mut by_tor: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
            for &i in &available {
                let (tor, pod) = tors[i];
                by_tor.entry((pod, tor)).or_default().push(i);
            }
            let mut queues: Vec<std::collections::VecDeque<usize>> =
                by_tor.into_values().map(std::collections::VecDeque::from).collect();
            let pods = |q: &std::collections::VecDeque<usize>| q.front().map(|&i| tors[i].1);
            queues.sort_by_key(|q| pods(q));
            // Interleave pods: take ToRs alternately from each pod.
            let mut order = Vec::new();
            let mut by_pod: BTreeMap<u32, Vec<std::collections::VecDeque<usize>>> = BTreeMap::new();
            for q in queues {
                by_pod.entry(pods(&q).unwrap_or(0)).or_default().push(q);
            }
            let mut pod_lists: Vec<Vec<std::collections::VecDeque<usize>>> = by_pod.into_values().collect();
            while pod_lists.iter().any(|l| !l.is_empty()) {
                for list in pod_lists.iter_mut() {
                    if !list.is_empty() {
                        order.push(list.remove(0));
                    }
                }
            }
            if order.len() < 2 && want > 1 {
                return too_few("cross_t1 needs free NICs under at least two ToRs");
            }
            let mut picked = Vec::with_capacity(want);
            while picked.len() < want && order.iter().any(|q| !q.is_empty()) {
                for q in order.iter_mut() {
                    if picked.len() < want {
                        if let Some(i) = q.pop_front() {
                            picked.push(i);
                        }
                    }
                }
            }
            if picked.len() < want {
                return too_few(&format!("{} NICs are free", picked.len()));
            }
            picked
        }
        Placement::Explicit(list) => {
            if list.len() != want {
                return invalid(field, format!("{} NICs listed for {} ranks", list.len(), spec.ranks));
            }
            let mut out = Vec::with_capacity(want);
            let mut listed = std::collections::HashSet::with_capacity(want);
            for (r, nic) in list.iter().enumerate() {
                let id = nic.resolve(topo, nics, &format!("{field}.explicit[{r}]"))?;
                // `nics` is in node order.
                let i = nics.binary_search(&id).expect("a resolved NIC is in the list");
                if !free[i] || !listed.insert(i) {
                    return invalid(format!("{field}.explicit[{r}]"), format!("{} is already taken", topo.name(id)));
                }
                out.push(i);
            }
            out
        }
    };
    for &i in &chosen {
        free[i] = false;
    }
    Ok(chosen.into_iter().map(|i| nics[i]).collect())
}

/// How many groups of job ranks run a collective, and their size, without
/// listing them.
pub(crate) fn group_shape(ranks: u32, spec: &CollectiveSpec, field: &str) -> Result<(u32, u32), ScenarioError> {
    let Some(g) = spec.group else { return Ok((1, ranks)) };
    if g.size == 0 || g.stride == 0 {
        return invalid(field, "size and stride must be at least 1");
    }
    let block = g.size as u64 * g.stride as u64;
    if !(ranks as u64).is_multiple_of(block) {
        return invalid(
            field,
            format!("{ranks} ranks cannot be cut into groups of {} ranks {} apart", g.size, g.stride),
        );
    }
    Ok((ranks / g.size, g.size))
}

/// The groups of job ranks that run a collective.
fn groups(ranks: u32, spec: &CollectiveSpec, field: &str) -> Result<Vec<Vec<u32>>, ScenarioError> {
    let (count, _) = group_shape(ranks, spec, field)?;
    let Some(g) = spec.group else { return Ok(vec![(0..ranks).collect()]) };
    let mut out = vec![Vec::with_capacity(g.size as usize); count as usize];
    for r in 0..ranks {
        let group = (r / (g.size * g.stride)) * g.stride + r % g.stride;
        out[group as usize].push(r);
    }
    Ok(out)
}

/// Slices of at most `slice` bytes covering `total` (one empty slice for 0).
fn slices(total: u64, slice: u64) -> Vec<u64> {
    let n = total.div_ceil(slice).max(1);
    split(total, n).collect()
}

#[allow(clippy::too_many_arguments)]
fn expand_collective(
    spec: &CollectiveSpec,
    members: &[u32],
    hosts: &[u32],
    id: CollectiveId,
    phase: PhaseId,
    group: u32,
    default_qps: u32,
    whole: Whole,
    transfers: &mut Arena<TransferId, Transfer>,
    field: &str,
) -> Result<CollectiveRun, ScenarioError> {
    let n = members.len();
    let first = transfers.next_id();
    let channels = spec.channels;
    if channels == 0 {
        return invalid(format!("{field}.channels"), "0: a collective needs at least one channel");
    }
    if spec.slice() == 0 {
        return invalid(format!("{field}.slice"), "0B: slices carry at least one byte");
    }
    if spec.credits() == 0 {
        return invalid(format!("{field}.credits"), "0: a connection needs at least one buffer slot");
    }
    let qps = spec.qps.unwrap_or(default_qps);
    if qps == 0 {
        return invalid(format!("{field}.qps"), "0: a connection needs at least one QP");
    }
    let bytes = match (spec.op, spec.bytes, &spec.matrix) {
        (CollectiveOp::AllToAllv, None, Some(m)) => {
            if m.len() != n || m.iter().any(|row| row.len() != n) {
                let shape = format!("{}x{}", m.len(), m.first().map_or(0, Vec::len));
                return invalid(format!("{field}.matrix"), format!("{shape}: the group has {n} ranks, so {n}x{n}"));
            }
            m.iter().flatten().fold(0u64, |sum, b| sum.saturating_add(b.0)) / n as u64
        }
        (CollectiveOp::AllToAllv, _, _) => {
            return invalid(format!("{field}.matrix"), "all_to_allv takes its sizes from `matrix` (and no `bytes`)")
        }
        (_, Some(b), None) => b.0,
        (_, None, _) => return invalid(format!("{field}.bytes"), "missing: the collective's size"),
        (_, Some(_), Some(_)) => return invalid(format!("{field}.matrix"), "only all_to_allv takes a matrix"),
    };
    if spec.hierarchical && (spec.op != CollectiveOp::AllReduce || spec.algorithm != Algorithm::Ring) {
        return invalid(format!("{field}.hierarchical"), "only ring all_reduce runs hierarchically");
    }
    if spec.algorithm == Algorithm::Tree && spec.op != CollectiveOp::AllReduce {
        return invalid(
            format!("{field}.algorithm"),
            format!("tree: only all_reduce runs on trees, not {}", spec.op.name()),
        );
    }
    if spec.algorithm == Algorithm::Nvls && spec.op != CollectiveOp::AllReduce {
        return invalid(
            format!("{field}.algorithm"),
            format!("nvls: NVLink SHARP accelerates all_reduce, not {} (it cannot reduce it)", spec.op.name()),
        );
    }
    let rooted = matches!(spec.op, CollectiveOp::Broadcast | CollectiveOp::Reduce);
    let root = spec.root.unwrap_or(0);
    match spec.root {
        Some(r) if !rooted => {
            return invalid(format!("{field}.root"), format!("{r}: only broadcast and reduce have a root"));
        }
        _ if rooted && root as usize >= n.max(1) => {
            return invalid(format!("{field}.root"), format!("{root}: the group has positions 0..{n}"));
        }
        _ => {}
    }
    if let Some(offset) = spec.peer_offset.filter(|_| spec.op != CollectiveOp::SendRecv) {
        return invalid(format!("{field}.peer_offset"), format!("{offset}: only send_recv sends to a peer offset"));
    }
    if let Some(peers) = spec.concurrent_peers {
        let exchange = matches!(spec.op, CollectiveOp::AllToAll | CollectiveOp::AllToAllv);
        let most = n.saturating_sub(1).max(1);
        if !exchange {
            return invalid(format!("{field}.concurrent_peers"), format!("{peers}: only all-to-alls send to peers"));
        }
        if peers == 0 || peers as usize > most {
            return invalid(
                format!("{field}.concurrent_peers"),
                format!("{peers}: a rank of a group of {n} sends to 1 to {most} peers at once"),
            );
        }
    }
    let rails = spec.ring_order == RingOrder::Rails;
    if rails && !(spec.algorithm == Algorithm::Ring && !spec.hierarchical && ring_op(spec.op)) {
        return invalid(
            format!("{field}.ring_order"),
            "rails: orders the ring of a ring all_reduce, all_gather or reduce_scatter (not hierarchical)",
        );
    }
    let mut pipelines = Vec::new();
    let mut gen = Generator {
        transfers,
        members,
        collective: id,
        slice: spec.slice(),
        channel_base: 0,
        pipelines: (whole.pipelines && spec.runs_as_pipelines()).then_some(&mut pipelines),
    };
    let mut exchange = None;
    if n > 1 && whole.all_to_all && spec.is_plain_all_to_all() {
        exchange = Some(ExchangePlan {
            members: members.to_vec(),
            hosts: members.iter().map(|&m| hosts[m as usize]).collect(),
            pair_bytes: bytes / n as u64,
            channels,
        });
    } else if n > 1 {
        let per_channel: Vec<u64> = split(bytes, channels as u64).collect();
        match (spec.op, spec.algorithm) {
            (CollectiveOp::AllReduce, Algorithm::Ring) if spec.hierarchical => {
                hierarchical_all_reduce(&mut gen, bytes, channels, hosts, &format!("{field}.hierarchical"))?;
            }
            (CollectiveOp::AllReduce, Algorithm::Ring) if rails => {
                rail_rings(&mut gen, &per_channel, 2 * (n - 1), hosts, &format!("{field}.ring_order"))?;
            }
            (CollectiveOp::AllReduce, Algorithm::Ring) => {
                gen.ring(&per_channel, 2 * (n - 1), &vec![Vec::new(); n], 0);
            }
            (CollectiveOp::AllGather | CollectiveOp::ReduceScatter, _) if rails => {
                rail_rings(&mut gen, &per_channel, n - 1, hosts, &format!("{field}.ring_order"))?;
            }
            (CollectiveOp::AllGather | CollectiveOp::ReduceScatter, _) => {
                gen.ring(&per_channel, n - 1, &vec![Vec::new(); n], 0);
            }
            (CollectiveOp::AllReduce, Algorithm::Tree) => gen.double_tree(&per_channel),
            (CollectiveOp::AllReduce, Algorithm::Nvls) => {
                nvls_all_reduce(&mut gen, &per_channel, hosts, &format!("{field}.algorithm"))?;
            }
            (CollectiveOp::Broadcast, _) => {
                let chain: Vec<usize> = (0..n).map(|k| (root as usize + k) % n).collect();
                gen.chain(&per_channel, &chain);
            }
            (CollectiveOp::Reduce, _) => {
                let chain: Vec<usize> = (1..=n).map(|k| (root as usize + k) % n).collect();
                gen.chain(&per_channel, &chain);
            }
            (CollectiveOp::SendRecv, _) => {
                let offset = spec.peer_offset.unwrap_or(1) as usize % n;
                if offset == 0 {
                    return invalid(
                        format!("{field}.peer_offset"),
                        format!("{}: a rank cannot send to itself", spec.peer_offset.unwrap_or(1)),
                    );
                }
                gen.send_recv(&per_channel, offset);
            }
            (CollectiveOp::AllToAll, _) => {
                let size = |_: usize, _: usize| bytes / n as u64;
                gen.all_to_all(channels, spec.concurrent_peers, &size);
            }
            (CollectiveOp::AllToAllv, _) => {
                let m = spec.matrix.as_ref().expect("checked above");
                let size = |i: usize, j: usize| m[i][j].0;
                gen.all_to_all(channels, spec.concurrent_peers, &size);
            }
        }
    }
    let mine = IdRange { start: first, end: transfers.next_id() };
    let mut depth = vec![0u32; mine.len()];
    for (i, t) in transfers[mine].iter().enumerate() {
        depth[i] = 1 + t.deps.iter().map(|&d| depth[mine.offset(d)]).max().unwrap_or(0);
    }
    let chain = depth.into_iter().max().unwrap_or(0);
    Ok(CollectiveRun {
        phase,
        group,
        op: spec.op,
        algorithm: spec.algorithm,
        ranks: n as u32,
        bytes,
        qps,
        credits: spec.credits(),
        verb: spec.rdma_op.verb(),
        transfers: mine,
        chain,
        pipelines,
        exchange,
    })
}

/// All-reduce in three rings, as NCCL does across multi-GPU hosts: a
/// reduce-scatter among the GPUs of each host (over the intra-host link), an
/// all-reduce of each GPU's share among the GPUs with the same local index
/// on every host (over the network, one rail each), and an all-gather
/// inside each host. A GPU starts each ring when it finished the one before.
fn hierarchical_all_reduce(
    gen: &mut Generator,
    bytes: u64,
    channels: u32,
    hosts: &[u32],
    field: &str,
) -> Result<(), ScenarioError> {
    let members = gen.members;
    let local = positions_by_host(members, hosts, field, "hierarchical")?;
    let g = local[0].len();
    let per_channel: Vec<u64> = split(bytes, channels as u64).collect();
    let share: Vec<u64> = per_channel.iter().map(|&b| b / g as u64).collect();
    let mut done: Vec<Vec<TransferId>> = vec![Vec::new(); members.len()];
    for host in &local {
        gen.sub_ring(host, &per_channel, g - 1, 0, &mut done);
    }
    let hosts_count = local.len();
    for l in 0..g {
        let rail: Vec<usize> = local.iter().map(|h| h[l]).collect();
        gen.sub_ring(&rail, &share, 2 * (hosts_count - 1), g as u32, &mut done);
    }
    let base = (g + 2 * (hosts_count - 1)) as u32;
    for host in &local {
        gen.sub_ring(host, &per_channel, g - 1, base, &mut done);
    }
    Ok(())
}

fn ring_op(op: CollectiveOp) -> bool {
    matches!(op, CollectiveOp::AllReduce | CollectiveOp::AllGather | CollectiveOp::ReduceScatter)
}

/// Rings in NCCL's rail order (see `RingOrder::Rails`): per channel c, host
/// k's GPUs from local index (c - k) mod g on, so each ring leaves a host
/// by the GPU whose rail the next host is entered by.
fn rail_rings(
    gen: &mut Generator,
    per_channel: &[u64],
    steps: usize,
    hosts: &[u32],
    field: &str,
) -> Result<(), ScenarioError> {
    let members = gen.members;
    let local = positions_by_host(members, hosts, field, "rails")?;
    let g = local[0].len();
    for (c, &bytes) in per_channel.iter().enumerate() {
        let order: Vec<u32> = (local.iter().enumerate())
            .flat_map(|(k, host)| (0..g).map(move |j| host[(c + j + g - k % g) % g]))
            .map(|p| members[p])
            .collect();
        let mut sub = Generator {
            transfers: gen.transfers,
            members: &order,
            collective: gen.collective,
            slice: gen.slice,
            channel_base: c as u32,
            pipelines: gen.pipelines.as_deref_mut(),
        };
        sub.ring(&[bytes], steps, &vec![Vec::new(); order.len()], 0);
    }
    Ok(())
}

/// The group's positions by host, each host's in order; refuses hosts
/// holding different numbers of them.
fn positions_by_host(
    members: &[u32],
    hosts: &[u32],
    field: &str,
    what: &str,
) -> Result<Vec<Vec<usize>>, ScenarioError> {
    let mut by_host: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (position, &rank) in members.iter().enumerate() {
        by_host.entry(hosts[rank as usize]).or_default().push(position);
    }
    let local: Vec<Vec<usize>> = by_host.into_values().collect();
    if local.iter().any(|h| h.len() != local[0].len()) {
        return invalid(field, format!("{what}: every host must hold the same number of the group's ranks"));
    }
    Ok(local)
}

/// NVLS all-reduce (see `Algorithm::Nvls`): in-switch reduce-scatter in
/// each host, a ring all-reduce of the shares per rail, in-switch
/// multicast all-gather in each host.
fn nvls_all_reduce(gen: &mut Generator, per_channel: &[u64], hosts: &[u32], field: &str) -> Result<(), ScenarioError> {
    let members = gen.members;
    let local = positions_by_host(members, hosts, field, "nvls")?;
    let g = local[0].len();
    let share: Vec<u64> = per_channel.iter().map(|&b| b / g as u64).collect();
    if gen.pipelines.is_some() {
        // Whole, stage by stage: each GPU's share to its host mates, a ring
        // per rail, each GPU's result written once into its host.
        let rails_end = 1 + 2 * (local.len() - 1) as u32;
        let mates = |first_only: bool| {
            let mut hops = Vec::new();
            for host in &local {
                for &p in host {
                    let to = host.iter().copied().filter(|&q| q != p);
                    hops.extend(to.take(if first_only { 1 } else { usize::MAX }).map(|q| (p, q)));
                }
            }
            hops
        };
        if g > 1 {
            for (c, &bytes) in share.iter().enumerate() {
                gen.push_pipeline(c as u32, 0, bytes, mates(false), Vec::new());
            }
        }
        for l in 0..g {
            let rail: Vec<usize> = local.iter().map(|h| h[l]).collect();
            gen.sub_ring(&rail, &share, 2 * (local.len() - 1), 1, &mut vec![Vec::new(); members.len()]);
        }
        if g > 1 {
            for (c, &bytes) in share.iter().enumerate() {
                gen.push_pipeline(c as u32, rails_end, bytes, mates(true), Vec::new());
            }
        }
        return Ok(());
    }
    // What each position waits for before its next stage.
    let mut done: Vec<Vec<TransferId>> = vec![Vec::new(); members.len()];
    for host in &local {
        for (c, &bytes) in share.iter().enumerate() {
            for &p in host {
                for &q in host.iter().filter(|&&q| q != p) {
                    let t = gen.emit(p, q, bytes, c as u32, 0, 0, Vec::new());
                    done[q].push(t);
                }
            }
        }
    }
    let hosts_count = local.len();
    for l in 0..g {
        let rail: Vec<usize> = local.iter().map(|h| h[l]).collect();
        gen.sub_ring(&rail, &share, 2 * (hosts_count - 1), 1, &mut done);
    }
    let step = 1 + 2 * (hosts_count - 1) as u32;
    for host in &local {
        for (c, &bytes) in share.iter().enumerate() {
            for &p in host {
                for (k, &q) in host.iter().filter(|&&q| q != p).enumerate() {
                    let sent = if k == 0 { bytes } else { 0 };
                    gen.emit(p, q, sent, c as u32, step, 0, done[p].clone());
                }
            }
        }
    }
    Ok(())
}

/// Emits the transfers of one collective.
struct Generator<'a> {
    transfers: &'a mut Arena<TransferId, Transfer>,
    members: &'a [u32],
    collective: CollectiveId,
    slice: u64,
    /// Added to the channel of every transfer emitted (a ring built one
    /// channel at a time).
    channel_base: u32,
    /// Where rings go whole instead of as transfers, when they do.
    pipelines: Option<&'a mut Vec<PipelinePlan>>,
}

impl Generator<'_> {
    /// A ring over some of the collective's positions (in that order),
    /// each position's first sends waiting for `done[p]`, which then holds
    /// what it received at the last step.
    fn sub_ring(&mut self, positions: &[usize], data: &[u64], steps: usize, base: u32, done: &mut [Vec<TransferId>]) {
        let ranks: Vec<u32> = positions.iter().map(|&p| self.members[p]).collect();
        let start: Vec<Vec<TransferId>> = positions.iter().map(|&p| std::mem::take(&mut done[p])).collect();
        let mut sub = Generator {
            transfers: &mut *self.transfers,
            members: &ranks,
            collective: self.collective,
            slice: self.slice,
            channel_base: self.channel_base,
            pipelines: self.pipelines.as_deref_mut(),
        };
        let finals = sub.ring(data, steps, &start, base);
        for (k, &p) in positions.iter().enumerate() {
            done[p] = finals[k].clone();
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        src: usize,
        dst: usize,
        bytes: u64,
        channel: u32,
        step: u32,
        chunk: u32,
        deps: Vec<TransferId>,
    ) -> TransferId {
        self.transfers.push(Transfer {
            collective: self.collective,
            src_rank: self.members[src],
            dst_rank: self.members[dst],
            bytes,
            channel: self.channel_base + channel,
            step,
            chunk,
            deps,
        })
    }

    /// Ring steps: at step k position i sends segment (i - k) mod n to
    /// i + 1, each slice after it arrived from i - 1 at step k - 1. The
    /// first n - 1 steps of an all-reduce are its reduce-scatter, the rest
    /// its all-gather. Position i's first sends wait for `start[i]`; returns
    /// what each position receives at the last step (when it is done).
    fn ring(
        &mut self,
        per_channel: &[u64],
        steps: usize,
        start: &[Vec<TransferId>],
        step_base: u32,
    ) -> Vec<Vec<TransferId>> {
        let n = self.members.len();
        if let Some(rings) = self.pipelines.as_deref_mut() {
            for (c, &channel_bytes) in per_channel.iter().enumerate() {
                rings.push(PipelinePlan {
                    channel: self.channel_base + c as u32,
                    first_step: step_base,
                    hops: (0..n).map(|i| (self.members[i], self.members[(i + 1) % n])).collect(),
                    steps: steps as u32,
                    segment: channel_bytes.div_ceil(n as u64),
                    slice: self.slice,
                    waits: Vec::new(),
                });
            }
            return vec![Vec::new(); n];
        }
        let mut finals: Vec<Vec<TransferId>> = if steps == 0 { start.to_vec() } else { vec![Vec::new(); n] };
        for (c, &channel_bytes) in per_channel.iter().enumerate() {
            let segments: Vec<Vec<u64>> = split(channel_bytes, n as u64).map(|s| slices(s, self.slice)).collect();
            // Global slice number of each segment's first slice.
            let offsets: Vec<usize> =
                segments.iter().scan(0, |acc, s| Some(std::mem::replace(acc, *acc + s.len()))).collect();
            // prev[i][j]: transfer that brought slice j to position i last step.
            let mut prev: Vec<Vec<Option<TransferId>>> = vec![Vec::new(); n];
            for k in 0..steps {
                let mut now: Vec<Vec<Option<TransferId>>> = vec![Vec::new(); n];
                for (i, arrived) in prev.iter().enumerate() {
                    let segment = (i + n * steps - k) % n;
                    let to = (i + 1) % n;
                    for (j, &bytes) in segments[segment].iter().enumerate() {
                        let deps = if k == 0 {
                            start[i].clone()
                        } else {
                            arrived.get(j).copied().flatten().into_iter().collect()
                        };
                        let chunk = (offsets[segment] + j) as u32;
                        let t = self.emit(i, to, bytes, c as u32, step_base + k as u32, chunk, deps);
                        now[to].resize(j + 1, None);
                        now[to][j] = Some(t);
                    }
                }
                prev = now;
            }
            for (i, arrived) in prev.iter().enumerate() {
                finals[i].extend(arrived.iter().flatten());
            }
        }
        finals
    }

    /// A pipeline along `chain`: each slice hops from one position to the
    /// next after it arrived.
    fn chain(&mut self, per_channel: &[u64], chain: &[usize]) {
        if self.pipelines.is_some() {
            for (c, &bytes) in per_channel.iter().enumerate() {
                let hops = chain.windows(2).map(|w| (w[0], w[1])).collect();
                let waits = (0..chain.len() as u32 - 1).map(|h| h.checked_sub(1).into_iter().collect()).collect();
                self.push_pipeline(c as u32, 0, bytes, hops, waits);
            }
            return;
        }
        for (c, &bytes) in per_channel.iter().enumerate() {
            for (j, &slice) in slices(bytes, self.slice).iter().enumerate() {
                let mut prev: Option<TransferId> = None;
                for h in 0..chain.len() - 1 {
                    let t = self.emit(
                        chain[h],
                        chain[h + 1],
                        slice,
                        c as u32,
                        h as u32,
                        j as u32,
                        prev.into_iter().collect(),
                    );
                    prev = Some(t);
                }
            }
        }
    }

    /// Channel `channel`'s pipeline of `hops` (positions) run whole from
    /// the collective's step `first_step`, one step of `bytes`, each hop
    /// forwarding after `waits` (none: every hop sends its own at once).
    fn push_pipeline(
        &mut self,
        channel: u32,
        first_step: u32,
        bytes: u64,
        hops: Vec<(usize, usize)>,
        waits: Vec<Vec<u32>>,
    ) {
        let members = self.members;
        let plan = PipelinePlan {
            channel: self.channel_base + channel,
            first_step,
            hops: hops.into_iter().map(|(a, b)| (members[a], members[b])).collect(),
            steps: 1,
            segment: bytes,
            slice: self.slice,
            waits,
        };
        self.pipelines.as_deref_mut().expect("run whole").push(plan);
    }

    fn send_recv(&mut self, per_channel: &[u64], offset: usize) {
        let n = self.members.len();
        for (c, &bytes) in per_channel.iter().enumerate() {
            for i in 0..n {
                for (j, &slice) in slices(bytes, self.slice).iter().enumerate() {
                    self.emit(i, (i + offset) % n, slice, c as u32, 0, j as u32, vec![]);
                }
            }
        }
    }

    /// Every position sends to every other, peers in order i+1, i+2, ...,
    /// at most `concurrent` peers at a time: the send to the q-th peer
    /// waits for the (q - concurrent)-th to complete.
    fn all_to_all(&mut self, channels: u32, concurrent: Option<u32>, size: &dyn Fn(usize, usize) -> u64) {
        let n = self.members.len();
        let window = concurrent.map_or(n, |p| p.max(1) as usize);
        for i in 0..n {
            let mut sent_to: Vec<Vec<TransferId>> = Vec::new();
            for q in 1..n {
                let j = (i + q) % n;
                let deps = if q > window { sent_to[q - 1 - window].clone() } else { vec![] };
                let mut mine = Vec::new();
                for (c, part) in split(size(i, j), channels as u64).enumerate() {
                    mine.push(self.emit(i, j, part, c as u32, q as u32, j as u32, deps.clone()));
                }
                sent_to.push(mine);
            }
        }
    }

    /// NCCL's double binary tree: channel c uses tree c mod 2. For each
    /// slice, a rank sends its partial sum to its parent once every child's
    /// arrived (reduce), and the root's result flows back down (broadcast).
    fn double_tree(&mut self, per_channel: &[u64]) {
        let n = self.members.len();
        if self.pipelines.is_some() {
            for (c, &bytes) in per_channel.iter().enumerate() {
                let (hops, waits) = tree_hops(&binary_tree(n, c % 2 == 1));
                self.push_pipeline(c as u32, 0, bytes, hops, waits);
            }
            return;
        }
        for (c, &bytes) in per_channel.iter().enumerate() {
            let tree = binary_tree(n, c % 2 == 1);
            for (j, &slice) in slices(bytes, self.slice).iter().enumerate() {
                // Reduce: leaves first (deepest levels first).
                let mut up: Vec<Option<TransferId>> = vec![None; n];
                for &v in tree.bottom_up.iter() {
                    if let Some(parent) = tree.parent[v] {
                        let deps = tree.children[v].iter().filter_map(|&ch| up[ch]).collect();
                        up[v] = Some(self.emit(v, parent, slice, c as u32, tree.level[v], j as u32, deps));
                    }
                }
                // Broadcast: root first.
                let mut down: Vec<Option<TransferId>> = vec![None; n];
                for &v in tree.bottom_up.iter().rev() {
                    let ready: Vec<TransferId> = match tree.parent[v] {
                        None => tree.children[v].iter().filter_map(|&ch| up[ch]).collect(),
                        Some(_) => down[v].into_iter().collect(),
                    };
                    for &ch in &tree.children[v] {
                        down[ch] = Some(self.emit(v, ch, slice, c as u32, tree.level[ch], j as u32, ready.clone()));
                    }
                }
            }
        }
    }
}

/// A tree all-reduce's hops, each after those it waits for, with what it
/// waits for: up from every position to its parent once its children's
/// partial sums arrived, then down from the root (once its children's
/// arrived) and from every other position once its parent's result did.
fn tree_hops(tree: &Tree) -> (Vec<(usize, usize)>, Vec<Vec<u32>>) {
    let n = tree.parent.len();
    let (mut hops, mut waits) = (Vec::new(), Vec::new());
    let mut up = vec![u32::MAX; n];
    for &v in &tree.bottom_up {
        if let Some(parent) = tree.parent[v] {
            up[v] = hops.len() as u32;
            hops.push((v, parent));
            waits.push(tree.children[v].iter().map(|&ch| up[ch]).collect());
        }
    }
    let mut down = vec![u32::MAX; n];
    for &v in tree.bottom_up.iter().rev() {
        let ready: Vec<u32> = match tree.parent[v] {
            None => tree.children[v].iter().map(|&ch| up[ch]).collect(),
            Some(_) => vec![down[v]],
        };
        for &ch in &tree.children[v] {
            down[ch] = hops.len() as u32;
            hops.push((v, ch));
            waits.push(ready.clone());
        }
    }
    (hops, waits)
}

/// A binary tree over positions 0..n.
pub struct Tree {
    pub parent: Vec<Option<usize>>,
    pub children: Vec<Vec<usize>>,
    pub level: Vec<u32>,
    /// Positions ordered deepest first.
    pub bottom_up: Vec<usize>,
}

/// The in-order binary tree NCCL builds over ranks (protocols.md s7.2):
/// rank 0 is the root with one child, the largest power of two below n;
/// a rank whose lowest set bit is b has children r - b/2 and the first of
/// r + b/2, r + b/4, ... below n. Odd ranks are leaves. The second tree of
/// the pair (`second`) is the same tree over ranks shifted by one (even n)
/// or mirrored (odd n), so leaves of one tree are interior in the other.
pub fn binary_tree(n: usize, second: bool) -> Tree {
    let rank_of = |p: usize| -> usize {
        match (second, n.is_multiple_of(2)) {
            (false, _) => p,
            (true, true) => (p + 1) % n,
            (true, false) => n - 1 - p,
        }
    };
    let mut parent = vec![None; n];
    let mut children = vec![Vec::new(); n];
    let mut level = vec![0u32; n];
    let mut order = vec![0usize];
    let mut head = 0;
    while head < order.len() {
        let p = order[head];
        head += 1;
        let kids: Vec<usize> = if p == 0 {
            if n > 1 {
                vec![1usize << (usize::BITS - 1 - (n - 1).leading_zeros())]
            } else {
                vec![]
            }
        } else {
            let b = p & p.wrapping_neg();
            let mut kids = Vec::new();
            if b > 1 {
                kids.push(p - b / 2);
                let mut step = b / 2;
                while step > 0 && p + step >= n {
                    step /= 2;
                }
                if step > 0 {
                    kids.push(p + step);
                }
            }
            kids
        };
        for k in kids {
            parent[rank_of(k)] = Some(rank_of(p));
            children[rank_of(p)].push(rank_of(k));
            level[rank_of(k)] = level[rank_of(p)] + 1;
            order.push(k);
        }
    }
    let mut bottom_up: Vec<usize> = order.into_iter().map(rank_of).collect();
    bottom_up.reverse();
    Tree { parent, children, level, bottom_up }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_trees_cover_every_rank_once() {
        for n in 1..70 {
            for second in [false, true] {
                let t = binary_tree(n, second);
                assert_eq!(t.bottom_up.len(), n, "n={n}");
                assert_eq!(t.parent.iter().filter(|p| p.is_none()).count(), 1);
                assert!(t.children.iter().all(|c| c.len() <= 2));
            }
        }
    }

    #[test]
    fn the_two_trees_swap_leaves_for_even_n() {
        let (a, b) = (binary_tree(16, false), binary_tree(16, true));
        let interior = |t: &Tree, r: usize| !t.children[r].is_empty();
        // No rank is interior in both trees.
        assert!((0..16).all(|r| !(interior(&a, r) && interior(&b, r))));
    }

    /// A tree or chain kept whole has the hops of its transfers, each
    /// waiting for the hops whose slices it forwards, as its transfers do.
    #[test]
    fn trees_and_chains_kept_whole_wait_as_their_transfers_do() {
        let expand = |op: &str, algorithm: &str, whole: bool, transfers: &mut Arena<TransferId, Transfer>| {
            let mut spec = serde_json::json!({"op": op, "algorithm": algorithm, "bytes": "4MiB", "channels": 2,
                "slice": "4MiB"});
            if op != "all_reduce" {
                spec["root"] = serde_json::json!(2);
            }
            let spec: CollectiveSpec = serde_json::from_value(spec).unwrap();
            let whole = Whole { pipelines: whole, all_to_all: false };
            let members: Vec<u32> = (0..8).collect();
            expand_collective(&spec, &members, &members, CollectiveId(0), PhaseId(0), 0, 1, whole, transfers, "c")
                .unwrap()
        };
        for (op, algorithm) in [("all_reduce", "tree"), ("broadcast", "ring"), ("reduce", "ring")] {
            let mut transfers = Arena::default();
            expand(op, algorithm, false, &mut transfers);
            let mut none = Arena::default();
            let run = expand(op, algorithm, true, &mut none);
            assert!(none.is_empty(), "{op}");
            assert_eq!(run.pipelines.len(), 2, "{op}: one per channel");
            for (c, plan) in run.pipelines.iter().enumerate() {
                assert_eq!((plan.steps, plan.segment), (1, 2 << 20), "{op}");
                // One slice a channel: a transfer per hop, in the same order.
                let mine: Vec<&Transfer> = transfers.iter().filter(|t| t.channel == c as u32).collect();
                let pairs: Vec<(u32, u32)> = mine.iter().map(|t| (t.src_rank, t.dst_rank)).collect();
                assert_eq!(plan.hops, pairs, "{op} channel {c}");
                for (h, t) in mine.iter().enumerate() {
                    let deps: Vec<(u32, u32)> =
                        t.deps.iter().map(|&d| (transfers[d].src_rank, transfers[d].dst_rank)).collect();
                    let waits: Vec<(u32, u32)> = plan.waits[h].iter().map(|&w| plan.hops[w as usize]).collect();
                    assert_eq!(waits, deps, "{op} channel {c} hop {h}");
                    assert!(plan.waits[h].iter().all(|&w| (w as usize) < h), "{op}: a hop after those it waits for");
                }
            }
        }
    }

    #[test]
    fn ring_all_reduce_moves_2_n_minus_1_over_n_of_the_data() {
        let mut transfers = Arena::default();
        let spec: CollectiveSpec =
            serde_json::from_value(serde_json::json!({"op": "all_reduce", "bytes": "8MiB", "channels": 2})).unwrap();
        let run = expand_collective(
            &spec,
            &[0, 1, 2, 3],
            &[0, 1, 2, 3],
            CollectiveId(0),
            PhaseId(0),
            0,
            1,
            Whole::default(),
            &mut transfers,
            "c",
        )
        .unwrap();
        let per_rank: u64 = transfers.iter().filter(|t| t.src_rank == 0).map(|t| t.bytes).sum();
        assert_eq!(per_rank, 2 * 3 * (8 << 20) / 4);
        assert!(run.pipelines.is_empty());
        // Whole, the same collective is its two rings, each hop sending as much.
        let mut none = Arena::default();
        let whole = expand_collective(
            &spec,
            &[0, 1, 2, 3],
            &[0, 1, 2, 3],
            CollectiveId(0),
            PhaseId(0),
            0,
            1,
            Whole { pipelines: true, all_to_all: true },
            &mut none,
            "c",
        )
        .unwrap();
        assert!(none.is_empty() && whole.transfers.is_empty());
        assert_eq!(whole.pipelines.len(), 2);
        assert_eq!(whole.pipelines[1].hops, [(0, 1), (1, 2), (2, 3), (3, 0)]);
        assert_eq!(whole.pipelines.iter().map(|r| u64::from(r.steps) * r.segment).sum::<u64>(), per_rank);
        assert_eq!(run.chain, 6);
        // Step k's send waits for the same slice from the predecessor.
        for t in &transfers {
            for &d in &t.deps {
                let dep = &transfers[d];
                assert_eq!((dep.dst_rank, dep.step + 1, dep.chunk), (t.src_rank, t.step, t.chunk));
            }
        }
    }
}
