//! RoCEv2 reliable connection (RC) for RDMA WRITE and SEND: the baseline
//! every paper compares against.
//!
//! A message is cut into MTU packets with consecutive PSNs and sent on one
//! path (the QP's fixed UDP source port). The responder accepts packets in
//! order only: a PSN gap gets one NAK (PSN sequence error) carrying the
//! expected PSN, later out-of-order packets are dropped silently until the
//! gap is filled, and duplicates are re-acknowledged (IBTA Vol.1 ch.9,
//! protocols.md s2.5). The requester goes back to the NAKed PSN, and on a
//! retransmission timeout goes back to the oldest unacknowledged PSN; after
//! `retry_count` timeouts without progress the QP enters the error state.
//!
//! A SEND takes a RECV the responder's application posted. When the first
//! packet of a SEND finds none, the responder answers with an RNR NAK and
//! drops what follows until that packet comes again; the requester, told
//! that every earlier PSN arrived, waits `rnr_timer` and resends from it,
//! and fails after `rnr_retry` RNR NAKs in a row unless that is 7, which
//! retries for ever (IBTA Vol.1 9.7.5.2.8, 9.9.6.1).
//!
//! A READ runs the other way round (`reads.rs`): the end that receives the
//! data asks for it and times it; the end that sends it sends a READ's
//! PSNs only once they are asked for, unacknowledged, and goes back to
//! where a repeated request starts.
//!
//! With `direct_placement` the responder instead places packets in any
//! order and acknowledges cumulatively without a NAK, as Spectrum-X NICs do
//! under per-packet adaptive routing (spectrum-x.txt s3); the requester
//! then goes back only on its timeout. With `ooo_window` as well, PRO's loss
//! recovery (pro-deterministic-lb.txt s3.B, `ooo_window.rs`): the responder
//! NACKs a PSN missing beyond an adaptive window, the requester resends
//! just that PSN, and on its timeout just the oldest unacknowledged one.
//! With `mprdma_bitmap` instead, MP-RDMA's loss detection (Lu et al., NSDI
//! 2018, s3.3 and s3.5), the one PRO's Fig 13 compares against: the
//! responder tracks a bitmap of L PSNs from the first missing one, drops a
//! packet beyond it and NACKs the first missing PSN, and the requester,
//! which keeps no per-packet state, goes back to it. Either way the
//! responder counts the packets that arrive out of order.
//!
//! PSNs are kept as u32 counters; the 24-bit wrap of the wire format is not
//! modelled because no simulated QP sends 2^24 packets.

use std::collections::VecDeque;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ooo_window::OooWindow;
use super::placement::Placement;
use super::reads::{ReadRequest, ReadRequester};
use super::writes::PostedWrites;
use super::{Action, Control, DataPacket, End, Framing, Outgoing, QpSetup, QpStats, Timer, Transport, Verb};
use crate::cc::{Dcqcn, DcqcnConfig};
use crate::net::{flag, Packet, PacketKind};
use crate::units::{Rate, Time, PS_PER_NS};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RoceConfig {
    /// QPs per connection; a flow's bytes are striped evenly across them
    /// (QP scaling, mrc-srv6-multiplane.txt s5.2.7).
    pub qps: u32,
    /// The responder acknowledges every this many in-order packets, and
    /// always the last packet of a message. Default 1, HPCC's
    /// L2_ACK_INTERVAL (protocols.md s2.5).
    pub ack_every: u32,
    /// Local ACK timeout exponent: the retransmission timeout is
    /// 4.096us x 2^exponent (IBTA). Unset means what the software that
    /// opens the QP sets: for a job's QPs NCCL's NCCL_IB_TIMEOUT default,
    /// 20 (4.3s; 18 before NCCL 2.14), for a flow's perftest's default,
    /// 14 (67ms; ib_write_bw `-u`). 8 (1.05ms) keeps lossy runs short.
    pub timeout_exponent: Option<u8>,
    /// Timeouts in a row without progress before the QP fails. Default 7,
    /// the IBTA maximum that NCCL uses.
    pub retry_count: u32,
    /// The responder places packets that arrive out of order (direct data
    /// placement by PSN) instead of NAKing the gap and dropping them: what
    /// Spectrum-X NICs do, so that per-packet adaptive routing does not
    /// make go-back-N resend (spectrum-x.txt s3). Default off, standard RC.
    pub direct_placement: bool,
    /// PRO's loss recovery (pro-deterministic-lb.txt s3.B, Algorithm 2),
    /// with `direct_placement`: the responder NACKs a PSN still missing more
    /// than an adaptive out-of-order window behind the highest arrived one;
    /// the requester resends only NACKed PSNs, and on its timeout what
    /// `timeout_resend` says. Default off.
    pub ooo_window: bool,
    /// What PRO's requester (`ooo_window`) resends when its retransmission
    /// timer fires, which the paper does not say: `go_back_n`, every PSN
    /// from the oldest unacknowledged one on, as an RC requester does on a
    /// local ACK timeout (IBTA Vol.1 ch.9, protocols.md s2.5; the responder
    /// counts the copies of what had arrived as repeats, PKT_REPEAT), or
    /// `oldest`, that one PSN only, which leaves a flow with several holes
    /// whose NACKs or resends were lost clearing one per timeout. Default
    /// `go_back_n`.
    pub timeout_resend: TimeoutResend,
    /// The window's initial size in packets. Unset: PRO's BDP/MTU, the line
    /// rate over a 10us round trip (the 2-tier fabric of 1us links PRO
    /// evaluates on: 8 link crossings and the serializations) in MTUs.
    pub ooo_window_initial: Option<u32>,
    /// MP-RDMA's loss detection (Lu et al., NSDI 2018, s3.3, s3.5), with
    /// `direct_placement`: the responder tracks this many PSNs from the
    /// first missing one (its bitmap, L); a packet beyond is dropped and
    /// the first missing PSN NACKed, once per hole, and the requester goes
    /// back to it and resends from there (MP-RDMA's sender keeps no SACK
    /// state). MP-RDMA's L is 64. Only the loss detection: MP-RDMA's
    /// out-of-order-aware path selection (its ACK-clocked virtual paths and
    /// Δ) is not modelled, so the QP's packets take the paths the NIC's
    /// path selection gives them. Unset: off.
    pub mprdma_bitmap: Option<u32>,
    /// A retransmission timeout set directly, instead of by
    /// `timeout_exponent`: PRO's NIC resends a tail loss after 80us (s6).
    /// Under `ooo_window` the responder also halves its window when a gap
    /// outlives it.
    pub retransmit_timeout: Option<Time>,
    /// RECVs the responder's application keeps posted on each QP for
    /// SENDs, posting another as each SEND completes: perftest's default
    /// `--rx-depth`, 512. Default 512.
    pub recv_depth: u32,
    /// How long the requester waits after an RNR NAK before it sends the
    /// SEND again: default 0.64ms, min_rnr_timer 12 in IBTA's encoding
    /// (Vol.1 Table 45), the value perftest sets.
    pub rnr_timer: Time,
    /// RNR NAKs in a row before the QP fails; 7, the default (perftest's
    /// and NCCL's), means retry for ever (IBTA).
    pub rnr_retry: u32,
    /// READs a reader has asked for at once (the QP's initiator depth,
    /// max_rd_atomic): default 16, what ConnectX NICs allow and perftest's
    /// ib_read_bw asks for.
    pub read_depth: u32,
    pub dcqcn: DcqcnConfig,
}

