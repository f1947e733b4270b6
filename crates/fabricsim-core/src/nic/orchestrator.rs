//! PRO's orchestrated round robin (pro-deterministic-lb.txt s3.A, Algorithm
//! 1): the NIC picks each data packet's path, a PathID it writes into the
//! low 12 bits of the UDP source port (`switch::path_id`). A NIC keeps, per
//! destination ToR, the set of the M equal-cost paths to it and a counter C
//! shared by its QPs to that ToR. Every packet of a QP steps its path by the
//! QP's span, the number P of the NIC's active QPs to that ToR made odd, so
//! that a QP visits all M paths in M packets (the paper's M is a power of
//! two; for other M the span grows by 2 until it is coprime with M) and the
//! QPs, each starting where the last one chose (C), stay staggered: in a
//! round of the NIC's QP scheduler they take consecutive paths. Under batch
//! scheduling (`nic.batch` n > 1) the paths are M/n blocks of n, a batch
//! takes one block and C advances by a block (the paper's C <- path + n).
//!
//! Each path set's C starts at a random block: the NICs under one ToR pick
//! their initial states uniformly and independently, as the paper's proof
//! of bounded queues assumes (s4.B, Lemma 4); were they all to start at
//! path 0, the first packets of every NIC would take the same uplink.
//!
//! A path is numbered ToR egress first: path p leaves the source ToR by
//! its (p mod n_t)-th next hop and the aggregation switch by its
//! (p div n_t)-th (n_t next hops at the ToR, n_a at the aggregation).

use crate::engine::{FastMap, Rng};
use crate::ids::QpId;

/// The paths from a NIC port to one destination ToR.
#[derive(Clone, Copy, Debug)]
struct PathSet {
    /// Next hops at the source ToR and at the aggregation switch.
    tor: u32,
    aggregation: u32,
    /// C: where the next QP to start takes its first block.
    next: u32,
    /// P: QPs sending to this ToR.
    active: u32,
}

impl PathSet {
    fn paths(&self) -> u32 {
        self.tor * self.aggregation
    }
}

#[derive(Clone, Copy, Debug)]
struct QpPath {
    set: u32,
    /// The block of the QP's current batch; None before its first packet.
    block: Option<u32>,
    active: bool,
}

pub(crate) struct Orchestrator {
    sets: Vec<PathSet>,
    /// By QP id (dense): each QP's path state; None for a QP not registered.
    qps: Vec<Option<QpPath>>,
    batch: u32,
    /// Staggering across QPs (off: every QP steps by one from its set's
    /// initial block, in lockstep; PRO's Fig 11b ablation).
    inter_qp: bool,
    /// One round robin over every packet of the set, whatever its QP
    /// (PRO's Fig 11a ablation, with one set per NIC port).
    packet_level: bool,
    /// Draws each set's initial C.
    rng: Rng,
}

