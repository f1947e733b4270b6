//! PRO's PathID forwarding (pro-deterministic-lb.txt s5). The sender's NIC
//! writes a PathID into the low 12 bits of the UDP source port: the low 6
//! bits name the egress among the next hops at the ToR (tier 0), the high 6
//! among those at the aggregation tier (tier 1); switches follow it, by ACL
//! entries, instead of hashing. The entries are installed for the routes of
//! the healthy fabric and stay; when a link fails, the control plane, once
//! BGP has converged, gives the entries of ports that left their ECMP group
//! adaptive routing as their action (s5, "Handling link failures"): from
//! then on those packets go to the least loaded port of the new group.
//! Until convergence they follow their PathID to the dead link and are lost.

use super::{AdaptiveRouting, Routes};
use crate::net::{Port, PortId};
use crate::topology::NodeId;
use crate::units::Time;

/// Bits of the PathID per tier.
pub const PATH_ID_BITS: u32 = 6;
/// Next hops a tier's field can name.
pub const PATH_ID_CHOICES: usize = 1 << PATH_ID_BITS;

/// The PathID field of a switch at `tier` (0 or 1) in UDP source port
/// `entropy`.
pub fn path_id_field(entropy: u16, tier: u8) -> usize {
    (entropy as usize >> (PATH_ID_BITS as usize * tier as usize)) & (PATH_ID_CHOICES - 1)
}

pub struct PathIdForwarding {
    /// The routes the ACL entries were installed for: the healthy fabric's.
    installed: Routes,
    /// Whether the routes have changed since: only then can an entry's port
    /// have left its group.
    rerouted: bool,
    /// The adaptive routing that entries of ports that left their group use.
    fallback: AdaptiveRouting,
}

impl PathIdForwarding {
    pub fn new(installed: Routes, fallback: AdaptiveRouting) -> PathIdForwarding {
        PathIdForwarding { installed, rerouted: false, fallback }
    }

    /// The routes converged on a changed fabric.
    pub fn routes_changed(&mut self) {
        self.rerouted = true;
    }

    /// The egress at `switch` (of `tier`) toward `dst` for a packet whose
    /// UDP source port is `entropy`, given the routes in force.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &mut self,
        switch: NodeId,
        tier: u8,
        dst: NodeId,
        entropy: u16,
        routes: &Routes,
        ports: &[Port],
        now: Time,
    ) -> Option<PortId> {
        let installed = self.installed.next_hops(switch, dst);
        let port = match installed {
            [] => return routes.next_hops(switch, dst).first().copied(),
            [only] => *only,
            hops => hops[path_id_field(entropy, tier.min(1)) % hops.len()],
        };
        if !self.rerouted {
            return Some(port);
        }
        let (current, weights) = routes.weighted_next_hops(switch, dst);
        if current.contains(&port) {
            Some(port)
        } else {
            self.fallback.route(current, weights, ports, now).map(|(hop, _)| hop)
        }
    }
}

/// Why a topology's groups do not fit PathIDs, if they do not: a choice
/// above tier 1, or more next hops at a tier than 6 bits name.
pub fn misfit(routes: &Routes, switches: impl Iterator<Item = (NodeId, u8)>, nics: &[NodeId]) -> Option<String> {
    for (switch, tier) in switches {
        for &dst in nics {
            let n = routes.next_hops(switch, dst).len();
            if n > 1 && tier > 1 {
                return Some(format!(
                    "a tier-{tier} switch has {n} next hops toward a NIC; PathIDs name choices at tiers 0 and 1 only"
                ));
            }
            if n > PATH_ID_CHOICES {
                return Some(format!(
                    "a tier-{tier} switch has {n} next hops toward a NIC; a PathID names one of at most \
                     {PATH_ID_CHOICES} per tier (6 bits)"
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_low_six_bits_are_the_tor_field_and_the_next_six_the_aggregation_field() {
        let entropy = 0xF000 | (5 << 6) | 3;
        assert_eq!(path_id_field(entropy, 0), 3);
        assert_eq!(path_id_field(entropy, 1), 5);
    }
}
