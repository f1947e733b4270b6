//! Collectives as NCCL runs them over RDMA writes: the parameters, and their
//! expansion into transfers between ranks with the dependencies NCCL obeys
//! (a rank forwards a piece of data only after it has received it).
//!
//! Sizes follow nccl-tests: `bytes` is the buffer size S of the collective,
//! so all-gather's S is the gathered output, reduce-scatter's the input,
//! all-to-all's each rank's send buffer (S/n to every peer), send/recv's
//! what each rank sends (protocols.md s7.3-s7.4).
//!
//! Data is cut over `channels` (each a ring or tree with its own
//! connections) and, within a channel, into slices of at most `slice`
//! bytes that are pipelined step to step (NCCL's Simple protocol: 4 MiB
//! buffers of 8 steps, 2-step slices of 1 MiB, protocols.md s7.1). A
//! connection has as many slices in flight as its receiver has buffer slots
//! (`credits`); a slot is taken to be free once its slice has arrived.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::RdmaOp;
use crate::units::Bytes;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveOp {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    /// All-to-all with a per-pair size matrix (`matrix`), e.g. MoE token
    /// dispatch.
    AllToAllv,
    /// Every rank sends `bytes` to the rank `peer_offset` after it (the
    /// nccl-tests sendrecv pattern; a pipeline-parallel send/recv).
    SendRecv,
    Broadcast,
    Reduce,
}

impl CollectiveOp {
    /// nccl-tests' bus-bandwidth factor for `n` ranks (protocols.md s7.4).
    pub fn bus_factor(self, n: u32) -> f64 {
        let n = n as f64;
        match self {
            CollectiveOp::AllReduce => 2.0 * (n - 1.0) / n,
            CollectiveOp::AllGather
            | CollectiveOp::ReduceScatter
            | CollectiveOp::AllToAll
            | CollectiveOp::AllToAllv => (n - 1.0) / n,
            CollectiveOp::SendRecv | CollectiveOp::Broadcast | CollectiveOp::Reduce => 1.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CollectiveOp::AllReduce => "all_reduce",
            CollectiveOp::AllGather => "all_gather",
            CollectiveOp::ReduceScatter => "reduce_scatter",
            CollectiveOp::AllToAll => "all_to_all",
            CollectiveOp::AllToAllv => "all_to_allv",
            CollectiveOp::SendRecv => "send_recv",
            CollectiveOp::Broadcast => "broadcast",
            CollectiveOp::Reduce => "reduce",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Rings (chains for broadcast and reduce).
    #[default]
    Ring,
    /// NCCL's double binary tree, for all-reduce: two binary trees, the
    /// second the first shifted by one rank (even n) or mirrored (odd n), each
    /// carrying half of the channels (protocols.md s7.2).
    Tree,
    /// NVLink SHARP (NCCL's NVLS), for all-reduce across multi-GPU hosts:
    /// the host's NVSwitch reduces, each GPU ending with its 1/g share of
    /// the host's sum (every GPU sends each of its g - 1 peers their share,
    /// in one step); the GPUs with the same local index all-reduce their
    /// shares over the network, a ring per rail; the NVSwitch multicasts
    /// each GPU's result to its peers (the GPU sends it once: the copies
    /// are 0-byte transfers, the switch replicating it). Every host holds
    /// the same number of the group's ranks.
    Nvls,
}

/// Which ranks of the job take part, cut into groups the way parallelism
/// dimensions cut them: members of a group are `stride` ranks apart, so
/// tensor-parallel groups are consecutive ranks (stride 1) and data-parallel
/// groups take every `stride`-th rank. Rank r is in group
/// (r / (size x stride)) x stride + r mod stride, at position (r / stride)
/// mod size. The job's ranks must be a multiple of size x stride.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// Ranks per group.
    pub size: u32,
    /// Distance between consecutive members of a group. Default 1.
    #[serde(default = "one")]
    pub stride: u32,
}

fn one() -> u32 {
    1
}

fn default_channels() -> u32 {
    2
}

impl CollectiveSpec {
    /// At most how many transfers the collective expands to over `n`
    /// ranks, without expanding it: its rank-to-rank moves per channel
    /// (ring steps, tree edges, chain links, peers), times its channels,
    /// plus one per slice of the bytes every rank moves (at most 2 n times
    /// its size, which a ring all-reduce moves). Used to refuse what would
    /// not fit in memory before building it.
    pub fn transfer_bound(&self, n: u64) -> u64 {
        if n < 2 {
            return 0;
        }
        let moves = match self.op {
            CollectiveOp::AllReduce if self.algorithm == Algorithm::Tree => 4 * n,
            CollectiveOp::AllReduce => 2 * (n - 1) * n,
            CollectiveOp::AllGather | CollectiveOp::ReduceScatter => (n - 1) * n,
            CollectiveOp::AllToAll | CollectiveOp::AllToAllv => n * (n - 1),
            CollectiveOp::SendRecv | CollectiveOp::Broadcast | CollectiveOp::Reduce => n,
        };
        moves.saturating_mul(u64::from(self.channels)).saturating_add(self.moved_bound(n) / self.slice().max(1))
    }

