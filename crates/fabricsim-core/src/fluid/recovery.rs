//! Loss recovery in the flow model: when a sender goes back for what a
//! dead link lost, and how much it sends again.
//!
//! Under `partial_loss: deliver` a stream that loses part of what it sends
//! moves at the share that arrives, as if the lost packets were sent again
//! on the live paths at once. The transports of the packet model do not
//! find them that fast: a message's lost packets are sent again only when
//! its sender goes back for them, and the message ends no earlier
//! (`Stream::lost`, `Stream::held`, `FluidSimulation::set_route`).
//!
//! - Spectrum-X's NIC sprays a plane's share into a dead plane until a
//!   window of them is unacknowledged, and goes back when it drops the
//!   plane (`SpxQp::fail_plane`), or, where the link came back or the
//!   routes converged first, when the receiver's loss timer NAKs the gap
//!   (`loss_timeout` after the next packet shows it the gap, then every
//!   `loss_timeout`) and the NAK is back.
//! - RoCE with direct placement (adaptive routing's reordering kept from
//!   NAKing) has no NAK for a lost packet: its requester goes back at its
//!   retransmission timeout, counted from the first loss (its cumulative
//!   ACK stops there); with PRO's out-of-order window the responder NACKs
//!   holes while later packets arrive, so only a message whose tail was
//!   lost waits for the timeout. Where the routes still lose, the resend
//!   loses its share again and the requester finds the holes left at its
//!   next timeout, round after round (`FluidSimulation::go_back`), until
//!   its retries are expected to be spent (`retries_exhausted`). A
//!   standard responder NAKs the first gap at once, as does MP-RDMA's
//!   bitmap.
//! - MRC finds each lost packet from a SACK of one sent a reordering
//!   window after it, or by RACK's timer an RTT and the window after it
//!   was sent, and resends it alone: the share accounting stands for what
//!   it sends again, and its message ends no earlier than its last lost
//!   packet is found (its QPs' own losses: `learning.rs`).
//!
//! A link that fails loses what is on it at that instant, even where the
//! design stops using it at once (`lose_what_is_on`).
//!
//! Going back with cumulative ACKs, the sender sends again the stretch of
//! the message its losses were spread over (`lost / share lost`), and
//! Spectrum-X's NIC at least until the first hole's ACK is back; a
//! selective requester (PRO's NACKs) only what was lost.

use super::probes::Plane;
use super::{FluidSimulation, Owner, PartialLoss};
use crate::engine::Rng;
use crate::net::PortId;
use crate::transport::rocev2::TimeoutResend;
use crate::transport::spx::PlaneLb;
use crate::transport::TransportSpec;
use crate::units::Time;

/// Key of the draws of `lose_what_is_on`, apart from every other stream of
/// the scenario's seed.
const LOSS_DRAW: u64 = 0x6c6f_7374;

impl FluidSimulation {
    /// Whether the transport's lost packets hold its messages up (see the
    /// module): Spectrum-X's, MRC's, and RoCE's under direct placement.
    pub(super) fn counts_losses(&self) -> bool {
        match &self.scenario.transport {
            TransportSpec::Spx(_) | TransportSpec::Mrc(_) => true,
            TransportSpec::Rocev2(c) => c.direct_placement && c.mprdma_bitmap.is_none(),
        }
    }

    /// Stream `s`'s sender goes back for what it lost: the message has
    /// that much more to send (carried, not delivered twice). If its
    /// routes still lose a share (`losing`: a timer went off first), the
    /// resend loses again:
    /// a RoCE requester that learns of losses only from its timeout sees
    /// the holes its resend left (the lost share of those it filled, spread
    /// at random) at its next timeout, round after round until fewer than
    /// a packet's worth is expected to be left, as the packet model's
    /// responder, which keeps what it placed, has it (`holes_left`). Any
    /// other sender's resend is not counted again: one go-back round.
    pub(super) fn go_back(&mut self, s: u32, losing: f64) {
        let resend = self.resent_when_going_back(s);
        let holes = self.holes_left(s, losing);
        let timed_out = losing > 0.0 && self.times_out(s);
        let now = self.now();
        let stream = &mut self.streams[s as usize];
        stream.timeouts = if timed_out { stream.timeouts + 1 } else { 0 };
        // The holes left are spread over what it sent again.
        stream.lost_over = if holes > 0.0 { holes / losing } else { 0.0 };
        stream.after_loss = 0.0;
        stream.lost = holes;
        stream.lost_since = now;
        stream.held = false;
        stream.left += resend;
        stream.resent += resend;
    }