impl Default for RoceConfig {
    fn default() -> Self {
        RoceConfig {
            qps: 1,
            ack_every: 1,
            timeout_exponent: None,
            retry_count: 7,
            direct_placement: false,
            ooo_window: false,
            ooo_window_initial: None,
            timeout_resend: TimeoutResend::GoBackN,
            mprdma_bitmap: None,
            retransmit_timeout: None,
            recv_depth: 512,
            rnr_timer: Time::from_us(640),
            rnr_retry: RoceConfig::RNR_RETRY_FOREVER,
            read_depth: 16,
            dcqcn: DcqcnConfig::default(),
        }
    }
}

impl RoceConfig {
    /// NCCL_IB_TIMEOUT's default (NCCL environment variables docs).
    pub const NCCL_TIMEOUT_EXPONENT: u8 = 20;
    /// perftest's default `-u` (DEF_QP_TIME).
    pub const PERFTEST_TIMEOUT_EXPONENT: u8 = 14;
    /// The `rnr_retry` that never gives up (IBTA).
    pub const RNR_RETRY_FOREVER: u32 = 7;

    /// Whether every data packet carries its RETH: PRO's NIC extends every
    /// packet's so that it can be placed in any order
    /// (pro-deterministic-lb.txt s5, Fig 6); so does MP-RDMA's.
    pub fn addresses_every_packet(&self) -> bool {
        self.ooo_window || self.mprdma_bitmap.is_some()
    }

    /// The RNR NAK timer code of `rnr_timer` (IBTA Vol.1 Table 45): the
    /// shortest listed wait at least as long, 0 (655.36 ms) past the others.
    pub fn rnr_timer_code(&self) -> u8 {
        // Waits of codes 1 to 31, in units of 10 us.
        const WAITS: [u64; 31] = [
            1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096,
            6144, 8192, 12288, 16384, 24576, 32768, 49152,
        ];
        let wait = self.rnr_timer.0.div_ceil(Time::from_us(10).0);
        WAITS.iter().position(|&w| w >= wait).map_or(0, |i| i as u8 + 1)
    }

    /// The timeout exponent of a job's QP (`job`) or a flow's.
    pub fn timeout_exponent_for(&self, job: bool) -> u8 {
        let default = if job { Self::NCCL_TIMEOUT_EXPONENT } else { Self::PERFTEST_TIMEOUT_EXPONENT };
        self.timeout_exponent.unwrap_or(default)
    }

    /// The retransmission timeout of a job's QP (`job`) or a flow's.
    pub fn retransmit_timeout(&self, job: bool) -> Time {
        self.retransmit_timeout.unwrap_or_else(|| local_ack_timeout(self.timeout_exponent_for(job)))
    }

    /// The out-of-order window a QP at `line` starts with, in packets.
    pub fn initial_window(&self, line: Rate, mtu: u32) -> u32 {
        self.ooo_window_initial
            .unwrap_or_else(|| (line.bytes_in(Time::from_us(10)) / f64::from(mtu.max(1))).ceil() as u32)
            .max(1)
    }
}

/// What a selective requester resends on its timeout
/// (`RoceConfig::timeout_resend`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutResend {
    #[default]
    GoBackN,
    Oldest,
}

/// IBTA's local ACK timeout for `exponent`: 4.096us x 2^exponent.
pub fn local_ack_timeout(exponent: u8) -> Time {
    Time((4_096 * PS_PER_NS) << exponent)
}

