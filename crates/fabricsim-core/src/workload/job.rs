//! Jobs: ranks placed on GPUs (each GPU with its own NIC), and a training
//! step made of compute phases and collectives, repeated for some
//! iterations. Several jobs run at once with separate metrics (a victim and
//! a noise job, spectrum-x.txt s6.3; an incast beside a victim,
//! mrc-srv6-multiplane.txt s5.2.8).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::collective::CollectiveSpec;
use super::NicRef;
use crate::units::{Rate, Time};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Names the job in the outputs.
    pub name: String,
    /// Number of ranks (GPUs); rank r runs on the GPU of one NIC.
    pub ranks: u32,
    /// Where the ranks go. Jobs are placed in order on NICs no earlier job
    /// took.
    #[serde(default)]
    pub placement: Placement,
    /// When the job starts.
    #[serde(default)]
    pub start: Time,
    /// Times the phases run, one after the other.
    #[serde(default = "one")]
    pub iterations: u32,
    /// The training step: compute phases and collectives. A phase starts
    /// when the phases it runs `after` have finished (by default the one
    /// before it), so phases can overlap.
    pub phases: Vec<PhaseSpec>,
    /// What the job does when one of its QPs fails. Without this it stops
    /// for good. With it, it aborts at once (all its connections torn
    /// down), and `restart_delay` later starts again from its last
    /// checkpoint on new connections (alibaba-hpn.txt s2.3: a failure
    /// rolls training back to its last checkpoint).
    #[serde(default)]
    pub checkpoint: Option<CheckpointSpec>,
}

/// When a job saves its state, and how long it takes to restart from it.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSpec {
    /// A checkpoint is taken after every `every` iterations (taking no
    /// time: the paper's checkpoints cost about 5% of training, s2.3,
    /// which a step's compute phase can include).
    pub every: u32,
    /// From the failure until the job runs again: detecting it, tearing
    /// the job down, rescheduling and loading the checkpoint. No default:
    /// the paper gives none, and it sets how much a failure costs.
    pub restart_delay: Time,
    /// Told of a SHIFT fallback on one of its connections, the job stops
    /// once its next checkpoint is taken and restarts from it
    /// `restart_delay` later on new connections, losing nothing: the
    /// busy-backup run of shift-rdma-failover.txt s5.2 (Fig 10a), and what
    /// its s4.3 suggests. Default false: it runs on over the backup.
    #[serde(default)]
    pub stop_after_fallback: bool,
}

fn one() -> u32 {
    1
}

/// How a job's ranks are placed on the topology's NICs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Placement {
    /// Rank r on the r-th free NIC: hosts filled in order.
    #[default]
    Contiguous,
    /// All ranks under one ToR (in plane 0): the first ToR with enough free
    /// NICs.
    T0Local,
    /// Consecutive ranks under different ToRs, round robin over the ToRs
    /// (and over pods first in a 3-tier Clos), so that every ring neighbour
    /// pair crosses the spine: the papers' worst case.
    CrossT1,
    /// Free NICs drawn at random from the job's own random stream.
    Random,
    /// Rank r on the r-th NIC of the list.
    Explicit(Vec<NicRef>),
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Names the phase in the outputs and in other phases' `after`.
    pub name: String,
    /// Phases that must finish before this one starts; default: the phase
    /// listed before it (none for the first).
    #[serde(default)]
    pub after: Option<Vec<String>>,
    /// A compute phase: every rank is busy for this long.
    #[serde(default)]
    pub compute: Option<Time>,
    /// A collective over groups of the job's ranks.
    #[serde(default)]
    pub collective: Option<CollectiveSpec>,
}

/// The intra-host link between GPUs of one host (NVLink class). Transfers
/// between ranks on the same host use it instead of the network: each GPU
/// sends through its own port at `rate`, one transfer after another, and
/// each transfer takes `latency` more.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct IntraHostConfig {
    /// Per-GPU bandwidth. Default 3600Gbps: NVLink 4 on H100, 450 GB/s per
    /// direction (NVIDIA H100 data sheet: 900 GB/s bidirectional).
    pub rate: Rate,
    /// Latency of one transfer. Default 1us, a typical small-message NVLink
    /// latency through NVSwitch.
    pub latency: Time,
}

impl Default for IntraHostConfig {
    fn default() -> Self {
        IntraHostConfig { rate: Rate::from_gbps(3600), latency: Time::from_us(1) }
    }
}

impl IntraHostConfig {
    /// A transfer of `bytes` alone on the link: its bytes, no packet
    /// headers (the link carries a transfer whole), then its latency.
    pub fn alone(&self, bytes: u64) -> Time {
        self.rate.tx_time(bytes) + self.latency
    }
}
