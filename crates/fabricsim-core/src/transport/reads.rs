//! The reading end of RDMA READs (IBTA Vol.1 9.4.3, 9.7.4): the end that
//! receives the data asks for it with a READ request naming the message's
//! PSNs, at most `depth` READs at a time (the QP's initiator depth), and
//! the other end answers with READ responses that nobody acknowledges.
//! Reliability is the reader's alone: a response out of sequence, or no
//! progress within the timeout, makes it ask again from the first PSN it
//! lacks; after `retry_count` timeouts in a row the QP fails, at the
//! reader, as RC's requester does.

use std::collections::VecDeque;

use crate::units::Time;

/// What the reader asks of the other end: a READ request for the PSNs
/// from `from` on (to the end of that READ, which the responder knows),
/// acknowledging every PSN before `received`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    pub from: u32,
    pub received: u32,
}

#[derive(Clone, Debug, Default)]
pub struct ReadRequester {
    /// READs posted and not wholly arrived, as PSN ranges, in PSN order;
    /// the first `asked` of them have been asked for.
    reads: VecDeque<(u32, u32)>,
    asked: usize,
    /// When the reader gives up waiting for progress on what it asked.
    pub deadline: Option<Time>,
    retries: u32,
    pub timeouts: u64,
    pub failed: bool,
    /// A gap was seen and the reader asked again from its head: later
    /// responses past the gap ask nothing more until it is filled.
    gap_asked: Option<u32>,
}

impl ReadRequester {
    /// A READ of PSNs `[first, end)` was posted.
    pub fn post(&mut self, first: u32, end: u32) {
        self.reads.push_back((first, end));
    }

    /// Whether a READ has been asked for and not wholly arrived.
    pub fn waiting(&self) -> bool {
        self.asked > 0 && !self.failed
    }

    /// Requests for the READs not yet asked for, while fewer than `depth`
    /// are out; `received` is the next PSN expected in order. Starts the
    /// timer when it was idle.
    pub fn ask(&mut self, depth: u32, received: u32, now: Time, timeout: Time) -> Vec<ReadRequest> {
        let mut out = Vec::new();
        while !self.failed && self.asked < self.reads.len() && self.asked < depth as usize {
            out.push(ReadRequest { from: self.reads[self.asked].0.max(received), received });
            self.asked += 1;
        }
        if self.waiting() && self.deadline.is_none() {
            self.deadline = Some(now + timeout);
        }
        out
    }

    /// Responses arrived in order up to `received`: READs wholly in are
    /// done, the timer restarts (or stops with nothing asked).
    pub fn on_progress(&mut self, received: u32, now: Time, timeout: Time) {
        while self.reads.front().is_some_and(|&(_, end)| end <= received) {
            self.reads.pop_front();
            self.asked = self.asked.saturating_sub(1);
        }
        self.retries = 0;
        self.gap_asked = None;
        self.deadline = self.waiting().then_some(now + timeout);
    }

    /// A response arrived past a gap at `received`: ask again from there,
    /// once per gap.
    pub fn on_gap(&mut self, received: u32) -> Option<ReadRequest> {
        if !self.waiting() || self.gap_asked == Some(received) {
            return None;
        }
        self.gap_asked = Some(received);
        Some(ReadRequest { from: received, received })
    }

    /// The timer fired at `now`: when its deadline has come, ask again from
    /// `received` and restart it, or fail after `retry_count` tries in a
    /// row. Returns the request, if any; `failed` says whether it failed.
    pub fn on_timer(&mut self, received: u32, now: Time, timeout: Time, retry_count: u32) -> Option<ReadRequest> {
        let deadline = self.deadline.filter(|_| self.waiting())?;
        if deadline > now {
            return None;
        }
        self.retries += 1;
        self.timeouts += 1;
        if self.retries > retry_count {
            self.failed = true;
            self.deadline = None;
            return None;
        }
        self.deadline = Some(now + timeout);
        self.gap_asked = Some(received);
        Some(ReadRequest { from: received, received })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_depth_reads_are_asked_for_and_each_completion_frees_a_slot() {
        let mut r = ReadRequester::default();
        for k in 0..3 {
            r.post(k * 10, k * 10 + 10);
        }
        let t = Time::from_us(5);
        assert_eq!(
            r.ask(2, 0, Time::ZERO, t),
            [ReadRequest { from: 0, received: 0 }, ReadRequest { from: 10, received: 0 }]
        );
        assert_eq!(r.deadline, Some(t));
        r.on_progress(10, Time::from_us(1), t);
        assert_eq!(r.ask(2, 10, Time::from_us(1), t), [ReadRequest { from: 20, received: 10 }]);
        r.on_progress(30, Time::from_us(2), t);
        assert!(!r.waiting() && r.deadline.is_none());
    }

    #[test]
    fn a_gap_asks_again_once_and_timeouts_fail_the_reader_after_the_retries() {
        let mut r = ReadRequester::default();
        r.post(0, 10);
        let t = Time::from_us(5);
        r.ask(16, 0, Time::ZERO, t);
        assert_eq!(r.on_gap(3), Some(ReadRequest { from: 3, received: 3 }));
        assert_eq!(r.on_gap(3), None, "once per gap");
        assert_eq!(r.on_timer(3, Time::from_us(4), t, 1), None, "not yet due");
        assert_eq!(r.on_timer(3, Time::from_us(5), t, 1), Some(ReadRequest { from: 3, received: 3 }));
        assert_eq!(r.on_timer(3, Time::from_us(10), t, 1), None);
        assert!(r.failed);
    }
}
