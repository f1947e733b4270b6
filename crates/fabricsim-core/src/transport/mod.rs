//! Transports: the per-QP state machines of reliability, pacing and
//! congestion control, one file each. A transport never sees the
//! simulation, a port or the event queue: the NIC (`sim::nic`) asks it for
//! the next data packet of a port, hands it the packets of its QP that
//! arrive and the timers it armed when they fire, and it answers with a
//! short list of `Action`s (control packets to send, timers to arm, bytes
//! received, its QP ready to send or failed, EV changes) that the NIC
//! carries out. The NIC never writes a transport's fields.
//!
//! Adding a transport is one file here implementing `Transport`, plus its
//! arm in `QpTransport` and `dispatch!` below and, for a scenario to name
//! it, in `TransportSpec` and `QpFactory` (docs/ARCHITECTURE.md has the
//! recipe). A transport from outside the crate comes in through
//! `QpTransport::Custom` (`Simulation::with_transport`).

pub mod mrc;
mod ooo_window;
pub mod placement;
pub mod reads;
pub mod rocev2;
pub mod spx;
pub mod writes;

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use crate::ids::QpId;
use crate::net::{headers, Ev, IpVersion, Packet, PacketKind};
use crate::topology::NodeId;
use crate::units::{Rate, Time};

pub use mrc::{EvChange, EvSet, EvState, MrcConfig, MrcQp};
pub use placement::DegreeHistogram;
pub use rocev2::{RoceConfig, RoceQp};
pub use spx::{Destinations, PlaneContexts, PlaneLb, SpxConfig, SpxQp};

/// What a posted work request asks the requester to do: the RDMA
/// operations the model carries (IBTA Vol.1 ch.9.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// RDMA WRITE: placed at the address its RETH names; no work request
    /// at the responder.
    Write,
    /// RDMA WRITE with immediate: as a write, and its last packet's
    /// immediate raises a completion at the responder.
    WriteImm,
    /// SEND: placed where the responder's next posted RECV says; a message
    /// that finds no RECV posted is refused with an RNR NAK.
    Send,
    /// RDMA READ: the end that receives the data asks for it (a READ
    /// request naming the PSNs) and the other end sends it as READ
    /// responses, unacknowledged; the reader re-asks from the first PSN
    /// missing when a gap or its timeout says one was lost.
    Read,
}

impl Verb {
    /// Its name in a scenario (a flow's `op`, a collective's `rdma_op`).
    pub fn name(self) -> &'static str {
        match self {
            Verb::Write => "write",
            Verb::WriteImm => "write_with_imm",
            Verb::Send => "send",
            Verb::Read => "read",
        }
    }
}

/// The headers a data packet carries between its BTH and its payload, by
/// its operation and place in its message (IBTA Vol.1 ch.9, the headers
/// each opcode carries; RoCEv2, Annex A17): a WRITE's first or only packet
/// carries the RETH naming where it goes, and so does every packet of a
/// transport that lets the responder place each on its own (`addressed`);
/// a READ response's first, last or only packet an AETH, its middle ones
/// nothing; the last or only packet of a WRITE with immediate the ImmDt. A
/// SEND's carry none (SEND with immediate is not modelled). The one rule
/// for what a packet weighs on the wire, in both models' runs and ideals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeaders {
    pub reth: bool,
    pub aeth: bool,
    pub imm: bool,
}

impl DataHeaders {
    pub fn of(verb: Verb, first: bool, last: bool, addressed: bool) -> DataHeaders {
        let write = matches!(verb, Verb::Write | Verb::WriteImm);
        DataHeaders {
            reth: addressed || (first && write),
            aeth: verb == Verb::Read && (first || last),
            imm: last && verb == Verb::WriteImm,
        }
    }

    /// The most any data packet carries: a one-packet write with immediate
    /// (RETH and ImmDt), what a full frame is sized by.
    pub fn most() -> DataHeaders {
        DataHeaders::of(Verb::WriteImm, true, true, true)
    }

