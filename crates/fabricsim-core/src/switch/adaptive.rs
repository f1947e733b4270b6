//! Per-packet adaptive routing (spectrum-x.txt s4.1, s4.4.2): a quantized
//! join-shortest-queue over the next hops of the packet's ECMP group. Each
//! port's queue depth is sampled once per `sample_interval` (every packet
//! routed in that interval sees the same sample, as hardware that refreshes
//! its port grades periodically does), scaled by the port's weight when the
//! control plane has weighted the group, and cut into bands; the packet
//! goes to a port of the lowest band, chosen at random among them in
//! proportion to weight. A port that is down is skipped from the next
//! sample on.

use crate::engine::Rng;
use crate::net::{AdaptiveConfig, Port, PortId};
use crate::units::Time;

/// A port's queue depth and link state as sampled in sampling period
/// `period`. The link state is sampled with the depth: a port that fails
/// leaves the choice within one period, the paper's O(100ns) (s4.4.2).
/// Eight bytes, so that the samples of a large fabric's ports stay in
/// cache: the period is kept modulo 2^32 (a sample 2^32 periods old, 429 s
/// at 100 ns, would pass for current for one period) and the depth
/// saturates at `DOWN - 1` bytes, far above any switch buffer.
#[derive(Clone, Copy)]
struct Sample {
    period: u32,
    /// Queue depth in bytes, or `DOWN`.
    depth: u32,
}

/// The depth of a port sampled down.
const DOWN: u32 = u32::MAX;

pub struct AdaptiveRouting {
    /// Sampling interval, picoseconds.
    interval: u64,
    bands: Vec<u64>,
    /// Per port.
    samples: Vec<Sample>,
    rng: Rng,
    /// The ports tied in the lowest band so far, with their weights.
    ties: Vec<(PortId, u32)>,
}

impl AdaptiveRouting {
    pub fn new(cfg: &AdaptiveConfig, ports: usize, seed: u64) -> AdaptiveRouting {
        AdaptiveRouting {
            interval: cfg.sample_interval.0.max(1),
            bands: cfg.bands.iter().map(|b| b.0).collect(),
            samples: vec![Sample { period: u32::MAX, depth: 0 }; ports],
            rng: Rng::stream(seed, &[0xADA9_7173]),
            ties: Vec::new(),
        }
    }

    /// The next hop among `hops` for a packet routed at `now`, with the
    /// sampled depth of the shallowest port that is up: what the group can
    /// still absorb (Spectrum-X marks ECN only when even that one is queued
    /// past the threshold, s4.2). `weights` is parallel to `hops`, or empty
    /// when the group is unweighted. None when every next hop is down.
    pub fn route(&mut self, hops: &[PortId], weights: &[u32], ports: &[Port], now: Time) -> Option<(PortId, u64)> {
        let period = (now.0 / self.interval) as u32;
        let mut shallowest = u64::MAX;
        let heaviest = weights.iter().copied().max().unwrap_or(1).max(1) as u64;
        let mut lowest = usize::MAX;
        self.ties.clear();
        for (i, &hop) in hops.iter().enumerate() {
            let sample = &mut self.samples[hop.0 as usize];
            if sample.period != period {
                let port = &ports[hop.0 as usize];
                let depth = if port.up { port.total_queue_bytes().min(u64::from(DOWN - 1)) as u32 } else { DOWN };
                *sample = Sample { period, depth };
            }
            let weight = weights.get(i).copied().unwrap_or(1);
            if sample.depth == DOWN || weight == 0 {
                continue;
            }
            let depth = u64::from(sample.depth);
            shallowest = shallowest.min(depth);
            // A port with half the capacity behind it counts its queue
            // double: it drains toward the destination half as fast.
            let band = if weights.is_empty() {
                band_of(&self.bands, depth)
            } else {
                band_of(&self.bands, depth * heaviest / weight as u64)
            };
            if band < lowest {
                lowest = band;
                self.ties.clear();
            }
            if band == lowest {
                self.ties.push((hop, weight));
            }
        }
        let hop = match self.ties.len() {
            0 => return None,
            1 => self.ties[0].0,
            n if weights.is_empty() => self.ties[self.rng.below(n as u64) as usize].0,
            _ => {
                let total: u64 = self.ties.iter().map(|&(_, w)| w as u64).sum();
                let mut draw = self.rng.below(total);
                let chosen = self.ties.iter().position(|&(_, w)| {
                    let hit = draw < w as u64;
                    draw = draw.saturating_sub(w as u64);
                    hit
                });
                self.ties[chosen.unwrap_or(self.ties.len() - 1)].0
            }
        };
        Some((hop, shallowest))
    }
}

