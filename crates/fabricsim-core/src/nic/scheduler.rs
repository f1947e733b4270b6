//! Which QP sends next on a NIC port. Each port has a round-robin list of
//! the QPs with data for it; a QP sends `batch` packets per turn (per-packet
//! round robin by default), and one whose pacer has not yet allowed its
//! next packet is skipped. The port's control packets go ahead of all of
//! this, in the port's high class.

use std::collections::VecDeque;

use super::Qp;
use crate::ids::{Arena, QpId};
use crate::transport::Transport;
use crate::units::Time;

/// Scheduling state of one NIC port.
#[derive(Clone, Debug, Default)]
pub(crate) struct PortScheduler {
    /// QPs with data for this port, in round-robin order.
    pub ready: VecDeque<QpId>,
    /// Packets the QP at the front has sent in its current turn.
    pub batch_used: u32,
    /// A wake-up is scheduled for a paced QP at this time.
    pub wake_at: Option<Time>,
    /// The NIC knows this port is down and sends nothing on it.
    pub known_down: bool,
}

/// What the port sends next.
pub(crate) enum Pick<T> {
    /// QP `qp` gave this packet, the `k`-th of its turn (from 0).
    Packet(QpId, T, u32),
    /// Nothing now; the earliest time a paced QP may send, if any.
    Wait(Option<Time>),
}

impl PortScheduler {
    /// Walks the ready list once from its front: QPs with nothing to send
    /// leave it, paced ones (for the QP, or for this port, `index`) are
    /// skipped, and the first that `pull` gets a packet from has sent it.
    pub fn pick<T>(
        &mut self,
        qps: &mut Arena<QpId, Qp>,
        index: usize,
        now: Time,
        batch: u32,
        mut pull: impl FnMut(QpId, &mut Qp) -> Option<T>,
    ) -> Pick<T> {
        let bit = 1 << index.min(31);
        let mut earliest: Option<Time> = None;
        for _ in 0..self.ready.len() {
            let Some(&q) = self.ready.front() else { break };
            let qp = &mut qps[q];
            if !qp.transport.has_data() {
                self.leave(qp, bit);
                continue;
            }
            let ready_at = qp.next_send.max(qp.transport.paced_until(index));
            if ready_at > now {
                earliest = Some(earliest.map_or(ready_at, |e: Time| e.min(ready_at)));
                self.next_turn();
                continue;
            }
            let Some(packet) = pull(q, qp) else {
                // Nothing for this port now (a sprayed QP's window is full,
                // or the remote port of this plane is down).
                self.leave(qp, bit);
                continue;
            };
            let k = self.batch_used;
            self.batch_used += 1;
            if !qp.transport.has_data() {
                // Nothing more for now (all sent, or the window closed):
                // off the list until a SACK, NAK or new message puts it
                // back, so that a free link does not wake up for it.
                self.leave(qp, bit);
            } else if self.batch_used >= batch {
                self.next_turn();
            }
            return Pick::Packet(q, packet, k);
        }
        Pick::Wait(earliest)
    }

    /// The QP at the front leaves the list.
    fn leave(&mut self, qp: &mut Qp, bit: u32) {
        self.ready.pop_front();
        self.batch_used = 0;
        qp.in_ready_lists &= !bit;
    }

    /// The QP at the front goes to the back.
    fn next_turn(&mut self) {
        self.ready.rotate_left(1);
        self.batch_used = 0;
    }

    /// Puts `q` on the list unless it is there already.
    pub fn join(&mut self, q: QpId, qp: &mut Qp, bit: u32) {
        if qp.in_ready_lists & bit == 0 {
            qp.in_ready_lists |= bit;
            self.ready.push_back(q);
        }
    }
}
