//! Transports: per-QP reliability and pacing state machines. Each transport
//! is one file; the simulation dispatches on `TransportSpec` by enum. A
//! transport never touches ports or events: it answers "what is the next
//! packet" and "what does this arrival cause", and `sim` acts on that.

pub mod mrc;
pub mod rocev2;
pub mod writes;

use schemars::JsonSchema;
use serde::Serialize;

pub use rocev2::{RoceConfig, RoceReceiver, RoceSender, RxReply};

/// One RDMA WRITE packet a transport's sender chose to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataPacket {
    pub psn: u32,
    pub payload: u32,
    /// First packet of its message (carries the RETH).
    pub first: bool,
    /// Last packet of its message.
    pub last: bool,
    /// Last packet of a write with immediate: it carries the immediate
    /// data (ImmDt), which raises a completion at the responder.
    pub imm: bool,
    pub retransmission: bool,
}

/// Which transport the NICs run, with its parameters.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TransportSpec {
    /// RoCEv2 reliable connection: one path per QP, go-back-N, DCQCN.
    Rocev2(RoceConfig),
    /// MRC: packet spraying over EVs on every plane, SACK, trimming-aware
    /// selective retransmission, EV retirement (mrc-srv6-multiplane.txt).
    Mrc(mrc::MrcConfig),
}

crate::kind_tagged!(TransportSpec { "rocev2" => Rocev2, "mrc" => Mrc });

impl Default for TransportSpec {
    fn default() -> Self {
        TransportSpec::Rocev2(RoceConfig::default())
    }
}

impl TransportSpec {
    /// QPs per connection unless a flow says otherwise.
    pub fn qps(&self) -> u32 {
        match self {
            TransportSpec::Rocev2(c) => c.qps,
            TransportSpec::Mrc(c) => c.qps,
        }
    }
}