/// Requester side of a QP (also Spectrum-X's, `transport::spx`).
#[derive(Clone, Debug, Default)]
pub(super) struct RoceSender {
    writes: PostedWrites,
    snd_nxt: u32,
    snd_una: u32,
    /// One past the highest PSN ever sent: below it a send is a retransmission.
    high_water: u32,
    retries: u32,
    pub(super) failed: bool,
    /// Deadline of the retransmission timer while data is outstanding.
    pub(super) rto_deadline: Option<Time>,
    pub(super) retransmitted_packets: u64,
    pub(super) timeouts: u64,
    /// Under selective retransmission, PSNs to resend before new ones.
    resend: VecDeque<u32>,
    /// Retransmits selectively (PRO) instead of going back N; on a timeout
    /// as `timeout_resend` says.
    selective: bool,
    timeout_resend: TimeoutResend,
    /// While an RNR NAK holds the requester back: when it may send again.
    pub(super) rnr_until: Option<Time>,
    rnr_retries: u32,
    pub(super) rnr_naks: u64,
    /// The first PSNs of READs posted and not yet asked for, in order: no
    /// PSN from the first of them on may be sent.
    unasked_reads: VecDeque<u32>,
}

impl RoceSender {
    /// A requester that resends only what is NACKed, and on its timeout
    /// as `timeout_resend` says.
    pub fn selective(timeout_resend: TimeoutResend) -> RoceSender {
        RoceSender { selective: true, timeout_resend, ..RoceSender::default() }
    }

    /// Posts a message of `bytes` (at least one byte) cut at `mtu`;
    /// returns its first PSN and its packets.
    pub fn post(&mut self, bytes: u64, mtu: u32, verb: Verb) -> (u32, u32) {
        let (first, packets) = self.writes.post(bytes, mtu, verb);
        if verb == Verb::Read {
            self.unasked_reads.push_back(first);
        }
        (first, packets)
    }

    /// One past the last PSN it may send now: a READ's only once asked for.
    fn limit(&self) -> u32 {
        self.unasked_reads.front().copied().unwrap_or(self.writes.end())
    }

    /// A READ request: the reader has every PSN before `received` and asks
    /// for the READ from `from` on, again if it had asked before (go back).
    pub fn on_read_request(&mut self, request: ReadRequest) {
        self.on_ack(request.received);
        if let Some(end) = self.writes.message_end(request.from) {
            while self.unasked_reads.front().is_some_and(|&first| first < end) {
                self.unasked_reads.pop_front();
            }
        }
        self.snd_nxt = self.snd_nxt.min(request.from.max(self.snd_una));
    }

    /// Length of the message that `psn` belongs to (for the RETH).
    pub fn message_bytes(&self, psn: u32) -> u64 {
        self.writes.write_bytes(psn)
    }

    pub fn has_data(&self) -> bool {
        !self.failed && self.rnr_until.is_none() && (self.snd_nxt < self.limit() || !self.resend.is_empty())
    }

    pub fn outstanding(&self) -> bool {
        !self.failed && self.snd_una < self.writes.end()
    }

    /// Packets are sent and not yet acknowledged: what the retransmission
    /// timer watches (the local ACK timeout of IBTA's RC transport). A
    /// message held back by its rate limiter or its congestion control has
    /// none out, and its timer does not run.
    pub fn in_flight(&self) -> bool {
        self.outstanding() && !self.all_acknowledged()
    }

    /// Everything sent so far is acknowledged.
    pub fn all_acknowledged(&self) -> bool {
        self.snd_una == self.snd_nxt
    }

    /// Takes the next packet to send and advances the send pointer.
    pub fn next_packet(&mut self) -> Option<DataPacket> {
        if !self.has_data() {
            return None;
        }
        while let Some(psn) = self.resend.pop_front() {
            if psn >= self.snd_una {
                self.retransmitted_packets += 1;
                return Some(DataPacket { retransmission: true, ..self.writes.packet(psn)? });
            }
        }
        if self.snd_nxt >= self.limit() {
            return None;
        }
        let psn = self.snd_nxt;
        let packet = DataPacket { retransmission: psn < self.high_water, ..self.writes.packet(psn)? };
        self.snd_nxt += 1;
        self.high_water = self.high_water.max(self.snd_nxt);
        if packet.retransmission {
            self.retransmitted_packets += 1;
        }
        Some(packet)
    }

    /// Cumulative ACK up to `expected`. Returns true if it acknowledged new data.
    pub fn on_ack(&mut self, expected: u32) -> bool {
        if expected <= self.snd_una {
            return false;
        }
        self.snd_una = expected.min(self.writes.end());
        self.snd_nxt = self.snd_nxt.max(self.snd_una);
        self.writes.forget_below(self.snd_una);
        (self.retries, self.rnr_retries) = (0, 0);
        true
    }

    /// RNR NAK: every PSN before `psn` arrived, and the SEND at `psn` found
    /// no RECV. The requester goes back to it and holds off until
    /// `now + rnr_timer`, or fails after `rnr_retry` in a row. Returns
    /// whether it failed.
    pub fn on_rnr_nak(&mut self, psn: u32, now: Time, rnr_timer: Time, rnr_retry: u32) -> bool {
        self.on_ack(psn);
        self.snd_nxt = self.snd_una;
        self.rnr_naks += 1;
        self.rnr_retries += 1;
        self.rto_deadline = None;
        if rnr_retry != RoceConfig::RNR_RETRY_FOREVER && self.rnr_retries > rnr_retry {
            self.failed = true;
            return true;
        }
        self.rnr_until = Some(now + rnr_timer);
        false
    }

