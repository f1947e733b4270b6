//! DRILL (Ghorbani et al., SIGCOMM 2017): micro load balancing in the
//! switch, per packet. The packet goes to the least occupied of `samples`
//! next hops drawn at random and the `memory` ports that were best at the
//! switch's last decision among the same next hops; the best of those
//! compared become the new memory. Occupancy is the egress queue in bytes
//! at the moment of the decision, as DRILL reads it.
//!
//! The memory is kept per group of next hops (the set of destinations a
//! switch routes alike): DRILL's forwarding engine remembers ports of the
//! uplink set all its destinations share, and ConWeave's ns-3 model, which
//! PRO's evaluation runs, keeps it per destination. One engine per switch;
//! DRILL's decomposition of asymmetric fabrics into symmetric components is
//! not modelled, failures only shrink the groups as the routes converge. A
//! port whose link is down is never chosen: the switch's hardware sees its
//! own links.

use crate::engine::Rng;
use crate::net::{DrillConfig, Port, PortId};

/// No port remembered.
const NONE: u32 = u32::MAX;

pub struct Drill {
    samples: usize,
    memory_units: usize,
    /// `memory_units` ports per group, by the group's id; `NONE` when not
    /// yet chosen.
    memory: Vec<u32>,
    rng: Rng,
    /// Scratch: the candidates of one decision, with their occupancy.
    compared: Vec<(u64, PortId)>,
    /// Scratch: indices of the group, for drawing without replacement.
    order: Vec<usize>,
}

impl Drill {
    pub fn new(cfg: &DrillConfig, groups: usize, seed: u64) -> Drill {
        let memory_units = cfg.memory as usize;
        Drill {
            samples: cfg.samples as usize,
            memory_units,
            memory: vec![NONE; groups * memory_units],
            rng: Rng::stream(seed, &[0xD1_2111]),
            compared: Vec::new(),
            order: Vec::new(),
        }
    }

    /// The routes changed: group ids mean other groups now.
    pub fn routes_changed(&mut self, groups: usize) {
        self.memory.clear();
        self.memory.resize(groups * self.memory_units, NONE);
    }

    /// The next hop among `hops`, group `group`, for a packet now. None when
    /// every next hop is down.
    pub fn pick(&mut self, group: usize, hops: &[PortId], ports: &[Port]) -> Option<PortId> {
        let load = |p: PortId| ports[p.0 as usize].total_queue_bytes();
        let up = |p: PortId| ports[p.0 as usize].up;
        if let [only] = hops {
            return up(*only).then_some(*only);
        }
        self.compared.clear();
        let remembered = &self.memory[group * self.memory_units..][..self.memory_units];
        for &m in remembered.iter().filter(|&&m| m != NONE) {
            let port = PortId(m);
            if up(port) && hops.contains(&port) {
                self.compared.push((load(port), port));
            }
        }
        // d distinct ports drawn at random: a partial Fisher-Yates shuffle.
        self.order.clear();
        self.order.extend(0..hops.len());
        let draws = self.samples.min(hops.len());
        for k in 0..draws {
            let j = k + self.rng.below((hops.len() - k) as u64) as usize;
            self.order.swap(k, j);
            let port = hops[self.order[k]];
            if up(port) && !self.compared.iter().any(|&(_, p)| p == port) {
                self.compared.push((load(port), port));
            }
        }
        if self.compared.is_empty() {
            // Every sample was down: any live next hop.
            let port = *hops.iter().find(|&&p| up(p))?;
            self.compared.push((load(port), port));
        }
        // The least occupied wins; ties go to the remembered port, then to
        // the earlier draw (a stable sort keeps that order).
        self.compared.sort_by_key(|&(occupancy, _)| occupancy);
        let chosen = self.compared[0].1;
        let memory = &mut self.memory[group * self.memory_units..][..self.memory_units];
        for (k, slot) in memory.iter_mut().enumerate() {
            *slot = self.compared.get(k).map_or(NONE, |&(_, port)| port.0);
        }
        Some(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::CLASS_DATA;
    use crate::topology::NodeId;
    use crate::units::{Rate, Time};

    fn ports(depths: &[u64]) -> Vec<Port> {
        depths
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                let mut p = Port::new(NodeId(0), i as u16, Rate::from_gbps(100), Time::ZERO, false, false);
                p.queue_bytes[CLASS_DATA] = d;
                p
            })
            .collect()
    }

    fn drill(samples: u32, memory: u32) -> Drill {
        Drill::new(&DrillConfig { samples, memory }, 1, 7)
    }

    #[test]
    fn picks_the_shorter_of_its_samples() {
        // Two ports, both sampled every time: always the shorter queue.
        let hops = [PortId(0), PortId(1)];
        let p = ports(&[9_000, 3_000]);
        let mut d = drill(2, 0);
        assert!((0..100).all(|_| d.pick(0, &hops, &p) == Some(PortId(1))));
    }

    #[test]
    fn one_sample_without_memory_sprays_at_random_and_memory_keeps_the_best() {
        let hops: Vec<PortId> = (0..4).map(PortId).collect();
        let p = ports(&[0, 0, 0, 0]);
        let mut d = drill(1, 0);
        let mut counts = [0; 4];
        for _ in 0..4000 {
            counts[d.pick(0, &hops, &p).unwrap().0 as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 850), "{counts:?}");
        // With memory, the empty port found once is kept against deeper samples.
        let p = ports(&[50_000, 50_000, 0, 50_000]);
        let mut d = drill(1, 1);
        let picks: Vec<PortId> = (0..200).map(|_| d.pick(0, &hops, &p).unwrap()).collect();
        let first = picks.iter().position(|&x| x == PortId(2)).expect("port 2 drawn at some point");
        assert!(picks[first..].iter().all(|&x| x == PortId(2)), "{picks:?}");
    }

    #[test]
    fn a_down_port_is_never_chosen() {
        let hops = [PortId(0), PortId(1)];
        let mut p = ports(&[0, 90_000]);
        p[0].up = false;
        let mut d = drill(2, 1);
        assert!((0..100).all(|_| d.pick(0, &hops, &p) == Some(PortId(1))));
        p[1].up = false;
        assert_eq!(d.pick(0, &hops, &p), None);
    }
}