    /// At most how many ordered pairs of its `n` ranks exchange data on one
    /// channel: the connections it opens per channel. A ring's rank sends
    /// only to the next; each of a double binary tree's two trees links
    /// n - 1 pairs, both ways.
    pub fn pair_bound(&self, n: u64) -> u64 {
        match self.op {
            _ if self.is_plain_ring() => n,
            CollectiveOp::AllReduce if self.algorithm == Algorithm::Tree => 4 * n.saturating_sub(1),
            _ => n.saturating_mul(n.saturating_sub(1)),
        }
    }

    /// At most how many bytes its `n` ranks move in all: 2 n times its
    /// size, which a ring all-reduce moves.
    pub fn moved_bound(&self, n: u64) -> u64 {
        let bytes = match &self.matrix {
            Some(m) => m.iter().flatten().fold(0u64, |sum, b| sum.saturating_add(b.0)) / n.max(1),
            None => self.bytes.map_or(0, |b| b.0),
        };
        (2 * n).saturating_mul(bytes)
    }

    /// One ring per channel over the group's ranks: a ring all-reduce,
    /// all-gather or reduce-scatter, not hierarchical.
    pub fn is_plain_ring(&self) -> bool {
        matches!(self.op, CollectiveOp::AllReduce | CollectiveOp::AllGather | CollectiveOp::ReduceScatter)
            && self.algorithm == Algorithm::Ring
            && !self.hierarchical
    }

    /// Pipelines of slices and nothing else, which the flow model can run
    /// whole (`flow_mode.collectives: pipelined`): a plain ring, a
    /// hierarchical ring all-reduce (a ring inside each host, a ring per
    /// rail, a ring inside each host, one after the other), a double
    /// binary tree all-reduce, a broadcast or reduce chain, an NVLS
    /// all-reduce (each GPU's share to its host mates, a ring per rail,
    /// the result written into the host).
    pub fn runs_as_pipelines(&self) -> bool {
        self.is_plain_ring()
            || (self.hierarchical && self.op == CollectiveOp::AllReduce && self.algorithm == Algorithm::Ring)
            || (self.op == CollectiveOp::AllReduce && self.algorithm == Algorithm::Tree)
            || matches!(self.op, CollectiveOp::Broadcast | CollectiveOp::Reduce)
            || (self.op == CollectiveOp::AllReduce && self.algorithm == Algorithm::Nvls)
    }

    /// Hops per rank and channel of its pipelines run whole, for `gpus`
    /// ranks a host: a ring's one, a hierarchical all-reduce's three (in
    /// its host, its rail, its host), a tree's two (up to its parent and
    /// down from it), a chain's one, an NVLS all-reduce's one to each host
    /// mate, one on its rail and one into its host.
    pub fn pipeline_hops_per_rank(&self, gpus: u64) -> u64 {
        match (self.op, self.algorithm) {
            (CollectiveOp::AllReduce, Algorithm::Ring) if self.hierarchical => 3,
            (CollectiveOp::AllReduce, Algorithm::Tree) => 2,
            (CollectiveOp::AllReduce, Algorithm::Nvls) => gpus + 1,
            _ => 1,
        }
    }

    /// Equal messages from every rank to every other, all at once: an
    /// all-to-all with no `concurrent_peers` window (which the flow model
    /// can run whole where the design sprays, `flow_mode.collectives:
    /// pipelined`).
    pub fn is_plain_all_to_all(&self) -> bool {
        self.op == CollectiveOp::AllToAll && self.concurrent_peers.is_none()
    }