    /// The RNR wait is over at `now`: whether the requester may send again.
    pub fn rnr_wait_over(&mut self, now: Time) -> bool {
        if self.rnr_until.is_some_and(|t| t <= now) {
            self.rnr_until = None;
            return true;
        }
        false
    }

    /// Messages posted and not wholly acknowledged.
    pub fn unacknowledged_messages(&self) -> usize {
        self.writes.unacknowledged()
    }

    /// NAK (PSN sequence error): go back to `expected`; a selective
    /// requester resends just that PSN (PRO's NACK names a lost packet).
    pub fn on_nak(&mut self, expected: u32) {
        if self.selective {
            if expected >= self.snd_una && expected < self.high_water && !self.resend.contains(&expected) {
                self.resend.push_back(expected);
            }
            return;
        }
        self.on_ack(expected);
        self.snd_nxt = self.snd_una;
    }

    /// Sends everything unacknowledged again, from the oldest: packets on
    /// a path now known to be dead are lost, and the requester does not
    /// know which.
    pub fn go_back(&mut self) {
        self.snd_nxt = self.snd_una;
    }

    /// The retransmission timer fired at `now`: re-armed if its deadline is
    /// later; else the requester goes back to the oldest unacknowledged PSN
    /// and re-arms it for `timeout`, or fails the QP after `retry_count`
    /// retries. Returns whether it went back.
    pub fn on_retransmit_timer(&mut self, now: Time, timeout: Time, retry_count: u32, out: &mut Vec<Action>) -> bool {
        let Some(deadline) = self.rto_deadline else { return false };
        if deadline > now {
            out.push(Action::Arm { timer: Timer::Retransmit, at: deadline });
            return false;
        }
        self.on_timeout(retry_count);
        if self.failed {
            self.rto_deadline = None;
            out.push(Action::Failed);
            return false;
        }
        let at = now + timeout;
        self.rto_deadline = Some(at);
        out.push(Action::Arm { timer: Timer::Retransmit, at });
        out.push(Action::Ready);
        true
    }

    /// The retransmission timer expired without progress.
    pub fn on_timeout(&mut self, retry_count: u32) {
        self.timeouts += 1;
        self.retries += 1;
        if self.retries > retry_count {
            self.failed = true;
        }
        if self.selective && self.timeout_resend == TimeoutResend::Oldest {
            // A tail loss: the oldest unacknowledged packet, first.
            if self.snd_una < self.high_water && self.resend.front() != Some(&self.snd_una) {
                self.resend.push_front(self.snd_una);
            }
            return;
        }
        // Going back N resends every NACKed PSN too.
        self.resend.clear();
        self.snd_nxt = self.snd_una;
    }
}

/// What a data packet's arrival asks the responder to send back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RxReply {
    /// Payload placed.
    pub delivered: u32,
    /// Messages the packet completed.
    pub messages: u32,
    /// An ACK or NAK to send, with the expected PSN.
    pub reply: Option<(PacketKind, u32)>,
    /// A lost PSN to NACK as well (PRO's out-of-order window).
    pub nack: Option<u32>,
    /// Payload discarded: out of order or duplicate.
    pub discarded: u32,
}

/// Responder side of a QP (also Spectrum-X's).
#[derive(Clone, Debug, Default)]
pub(super) struct RoceReceiver {
    expected: u32,
    nak_outstanding: bool,
    unacked: u32,
    pub(super) last_cnp: Option<Time>,
    /// With direct placement, where packets land in any order.
    placement: Option<Placement>,
    /// In order: packets that arrived past a gap, and the widest gap.
    out_of_order: u64,
    max_distance: u32,
    /// PRO's loss detection, with direct placement.
    window: Option<OooWindow>,
    /// The first missing PSN when the responder's gap timer was armed.
    gap_head: Option<u32>,
    /// MP-RDMA's bitmap length, and the hole it last NACKed.
    bitmap: Option<u32>,
    bitmap_nacked: Option<u32>,
    /// RECVs posted and not yet taken by a SEND.
    recvs: u64,
    /// An RNR NAK went out for `expected`: drop what follows it silently.
    rnr_outstanding: bool,
}

impl RoceReceiver {
    pub(super) fn new(direct_placement: bool) -> RoceReceiver {
        RoceReceiver { placement: direct_placement.then(Placement::default), ..RoceReceiver::default() }
    }

    /// A responder with direct placement and PRO's out-of-order window of
    /// `initial` packets.
    pub(super) fn with_window(initial: u32) -> RoceReceiver {
        RoceReceiver { window: Some(OooWindow::new(initial)), ..RoceReceiver::new(true) }
    }

    /// A responder with direct placement and MP-RDMA's bitmap of `length`
    /// PSNs.
    pub(super) fn with_bitmap(length: u32) -> RoceReceiver {
        RoceReceiver { bitmap: Some(length), ..RoceReceiver::new(true) }
    }

    /// The application posted `count` RECVs.
    pub(super) fn post_recvs(&mut self, count: u64) {
        self.recvs += count;
    }

    /// Takes the RECVs posted and not consumed out of the receive queue.
    pub(super) fn take_recvs(&mut self) -> u64 {
        std::mem::take(&mut self.recvs)
    }

