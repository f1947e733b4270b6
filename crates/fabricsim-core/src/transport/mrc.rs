//! MRC: multipath reliable connection (mrc-srv6-multiplane.txt s2.1, s2.4,
//! s4). A QP sprays its packets over a set of entropy values (EVs), equal
//! numbers per plane, rotating through them; every data packet carries its
//! RDMA address, so the receiver places packets in any order and
//! acknowledges each one selectively (SACK), echoing its EV and ECN mark. A
//! trimmed packet is NACKed and retransmitted at once. Packets on one EV
//! follow one path and arrive in order, so a packet still unacknowledged
//! when a later packet on the same EV is acknowledged is lost, not late:
//! its EV is retired and replaced by a backup EV of the same plane, and
//! the packet is resent on another EV. Reordering across EVs is expected
//! and never taken for loss. An ECN-marked EV is avoided for a while (ECN as a
//! load-balancing signal, since the last hop does not mark). A timer
//! resends what is still outstanding after a tail loss.
//!
//! The paper does not publish MRC's congestion control; this sender keeps
//! a window shaped like UET's NSCC (protocols.md s5.5): it starts at the
//! maximum (1.5 BDP), shrinks by the trimmed bytes on every NACK and grows
//! by about one MTU per window of acknowledged data.

use std::collections::VecDeque;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::DataPacket;
use crate::engine::Rng;
use crate::units::{Bytes, Time};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MrcConfig {
    /// QPs per connection.
    pub qps: u32,
    /// Active EVs per QP, split equally over the planes. Default 128, the
    /// low end of the paper's 128 to 256 (s2.1).
    pub evs: u32,
    /// Backup EVs per QP that replace retired ones (s2.4, s4).
    pub backup_evs: u32,
    /// How long an EV whose packet came back ECN-marked is skipped. The
    /// paper does not give MRC's value; 5us, about half the base RTT of the
    /// fabrics modelled here, kept every racks-to-racks flow (Fig 20) within
    /// 5% of line rate over three seeds, where 20us and 50us let avoided EVs
    /// pile load onto the others (docs/EXPERIMENTS.md).
    pub ecn_avoid: Time,
    /// Retransmission timer for tail losses. Default 320us, the IRN
    /// RTO_high ConWeave uses (protocols.md s2.6).
    pub rto: Time,
    /// Maximum (and initial) window: unset means 1.5 x the NIC's rate x
    /// 12us, NSCC's 1.5 BDP at its reference RTT (protocols.md s5.5).
    pub window: Option<Bytes>,
}