    /// The bytes stream `s`'s message is expected still to miss after its
    /// sender resends what it lost into routes that lose share `losing`:
    /// zero unless its requester learns of them only from its timeout, or
    /// when less than one packet is expected.
    fn holes_left(&self, s: u32, losing: f64) -> f64 {
        let stream = &self.streams[s as usize];
        if !self.times_out(s) {
            return 0.0;
        }
        let holes = stream.lost * losing;
        if holes < f64::from(stream.packet.payload) {
            return 0.0;
        }
        holes
    }

    /// What stream `s`'s sender sends again of its message when it goes
    /// back for what it lost, at most the message.
    fn resent_when_going_back(&self, s: u32) -> f64 {
        let stream = &self.streams[s as usize];
        // The share of what it sent while losing that it lost.
        let share =
            if stream.lost_over > 0.0 { (stream.lost / stream.lost_over).clamp(f64::MIN_POSITIVE, 1.0) } else { 1.0 };
        let lost = match &self.scenario.transport {
            TransportSpec::Spx(c) => {
                // A dead plane takes its share until a window of it is
                // unacknowledged, then no more.
                let src = match stream.owner {
                    // Every pair of a whole all-to-all alike: its first NIC's.
                    Owner::Exchange(x) => self.exchanges[x as usize].nics[0],
                    _ => self.qps[stream.qp as usize].src,
                };
                let ports = self.routing.node_ports(src);
                let line = crate::units::Rate(self.rate[ports[0].0 as usize]);
                let window = c.window.map_or(line.bytes_in(Time::from_us(20)), |w| w.0 as f64) * self.efficiency;
                let dead = (share * ports.len() as f64).round().max(1.0);
                // Going back, it sends from the oldest hole on at least
                // the stretch it lost in, and at least until that hole's
                // ACK comes back: a round trip at the NIC's rate, or
                // every plane's window (what it sent since, at most).
                let rtt = 2.0 * self.latency(&stream.route.path, stream.packet.wire).as_secs_f64();
                let nic = ports.iter().map(|p| self.rate[p.0 as usize] as f64 / 8.0).sum::<f64>() * self.efficiency;
                let overshoot = (rtt * nic).min(ports.len() as f64 * window);
                let stretch = stream.lost.min(dead * window) / share;
                let sent = stream.lost_over + stream.after_loss;
                return stretch.max(overshoot.min(sent)).min(stream.bytes);
            }
            // PRO's requester resends what its responder NACKs, and on its
            // timeout what `timeout_resend` says.
            TransportSpec::Rocev2(c)
                if c.ooo_window && (!self.times_out(s) || c.timeout_resend == TimeoutResend::Oldest) =>
            {
                return stream.lost.min(stream.bytes)
            }
            TransportSpec::Rocev2(_) => stream.lost,
            TransportSpec::Mrc(_) => return 0.0,
        };
        (lost / share).min(stream.bytes)
    }

    /// When stream `s`'s sender, whose routes lose nothing from now, goes
    /// back for what it lost (see the module). A whole all-to-all's pairs
    /// go back now.
    pub(super) fn goes_back_at(&self, s: u32) -> Time {
        let (now, stream) = (self.now(), &self.streams[s as usize]);
        let timer = match &self.scenario.transport {
            // Software load balancing has no NAK for a gap: its timer.
            TransportSpec::Spx(c) if c.plane_lb == PlaneLb::SwLb => {
                c.retransmit_timeout(!matches!(stream.owner, Owner::Flow(_)))
            }
            TransportSpec::Spx(c) => {
                let (Owner::Flow(_) | Owner::Transfer(_)) = stream.owner else { return now };
                let qp = &self.qps[stream.qp as usize];
                let ports = self.routing.node_ports(qp.src);
                let since = self.qp_probing_since(stream.qp);
                // Its NIC goes back as it drops a plane: one its probes
                // found dead, or its own port it sees down.
                if self.planes_toward(ports, qp.dst, since).contains(&Some(Plane::Found))
                    || ports.iter().any(|p| !self.nic_sees[p.0 as usize])
                {
                    return now;
                }
                // The receiver's timer starts when the next packet shows it
                // the gap, and its NAK takes as long back.
                let way = self.latency(&stream.route.path, stream.packet.wire);
                let opened = stream.lost_since + way;
                return next_round(opened, Time(now.0.saturating_sub(way.0)), c.loss_timeout) + way;
            }
            // Every QP of a job, whole collectives' too, has NCCL's timeout.
            TransportSpec::Rocev2(c) if self.times_out(s) => {
                c.retransmit_timeout(!matches!(stream.owner, Owner::Flow(_)))
            }
            // Its last lost packet is found a round trip and the reordering
            // window after it was sent.
            TransportSpec::Mrc(c) => {
                let rtt = self.latency(&stream.route.path, stream.packet.wire).0.saturating_mul(2);
                return (stream.lost_until + c.reorder_window + Time(rtt)).max(now);
            }
            TransportSpec::Rocev2(_) => return now,
        };
        next_round(stream.lost_since, now, timer)
    }

