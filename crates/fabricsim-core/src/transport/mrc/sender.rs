//! The sender of an MRC QP: EV sets per plane, spraying, SACK and NACK
//! processing, the three loss-detection rules, EV retirement, probing and
//! resurrection, the denylist, and NSCC's window.

use std::collections::VecDeque;

use super::striping::{path_of, striped_evs, uplink_of};
use super::{EvChange, EvSet, EvState, MrcConfig};
use crate::cc::Nscc;
use crate::engine::{prefetch, prefetch_lines, Rng};
use crate::net::{Ev, PathSpace};
use crate::transport::writes::PostedWrites;
use crate::transport::{DataPacket, Verb, Warm};
use crate::units::Time;

/// Convictions remembered for acquittal: about one window's worth of
/// timeouts' packets.
const CONVICTIONS_KEPT: usize = 64;

/// An empty active slot: its EV was retired and no backup was left.
const NO_EV: Ev = Ev(u16::MAX);

/// A retired EV and how its probes have gone.
#[derive(Clone, Copy, Debug)]
struct Retired {
    ev: Ev,
    /// Consecutive probes answered.
    successes: u32,
    /// A probe is out and not yet answered.
    awaiting: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Waiting to be sent, after `copies` transmissions (saturating).
    /// `suspect` is the EV the last of them was lost on (`NO_EV` if none is
    /// blamed).
    Pending {
        copies: u8,
        suspect: Ev,
    },
    /// Sent on EV `ev`, in slot `slot` of `plane`, as transmission `seq`
    /// at `sent`, its `copies`-th, with the EV blamed for the previous
    /// one's loss, if any.
    InFlight {
        plane: u8,
        copies: u8,
        slot: u16,
        ev: Ev,
        suspect: Ev,
        seq: u32,
        sent: Time,
    },
    Acked,
}

/// Transmission numbers wrap: a QP has far fewer than 2^31 transmissions
/// outstanding at once, so wrapping order is exact (RFC 1982 serial number
/// arithmetic) and the numbers stay 32-bit, which keeps the per-packet
/// state small enough for the sender's hot arrays to share cache lines.
fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// Transmissions (seq, PSN) outstanding on one EV, oldest first. Spraying
/// puts one or two packets of a window on each EV: those live inline, next
/// to the other EVs' (a QP walks its EVs in turn, so consecutive packets
/// touch neighbouring slots), and only a longer queue continues in the
/// plane's cold `spill` list for the slot.
#[derive(Clone, Copy, Debug, Default)]
struct Outstanding {
    inline: [(u32, u32); 2],
    start: u8,
    len: u8,
    spilled: bool,
}

/// The EVs of one plane.
#[derive(Clone, Debug, Default)]
struct PlaneEvs {
    /// The active set by slot.
    active: Vec<EvSlot>,
    /// Outstanding transmissions beyond the inline two, by active slot.
    spill: Vec<VecDeque<(u32, u32)>>,
    backup: Vec<Ev>,
    retired: Vec<Retired>,
    denied: Vec<Ev>,
    cursor: usize,
    /// The active slot the next probe answer goes on (`reply_ev`).
    reply_turn: usize,
    /// EVs swapped out for ECN, and until when their paths are not taken
    /// back (`take_backup`).
    marked: Vec<(Ev, Time)>,
}

impl PlaneEvs {
    fn new(active: Vec<EvSlot>, backup: Vec<Ev>) -> PlaneEvs {
        let spill = vec![VecDeque::new(); active.len()];
        PlaneEvs {
            active,
            spill,
            backup,
            retired: Vec::new(),
            denied: Vec::new(),
            cursor: 0,
            reply_turn: 0,
            marked: Vec::new(),
        }
    }

    fn push_outstanding(&mut self, slot: usize, entry: (u32, u32)) {
        let q = &mut self.active[slot].outstanding;
        if !q.spilled && (q.len as usize) < q.inline.len() {
            let at = (q.start + q.len) as usize % q.inline.len();
            q.inline[at] = entry;
            q.len += 1;
        } else {
            q.spilled = true;
            self.spill[slot].push_back(entry);
        }
    }

    fn front_outstanding(&self, slot: usize) -> Option<(u32, u32)> {
        let q = &self.active[slot].outstanding;
        if q.len > 0 {
            Some(q.inline[q.start as usize])
        } else if q.spilled {
            self.spill[slot].front().copied()
        } else {
            None
        }
    }

    fn pop_outstanding(&mut self, slot: usize) -> Option<(u32, u32)> {
        let q = &mut self.active[slot].outstanding;
        if q.len > 0 {
            let entry = q.inline[q.start as usize];
            q.start = (q.start + 1) % q.inline.len() as u8;
            q.len -= 1;
            Some(entry)
        } else if q.spilled {
            let entry = self.spill[slot].pop_front();
            q.spilled = !self.spill[slot].is_empty();
            entry
        } else {
            None
        }
    }

    /// Puts `ev` (or nothing) into an active slot with nothing outstanding.
    fn reset_slot(&mut self, slot: usize, ev: Ev) {
        self.active[slot] = EvSlot::new(ev);
        self.spill[slot].clear();
    }
}

/// One slot of the active set: its EV (`NO_EV` when left empty), until
/// when it is avoided after an ECN echo, and the transmissions outstanding
/// on it; together, as a packet and its SACK need all three (32 bytes: two
/// slots to a cache line).
#[derive(Clone, Copy, Debug, Default)]
struct EvSlot {
    avoid_until: Time,
    outstanding: Outstanding,
    ev: Ev,
}

impl EvSlot {
    fn new(ev: Ev) -> EvSlot {
        EvSlot { ev, avoid_until: Time::ZERO, outstanding: Outstanding::default() }
    }
}

/// Round-trip times measured from SACKs, in picoseconds.
#[derive(Clone, Copy, Debug)]
struct RttEstimate {
    srtt: f64,
    rttvar: f64,
    min: Time,
}

/// Sender side of an MRC QP.
#[derive(Clone, Debug)]
pub(super) struct MrcSender {
    planes: Vec<PlaneEvs>,
    writes: PostedWrites,
    /// PSN of `slots[0]`.
    base: u32,
    slots: VecDeque<Slot>,
    /// Transmissions in sending order (seq, PSN, time), for loss detection
    /// across EVs; entries no longer in flight are dropped lazily.
    sent: VecDeque<(u32, u32, Time)>,
    reorder_window: Time,
    /// The reordering window's fraction of `reorder_window`.
    reorder_scale: f64,
    /// Packets declared lost that had arrived (reordered beyond the window).
    pub(super) spurious_losses: u64,
    lost_scratch: Vec<u32>,
    rto: Time,
    rto_low: Time,
    rto_min: Time,
    rtt: Option<RttEstimate>,
    /// Recent convictions of an EV by a resent copy: (PSN, EV).
    convicted: VecDeque<(u32, Ev)>,
    /// Backoff of the tail timer after spurious losses (1 = none), and the
    /// timeout count when it last grew.
    timer_scale: f64,
    backed_off: u64,
    /// PSNs to resend, oldest first.
    resend: VecDeque<u32>,
    next_seq: u32,
    /// Payload and packets (copies, counted each time sent) in flight: a
    /// zero-length write is a packet in flight with no bytes.
    in_flight_bytes: u64,
    in_flight_packets: u32,
    cc: Nscc,
    mtu: u32,
    /// Deadline of the retransmission timer.
    pub(super) rto_deadline: Option<Time>,
    /// RACK's state: the send time of the latest delivered transmission
    /// and its RTT; and when the reordering timer is due (`arm_reorder`).
    rack: Option<(Time, Time)>,
    pub(super) reorder_deadline: Option<Time>,
    pub(super) retransmitted_packets: u64,
    pub(super) timeouts: u64,
    pub(super) retired_evs: u64,
    pub(super) resurrected_evs: u64,
    resurrect_after: u32,
    /// EV state changes since the last `take_ev_changes`, when logging.
    ev_log: Option<Vec<EvChange>>,
    /// Planes usable at this end and, from SACKs, at the other end.
    local_up: u8,
    remote_up: u8,
    /// The paths EVs name, when the sender knows them (SRv6).
    paths: Option<PathSpace>,
    /// The plane after the one the last packet went on: the rotation over
    /// the planes (s2.1) continues there.
    plane_turn: usize,
    /// Swap an ECN-marked EV for a backup (`MrcConfig::ecn_replace`).
    ecn_replace: bool,
    pub(super) ecn_replacements: u64,
    /// Active EVs per uplink, reused by `take_backup`.
    load_scratch: Vec<u32>,
}