/// How many of the band edges `depth` reaches.
fn band_of(edges: &[u64], depth: u64) -> usize {
    edges.iter().take_while(|&&edge| depth >= edge).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::CLASS_DATA;
    use crate::topology::NodeId;
    use crate::units::{Bytes, Rate};

    /// 8 ports, the first with `depths` queued.
    fn ports(depths: &[u64]) -> Vec<Port> {
        (0..8)
            .map(|i| {
                let mut p = Port::new(NodeId(0), i as u16, Rate::from_gbps(400), Time::ZERO, false, false);
                p.queue_bytes[CLASS_DATA] = depths.get(i).copied().unwrap_or(0);
                p
            })
            .collect()
    }

    fn pick(ar: &mut AdaptiveRouting, hops: &[PortId], weights: &[u32], ports: &[Port], now: Time) -> Option<PortId> {
        ar.route(hops, weights, ports, now).map(|(hop, _)| hop)
    }

    fn routing() -> AdaptiveRouting {
        AdaptiveRouting::new(&AdaptiveConfig::default(), 8, 1)
    }

    fn tally(ar: &mut AdaptiveRouting, hops: &[PortId], weights: &[u32], ports: &[Port], draws: u64) -> Vec<u64> {
        let mut counts = vec![0; hops.len()];
        for k in 0..draws {
            // A new sampling period each time: the depths are read afresh.
            let p = pick(ar, hops, weights, ports, Time::from_ns(100 * k)).expect("a port is up");
            counts[p.0 as usize] += 1;
        }
        counts
    }

    #[test]
    fn picks_at_random_among_the_ports_of_the_lowest_band_only() {
        let hops: Vec<PortId> = (0..4).map(PortId).collect();
        // 5KB and 15KB share the lowest band (below 20KB); 50KB and 90KB do not.
        let counts = tally(&mut routing(), &hops, &[], &ports(&[50_000, 5_000, 90_000, 15_000]), 4000);
        assert_eq!((counts[0], counts[2]), (0, 0), "{counts:?}");
        assert!(counts[1] > 1800 && counts[3] > 1800, "{counts:?}");
    }

    #[test]
    fn every_packet_of_a_sampling_period_sees_the_same_sample() {
        let hops = [PortId(0), PortId(1)];
        let mut ar = routing();
        let mut p = ports(&[0, 30_000]);
        assert_eq!(pick(&mut ar, &hops, &[], &p, Time::from_ns(10)), Some(PortId(0)));
        // Port 0 fills within the period: still chosen on the stale sample.
        p[0].queue_bytes[CLASS_DATA] = 60_000;
        assert_eq!(pick(&mut ar, &hops, &[], &p, Time::from_ns(99)), Some(PortId(0)));
        // The next period samples again.
        assert_eq!(pick(&mut ar, &hops, &[], &p, Time::from_ns(100)), Some(PortId(1)));
        p[0].queue_bytes[CLASS_DATA] = 0;
        assert_eq!(pick(&mut ar, &hops, &[], &p, Time::from_ns(200)), Some(PortId(0)));
    }

    #[test]
    fn a_down_port_leaves_the_choice_at_the_next_sample_and_none_up_means_no_route() {
        let hops = [PortId(0), PortId(1)];
        let mut ar = routing();
        let mut p = ports(&[0, 90_000]);
        assert_eq!(pick(&mut ar, &hops, &[], &p, Time::from_ns(0)), Some(PortId(0)));
        p[0].up = false;
        assert_eq!(tally(&mut ar, &hops, &[], &p, 200)[0], 1, "only the draw at 0ns, sampled before");
        p[1].up = false;
        assert_eq!(pick(&mut ar, &hops, &[], &p, Time::from_us(1)), None);
    }

    #[test]
    fn weights_scale_depths_and_break_ties_in_proportion() {
        let hops = [PortId(0), PortId(1)];
        // Empty queues: two thirds to the port with twice the capacity behind it.
        let counts = tally(&mut routing(), &hops, &[2000, 1000], &ports(&[0, 0]), 6000);
        assert!((3700..4300).contains(&counts[0]), "{counts:?}");
        // 12KB behind the half-capacity port counts as 24KB: the next band.
        let counts = tally(&mut routing(), &hops, &[2000, 1000], &ports(&[15_000, 12_000]), 100);
        assert_eq!(counts, [100, 0]);
        let one_edge = AdaptiveConfig { bands: vec![Bytes(20_000)], ..AdaptiveConfig::default() };
        let counts = tally(&mut AdaptiveRouting::new(&one_edge, 8, 1), &hops, &[], &ports(&[15_000, 12_000]), 1000);
        assert!(counts[1] > 400, "unweighted, both are in the lowest band: {counts:?}");
    }
}
