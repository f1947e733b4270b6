//! The receiver of an MRC QP: out-of-order placement, message completion
//! and the reverse EV set.

use super::random_ev;
use crate::engine::Rng;
use crate::net::Ev;
use crate::transport::placement::Placement;
use crate::units::Time;

/// Receiver side: places packets in any order, completes messages when all
/// their packets have arrived, and keeps the reverse EV set its SACKs and
/// NACKs go on: a few EVs per plane (s2.4 Reverse Paths). While data flows the
/// other way between the two NICs its SACKs name working EVs, which update
/// the set; otherwise EV probes refresh it, since a QP that only receives
/// learns nothing from its own SACKs.
#[derive(Clone, Debug)]
pub(super) struct MrcReceiver {
    pub(super) placement: Placement,
    /// The reverse EV set: `per_plane` EVs of each plane, plane by plane,
    /// taken in turn (`turn` per plane).
    reverse: Vec<Ev>,
    per_plane: usize,
    turn: Vec<usize>,
    next_reverse_probe: Time,
    probe_plane: usize,
    /// Per plane, when data of the other direction last named a working
    /// reverse EV, and when a duplicate last sent a probe at once.
    learned_at: Vec<Option<Time>>,
    urgent_at: Vec<Option<Time>>,
    rng: Rng,
}

impl MrcReceiver {
    /// A receiver with `per_plane` random reverse EVs on each of `planes`
    /// planes.
    pub(super) fn new(planes: usize, per_plane: usize, mut rng: Rng) -> MrcReceiver {
        let per_plane = per_plane.max(1);
        let reverse = (0..planes * per_plane).map(|k| random_ev(&mut rng, k / per_plane)).collect();
        MrcReceiver {
            placement: Placement::default(),
            reverse,
            per_plane,
            turn: vec![0; planes],
            next_reverse_probe: Time::ZERO,
            probe_plane: 0,
            learned_at: vec![None; planes],
            urgent_at: vec![None; planes],
            rng,
        }
    }

    /// The EV control packets leaving on `plane` take: one of the plane's
    /// reverse EVs at a time, so that SACKs keep their order (the sender's
    /// per-EV loss rule relies on it), until a duplicate arriving shows
    /// SACKs are being lost (`move_on`).
    pub(super) fn reverse_ev(&self, plane: usize) -> Ev {
        match self.turn.get(plane) {
            Some(&turn) => self.reverse[plane * self.per_plane + turn],
            None => Ev::new(plane, 0),
        }
    }

    /// A duplicate arrived on `plane`: a SACK, or the sender's patience,
    /// ran out. Control packets of that plane move to its next reverse EV
    /// at once, while a probe looks for one known to work.
    pub(super) fn move_on(&mut self, plane: usize) {
        if let Some(turn) = self.turn.get_mut(plane) {
            *turn = (*turn + 1) % self.per_plane;
        }
    }

    /// An EV probe to send now, if one is due: a random EV of the next
    /// plane in turn, at most one per `interval`, skipping a plane whose
    /// reverse EV data of the other direction keeps fresh. A duplicate
    /// arriving on plane `resent_on` means a SACK of that plane did not get
    /// through (or the sender's timer fired for want of one): its reverse
    /// EV is suspect, and a probe of that plane goes at once, at most one
    /// per plane per `interval`.
    pub(super) fn reverse_probe(&mut self, now: Time, interval: Time, resent_on: Option<usize>) -> Option<Ev> {
        let planes = self.turn.len();
        if let Some(plane) = resent_on.filter(|&p| p < planes) {
            if self.urgent_at[plane].is_none_or(|at| now >= at + interval) {
                self.urgent_at[plane] = Some(now);
                return Some(random_ev(&mut self.rng, plane));
            }
        }
        if now < self.next_reverse_probe || planes == 0 {
            return None;
        }
        let plane = self.probe_plane % planes;
        self.probe_plane += 1;
        if self.learned_at[plane].is_some_and(|at| now < at + interval) {
            return None;
        }
        self.next_reverse_probe = now + interval;
        Some(random_ev(&mut self.rng, plane))
    }

