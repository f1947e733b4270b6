//! What a switch decides, each as a function of the packet and the switch's
//! own state that returns a verdict: where to forward (shortest-path routes
//! and ECMP over equal-cost next hops, adaptive routing over them by sampled
//! queue depth, or static SRv6 micro-SID source routes), whether to buffer or trim (`admission`), whether to mark ECN
//! (`ecn`). PFC's verdicts are the ingress port's (`net::pfc`).

pub mod adaptive;
pub mod admission;
mod ecmp;
pub mod ecn;
mod routes;
pub mod srv6;

pub use adaptive::AdaptiveRouting;
pub use ecmp::{ecmp_hash, ecmp_pick};
pub use routes::{Routes, MAX_TABLE_ENTRIES};
pub use srv6::Srv6;
