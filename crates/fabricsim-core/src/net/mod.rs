//! What every network element shares: packets, their pool and wire sizes,
//! entropy values, ports with strict-priority egress queues and their PFC
//! verdicts, the shared buffer with dynamic thresholds and the RED curve of
//! ECN marking. The decisions a switch makes with them are in `switch`.

mod buffer;
pub mod capture;
pub mod config;
mod ev;
pub mod headers;
pub mod packet;
mod pfc;
mod port;

pub use buffer::{ecn_mark_probability, Admission, SharedBuffer};
pub use config::{
    AdaptiveConfig, ConweaveConfig, DrillConfig, EcmpConfig, EcnConfig, Forwarding, LetflowConfig, PfcConfig,
    SwitchConfig, TomahawkArConfig, TrimConfig,
};
pub use ev::{Ev, PathSpace, MAX_PLANES};
pub use headers::IpVersion;
pub use packet::{
    flag, Packet, PacketId, PacketKind, PacketPool, Usids, CLASSES, CLASS_CONTROL, CLASS_DATA, NO_PORT, USIDS,
};
pub use port::{DropCause, Port, PortCounters, PortId, DROP_CAUSES, HOT_LINES};
