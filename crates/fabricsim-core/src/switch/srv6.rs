//! Static SRv6 source routing with micro-SIDs (uN), as MRC deploys it
//! (mrc-srv6-multiplane.txt s2.2-s2.3; RFC 8986, RFC 9800; protocols.md s1).
//!
//! The outer IPv6 destination address is a 32-bit locator block followed by
//! up to six 16-bit uSIDs, one per switch on the path and a last one naming
//! the destination T0's downlink. A switch whose uSID is at the front shifts
//! the uSIDs left by 16 bits and looks the new front uSID up in a static
//! table written when the topology was built; failures never change it.
//!
//! uSIDs are allocated from the structure of the network so that the sender
//! can build every path algorithmically (s2.3, Fig 3): bits 15-13 the tier
//! (1-3 for T0-T2, 0 for a downlink), bits 12-10 the plane, bits 9-0 the
//! switch's index in its tier and plane (or the downlink's port number).
//! A path is the destination's template (its T0 and downlink) specialized
//! by the entropy value: the plane is the sending NIC port's (MRC keeps it
//! in the EV's low 3 bits), and the EV's higher bits pick the T0 uplink,
//! then the T1 uplink (3 tiers).
//! The sending NIC writes the path's uSIDs (the 96 bits after the locator
//! block) with the packet (`PacketPool::alloc_routed`); switches forward
//! from those alone (`PacketPool::usids_mut`).

use crate::error::{invalid, ScenarioError};
use crate::net::{Ev, PathSpace, PortId, USIDS};
use crate::topology::{NodeId, NodeRole, Topology};

/// The locator block every uSID follows (a /32 from the documentation
/// prefix 2001:db8::/32, RFC 3849).
pub const LOCATOR_BLOCK: u32 = 0x2001_0db8;

/// A path: its uSIDs in order, the last naming the destination downlink,
/// zero after `len` (the uSIDs a packet on it carries from the NIC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Path {
    pub usids: [u16; USIDS],
    pub len: u8,
}

impl Path {
    /// The outer destination address after `shifts` uN shifts.
    pub fn address(&self, shifts: usize) -> u128 {
        let mut addr = (LOCATOR_BLOCK as u128) << 96;
        for (k, &usid) in self.usids[shifts.min(self.len as usize)..self.len as usize].iter().enumerate() {
            addr |= (usid as u128) << (80 - 16 * k);
        }
        addr
    }
}

/// The outer destination address of a packet carrying `usids`.
pub fn address(usids: &[u16; USIDS]) -> u128 {
    usids.iter().enumerate().fold((LOCATOR_BLOCK as u128) << 96, |addr, (k, &u)| addr | (u as u128) << (80 - 16 * k))
}

pub struct Srv6 {
    /// uSID of each node (switches; NICs have none).
    usid: Vec<u16>,
    /// Static table of each switch: (uSID, egress port), sorted by uSID.
    table: Vec<Vec<(u16, PortId)>>,
    /// Uplink neighbours of each switch, by uplink index.
    up: Vec<Vec<NodeId>>,
    /// For a top-tier switch of a 3-tier Clos: its T1 neighbour in each pod.
    down_by_pod: Vec<Vec<Option<NodeId>>>,
    /// Tier and pod of each node.
    tier: Vec<u8>,
    pod: Vec<u32>,
    /// For each NIC port (by global port id): its T0 and the downlink uSID
    /// that reaches the NIC from there.
    attach: Vec<Option<(NodeId, u16)>>,
}

fn usid(tier: u8, plane: u16, index: u32) -> u16 {
    (tier as u16) << 13 | (plane << 10) | index as u16
}