    /// The first packet of a SEND, `psn`, arrived in order: it takes a
    /// RECV, or, with none posted, is refused with an RNR NAK (each time it
    /// comes) and what follows it is dropped silently until it comes again.
    fn on_send_first(&mut self, psn: u32, payload: u32) -> Option<RxReply> {
        if self.recvs > 0 {
            self.recvs -= 1;
            self.rnr_outstanding = false;
            return None;
        }
        self.rnr_outstanding = true;
        Some(RxReply { discarded: payload, reply: Some((PacketKind::RnrNak, psn)), ..RxReply::default() })
    }

    /// A data packet with `psn` arrived (`send_first`: the first of a SEND).
    /// A trimmed packet carries no payload but tells the responder that
    /// `psn` was sent and lost.
    pub fn on_data(
        &mut self,
        psn: u32,
        payload: u32,
        last: bool,
        send_first: bool,
        trimmed: bool,
        ack_every: u32,
    ) -> RxReply {
        if self.bitmap.is_some_and(|length| psn >= self.expected.saturating_add(length)) {
            // Beyond the bitmap: no slot to record it in. The hole at its
            // head is taken as lost, and NACKed once.
            self.out_of_order += 1;
            let nack = self.bitmap_nacked != Some(self.expected);
            self.bitmap_nacked = Some(self.expected);
            let reply = nack.then_some((PacketKind::Nak, self.expected));
            return RxReply { discarded: payload, reply, ..RxReply::default() };
        }
        if !trimmed {
            if let Some(placement) = self.placement.as_mut() {
                let placed = placement.on_data(psn, payload);
                self.expected = placement.cumulative();
                let nack = self.window.as_mut().and_then(|w| {
                    if placed.duplicate {
                        w.on_duplicate();
                    }
                    w.check(placement)
                });
                return RxReply { nack, ..self.placed(placed, payload, ack_every) };
            }
        }
        let mut out = RxReply::default();
        if psn == self.expected && !trimmed {
            if send_first {
                if let Some(refused) = self.on_send_first(psn, payload) {
                    return refused;
                }
            }
            self.expected += 1;
            self.nak_outstanding = false;
            self.unacked += 1;
            out.delivered = payload;
            out.messages = u32::from(last);
            if last || self.unacked >= ack_every {
                self.unacked = 0;
                out.reply = Some((PacketKind::Ack, self.expected));
            }
        } else if psn < self.expected {
            out.discarded = payload;
            out.reply = Some((PacketKind::Ack, self.expected));
        } else if self.rnr_outstanding {
            // Behind a refused SEND: the requester goes back to it anyway.
            out.discarded = payload;
        } else {
            if !trimmed {
                self.out_of_order += 1;
                self.max_distance = self.max_distance.max(psn - self.expected);
            }
            out.discarded = payload;
            if !self.nak_outstanding {
                self.nak_outstanding = true;
                out.reply = Some((PacketKind::Nak, self.expected));
            }
        }
        out
    }

    /// The reply to a packet placed directly: a cumulative ACK every
    /// `ack_every` packets and whenever a message completes; a duplicate
    /// is acknowledged at once, as in order.
    fn placed(&mut self, placed: crate::transport::placement::Placed, payload: u32, ack_every: u32) -> RxReply {
        let ack = Some((PacketKind::Ack, self.expected));
        if placed.duplicate {
            return RxReply { discarded: payload, reply: ack, ..RxReply::default() };
        }
        self.nak_outstanding = false;
        self.unacked += 1;
        let mut out = RxReply { delivered: placed.delivered, messages: placed.completed, ..RxReply::default() };
        if placed.completed > 0 || self.unacked >= ack_every {
            self.unacked = 0;
            out.reply = ack;
        }
        out
    }

    /// The requester posted a message of `packets` packets from `first`.
    pub(super) fn expect(&mut self, first: u32, packets: u32) {
        if let Some(placement) = self.placement.as_mut() {
            placement.expect(first, packets);
        }
    }

    /// The next PSN expected in order.
    pub(super) fn expected(&self) -> u32 {
        self.expected
    }

    /// With direct placement: a later PSN has arrived while `expected` has
    /// not.
    pub(super) fn has_gap(&self) -> bool {
        self.placement.as_ref().is_some_and(Placement::has_gap)
    }

    /// Under PRO's window, whether the responder's gap timer should be
    /// armed now: a gap is open and no timer watches it.
    fn arm_gap_timer(&mut self) -> bool {
        if self.window.is_none() || !self.has_gap() || self.gap_head.is_some() {
            return false;
        }
        self.gap_head = Some(self.expected);
        true
    }

    /// The responder's gap timer fired: if the gap's head has not moved,
    /// the window halves (QP_TIMEOUT). Returns the PSN to NACK, and whether
    /// to arm the timer again (a gap is still open).
    fn on_gap_timer(&mut self) -> (Option<u32>, bool) {
        let (Some(window), Some(placement)) = (self.window.as_mut(), self.placement.as_ref()) else {
            return (None, false);
        };
        let stuck = self.gap_head.take() == Some(placement.cumulative()) && placement.has_gap();
        let nack = if stuck { window.on_timeout(placement) } else { None };
        (nack, self.arm_gap_timer())
    }

    /// The degrees of the packets placed directly.
    pub(super) fn degrees(&self) -> Option<&super::DegreeHistogram> {
        self.placement.as_ref().map(Placement::degrees)
    }

    /// Packets that arrived out of order, and the furthest ahead one came.
    pub(super) fn reordering(&self) -> (u64, u32) {
        match &self.placement {
            Some(p) => (p.out_of_order(), p.max_distance()),
            None => (self.out_of_order, self.max_distance),
        }
    }
}