/// Greatest common divisor.
fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Orchestrator {
    pub fn new(batch: u32, seed: u64) -> Orchestrator {
        Orchestrator {
            sets: Vec::new(),
            qps: Vec::new(),
            batch: batch.max(1),
            inter_qp: true,
            packet_level: false,
            rng: Rng::stream(seed, &[0x0C4E_5742]),
        }
    }

    /// Without destination-aware path sets: each packet takes the next
    /// path of its NIC port's one round robin (PRO's ablation).
    pub fn packet_level(self) -> Orchestrator {
        Orchestrator { packet_level: true, ..self }
    }

    /// Without inter-QP staggering (PRO's ablation).
    pub fn without_inter_qp(self) -> Orchestrator {
        Orchestrator { inter_qp: false, ..self }
    }

    /// Registers QP `q`, whose paths from its NIC port to its destination
    /// ToR are `key`'s, with `tor` x `aggregation` of them. QPs of one key
    /// with different fan-outs (one set for every destination, the
    /// ablation) share the widest.
    pub fn add_qp(
        &mut self,
        q: QpId,
        key: (u32, u32),
        tor: u32,
        aggregation: u32,
        index: &mut FastMap<(u32, u32), u32>,
    ) {
        let set = *index.entry(key).or_insert_with(|| {
            let (tor, aggregation) = (tor.max(1), aggregation.max(1));
            let blocks = (tor * aggregation / self.batch.min(tor * aggregation)).max(1);
            let next = self.rng.below(u64::from(blocks)) as u32;
            self.sets.push(PathSet { tor, aggregation, next, active: 0 });
            self.sets.len() as u32 - 1
        });
        let shared = &mut self.sets[set as usize];
        shared.tor = shared.tor.max(tor);
        shared.aggregation = shared.aggregation.max(aggregation);
        let slot = q.0 as usize;
        if self.qps.len() <= slot {
            self.qps.resize(slot + 1, None);
        }
        self.qps[slot] = Some(QpPath { set, block: None, active: false });
    }

    /// The PathID of QP `q`'s next packet, the `k`-th of its batch, as the
    /// low 12 bits of `entropy`.
    pub fn stamp(&mut self, q: QpId, k: u32, entropy: u16) -> u16 {
        let Some(Some(qp)) = self.qps.get_mut(q.0 as usize) else { return entropy };
        let set = &mut self.sets[qp.set as usize];
        if !qp.active {
            qp.active = true;
            set.active += 1;
        }
        let m = set.paths();
        let batch = self.batch.min(m);
        let blocks = (m / batch).max(1);
        let k = k % batch;
        if self.packet_level {
            qp.block = Some(set.next % blocks);
            set.next = (set.next % blocks + 1) % blocks;
        } else if k == 0 || qp.block.is_none() {
            let block = match qp.block {
                Some(b) if !self.inter_qp => (b + 1) % blocks,
                None if !self.inter_qp => set.next % blocks,
                Some(b) => {
                    // The span: P, odd, coprime with the number of blocks.
                    let mut span = set.active | 1;
                    while gcd(span % blocks, blocks) != 1 && blocks > 1 {
                        span += 2;
                    }
                    (b + span) % blocks
                }
                None => set.next % blocks,
            };
            qp.block = Some(block);
            if self.inter_qp {
                set.next = (block + 1) % blocks;
            }
        }
        let path = (qp.block.expect("set above") * batch + k) % m;
        let (low, high) = (path % set.tor, path / set.tor);
        (entropy & !0x0FFF) | ((high as u16) << 6) | low as u16
    }

    /// QP `q` has nothing more to send for now: it leaves P.
    pub fn idle(&mut self, q: QpId) {
        if let Some(Some(qp)) = self.qps.get_mut(q.0 as usize) {
            if qp.active {
                qp.active = false;
                self.sets[qp.set as usize].active -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::path_id::path_id_field;

    /// The path number of a stamped PathID, with `tor` next hops at the ToR.
    fn path(entropy: u16, tor: u32) -> u32 {
        path_id_field(entropy, 0) as u32 + tor * path_id_field(entropy, 1) as u32
    }

    fn orchestrator(qps: u32, tor: u32, aggregation: u32, batch: u32) -> Orchestrator {
        let mut o = Orchestrator::new(batch, 1);
        let mut index = FastMap::default();
        for q in 0..qps {
            o.add_qp(QpId(q), (0, 9), tor, aggregation, &mut index);
        }
        o
    }

    #[test]
    fn every_qp_covers_all_m_paths_in_m_packets() {
        for qps in [1, 2, 3, 4, 5] {
            let mut o = orchestrator(qps, 8, 2, 1);
            let mut seen: Vec<Vec<u32>> = vec![Vec::new(); qps as usize];
            // The NIC's scheduler takes the QPs in turn, one packet each.
            for _ in 0..16 {
                for q in 0..qps {
                    seen[q as usize].push(path(o.stamp(QpId(q), 0, 0xC000), 8));
                }
            }
            for (q, paths) in seen.iter().enumerate() {
                let mut sorted = paths.clone();
                sorted.sort();
                assert_eq!(sorted, (0..16).collect::<Vec<_>>(), "{qps} QPs, QP {q}: {paths:?}");
            }
        }
    }

    #[test]
    fn staggered_qps_never_pick_the_same_path_in_the_same_round() {
        // P odd or even, fewer QPs than paths or as many: each round's
        // paths differ.
        for (qps, tor) in [(3, 16), (4, 16), (8, 8), (5, 8)] {
            let mut o = orchestrator(qps, tor, 1, 1);
            for round in 0..64 {
                let picks: Vec<u32> = (0..qps).map(|q| path(o.stamp(QpId(q), 0, 0), tor)).collect();
                let mut distinct = picks.clone();
                distinct.sort();
                distinct.dedup();
                assert_eq!(distinct.len(), picks.len(), "{qps} QPs on {tor} paths, round {round}: {picks:?}");
            }
        }
    }

    #[test]
    fn a_new_qp_starts_after_the_last_path_taken_and_idle_qps_leave_the_span() {
        let mut o = orchestrator(2, 8, 1, 1);
        let start = path(o.stamp(QpId(0), 0, 0), 8);
        let at = |k: u32| (start + k) % 8;
        assert_eq!(path(o.stamp(QpId(0), 0, 0), 8), at(1), "alone, QP 0 steps by 1");
        assert_eq!(path(o.stamp(QpId(1), 0, 0), 8), at(2), "QP 1 starts at C, after QP 0's last path");
        assert_eq!(path(o.stamp(QpId(0), 0, 0), 8), at(4), "two active: span 3 (2 made odd)");
        o.idle(QpId(1));
        assert_eq!(path(o.stamp(QpId(0), 0, 0), 8), at(5), "one active again: span 1");
    }

    #[test]
    fn without_inter_qp_orchestration_the_qps_move_in_lockstep() {
        let mut o = orchestrator(3, 8, 1, 1).without_inter_qp();
        for _ in 0..8 {
            let picks: Vec<u32> = (0..3).map(|q| path(o.stamp(QpId(q), 0, 0), 8)).collect();
            assert!(picks.iter().all(|&p| p == picks[0]), "{picks:?}");
        }
    }

    #[test]
    fn without_destination_awareness_every_packet_takes_the_next_path_whatever_its_qp() {
        // Two QPs in turn over 8 paths: the NIC's one round robin gives QP 0
        // the even paths only and QP 1 the odd (Fig 3's QP-unaware RR).
        let mut o = orchestrator(2, 8, 1, 1).packet_level();
        let picks: Vec<u32> = (0..16).map(|i| path(o.stamp(QpId(i % 2), 0, 0), 8)).collect();
        let of = |q: usize| picks.iter().skip(q).step_by(2).map(|p| p % 2).collect::<std::collections::BTreeSet<_>>();
        assert_eq!((of(0).len(), of(1).len()), (1, 1), "{picks:?}");
        assert!(picks.windows(2).all(|w| (w[0] + 1) % 8 == w[1]), "{picks:?}");
    }

    #[test]
    fn nics_start_their_sets_at_random_paths() {
        let starts: std::collections::BTreeSet<u32> =
            (0..32).map(|seed| path(Orchestrator::new(1, seed).tap_first(), 8)).collect();
        assert!(starts.len() >= 6, "{starts:?}");
    }

    #[test]
    fn a_batch_takes_a_block_of_consecutive_paths() {
        let mut o = orchestrator(2, 8, 1, 4);
        let a: Vec<u32> = (0..4).map(|k| path(o.stamp(QpId(0), k, 0), 8)).collect();
        let b: Vec<u32> = (0..4).map(|k| path(o.stamp(QpId(1), k, 0), 8)).collect();
        let block = |first: u32| (first..first + 4).collect::<Vec<_>>();
        assert!(a[0].is_multiple_of(4) && a == block(a[0]), "{a:?}");
        assert_eq!(b, block((a[0] + 4) % 8), "the next block: the batches of the two QPs are disjoint");
    }

    #[test]
    fn the_pathid_keeps_the_high_bits_of_the_source_port() {
        let mut o = orchestrator(1, 4, 4, 1);
        let stamped: Vec<u16> = (0..16).map(|_| o.stamp(QpId(0), 0, 0xC000)).collect();
        assert!(stamped.iter().all(|e| e & 0xF000 == 0xC000));
        // Path p: ToR field p mod 4, aggregation field p div 4.
        let p = path(stamped[5], 4);
        assert_eq!((path_id_field(stamped[5], 0) as u32, path_id_field(stamped[5], 1) as u32), (p % 4, p / 4));
    }

    /// Theorem 1 (s4): under orchestrated round robin the queues of the
    /// ToR's uplinks stay bounded at full load. The theorem's model: time in
    /// slots, each of B_in NICs under one ToR sends one packet per slot (its
    /// scheduler takes its P QPs in turn, every QP to the same destination
    /// ToR), each uplink sends one per slot, B_in <= B_e. Over random B_e,
    /// B_in, P and NIC seeds, the longest queue of the steady state (the
    /// second half of the run) is no longer than while the QPs started, so
    /// it does not grow, and for odd P, the case the proof takes, it is at
    /// most B_in: each NIC's path then steps by exactly one per slot (Eq. 2).
    /// For even P the span P + 1 adds a step per round of the QPs, and the
    /// bound is looser (2 B_in here). Random spraying queues more.
    #[test]
    fn theorem_1_tor_uplink_queues_stay_bounded_at_full_load() {
        let mut rng = crate::engine::Rng::stream(17, &[1]);
        let mut worse = 0;
        for case in 0..200 {
            let uplinks = [4u32, 8, 16][rng.below(3) as usize];
            let nics = 1 + rng.below(u64::from(uplinks)) as u32;
            let qps = 1 + rng.below(8) as u32;
            let mut orchestrators: Vec<Orchestrator> =
                (0..nics).map(|n| orchestrator_seeded(qps, uplinks, u64::from(case * 64 + n))).collect();
            let (mut queues, mut random_queues) = (vec![0u32; uplinks as usize], vec![0u32; uplinks as usize]);
            let (mut first_half, mut second_half, mut random_max) = (0, 0, 0);
            let slots = 4000;
            for slot in 0..slots {
                for (n, o) in orchestrators.iter_mut().enumerate() {
                    let q = QpId((slot + n as u32) % qps);
                    queues[path(o.stamp(q, 0, 0), uplinks) as usize % uplinks as usize] += 1;
                    random_queues[rng.below(u64::from(uplinks)) as usize] += 1;
                }
                let longest = *queues.iter().max().unwrap();
                if slot < slots / 2 {
                    first_half = first_half.max(longest);
                } else {
                    second_half = second_half.max(longest);
                }
                random_max = random_max.max(*random_queues.iter().max().unwrap());
                for q in queues.iter_mut().chain(random_queues.iter_mut()) {
                    *q = q.saturating_sub(1);
                }
            }
            let label = format!("case {case}: {nics} NICs, {uplinks} uplinks, {qps} QPs");
            let bound = if qps % 2 == 1 { nics } else { 2 * nics };
            assert!(second_half <= bound && second_half <= first_half, "{label}: {first_half} then {second_half}");
            worse += u32::from(random_max > first_half);
        }
        assert!(worse > 150, "random spraying queues more in most cases: {worse} of 200");
    }

    fn orchestrator_seeded(qps: u32, tor: u32, seed: u64) -> Orchestrator {
        let mut o = Orchestrator::new(1, seed);
        let mut index = FastMap::default();
        for q in 0..qps {
            o.add_qp(QpId(q), (0, 9), tor, 1, &mut index);
        }
        o
    }

    impl Orchestrator {
        /// The first PathID of a lone QP to a set of 8 paths.
        fn tap_first(mut self) -> u16 {
            self.add_qp(QpId(0), (0, 0), 8, 1, &mut FastMap::default());
            self.stamp(QpId(0), 0, 0)
        }
    }
}