impl MrcSender {
    /// A sender with `evs / planes` EVs per plane that stripe over `paths`
    /// (`striping`), drawn from `rng`, or that take path choices
    /// `0..paths_per_plane` when that is set.
    pub(super) fn new(
        cfg: &MrcConfig,
        planes: usize,
        paths: Option<PathSpace>,
        mtu: u32,
        max_window: u64,
        rng: &mut Rng,
    ) -> MrcSender {
        let per_plane = (cfg.evs as usize / planes).max(1);
        let backup = cfg.backup_evs as usize / planes;
        let planes = (0..planes)
            .map(|plane| {
                let mut evs = match cfg.paths_per_plane {
                    Some(n) => (0..per_plane + backup).map(|k| Ev::new(plane, k as u32 % n.max(1))).collect(),
                    None => striped_evs(plane, per_plane + backup, paths, rng),
                }
                .into_iter();
                let active = evs.by_ref().take(per_plane).map(EvSlot::new).collect();
                PlaneEvs::new(active, evs.rev().collect())
            })
            .collect();
        MrcSender {
            planes,
            writes: PostedWrites::default(),
            base: 0,
            slots: VecDeque::new(),
            sent: VecDeque::new(),
            reorder_window: cfg.reorder_window,
            reorder_scale: 1.0,
            spurious_losses: 0,
            lost_scratch: Vec::new(),
            rto: cfg.rto,
            rto_low: cfg.rto_low,
            rto_min: cfg.rto_min,
            rtt: None,
            convicted: VecDeque::new(),
            timer_scale: 1.0,
            backed_off: u64::MAX,
            resend: VecDeque::new(),
            next_seq: 0,
            in_flight_bytes: 0,
            in_flight_packets: 0,
            cc: Nscc::new(&cfg.cc, mtu, max_window),
            mtu,
            rto_deadline: None,
            rack: None,
            reorder_deadline: None,
            retransmitted_packets: 0,
            timeouts: 0,
            retired_evs: 0,
            resurrected_evs: 0,
            resurrect_after: cfg.resurrect_after.max(1),
            ev_log: None,
            local_up: 0xFF,
            remote_up: 0xFF,
            paths,
            plane_turn: 0,
            ecn_replace: cfg.ecn_replace,
            ecn_replacements: 0,
            load_scratch: Vec::new(),
        }
    }

    /// Replaces the drawn EVs with `set`, each EV in its plane's sets.
    pub(super) fn set_evs(&mut self, set: &EvSet) {
        for (plane, evs) in self.planes.iter_mut().enumerate() {
            let of_plane = |list: &[Ev]| list.iter().copied().filter(|ev| ev.plane() == plane).collect::<Vec<_>>();
            let mut backup = of_plane(&set.backup);
            backup.reverse();
            *evs = PlaneEvs::new(of_plane(&set.active).into_iter().map(EvSlot::new).collect(), backup);
        }
    }

    /// Starts logging EV state changes, beginning with the initial sets.
    pub(super) fn log_evs(&mut self) {
        let mut log = Vec::new();
        for plane in &self.planes {
            log.extend(plane.active.iter().map(|slot| EvChange { ev: slot.ev, state: EvState::Active }));
            log.extend(plane.backup.iter().map(|&ev| EvChange { ev, state: EvState::Backup }));
        }
        self.ev_log = Some(log);
    }