impl Srv6 {
    /// Allocates uSIDs and writes the static tables of a Clos topology.
    pub fn build(
        topo: &Topology,
        node_ports: &[Vec<PortId>],
        port_node: impl Fn(PortId) -> NodeId,
    ) -> Result<Srv6, ScenarioError> {
        let n = topo.nodes.len();
        let mut usids = vec![0u16; n];
        let mut tier = vec![0u8; n];
        let mut pod = vec![0u32; n];
        for (i, node) in topo.nodes.iter().enumerate() {
            if let NodeRole::Switch { tier: t, plane, pod: p } = node.role {
                if t > 2 || plane > 7 || node.index > 1023 {
                    return invalid(
                        "switch.forwarding",
                        format!("srv6 names switches in 16 bits: up to 3 tiers, 8 planes, 1024 switches per tier and plane; {} does not fit", topo.name(NodeId(i as u32))),
                    );
                }
                usids[i] = usid(t + 1, plane, node.index);
                tier[i] = t + 1;
                pod[i] = p;
            }
        }
        let mut table = vec![Vec::new(); n];
        let mut up = vec![Vec::new(); n];
        let mut down_by_pod: Vec<Vec<Option<NodeId>>> = vec![Vec::new(); n];
        let mut attach = vec![None; node_ports.iter().map(Vec::len).sum::<usize>()];
        for node in 0..n {
            if tier[node] == 0 {
                continue;
            }
            let plane = match topo.nodes[node].role {
                NodeRole::Switch { plane, .. } => plane,
                NodeRole::Nic { .. } => 0,
            };
            for (k, &port) in node_ports[node].iter().enumerate() {
                let peer = port_node(port.peer());
                let entry = if tier[peer.0 as usize] == 0 {
                    // A downlink to a NIC: named by its port number.
                    if k > 1023 {
                        return invalid("switch.forwarding", "srv6 names at most 1024 downlinks per T0");
                    }
                    let down = usid(0, plane, k as u32);
                    attach[port.peer().0 as usize] = Some((NodeId(node as u32), down));
                    down
                } else {
                    if tier[peer.0 as usize] > tier[node] {
                        up[node].push(peer);
                    } else if tier[node] == 3 {
                        let p = pod[peer.0 as usize] as usize;
                        if down_by_pod[node].len() <= p {
                            down_by_pod[node].resize(p + 1, None);
                        }
                        down_by_pod[node][p] = Some(peer);
                    }
                    usids[peer.0 as usize]
                };
                // Parallel links: the first one carries the uSID's traffic.
                if !table[node].iter().any(|&(u, _)| u == entry) {
                    table[node].push((entry, port));
                }
            }
            table[node].sort_unstable_by_key(|&(u, _)| u);
        }
        Ok(Srv6 { usid: usids, table, up, down_by_pod, tier, pod, attach })
    }

    pub fn usid(&self, node: NodeId) -> u16 {
        self.usid[node.0 as usize]
    }

    /// uN at `switch` for a packet carrying `usids`: its own uSID must be
    /// at the front; it is shifted out and the next one looked up in the
    /// static table. `None` drops the packet.
    #[inline]
    pub fn forward(&self, switch: NodeId, usids: &mut [u16; USIDS]) -> Option<PortId> {
        if usids[0] != self.usid(switch) {
            return None;
        }
        usids.copy_within(1.., 0);
        usids[USIDS - 1] = 0;
        self.lookup(switch, usids[0])
    }

    /// The static route of `switch` for `usid`.
    pub fn lookup(&self, switch: NodeId, usid: u16) -> Option<PortId> {
        let table = &self.table[switch.0 as usize];
        table.binary_search_by_key(&usid, |&(u, _)| u).ok().map(|i| table[i].1)
    }

    /// The path from the NIC port `from` to the NIC port `to` picked by
    /// entropy value `ev` (both ports in the same plane).
    pub fn path(&self, from: PortId, to: PortId, ev: u16) -> Option<Path> {
        let (src_t0, _) = (*self.attach.get(from.0 as usize)?)?;
        let (dst_t0, down) = (*self.attach.get(to.0 as usize)?)?;
        let mut usids = [0u16; USIDS];
        let mut len = 0;
        let mut push = |u: u16| {
            usids[len] = u;
            len += 1;
        };
        push(self.usid(src_t0));
        let choice = Ev(ev).choice();
        if src_t0 != dst_t0 {
            let ups = &self.up[src_t0.0 as usize];
            let t1 = *ups.get(choice % ups.len().max(1))?;
            push(self.usid(t1));
            let same_pod = self.pod[t1.0 as usize] == self.pod[dst_t0.0 as usize] || self.up[t1.0 as usize].is_empty();
            if !same_pod {
                let ups1 = &self.up[t1.0 as usize];
                let t2 = *ups1.get((choice / ups.len().max(1)) % ups1.len().max(1))?;
                push(self.usid(t2));
                let t1_down = (*self.down_by_pod[t2.0 as usize].get(self.pod[dst_t0.0 as usize] as usize)?)?;
                push(self.usid(t1_down));
            }
            push(self.usid(dst_t0));
        }
        push(down);
        Some(Path { usids, len: len as u8 })
    }

