//! Event queue ordered by (time, insertion order).
//!
//! Ties run in the order they were scheduled, which makes every run with the
//! same inputs replay identically (the ns-3 rule). Simulated time never goes
//! backwards, so the queue is a radix heap (Ahuja, Mehlhorn, Orlin and
//! Tarjan, 1990) over the u64 picosecond clock, with radix 256: an event
//! lives in the bucket named by the highest byte in which its time differs
//! from the last time settled, and by its value in that byte; a bucket is
//! only split when everything below it is empty, so an event moves at most
//! eight times and usually once or twice. (The binary heap it replaced
//! cost 30% of the flow benchmark; a radix-2 heap moved each event through
//! about seven buckets when event times do not line up, as in collectives.)
//! Buckets are FIFO, so equal times keep their insertion order without a
//! sequence number: events with the same time always share a bucket, and
//! splitting a bucket keeps its order; a bucket of one instant moves to
//! bucket 0 whole, without its events being bucketed again.
//!
//! Bucket 0 is a plain vector consumed from the front through a read
//! index, cleared once read to its end, so the events of the coming
//! instant lie in one slice (`ahead`, for warming caches). The other
//! buckets are lists of fixed-size chunks taken from a shared pool and
//! given back when the bucket is split: a bucket grows without its events
//! being copied, and the memory it fills is the memory just read (the
//! pool is last in, first out), still in cache. (Buckets as vectors grew
//! by reallocation, into fresh pages: at 8,192 hosts a third of the run's
//! page faults and 4% of its time went on the kernel clearing them.) The
//! pool keeps chunks for the events pending and one partly filled chunk a
//! bucket, so the room held follows the events pending.

use std::collections::VecDeque;

use crate::units::Time;

/// Bucket 0 holds times equal to `last`; then 256 buckets per byte level.
const BUCKETS: usize = 1 + 8 * 256;
const WORDS: usize = BUCKETS.div_ceil(64);
/// Entries of a chunk (2 KiB of 16-byte ones): small, since every
/// non-empty bucket holds one partly filled.
const CHUNK: usize = 128;

type Chunk<E> = Vec<(u64, E)>;

/// A bucket beyond the first: its full chunks in order, then the one
/// filling (empty and without room while the bucket is).
struct Bucket<E> {
    full: Vec<Chunk<E>>,
    tail: Chunk<E>,
}

impl<E> Default for Bucket<E> {
    fn default() -> Self {
        Bucket { full: Vec::new(), tail: Vec::new() }
    }
}

impl<E> Bucket<E> {
    fn entries(&self) -> impl Iterator<Item = &(u64, E)> {
        self.full.iter().flatten().chain(&self.tail)
    }
}

pub struct EventQueue<E> {
    /// The events at time `last`, read from `head` on.
    now_bucket: Vec<(u64, E)>,
    /// Buckets 1 and up, at index `b - 1`.
    buckets: Vec<Bucket<E>>,
    /// Chunks given back, for buckets that fill next.
    pool: Vec<Chunk<E>>,
    /// Index of the next event of bucket 0.
    head: usize,
    /// Bit `i` set when bucket `i` is non-empty.
    occupied: [u64; WORDS],
    /// Events earlier than `last`, which a radix heap cannot hold: they
    /// appear when the queue was settled ahead of the event being handled
    /// (to look at the next event), and that event schedules something
    /// sooner. Sorted by time, FIFO among equal times; usually tiny.
    early: VecDeque<(u64, E)>,
    /// Time of the last event popped (or the smallest pending, once settled).
    last: u64,
    len: usize,
    popped: u64,
    now: Time,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            now_bucket: Vec::new(),
            buckets: (1..BUCKETS).map(|_| Bucket::default()).collect(),
            pool: Vec::new(),
            head: 0,
            occupied: [0; WORDS],
            early: VecDeque::new(),
            last: 0,
            len: 0,
            popped: 0,
            now: Time::ZERO,
        }
    }
}

fn bucket_of(time: u64, last: u64) -> usize {
    let differ = time ^ last;
    if differ == 0 {
        return 0;
    }
    let level = (63 - differ.leading_zeros()) as usize / 8;
    1 + level * 256 + ((time >> (8 * level)) & 0xFF) as usize
}

/// Gives `bucket` an empty chunk to fill, from `pool` if it has one, its
/// filled one (if any) joining its full ones.
#[cold]
#[inline(never)]
fn start_chunk<E>(bucket: &mut Bucket<E>, pool: &mut Vec<Chunk<E>>) {
    let fresh = pool.pop().unwrap_or_else(|| Vec::with_capacity(CHUNK));
    let filled = std::mem::replace(&mut bucket.tail, fresh);
    if filled.capacity() != 0 {
        bucket.full.push(filled);
    }
}

