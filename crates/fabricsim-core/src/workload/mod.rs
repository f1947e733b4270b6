//! Traffic: explicit flows and the generators the papers use (permutation,
//! N-to-1 incast, all-to-all, uniform random, racks to racks), expanded into
//! flows once, before the run, from their own random stream; and jobs of
//! collectives and compute phases (`job`, `collective`, `program`).

pub mod collective;
pub mod job;
pub mod program;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::engine::Rng;
use crate::error::{invalid, once_each, ScenarioError};
pub use crate::topology::NicRef;
use crate::topology::{NodeId, NodeRole, Topology};
use crate::transport::Verb;
use crate::units::{Bytes, Rate, Time};

/// One traffic source of the scenario, chosen by `kind`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TrafficSpec {
    Flow(Flow),
    Permutation(Permutation),
    Incast(Incast),
    AllToAll(AllToAll),
    UniformRandom(UniformRandom),
    RacksToRacks(RacksToRacks),
    DoubleBinaryTree(DoubleBinaryTree),
}

crate::kind_tagged!(TrafficSpec {
    "flow" => Flow,
    "permutation" => Permutation,
    "incast" => Incast,
    "all_to_all" => AllToAll,
    "uniform_random" => UniformRandom,
    "racks_to_racks" => RacksToRacks,
    "double_binary_tree" => DoubleBinaryTree,
});

impl TrafficSpec {
    /// The rate its flows are paced at, if it sets one.
    pub fn rate(&self) -> Option<Rate> {
        match self {
            TrafficSpec::Flow(t) => t.rate,
            TrafficSpec::Permutation(t) => t.rate,
            TrafficSpec::Incast(t) => t.rate,
            TrafficSpec::AllToAll(t) => t.rate,
            TrafficSpec::UniformRandom(t) => t.rate,
            TrafficSpec::RacksToRacks(t) => t.rate,
            TrafficSpec::DoubleBinaryTree(t) => t.rate,
        }
    }
}

/// One flow: an RDMA WRITE of `bytes` from `src` to `dst`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    pub src: NicRef,
    pub dst: NicRef,
    pub bytes: Bytes,
    #[serde(default)]
    pub start: Time,
    /// QPs for this flow (default: the transport's `qps`).
    pub qps: Option<u32>,
    /// Caps the sending rate at the NIC, split evenly over the QPs (the
    /// NIC's per-QP hardware rate limiter, as `ib_write_bw --rate_limit`
    /// sets it), counted in bytes on the wire. Default: none.
    pub rate: Option<Rate>,
    /// The RDMA operation: `write`; `write_with_imm`, whose immediate
    /// raises a completion at the responder once the whole message is in;
    /// `send`, two-sided, taking one of the RECVs the responder keeps
    /// posted (`transport.recv_depth`); or `read`: `dst` reads `bytes` from
    /// `src` (the data still flows from src to dst), asking with READ
    /// requests. SENDs and READs need RoCEv2 in order.
    #[serde(default)]
    pub op: RdmaOp,
    /// MRC only: the EVs this flow's QPs spray over, instead of drawn ones.
    pub ev_set: Option<crate::transport::mrc::EvSet>,
}

/// The RDMA operation of a flow: the two MRC supports (s2.1), SEND and READ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RdmaOp {
    #[default]
    Write,
    WriteWithImm,
    Send,
    Read,
}

impl RdmaOp {
    pub fn verb(self) -> Verb {
        match self {
            RdmaOp::Write => Verb::Write,
            RdmaOp::WriteWithImm => Verb::WriteImm,
            RdmaOp::Send => Verb::Send,
            RdmaOp::Read => Verb::Read,
        }
    }
}

/// Every NIC sends to exactly one other NIC and receives from one: a random
/// derangement.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Permutation {
    pub bytes: Bytes,
    #[serde(default)]
    pub start: Time,
    pub qps: Option<u32>,
    /// Caps the sending rate at the NIC, split evenly over the QPs (the
    /// NIC's per-QP hardware rate limiter, as `ib_write_bw --rate_limit`
    /// sets it), counted in bytes on the wire. Default: none.
    pub rate: Option<Rate>,
}

