//! The reader's initiator depth in the flow model (IBTA Vol.1 9.4.3; the
//! packet model's `transport::reads`): a QP asks for at most `depth` READs
//! at a time, and asks for the next when one has wholly arrived. A READ
//! posted past the depth waits its turn; its data leaves the other end one
//! request trip after it is asked.

use std::collections::VecDeque;

#[derive(Debug, Default)]
pub(super) struct ReadDepth {
    depth: u32,
    /// Per QP: READs asked for and not wholly arrived.
    asked: Vec<u32>,
    /// Per QP: READ streams posted and not yet asked for, in post order.
    waiting: Vec<VecDeque<u32>>,
}

impl ReadDepth {
    /// `qps` QPs that each ask for at most `depth` READs at once.
    pub(super) fn new(depth: u32, qps: usize) -> ReadDepth {
        ReadDepth { depth: depth.max(1), asked: vec![0; qps], waiting: vec![VecDeque::new(); qps] }
    }

    /// READ stream `s` was posted on `qp`: whether it is asked for now
    /// (else it waits for an earlier READ to arrive).
    pub(super) fn post(&mut self, qp: u32, s: u32) -> bool {
        let q = qp as usize;
        if self.asked[q] < self.depth && self.waiting[q].is_empty() {
            self.asked[q] += 1;
            return true;
        }
        self.waiting[q].push_back(s);
        false
    }

    /// A READ of `qp` has wholly arrived: the stream asked for in its
    /// place, if one waited.
    pub(super) fn arrived(&mut self, qp: u32) -> Option<u32> {
        let q = qp as usize;
        self.asked[q] = self.asked[q].saturating_sub(1);
        let next = self.waiting[q].pop_front()?;
        self.asked[q] += 1;
        Some(next)
    }

    /// Whether stream `s` of `qp` is still waiting to be asked for.
    pub(super) fn is_waiting(&self, qp: u32, s: u32) -> bool {
        self.waiting[qp as usize].contains(&s)
    }

    /// `qp` failed: its READs are neither asked for nor waited on.
    pub(super) fn forget(&mut self, qp: u32) {
        self.asked[qp as usize] = 0;
        self.waiting[qp as usize].clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_depth_reads_are_asked_for_and_the_next_when_one_arrives() {
        let mut reads = ReadDepth::new(2, 1);
        assert!(reads.post(0, 10));
        assert!(reads.post(0, 11));
        assert!(!reads.post(0, 12));
        assert!(!reads.post(0, 13));
        assert!(reads.is_waiting(0, 12));
        assert_eq!(reads.arrived(0), Some(12));
        assert!(!reads.is_waiting(0, 12));
        assert_eq!(reads.arrived(0), Some(13));
        assert_eq!(reads.arrived(0), None);
        assert_eq!(reads.arrived(0), None);
        // Two arrived with none waiting: two may be asked for again.
        assert!(reads.post(0, 14) && reads.post(0, 15));
        assert!(!reads.post(0, 16));
        reads.forget(0);
        assert!(!reads.is_waiting(0, 16));
        assert!(reads.post(0, 17));
    }
}