impl Default for MrcConfig {
    fn default() -> Self {
        MrcConfig {
            qps: 1,
            evs: 128,
            backup_evs: 32,
            ecn_avoid: Time::from_us(5),
            rto: Time::from_us(320),
            window: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Waiting to be sent; `again` if it was sent before.
    Pending {
        again: bool,
    },
    /// Sent on EV slot `slot` of `plane` as transmission `seq`.
    InFlight {
        plane: u8,
        slot: u16,
        seq: u64,
    },
    Acked,
}

/// The EVs of one plane.
#[derive(Clone, Debug, Default)]
struct PlaneEvs {
    active: Vec<u16>,
    backup: Vec<u16>,
    avoid_until: Vec<Time>,
    /// Transmissions outstanding on each active EV, oldest first: (seq, PSN).
    outstanding: Vec<VecDeque<(u64, u32)>>,
    cursor: usize,
}

#[derive(Clone, Copy, Debug)]
struct Message {
    first: u32,
    end: u32,
    last_payload: u32,
}

/// Sender side of an MRC QP.
#[derive(Clone, Debug)]
pub struct MrcSender {
    planes: Vec<PlaneEvs>,
    messages: VecDeque<Message>,
    posted_end: u32,
    /// PSN of `slots[0]`.
    base: u32,
    slots: VecDeque<Slot>,
    /// PSNs to resend, oldest first.
    resend: VecDeque<u32>,
    next_seq: u64,
    in_flight_bytes: u64,
    window: f64,
    max_window: f64,
    mtu: u32,
    /// Deadline of the retransmission timer.
    pub rto_deadline: Option<Time>,
    pub retransmitted_packets: u64,
    pub timeouts: u64,
    pub retired_evs: u64,
    /// Planes usable at this end and, from SACKs, at the other end.
    local_up: u8,
    remote_up: u8,
}

impl MrcSender {
    /// A sender whose EVs are drawn from `rng`, `evs / planes` per plane.
    /// An EV keeps its plane in its low 3 bits (the plane number SRv6
    /// copies into the uSIDs, s2.3) and the path choice above them.
    pub fn new(cfg: &MrcConfig, planes: usize, mtu: u32, max_window: u64, rng: &mut Rng) -> MrcSender {
        let per_plane = (cfg.evs as usize / planes).max(1);
        let backup = cfg.backup_evs as usize / planes;
        let planes = (0..planes)
            .map(|plane| {
                let mut draw =
                    |n: usize| (0..n).map(|_| (rng.next_u64() as u16 & !7) | plane as u16).collect::<Vec<u16>>();
                PlaneEvs {
                    active: draw(per_plane),
                    backup: draw(backup),
                    avoid_until: vec![Time::ZERO; per_plane],
                    outstanding: vec![VecDeque::new(); per_plane],
                    cursor: 0,
                }
            })
            .collect();
        MrcSender {
            planes,
            messages: VecDeque::new(),
            posted_end: 0,
            base: 0,
            slots: VecDeque::new(),
            resend: VecDeque::new(),
            next_seq: 0,
            in_flight_bytes: 0,
            window: max_window as f64,
            max_window: max_window as f64,
            mtu,
            rto_deadline: None,
            retransmitted_packets: 0,
            timeouts: 0,
            retired_evs: 0,
            local_up: 0xFF,
            remote_up: 0xFF,
        }
    }

    /// Posts a message; returns its first PSN and packet count.
    pub fn post(&mut self, bytes: u64) -> (u32, u32) {
        let packets = bytes.div_ceil(self.mtu as u64).max(1) as u32;
        let last_payload = (bytes - (packets as u64 - 1) * self.mtu as u64) as u32;
        let first = self.posted_end;
        self.posted_end += packets;
        self.messages.push_back(Message { first, end: self.posted_end, last_payload });
        self.slots.extend(std::iter::repeat_n(Slot::Pending { again: false }, packets as usize));
        self.resend.extend(first..self.posted_end);
        (first, packets)
    }

    /// Length of the message `psn` belongs to.
    pub fn message_bytes(&self, psn: u32) -> u64 {
        self.messages
            .iter()
            .find(|m| psn >= m.first && psn < m.end)
            .map_or(0, |m| (m.end - m.first - 1) as u64 * self.mtu as u64 + m.last_payload as u64)
    }

    /// Whether a packet could go now (data waiting and room in the window).
    pub fn has_data(&self) -> bool {
        !self.resend.is_empty() && (self.in_flight_bytes as f64) < self.window
    }

    pub fn outstanding(&self) -> bool {
        self.slots.iter().any(|s| *s != Slot::Acked)
    }

    fn slot(&mut self, psn: u32) -> Option<&mut Slot> {
        psn.checked_sub(self.base).and_then(|i| self.slots.get_mut(i as usize))
    }

    fn payload_of(&self, psn: u32) -> (u32, bool, bool) {
        let m = self.messages.iter().find(|m| psn >= m.first && psn < m.end).expect("a posted PSN");
        let last = psn + 1 == m.end;
        (if last { m.last_payload } else { self.mtu }, psn == m.first, last)
    }

    /// The next packet for `plane` and the EV it goes on: the next EV of
    /// that plane that is not being avoided.
    pub fn next_packet(&mut self, plane: usize, now: Time) -> Option<(DataPacket, u16)> {
        if !self.has_data() || (self.local_up & self.remote_up) & (1 << plane.min(7)) == 0 {
            return None;
        }
        let (psn, retransmission) = loop {
            let psn = self.resend.pop_front()?;
            if let Some(&mut Slot::Pending { again }) = self.slot(psn) {
                break (psn, again);
            }
        };
        let evs = &mut self.planes[plane];
        let n = evs.active.len();
        let mut pick = evs.cursor % n;
        for k in 0..n {
            let i = (evs.cursor + k) % n;
            if evs.avoid_until[i] <= now {
                pick = i;
                break;
            }
        }
        evs.cursor = pick + 1;
        let ev = evs.active[pick];
        let (payload, first, last) = self.payload_of(psn);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.planes[plane].outstanding[pick].push_back((seq, psn));
        *self.slot(psn).expect("slot") = Slot::InFlight { plane: plane as u8, slot: pick as u16, seq };
        self.in_flight_bytes += payload as u64;
        if retransmission {
            self.retransmitted_packets += 1;
        }
        Some((DataPacket { psn, payload, first, last, retransmission }, ev))
    }

    /// A SACK for `psn`, ECN-marked or not (it echoes the packet's EV, which
    /// the sender also recorded). Returns whether it acknowledged
    /// something new.
    pub fn on_sack(&mut self, psn: u32, ecn: bool, now: Time, ecn_avoid: Time) -> bool {
        let Some(&mut Slot::InFlight { plane, slot, seq }) = self.slot(psn) else { return false };
        let (plane, slot) = (plane as usize, slot as usize);
        *self.slot(psn).expect("slot") = Slot::Acked;
        let (payload, _, _) = self.payload_of(psn);
        self.in_flight_bytes -= payload as u64;
        self.window = (self.window + self.mtu as f64 * payload as f64 / self.window).min(self.max_window);
        if ecn {
            self.planes[plane].avoid_until[slot] = now + ecn_avoid;
        }
        // Earlier packets on the same EV took the same path: still missing
        // means lost.
        let mut lost = Vec::new();
        while let Some(&(s, p)) = self.planes[plane].outstanding[slot].front() {
            if s > seq {
                break;
            }
            self.planes[plane].outstanding[slot].pop_front();
            if s < seq && matches!(self.slot(p), Some(&mut Slot::InFlight { seq: sent, .. }) if sent == s) {
                lost.push(p);
            }
        }
        for p in lost {
            self.lose(p);
        }
        self.advance();
        true
    }

    /// This NIC's port for `plane` went down or came back: remap at once,
    /// resending what was in flight on it over the other planes.
    pub fn set_plane_up(&mut self, plane: usize, up: bool) {
        let bit = 1u8 << plane.min(7);
        self.local_up = if up { self.local_up | bit } else { self.local_up & !bit };
        if !up {
            self.abandon_plane(plane);
        }
    }

    /// The other end's port state bitmap, from a SACK.
    pub fn set_remote_planes(&mut self, bits: u8) {
        let newly_down = self.remote_up & !bits;
        self.remote_up = bits;
        for plane in (0..self.planes.len()).filter(|&p| newly_down & (1 << p.min(7)) != 0) {
            self.abandon_plane(plane);
        }
    }

    /// Resends everything in flight on `plane`; its EVs are not at fault.
    fn abandon_plane(&mut self, plane: usize) {
        let Some(evs) = self.planes.get_mut(plane) else { return };
        let stranded: Vec<u32> = evs.outstanding.iter_mut().flat_map(|q| q.drain(..)).map(|(_, psn)| psn).collect();
        for psn in stranded {
            if matches!(self.slot(psn), Some(&mut Slot::InFlight { .. })) {
                let (payload, _, _) = self.payload_of(psn);
                self.in_flight_bytes -= payload as u64;
                *self.slot(psn).expect("slot") = Slot::Pending { again: true };
                self.resend.push_front(psn);
            }
        }
    }

    /// A NACK: `psn` was trimmed on `ev`. Resend it; shrink the window.
    pub fn on_nack(&mut self, psn: u32) {
        if let Some(Slot::InFlight { .. }) = self.slot(psn).copied() {
            let (payload, _, _) = self.payload_of(psn);
            self.in_flight_bytes -= payload as u64;
            *self.slot(psn).expect("slot") = Slot::Pending { again: true };
            self.resend.push_front(psn);
            self.window = (self.window - payload as f64).max(self.mtu as f64);
        }
    }

    /// A lost packet: retire its EV for a backup of the same plane (when
    /// one is left), resend the packet.
    fn lose(&mut self, psn: u32) {
        let Some(&mut Slot::InFlight { plane, slot, .. }) = self.slot(psn) else { return };
        let (plane, slot) = (plane as usize, slot as usize);
        let (payload, _, _) = self.payload_of(psn);
        self.in_flight_bytes -= payload as u64;
        *self.slot(psn).expect("slot") = Slot::Pending { again: true };
        self.resend.push_front(psn);
        let evs = &mut self.planes[plane];
        if let Some(fresh) = evs.backup.pop() {
            evs.active[slot] = fresh;
            evs.avoid_until[slot] = Time::ZERO;
            // What is still outstanding on the old EV is on another path:
            // it cannot be ordered against the new EV's packets.
            evs.outstanding[slot].clear();
            self.retired_evs += 1;
        }
    }

    /// The timer expired: resend everything still in flight.
    pub fn on_timeout(&mut self) {
        self.timeouts += 1;
        let lost: Vec<u32> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| matches!(s, Slot::InFlight { .. }).then_some(self.base + i as u32))
            .collect();
        for psn in lost.into_iter().rev() {
            self.lose(psn);
        }
    }

    /// Drops acknowledged PSNs from the front and finished messages.
    fn advance(&mut self) {
        while self.slots.front() == Some(&Slot::Acked) {
            self.slots.pop_front();
            self.base += 1;
        }
        while self.messages.front().is_some_and(|m| m.end <= self.base) {
            self.messages.pop_front();
        }
    }

    pub fn active_evs_per_plane(&self) -> Vec<usize> {
        self.planes.iter().map(|p| p.active.len()).collect()
    }
}

/// Receiver side: places packets in any order, completes messages when all
/// their packets have arrived.
#[derive(Clone, Debug, Default)]
pub struct MrcReceiver {
    base: u32,
    received: VecDeque<bool>,
    /// Messages by PSN range, with packets still missing.
    messages: VecDeque<(u32, u32, u32)>,
}

/// What a data packet's arrival means at the receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrcArrival {
    /// New payload placed (zero for a duplicate or a trimmed header).
    pub delivered: u32,
    /// Messages this packet completed (by posting order).
    pub completed: u32,
    pub duplicate: bool,
}