impl<E: Copy> EventQueue<E> {
    /// Current simulated time: the time of the last event popped.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Moves the clock to `time`, nothing being due before it: a run that
    /// stops at its end time has simulated up to it, whenever its last
    /// event was. Only a clock bound by the events' times follows, so the
    /// queue's own position (`last`) stays.
    pub fn advance_to(&mut self, time: Time) {
        self.now = self.now.max(time);
    }

    /// Schedules `event` at `time`, which must not be in the past.
    pub fn schedule(&mut self, time: Time, event: E) {
        assert!(time >= self.now, "event scheduled in the past: {time} < {}", self.now);
        self.len += 1;
        if time.0 < self.last {
            let at = self.early.partition_point(|(t, _)| *t <= time.0);
            self.early.insert(at, (time.0, event));
            return;
        }
        let b = bucket_of(time.0, self.last);
        self.push(b, time.0, event);
    }

    #[inline]
    fn push(&mut self, b: usize, time: u64, event: E) {
        self.mark(b);
        if b == 0 {
            self.now_bucket.push((time, event));
            return;
        }
        let bucket = &mut self.buckets[b - 1];
        if bucket.tail.len() == bucket.tail.capacity() {
            start_chunk(bucket, &mut self.pool);
        }
        bucket.tail.push((time, event));
    }

    fn mark(&mut self, b: usize) {
        self.occupied[b / 64] |= 1 << (b % 64);
    }

    fn unmark(&mut self, b: usize) {
        self.occupied[b / 64] &= !(1 << (b % 64));
    }

    fn first_occupied(&self) -> Option<usize> {
        self.occupied.iter().enumerate().find(|(_, &w)| w != 0).map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }

    pub fn schedule_in(&mut self, delay: Time, event: E) {
        self.schedule(self.now + delay, event);
    }

    /// Makes bucket 0 hold the earliest events, splitting the first
    /// non-empty bucket around its minimum. Inline for its common case,
    /// bucket 0 already holding events: it runs two or three times per
    /// event, and a call's register saves cost more than the check.
    #[inline]
    fn settle(&mut self) -> bool {
        self.occupied[0] & 1 != 0 || self.split_first()
    }

    /// `settle` when bucket 0 is empty.
    fn split_first(&mut self) -> bool {
        let Some(i) = self.first_occupied() else { return false };
        self.unmark(i);
        // Its events all move to lower buckets (they share the higher bytes
        // with the new minimum), so the bucket is emptied and its chunks
        // go back to the pool for the next to fill.
        let Bucket { mut full, tail } = std::mem::take(&mut self.buckets[i - 1]);
        let range = |(lo, hi): (u64, u64), &(t, _): &(u64, E)| (lo.min(t), hi.max(t));
        let (min, max) = full.iter().chain([&tail]).fold((u64::MAX, 0), |r, chunk| chunk.iter().fold(r, range));
        self.last = min;
        // One instant (common where flows run in step): the bucket becomes
        // bucket 0, in its order, instead of each event moving. Bucket 0 is
        // empty here, or it would not be split.
        let one_instant = min == max;
        if one_instant {
            self.mark(0);
        }
        for chunk in full.drain(..).chain([tail]) {
            if one_instant {
                self.now_bucket.extend_from_slice(&chunk);
            } else {
                for &(t, e) in &chunk {
                    self.push(bucket_of(t, self.last), t, e);
                }
            }
            self.give_back(chunk);
        }
        // The emptied list is kept for the bucket to fill again.
        self.buckets[i - 1].full = full;
        true
    }

    /// Returns a chunk read to its end to the pool, which keeps as many as
    /// the events pending fill and one for each bucket: every bucket may
    /// hold a chunk it has only begun to fill.
    fn give_back(&mut self, mut chunk: Chunk<E>) {
        if self.pool.len() < BUCKETS + self.len / CHUNK {
            chunk.clear();
            self.pool.push(chunk);
        }
    }

    /// Time of the next event, if any.
    pub fn peek_time(&mut self) -> Option<Time> {
        if let Some(&(t, _)) = self.early.front() {
            return Some(Time(t));
        }
        self.settle().then_some(Time(self.last))
    }

    /// The next event, if any.
    pub fn peek(&mut self) -> Option<&E> {
        if !self.early.is_empty() {
            return self.early.front().map(|(_, e)| e);
        }
        if self.settle() {
            self.now_bucket.get(self.head).map(|(_, e)| e)
        } else {
            None
        }
    }

    /// The events known to come next, the next one first, each with its
    /// time: those known without splitting a bucket beyond the first (they
    /// share the next one's time), none while an early event is pending;
    /// for warming caches ahead, not for ordering.
    pub fn ahead(&mut self) -> &[(u64, E)] {
        if !self.early.is_empty() || !self.settle() {
            return &[];
        }
        &self.now_bucket[self.head..]
    }