    /// Their bytes.
    pub fn bytes(self) -> u32 {
        u32::from(self.reth) * headers::RETH
            + u32::from(self.aeth) * headers::AETH
            + u32::from(self.imm) * headers::IMM_DT
    }
}

/// One data packet (of an RDMA WRITE or SEND, or a READ response) a
/// transport's sender chose to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataPacket {
    pub psn: u32,
    pub payload: u32,
    /// First packet of its message.
    pub first: bool,
    /// Last packet of its message.
    pub last: bool,
    pub retransmission: bool,
    /// Carries its own RDMA address and length (a RETH in every packet),
    /// so the responder can place it in any order.
    pub addressed: bool,
    /// The operation of its message: a write's packet, a SEND's (no RETH;
    /// the first takes a posted RECV at the responder), or a READ response
    /// (no RETH; an AETH on the first and last).
    pub verb: Verb,
}

impl DataPacket {
    /// The headers it carries; its ImmDt raises a completion at the responder.
    pub fn headers(&self) -> DataHeaders {
        DataHeaders::of(self.verb, self.first, self.last, self.addressed)
    }
}

/// A data packet to send, with the UDP source port it goes out with (the
/// QP's own for a single-path transport, the EV for a sprayed one) and the
/// earliest time the QP's pacer lets its next packet go.
#[derive(Clone, Copy, Debug)]
pub struct Outgoing {
    pub data: DataPacket,
    pub entropy: u16,
    pub not_before: Time,
}

/// Which end of its QP a packet reached or leaves from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The sender of the data.
    Requester,
    /// The receiver of the data.
    Responder,
}

/// The stages of `Transport::warm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warm {
    /// Load the lines of the transport's own record.
    Own,
    /// Those are in: load what they point to.
    Reached,
}

/// A transport's timers. The NIC keeps, per QP and timer, the earliest
/// wake-up still queued; arming a later one queues nothing, and a wake-up
/// that a later arming made early finds the transport's own deadline not
/// yet due and arms again. One stale-timer scheme for every transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    Retransmit,
    Congestion,
    Probe,
    /// A loss-detection deadline short of the retransmission timeout (MRC:
    /// RACK's reordering timer).
    Reorder,
    /// The QP may send again on ports it left for want of something other
    /// than a pacer (Spectrum-X's `sw_lb`: a plane that waited for the
    /// others' shares; RoCE: an RNR NAK's wait is over); a per-port pacer
    /// is `Transport::paced_until`.
    Wake,
}

pub const TIMERS: usize = 5;

impl Timer {
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn from_index(i: u8) -> Timer {
        [Timer::Retransmit, Timer::Congestion, Timer::Probe, Timer::Reorder, Timer::Wake][i as usize]
    }
}

/// The transport's part of a header-only control packet: the NIC adds the
/// addresses, the size and its port bitmap.
#[derive(Clone, Copy, Debug)]
pub struct Control {
    pub kind: PacketKind,
    pub psn: u32,
    pub entropy: u16,
    /// Only `flag::CE`: an MRC SACK echoes the data packet's ECN mark.
    pub flags: u8,
    /// A SACK's or NACK's cumulative acknowledgement.
    pub ack: u32,
    /// The EV of the data packet a SACK or NACK answers.
    pub echo: u16,
    /// Sent in the data class rather than ahead of it, so that it queues
    /// behind data as data does: an RTT probe that measures queueing.
    pub in_band: bool,
}

impl Control {
    pub fn new(kind: PacketKind, psn: u32, entropy: u16) -> Control {
        Control { kind, psn, entropy, flags: 0, ack: 0, echo: 0, in_band: false }
    }
}

