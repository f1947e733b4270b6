//! Event queue ordered by (time, insertion sequence).
//!
//! Ties run in the order they were scheduled, which makes every run with the
//! same inputs replay identically (the ns-3 rule). The queue is a binary
//! heap behind a small interface so a calendar queue or timing wheel can
//! replace it after measurement without touching callers.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::units::Time;

struct Entry<E> {
    time: Time,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed so the max-heap pops the earliest (time, seq) first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.time.cmp(&self.time).then_with(|| other.seq.cmp(&self.seq))
    }
}

pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    now: Time,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { heap: BinaryHeap::with_capacity(1 << 12), next_seq: 0, now: Time::ZERO, popped: 0 }
    }
}

impl<E> EventQueue<E> {
    /// Current simulated time: the time of the last event popped.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedules `event` at `time`; times in the past are a model bug.
    pub fn schedule(&mut self, time: Time, event: E) {
        debug_assert!(time >= self.now, "event scheduled in the past");
        self.heap.push(Entry { time, seq: self.next_seq, event });
        self.next_seq += 1;
    }

    pub fn schedule_in(&mut self, delay: Time, event: E) {
        self.schedule(self.now + delay, event);
    }

    /// Time of the next event, if any.
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|e| e.time)
    }

    /// Removes the next event and advances the clock to it.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let entry = self.heap.pop()?;
        self.now = entry.time;
        self.popped += 1;
        Some((entry.time, entry.event))
    }

    /// Events executed so far.
    pub fn executed(&self) -> u64 {
        self.popped
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_run_in_insertion_order() {
        let mut q = EventQueue::default();
        q.schedule(Time(5), "b");
        q.schedule(Time(1), "a");
        q.schedule(Time(5), "c");
        q.schedule(Time(5), "d");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
        assert_eq!(q.now(), Time(5));
    }
}
