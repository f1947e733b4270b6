//! fabricsim-core: a discrete-event, packet-level simulator of AI-training
//! networks, with a flow-level model for full-cluster scale. Pure Rust: no
//! Python, no files, no terminal, no wall clock.
//!
//! Modules, lowest layer first (a module only uses modules in lines before
//! its own, except that `scenario` and `sim` take the flow model's settings
//! and whole collectives from `fluid`; docs/ARCHITECTURE.md has the whole
//! map and a packet's journey):
//! - `units`, `error`, `ids`, `tagged`: time, rates and sizes; errors;
//!   typed ids and arenas; `kind`-tagged enums.
//! - `engine`: the event queue and random streams.
//! - `topology`: the graph and its generators.
//! - `net`, `cc`: packets and their pool, EVs, ports and queues, PFC, the
//!   shared buffer, wire sizes, pcap frames; congestion controllers.
//! - `transport`: the `Transport` interface; RoCEv2 (with PRO's and
//!   MP-RDMA's receive sides), MRC and Spectrum-X's.
//! - `workload`, `metrics`, `faults`, `clustermapper`: flows, jobs and
//!   collectives; telemetry and result tables; failure schedules; the
//!   probe-based fault map.
//! - `switch`, `nic`: a switch's decisions as verdicts (routes, ECMP, SRv6,
//!   adaptive routing, DRILL, LetFlow, PRO's PathIDs, ConWeave, Tomahawk's
//!   AR, admission and trimming, ECN); a NIC's QP records and scheduling,
//!   PRO's orchestrator and RePaC's path selection.
//! - `scenario`: the schema's root and the checks that need no topology.
//! - `sim`: the `Simulation` that owns everything, runs the loop (on one
//!   thread, or cut in two on two) and routes what each element decides.
//! - `fluid`: the flow-level model of the same scenarios, for whole clusters.
//! - `model`: the model a scenario's `mode` names, built and run alike.

pub mod error;
pub mod ids;
pub mod tagged;
pub mod units;

pub mod engine;
pub mod topology;

pub mod cc;
pub mod net;

pub mod transport;

pub mod clustermapper;
pub mod faults;
pub mod metrics;
pub mod workload;

pub mod nic;
pub mod switch;

pub mod scenario;
pub mod sim;

pub mod fluid;
pub mod model;

pub use error::ScenarioError;
pub use fluid::FluidSimulation;
pub use metrics::RunOutput;
pub use model::Model;
pub use scenario::Scenario;
pub use sim::{Progress, Setup, Simulation};