/// What a transport asks the NIC to do, in order.
#[derive(Clone, Copy, Debug)]
pub enum Action {
    /// Send a control packet from `end` of the QP out of its NIC's port
    /// `port` (by index on the NIC).
    Send { end: End, port: u8, control: Control },
    /// Wake the transport's `timer` at `at`.
    Arm { timer: Timer, at: Time },
    /// The responder took a data packet: `delivered` new payload bytes,
    /// `discarded` bytes of a duplicate or out-of-order packet, and the
    /// oldest `messages` posted messages are now complete.
    Received { delivered: u32, discarded: u32, messages: u32 },
    /// A data packet trimmed to its headers reached the responder.
    TrimmedArrived,
    /// The requester has data to send: put it on its ports' lists.
    Ready,
    /// The QP entered the error state: what was posted on it is lost.
    Failed,
    /// One of the QP's EVs changed state (the EV log).
    EvChanged(EvChange),
    /// A data packet the requester sent on this EV arrived (a SACK said
    /// so): the path from the requester's NIC toward the responder's works,
    /// news for the QP of the other direction (`reverse_path_works`).
    PathWorks(Ev),
}

/// How the NIC frames a data packet: the sizes a transport paces by.
#[derive(Clone, Copy, Debug)]
pub struct Framing {
    pub ip: IpVersion,
    /// Bytes of encapsulation every packet carries (the SRv6 outer header).
    pub encap: u32,
}

impl Framing {
    /// Bytes on the wire of a data packet of `payload` bytes with `carried`.
    pub fn data_wire(&self, payload: u32, carried: DataHeaders) -> u32 {
        headers::data_wire(self.ip, payload, carried.bytes()) + self.encap
    }

    /// Bytes on the wire of `data`, with the headers its operation and
    /// place in its message give it.
    pub fn wire_of(&self, data: &DataPacket) -> u32 {
        self.data_wire(data.payload, data.headers())
    }
}

/// What a NIC tells a QP's transport about where it runs.
#[derive(Clone, Copy, Debug)]
pub struct QpSetup {
    pub qp: QpId,
    /// The requester's NIC and the responder's.
    pub nics: (NodeId, NodeId),
    pub seed: u64,
    pub mtu: u32,
    pub framing: Framing,
    /// The UDP source port the NIC gave the QP (Linux folds the QPN into
    /// 0xC000-0xFFFF, protocols.md s2.1).
    pub entropy: u16,
    /// Ports (planes) of the requester's and the responder's NICs.
    pub requester_ports: usize,
    pub responder_ports: usize,
    /// Line rate of the requester's port for this QP, and of all its ports.
    pub line_rate: Rate,
    pub nic_rate: Rate,
    /// How EVs map onto the paths between the two NICs, where the sender
    /// can know it: under SRv6 an EV names its path; under ECMP the
    /// switches' hash seeds are theirs, and a NIC knows nothing (`None`).
    pub paths: Option<crate::net::PathSpace>,
    /// The QP carries a job's traffic, opened by a collective library
    /// (NCCL), rather than a flow's, opened by a benchmark (perftest):
    /// the two set different defaults, such as RoCE's timeout.
    pub job: bool,
}

/// Random-stream key of QPs.
pub const STREAM_QP: u64 = 0x0A9;

impl QpSetup {
    /// The UDP source port QP `qp` gets: Linux folds QPNs into
    /// 0xC000-0xFFFF (protocols.md s2.1); here the first draw of the QP's
    /// own stream.
    pub fn entropy_of(seed: u64, qp: QpId) -> u16 {
        0xC000 | (crate::engine::Rng::stream(seed, &[STREAM_QP, qp.0 as u64]).next_u64() as u16 & 0x3FFF)
    }

    /// A random stream of this QP's own, for purpose `key`.
    pub fn stream(&self, key: u64) -> crate::engine::Rng {
        crate::engine::Rng::stream(self.seed, &[STREAM_QP, self.qp.0 as u64, key])
    }
}

