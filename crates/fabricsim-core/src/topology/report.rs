//! The topology calculator: counts of NICs, switches, links and transceiver
//! modules, and the bisection bandwidth, as used to compare fabric designs
//! (mrc-srv6-multiplane.txt s2: a multi-plane 2-tier fabric needs 2/3 of the
//! optics and 3/5 of the switches of a 3-tier one).

use schemars::JsonSchema;
use serde::Serialize;

use super::path_space::{path_space, PathSpace};
use super::{ModuleSpec, NodeRole, Topology};
use crate::units::Rate;

/// What a fabric is made of.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct TopologyReport {
    /// NICs (one per GPU).
    pub nics: u64,
    /// NIC ports: link ends at NICs.
    pub nic_ports: u64,
    /// Switches of every tier and plane.
    pub switches_total: u64,
    /// Switches per tier, tier 0 (ToR) first.
    pub switches_per_tier: Vec<u64>,
    /// Cables.
    pub links_total: u64,
    /// Transceiver modules at both ends of every cable. A NIC has one module
    /// per cage of ports. A switch fills modules of its native port rate:
    /// links slower than it are lanes of broken-out ports (e.g. eight 100G
    /// lanes per 800G module), packed per link rate; a link faster than it
    /// takes as many native ports as its rate needs.
    pub transceivers: u64,
    /// Bisection bandwidth in bits per second by the Clos rule: for each
    /// boundary between consecutive layers (NICs, tier 0, tier 1, ...), the
    /// total rate of the links that cross it; the smallest total, halved.
    /// Exact for the Clos family; for explicit graphs an upper-bound
    /// estimate, since a graph's worst cut need not follow its layers.
    pub bisection_bps: u64,
    /// The equal-cost paths between the first NIC and the farthest from
    /// it, which a host picking disjoint paths searches (alibaba-hpn.txt
    /// Table 1); none without two connected NICs.
    pub path_space: Option<PathSpace>,
}

pub(super) fn report(topology: &Topology) -> TopologyReport {
    let mut nics = 0;
    let mut switches_per_tier = Vec::new();
    for node in &topology.nodes {
        match node.role {
            NodeRole::Nic { .. } => nics += 1,
            NodeRole::Switch { tier, .. } => {
                let tier = tier as usize;
                if switches_per_tier.len() <= tier {
                    switches_per_tier.resize(tier + 1, 0);
                }
                switches_per_tier[tier] += 1;
            }
        }
    }

    // Per node: its link ends, counted per link rate (a switch rarely has
    // more than two rates, so a short list beats a map).
    let mut ends: Vec<Vec<(Rate, u64)>> = vec![Vec::new(); topology.nodes.len()];
    let mut nic_ports = 0;
    for link in &topology.links {
        for end in [link.a, link.b] {
            if topology.is_nic(end) {
                nic_ports += 1;
            }
            let rates = &mut ends[end.0 as usize];
            match rates.iter_mut().find(|(rate, _)| *rate == link.rate) {
                Some((_, count)) => *count += 1,
                None => rates.push((link.rate, 1)),
            }
        }
    }
    let transceivers = topology
        .nodes
        .iter()
        .zip(&ends)
        .map(|(node, rates)| match node.module {
            ModuleSpec::NicCage(per_cage) => {
                let ports: u64 = rates.iter().map(|(_, count)| count).sum();
                ports.div_ceil(per_cage.max(1) as u64)
            }
            ModuleSpec::SwitchPort(native) => {
                rates.iter().map(|&(rate, count)| switch_modules(native, rate, count)).sum()
            }
        })
        .sum();

    TopologyReport {
        nics,
        nic_ports,
        switches_total: switches_per_tier.iter().sum(),
        switches_per_tier,
        links_total: topology.links.len() as u64,
        transceivers,
        bisection_bps: bisection(topology),
        path_space: path_space(topology),
    }
}

/// Modules a switch needs for `count` logical ports of `rate` when one
/// module carries one physical port of `native` rate.
fn switch_modules(native: Rate, rate: Rate, count: u64) -> u64 {
    if rate <= native {
        let lanes = native.0 / rate.0;
        count.div_ceil(lanes)
    } else {
        count * rate.0.div_ceil(native.0)
    }
}

/// The smallest total capacity across a boundary between layers, halved;
/// see `TopologyReport::bisection_bps`.
fn bisection(topology: &Topology) -> u64 {
    let layers: Vec<usize> = topology
        .nodes
        .iter()
        .map(|node| match node.role {
            NodeRole::Nic { .. } => 0,
            NodeRole::Switch { tier, .. } => tier as usize + 1,
        })
        .collect();
    let (Some(&lowest), Some(&highest)) = (layers.iter().min(), layers.iter().max()) else {
        return 0;
    };
    // Boundary i lies between layer i and layer i + 1; a link that skips a
    // layer crosses every boundary in between.
    let mut across = vec![0u128; highest];
    for link in &topology.links {
        let (a, b) = (layers[link.a.0 as usize], layers[link.b.0 as usize]);
        for capacity in &mut across[a.min(b)..a.max(b)] {
            *capacity += link.rate.0 as u128;
        }
    }
    let narrowest = across[lowest..].iter().min().copied().unwrap_or(0);
    u64::try_from(narrowest / 2).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakout_lanes_share_a_module() {
        let g = Rate::from_gbps;
        assert_eq!(switch_modules(g(800), g(100), 512), 64);
        assert_eq!(switch_modules(g(800), g(100), 9), 2);
        assert_eq!(switch_modules(g(400), g(400), 60), 60);
        assert_eq!(switch_modules(g(400), g(800), 3), 6);
    }
}