/// A RoCEv2 QP: requester, responder and the requester's DCQCN.
pub struct RoceQp {
    cfg: Arc<RoceConfig>,
    sender: RoceSender,
    receiver: RoceReceiver,
    /// The receiving end's READ requests.
    reader: ReadRequester,
    cc: Dcqcn,
    framing: Framing,
    mtu: u32,
    line: Rate,
    /// The QP's UDP source port, on its data and its control packets.
    entropy: u16,
    /// Local ACK timeout (`timeout_exponent`).
    timeout: Time,
    /// The port data arrives on at the responder: where its NACKs leave.
    rx_port: u8,
}

impl RoceQp {
    pub fn new(cfg: Arc<RoceConfig>, setup: &QpSetup) -> RoceQp {
        RoceQp {
            timeout: cfg.retransmit_timeout(setup.job),
            receiver: if cfg.ooo_window {
                RoceReceiver::with_window(cfg.initial_window(setup.line_rate, setup.mtu))
            } else if let Some(length) = cfg.mprdma_bitmap {
                RoceReceiver::with_bitmap(length)
            } else {
                RoceReceiver::new(cfg.direct_placement)
            },
            sender: if cfg.ooo_window { RoceSender::selective(cfg.timeout_resend) } else { RoceSender::default() },
            reader: ReadRequester::default(),
            cfg,
            cc: Dcqcn::new(setup.line_rate),
            framing: setup.framing,
            mtu: setup.mtu,
            line: setup.line_rate,
            entropy: setup.entropy,
            rx_port: 0,
        }
    }

    /// Sends READ requests from the receiving end for READs not yet asked
    /// for, as the initiator depth allows, and arms the reader's timer when
    /// it starts (a later deadline re-arms it when it fires, `on_timer`).
    fn ask_for_reads(&mut self, now: Time, out: &mut Vec<Action>) {
        let (received, idle) = (self.receiver.expected(), self.reader.deadline.is_none());
        for request in self.reader.ask(self.cfg.read_depth, received, now, self.timeout) {
            self.send_read_request(request, out);
        }
        if let Some(at) = self.reader.deadline.filter(|_| idle) {
            out.push(Action::Arm { timer: Timer::Probe, at });
        }
    }

    fn send_read_request(&self, request: ReadRequest, out: &mut Vec<Action>) {
        let control =
            Control { ack: request.received, ..Control::new(PacketKind::ReadRequest, request.from, self.entropy) };
        out.push(Action::Send { end: End::Responder, port: self.rx_port, control });
    }

    /// The responder's answer to a data packet: an ACK or NAK (for a READ
    /// response, nothing, or a repeated request past a gap), and a CNP (at
    /// most one per `cnp_interval`) when it came ECN-marked.
    #[inline]
    fn on_data(&mut self, port: usize, pkt: &Packet, now: Time, out: &mut Vec<Action>) {
        let trimmed = pkt.has(flag::TRIMMED);
        if trimmed {
            out.push(Action::TrimmedArrived);
        }
        let send_first = pkt.kind == PacketKind::Send && pkt.has(flag::FIRST);
        let (last, every) = (pkt.has(flag::LAST), self.cfg.ack_every);
        let mut reply = self.receiver.on_data(pkt.psn, pkt.payload(), last, send_first, trimmed, every);
        out.push(Action::Received { delivered: reply.delivered, discarded: reply.discarded, messages: reply.messages });
        let port = port as u8;
        self.rx_port = port;
        if pkt.kind == PacketKind::ReadResponse {
            // Nobody acknowledges READ responses: the reader asks again.
            if let Some((PacketKind::Nak, psn)) = reply.reply {
                if let Some(request) = self.reader.on_gap(psn) {
                    self.send_read_request(request, out);
                }
            }
            reply.reply = None;
            if reply.delivered > 0 {
                self.reader.on_progress(self.receiver.expected(), now, self.timeout);
                self.ask_for_reads(now, out);
            }
        }
        if let Some((kind, psn)) = reply.reply {
            out.push(Action::Send { end: End::Responder, port, control: Control::new(kind, psn, self.entropy) });
        }
        if let Some(psn) = reply.nack {
            out.push(Action::Send {
                end: End::Responder,
                port,
                control: Control::new(PacketKind::Nak, psn, self.entropy),
            });
        }
        if self.receiver.arm_gap_timer() {
            out.push(Action::Arm { timer: Timer::Reorder, at: now + self.timeout });
        }
        let dcqcn = &self.cfg.dcqcn;
        if dcqcn.enabled && pkt.has(flag::CE) && self.receiver.last_cnp.is_none_or(|t| now - t >= dcqcn.cnp_interval) {
            self.receiver.last_cnp = Some(now);
            let cnp = Control::new(PacketKind::Cnp, 0, self.entropy);
            out.push(Action::Send { end: End::Responder, port, control: cnp });
        }
    }
}

impl Transport for RoceQp {
    #[inline]
    fn post(&mut self, bytes: u64, verb: Verb, now: Time, out: &mut Vec<Action>) {
        let (first, packets) = self.sender.post(bytes, self.mtu, verb);
        self.receiver.expect(first, packets);
        if verb == Verb::Read {
            self.reader.post(first, first + packets);
            self.ask_for_reads(now, out);
        }
    }

    fn post_recvs(&mut self, count: u64) {
        self.receiver.post_recvs(count);
    }

    fn take_recvs(&mut self) -> u64 {
        self.receiver.take_recvs()
    }

