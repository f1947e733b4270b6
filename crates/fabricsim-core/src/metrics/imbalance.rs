//! Load-balance quality as PRO measures it (pro-deterministic-lb.txt s6,
//! Fig 9): over a group of egress ports of each switch (its uplinks, or
//! its downlinks), the queue-length imbalance, the longest queue minus the
//! mean, sampled every `queue_interval` (0.1us), and the link-load
//! imbalance, the busiest port's bytes over the mean, every `load_interval`
//! (10us; windows where the switch's group sent nothing are skipped). Each
//! sample of each switch is one value of its group's distribution, kept in
//! fine bins (256 B of queue, 0.01 of ratio) so memory does not grow with
//! the run.

use super::{Column, Table};
use crate::net::{Port, PortId};

/// Width of a queue-imbalance bin, bytes, and of a load-ratio bin.
const QUEUE_BIN: f64 = 256.0;
const LOAD_BIN: f64 = 0.01;
/// Bins of each distribution; larger values go to the last.
const BINS: usize = 1 << 14;

/// One metric's distribution.
#[derive(Clone, Debug)]
struct Distribution {
    bin: f64,
    counts: Vec<u64>,
    max: f64,
}

impl Distribution {
    fn new(bin: f64) -> Distribution {
        Distribution { bin, counts: vec![0; BINS], max: 0.0 }
    }

    fn record(&mut self, v: f64) {
        self.counts[((v / self.bin) as usize).min(BINS - 1)] += 1;
        self.max = self.max.max(v);
    }

    fn samples(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q`-quantile: the lower edge of its bin (the maximum itself at 1).
    fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.samples();
        if total == 0 {
            return None;
        }
        if q >= 1.0 {
            return Some(self.max);
        }
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(b as f64 * self.bin);
            }
        }
        Some(self.max)
    }
}

/// A group: each switch's ports of it.
pub struct PortGroup {
    pub name: String,
    pub switches: Vec<Vec<PortId>>,
}

struct Tracked {
    group: PortGroup,
    queue: Distribution,
    load: Distribution,
    /// Each port's bytes sent at the last load sample, per switch.
    sent: Vec<Vec<u64>>,
}

pub struct Imbalance {
    groups: Vec<Tracked>,
}

impl Imbalance {
    pub fn new(groups: Vec<PortGroup>, ports: &[Port]) -> Imbalance {
        let groups = groups
            .into_iter()
            .map(|group| {
                let sent = group
                    .switches
                    .iter()
                    .map(|s| s.iter().map(|p| ports[p.0 as usize].counters.tx_bytes).collect())
                    .collect();
                Tracked { group, queue: Distribution::new(QUEUE_BIN), load: Distribution::new(LOAD_BIN), sent }
            })
            .collect();
        Imbalance { groups }
    }

    /// One queue sample of every switch of every group.
    pub fn sample_queues(&mut self, ports: &[Port]) {
        for g in &mut self.groups {
            for switch in g.group.switches.iter().filter(|s| !s.is_empty()) {
                let (mut max, mut sum) = (0u64, 0u64);
                for p in switch {
                    let q = ports[p.0 as usize].total_queue_bytes();
                    max = max.max(q);
                    sum += q;
                }
                g.queue.record(max as f64 - sum as f64 / switch.len() as f64);
            }
        }
    }

    /// One load sample: what every port sent since the last.
    pub fn sample_loads(&mut self, ports: &[Port]) {
        for g in &mut self.groups {
            for (switch, last) in g.group.switches.iter().zip(&mut g.sent) {
                let (mut max, mut sum) = (0u64, 0u64);
                for (p, before) in switch.iter().zip(last.iter_mut()) {
                    let now = ports[p.0 as usize].counters.tx_bytes;
                    let sent = now - std::mem::replace(before, now);
                    max = max.max(sent);
                    sum += sent;
                }
                if sum > 0 {
                    g.load.record(max as f64 / (sum as f64 / switch.len() as f64));
                }
            }
        }
    }

    /// Per group and metric: the samples and their quantiles.
    pub fn table(&self) -> Table {
        let mut rows: Vec<(String, &str, &Distribution)> = Vec::new();
        for g in &self.groups {
            rows.push((g.group.name.clone(), "queue_max_minus_mean_bytes", &g.queue));
            rows.push((g.group.name.clone(), "load_max_over_mean", &g.load));
        }
        let mut table = Table::default();
        table.push("group", Column::Text(rows.iter().map(|r| r.0.clone()).collect()));
        table.push("metric", Column::Text(rows.iter().map(|r| r.1.to_string()).collect()));
        table.push("samples", Column::Int(rows.iter().map(|r| r.2.samples()).collect()));
        for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0)] {
            table.push(name, Column::Float(rows.iter().map(|r| r.2.quantile(q)).collect()));
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::CLASS_DATA;
    use crate::topology::NodeId;
    use crate::units::{Rate, Time};

    #[test]
    fn queue_imbalance_is_the_longest_minus_the_mean_and_load_the_busiest_over_the_mean() {
        let mut ports: Vec<Port> =
            (0..4).map(|i| Port::new(NodeId(0), i, Rate::from_gbps(100), Time::ZERO, false, false)).collect();
        let group = PortGroup { name: "tier0_up".into(), switches: vec![(0..4).map(PortId).collect()] };
        let mut m = Imbalance::new(vec![group], &ports);
        for (p, q) in ports.iter_mut().zip([40_960, 0, 0, 0]) {
            p.queue_bytes[CLASS_DATA] = q;
        }
        m.sample_queues(&ports);
        for (p, sent) in ports.iter_mut().zip([3_000, 1_000, 1_000, 1_000]) {
            p.counters.tx_bytes = sent;
        }
        m.sample_loads(&ports);
        // Nothing sent since: no load sample.
        m.sample_loads(&ports);
        let t = m.table();
        let col = |name: &str| match &t.columns.iter().find(|(n, _)| n == name).unwrap().1 {
            Column::Float(v) => v.clone(),
            _ => unreachable!(),
        };
        assert_eq!(col("max"), [Some(30_720.0), Some(2.0)]);
        assert_eq!(col("p50"), [Some(30_720.0), Some(2.0)]);
    }
}
