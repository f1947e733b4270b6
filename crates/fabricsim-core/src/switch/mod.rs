//! Forwarding in switches: shortest-path routes computed from the topology
//! and ECMP over equal-cost next hops, or static SRv6 micro-SID source
//! routes.

mod ecmp;
mod routes;
pub mod srv6;

pub use ecmp::ecmp_hash;
pub use routes::{Routes, MAX_TABLE_ENTRIES};
pub use srv6::Srv6;