/// A QP's counters, for the flow table and the summary.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpStats {
    pub retransmitted_packets: u64,
    pub timeouts: u64,
    pub failed: bool,
    pub retired_evs: u64,
    pub resurrected_evs: u64,
    pub spurious_losses: u64,
    /// ECN-marked EVs swapped for a backup (MRC's `ecn_replace`).
    pub ecn_replacements: u64,
    /// Data packets that reached the responder while an earlier PSN was
    /// still missing, and the furthest ahead of it one arrived (in PSNs).
    pub out_of_order_packets: u64,
    pub max_reorder_distance: u64,
    /// Planes taken out of use after a failure was detected (Spectrum-X).
    pub plane_failovers: u64,
    /// RNR NAKs the requester got: a SEND found no RECV posted.
    pub rnr_naks: u64,
}

/// A QP's transport: both ends' state machines.
pub trait Transport {
    /// Posts a work request of `bytes` (at least one packet) at `now`. A
    /// `Verb::Send` or `Verb::Read` comes only where the scenario's
    /// `TransportSpec::sends_and_reads` allows it.
    fn post(&mut self, bytes: u64, verb: Verb, now: Time, out: &mut Vec<Action>);

    /// The responder's application posts `count` RECVs.
    fn post_recvs(&mut self, _count: u64) {}

    /// Takes the RECVs posted at the responder and not yet consumed out of
    /// its receive queue (SHIFT moves them to another QP), returning how many.
    fn take_recvs(&mut self) -> u64 {
        0
    }

    /// Messages posted whose every packet the requester has not yet had
    /// acknowledged, arrived or not (what SHIFT finds outstanding).
    fn unacknowledged_messages(&self) -> usize {
        0
    }

    /// Whether the requester has a packet it could send now.
    fn has_data(&self) -> bool;

    /// Whether the QP sprays over every port of its NIC (each packet on the
    /// port of its EV's plane) rather than keeping to its one port. A
    /// sprayed packet may arrive in any order, so every packet is addressed.
    fn sprays(&self) -> bool;

    /// Whether every data packet carries its RDMA address (a RETH), so the
    /// responder can place it in any order: every sprayed packet does.
    fn addresses_every_packet(&self) -> bool {
        self.sprays()
    }

    /// For a QP that sprays: the port its rotation over the planes sends on
    /// next. The NIC offers its free ports in this order, so that when the
    /// window, not the ports, limits the QP, its packets still take the
    /// planes in turn rather than the port that happens to be asked first.
    fn next_port(&self) -> usize {
        0
    }

    /// The earliest time a pacer of the QP's own for port `port` lets its
    /// next packet go there (Spectrum-X paces each plane): until then the
    /// NIC skips the QP on that port and wakes the port up.
    fn paced_until(&self, _port: usize) -> Time {
        Time::ZERO
    }

    /// The next data packet for the requester's port `port` at `now`. The
    /// port is in the middle of pulling it: the actions this pushes may arm
    /// timers, but not send control packets or make the QP ready (a timer
    /// at `now` does either once the packet is on its way). When it gives
    /// no packet, its actions are dropped and the QP leaves the port's list
    /// until it is made ready again.
    fn next_packet(&mut self, port: usize, now: Time, out: &mut Vec<Action>) -> Option<Outgoing>;

    /// A packet of this QP arrived at `end`, on its NIC's port `port`.
    fn on_packet(&mut self, end: End, port: usize, packet: &Packet, now: Time, out: &mut Vec<Action>);

    /// A timer armed with `Action::Arm` is due.
    fn on_timer(&mut self, timer: Timer, now: Time, out: &mut Vec<Action>);

    /// A hint that `packet` of this QP arrives soon (the NIC warms its
    /// caches a few events ahead; the transport alone knows its layout):
    /// at `Warm::Own`, start loading the lines of the transport's own
    /// record that `on_packet` will read for it; at `Warm::Reached`, one
    /// event later, those are in: start loading what they point to. It
    /// must change nothing, and may do nothing.
    fn warm(&self, _stage: Warm, _packet: &Packet) {}

    /// The requester's NIC found its port `port` down or back up.
    fn on_port_state(&mut self, _port: usize, _up: bool) {}

    /// Length of the message `psn` belongs to (a RETH's DMA length).
    fn message_bytes(&self, psn: u32) -> u64;