    /// Port `port`'s link fails: what is on it is lost. A stream sending
    /// over it has there, on average, its rate's share through the port for
    /// as long as a packet takes on the link (propagation, the next node's
    /// latency, serialization), and loses a packet with that many packets'
    /// chance, drawn from the scenario's seed, the stream and the port: the
    /// packet model drops what the link held, and a sender whose resends
    /// wait for a timer (Spectrum-X's receiver NAKs a gap `loss_timeout`
    /// after it opened) finishes that much later. A link's share of a
    /// bundle is its share of the bundle's live capacity. Queues, which
    /// the flow model has none of, would hold more.
    pub(super) fn lose_what_is_on(&mut self, port: PortId) {
        // Under `partial_loss: stall` nothing a stream loses is counted: it
        // is held while it would lose.
        if !self.counts_losses() || self.scenario.flow_mode.partial_loss == PartialLoss::Stall {
            return;
        }
        let p = port.0 as usize;
        let b = self.bundles.of_port[p];
        // Still alive: the bundle's capacity counts it.
        let of_bundle = self.rate[p] as f64 / 8.0 * self.efficiency / self.bundle_capacity(b);
        let b = b as usize;
        let now = self.now();
        for k in 0..self.users[b].len() {
            let (s, i) = self.users[b][k];
            let stream = &self.streams[s as usize];
            // Whole collectives' streams are not messages (as `advance`);
            // a whole all-to-all's pairs go back at once.
            if !matches!(stream.owner, Owner::Flow(_) | Owner::Transfer(_)) || stream.resent > 0.0 {
                continue;
            }
            let dwell = self.delay[p] + self.serialization(port, stream.packet.wire);
            let on_link = stream.rate * stream.route.uses[i as usize].1 * of_bundle * dwell.as_secs_f64();
            let packet = f64::from(stream.packet.payload);
            let key = [LOSS_DRAW, u64::from(s), u64::from(port.0), now.0];
            if on_link <= 0.0 || !Rng::stream(self.scenario.seed, &key).chance(on_link / packet) {
                continue;
            }
            self.advance(s, now);
            let stream = &mut self.streams[s as usize];
            if stream.lost == 0.0 {
                stream.lost_since = now;
            }
            let lost = on_link.max(packet);
            stream.lost += lost;
            stream.lost_over += lost;
            stream.lost_until = now;
            // Counted as arrived when sent: it is to be sent again.
            stream.left += lost;
            stream.rx_counted += lost;
            self.delivered -= lost;
        }
    }

    /// Whether stream `s`'s RoCE requester, which just went back at a
    /// timeout into routes losing share `losing`, fails its QP instead.
    /// The packet model's fails at a timeout with `retry_count` timeouts
    /// before it in a row without progress: once the oldest hole's resend
    /// is lost `retry_count` times running. The flow model fails it at the
    /// timeout where that is expected: after the first, the expected
    /// number of resends until `retry_count` losses in a row, (1 - p^r) /
    /// ((1 - p) p^r) for a share lost p, unless its holes ran out first.
    pub(super) fn retries_exhausted(&self, s: u32, losing: f64) -> bool {
        let TransportSpec::Rocev2(c) = &self.scenario.transport else { return false };
        let r = f64::from(c.retry_count);
        let in_a_row = losing.powf(r);
        if in_a_row <= 0.0 {
            return false;
        }
        let resends = if losing >= 1.0 { r } else { (1.0 - in_a_row) / ((1.0 - losing) * in_a_row) };
        f64::from(self.streams[s as usize].timeouts) >= 1.0 + resends.round()
    }

    /// Whether stream `s`'s RoCE requester learns of its losses only from
    /// its retransmission timeout: under direct placement with no NAK for
    /// a gap, or with PRO's window once its message's tail is lost.
    fn times_out(&self, s: u32) -> bool {
        let TransportSpec::Rocev2(c) = &self.scenario.transport else { return false };
        c.direct_placement && c.mprdma_bitmap.is_none() && (!c.ooo_window || self.streams[s as usize].held)
    }
}

/// The first round of a timer that goes off every `timer` from `since`
/// that is at or after `now`, and at least the first: a loss this instant
/// waits a whole round.
fn next_round(since: Time, now: Time, timer: Time) -> Time {
    let timer = timer.0.max(1);
    since + Time(now.0.saturating_sub(since.0).div_ceil(timer).max(1) * timer)
}
