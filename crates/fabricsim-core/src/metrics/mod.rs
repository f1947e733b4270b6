//! What a run records and hands back: per-flow records, per-port counters,
//! sampled time series, and the summary. The `telemetry` section of a
//! scenario chooses what is sampled; models only raise counters.

mod output;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Time;
use crate::workload::NicRef;

pub use output::{percentile, Column, RunOutput, Table};

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Sampling period of the time series; unset records none.
    pub sample_interval: Option<Time>,
    /// Ports (`node:port`) whose queue length and transmit throughput are
    /// sampled.
    pub ports: Vec<String>,
    /// NICs whose receive goodput is sampled.
    pub hosts: Vec<NicRef>,
    /// Record every collective transfer (src and dst rank, chunk, step,
    /// when it became ready and when it completed) in `transfers`.
    pub transfers: bool,
}