    fn stats(&self) -> QpStats;

    /// The out-of-order degrees of the data its responder placed directly
    /// (none when it places only in order).
    fn ooo_degrees(&self) -> Option<&DegreeHistogram> {
        None
    }

    /// Starts reporting EV changes, beginning with every EV's state now.
    fn log_evs(&mut self, _out: &mut Vec<Action>) {}

    /// An EV from this QP's responder toward its requester is known to
    /// work: the QP of the other direction between the same NICs had data
    /// arrive on it (`Action::PathWorks`).
    fn reverse_path_works(&mut self, _ev: Ev, _now: Time) {}

    /// Takes every EV for which `denied` holds out of use and returns the
    /// others to use (the denylist, mrc-srv6-multiplane.txt s2.4, s3).
    fn deny_evs(&mut self, _denied: &dyn Fn(Ev) -> bool, _now: Time, _out: &mut Vec<Action>) {}

    /// Replaces the QP's EVs with hand-picked ones; false if the transport
    /// has none.
    fn pin_evs(&mut self, _set: &EvSet) -> bool {
        false
    }
}

/// The transport of one QP, by kind: built-in transports are dispatched by
/// enum (inlined on the packet path), others through a box.
#[allow(clippy::large_enum_variant)]
pub enum QpTransport {
    /// RoCEv2 RC: one path, go-back-N, DCQCN.
    Rocev2(RoceQp),
    /// MRC: sprays over EVs on every plane (inline, though larger: its
    /// state is read on every packet and boxing it cost 7% of the MRC
    /// bench).
    Mrc(MrcQp),
    /// Spectrum-X: RC with direct placement over every plane, the NIC's
    /// plane load balancer and a congestion context per plane.
    Spx(SpxQp),
    /// A transport defined outside this crate.
    Custom(Box<dyn Transport>),
}

/// Calls `$call` on the transport inside a `QpTransport`, whatever its kind.
macro_rules! dispatch {
    ($qp:expr, $t:ident => $call:expr) => {
        match $qp {
            QpTransport::Rocev2($t) => $call,
            QpTransport::Mrc($t) => $call,
            QpTransport::Spx($t) => $call,
            QpTransport::Custom($t) => $call,
        }
    };
}

impl Transport for QpTransport {
    #[inline]
    fn post(&mut self, bytes: u64, verb: Verb, now: Time, out: &mut Vec<Action>) {
        dispatch!(self, t => t.post(bytes, verb, now, out))
    }
    fn post_recvs(&mut self, count: u64) {
        dispatch!(self, t => t.post_recvs(count))
    }
    fn take_recvs(&mut self) -> u64 {
        dispatch!(self, t => t.take_recvs())
    }
    fn unacknowledged_messages(&self) -> usize {
        dispatch!(self, t => t.unacknowledged_messages())
    }
    #[inline]
    fn has_data(&self) -> bool {
        dispatch!(self, t => t.has_data())
    }
    #[inline]
    fn sprays(&self) -> bool {
        dispatch!(self, t => t.sprays())
    }
    fn addresses_every_packet(&self) -> bool {
        dispatch!(self, t => t.addresses_every_packet())
    }
    #[inline]
    fn next_port(&self) -> usize {
        dispatch!(self, t => t.next_port())
    }
    #[inline]
    fn paced_until(&self, port: usize) -> Time {
        match self {
            QpTransport::Spx(t) => t.paced_until(port),
            QpTransport::Rocev2(_) | QpTransport::Mrc(_) => Time::ZERO,
            QpTransport::Custom(t) => t.paced_until(port),
        }
    }
    #[inline]
    fn next_packet(&mut self, port: usize, now: Time, out: &mut Vec<Action>) -> Option<Outgoing> {
        dispatch!(self, t => t.next_packet(port, now, out))
    }
    #[inline]
    fn on_packet(&mut self, end: End, port: usize, packet: &Packet, now: Time, out: &mut Vec<Action>) {
        dispatch!(self, t => t.on_packet(end, port, packet, now, out))
    }
    #[inline]
    fn on_timer(&mut self, timer: Timer, now: Time, out: &mut Vec<Action>) {
        dispatch!(self, t => t.on_timer(timer, now, out))
    }
    #[inline]
    fn warm(&self, stage: Warm, packet: &Packet) {
        dispatch!(self, t => t.warm(stage, packet))
    }
    #[inline]
    fn on_port_state(&mut self, port: usize, up: bool) {
        dispatch!(self, t => t.on_port_state(port, up))
    }
    #[inline]
    fn message_bytes(&self, psn: u32) -> u64 {
        dispatch!(self, t => t.message_bytes(psn))
    }
    #[inline]
    fn stats(&self) -> QpStats {
        dispatch!(self, t => t.stats())
    }
    fn ooo_degrees(&self) -> Option<&DegreeHistogram> {
        dispatch!(self, t => t.ooo_degrees())
    }
    fn log_evs(&mut self, out: &mut Vec<Action>) {
        dispatch!(self, t => t.log_evs(out))
    }
    fn reverse_path_works(&mut self, ev: Ev, now: Time) {
        dispatch!(self, t => t.reverse_path_works(ev, now))
    }
    fn deny_evs(&mut self, denied: &dyn Fn(Ev) -> bool, now: Time, out: &mut Vec<Action>) {
        dispatch!(self, t => t.deny_evs(denied, now, out))
    }
    fn pin_evs(&mut self, set: &EvSet) -> bool {
        dispatch!(self, t => t.pin_evs(set))
    }
}