    fn unacknowledged_messages(&self) -> usize {
        self.sender.unacknowledged_messages()
    }

    #[inline]
    fn has_data(&self) -> bool {
        self.sender.has_data()
    }

    fn sprays(&self) -> bool {
        false
    }

    fn addresses_every_packet(&self) -> bool {
        self.cfg.addresses_every_packet()
    }

    #[inline]
    fn next_packet(&mut self, _port: usize, now: Time, out: &mut Vec<Action>) -> Option<Outgoing> {
        let data = self.sender.next_packet()?;
        let data = DataPacket { addressed: self.addresses_every_packet(), ..data };
        let mut not_before = now;
        let dcqcn = &self.cfg.dcqcn;
        if dcqcn.enabled {
            let wire = self.framing.wire_of(&data) as u64;
            self.cc.on_sent(dcqcn, wire);
            let rate = self.cc.rate();
            if rate < self.line {
                not_before = now + rate.tx_time(wire);
            }
        }
        // READ responses are the reader's to time, not the sender's.
        if self.sender.rto_deadline.is_none() && data.verb != Verb::Read {
            let at = now + self.timeout;
            self.sender.rto_deadline = Some(at);
            out.push(Action::Arm { timer: Timer::Retransmit, at });
        }
        Some(Outgoing { data, entropy: self.entropy, not_before })
    }

    #[inline]
    fn on_packet(&mut self, _end: End, port: usize, pkt: &Packet, now: Time, out: &mut Vec<Action>) {
        match pkt.kind {
            PacketKind::Data | PacketKind::Send | PacketKind::ReadResponse => self.on_data(port, pkt, now, out),
            PacketKind::ReadRequest => {
                self.sender.on_read_request(ReadRequest { from: pkt.psn, received: pkt.ack });
                out.push(Action::Ready);
            }
            PacketKind::RnrNak => {
                if self.sender.on_rnr_nak(pkt.psn, now, self.cfg.rnr_timer, self.cfg.rnr_retry) {
                    out.push(Action::Failed);
                } else {
                    out.push(Action::Arm { timer: Timer::Wake, at: now + self.cfg.rnr_timer });
                }
            }
            PacketKind::Ack | PacketKind::Nak => {
                let progressed = if pkt.kind == PacketKind::Nak {
                    self.sender.on_nak(pkt.psn);
                    true
                } else {
                    self.sender.on_ack(pkt.psn)
                };
                if progressed {
                    // The timer restarts lazily: its wake-up finds the later deadline.
                    self.sender.rto_deadline = self.sender.in_flight().then_some(now + self.timeout);
                }
                if pkt.kind == PacketKind::Nak {
                    out.push(Action::Ready);
                }
            }
            PacketKind::Cnp if self.cfg.dcqcn.enabled => {
                let at = self.cc.on_cnp(&self.cfg.dcqcn, now);
                out.push(Action::Arm { timer: Timer::Congestion, at });
            }
            // RoCE does not probe.
            PacketKind::Cnp
            | PacketKind::Probe
            | PacketKind::ProbeReply
            | PacketKind::MapProbe
            | PacketKind::Conweave => {}
        }
    }

    #[inline]
    fn on_timer(&mut self, timer: Timer, now: Time, out: &mut Vec<Action>) {
        match timer {
            Timer::Retransmit => {
                self.sender.on_retransmit_timer(now, self.timeout, self.cfg.retry_count, out);
            }
            Timer::Congestion => {
                if let Some(at) = self.cc.on_timer(&self.cfg.dcqcn, now) {
                    out.push(Action::Arm { timer, at });
                }
            }
            Timer::Reorder => {
                let (nack, again) = self.receiver.on_gap_timer();
                if let Some(psn) = nack {
                    let control = Control::new(PacketKind::Nak, psn, self.entropy);
                    out.push(Action::Send { end: End::Responder, port: self.rx_port, control });
                }
                if again {
                    out.push(Action::Arm { timer, at: now + self.timeout });
                }
            }
            Timer::Wake => {
                if self.sender.rnr_wait_over(now) {
                    out.push(Action::Ready);
                }
            }
            Timer::Probe => {
                let received = self.receiver.expected();
                let request = self.reader.on_timer(received, now, self.timeout, self.cfg.retry_count);
                if let Some(request) = request {
                    self.send_read_request(request, out);
                }
                if self.reader.failed {
                    // The QP enters the error state at the reader.
                    self.sender.failed = true;
                    out.push(Action::Failed);
                } else if let Some(at) = self.reader.deadline {
                    out.push(Action::Arm { timer, at });
                }
            }
        }
    }

    fn message_bytes(&self, psn: u32) -> u64 {
        self.sender.message_bytes(psn)
    }

    fn stats(&self) -> QpStats {
        QpStats {
            retransmitted_packets: self.sender.retransmitted_packets,
            timeouts: self.sender.timeouts + self.reader.timeouts,
            failed: self.sender.failed,
            out_of_order_packets: self.receiver.reordering().0,
            max_reorder_distance: self.receiver.reordering().1 as u64,
            rnr_naks: self.sender.rnr_naks,
            ..QpStats::default()
        }
    }