    /// The paths between NIC ports `from` and `to` as `path` maps EV path
    /// choices onto them, or `None` if either port is not in the fabric.
    pub fn path_space(&self, from: PortId, to: PortId) -> Option<PathSpace> {
        let (src_t0, _) = (*self.attach.get(from.0 as usize)?)?;
        let (dst_t0, _) = (*self.attach.get(to.0 as usize)?)?;
        if src_t0 == dst_t0 {
            return Some(PathSpace { uplinks: 1, paths: 1 });
        }
        let ups = &self.up[src_t0.0 as usize];
        let uplinks = ups.len().max(1) as u32;
        // Every T1 of a Clos has as many uplinks; `path` goes up from the
        // T1 only when the destination is in another pod.
        let t1 = *ups.first()?;
        let same_pod = self.pod[t1.0 as usize] == self.pod[dst_t0.0 as usize] || self.up[t1.0 as usize].is_empty();
        let above = if same_pod { 1 } else { self.up[t1.0 as usize].len().max(1) as u32 };
        Some(PathSpace { uplinks, paths: uplinks * above })
    }

    /// Uplinks of the T0 that NIC port `from` attaches to.
    pub fn t0_uplinks(&self, from: PortId) -> usize {
        self.attach.get(from.0 as usize).copied().flatten().map_or(0, |(t0, _)| self.up[t0.0 as usize].len())
    }

    /// A Clustermapper probe's path from NIC port `from` back to itself: to
    /// its T0 and back, or with `uplink` through that T0 uplink's T1 and
    /// back (s3).
    pub fn loop_path(&self, from: PortId, uplink: Option<usize>) -> Option<Path> {
        let (t0, down) = (*self.attach.get(from.0 as usize)?)?;
        let mut usids = [0u16; USIDS];
        usids[0] = self.usid(t0);
        let len = match uplink {
            None => {
                usids[1] = down;
                2
            }
            Some(k) => {
                usids[1] = self.usid(*self.up[t0.0 as usize].get(k)?);
                usids[2] = self.usid(t0);
                usids[3] = down;
                4
            }
        };
        Some(Path { usids, len })
    }

    /// The links (by index: a port's id over 2) a packet sent from NIC port
    /// `from` on `path` crosses, walking the static tables; `peer_node`
    /// gives the node at the far end of a port.
    pub fn links(&self, from: PortId, path: &Path, peer_node: impl Fn(PortId) -> NodeId) -> Vec<usize> {
        let mut links = vec![from.link().0 as usize];
        let mut node = peer_node(from);
        for &usid in &path.usids[1..path.len as usize] {
            let Some(port) = self.lookup(node, usid) else { break };
            links.push(port.link().0 as usize);
            node = peer_node(port);
        }
        links
    }

    /// Whether `node` is a switch that takes part in SRv6 forwarding.
    pub fn is_switch(&self, node: NodeId) -> bool {
        self.tier[node.0 as usize] > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifting_moves_the_next_usid_to_the_front() {
        let p = Path { usids: [0x2001, 0x4005, 0x2003, 0x0007, 0, 0], len: 4 };
        assert_eq!(p.address(0), 0x2001_0db8_2001_4005_2003_0007_0000_0000);
        assert_eq!(p.address(1), 0x2001_0db8_4005_2003_0007_0000_0000_0000);
        assert_eq!(p.address(3), 0x2001_0db8_0007_0000_0000_0000_0000_0000);
        assert_eq!(p.address(4), 0x2001_0db8_0000_0000_0000_0000_0000_0000);
    }

    #[test]
    fn usids_encode_tier_plane_and_index() {
        assert_eq!(usid(1, 0, 5), 0x2005);
        assert_eq!(usid(2, 7, 1023), 0x4000 | 7 << 10 | 1023);
        assert_eq!(usid(0, 3, 12), 3 << 10 | 12);
    }
}
