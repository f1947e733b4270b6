//! What a switch decides, each as a function of the packet and the switch's
//! own state that returns a verdict: where to forward (shortest-path routes,
//! and over their equal-cost next hops ECMP's hash, adaptive routing by
//! sampled queue depth, Tomahawk's port quality, DRILL's sampled queues or
//! LetFlow's flowlets: the `Balancer`, which may also follow a PathID the
//! sender wrote, or ConWeave's per-flow paths written by the source ToR;
//! or static SRv6 micro-SID source routes), whether to buffer
//! or trim (`admission`), whether to mark ECN (`ecn`). PFC's verdicts are
//! the ingress port's (`net::pfc`).

pub mod adaptive;
pub mod admission;
pub mod conweave;
mod drill;
mod ecmp;
pub mod ecn;
mod letflow;
pub mod path_id;
mod routes;
pub mod srv6;
mod tomahawk;

pub use adaptive::AdaptiveRouting;
pub use conweave::Conweave;
pub use drill::Drill;
pub use ecmp::{ecmp_hash, ecmp_pick, switch_seed};
pub use letflow::Letflow;
pub use path_id::PathIdForwarding;
pub use routes::{Routes, MAX_TABLE_ENTRIES};
pub use srv6::Srv6;
pub use tomahawk::TomahawkAr;

/// How switches choose among equal-cost next hops, with the state they keep
/// for it (`switch.forwarding`).
pub enum Balancer {
    /// By a hash of the packet's flow (ECMP), or not at all: the sender's
    /// source route decides (SRv6).
    Hash,
    Adaptive(AdaptiveRouting),
    Drill(Drill),
    Letflow(Letflow),
    PathId(Box<PathIdForwarding>),
    ArTomahawk(TomahawkAr),
    /// ConWeave's ToRs steer flows and put them back in order; other
    /// switches follow the path a ToR wrote.
    Conweave(Box<Conweave>),
}
