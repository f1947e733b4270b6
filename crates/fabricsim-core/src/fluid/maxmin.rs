//! Max-min fair rates by progressive filling (Bertsekas and Gallager,
//! Data Networks, s6.5.2): every user's rate grows at the same pace until
//! a resource it crosses is full or its own cap is reached; users of a full
//! resource are frozen at that level, and the others go on growing.
//!
//! A user crosses each resource with a coefficient: the share of its rate
//! that flows through it (a sprayed flow puts 1/4 of its rate on each of
//! four uplinks). Resource `r` fills at the level where
//! `frozen_load[r] + level * growing[r] = capacity[r]`, `growing[r]`
//! being the sum of the coefficients of its users still growing; a heap of
//! these levels, updated as users freeze, finds the next one to fill, so a
//! problem of U users crossing E (user, resource) pairs costs
//! O(E log E).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One user of a problem: its cap (infinite for none) and the resources it
/// crosses, as (resource index, coefficient > 0).
pub struct Demand<'a> {
    pub cap: f64,
    pub uses: &'a [(u32, f64)],
}

/// Below this share of its first sum, a resource's growing sum is taken as
/// zero (what is left is rounding).
const EMPTY: f64 = 1e-12;

#[derive(PartialEq)]
struct Due {
    level: f64,
    /// A resource's index, or `!user` for a user's cap.
    what: u32,
    version: u32,
}

impl Eq for Due {}

impl Ord for Due {
    /// Lowest level first (the heap is a max-heap), then lowest index, so
    /// that ties resolve the same way every run.
    fn cmp(&self, other: &Self) -> Ordering {
        other.level.total_cmp(&self.level).then_with(|| other.what.cmp(&self.what))
    }
}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Scratch space, kept between problems so that solving allocates only
/// when a problem is larger than every one before it.
#[derive(Default)]
pub struct Filling {
    growing: Vec<f64>,
    first_growing: Vec<f64>,
    frozen_load: Vec<f64>,
    version: Vec<u32>,
    /// Users of each resource: `users[start[r]..start[r + 1]]`.
    start: Vec<u32>,
    users: Vec<u32>,
    frozen: Vec<bool>,
    heap: BinaryHeap<Due>,
    /// Resources whose users froze at the level being filled, each once:
    /// their next level is pushed when the level's freezing is done, not
    /// once per user frozen (the later pushes would make the earlier stale).
    touched: Vec<u32>,
    is_touched: Vec<bool>,
}

