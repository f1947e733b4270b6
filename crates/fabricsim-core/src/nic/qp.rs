//! A QP as its NICs see it: its two ends, its transport, its place in the
//! ports' round-robin lists, its pacing, its queued timer wake-ups and the
//! messages posted on it.

use std::collections::VecDeque;

use crate::ids::{MessageId, QpId};
use crate::net::PortId;
use crate::topology::NodeId;
use crate::transport::{QpTransport, TIMERS};
use crate::units::{Rate, Time};

pub(crate) struct Qp {
    pub transport: QpTransport,
    /// Earliest time the pacer lets the next data packet go.
    pub next_send: Time,
    /// The NIC's hardware rate limit for this QP: its data packets leave
    /// no closer than their wire size at this rate.
    pub rate_limit: Option<Rate>,
    /// Ports of the sending NIC (by index) whose ready list holds this QP.
    pub in_ready_lists: u32,
    /// Whether the transport sprays over every port of the NIC.
    pub sprays: bool,
    /// The requester at `src`, the responder at `dst`, and the ports the
    /// QP is bound to (for a sprayed QP, where its first port is).
    pub src: NodeId,
    pub dst: NodeId,
    pub src_port: PortId,
    pub dst_port: PortId,
    /// The ports the QP was bound to, which it returns to under LACP
    /// failover when they come back up.
    pub src_home: PortId,
    pub dst_home: PortId,
    /// The UDP source port the NIC gave the QP.
    pub entropy: u16,
    /// The QP of the other direction between the same two NICs, if any:
    /// one RC connection's two directions, so that what one learns of the
    /// paths toward the other NIC serves the other's control packets
    /// (mrc-srv6-multiplane.txt s2.4 Reverse Paths).
    pub reverse: Option<QpId>,
    /// Per transport timer, the earliest wake-up still queued (`Time::MAX`:
    /// none; no run reaches it).
    pub timers_queued: [Time; TIMERS],
    /// Messages posted on this QP with the bytes of each put on it, oldest
    /// first; the responder completes them in order.
    pub messages: VecDeque<(MessageId, u64)>,
    /// Bytes posted on this QP and not yet completed (its outstanding WQEs).
    pub outstanding: u64,
    /// Torn down with its job: it sends nothing more and what reaches it
    /// is dropped, as for an unknown QPN.
    pub destroyed: bool,
}
