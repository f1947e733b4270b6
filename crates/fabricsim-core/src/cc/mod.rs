//! Congestion controllers that transports use to pace their QPs.

pub mod dcqcn;
pub mod nscc;
pub mod spx;

pub use dcqcn::{Dcqcn, DcqcnConfig};
pub use nscc::{Nscc, NsccConfig};
pub use spx::{SpxCc, SpxCcConfig};
