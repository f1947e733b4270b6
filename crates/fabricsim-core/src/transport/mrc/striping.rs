//! EV sets that stripe (mrc-srv6-multiplane.txt s2.3, s2.4): a QP's EVs
//! are split equally over the planes and, within a plane, over distinct
//! paths, each EV naming a path of its own until every path has one. The
//! sequence deals EVs to the source T0's uplinks in turn, in an order drawn
//! per QP, so the uplinks' counts never differ by more than one; the paths
//! beyond each uplink are dealt the same way. Backups continue the same
//! sequence, so they stripe too.
//!
//! Under ECMP the NIC cannot know where a value hashes (the switches seed
//! their own hashes), so it can only make the values distinct.

use std::collections::BTreeSet;

use crate::engine::Rng;
use crate::net::{Ev, PathSpace};

/// Path choices an EV has room for (13 bits, `Ev::choice`).
const CHOICES: usize = 1 << 13;

/// The first `count` EVs of `plane`'s striping sequence: over the paths of
/// `space` when the sender knows them, else distinct random values.
pub(super) fn striped_evs(plane: usize, count: usize, space: Option<PathSpace>, rng: &mut Rng) -> Vec<Ev> {
    match space {
        Some(space) => over_paths(plane, count, space, rng),
        None => distinct(plane, count, rng),
    }
}

fn over_paths(plane: usize, count: usize, space: PathSpace, rng: &mut Rng) -> Vec<Ev> {
    let uplinks = space.uplinks.max(1) as usize;
    let above = (space.paths as usize / uplinks).max(1);
    let paths = uplinks * above;
    let mut uplink_order: Vec<usize> = (0..uplinks).collect();
    rng.shuffle(&mut uplink_order);
    let mut above_order: Vec<usize> = (0..above).collect();
    rng.shuffle(&mut above_order);
    // Each uplink starts at its own place in the order of the ways beyond
    // it, so that QPs with few EVs do not all take the same T1 uplinks.
    let starts: Vec<usize> = (0..uplinks).map(|_| rng.below(above as u64) as usize).collect();
    // A repeated path takes another value (a multiple of `paths` on top),
    // as far as the 13 bits allow.
    let rounds = (CHOICES / paths).max(1);
    (0..count)
        .map(|i| {
            let uplink = uplink_order[i % uplinks];
            let nth = i / uplinks;
            let way = above_order[(starts[uplink] + nth) % above];
            let round = (nth / above) % rounds;
            Ev::new(plane, (uplink + uplinks * way + paths * round) as u32)
        })
        .collect()
}

fn distinct(plane: usize, count: usize, rng: &mut Rng) -> Vec<Ev> {
    let mut taken = BTreeSet::new();
    (0..count)
        .map(|_| loop {
            let choice = rng.below(CHOICES as u64) as u32;
            // Past 8192 values repeats are unavoidable.
            if taken.insert(choice) || taken.len() == CHOICES {
                break Ev::new(plane, choice);
            }
        })
        .collect()
}

/// The uplink of the source T0 an EV takes.
pub(super) fn uplink_of(ev: Ev, space: PathSpace) -> usize {
    ev.choice() % space.uplinks.max(1) as usize
}

/// The path an EV takes.
pub(super) fn path_of(ev: Ev, space: PathSpace) -> usize {
    ev.choice() % space.paths.max(1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(evs: &[Ev], of: impl Fn(Ev) -> usize, n: usize) -> Vec<usize> {
        let mut c = vec![0; n];
        for &ev in evs {
            c[of(ev)] += 1;
        }
        c
    }

    #[test]
    fn per_uplink_counts_of_one_qp_differ_by_at_most_one() {
        let space = PathSpace { uplinks: 8, paths: 8 };
        for count in [3, 8, 13, 32, 37] {
            let evs = striped_evs(2, count, Some(space), &mut Rng::stream(7, &[count as u64]));
            let c = counts(&evs, |ev| uplink_of(ev, space), 8);
            let (lo, hi) = (c.iter().min().unwrap(), c.iter().max().unwrap());
            assert!(hi - lo <= 1, "{count} EVs: {c:?}");
            assert!(evs.iter().all(|ev| ev.plane() == 2));
            let distinct: BTreeSet<Ev> = evs.iter().copied().collect();
            assert_eq!(distinct.len(), count, "every EV a value of its own");
        }
    }

    #[test]
    fn distinct_paths_come_first_and_paths_beyond_the_uplinks_stripe_too() {
        // A 3-tier Clos: 4 T0 uplinks, 4 ways on from each T1.
        let space = PathSpace { uplinks: 4, paths: 16 };
        let evs = striped_evs(0, 16, Some(space), &mut Rng::stream(3, &[]));
        let paths: BTreeSet<usize> = evs.iter().map(|&ev| path_of(ev, space)).collect();
        assert_eq!(paths.len(), 16, "16 EVs over 16 paths: one each");
        let more = striped_evs(0, 40, Some(space), &mut Rng::stream(3, &[]));
        let c = counts(&more, |ev| path_of(ev, space), 16);
        assert!(c.iter().max().unwrap() - c.iter().min().unwrap() <= 1, "{c:?}");
    }

    #[test]
    fn the_order_is_drawn_per_qp() {
        let space = PathSpace { uplinks: 8, paths: 8 };
        let a = striped_evs(0, 4, Some(space), &mut Rng::stream(1, &[1]));
        let b = striped_evs(0, 4, Some(space), &mut Rng::stream(1, &[2]));
        assert_ne!(a, b);
    }

    #[test]
    fn without_path_knowledge_the_values_are_distinct() {
        let evs = striped_evs(1, 200, None, &mut Rng::stream(5, &[]));
        let distinct: BTreeSet<Ev> = evs.iter().copied().collect();
        assert_eq!(distinct.len(), 200);
        assert!(evs.iter().all(|ev| ev.plane() == 1));
    }
}