    /// EV state changes since the last call (empty unless logging).
    pub(super) fn take_ev_changes(&mut self) -> Vec<EvChange> {
        self.ev_log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn logged(&mut self, ev: Ev, state: EvState) {
        if let Some(log) = self.ev_log.as_mut() {
            log.push(EvChange { ev, state });
        }
    }

    /// Posts a write (with immediate for `Verb::WriteImm`); returns its first PSN and
    /// packet count.
    pub(super) fn post(&mut self, bytes: u64, verb: Verb) -> (u32, u32) {
        let (first, packets) = self.writes.post(bytes, self.mtu, verb);
        self.slots.extend(std::iter::repeat_n(Slot::Pending { copies: 0, suspect: NO_EV }, packets as usize));
        self.resend.extend(first..first + packets);
        (first, packets)
    }

    /// Length of the message `psn` belongs to.
    pub(super) fn message_bytes(&self, psn: u32) -> u64 {
        self.writes.write_bytes(psn)
    }

    /// Whether a packet could go now (data waiting and room in the window).
    pub(super) fn has_data(&self) -> bool {
        !self.resend.is_empty() && (self.in_flight_bytes as f64) < self.cc.window()
    }

    /// The retransmission timeout now. With at most three packets in
    /// flight (the tail of a message, or a window cut to a few packets,
    /// where no later SACK will reveal a loss), IRN's low timeout,
    /// shortened to RFC 6298's SRTT + 4 RTTVAR once RTTs have been measured
    /// (never below two of the smallest RTT seen); else the high one.
    pub(super) fn rto(&self) -> Time {
        if self.in_flight_packets > 3 {
            return self.rto;
        }
        match self.rtt {
            Some(rtt) => {
                let estimate = Time(((rtt.srtt + 4.0 * rtt.rttvar) * self.timer_scale) as u64);
                estimate.max(rtt.min + rtt.min).max(self.rto_min).min(self.rto_low)
            }
            None => self.rto_low,
        }
    }

    /// A copy of `payload` bytes left the network: acknowledged, known
    /// lost, or superseded.
    fn landed(&mut self, payload: u32) {
        self.in_flight_bytes -= payload as u64;
        self.in_flight_packets -= 1;
    }

    pub(super) fn outstanding(&self) -> bool {
        self.slots.iter().any(|s| *s != Slot::Acked)
    }

    /// Whether the retransmission timer should run: something is in
    /// flight, or data waits that no plane can carry, for want of a port or
    /// of an EV (then only the error timeout ends the wait). Data that only waits for its turn at the NIC
    /// is not late: a timer running then fired on QPs an incast's NIC
    /// scheduler had not yet served (Fig 17: 126,886 timeouts at 128MiB
    /// with nothing in flight to resend).
    pub(super) fn waiting(&self) -> bool {
        self.in_flight_packets > 0 || (!self.can_send_somewhere() && self.outstanding())
    }

    /// Whether some plane is up at both ends and has an EV to send on.
    fn can_send_somewhere(&self) -> bool {
        let up = self.local_up & self.remote_up;
        self.planes
            .iter()
            .enumerate()
            .any(|(p, evs)| up & (1 << p.min(7)) != 0 && evs.active.iter().any(|slot| slot.ev != NO_EV))
    }

    fn slot(&mut self, psn: u32) -> Option<&mut Slot> {
        psn.checked_sub(self.base).and_then(|i| self.slots.get_mut(i as usize))
    }

    /// `Transport::warm` for a SACK or NACK of `psn` (`on_sack`'s reads).
    pub(super) fn warm(&self, stage: Warm, psn: u32) {
        match stage {
            Warm::Own => {
                prefetch(&self.base);
                prefetch(&self.slots);
                prefetch(&self.planes);
                prefetch(&self.sent);
                prefetch(&self.cc);
                self.writes.warm(Warm::Own);
            }
            Warm::Reached => {
                if let Some(slot) = psn.checked_sub(self.base).and_then(|i| self.slots.get(i as usize)) {
                    prefetch(slot);
                }
                if let Some(first) = self.planes.first() {
                    let bytes = self.planes.len() * std::mem::size_of::<PlaneEvs>();
                    prefetch_lines(first, 0..bytes.div_ceil(64));
                }
                if let Some(oldest) = self.sent.front() {
                    prefetch(oldest);
                }
                self.writes.warm(Warm::Reached);
            }
        }
    }

    /// Payload bytes of packet `psn`.
    fn payload_of(&self, psn: u32) -> u32 {
        self.writes.packet(psn).expect("a posted PSN").payload
    }

    /// The next packet for `plane` and the EV it goes on: the next EV of
    /// that plane that is not being avoided (or the next at all, when every
    /// one is).
    pub(super) fn next_packet(&mut self, plane: usize, now: Time) -> Option<(DataPacket, Ev)> {
        if !self.has_data() || (self.local_up & self.remote_up) & (1 << plane.min(7)) == 0 {
            return None;
        }
        let pick = self.pick_slot(plane, now)?;
        let (psn, copies, suspect) = loop {
            let psn = self.resend.pop_front()?;
            if let Some(&mut Slot::Pending { copies, suspect }) = self.slot(psn) {
                break (psn, copies, suspect);
            }
        };
        let retransmission = copies > 0;
        self.plane_turn = plane + 1;
        let evs = &mut self.planes[plane];
        evs.cursor = pick + 1;
        let ev = evs.active[pick].ev;
        let packet = self.writes.packet(psn).expect("a posted PSN");
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.planes[plane].push_outstanding(pick, (seq, psn));
        *self.slot(psn).expect("slot") = Slot::InFlight {
            plane: plane as u8,
            copies: copies.saturating_add(1),
            slot: pick as u16,
            ev,
            suspect,
            seq,
            sent: now,
        };
        self.sent.push_back((seq, psn, now));
        self.in_flight_bytes += packet.payload as u64;
        self.in_flight_packets += 1;
        if retransmission {
            self.retransmitted_packets += 1;
        }
        Some((DataPacket { retransmission, ..packet }, ev))
    }

    /// The plane the rotation sends on next: the first usable one from the
    /// plane after the last packet's.
    pub(super) fn next_plane(&self) -> usize {
        let (planes, up) = (self.planes.len().max(1), self.local_up & self.remote_up);
        (0..planes).map(|k| (self.plane_turn + k) % planes).find(|&p| up & (1 << p.min(7)) != 0).unwrap_or(0)
    }

    /// The active slot of `plane` the next packet goes on.
    fn pick_slot(&self, plane: usize, now: Time) -> Option<usize> {
        let evs = self.planes.get(plane)?;
        let n = evs.active.len();
        let mut fallback = None;
        for k in 0..n {
            let i = (evs.cursor + k) % n;
            if evs.active[i].ev == NO_EV {
                continue;
            }
            if evs.active[i].avoid_until <= now {
                return Some(i);
            }
            fallback.get_or_insert(i);
        }
        fallback
    }

    /// A SACK for `psn` of the transmission on EV `echo`, ECN-marked or
    /// not, whose cumulative acknowledgement is `ack`. Returns whether it
    /// acknowledged something new.
    ///
    /// Nothing below `ack` is declared lost: SACKs can overtake each other
    /// (a receiver moves its reverse EV to another path), and the later
    /// SACK's cumulative ack then proves that a packet whose own SACK is
    /// still on the way arrived. (`on_cumulative_ack` applies it after.)
    ///
    /// The echo tells transmissions apart: a SACK of the copy sent on the
    /// EV blamed for a loss says the loss was not one (its EV is restored);
    /// a SACK of the resent copy while the blamed one never came confirms
    /// it (a timeout only blames; this retires the EV).
    pub(super) fn on_sack(&mut self, psn: u32, echo: Ev, ecn: bool, ack: u32, now: Time, ecn_avoid: Time) -> bool {
        let (plane, slot, ev, suspect, seq, sent) = match self.slot(psn).copied() {
            Some(Slot::InFlight { ev, suspect, .. }) if echo != ev && echo == suspect => {
                // The first copy arrived; the resend is now a duplicate.
                let payload = self.payload_of(psn);
                self.landed(payload);
                self.acked_spuriously(psn, suspect);
                return true;
            }
            Some(Slot::InFlight { plane, slot, ev, suspect, seq, sent, .. }) => {
                (plane as usize, slot as usize, ev, suspect, seq, sent)
            }
            Some(Slot::Pending { copies, suspect }) if copies > 0 => {
                // Declared lost, not yet resent, and here a copy is: the
                // blamed one if the echo says so or it was the only one.
                let acquitted = if echo == suspect || copies == 1 { suspect } else { NO_EV };
                self.acked_spuriously(psn, acquitted);
                return true;
            }
            _ => {
                // A first copy arriving after its resent copy convicted its
                // EV: acquit it.
                if let Some(i) = self.convicted.iter().position(|&c| c == (psn, echo)) {
                    self.convicted.remove(i);
                    self.restore(echo);
                }
                return false;
            }
        };
        // (Both copies on one EV: the SACK could be either's, no verdict.)
        if suspect != NO_EV && suspect != ev {
            self.confirm_loss(psn, suspect, now);
        }
        let rtt = now.saturating_sub(sent);
        self.timer_scale = (self.timer_scale * (1.0 - 1.0 / 64.0)).max(1.0);
        *self.slot(psn).expect("slot") = Slot::Acked;
        let payload = self.payload_of(psn);
        self.landed(payload);
        self.cc.on_ack(payload, sent, now, ecn);
        self.measure_rtt(rtt);
        let on = &mut self.planes[plane].active[slot];
        if ecn && on.ev == ev {
            on.avoid_until = now + ecn_avoid;
        }
        let mut lost = std::mem::take(&mut self.lost_scratch);
        // Earlier packets on the same EV took the same path: still missing
        // means lost.
        while let Some((s, p)) = self.planes[plane].front_outstanding(slot) {
            if seq_before(seq, s) {
                break;
            }
            self.planes[plane].pop_outstanding(slot);
            if s != seq && p >= ack && self.in_flight_as(p, s) {
                lost.push(p);
            }
        }
        // Across EVs, paths reorder by their queueing differences only: a
        // packet sent more than the reordering window before one that
        // arrived is lost (RACK's rule, RFC 8985 s6.2), which is how a
        // path that went dead is noticed without a timeout.
        let horizon = sent.saturating_sub(self.reorder_window());
        while let Some(&(s, p, at)) = self.sent.front() {
            let still = self.in_flight_as(p, s);
            if still && at >= horizon {
                break;
            }
            self.sent.pop_front();
            if still && p >= ack {
                lost.push(p);
            }
        }
        // Each goes to the front of the resend queue: the oldest last.
        for &p in lost.iter().rev() {
            self.lose(p, now);
        }
        lost.clear();
        self.lost_scratch = lost;
        let latest = self.rack.map_or(sent, |(latest, _)| latest.max(sent));
        self.rack = Some((latest, rtt));
        // The walk above stopped at the oldest packet still in flight.
        let window = self.reorder_window;
        self.reorder_deadline =
            self.sent.front().filter(|&&(_, _, at)| at <= latest).map(|&(_, _, at)| at + rtt + window);
        if ecn && self.ecn_replace && self.planes[plane].active[slot].ev == ev {
            self.replace_congested(plane, slot, now, ecn_avoid);
        }
        self.advance();
        true
    }

    /// The EV in active `slot` of `plane` came back ECN-marked: a path more
    /// congested than others (s2.1). Swap it for a backup of the same
    /// plane, as Fig 14's flow moves from EV-A to EV-B; the EV works, so it
    /// joins the backups, last in line. With no backup it is only avoided.
    fn replace_congested(&mut self, plane: usize, slot: usize, now: Time, ecn_avoid: Time) {
        if self.planes[plane].backup.is_empty() {
            return;
        }
        let marked = self.planes[plane].active[slot].ev;
        let fresh = self.take_backup(plane, slot, now);
        self.planes[plane].marked.push((marked, now + ecn_avoid));
        self.planes[plane].backup.insert(0, marked);
        self.logged(marked, EvState::Backup);
        self.ecn_replacements += 1;
        self.fill_slot(plane, slot, fresh);
    }

    /// A SACK saying a copy of `psn` arrived after an earlier one had (a
    /// D-SACK): the loss that sent the copy was not one, its SACK was lost
    /// or late. The EV blamed for it is put back (it was convicted only
    /// because the first copy's SACK never came), as for any spurious loss.
    /// Returns whether it acknowledged something new.
    pub(super) fn on_duplicate_sack(&mut self, psn: u32, echo: Ev) -> bool {
        let suspect = match self.slot(psn).copied() {
            // A copy arrived twice: the resend was for nothing, and the EV
            // blamed for the copy before it is acquitted if that was the
            // first (one copy earlier) or the echo names it.
            Some(Slot::InFlight { copies, suspect, .. }) => {
                let payload = self.payload_of(psn);
                self.landed(payload);
                if copies <= 2 || echo == suspect {
                    suspect
                } else {
                    NO_EV
                }
            }
            Some(Slot::Pending { copies, suspect }) if copies > 0 => {
                if copies == 1 || echo == suspect {
                    suspect
                } else {
                    NO_EV
                }
            }
            _ => {
                // Already acknowledged. If this is the first copy, on the
                // EV the resent copy's SACK convicted, it was late, not
                // lost: acquit that EV. (A duplicate on another EV says
                // nothing about the first copy.)
                if let Some(i) = self.convicted.iter().position(|&c| c == (psn, echo)) {
                    self.convicted.remove(i);
                    self.restore(echo);
                }
                return false;
            }
        };
        if suspect == NO_EV {
            *self.slot(psn).expect("slot") = Slot::Acked;
            self.advance();
            return true;
        }
        self.acked_spuriously(psn, suspect);
        true
    }

    /// RACK's reordering timer (RFC 8985 s6.2, step 5): the oldest packet
    /// still in flight that was sent before the latest delivered one is
    /// lost once an RTT and the reordering window have passed since it was
    /// sent, even if no later SACK comes. The window is the widest one
    /// (`MrcConfig::reorder_window`), not the one confirmed losses narrow:
    /// with no later packet to compare against, an RTT sample is all the
    /// timer has, and queueing varies RTTs by more than a narrowed window
    /// (Fig 12, where one EV drops 20%: 34-57 EVs retired for nothing). Without it a window whose lost
    /// packets fill it (a path dies, the sender stops) waited for the
    /// retransmission timer (Fig 19a: 350us with nothing delivered).
    fn arm_reorder(&mut self) {
        self.reorder_deadline = None;
        let Some((latest, rtt)) = self.rack else { return };
        while let Some(&(s, p, at)) = self.sent.front() {
            if !self.in_flight_as(p, s) {
                self.sent.pop_front();
                continue;
            }
            if at <= latest {
                self.reorder_deadline = Some(at + rtt + self.reorder_window);
            }
            return;
        }
    }

    /// The reordering timer expired at `now`: what it finds lost is resent
    /// and its EVs retired, as a SACK would have. Returns whether it found
    /// a loss.
    pub(super) fn on_reorder_timer(&mut self, now: Time) -> bool {
        let Some((latest, rtt)) = self.rack else { return false };
        let window = self.reorder_window;
        let mut lost = std::mem::take(&mut self.lost_scratch);
        while let Some(&(s, p, at)) = self.sent.front() {
            let still = self.in_flight_as(p, s);
            if still && (at > latest || at + rtt + window > now) {
                break;
            }
            self.sent.pop_front();
            if still {
                lost.push(p);
            }
        }
        let found = !lost.is_empty();
        for &p in lost.iter().rev() {
            self.lose(p, now);
        }
        lost.clear();
        self.lost_scratch = lost;
        self.arm_reorder();
        found
    }

    /// `psn`, declared lost, had arrived after all: reordered beyond the
    /// window, or held in a queue longer than the timer allowed. The EV
    /// blamed for it goes back to the backup set if it was retired. Like
    /// TCP's backoff (RFC 6298 s5.5), the tail timer doubles; each SACK of
    /// a packet not declared lost takes a little of that back.
    fn acked_spuriously(&mut self, psn: u32, suspect: Ev) {
        *self.slot(psn).expect("slot") = Slot::Acked;
        self.restore(suspect);
        self.advance();
    }

    /// A loss blamed on `ev` was not one: count it, back the tail timer
    /// off, and put `ev` back into use if it was retired.
    fn restore(&mut self, ev: Ev) {
        self.spurious_losses += 1;
        self.reorder_scale = (self.reorder_scale * 2.0).min(1.0);
        // Once per timeout: it resent the whole window, most of which was
        // only waiting in queues.
        if self.backed_off != self.timeouts {
            self.backed_off = self.timeouts;
            self.timer_scale = (self.timer_scale * 2.0).min(64.0);
        }
        let plane = ev.plane();
        let Some(evs) = self.planes.get_mut(plane) else { return };
        let Some(i) = evs.retired.iter().position(|r| r.ev == ev) else { return };
        evs.retired.swap_remove(i);
        self.retired_evs -= 1;
        // Into a slot left empty for want of backups, else the backups.
        match evs.active.iter().position(|a| a.ev == NO_EV) {
            Some(slot) => self.fill_slot(plane, slot, ev),
            None => {
                evs.backup.push(ev);
                self.logged(ev, EvState::Backup);
            }
        }
    }

    /// The resent copy of `psn` arrived and the first, sent on `suspect`,
    /// did not: retire `suspect` if it is still active, and remember the
    /// verdict in case the first copy turns up after all. The verdict is
    /// remembered too when `suspect` was already retired, by the loss
    /// being declared: otherwise a first copy arriving after the resent
    /// one could never acquit it.
    fn confirm_loss(&mut self, psn: u32, suspect: Ev, now: Time) {
        self.reorder_scale = (self.reorder_scale / 2.0).max(1.0 / 1024.0);
        let plane = suspect.plane();
        let Some(evs) = self.planes.get(plane) else { return };
        if let Some(slot) = evs.active.iter().position(|a| a.ev == suspect) {
            // Still active: the timer found this loss (a loss declared
            // from SACKs retired its EV then), so congestion control has
            // not counted it yet.
            let payload = self.payload_of(psn);
            self.cc.on_loss(payload);
            self.retire(plane, slot, now);
        } else if let Some(i) = evs.backup.iter().position(|&ev| ev == suspect) {
            // Swapped out for ECN before its loss showed: retire it from
            // the backups, or it would come back dead.
            self.planes[plane].backup.remove(i);
            self.planes[plane].retired.push(Retired { ev: suspect, successes: 0, awaiting: false });
            self.retired_evs += 1;
            self.logged(suspect, EvState::Retired);
        } else if !evs.retired.iter().any(|r| r.ev == suspect) {
            return;
        }
        if self.convicted.len() == CONVICTIONS_KEPT {
            self.convicted.pop_front();
        }
        self.convicted.push_back((psn, suspect));
    }

    /// How much later a delivered packet must have been sent for an earlier
    /// one to count as lost. It starts at `reorder_window`, halves with each
    /// loss the resent copy confirms and doubles back with each that proves
    /// spurious (RACK adapts its window to DSACKs the same way, RFC 8985
    /// s6.2), never below RACK's min RTT / 4: random loss then shows within
    /// a few microseconds, while paths that reorder keep a wide window.
    fn reorder_window(&self) -> Time {
        let floor = self.rtt.map_or(Time::ZERO, |r| Time(r.min.0 / 4));
        Time((self.reorder_window.0 as f64 * self.reorder_scale) as u64).max(floor)
    }

    /// RFC 6298's smoothed RTT and its variation (gains 1/8 and 1/4).
    fn measure_rtt(&mut self, sample: Time) {
        let x = sample.0 as f64;
        match self.rtt.as_mut() {
            None => self.rtt = Some(RttEstimate { srtt: x, rttvar: x / 2.0, min: sample }),
            Some(r) => {
                r.rttvar += 0.25 * ((r.srtt - x).abs() - r.rttvar);
                r.srtt += 0.125 * (x - r.srtt);
                r.min = r.min.min(sample);
            }
        }
    }

    /// Whether `psn` is in flight as transmission `seq`.
    fn in_flight_as(&mut self, psn: u32, seq: u32) -> bool {
        matches!(self.slot(psn), Some(&mut Slot::InFlight { seq: s, .. }) if s == seq)
    }

    /// The SACK's cumulative acknowledgement: every PSN below `ack` has
    /// arrived, including any whose own SACK was lost. Returns whether it
    /// acknowledged something new. A packet declared lost and not resent
    /// yet arrived after all: the EV blamed for it is put back.
    pub(super) fn on_cumulative_ack(&mut self, ack: u32) -> bool {
        let mut progressed = false;
        while self.base < ack {
            let Some(&front) = self.slots.front() else { break };
            match front {
                Slot::InFlight { .. } => {
                    let payload = self.payload_of(self.base);
                    self.landed(payload);
                }
                // Declared lost, not resent yet, and covered: one of its
                // copies arrived; if it had only one, its EV is acquitted.
                Slot::Pending { copies, suspect } if copies > 0 && suspect != NO_EV => {
                    self.restore(if copies == 1 { suspect } else { NO_EV })
                }
                Slot::Pending { .. } | Slot::Acked => {}
            }
            progressed |= front != Slot::Acked;
            self.slots[0] = Slot::Acked;
            self.advance();
        }
        progressed
    }

    /// This NIC's port for `plane` went down or came back: remap at once,
    /// resending what was in flight on it over the other planes.
    pub(super) fn set_plane_up(&mut self, plane: usize, up: bool) {
        let bit = 1u8 << plane.min(7);
        self.local_up = if up { self.local_up | bit } else { self.local_up & !bit };
        if !up {
            self.abandon_plane(plane);
        }
    }

    /// The other end's port state bitmap, from a SACK.
    pub(super) fn set_remote_planes(&mut self, bits: u8) {
        let newly_down = self.remote_up & !bits;
        self.remote_up = bits;
        for plane in (0..self.planes.len()).filter(|&p| newly_down & (1 << p.min(7)) != 0) {
            self.abandon_plane(plane);
        }
    }

    /// Resends everything in flight on `plane`; its EVs are not at fault.
    /// The in-flight packets are found in the PSN slots, not the EVs'
    /// queues: a slot whose EV was retired or swapped since no longer
    /// queues what its old EV still carries.
    fn abandon_plane(&mut self, plane: usize) {
        let Some(evs) = self.planes.get_mut(plane) else { return };
        for slot in 0..evs.active.len() {
            while evs.pop_outstanding(slot).is_some() {}
        }
        let stranded: Vec<u32> = (self.base..)
            .zip(&self.slots)
            .filter_map(|(psn, s)| matches!(s, Slot::InFlight { plane: p, .. } if *p as usize == plane).then_some(psn))
            .collect();
        // Requeueing puts each at the front: the lowest PSN goes last.
        for psn in stranded.into_iter().rev() {
            self.requeue(psn, false);
        }
    }

    /// A NACK: `psn` was trimmed on `ev`. Resend it; shrink the window.
    pub(super) fn on_nack(&mut self, psn: u32, now: Time) {
        if self.requeue(psn, false).is_some() {
            let payload = self.payload_of(psn);
            self.cc.on_trim(payload, now);
        }
    }

    /// Puts an in-flight packet back at the head of the resend queue,
    /// blaming the EV it went on when `blame`; returns the plane, slot and
    /// EV it was sent on.
    fn requeue(&mut self, psn: u32, blame: bool) -> Option<(usize, usize, Ev)> {
        let Some(&mut Slot::InFlight { plane, copies, slot, ev, .. }) = self.slot(psn) else { return None };
        let payload = self.payload_of(psn);
        self.landed(payload);
        let suspect = if blame { ev } else { NO_EV };
        *self.slot(psn).expect("slot") = Slot::Pending { copies, suspect };
        self.resend.push_front(psn);
        Some((plane as usize, slot as usize, ev))
    }

    /// A lost packet: retire its EV for a backup of the same plane (or
    /// leave its slot empty when none is left), resend the packet, and
    /// let congestion control count the loss. A loss
    /// found after its EV was already replaced retires nothing more.
    fn lose(&mut self, psn: u32, now: Time) {
        let Some((plane, slot, ev)) = self.requeue(psn, true) else { return };
        let payload = self.payload_of(psn);
        self.cc.on_loss(payload);
        if self.planes[plane].active[slot].ev == ev {
            self.retire(plane, slot, now);
        }
    }

    /// Retires the EV in an active slot for a backup of the same plane, or
    /// leaves the slot empty when none is left.
    fn retire(&mut self, plane: usize, slot: usize, now: Time) {
        let old = self.planes[plane].active[slot].ev;
        if old == NO_EV {
            return;
        }
        self.planes[plane].retired.push(Retired { ev: old, successes: 0, awaiting: false });
        self.retired_evs += 1;
        self.logged(old, EvState::Retired);
        let fresh = self.take_backup(plane, slot, now);
        self.fill_slot(plane, slot, fresh);
    }

    /// The backup that takes over active `slot` of `plane` (`NO_EV` when
    /// none is left): where the sender knows the paths, one neither on the
    /// slot's EV's path (it may be dead) nor on a path swapped out for ECN
    /// within `ecn_avoid`, and on the uplink with the fewest active EVs, so
    /// that the set keeps striping; among equals, the next in the backup
    /// sequence.
    fn take_backup(&mut self, plane: usize, slot: usize, now: Time) -> Ev {
        let evs = &mut self.planes[plane];
        let Some(space) = self.paths else { return evs.backup.pop().unwrap_or(NO_EV) };
        let leaving = evs.active[slot].ev;
        let load = &mut self.load_scratch;
        load.clear();
        load.resize(space.uplinks.max(1) as usize, 0);
        for (k, a) in evs.active.iter().enumerate() {
            if k != slot && a.ev != NO_EV {
                load[uplink_of(a.ev, space)] += 1;
            }
        }
        evs.marked.retain(|&(_, until)| until > now);
        let marked = &evs.marked;
        let avoided = |ev: Ev| {
            let path = path_of(ev, space);
            let retiring = leaving != NO_EV && path == path_of(leaving, space);
            retiring || marked.iter().any(|&(m, _)| path_of(m, space) == path)
        };
        // The sequence pops from the back: scan from there, keep the first best.
        let best = (0..evs.backup.len())
            .rev()
            .min_by_key(|&i| (avoided(evs.backup[i]), load[uplink_of(evs.backup[i], space)]));
        best.map_or(NO_EV, |i| evs.backup.remove(i))
    }

    /// Puts `ev` (or nothing) into an active slot. What is still
    /// outstanding on the old EV went by another path: it cannot be
    /// ordered against the new EV's packets.
    fn fill_slot(&mut self, plane: usize, slot: usize, ev: Ev) {
        self.planes[plane].reset_slot(slot, ev);
        if ev != NO_EV {
            self.logged(ev, EvState::Active);
        }
    }

    /// Whether some EV is retired and waiting to be probed.
    pub(super) fn has_retired(&self) -> bool {
        self.planes.iter().any(|p| !p.retired.is_empty())
    }

    /// The retired EVs to probe now. A probe still unanswered from the
    /// previous round counts as failed and restarts that EV's count.
    pub(super) fn probe_retired(&mut self) -> Vec<Ev> {
        let mut out = Vec::new();
        for plane in &mut self.planes {
            for r in &mut plane.retired {
                if r.awaiting {
                    r.successes = 0;
                }
                r.awaiting = true;
                out.push(r.ev);
            }
        }
        out
    }

    /// A probe of retired EV `ev` came back. After enough in a row the EV
    /// is resurrected: into an empty active slot of its plane if there is
    /// one, else into the backup set.
    pub(super) fn on_probe_reply(&mut self, ev: Ev) {
        let plane = ev.plane();
        let Some(evs) = self.planes.get_mut(plane) else { return };
        let Some(i) = evs.retired.iter().position(|r| r.ev == ev && r.awaiting) else { return };
        evs.retired[i].awaiting = false;
        evs.retired[i].successes += 1;
        if evs.retired[i].successes < self.resurrect_after {
            return;
        }
        evs.retired.swap_remove(i);
        self.resurrected_evs += 1;
        match evs.active.iter().position(|a| a.ev == NO_EV) {
            Some(slot) => self.fill_slot(plane, slot, ev),
            None => {
                evs.backup.insert(0, ev);
                self.logged(ev, EvState::Backup);
            }
        }
    }

    /// Applies a denylist: every EV for which `denied` says so leaves the
    /// active, backup and retired sets for good (its active slot takes a
    /// backup); EVs no longer denied are retired, to be probed back.
    pub(super) fn set_denied(&mut self, denied: impl Fn(Ev) -> bool, now: Time) {
        for plane in 0..self.planes.len() {
            let evs = &mut self.planes[plane];
            let (still, freed): (Vec<Ev>, Vec<Ev>) = evs.denied.drain(..).partition(|&ev| denied(ev));
            evs.denied = still;
            let (backup, denied_backup): (Vec<Ev>, Vec<Ev>) = evs.backup.drain(..).partition(|&ev| !denied(ev));
            evs.backup = backup;
            let (retired, denied_retired): (Vec<Retired>, Vec<Retired>) =
                evs.retired.drain(..).partition(|r| !denied(r.ev));
            evs.retired = retired;
            let mut newly: Vec<Ev> =
                denied_backup.into_iter().chain(denied_retired.into_iter().map(|r| r.ev)).collect();
            for &ev in &freed {
                self.planes[plane].retired.push(Retired { ev, successes: 0, awaiting: false });
                self.logged(ev, EvState::Retired);
            }
            for slot in 0..self.planes[plane].active.len() {
                let ev = self.planes[plane].active[slot].ev;
                if ev != NO_EV && denied(ev) {
                    newly.push(ev);
                    let fresh = self.take_backup(plane, slot, now);
                    self.fill_slot(plane, slot, fresh);
                }
            }
            for &ev in &newly {
                self.logged(ev, EvState::Denied);
            }
            self.planes[plane].denied.extend(newly);
        }
    }

    /// An active EV of `plane` to answer the other end's probe on, the
    /// next in turn: the active set is what the sender believes works, but
    /// until SACKs prove it some of it may not, so successive answers take
    /// different paths rather than all the first one (a dead first EV
    /// would otherwise never let the other end learn a working reverse EV,
    /// and without one no SACK would retire that EV).
    pub(super) fn reply_ev(&mut self, plane: usize) -> Option<Ev> {
        let evs = self.planes.get_mut(plane)?;
        let n = evs.active.len();
        let k = (0..n).map(|k| (evs.reply_turn + k) % n).find(|&i| evs.active[i].ev != NO_EV)?;
        evs.reply_turn = k + 1;
        Some(evs.active[k].ev)
    }

    /// The timer expired: resend everything still in flight. Congestion
    /// control counts a loss only once a resent copy confirms it.
    /// A timeout says only that nothing came back for a while, which deep
    /// queueing also does: what is in flight is resent and its EVs are
    /// blamed, but one is retired only when its packet's resent copy is
    /// acknowledged and the first copy never was (`on_sack`).
    pub(super) fn on_timeout(&mut self) {
        self.timeouts += 1;
        let stranded: Vec<u32> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| matches!(s, Slot::InFlight { .. }).then_some(self.base + i as u32))
            .collect();
        for psn in stranded.into_iter().rev() {
            self.requeue(psn, true);
        }
        self.sent.clear();
        self.reorder_deadline = None;
    }