/// N senders to one receiver, all starting together.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Incast {
    pub receiver: NicRef,
    /// The senders; or give `count` to draw them at random.
    pub senders: Option<Vec<NicRef>>,
    pub count: Option<u32>,
    pub bytes: Bytes,
    #[serde(default)]
    pub start: Time,
    pub qps: Option<u32>,
    /// Caps the sending rate at the NIC, split evenly over the QPs (the
    /// NIC's per-QP hardware rate limiter, as `ib_write_bw --rate_limit`
    /// sets it), counted in bytes on the wire. Default: none.
    pub rate: Option<Rate>,
}

/// Every NIC sends `bytes` to every other NIC.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllToAll {
    pub bytes: Bytes,
    #[serde(default)]
    pub start: Time,
    pub qps: Option<u32>,
    /// Caps the sending rate at the NIC, split evenly over the QPs (the
    /// NIC's per-QP hardware rate limiter, as `ib_write_bw --rate_limit`
    /// sets it), counted in bytes on the wire. Default: none.
    pub rate: Option<Rate>,
}

/// `flows` flows between uniformly random distinct pairs, with start times
/// uniform over [start, start + window).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UniformRandom {
    pub flows: u32,
    pub bytes: Bytes,
    #[serde(default)]
    pub start: Time,
    #[serde(default)]
    pub window: Time,
    pub qps: Option<u32>,
    /// Caps the sending rate at the NIC, split evenly over the QPs (the
    /// NIC's per-QP hardware rate limiter, as `ib_write_bw --rate_limit`
    /// sets it), counted in bytes on the wire. Default: none.
    pub rate: Option<Rate>,
}

/// NIC i under ToR `src_racks[k]` sends to NIC i under ToR `dst_racks[k]`
/// (mrc-srv6-multiplane.txt appendix, Fig 20). Racks are ToR indices in
/// plane 0.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RacksToRacks {
    pub src_racks: Vec<u32>,
    pub dst_racks: Vec<u32>,
    pub bytes: Bytes,
    #[serde(default)]
    pub start: Time,
    pub qps: Option<u32>,
    /// Caps the sending rate at the NIC, split evenly over the QPs (the
    /// NIC's per-QP hardware rate limiter, as `ib_write_bw --rate_limit`
    /// sets it), counted in bytes on the wire. Default: none.
    pub rate: Option<Rate>,
}

/// PRO's Tree traffic (pro-deterministic-lb.txt s6.A): the NICs, in a
/// random order, take the positions of NCCL's two binary trees (the second
/// mirrors the first, so a rank inner in one is a leaf in the other), and
/// every NIC sends `bytes` to its parent in each tree at once: one reduce
/// step of a double-binary-tree all-reduce.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DoubleBinaryTree {
    pub bytes: Bytes,
    #[serde(default)]
    pub start: Time,
    pub qps: Option<u32>,
    /// Caps the sending rate at the NIC, split evenly over the QPs (the
    /// NIC's per-QP hardware rate limiter, as `ib_write_bw --rate_limit`
    /// sets it), counted in bytes on the wire. Default: none.
    pub rate: Option<Rate>,
}

/// Splits `total` into `parts` nearly equal shares, the larger ones first.
pub fn split_evenly(total: u64, parts: u64) -> impl Iterator<Item = u64> {
    (0..parts).map(move |i| total / parts + u64::from(i < total % parts))
}

/// The parts a message of `bytes` is striped into over `qps` QPs, in QP
/// order: a share for each QP that has bytes, and for a message of none
/// one empty part on the first, which still crosses as a packet (NCCL
/// signals every step of a tiny collective).
pub fn message_parts(bytes: u64, qps: usize) -> impl Iterator<Item = u64> {
    split_evenly(bytes, qps as u64).take(message_part_count(bytes, qps))
}

/// How many parts `message_parts` gives.
pub fn message_part_count(bytes: u64, qps: usize) -> usize {
    bytes.clamp(1, qps as u64) as usize
}

/// A flow to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub src: NodeId,
    pub dst: NodeId,
    pub bytes: u64,
    pub start: Time,
    pub qps: u32,
    /// What the flow posts: a write, with immediate or not, or a SEND.
    pub verb: Verb,
    /// Hand-picked MRC EVs.
    pub ev_set: Option<crate::transport::mrc::EvSet>,
    /// The NIC's rate limit for the whole flow.
    pub rate: Option<Rate>,
}