    /// Slices in flight per connection, NCCL's default unless given.
    pub fn credits(&self) -> u32 {
        match (self.credits, self.op) {
            (Some(c), _) => c,
            (None, CollectiveOp::Broadcast | CollectiveOp::Reduce) => 8,
            (None, _) => 4,
        }
    }

    /// The slice size, NCCL's default for the operation unless given.
    pub fn slice(&self) -> u64 {
        match (self.slice, self.op) {
            (Some(b), _) => b.0,
            (None, CollectiveOp::Broadcast | CollectiveOp::Reduce) => 512 << 10,
            (None, _) => 1 << 20,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CollectiveSpec {
    pub op: CollectiveOp,
    /// The collective's buffer size S (nccl-tests convention, see above).
    /// Not used by `all_to_allv`, whose sizes come from `matrix`.
    #[serde(default)]
    pub bytes: Option<Bytes>,
    #[serde(default)]
    pub algorithm: Algorithm,
    /// Parallel rings or trees, each with its own connections. Default 2.
    #[serde(default = "default_channels")]
    pub channels: u32,
    /// Pipelining unit. Default NCCL's Simple-protocol slice: 1MiB (two
    /// 512KiB steps) for rings, 512KiB (one step) for broadcast and reduce
    /// (protocols.md s7.1).
    #[serde(default)]
    pub slice: Option<Bytes>,
    /// QPs per connection (default: the transport's `qps`); each message is
    /// striped over them.
    #[serde(default)]
    pub qps: Option<u32>,
    /// The groups that run this collective, each on its own; default: one
    /// group of all the job's ranks.
    #[serde(default)]
    pub group: Option<GroupSpec>,
    /// Root rank (group position) of broadcast and reduce. Default 0.
    #[serde(default)]
    pub root: Option<u32>,
    /// For send_recv: rank i sends to rank i + peer_offset (mod n). Default 1.
    #[serde(default)]
    pub peer_offset: Option<u32>,
    /// For all_to_all(v): how many peers a rank sends to at once, from 1 to
    /// all of them; it moves to the next peer when a send completes.
    /// Default: all peers at once.
    #[serde(default)]
    pub concurrent_peers: Option<u32>,
    /// For all_to_allv: `matrix[i][j]` bytes from group position i to j.
    #[serde(default)]
    pub matrix: Option<Vec<Vec<Bytes>>>,
    /// Slices a connection may have in flight before its sender waits for
    /// the receiver to free a buffer slot. Default NCCL's: 8 buffer steps
    /// per connection, so 4 slices of 2 steps for rings, trees and p2p and 8
    /// slices of 1 step for broadcast and reduce (protocols.md s7.1).
    #[serde(default)]
    pub credits: Option<u32>,
    /// For ring all_reduce over multi-GPU hosts: reduce-scatter inside each
    /// host, all-reduce across hosts per local GPU, all-gather inside each
    /// host.
    #[serde(default)]
    pub hierarchical: bool,
    /// The order a ring visits the ranks of multi-GPU hosts in: `ranks`,
    /// rank after rank (so a ring leaving a host by its last GPU enters the
    /// next by its first, another rail), or `rails`, as NCCL builds its
    /// rings on rail-optimized fabrics: each host's GPUs in turn, every
    /// ring entering a host by the GPU of the rail it left the last one by,
    /// channel c starting at local GPU c (only the ring's closing hop may
    /// change rails). Default `ranks`.
    #[serde(default)]
    pub ring_order: RingOrder,
    /// How each transfer goes over the network: NCCL's RDMA WRITE with
    /// immediate (`write_with_imm`, the default); `send` (two-sided, as
    /// `ib_send_bw` and MPI-style libraries do, each taking a RECV of
    /// `transport.recv_depth`); or `read` (the receiving rank reads it, as
    /// `ib_read_bw` does). SENDs and READs need RoCEv2 in order.
    #[serde(default = "nccl_rdma_op")]
    pub rdma_op: RdmaOp,
}

fn nccl_rdma_op() -> RdmaOp {
    RdmaOp::WriteWithImm
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RingOrder {
    #[default]
    Ranks,
    Rails,
}