    /// Removes the next event and advances the clock to it. Always inlined:
    /// the run loop's copy is its hot path.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let (t, e) = if let Some(early) = self.early.pop_front() {
            early
        } else {
            if !self.settle() {
                return None;
            }
            let next = self.now_bucket[self.head];
            self.head += 1;
            if self.head == self.now_bucket.len() {
                self.now_bucket.clear();
                self.head = 0;
                self.unmark(0);
            }
            next
        };
        self.len -= 1;
        self.popped += 1;
        self.now = Time(t);
        Some((self.now, e))
    }

    /// Every event still to run, in no particular order.
    pub fn pending(&self) -> impl Iterator<Item = &E> {
        let now = &self.now_bucket[self.head..];
        self.early.iter().chain(now).chain(self.buckets.iter().flat_map(Bucket::entries)).map(|(_, e)| e)
    }

    /// Events executed so far.
    pub fn executed(&self) -> u64 {
        self.popped
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries the queue's vectors hold room for, the pool included.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        let chunks = self.buckets.iter().flat_map(|b| b.full.iter().chain([&b.tail])).chain(&self.pool);
        self.now_bucket.capacity() + chunks.map(Vec::capacity).sum::<usize>()
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
        assert_eq!(q.pop(), Some((Time(1), "a")));
        q.schedule(Time(5), "d");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["b", "c", "d"]);
        assert_eq!(q.now(), Time(5));
    }

    #[test]
    fn events_before_a_peeked_one_still_come_first() {
        let mut q = EventQueue::default();
        q.schedule(Time(10), "a");
        q.schedule(Time(100), "c");
        assert_eq!(q.pop(), Some((Time(10), "a")));
        assert_eq!(q.peek(), Some(&"c"));
        q.schedule(Time(50), "b1");
        q.schedule(Time(50), "b2");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["b1", "b2", "c"]);
    }

    #[test]
    fn ahead_shows_the_events_of_the_next_instant() {
        let mut q = EventQueue::default();
        let events = |q: &mut EventQueue<&'static str>| q.ahead().iter().map(|&(_, e)| e).collect::<Vec<_>>();
        q.schedule(Time(5), "a");
        q.schedule(Time(5), "b");
        q.schedule(Time(9), "c");
        q.schedule(Time(5), "d");
        assert_eq!(events(&mut q), ["a", "b", "d"], "settled as asked; c is not while a is next");
        q.pop();
        q.pop();
        assert_eq!(events(&mut q), ["d"], "c is not settled while d is next");
        assert_eq!(q.pop(), Some((Time(5), "d")));
        assert_eq!(q.pop(), Some((Time(9), "c")));
    }

    #[test]
    fn holds_room_for_about_the_events_pending() {
        // Bursts of events spread over many buckets, drained between
        // bursts: each bucket in turn is the one splitting thousands.
        let mut rng = crate::engine::Rng::stream(5, &[]);
        let mut q = EventQueue::default();
        let mut most_pending = 0;
        for _ in 0..200 {
            for _ in 0..5_000 {
                let t = q.now().0 + rng.below(1 << 30);
                q.schedule(Time(t), 0u32);
            }
            most_pending = most_pending.max(q.len());
            for _ in 0..4_000 {
                q.pop();
            }
        }
        assert!(q.capacity() <= 4 * most_pending, "room for {} entries, {most_pending} pending at most", q.capacity());
    }

    /// Pops every event in (time, insertion) order against a sorted
    /// reference, times drawn by `delay` after the clock.
    fn matches_a_sorted_order(delay: impl Fn(&mut crate::engine::Rng, u64) -> u64) {
        let mut rng = crate::engine::Rng::stream(3, &[]);
        let mut q = EventQueue::default();
        let mut reference = Vec::new();
        let mut seq = 0u64;
        for round in 0..2000u64 {
            for _ in 0..3 {
                let t = q.now().0 + delay(&mut rng, round);
                q.schedule(Time(t), seq);
                reference.push((t, seq));
                seq += 1;
            }
            reference.sort();
            if round % 3 == 0 {
                q.peek();
            }
            let (t, e) = q.pop().unwrap();
            assert_eq!((t.0, e), reference.remove(0));
        }
    }

    #[test]
    fn matches_a_sorted_order_on_random_schedules() {
        matches_a_sorted_order(|rng, round| rng.below(1 << (round % 40 + 1)));
    }

    #[test]
    fn matches_a_sorted_order_where_events_share_instants() {
        // Delays of a few serializations, as in a fabric in step: buckets
        // of one instant are taken whole, others split.
        matches_a_sorted_order(|rng, _| 327_680 * rng.below(4) + if rng.below(8) == 0 { rng.below(1000) } else { 0 });
    }

    #[test]
    fn matches_a_sorted_order_where_buckets_span_chunks() {
        // Thousands pending within a few thousand picoseconds, a long way
        // ahead: the buckets that split hold many chunks of distinct times.
        matches_a_sorted_order(|rng, _| (1 << 24) + rng.below(1 << 12));
    }
}
