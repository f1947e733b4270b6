//! The fabric's max-min problems, posed to `maxmin::Filling`: each user's
//! bundles renumbered to the problem's own, and the last few large
//! problems kept with their rates. A collective run transfer by transfer
//! poses the same problem step after step (a ring's every step has the
//! same QPs on the same routes), and solving a connected component costs
//! O(E log E) where recognising it costs O(E). A problem is recognised only
//! when it is the same in every number, so its rates are the ones solving
//! it would give, bit for bit.

use std::collections::VecDeque;
use std::hash::Hasher;

use super::maxmin::{Demand, Filling};
use crate::engine::FastHasher;

/// Problems of fewer (user, bundle) pairs are solved outright: recognising
/// them would cost about what solving does.
const KEPT_FROM_PAIRS: usize = 1024;
/// How many problems are kept, and how many words of them at most (8 bytes
/// each: 32 MiB), so that a fabric's largest components are not held.
const KEPT: usize = 4;
const KEPT_WORDS: usize = 4 << 20;

/// A problem solved: its numbers (`FairRates::key`) and its rates, in the
/// key's order of users.
struct Solved {
    hash: u64,
    key: Vec<u64>,
    rates: Vec<f64>,
}

#[derive(Default)]
pub struct FairRates {
    filling: Filling,
    /// Each bundle's place in the problem being posed (read only for the
    /// bundles of that problem).
    local: Vec<u32>,
    kept: VecDeque<Solved>,
    /// Problems answered from `kept`.
    pub recognised: u64,
}

impl FairRates {
    /// Max-min fair rates of `users` (each the bundles it crosses with its
    /// share there, and its cap) over `bundles`, sorted, every one they
    /// cross, of capacities `capacity` (indexed by bundle).
    pub fn solve(&mut self, capacity: &[f64], bundles: &[u32], users: &[(&[(u32, f64)], f64)]) -> Vec<f64> {
        if self.local.len() < capacity.len() {
            self.local.resize(capacity.len(), 0);
        }
        for (i, &b) in bundles.iter().enumerate() {
            self.local[b as usize] = i as u32;
        }
        let pairs: usize = users.iter().map(|(uses, _)| uses.len()).sum();
        if pairs < KEPT_FROM_PAIRS {
            let order: Vec<u32> = (0..users.len() as u32).collect();
            return self.fill(capacity, bundles, users, &order);
        }

        // The users sorted by their numbers: the problem is then the same
        // however its streams happen to be numbered (a ring's steps take
        // its slots in turn).
        let (words, span) = self.user_words(users);
        let of_user = |u: u32| &words[span[u as usize]..span[u as usize + 1]];
        let mut order: Vec<u32> = (0..users.len() as u32).collect();
        order.sort_by(|&a, &b| of_user(a).cmp(of_user(b)));
        let mut key = Vec::with_capacity(1 + bundles.len() + words.len());
        key.push(bundles.len() as u64);
        key.extend(bundles.iter().map(|&b| capacity[b as usize].to_bits()));
        for &u in &order {
            key.extend_from_slice(of_user(u));
        }
        let mut hasher = FastHasher::default();
        for &word in &key {
            hasher.write_u64(word);
        }
        let hash = hasher.finish();

        let sorted = match self.kept.iter().position(|s| s.hash == hash && s.key == key) {
            Some(i) => {
                self.recognised += 1;
                let solved = self.kept.remove(i).expect("found");
                let rates = solved.rates.clone();
                self.kept.push_front(solved);
                rates
            }
            None => {
                let rates = self.fill(capacity, bundles, users, &order);
                if key.len() <= KEPT_WORDS {
                    self.kept.push_front(Solved { hash, key, rates: rates.clone() });
                    while self.kept.len() > KEPT || self.kept.iter().map(|s| s.key.len()).sum::<usize>() > KEPT_WORDS {
                        self.kept.pop_back();
                    }
                }
                rates
            }
        };
        let mut rates = vec![0.0; users.len()];
        for (&u, &rate) in order.iter().zip(&sorted) {
            rates[u as usize] = rate;
        }
        rates
    }

    /// Each user as words, one after the other: its cap, its pairs' count,
    /// then each pair's bundle (by its place) and share; and where each
    /// user's begin.
    fn user_words(&self, users: &[(&[(u32, f64)], f64)]) -> (Vec<u64>, Vec<usize>) {
        let mut words: Vec<u64> = Vec::with_capacity(users.iter().map(|(u, _)| 2 + 2 * u.len()).sum());
        let mut span = Vec::with_capacity(users.len() + 1);
        span.push(0);
        for &(uses, cap) in users {
            words.push(cap.to_bits());
            words.push(uses.len() as u64);
            for &(b, share) in uses {
                words.push(u64::from(self.local[b as usize]));
                words.push(share.to_bits());
            }
            span.push(words.len());
        }
        (words, span)
    }

