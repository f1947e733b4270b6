//! Congestion controllers that transports use to pace their QPs.

pub mod dcqcn;

pub use dcqcn::{Dcqcn, DcqcnConfig};
