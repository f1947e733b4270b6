//! NIC parameters and per-port QP scheduling.
//!
//! Each NIC port has a transmit queue for control packets (in the port's
//! high class) and a round-robin list of QPs with data to send on it; the
//! scheduler gives each QP `batch` packets per turn (per-packet round robin
//! by default), skipping QPs whose congestion controller has not yet
//! allowed their next packet.

use std::collections::VecDeque;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::net::IpVersion;
use crate::units::{Bytes, Time};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NicConfig {
    /// RDMA payload per packet (path MTU). Default 4096B, the largest RoCE
    /// MTU, used by AI fabrics (protocols.md s2.4).
    pub mtu: Bytes,
    /// IP version of the RoCEv2 encapsulation (sets the header size).
    pub ip: IpVersion,
    /// Packets a QP sends per scheduling turn.
    pub batch: u32,
    /// How long after one of its ports goes down the NIC stops sending on
    /// it. Zero remaps at once; CX-8 MRC takes a noticeable time to remap
    /// every QP's EVs, a glitch in throughput (mrc-srv6-multiplane.txt s3).
    pub remap_delay: Time,
}

impl Default for NicConfig {
    fn default() -> Self {
        NicConfig { mtu: Bytes(4096), ip: IpVersion::Ipv6, batch: 1, remap_delay: Time::ZERO }
    }
}

/// Scheduling state of one NIC port.
#[derive(Clone, Debug, Default)]
pub struct PortScheduler {
    /// QPs with data for this port, in round-robin order.
    pub ready: VecDeque<u32>,
    /// Packets the QP at the front has sent in its current turn.
    pub batch_used: u32,
    /// A wake-up is scheduled for a paced QP at this time.
    pub wake_at: Option<Time>,
    /// The NIC knows this port is down and sends nothing on it.
    pub known_down: bool,
}