/// Which transport the NICs run, with its parameters.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TransportSpec {
    /// RoCEv2 reliable connection: one path per QP, go-back-N, DCQCN.
    Rocev2(RoceConfig),
    /// MRC: packet spraying over EVs on every plane, SACK, trimming-aware
    /// selective retransmission, EV retirement (mrc-srv6-multiplane.txt).
    Mrc(MrcConfig),
    /// Spectrum-X: RoCE RC with direct data placement, sprayed over the
    /// NIC's planes by its plane load balancer, a congestion-control
    /// context per plane (spectrum-x.txt s4.2-s4.4).
    Spx(SpxConfig),
}

crate::kind_tagged!(TransportSpec { "rocev2" => Rocev2, "mrc" => Mrc, "spx" => Spx });

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
            TransportSpec::Spx(c) => c.qps,
        }
    }

    /// Links (`node:port`) whose paths the QPs must never use.
    pub fn denylist(&self) -> &[String] {
        match self {
            TransportSpec::Mrc(c) => &c.denylist,
            TransportSpec::Rocev2(_) | TransportSpec::Spx(_) => &[],
        }
    }

    /// Whether its QPs carry SENDs and READs (see
    /// `Transport::sends_and_reads`): RoCEv2 with the in-order responder.
    pub fn sends_and_reads(&self) -> bool {
        match self {
            // Placed out of order, a SEND's packets could not be matched
            // to their RECV, nor a READ's responses be told lost.
            TransportSpec::Rocev2(c) => !c.direct_placement && !c.ooo_window && c.mprdma_bitmap.is_none(),
            TransportSpec::Mrc(_) | TransportSpec::Spx(_) => false,
        }
    }

    /// RECVs the responder's application keeps posted on each QP.
    pub fn recv_depth(&self) -> u64 {
        match self {
            TransportSpec::Rocev2(c) => u64::from(c.recv_depth),
            TransportSpec::Mrc(_) | TransportSpec::Spx(_) => 0,
        }
    }

    /// Whether its QPs spray over every port of the NIC (see
    /// `Transport::sprays`).
    pub fn sprays(&self) -> bool {
        matches!(self, TransportSpec::Mrc(_) | TransportSpec::Spx(_))
    }

    /// Whether every data packet of its QPs carries its RDMA address (see
    /// `Transport::addresses_every_packet`).
    pub fn addresses_every_packet(&self) -> bool {
        match self {
            TransportSpec::Rocev2(c) => c.addresses_every_packet(),
            TransportSpec::Mrc(_) | TransportSpec::Spx(_) => true,
        }
    }

    /// How long a QP that makes no progress keeps trying before it fails:
    /// a job's (`job`, NCCL's timeout) or a flow's (perftest's).
    pub fn give_up_time(&self, job: bool) -> Time {
        match self {
            TransportSpec::Rocev2(c) => c.retransmit_timeout(job).times(u64::from(c.retry_count) + 1),
            TransportSpec::Mrc(c) => c.error_timeout,
            TransportSpec::Spx(c) => c.retransmit_timeout(job).times(u64::from(c.retry_count) + 1),
        }
    }

    /// The longer of a job's and a flow's give-up time: what a run's time
    /// limit waits for.
    pub fn longest_give_up_time(&self) -> Time {
        self.give_up_time(true).max(self.give_up_time(false))
    }
}

