//! Forwarding in switches: shortest-path routes computed from the topology
//! and ECMP over equal-cost next hops.

mod ecmp;
mod routes;

pub use ecmp::ecmp_hash;
pub use routes::{Routes, MAX_TABLE_ENTRIES};