impl Filling {
    /// The max-min fair rates of `demands` over resources of `capacity`,
    /// written to `rates` (one per demand). A user that crosses no resource
    /// gets its cap, or zero if it has none.
    pub fn solve(&mut self, capacity: &[f64], demands: &[Demand<'_>], rates: &mut Vec<f64>) {
        let r_count = capacity.len();
        rates.clear();
        rates.resize(demands.len(), 0.0);
        self.growing.clear();
        self.growing.resize(r_count, 0.0);
        self.frozen_load.clear();
        self.frozen_load.resize(r_count, 0.0);
        self.version.clear();
        self.version.resize(r_count, 0);
        self.start.clear();
        self.start.resize(r_count + 1, 0);
        for d in demands {
            for &(r, c) in d.uses {
                self.growing[r as usize] += c;
                self.start[r as usize + 1] += 1;
            }
        }
        for r in 0..r_count {
            self.start[r + 1] += self.start[r];
        }
        self.users.clear();
        self.users.resize(self.start[r_count] as usize, 0);
        let mut fill: Vec<u32> = self.start[..r_count].to_vec();
        for (u, d) in demands.iter().enumerate() {
            for &(r, _) in d.uses {
                self.users[fill[r as usize] as usize] = u as u32;
                fill[r as usize] += 1;
            }
        }
        self.first_growing.clear();
        self.first_growing.extend_from_slice(&self.growing);
        self.frozen.clear();
        self.frozen.resize(demands.len(), false);
        self.heap.clear();
        self.touched.clear();
        self.is_touched.clear();
        self.is_touched.resize(r_count, false);
        for (r, (&cap, &growing)) in capacity.iter().zip(&self.growing).enumerate() {
            if growing > 0.0 {
                self.heap.push(Due { level: cap.max(0.0) / growing, what: r as u32, version: 0 });
            }
        }
        for (u, d) in demands.iter().enumerate() {
            if d.uses.is_empty() {
                self.frozen[u] = true;
                rates[u] = if d.cap.is_finite() { d.cap } else { 0.0 };
            } else if d.cap.is_finite() {
                self.heap.push(Due { level: d.cap.max(0.0), what: !(u as u32), version: 0 });
            }
        }
        while let Some(due) = self.heap.pop() {
            let level = due.level;
            if due.what & (1 << 31) != 0 {
                let u = !due.what as usize;
                if !self.frozen[u] {
                    self.freeze(u, level, demands, rates);
                }
            } else {
                let r = due.what as usize;
                if due.version != self.version[r] {
                    continue;
                }
                for i in self.start[r]..self.start[r + 1] {
                    let u = self.users[i as usize] as usize;
                    if !self.frozen[u] {
                        self.freeze(u, level, demands, rates);
                    }
                }
            }
            for k in 0..self.touched.len() {
                let r = self.touched[k] as usize;
                self.is_touched[r] = false;
                self.version[r] += 1;
                if self.growing[r] > 0.0 {
                    let left = (capacity[r] - self.frozen_load[r]).max(0.0);
                    let fills_at = (left / self.growing[r]).max(level);
                    self.heap.push(Due { level: fills_at, what: r as u32, version: self.version[r] });
                }
            }
            self.touched.clear();
        }
    }

    fn freeze(&mut self, u: usize, level: f64, demands: &[Demand<'_>], rates: &mut [f64]) {
        self.frozen[u] = true;
        rates[u] = level;
        for &(r, c) in demands[u].uses {
            let r = r as usize;
            self.frozen_load[r] += c * level;
            self.growing[r] -= c;
            if self.growing[r] <= EMPTY * self.first_growing[r] {
                self.growing[r] = 0.0;
            }
            if !std::mem::replace(&mut self.is_touched[r], true) {
                self.touched.push(r as u32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solve(capacity: &[f64], demands: &[(f64, Vec<(u32, f64)>)]) -> Vec<f64> {
        let d: Vec<Demand> = demands.iter().map(|(cap, uses)| Demand { cap: *cap, uses }).collect();
        let mut rates = Vec::new();
        Filling::default().solve(capacity, &d, &mut rates);
        rates
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-9 * y.abs().max(1.0), "{a:?} != {b:?}");
        }
    }

    const INF: f64 = f64::INFINITY;

    #[test]
    fn shares_one_link_equally() {
        close(&solve(&[10.0], &[(INF, vec![(0, 1.0)]), (INF, vec![(0, 1.0)])]), &[5.0, 5.0]);
    }

    /// The textbook line: flow 0 crosses links A and B, flow 1 only A, flow
    /// 2 only B, with A = 10 and B = 4: B fills first at 2 (flows 0 and 2),
    /// and flow 1 takes what is left of A, 8.
    #[test]
    fn a_bottleneck_frees_capacity_elsewhere() {
        let rates =
            solve(&[10.0, 4.0], &[(INF, vec![(0, 1.0), (1, 1.0)]), (INF, vec![(0, 1.0)]), (INF, vec![(1, 1.0)])]);
        close(&rates, &[2.0, 8.0, 2.0]);
    }

    /// A capped user stops growing at its cap; the others share the rest.
    #[test]
    fn caps_hold_and_release_the_rest() {
        let rates = solve(&[9.0], &[(1.0, vec![(0, 1.0)]), (INF, vec![(0, 1.0)]), (INF, vec![(0, 1.0)])]);
        close(&rates, &[1.0, 4.0, 4.0]);
    }

    /// A sprayed user puts half its rate on each of two links of 10; a
    /// single-path user on the first link gets the same rate: at level 20/3
    /// the first link carries 20/3 + 10/3 = 10.
    #[test]
    fn coefficients_weigh_a_users_share() {
        let rates = solve(&[10.0, 10.0], &[(INF, vec![(0, 0.5), (1, 0.5)]), (INF, vec![(0, 1.0)])]);
        close(&rates, &[20.0 / 3.0, 20.0 / 3.0]);
    }

    /// Three levels: link C (3) holds flows 0 and 1 at 1.5; link B (5)
    /// then holds flow 2 at 3.5; flow 3 alone on A (10) with flow 0 takes
    /// 8.5.
    #[test]
    fn freezes_in_order_of_level() {
        let rates = solve(
            &[10.0, 5.0, 3.0],
            &[
                (INF, vec![(0, 1.0), (1, 1.0), (2, 1.0)]),
                (INF, vec![(2, 1.0)]),
                (INF, vec![(1, 1.0)]),
                (INF, vec![(0, 1.0)]),
            ],
        );
        close(&rates, &[1.5, 1.5, 3.5, 8.5]);
    }

    #[test]
    fn a_user_without_resources_gets_its_cap() {
        close(&solve(&[], &[(3.0, vec![]), (INF, vec![])]), &[3.0, 0.0]);
    }
}
