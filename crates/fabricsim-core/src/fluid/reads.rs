//! The reader's initiator depth in the flow model (IBTA Vol.1 9.4.3; the
//! packet model's `transport::reads`): a QP asks for at most `depth` READs
//! at a time, and asks for the next when one has wholly arrived. A READ
//! posted past the depth waits its turn; its data leaves the other end one
//! request trip after it is asked.

use std::collections::VecDeque;

use crate::engine::FastMap;

/// Every QP's READs in flight, kept only for QPs that have some: most
/// runs post none, and a flow-model run may hold millions of QPs.
#[derive(Debug, Default)]
pub(super) struct ReadDepth {
    depth: u32,
    of_qp: FastMap<u32, QpReads>,
}

#[derive(Debug, Default)]
struct QpReads {
    /// READs asked for and not wholly arrived.
    asked: u32,
    /// READ streams posted and not yet asked for, in post order.
    waiting: VecDeque<u32>,
}

impl ReadDepth {
    /// QPs that each ask for at most `depth` READs at once.
    pub(super) fn new(depth: u32) -> ReadDepth {
        ReadDepth { depth, of_qp: FastMap::default() }
    }

    /// READ stream `s` was posted on `qp`: whether it is asked for now
    /// (else it waits for an earlier READ to arrive).
    pub(super) fn post(&mut self, qp: u32, s: u32) -> bool {
        let reads = self.of_qp.entry(qp).or_default();
        if reads.asked < self.depth && reads.waiting.is_empty() {
            reads.asked += 1;
            return true;
        }
        reads.waiting.push_back(s);
        false
    }

    /// A READ of `qp` has wholly arrived: the stream asked for in its
    /// place, if one waited.
    pub(super) fn arrived(&mut self, qp: u32) -> Option<u32> {
        let reads = self.of_qp.get_mut(&qp)?;
        let next = reads.waiting.pop_front();
        if next.is_none() {
            reads.asked = reads.asked.saturating_sub(1);
            if reads.asked == 0 {
                self.of_qp.remove(&qp);
            }
        }
        next
    }

    /// Whether stream `s` of `qp` is still waiting to be asked for.
    pub(super) fn is_waiting(&self, qp: u32, s: u32) -> bool {
        self.of_qp.get(&qp).is_some_and(|reads| reads.waiting.contains(&s))
    }

    /// `qp` failed: its READs are neither asked for nor waited on.
    pub(super) fn forget(&mut self, qp: u32) {
        self.of_qp.remove(&qp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_depth_reads_are_asked_for_and_the_next_when_one_arrives() {
        let mut reads = ReadDepth::new(2);
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
