//! Network elements below forwarding: packets and their wire sizes, ports
//! with strict-priority egress queues, the switch's shared buffer with
//! dynamic thresholds, RED-style ECN marking, PFC and packet trimming.

mod buffer;
pub mod capture;
pub mod config;
mod ev;
pub mod headers;
pub mod packet;
mod pfc;
mod port;

pub use buffer::{ecn_mark_probability, Admission, SharedBuffer};
pub use config::{EcmpConfig, EcnConfig, Forwarding, PfcConfig, SwitchConfig, TrimConfig};
pub use ev::{Ev, MAX_PLANES};
pub use headers::IpVersion;
pub use packet::{
    flag, Packet, PacketId, PacketKind, PacketPool, Usids, CLASSES, CLASS_CONTROL, CLASS_DATA, NO_PORT, USIDS,
};
pub use port::{DropCause, Port, PortCounters, PortId, DROP_CAUSES, HOT_LINES};