    /// Progressive filling of `users` taken in `order`: their rates in that
    /// order.
    fn fill(&mut self, capacity: &[f64], bundles: &[u32], users: &[(&[(u32, f64)], f64)], order: &[u32]) -> Vec<f64> {
        let uses: Vec<Vec<(u32, f64)>> = (order.iter())
            .map(|&u| users[u as usize].0.iter().map(|&(b, share)| (self.local[b as usize], share)).collect())
            .collect();
        let demands: Vec<Demand> =
            order.iter().zip(&uses).map(|(&u, uses)| Demand { cap: users[u as usize].1, uses }).collect();
        let capacity: Vec<f64> = bundles.iter().map(|&b| capacity[b as usize]).collect();
        let mut rates = Vec::new();
        self.filling.solve(&capacity, &demands, &mut rates);
        rates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INF: f64 = f64::INFINITY;

    /// Bundles 10, 20 and 30 of a fabric of 40 (capacities 10, 4 and 6
    /// times `COPIES`): `COPIES` times four users, one capped, large enough
    /// to be kept.
    const COPIES: usize = 256;
    type User = (Vec<(u32, f64)>, f64);
    fn problem() -> (Vec<f64>, Vec<u32>, Vec<User>) {
        let mut capacity = vec![1.0; 40];
        let n = COPIES as f64;
        (capacity[10], capacity[20], capacity[30]) = (10.0 * n, 4.0 * n, 6.0 * n);
        let four = [
            (vec![(10, 1.0), (20, 0.5)], INF),
            (vec![(10, 1.0)], INF),
            (vec![(20, 1.0), (30, 1.0)], INF),
            (vec![(30, 1.0)], 1.5),
        ];
        let users = (0..COPIES).flat_map(|_| four.clone()).collect();
        (capacity, vec![10, 20, 30], users)
    }

    fn solve(fair: &mut FairRates, capacity: &[f64], bundles: &[u32], users: &[User]) -> Vec<f64> {
        let users: Vec<(&[(u32, f64)], f64)> = users.iter().map(|(u, c)| (&u[..], *c)).collect();
        fair.solve(capacity, bundles, &users)
    }

    /// The rates are progressive filling's, and a problem posed again with
    /// its users numbered otherwise is recognised and answered with the
    /// same rates, each to its own user.
    #[test]
    fn a_problem_posed_again_in_another_order_gets_the_same_rates() {
        let (capacity, bundles, users) = problem();
        let mut fair = FairRates::default();
        let first = solve(&mut fair, &capacity, &bundles, &users);
        // By hand: user 3 stops at its cap, 1.5; bundle 20 (4) fills at
        // 4 / 1.5 with users 0 and 2 growing (bundle 30 would at 4.5);
        // bundle 10 gives user 1 what user 0 leaves.
        let level = 4.0 / 1.5;
        for (got, want) in first.iter().zip([level, 10.0 - level, level, 1.5].repeat(COPIES)) {
            assert!((got - want).abs() < 1e-12, "{first:?}");
        }
        assert_eq!(fair.recognised, 0);

        let reversed: Vec<_> = users.iter().rev().cloned().collect();
        let again = solve(&mut fair, &capacity, &bundles, &reversed);
        assert_eq!(fair.recognised, 1);
        let expected: Vec<f64> = first.iter().rev().copied().collect();
        assert_eq!(again, expected);
    }

    /// A problem that differs in one capacity or one share is solved, not
    /// recognised; one on other bundles of the same capacities is the same
    /// problem.
    #[test]
    fn only_the_same_numbers_are_recognised() {
        let (mut capacity, bundles, mut users) = problem();
        let mut fair = FairRates::default();
        let first = solve(&mut fair, &capacity, &bundles, &users);

        let narrow = capacity[20];
        capacity[20] = narrow * (1.0 + 1e-12);
        let wider = solve(&mut fair, &capacity, &bundles, &users);
        assert_eq!(fair.recognised, 0);
        assert!(wider[0] > first[0]);
        capacity[20] = narrow;

        users[1].0[0].1 = 0.5;
        solve(&mut fair, &capacity, &bundles, &users);
        assert_eq!(fair.recognised, 0);
        users[1].0[0].1 = 1.0;

        let mut moved = capacity.clone();
        (moved[11], moved[21], moved[31]) = (capacity[10], capacity[20], capacity[30]);
        let shifted: Vec<_> =
            users.iter().map(|(u, c)| (u.iter().map(|&(b, s)| (b + 1, s)).collect::<Vec<_>>(), *c)).collect();
        let elsewhere = solve(&mut fair, &moved, &[11, 21, 31], &shifted);
        assert_eq!(fair.recognised, 1);
        assert_eq!(elsewhere, first);
    }

    /// A small problem is solved outright, as cheap as recognising it.
    #[test]
    fn small_problems_are_not_kept() {
        let (capacity, bundles, users) = problem();
        let mut fair = FairRates::default();
        solve(&mut fair, &capacity, &bundles, &users[..4]);
        solve(&mut fair, &capacity, &bundles, &users[..4]);
        assert_eq!(fair.recognised, 0);
        assert!(fair.kept.is_empty());
    }
}