    /// Drops acknowledged PSNs from the front and finished messages.
    fn advance(&mut self) {
        while self.slots.front() == Some(&Slot::Acked) {
            self.slots.pop_front();
            self.base += 1;
        }
        self.writes.forget_below(self.base);
    }

    /// Active (non-empty) EV slots of each plane.
    #[cfg(test)]
    pub(super) fn active_evs_per_plane(&self) -> Vec<usize> {
        self.planes.iter().map(|p| p.active.iter().filter(|slot| slot.ev != NO_EV).count()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender(planes: usize) -> MrcSender {
        let cfg = MrcConfig { evs: 8, backup_evs: 4, ..Default::default() };
        MrcSender::new(&cfg, planes, None, 1000, 1_000_000, &mut Rng::stream(1, &[]))
    }

    #[test]
    fn sprays_over_the_evs_of_each_plane_in_turn() {
        let mut s = sender(2);
        s.post(8000, Verb::Write);
        let evs: Vec<Ev> = (0..8).map(|k| s.next_packet(k % 2, Time::ZERO).unwrap().1).collect();
        let distinct: std::collections::BTreeSet<Ev> = evs.iter().copied().collect();
        assert_eq!(distinct.len(), 8);
        assert_eq!(s.active_evs_per_plane(), [4, 4]);
    }

    #[test]
    fn a_lost_packet_retires_its_ev_for_a_backup_of_the_same_plane() {
        let mut s = sender(1);
        s.post(40 * 1000, Verb::Write);
        let sent: Vec<(DataPacket, Ev)> = (0..40).map(|_| s.next_packet(0, Time::ZERO).unwrap()).collect();
        // Everything but PSN 0 arrives, including later packets on its EV.
        for (p, ev) in &sent[1..] {
            s.on_sack(p.psn, *ev, false, 0, Time::ZERO, Time::ZERO);
        }
        assert_eq!(s.retired_evs, 1);
        let (again, ev) = s.next_packet(0, Time::ZERO).unwrap();
        assert_eq!((again.psn, again.retransmission), (0, true));
        assert_ne!(ev, sent[0].1);
    }

    /// A real loss, not only a trim, costs window: the bytes that did not
    /// arrive, so that a lossy run cannot outrun a loss-free one.
    #[test]
    fn a_declared_loss_shrinks_the_window() {
        let mut s = sender(1);
        s.post(4 * 1000, Verb::Write);
        let sent: Vec<(DataPacket, Ev)> = (0..4).map(|k| s.next_packet(0, Time::from_us(k)).unwrap()).collect();
        s.on_sack(sent[3].0.psn, sent[3].1, false, 0, Time::from_us(13), Time::ZERO);
        let full = s.cc.window();
        assert!(s.on_reorder_timer(Time::from_ms(1)));
        assert_eq!(s.cc.window(), full - 3000.0, "three packets of 1000 bytes lost");
    }

    /// Transmission numbers are 32-bit and wrap; ten packets per EV also
    /// take each EV's queue past its two inline entries.
    #[test]
    fn per_ev_loss_detection_holds_across_the_transmission_number_wrap() {
        for lost in [None, Some(0), Some(5)] {
            let mut s = sender(1);
            s.next_seq = u32::MAX - 6;
            s.post(40 * 1000, Verb::Write);
            let sent: Vec<(DataPacket, Ev)> = (0..40).map(|_| s.next_packet(0, Time::ZERO).unwrap()).collect();
            for (p, ev) in sent.iter().filter(|(p, _)| Some(p.psn) != lost) {
                s.on_sack(p.psn, *ev, false, 0, Time::ZERO, Time::ZERO);
            }
            assert_eq!(s.retired_evs, lost.is_some() as u64, "lost {lost:?}");
            match lost {
                Some(psn) => assert_eq!(s.next_packet(0, Time::ZERO).unwrap().0.psn, psn),
                None => assert!(!s.outstanding()),
            }
        }
    }

    #[test]
    fn trimmed_packets_are_resent_first_and_shrink_the_window() {
        let mut s = sender(1);
        s.post(5000, Verb::Write);
        let p: Vec<(DataPacket, Ev)> = (0..5).map(|_| s.next_packet(0, Time::ZERO).unwrap()).collect();
        let before = s.cc.window();
        s.on_nack(p[2].0.psn, Time::ZERO);
        assert!(s.cc.window() < before);
        assert_eq!(s.next_packet(0, Time::ZERO).unwrap().0.psn, 2);
    }

    /// Loses the first packet sent on plane 0 (later ones on its EV are
    /// acknowledged), retiring its EV; returns that EV.
    fn retire_one(s: &mut MrcSender) -> Ev {
        s.post(40 * 1000, Verb::Write);
        let sent: Vec<(DataPacket, Ev)> = (0..40).map(|_| s.next_packet(0, Time::ZERO).unwrap()).collect();
        for (p, ev) in &sent[1..] {
            s.on_sack(p.psn, *ev, false, 0, Time::ZERO, Time::ZERO);
        }
        assert_eq!(s.retired_evs, 1);
        sent[0].1
    }

    #[test]
    fn enough_answered_probes_resurrect_a_retired_ev_into_the_backup_set() {
        let mut s = sender(1);
        let ev = retire_one(&mut s);
        s.log_evs();
        s.take_ev_changes();
        for round in 0..3 {
            assert_eq!(s.probe_retired(), [ev], "round {round}");
            s.on_probe_reply(ev);
        }
        assert!(!s.has_retired());
        assert_eq!(s.resurrected_evs, 1);
        assert_eq!(s.take_ev_changes(), [EvChange { ev, state: EvState::Backup }]);
    }

    #[test]
    fn an_unanswered_probe_restarts_the_count() {
        let mut s = sender(1);
        let ev = retire_one(&mut s);
        s.probe_retired();
        s.on_probe_reply(ev);
        s.probe_retired();
        s.on_probe_reply(ev);
        s.probe_retired(); // lost
        s.probe_retired();
        s.on_probe_reply(ev);
        s.probe_retired();
        s.on_probe_reply(ev);
        assert!(s.has_retired());
        s.probe_retired();
        s.on_probe_reply(ev);
        assert!(!s.has_retired());
    }

    #[test]
    fn with_no_backup_left_a_retired_slot_stays_empty_until_a_resurrection_fills_it() {
        let cfg = MrcConfig { evs: 4, backup_evs: 0, resurrect_after: 1, ..Default::default() };
        let mut s = MrcSender::new(&cfg, 1, None, 1000, 1_000_000, &mut Rng::stream(1, &[]));
        let ev = retire_one(&mut s);
        assert_eq!(s.active_evs_per_plane(), [3]);
        s.post(1000, Verb::Write);
        assert!((0..8).all(|_| s.next_packet(0, Time::ZERO).is_none_or(|(_, e)| e != ev)));
        s.probe_retired();
        s.on_probe_reply(ev);
        assert_eq!(s.active_evs_per_plane(), [4]);
    }

    #[test]
    fn denied_evs_leave_every_set_and_backups_keep_the_planes_equal() {
        let mut s = sender(2);
        // Deny one active EV of plane 1.
        let victim = s.planes[1].active[0].ev;
        s.set_denied(|ev| ev == victim, Time::ZERO);
        assert_eq!(s.active_evs_per_plane(), [4, 4]);
        assert!(s.planes[1].active.iter().all(|slot| slot.ev != victim));
        assert_eq!(s.planes[1].denied, [victim]);
        // Lifting the denial returns it to probing, not to use.
        s.set_denied(|_| false, Time::ZERO);
        assert!(s.planes[1].denied.is_empty());
        assert_eq!(s.probe_retired(), [victim]);
    }

    #[test]
    fn paths_per_plane_restricts_evs_to_that_many_paths() {
        let cfg = MrcConfig { evs: 8, backup_evs: 8, paths_per_plane: Some(2), ..Default::default() };
        let s = MrcSender::new(&cfg, 8, None, 1000, 1_000_000, &mut Rng::stream(1, &[]));
        for (plane, evs) in s.planes.iter().enumerate() {
            assert_eq!(evs.active.iter().map(|slot| slot.ev).collect::<Vec<_>>(), [Ev::new(plane, 0)]);
            assert_eq!(evs.backup, [Ev::new(plane, 1)]);
        }
    }

    #[test]
    fn retirements_keep_the_planes_active_ev_counts_equal() {
        let cfg = MrcConfig { evs: 16, backup_evs: 16, ..Default::default() };
        let mut s = MrcSender::new(&cfg, 4, None, 1000, 1_000_000, &mut Rng::stream(3, &[]));
        s.post(400 * 1000, Verb::Write);
        // Three of plane 2's paths lose everything; the rest all arrive.
        let bad: Vec<Ev> = s.planes[2].active[..3].iter().map(|slot| slot.ev).collect();
        let sent: Vec<(DataPacket, Ev)> =
            (0..200).map(|k| s.next_packet(k % 4, Time::from_us(k as u64)).unwrap()).collect();
        for (k, (p, ev)) in sent.iter().enumerate() {
            if !bad.contains(ev) {
                s.on_sack(p.psn, *ev, false, 0, Time::from_us(k as u64 + 10), Time::ZERO);
            }
        }
        assert_eq!(s.retired_evs, 3);
        assert_eq!(s.active_evs_per_plane(), [4, 4, 4, 4]);
        for (k, plane) in s.planes.iter().enumerate() {
            let evs = plane.active.iter().map(|slot| slot.ev).chain(plane.backup.iter().copied());
            assert!(evs.into_iter().all(|ev| ev.plane() == k), "plane {k}");
        }
    }

    /// Under SRv6 the active set stripes over the uplinks, and a backup
    /// that replaces a retired EV goes where the set is thinnest, never on
    /// the retired EV's path.
    #[test]
    fn a_replacement_keeps_the_active_set_striped() {
        let space = PathSpace { uplinks: 8, paths: 8 };
        let cfg = MrcConfig { evs: 12, backup_evs: 12, ..Default::default() };
        let mut s = MrcSender::new(&cfg, 1, Some(space), 1000, 1_000_000, &mut Rng::stream(9, &[]));
        let per_uplink = |s: &MrcSender| {
            let mut c = [0; 8];
            s.planes[0].active.iter().filter(|a| a.ev != NO_EV).for_each(|a| c[uplink_of(a.ev, space)] += 1);
            c
        };
        let c = per_uplink(&s);
        assert!(c.iter().max().unwrap() - c.iter().min().unwrap() <= 1, "{c:?}");
        // Retire an EV on the uplink the next backup in sequence takes: the
        // replacement must go elsewhere (that path may be dead), to an
        // uplink with the fewest EVs.
        let next = uplink_of(*s.planes[0].backup.last().unwrap(), space);
        let slot = (0..12).find(|&k| uplink_of(s.planes[0].active[k].ev, space) == next).unwrap();
        s.retire(0, slot, Time::ZERO);
        let fresh = s.planes[0].active[slot].ev;
        assert_ne!(uplink_of(fresh, space), next, "not on the retired EV's path");
        assert_eq!(c[uplink_of(fresh, space)], *c.iter().min().unwrap());
    }

    /// With no EV left to send on, waiting data keeps the timer running,
    /// so that the QP can still fail at its error timeout.
    #[test]
    fn data_no_ev_can_carry_keeps_the_timer_running() {
        let cfg = MrcConfig { evs: 1, backup_evs: 0, ..Default::default() };
        let mut s = MrcSender::new(&cfg, 1, None, 1000, 1_000_000, &mut Rng::stream(1, &[]));
        s.post(2000, Verb::Write);
        s.next_packet(0, Time::ZERO).unwrap();
        s.on_timeout();
        assert!(!s.waiting(), "an EV is left: the NIC resends, no timer needed");
        s.retire(0, 0, Time::ZERO);
        assert!(s.next_packet(0, Time::ZERO).is_none());
        assert!(s.waiting(), "no EV left: only the error timeout can end this");
    }

    /// A zero-length write is a packet in flight with no payload: lost, it
    /// can only be found by the timer, so the timer must run for it.
    #[test]
    fn a_zero_length_write_in_flight_keeps_the_timer_running() {
        let mut s = sender(1);
        s.post(0, Verb::WriteImm);
        s.next_packet(0, Time::ZERO).unwrap();
        assert!(s.waiting(), "nothing but the timer can find this packet lost");
        s.on_timeout();
        assert!(s.next_packet(0, Time::ZERO).is_some(), "resent");
        assert!(s.waiting());
    }

    /// A plane that goes down takes back everything in flight on it, also
    /// what went on an EV its slot no longer holds (swapped for ECN).
    #[test]
    fn a_plane_down_resends_what_a_swapped_ev_still_carries() {
        let cfg = MrcConfig { evs: 4, backup_evs: 2, ..Default::default() };
        let mut s = MrcSender::new(&cfg, 2, None, 1000, 1_000_000, &mut Rng::stream(1, &[]));
        s.post(4000, Verb::Write);
        // Plane 0's two EVs take packets 0, 2 (EV a) and 1, 3 (EV b).
        let sent: Vec<(DataPacket, Ev)> = (0..4).map(|_| s.next_packet(0, Time::ZERO).unwrap()).collect();
        assert_eq!(sent[1].1, sent[3].1);
        // Packet 1's SACK comes back marked: EV b is swapped, packet 3 still on it.
        s.on_sack(sent[1].0.psn, sent[1].1, true, 0, Time::from_us(5), Time::from_us(5));
        assert_eq!(s.ecn_replacements, 1);
        s.set_plane_up(0, false);
        let again: Vec<u32> = std::iter::from_fn(|| s.next_packet(1, Time::from_us(6))).map(|(p, _)| p.psn).collect();
        assert_eq!(again, [0, 2, 3], "everything plane 0 had in flight, in order");
    }

    #[test]
    fn a_timeout_blames_and_the_resent_copy_convicts() {
        let mut s = sender(1);
        s.post(2000, Verb::Write);
        let (a, ev_a) = s.next_packet(0, Time::ZERO).unwrap();
        let (b, ev_b) = s.next_packet(0, Time::ZERO).unwrap();
        s.on_timeout();
        assert_eq!(s.retired_evs, 0, "a timeout alone retires nothing");
        let (a2, ev_a2) = s.next_packet(0, Time::from_us(100)).unwrap();
        let (b2, _) = s.next_packet(0, Time::from_us(100)).unwrap();
        assert_eq!((a2.psn, b2.psn), (a.psn, b.psn), "resent in order");
        assert_ne!(ev_a2, ev_a);
        // a's resent copy arrives and its first copy never does: convicted.
        s.on_sack(a.psn, ev_a2, false, 0, Time::from_us(110), Time::ZERO);
        assert_eq!(s.retired_evs, 1);
        assert!(s.planes[0].active.iter().all(|slot| slot.ev != ev_a));
        // b's first copy arrives late: it was not lost, nothing retired.
        s.on_sack(b.psn, ev_b, false, 0, Time::from_us(111), Time::ZERO);
        assert_eq!((s.retired_evs, s.spurious_losses), (1, 1));
        assert!(s.planes[0].active.iter().any(|slot| slot.ev == ev_b));
        assert!(!s.outstanding());
    }

    /// A packet declared lost across EVs retires its EV at once; if its
    /// resent copy is acknowledged first and the first copy comes later,
    /// the EV must still be put back.
    #[test]
    fn a_first_copy_arriving_after_its_resent_copy_acquits_an_ev_retired_when_the_loss_was_declared() {
        let mut s = sender(1);
        s.post(10 * 1000, Verb::Write);
        let (a, ev_a) = s.next_packet(0, Time::ZERO).unwrap();
        let (b, ev_b) = s.next_packet(0, Time::from_us(60)).unwrap();
        // b arrives; a, sent more than the reordering window before, is
        // declared lost and its EV retired.
        s.on_sack(b.psn, ev_b, false, 0, Time::from_us(70), Time::ZERO);
        assert_eq!(s.retired_evs, 1);
        let (a2, ev_a2) = s.next_packet(0, Time::from_us(70)).unwrap();
        assert_eq!((a2.psn, a2.retransmission), (a.psn, true));
        assert_ne!(ev_a2, ev_a);
        s.on_sack(a.psn, ev_a2, false, 0, Time::from_us(75), Time::ZERO);
        s.on_sack(a.psn, ev_a, false, 0, Time::from_us(76), Time::ZERO);
        assert_eq!((s.retired_evs, s.spurious_losses), (0, 1), "the late first copy acquits its EV");
        assert!(!s.has_retired());
    }

    /// The window's lost packets fill it and the sender stops: no later
    /// SACK will show them lost, but RACK's reordering timer does, an RTT
    /// and the reordering window after they were sent.
    #[test]
    fn the_reordering_timer_finds_losses_no_later_sack_reveals() {
        let mut s = sender(1);
        s.post(4 * 1000, Verb::Write);
        let sent: Vec<(DataPacket, Ev)> = (0..4).map(|k| s.next_packet(0, Time::from_us(k)).unwrap()).collect();
        // Only the last arrives; the first three were sent within the window of it.
        s.on_sack(sent[3].0.psn, sent[3].1, false, 0, Time::from_us(13), Time::ZERO);
        assert_eq!(s.retired_evs, 0);
        let due = s.reorder_deadline.expect("armed for the oldest packet sent before the delivered one");
        assert_eq!(due, Time::ZERO + Time::from_us(10) + MrcConfig::default().reorder_window);
        assert!(!s.on_reorder_timer(due - Time(1)), "not yet");
        assert!(s.on_reorder_timer(due + Time::from_us(2)));
        assert_eq!(s.retired_evs, 3, "all three lost, their EVs retired");
        assert_eq!(s.next_packet(0, Time::from_us(70)).unwrap().0.psn, 0, "resent, oldest first");
    }

    /// A packet whose SACK was lost is declared lost and its EV retired;
    /// the resent copy arrives as a duplicate, and its D-SACK puts the EV
    /// back (a dead reverse path loses SACKs, not data: without this every
    /// EV whose SACKs it swallowed was retired, Fig 19a).
    #[test]
    fn a_duplicate_sack_acquits_the_ev_a_lost_sack_convicted() {
        let mut s = sender(1);
        s.post(10 * 1000, Verb::Write);
        let (a, ev_a) = s.next_packet(0, Time::ZERO).unwrap();
        let (b, ev_b) = s.next_packet(0, Time::from_us(60)).unwrap();
        s.on_sack(b.psn, ev_b, false, 0, Time::from_us(70), Time::ZERO);
        assert_eq!(s.retired_evs, 1, "a's SACK never came: a declared lost");
        let (a2, ev_a2) = s.next_packet(0, Time::from_us(70)).unwrap();
        assert_eq!(a2.psn, a.psn);
        assert!(s.on_duplicate_sack(a.psn, ev_a2));
        assert_eq!((s.retired_evs, s.spurious_losses), (0, 1));
        assert!(s.planes[0].active.iter().any(|slot| slot.ev == ev_a) || s.planes[0].backup.contains(&ev_a));
    }

    /// SACKs overtaking each other: the SACK of a later packet on the same
    /// EV arrives first, but its cumulative ack covers the earlier packet.
    #[test]
    fn a_packet_the_cumulative_ack_covers_is_not_declared_lost() {
        let mut s = sender(1);
        s.post(40 * 1000, Verb::Write);
        let sent: Vec<(DataPacket, Ev)> = (0..40).map(|_| s.next_packet(0, Time::ZERO).unwrap()).collect();
        let (first, ev) = sent[0];
        let (later, _) = *sent.iter().find(|(p, e)| *e == ev && p.psn > first.psn).unwrap();
        s.on_sack(later.psn, ev, false, later.psn + 1, Time::ZERO, Time::ZERO);
        s.on_cumulative_ack(later.psn + 1);
        assert_eq!((s.retired_evs, s.spurious_losses), (0, 0));
        assert!(s.next_packet(0, Time::ZERO).is_none(), "nothing to resend");
    }

    /// A packet declared lost is acknowledged cumulatively before it is
    /// resent: its first copy arrived, and the EV blamed for it is put back.
    #[test]
    fn a_cumulative_ack_of_a_packet_declared_lost_and_not_yet_resent_restores_its_ev() {
        let mut s = sender(1);
        let ev = retire_one(&mut s);
        s.on_cumulative_ack(1);
        assert_eq!((s.retired_evs, s.spurious_losses), (0, 1));
        assert!(s.planes[0].backup.contains(&ev));
    }

    #[test]
    fn confirmed_losses_narrow_the_reordering_window_and_spurious_ones_widen_it() {
        let mut s = sender(1);
        s.post(40 * 1000, Verb::Write);
        let sent: Vec<(DataPacket, Ev)> = (0..4).map(|k| s.next_packet(0, Time::from_us(k)).unwrap()).collect();
        s.on_sack(sent[3].0.psn, sent[3].1, false, 0, Time::from_us(13), Time::ZERO);
        let wide = s.reorder_window();
        assert_eq!(wide, MrcConfig::default().reorder_window);
        // A timeout resends 0-2; 0's resent copy arrives, its first never did.
        s.on_timeout();
        let resent: Vec<(DataPacket, Ev)> = (0..3).map(|_| s.next_packet(0, Time::from_us(400)).unwrap()).collect();
        s.on_sack(resent[0].0.psn, resent[0].1, false, 0, Time::from_us(410), Time::ZERO);
        assert_eq!(s.reorder_window(), Time(wide.0 / 2));
        // 1's first copy turns up: that loss was not one.
        s.on_sack(sent[1].0.psn, sent[1].1, false, 0, Time::from_us(411), Time::ZERO);
        assert_eq!(s.reorder_window(), wide);
    }
}
