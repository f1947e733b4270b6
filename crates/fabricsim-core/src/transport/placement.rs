//! Direct data placement at a responder: every packet lands in memory as
//! it arrives, in any order (it carries, or its PSN implies, its place),
//! and messages complete in posting order once all their packets are in,
//! so the application sees completions in order (spectrum-x.txt s3: "direct
//! data placement ... reordering completions transparently";
//! mrc-srv6-multiplane.txt s2.3). It also measures the reordering: how many
//! packets arrived ahead of an earlier one, and by how many PSNs at most.

use std::collections::VecDeque;

#[derive(Clone, Debug, Default)]
pub struct Placement {
    /// Every PSN below it has arrived.
    base: u32,
    /// From `base` on, whether each PSN has arrived.
    received: VecDeque<bool>,
    /// Messages by PSN range, with packets still missing.
    messages: VecDeque<(u32, u32, u32)>,
    out_of_order: u64,
    max_distance: u32,
}

/// What a data packet's arrival placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placed {
    /// New payload placed (zero for a duplicate).
    pub delivered: u32,
    /// Messages this packet completed (by posting order).
    pub completed: u32,
    pub duplicate: bool,
}

impl Placement {
    /// The next PSN expected in order: every one below it has arrived.
    pub fn cumulative(&self) -> u32 {
        self.base
    }

    /// The requester posted a message of `packets` packets from `first`.
    pub fn expect(&mut self, first: u32, packets: u32) {
        self.messages.push_back((first, first + packets, packets));
    }

    /// Packet `psn` with `payload` bytes arrived.
    pub fn on_data(&mut self, psn: u32, payload: u32) -> Placed {
        let Some(i) = psn.checked_sub(self.base) else { return Placed { duplicate: true, ..Default::default() } };
        let i = i as usize;
        if self.received.len() <= i {
            self.received.resize(i + 1, false);
        }
        if self.received[i] {
            return Placed { duplicate: true, ..Default::default() };
        }
        if i > 0 {
            self.out_of_order += 1;
            self.max_distance = self.max_distance.max(i as u32);
        }
        self.received[i] = true;
        let mut out = Placed { delivered: payload, ..Default::default() };
        if let Some(m) = self.messages.iter_mut().find(|m| psn >= m.0 && psn < m.1) {
            m.2 -= 1;
        }
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

    /// Whether `psn` has arrived.
    pub fn arrived(&self, psn: u32) -> bool {
        match psn.checked_sub(self.base) {
            None => true,
            Some(i) => self.received.get(i as usize) == Some(&true),
        }
    }

    /// One past the highest PSN that has arrived (the cumulative PSN when
    /// nothing arrived past it).
    pub fn tail(&self) -> u32 {
        self.base + self.received.len() as u32
    }

    /// A later PSN has arrived while the next expected one has not.
    pub fn has_gap(&self) -> bool {
        !self.received.is_empty()
    }

    /// Packets that arrived while an earlier PSN was still missing.
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }

    /// The furthest ahead of the first missing PSN a packet arrived.
    pub fn max_distance(&self) -> u32 {
        self.max_distance
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_out_of_order_and_completes_whole_messages_in_posting_order() {
        let mut r = Placement::default();
        r.expect(0, 3);
        r.expect(3, 2);
        assert_eq!(r.on_data(4, 10).completed, 0);
        assert_eq!(r.on_data(0, 10).completed, 0);
        assert_eq!(r.on_data(2, 10).completed, 0);
        assert!(r.on_data(2, 10).duplicate);
        assert_eq!(r.on_data(1, 10).completed, 1);
        assert_eq!(r.on_data(3, 10), Placed { delivered: 10, completed: 1, duplicate: false });
        assert_eq!(r.cumulative(), 5);
        // PSN 4 came 4 ahead of PSN 0, PSN 2 one ahead of PSN 1.
        assert_eq!((r.out_of_order(), r.max_distance()), (2, 4));
    }
}