    fn ooo_degrees(&self) -> Option<&super::DegreeHistogram> {
        self.receiver.degrees()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rnr_timer_codes_follow_the_ibta_table() {
        let code = |us: u64| RoceConfig { rnr_timer: Time::from_us(us), ..RoceConfig::default() }.rnr_timer_code();
        assert_eq!(RoceConfig::default().rnr_timer_code(), 12);
        assert_eq!((code(10), code(100), code(961), code(491_520), code(600_000)), (1, 7, 14, 31, 0));
    }

    #[test]
    fn go_back_n_after_a_gap() {
        let mut tx = RoceSender::default();
        let mut rx = RoceReceiver::default();
        tx.post(4 * 1000, 1000, Verb::Write);
        let p: Vec<_> = (0..4).map(|_| tx.next_packet().unwrap()).collect();
        assert!(p[0].first && p[3].last);
        assert_eq!(rx.on_data(0, 1000, false, false, false, 1).reply, Some((PacketKind::Ack, 1)));
        // PSN 1 lost: PSN 2 triggers one NAK, PSN 3 is dropped silently.
        assert_eq!(rx.on_data(2, 1000, false, false, false, 1).reply, Some((PacketKind::Nak, 1)));
        assert_eq!(rx.on_data(3, 1000, true, false, false, 1).reply, None);
        tx.on_nak(1);
        let again = tx.next_packet().unwrap();
        assert_eq!((again.psn, again.retransmission), (1, true));
        assert_eq!(rx.on_data(1, 1000, false, false, false, 1).delivered, 1000);
    }

    #[test]
    fn a_selective_requester_resends_only_the_nacked_psn_and_on_timeout_the_oldest() {
        let mut tx = RoceSender::selective(TimeoutResend::Oldest);
        tx.post(8 * 1000, 1000, Verb::Write);
        let sent: Vec<u32> = (0..6).map(|_| tx.next_packet().unwrap().psn).collect();
        assert_eq!(sent, [0, 1, 2, 3, 4, 5]);
        tx.on_ack(1);
        tx.on_nak(3);
        tx.on_nak(3);
        let again = tx.next_packet().unwrap();
        assert_eq!((again.psn, again.retransmission), (3, true), "the NACKed PSN, once");
        assert_eq!(tx.next_packet().unwrap().psn, 6, "then new data, no going back");
        tx.on_timeout(7);
        assert_eq!(tx.next_packet().unwrap().psn, 1, "a timeout resends the oldest unacknowledged");
        assert_eq!(tx.next_packet().unwrap().psn, 7);
        assert_eq!(tx.retransmitted_packets, 2);
    }

    #[test]
    fn going_back_n_on_a_timeout_resends_every_psn_from_the_oldest_unacknowledged() {
        let mut tx = RoceSender::selective(TimeoutResend::GoBackN);
        tx.post(8 * 1000, 1000, Verb::Write);
        (0..6).for_each(|_| assert!(tx.next_packet().is_some()));
        tx.on_ack(2);
        tx.on_nak(4);
        tx.on_timeout(7);
        let again: Vec<(u32, bool)> =
            std::iter::from_fn(|| tx.next_packet()).map(|p| (p.psn, p.retransmission)).collect();
        let expect: Vec<(u32, bool)> = (2..8).map(|psn| (psn, psn < 6)).collect();
        assert_eq!(again, expect, "2 to 5 again (the NACKed 4 once), then 6 and 7 new");
        assert_eq!(tx.retransmitted_packets, 4);
    }

    #[test]
    fn mprdmas_bitmap_places_within_it_and_drops_and_nacks_beyond_it() {
        let mut rx = RoceReceiver::with_bitmap(4);
        rx.expect(0, 16);
        let mut tx = RoceSender::default();
        tx.post(16 * 1000, 1000, Verb::Write);
        for _ in 0..8 {
            tx.next_packet();
        }
        // PSN 0 lost: 1 to 3 are placed (the bitmap holds 0 to 3)...
        for psn in 1..4 {
            let r = rx.on_data(psn, 1000, false, false, false, 1);
            assert_eq!((r.delivered, r.reply), (1000, Some((PacketKind::Ack, 0))), "PSN {psn}");
        }
        // ...4 has no slot: dropped, and the hole NACKed, once.
        let r = rx.on_data(4, 1000, false, false, false, 1);
        assert_eq!((r.discarded, r.reply), (1000, Some((PacketKind::Nak, 0))));
        let r = rx.on_data(5, 1000, false, false, false, 1);
        assert_eq!((r.discarded, r.reply), (1000, None));
        // The requester goes back to the hole and resends everything from it.
        tx.on_nak(0);
        let again: Vec<u32> = (0..3).map(|_| tx.next_packet().unwrap().psn).collect();
        assert_eq!(again, [0, 1, 2]);
        assert_eq!(rx.on_data(0, 1000, false, false, false, 1).reply, Some((PacketKind::Ack, 4)));
        assert_eq!(rx.on_data(1, 1000, false, false, false, 1).discarded, 1000, "a duplicate");
    }

    #[test]
    fn retries_exhausted_fail_the_qp() {
        let mut tx = RoceSender::default();
        tx.post(1, 4096, Verb::Write);
        tx.next_packet();
        for _ in 0..8 {
            tx.on_timeout(7);
        }
        assert!(tx.failed && !tx.has_data());
    }

    #[test]
    fn ack_coalescing() {
        let mut rx = RoceReceiver::default();
        assert_eq!(rx.on_data(0, 1, false, false, false, 2).reply, None);
        assert_eq!(rx.on_data(1, 1, false, false, false, 2).reply, Some((PacketKind::Ack, 2)));
        assert_eq!(rx.on_data(2, 1, true, false, false, 2).reply, Some((PacketKind::Ack, 3)));
    }
}