    /// Data of the other direction arrived on `ev`: it works, so control
    /// packets of its plane take it.
    pub(super) fn on_working_ev(&mut self, ev: Ev, now: Time) {
        self.on_probe_reply(ev);
        if let Some(at) = self.learned_at.get_mut(ev.plane()) {
            *at = Some(now);
        }
    }

    /// An EV probe came back: its EV works, so it takes the place of the
    /// plane's reverse EV that would be used next.
    pub(super) fn on_probe_reply(&mut self, ev: Ev) {
        let plane = ev.plane();
        if let Some(&turn) = self.turn.get(plane) {
            self.reverse[plane * self.per_plane + turn] = ev;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reverse_probe_answered_sets_the_reverse_ev_of_its_plane() {
        let mut r = MrcReceiver::new(4, 1, Rng::stream(2, &[]));
        let probe = r.reverse_probe(Time::ZERO, Time::from_us(10), None).unwrap();
        assert_eq!(probe.plane(), 0);
        assert_eq!(r.reverse_probe(Time::from_us(5), Time::from_us(10), None), None);
        let next = r.reverse_probe(Time::from_us(10), Time::from_us(10), None).unwrap();
        assert_eq!(next.plane(), 1, "planes are probed in turn");
        r.on_probe_reply(probe);
        assert_eq!(r.reverse_ev(0), probe);
    }

    #[test]
    fn control_packets_keep_one_reverse_ev_until_a_duplicate_moves_them_on() {
        let mut r = MrcReceiver::new(2, 4, Rng::stream(6, &[]));
        let first = r.reverse_ev(1);
        assert_eq!(r.reverse_ev(1), first, "one path, SACKs in order");
        let mut seen = vec![first];
        for _ in 0..3 {
            r.move_on(1);
            seen.push(r.reverse_ev(1));
        }
        assert!(seen.iter().all(|ev| ev.plane() == 1));
        assert_eq!(seen.iter().collect::<std::collections::BTreeSet<_>>().len(), 4, "{seen:?}");
        r.move_on(1);
        assert_eq!(r.reverse_ev(1), first, "round and round");
    }

    #[test]
    fn data_of_the_other_direction_sets_the_reverse_ev_and_spares_that_planes_probes() {
        let mut r = MrcReceiver::new(1, 1, Rng::stream(3, &[]));
        let working = Ev::new(0, 77);
        r.on_working_ev(working, Time::from_us(100));
        assert_eq!(r.reverse_ev(0), working);
        assert_eq!(r.reverse_probe(Time::from_us(105), Time::from_us(10), None), None, "fresh: no probe");
        assert!(r.reverse_probe(Time::from_us(111), Time::from_us(10), None).is_some(), "stale again: probe");
        // Fresh news of one plane does not spare another's probes.
        let mut r = MrcReceiver::new(2, 1, Rng::stream(3, &[]));
        r.on_working_ev(Ev::new(1, 5), Time::from_us(100));
        assert_eq!(r.reverse_probe(Time::from_us(101), Time::from_us(10), None).map(|ev| ev.plane()), Some(0));
    }

    #[test]
    fn a_duplicate_arrival_probes_its_plane_at_once_and_once_per_interval() {
        let mut r = MrcReceiver::new(2, 1, Rng::stream(4, &[]));
        assert!(r.reverse_probe(Time::ZERO, Time::from_us(10), None).is_some());
        assert_eq!(r.reverse_probe(Time::from_us(1), Time::from_us(10), None), None);
        let urgent = r.reverse_probe(Time::from_us(2), Time::from_us(10), Some(1));
        assert_eq!(urgent.map(|ev| ev.plane()), Some(1), "a resent packet on plane 1: probe plane 1 now");
        assert_eq!(r.reverse_probe(Time::from_us(3), Time::from_us(10), Some(1)), None, "one per interval");
    }
}