impl MrcReceiver {
    /// The sender posted a message of `packets` packets from `first`.
    pub fn expect(&mut self, first: u32, packets: u32) {
        self.messages.push_back((first, first + packets, packets));
    }

    pub fn on_data(&mut self, psn: u32, payload: u32) -> MrcArrival {
        let Some(i) = psn.checked_sub(self.base) else { return MrcArrival { duplicate: true, ..Default::default() } };
        let i = i as usize;
        if self.received.len() <= i {
            self.received.resize(i + 1, false);
        }
        if self.received[i] {
            return MrcArrival { duplicate: true, ..Default::default() };
        }
        self.received[i] = true;
        let mut out = MrcArrival { delivered: payload, ..Default::default() };
        if let Some(m) = self.messages.iter_mut().find(|m| psn >= m.0 && psn < m.1) {
            m.2 -= 1;
        }
        // Messages complete in posting order once all their packets are in.
        while self.messages.front().is_some_and(|m| m.2 == 0) {
            self.messages.pop_front();
            out.completed += 1;
        }
        while self.received.front() == Some(&true) {
            self.received.pop_front();
            self.base += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender(planes: usize) -> MrcSender {
        let cfg = MrcConfig { evs: 8, backup_evs: 4, ..Default::default() };
        MrcSender::new(&cfg, planes, 1000, 1_000_000, &mut Rng::stream(1, &[]))
    }

    #[test]
    fn sprays_over_the_evs_of_each_plane_in_turn() {
        let mut s = sender(2);
        s.post(8000);
        let evs: Vec<u16> = (0..8).map(|k| s.next_packet(k % 2, Time::ZERO).unwrap().1).collect();
        let distinct: std::collections::BTreeSet<u16> = evs.iter().copied().collect();
        assert_eq!(distinct.len(), 8);
        assert_eq!(s.active_evs_per_plane(), [4, 4]);
    }

    #[test]
    fn a_lost_packet_retires_its_ev_for_a_backup_of_the_same_plane() {
        let mut s = sender(1);
        s.post(40 * 1000);
        let sent: Vec<(DataPacket, u16)> = (0..40).map(|_| s.next_packet(0, Time::ZERO).unwrap()).collect();
        // Everything but PSN 0 arrives, including later packets on its EV.
        for (p, _) in &sent[1..] {
            s.on_sack(p.psn, false, Time::ZERO, Time::ZERO);
        }
        assert_eq!(s.retired_evs, 1);
        let (again, ev) = s.next_packet(0, Time::ZERO).unwrap();
        assert_eq!((again.psn, again.retransmission), (0, true));
        assert_ne!(ev, sent[0].1);
    }

    #[test]
    fn trimmed_packets_are_resent_first_and_shrink_the_window() {
        let mut s = sender(1);
        s.post(5000);
        let p: Vec<(DataPacket, u16)> = (0..5).map(|_| s.next_packet(0, Time::ZERO).unwrap()).collect();
        let before = s.window;
        s.on_nack(p[2].0.psn);
        assert!(s.window < before);
        assert_eq!(s.next_packet(0, Time::ZERO).unwrap().0.psn, 2);
    }

    #[test]
    fn receiver_places_out_of_order_and_completes_whole_messages() {
        let mut r = MrcReceiver::default();
        r.expect(0, 3);
        r.expect(3, 2);
        assert_eq!(r.on_data(4, 10).completed, 0);
        assert_eq!(r.on_data(0, 10).completed, 0);
        assert_eq!(r.on_data(2, 10).completed, 0);
        assert!(r.on_data(2, 10).duplicate);
        assert_eq!(r.on_data(1, 10).completed, 1);
        assert_eq!(r.on_data(3, 10).completed, 1);
    }
}
