//! Direct data placement at a responder: every packet lands in memory as
//! it arrives, in any order (it carries, or its PSN implies, its place),
//! and messages complete in posting order once all their packets are in,
//! so the application sees completions in order (spectrum-x.txt s3: "direct
//! data placement ... reordering completions transparently";
//! mrc-srv6-multiplane.txt s2.3). It also measures the reordering: how many
//! packets arrived ahead of an earlier one, by how many PSNs at most, and
//! each packet's out-of-order degree, its PSN minus the first missing one
//! (PRO's measure, pro-deterministic-lb.txt s6, less one: 0 in order).

use std::collections::VecDeque;

use super::Warm;
use crate::engine::prefetch;

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
    degrees: DegreeHistogram,
}

/// Counts of out-of-order degrees: exact below `EXACT`, then one bucket per
/// power of two. The buckets are allocated at the first packet out of
/// order, so a QP that never reorders costs one counter.
#[derive(Clone, Debug, Default)]
pub struct DegreeHistogram {
    in_order: u64,
    counts: Vec<u64>,
}

/// Degrees counted exactly.
const EXACT: u64 = 64;
/// Buckets: the exact degrees, then [2^k, 2^(k+1)) for k from 6 to 31.
const BUCKETS: usize = EXACT as usize + 26;

impl DegreeHistogram {
    fn bucket(degree: u64) -> usize {
        if degree < EXACT {
            degree as usize
        } else {
            (EXACT as usize + (63 - degree.leading_zeros() as usize) - 6).min(BUCKETS - 1)
        }
    }

    /// The smallest degree of bucket `b`.
    fn floor(b: usize) -> u64 {
        if b < EXACT as usize {
            b as u64
        } else {
            1 << (b - EXACT as usize + 6)
        }
    }

    pub fn record(&mut self, degree: u64) {
        if degree == 0 {
            self.in_order += 1;
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        self.counts[Self::bucket(degree)] += 1;
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &DegreeHistogram) {
        self.in_order += other.in_order;
        if !other.counts.is_empty() {
            if self.counts.is_empty() {
                self.counts = vec![0; BUCKETS];
            }
            for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
                *mine += theirs;
            }
        }
    }

    pub fn packets(&self) -> u64 {
        self.in_order + self.counts.iter().sum::<u64>()
    }

    /// The `q`-quantile of the degrees (nearest rank; exact below 64, else
    /// the power of two it reached).
    pub fn quantile(&self, q: f64) -> u64 {
        let total = self.packets();
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total.max(1));
        if rank <= self.in_order {
            return 0;
        }
        let mut seen = self.in_order;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::floor(b);
            }
        }
        0
    }
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

    /// `Transport::warm`'s stages for the arrival of `psn` (`on_data`'s
    /// reads).
    pub fn warm(&self, stage: Warm, psn: u32) {
        match stage {
            Warm::Own => {
                prefetch(&self.base);
                prefetch(&self.received);
                prefetch(&self.messages);
            }
            Warm::Reached => {
                if let Some(arrived) = psn.checked_sub(self.base).and_then(|i| self.received.get(i as usize)) {
                    prefetch(arrived);
                }
                if let Some(oldest) = self.messages.front() {
                    prefetch(oldest);
                }
            }
        }
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
        self.degrees.record(i as u64);
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

    /// Every placed packet's out-of-order degree.
    pub fn degrees(&self) -> &DegreeHistogram {
        &self.degrees
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
        // Degrees 4, 0, 1, 0, 0 (the duplicate not counted).
        let d = r.degrees();
        assert_eq!((d.packets(), d.quantile(0.5), d.quantile(0.7), d.quantile(1.0)), (5, 0, 1, 4));
    }

    #[test]
    fn degrees_are_exact_below_64_and_by_power_of_two_above() {
        let mut h = DegreeHistogram::default();
        for d in [0, 3, 63, 64, 100, 5000] {
            h.record(d);
        }
        let q: Vec<u64> = [0.1, 0.3, 0.5, 0.7, 0.8, 1.0].iter().map(|&q| h.quantile(q)).collect();
        assert_eq!(q, [0, 3, 63, 64, 64, 4096]);
        let mut total = DegreeHistogram::default();
        total.merge(&h);
        total.merge(&h);
        assert_eq!(total.packets(), 12);
    }
}
