//! Shortest-path routing tables.
//!
//! For every destination NIC a breadth-first search over working links
//! gives each switch its distance to that NIC; a switch's next hops are the
//! ports toward neighbours one step closer. NICs never transit traffic.
//! Equal next-hop sets are stored once (a Clos has few distinct groups).
//! The tables are recomputed when the control plane reconverges after a
//! failure; packets are forwarded on the old tables until then.

use std::collections::{HashMap, VecDeque};

use crate::net::PortId;
use crate::topology::{NodeId, Topology};

const NO_ROUTE: u32 = u32::MAX;

/// Group indices per (switch, destination). 16 bits when the groups allow,
/// which keeps the table small enough to stay in cache: it is read for every
/// packet at every switch. The maximum value means "no route".
enum Table {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

/// Most route-table entries a packet-level run builds (2 or 4 bytes each). Beyond that a topology belongs to the calculator (and, later, the
/// flow-level model), not to per-packet simulation.
pub const MAX_TABLE_ENTRIES: u64 = 128 << 20;

pub struct Routes {
    nics: usize,
    nic_slot: Vec<u32>,
    switch_slot: Vec<u32>,
    /// `table[switch_slot * nics + nic_slot]` is a group index.
    table: Table,
    /// Group `g` is `hops[groups[g].0 ..][.. groups[g].1]`: one flat array,
    /// so a lookup touches two cache lines, not three.
    groups: Vec<(u32, u32)>,
    hops: Vec<PortId>,
}

impl Routes {
    /// Entries the table of `topo` needs: switches x NICs.
    pub fn table_entries(topo: &Topology) -> u64 {
        let nics = topo.nodes.iter().filter(|n| matches!(n.role, crate::topology::NodeRole::Nic { .. })).count() as u64;
        nics * (topo.nodes.len() as u64 - nics)
    }

    /// Computes routes over the links for which `usable(port)` holds for
    /// the port leaving a switch toward the destination, skipping switches
    /// for which `alive(node)` is false.
    pub fn compute(
        topo: &Topology,
        node_ports: &[Vec<PortId>],
        port_node: impl Fn(PortId) -> NodeId,
        usable: impl Fn(PortId) -> bool,
        alive: impl Fn(NodeId) -> bool,
    ) -> Routes {
        let n = topo.nodes.len();
        let mut nic_slot = vec![NO_ROUTE; n];
        let mut switch_slot = vec![NO_ROUTE; n];
        let (mut nics, mut switches) = (0u32, 0u32);
        for id in 0..n {
            if topo.is_nic(NodeId(id as u32)) {
                nic_slot[id] = nics;
                nics += 1;
            } else {
                switch_slot[id] = switches;
                switches += 1;
            }
        }
        let mut table = vec![NO_ROUTE; switches as usize * nics as usize];
        let mut groups: Vec<(u32, u32)> = Vec::new();
        let mut flat: Vec<PortId> = Vec::new();
        let mut group_index: HashMap<Vec<PortId>, u32> = HashMap::new();
        let mut dist = vec![u32::MAX; n];
        let mut frontier = VecDeque::new();
        let mut hops = Vec::new();
        for dst in (0..n).filter(|&i| nic_slot[i] != NO_ROUTE) {
            dist.fill(u32::MAX);
            dist[dst] = 0;
            frontier.push_back(dst);
            while let Some(node) = frontier.pop_front() {
                for &out in &node_ports[node] {
                    // Walk backwards: the neighbour forwards to `node` over
                    // the peer port, which must be usable.
                    let toward_node = out.peer();
                    let neighbour = port_node(toward_node).0 as usize;
                    if dist[neighbour] != u32::MAX
                        || switch_slot[neighbour] == NO_ROUTE
                        || !alive(NodeId(neighbour as u32))
                        || !usable(toward_node)
                    {
                        continue;
                    }
                    dist[neighbour] = dist[node] + 1;
                    frontier.push_back(neighbour);
                }
            }
            for sw in (0..n).filter(|&i| switch_slot[i] != NO_ROUTE && dist[i] != u32::MAX && dist[i] > 0) {
                hops.clear();
                for &out in &node_ports[sw] {
                    let next = port_node(out.peer()).0 as usize;
                    let closer = dist[next] != u32::MAX && dist[next] + 1 == dist[sw];
                    let transit_ok = next == dst || switch_slot[next] != NO_ROUTE;
                    if closer && transit_ok && usable(out) {
                        hops.push(out);
                    }
                }
                if hops.is_empty() {
                    continue;
                }
                let group = *group_index.entry(hops.clone()).or_insert_with(|| {
                    groups.push((flat.len() as u32, hops.len() as u32));
                    flat.extend_from_slice(&hops);
                    groups.len() as u32 - 1
                });
                table[switch_slot[sw] as usize * nics as usize + nic_slot[dst] as usize] = group;
            }
        }
        let table = if groups.len() < u16::MAX as usize {
            Table::Narrow(table.into_iter().map(|g| if g == NO_ROUTE { u16::MAX } else { g as u16 }).collect())
        } else {
            Table::Wide(table)
        };
        Routes { nics: nics as usize, nic_slot, switch_slot, table, groups, hops: flat }
    }

    /// Equal-cost next hops from `switch` toward NIC `dst` (empty: no route).
    pub fn next_hops(&self, switch: NodeId, dst: NodeId) -> &[PortId] {
        let s = self.switch_slot[switch.0 as usize] as usize;
        let d = self.nic_slot[dst.0 as usize] as usize;
        let group = match &self.table {
            Table::Narrow(t) => match t[s * self.nics + d] {
                u16::MAX => return &[],
                g => g as usize,
            },
            Table::Wide(t) => match t[s * self.nics + d] {
                NO_ROUTE => return &[],
                g => g as usize,
            },
        };
        let (start, len) = self.groups[group];
        &self.hops[start as usize..(start + len) as usize]
    }
}