/// A transport defined outside this crate: builds the transport of each QP.
pub type CustomTransport = Box<dyn Fn(&QpSetup) -> Box<dyn Transport>>;

/// Builds the transport of each new QP, all sharing one copy of the
/// scenario's parameters.
pub enum QpFactory {
    Rocev2(Arc<RoceConfig>),
    Mrc(Arc<MrcConfig>),
    /// With what each NIC keeps per destination, which all its QPs there
    /// share (spectrum-x.txt s4.3).
    Spx(Arc<SpxConfig>, Destinations),
    Custom(CustomTransport),
}

impl QpFactory {
    pub fn new(spec: &TransportSpec) -> QpFactory {
        match spec {
            TransportSpec::Rocev2(c) => QpFactory::Rocev2(Arc::new(c.clone())),
            TransportSpec::Mrc(c) => QpFactory::Mrc(Arc::new(c.clone())),
            TransportSpec::Spx(c) => QpFactory::Spx(Arc::new(c.clone()), Destinations::default()),
        }
    }

    pub fn build(&self, setup: &QpSetup) -> QpTransport {
        match self {
            QpFactory::Rocev2(c) => QpTransport::Rocev2(RoceQp::new(c.clone(), setup)),
            QpFactory::Mrc(c) => QpTransport::Mrc(MrcQp::new(c.clone(), setup)),
            QpFactory::Spx(c, destinations) => {
                QpTransport::Spx(SpxQp::new(c.clone(), setup, destinations.of(c, setup)))
            }
            QpFactory::Custom(build) => QpTransport::Custom(build(setup)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_headers_follow_the_ibta_packet_formats() {
        // Bytes past the BTH of the (first, middle, last, only) packets.
        let bytes = |verb: Verb, addressed: bool| {
            let of = |first, last| DataHeaders::of(verb, first, last, addressed).bytes();
            [of(true, false), of(false, false), of(false, true), of(true, true)]
        };
        assert_eq!(bytes(Verb::Write, false), [16, 0, 0, 16], "RETH on the first and only");
        assert_eq!(bytes(Verb::WriteImm, false), [16, 0, 4, 20], "and ImmDt on the last and only");
        assert_eq!(bytes(Verb::Send, false), [0, 0, 0, 0]);
        assert_eq!(bytes(Verb::Read, false), [4, 0, 4, 4], "AETH on the first, last and only responses");
        assert_eq!(bytes(Verb::Write, true), [16, 16, 16, 16], "a RETH in every addressed packet");
        assert_eq!(bytes(Verb::WriteImm, true), [16, 16, 20, 20]);
        let verbs = [Verb::Write, Verb::WriteImm, Verb::Send, Verb::Read];
        let any = verbs.iter().flat_map(|&v| [false, true].map(|a| bytes(v, a).into_iter().max().unwrap_or(0)));
        assert_eq!(DataHeaders::most().bytes(), any.max().unwrap_or(0), "a full frame is sized by the most");
    }
}