impl FlowSpec {
    /// A plain write (no immediate, no pinned EVs).
    fn write(src: NodeId, dst: NodeId, bytes: u64, start: Time, qps: u32, rate: Option<Rate>) -> FlowSpec {
        FlowSpec { src, dst, bytes, start, qps, verb: Verb::Write, ev_set: None, rate }
    }
}

/// The ToR index (plane 0) each NIC's first port attaches to.
pub(crate) fn racks(topo: &Topology, nics: &[NodeId]) -> Vec<(u32, NodeId)> {
    let adj = topo.adjacency();
    nics.iter()
        .filter_map(|&nic| {
            let link = *adj[nic.0 as usize].first()?;
            let tor = topo.peer(link, nic);
            match topo.node(tor).role {
                NodeRole::Switch { .. } => Some((topo.node(tor).index, nic)),
                NodeRole::Nic { .. } => None,
            }
        })
        .collect()
}

/// Expands the traffic section into flows.
pub fn expand(
    specs: &[TrafficSpec],
    topo: &Topology,
    default_qps: u32,
    seed: u64,
) -> Result<Vec<FlowSpec>, ScenarioError> {
    let nics = topo.nics();
    let mut flows = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let field = |name: &str| format!("traffic[{i}].{name}");
        let mut rng = Rng::stream(seed, &[0x7AF1C, i as u64]);
        let check_bytes = |bytes: Bytes| {
            if bytes.0 == 0 {
                invalid(field("bytes"), "0B: a flow must carry at least one byte")
            } else {
                Ok(bytes.0)
            }
        };
        let qps_of = |qps: &Option<u32>| match qps {
            Some(0) => invalid(field("qps"), "0: a flow needs at least one QP"),
            Some(q) => Ok(*q),
            None => Ok(default_qps),
        };
        if nics.len() < 2 {
            return invalid(field("kind"), "traffic needs at least two NICs");
        }
        match spec {
            TrafficSpec::Flow(Flow { src, dst, bytes, start, qps, rate, op, ev_set }) => {
                let (s, d) = (src.resolve(topo, &nics, &field("src"))?, dst.resolve(topo, &nics, &field("dst"))?);
                if s == d {
                    return invalid(field("dst"), "a flow's source and destination must differ");
                }
                if let Some(set) = ev_set {
                    let planes = topo.links.iter().filter(|l| l.a == s || l.b == s).count();
                    if set.active.is_empty() {
                        return invalid(field("ev_set.active"), "[]: a QP needs at least one active EV");
                    }
                    if let Some(ev) = set.active.iter().chain(&set.backup).find(|ev| ev.plane() >= planes) {
                        return invalid(
                            field("ev_set"),
                            format!("EV {ev} names plane {}, the NIC has {planes}", ev.plane()),
                        );
                    }
                }
                flows.push(FlowSpec {
                    src: s,
                    dst: d,
                    bytes: check_bytes(*bytes)?,
                    start: *start,
                    qps: qps_of(qps)?,
                    verb: op.verb(),
                    ev_set: ev_set.clone(),
                    rate: *rate,
                });
            }
            TrafficSpec::Permutation(Permutation { bytes, start, qps, rate }) => {
                let (bytes, qps) = (check_bytes(*bytes)?, qps_of(qps)?);
                // Sattolo's algorithm: a uniformly random single cycle, so
                // nobody sends to itself.
                let mut order: Vec<NodeId> = nics.clone();
                for k in (1..order.len()).rev() {
                    let j = rng.below(k as u64) as usize;
                    order.swap(k, j);
                }
                for (k, &src) in nics.iter().enumerate() {
                    flows.push(FlowSpec::write(src, order[k], bytes, *start, qps, *rate));
                }
            }
            TrafficSpec::Incast(Incast { receiver, senders, count, bytes, start, qps, rate }) => {
                let (bytes, qps) = (check_bytes(*bytes)?, qps_of(qps)?);
                let dst = receiver.resolve(topo, &nics, &field("receiver"))?;
                let srcs: Vec<NodeId> = match (senders, count) {
                    (Some(list), None) => list
                        .iter()
                        .enumerate()
                        .map(|(k, r)| r.resolve(topo, &nics, &field(&format!("senders[{k}]"))))
                        .collect::<Result<_, _>>()?,
                    (None, Some(n)) => {
                        let mut others: Vec<NodeId> = nics.iter().copied().filter(|&n| n != dst).collect();
                        if *n as usize > others.len() || *n == 0 {
                            return invalid(field("count"), format!("{n}: between 1 and {} senders", others.len()));
                        }
                        rng.shuffle(&mut others);
                        others.truncate(*n as usize);
                        others
                    }
                    _ => return invalid(field("senders"), "give either `senders` or `count`"),
                };
                if srcs.is_empty() {
                    return invalid(field("senders"), "[]: an incast needs at least one sender");
                }
                if let Some(k) = srcs.iter().position(|&s| s == dst) {
                    return invalid(field(&format!("senders[{k}]")), "the receiver cannot send to itself");
                }
                once_each(&field("senders"), &srcs, |k| topo.name(srcs[k]))?;
                flows.extend(srcs.into_iter().map(|src| FlowSpec::write(src, dst, bytes, *start, qps, *rate)));
            }
            TrafficSpec::AllToAll(AllToAll { bytes, start, qps, rate }) => {
                let (bytes, qps) = (check_bytes(*bytes)?, qps_of(qps)?);
                for &src in &nics {
                    for &dst in nics.iter().filter(|&&d| d != src) {
                        flows.push(FlowSpec::write(src, dst, bytes, *start, qps, *rate));
                    }
                }
            }
            TrafficSpec::UniformRandom(UniformRandom { flows: n, bytes, start, window, qps, rate }) => {
                let (bytes, qps) = (check_bytes(*bytes)?, qps_of(qps)?);
                if *n == 0 {
                    return invalid(field("flows"), "0: draw at least one flow");
                }
                for _ in 0..*n {
                    let src = nics[rng.below(nics.len() as u64) as usize];
                    let mut dst = src;
                    while dst == src {
                        dst = nics[rng.below(nics.len() as u64) as usize];
                    }
                    let offset = if window.0 > 0 { Time(rng.below(window.0)) } else { Time::ZERO };
                    flows.push(FlowSpec::write(src, dst, bytes, *start + offset, qps, *rate));
                }
            }
            TrafficSpec::RacksToRacks(RacksToRacks { src_racks, dst_racks, bytes, start, qps, rate }) => {
                let (bytes, qps) = (check_bytes(*bytes)?, qps_of(qps)?);
                if src_racks.is_empty() {
                    return invalid(field("src_racks"), "[]: name at least one rack to send from");
                }
                if let Some(k) = src_racks.iter().zip(dst_racks).position(|(a, b)| a == b) {
                    return invalid(
                        field(&format!("dst_racks[{k}]")),
                        format!("{}: the same rack as src_racks[{k}]; its NICs would send to themselves", dst_racks[k]),
                    );
                }
                if src_racks.len() != dst_racks.len() {
                    return invalid(
                        field("dst_racks"),
                        format!("{} racks, but src_racks has {}", dst_racks.len(), src_racks.len()),
                    );
                }
                let placement = racks(topo, &nics);
                let members = |rack: u32, name: &str| -> Result<Vec<NodeId>, ScenarioError> {
                    let m: Vec<NodeId> = placement.iter().filter(|(r, _)| *r == rack).map(|&(_, n)| n).collect();
                    if m.is_empty() {
                        invalid(field(name), format!("there is no rack (ToR) {rack} with NICs"))
                    } else {
                        Ok(m)
                    }
                };
                for (&a, &b) in src_racks.iter().zip(dst_racks) {
                    let (srcs, dsts) = (members(a, "src_racks")?, members(b, "dst_racks")?);
                    for (&src, &dst) in srcs.iter().zip(&dsts) {
                        flows.push(FlowSpec::write(src, dst, bytes, *start, qps, *rate));
                    }
                }
            }
            TrafficSpec::DoubleBinaryTree(DoubleBinaryTree { bytes, start, qps, rate }) => {
                let (bytes, qps) = (check_bytes(*bytes)?, qps_of(qps)?);
                let mut order: Vec<NodeId> = nics.clone();
                rng.shuffle(&mut order);
                for second in [false, true] {
                    let tree = program::binary_tree(order.len(), second);
                    for (position, parent) in tree.parent.iter().enumerate() {
                        if let Some(parent) = *parent {
                            let (src, dst) = (order[position], order[parent]);
                            flows.push(FlowSpec::write(src, dst, bytes, *start, qps, *rate));
                        }
                    }
                }
            }
        }
    }
    Ok(flows)
}
