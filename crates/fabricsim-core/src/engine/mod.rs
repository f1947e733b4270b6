//! The discrete-event engine: a time-ordered event queue and seeded random
//! streams. Nothing here knows what an event means; `sim` defines them.

mod queue;
mod rng;

pub use queue::EventQueue;
pub use rng::{stream_seed, Rng};
