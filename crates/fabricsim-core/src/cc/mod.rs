//! Congestion controllers that transports use to pace their QPs.

pub mod dcqcn;
pub mod nscc;

pub use dcqcn::{Dcqcn, DcqcnConfig};
pub use nscc::{Nscc, NsccConfig};
