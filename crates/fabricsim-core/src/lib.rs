//! fabricsim-core: a discrete-event, packet-level simulator of AI-training
//! networks. Pure Rust: no Python, no files, no terminal, no wall clock.
//!
//! Layers, bottom to top (a module only uses the ones below it):
//! - `units`, `error`, `engine`: time, rates and sizes; errors; the event
//!   queue and random streams.
//! - `net`, `cc`, `metrics`, `scenario`: packets, ports, queues, buffers,
//!   ECN, PFC and trimming; congestion controllers; counters and samples;
//!   the scenario schema.
//! - `topology`, `transport`, `faults`, `clustermapper`: the graph and its
//!   generators; the RoCEv2 and MRC transports; failure schedules; the
//!   probe-based fault map.
//! - `switch`, `nic`: forwarding (routes, ECMP); NIC ports and QP scheduling.
//! - `workload`, `control`: flows and traffic generators; routing
//!   reconvergence.
//! - `sim`: the `Simulation` that owns everything and runs the loop.

pub mod error;
pub mod ids;
pub mod tagged;
pub mod units;

pub mod engine;
pub mod net;
pub mod topology;

pub mod cc;
pub mod metrics;

pub mod clustermapper;
pub mod faults;
pub mod transport;
pub mod workload;

pub mod nic;
pub mod switch;

pub mod scenario;
pub mod sim;

pub use error::ScenarioError;
pub use metrics::RunOutput;
pub use scenario::Scenario;
pub use sim::{Progress, Simulation};
