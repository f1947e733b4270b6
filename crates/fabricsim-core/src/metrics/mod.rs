//! What a run records and hands back: per-flow records, per-port counters,
//! sampled time series, and the summary. The `telemetry` section of a
//! scenario chooses what is sampled; models only raise counters.

mod histogram;
mod imbalance;
mod output;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::topology::NicRef;
use crate::units::{Bytes, Time};

pub use histogram::BandwidthHistograms;
pub use imbalance::{Imbalance, PortGroup};
pub use output::{percentile, Coded, Column, RunOutput, Series, StopReason, Table};

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Sampling period of the time series; unset records none. The flow
    /// model skips the samples of a stretch in which nothing moves (every
    /// stream stalled, waiting on its transport), resuming on the same
    /// ticks from the next event on.
    pub sample_interval: Option<Time>,
    /// Ports (`node:port`) whose queue length and transmit throughput are
    /// sampled.
    pub ports: Vec<String>,
    /// NICs whose receive goodput is sampled.
    pub hosts: Vec<NicRef>,
    /// Capture the packets sent on some ports into `telemetry.pcap`.
    pub pcap: Option<PcapConfig>,
    /// Record every collective transfer (src and dst rank, chunk, step,
    /// when it became ready and when it completed) in `transfers`.
    pub transfers: bool,
    /// Record every change of an MRC EV's state (active, backup, retired,
    /// denied) with its time and QP in `ev_log` (the paper's Figs 13, 14).
    pub ev_log: bool,
    /// Count the data packets each MRC QP sends on each EV in every sample
    /// interval, and those of them the fabric drops (time series metrics
    /// `ev_packets` and `ev_drops`, entity `qp<N>/ev<EV>`; needs
    /// `sample_interval`): the paper's per-EV activity (Fig 14) and where
    /// losses fall (Fig 4).
    pub ev_activity: bool,
    /// Bandwidth histograms of some ports in the `histograms` table
    /// (spectrum-x.txt s5.2-s5.3, Fig 7a).
    pub histograms: Option<HistogramConfig>,
    /// Queue-length and link-load imbalance over groups of each switch's
    /// ports, PRO's load-balance measures (pro-deterministic-lb.txt s6, Fig
    /// 9), in the `imbalance` table.
    pub imbalance: Option<ImbalanceConfig>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImbalanceConfig {
    /// The port groups: per switch of a tier, its ports toward the tier
    /// above (`up`) or below (`down`, NICs included).
    pub groups: Vec<ImbalanceGroup>,
    /// How often queues are compared. Default 100ns, PRO's 0.1us.
    #[serde(default = "default_queue_interval")]
    pub queue_interval: Time,
    /// The window over which link loads are compared. Default 10us, PRO's.
    #[serde(default = "default_load_interval")]
    pub load_interval: Time,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImbalanceGroup {
    /// The switches' tier (0: ToRs).
    pub tier: u8,
    pub facing: Facing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Facing {
    Up,
    Down,
}

fn default_queue_interval() -> Time {
    Time::from_ns(100)
}

fn default_load_interval() -> Time {
    Time::from_us(10)
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistogramConfig {
    /// Ports (`node:port`) whose transmit bandwidth is binned.
    pub ports: Vec<String>,
    /// Width of one time bin. Default 1us, the paper's per-microsecond
    /// histograms.
    #[serde(default = "default_resolution")]
    pub resolution: Time,
    /// Equal bandwidth bands from zero to the port's line rate. Default 10.
    #[serde(default = "default_bands")]
    pub bands: u32,
}

fn default_resolution() -> Time {
    Time::from_us(1)
}

fn default_bands() -> u32 {
    10
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PcapConfig {
    /// Ports (`node:port`) whose transmitted packets are captured.
    pub ports: Vec<String>,
    /// Bytes kept of each frame. Default 128B: every header, no payload.
    #[serde(default = "default_snaplen")]
    pub snaplen: Bytes,
    /// Stop capturing after this many packets. Default 1,000,000.
    #[serde(default = "default_max_packets")]
    pub max_packets: u64,
}

fn default_snaplen() -> Bytes {
    Bytes(128)
}

fn default_max_packets() -> u64 {
    1_000_000
}
