//! Shortest-path routing tables.
//!
//! For every destination NIC a breadth-first search over working links
//! gives each switch its distance to that NIC; a switch's next hops are the
//! ports toward neighbours one step closer. NICs never transit traffic.
//! Equal next-hop sets are stored once (a Clos has few distinct groups).
//! The tables are recomputed when the control plane reconverges after a
//! failure; packets are forwarded on the old tables until then. For
//! weighted adaptive routing the control plane also weighs each next hop by
//! the capacity left behind it toward the destination's leaf (spectrum-x.txt
//! s4.4.2): the max-flow from the next hop to the switches the destination
//! hangs off over the working shortest-path links, shared by parallel
//! links to the same neighbour and capped at the link's own rate.

use std::collections::{HashMap, VecDeque};

use crate::engine::FastMap;
use crate::net::PortId;
use crate::topology::{NodeId, Topology};

const NO_ROUTE: u32 = u32::MAX;

/// Group indices of the switches' whole rows. 16 bits when the groups
/// allow, which keeps the table small enough to stay in cache: it is read
/// for every packet at every switch. The maximum value means "no route".
#[derive(Clone)]
enum Table {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

impl Table {
    #[inline]
    fn entry(&self, at: usize) -> u32 {
        match self {
            Table::Narrow(t) => match t[at] {
                u16::MAX => NO_ROUTE,
                g if g == u16::MAX - 1 => DIRECT,
                g => g as u32,
            },
            Table::Wide(t) => t[at],
        }
    }
}

/// A switch's row of the table, stored as a FIB with a default route is:
/// the entry most of its columns share, and the columns routed otherwise
/// as the window of columns that holds them all, kept whole in `Table`
/// from `start`. Columns are numbered in the order of the NICs, so in a
/// Clos a leaf's window is the NICs under it, a spine's its pod's leaves
/// and a core switch's the whole row (one group per pod): a lookup reads
/// one entry at a known place. A row whose exceptions lie too far apart
/// for a window (after failures, or in a topology not numbered by
/// locality) keeps them as (column, entry) pairs sorted by column. At
/// 8,192 hosts the rows take 0.3 MB instead of 1.3 MB, and a lookup misses
/// the caches less.
#[derive(Clone, Copy)]
struct Row {
    default: u32,
    start: u32,
    /// The window's first column, or the pairs in `exceptions` from
    /// `start` when `width` is `PAIRS`.
    first: u32,
    width: u32,
    /// The switch's number, for its groups toward NICs attached to it.
    slot: u32,
}

/// A NIC's row: it routes nothing.
const NO_ROW: Row = Row { default: NO_ROUTE, start: 0, first: 0, width: 0, slot: NO_ROUTE };

const PAIRS: u32 = u32::MAX;

/// A window may take this many times the bytes of the row's exceptions as
/// pairs (or a cache line), for a lookup without a search.
const WINDOW_SLACK: usize = 4;

/// Most route-table entries a packet-level run builds (2 or 4 bytes each). Beyond that a topology belongs to the calculator (and, later, the
/// flow-level model), not to per-packet simulation.
pub const MAX_TABLE_ENTRIES: u64 = 128 << 20;

/// A table entry (as `u32`): the switch is attached to the destination NIC
/// itself; its group is in `Routes::direct`.
const DIRECT: u32 = u32::MAX - 1;

/// A NIC's first attachment (`slot` NO_ROUTE: none) and the range of
/// `Routes::direct` holding the rest.
#[derive(Clone, Copy)]
struct Attachment {
    slot: u32,
    group: u32,
    more: u32,
    more_end: u32,
}

const UNATTACHED: Attachment = Attachment { slot: NO_ROUTE, group: NO_ROUTE, more: 0, more_end: 0 };

#[derive(Clone)]
pub struct Routes {
    /// Each NIC's column, by node id: columns are classes of NICs that
    /// every switch not attached to them routes alike.
    column: Vec<u32>,
    /// Each switch's row, by node id (a NIC's is `NO_ROW`): a group index
    /// per column, or DIRECT. By node, not by the switch's number, so
    /// that a lookup's first two reads (the row, the destination's
    /// column) both start from the ids it is given and can be loaded
    /// ahead (`prefetch`).
    rows: Vec<Row>,
    table: Table,
    exceptions: Vec<(u32, u32)>,
    /// Per node id, where a NIC is attached: the switch of the lowest
    /// slot with its group in the record, any others in `direct`, as
    /// (switch slot, group). Inline, so that the last hop of a tree, a NIC
    /// attached once, reads one record.
    attached: Vec<Attachment>,
    direct: Vec<(u32, u32)>,
    /// Group `g`'s hops are `hops[start ..][.. len]` of `groups[g]`, one
    /// flat array; the first is in the group's record too, so that a
    /// lookup of a one-port group (every route down a tree) reads no more.
    groups: Vec<Group>,
    hops: Vec<PortId>,
    /// Parallel to `hops` when the routes are weighted (Mb/s), else empty.
    weights: Vec<u32>,
}

impl Routes {
    /// Entries the table of `topo` needs: switches x NICs.
    pub fn table_entries(topo: &Topology) -> u64 {
        let nics = topo.nodes.iter().filter(|n| matches!(n.role, crate::topology::NodeRole::Nic { .. })).count() as u64;
        nics * (topo.nodes.len() as u64 - nics)
    }

    /// Computes routes over the links for which `usable(port)` holds for
    /// the port leaving a switch toward the destination, skipping switches
    /// for which `alive(node)` is false; with `capacity` (a port's rate in
    /// Mb/s), weighs every next hop by the capacity behind it.
    pub fn compute(
        topo: &Topology,
        node_ports: &[Vec<PortId>],
        port_node: impl Fn(PortId) -> NodeId,
        usable: impl Fn(PortId) -> bool,
        alive: impl Fn(NodeId) -> bool,
        capacity: Option<&dyn Fn(PortId) -> u32>,
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
        let mut groups = Groups::default();
        let mut dist = vec![u32::MAX; n];
        let mut frontier = VecDeque::new();
        let mut hops = Vec::new();
        let mut weights = Vec::new();
        // Max-flow from each node to the current destination, by node.
        let mut behind: Vec<Option<u64>> = vec![None; n];
        // NICs attached to the same switches are routed alike by every other
        // switch (their distances are the same): one search serves them all,
        // unless the routes are weighted by capacities that may differ.
        let mut routed_like: FastMap<Vec<usize>, usize> = FastMap::default();
        let width = nics as usize;
        for dst in (0..n).filter(|&i| nic_slot[i] != NO_ROUTE) {
            let d = nic_slot[dst] as usize;
            let mut attached: Vec<usize> = (node_ports[dst].iter())
                .filter(|p| usable(p.peer()))
                .map(|p| port_node(p.peer()).0 as usize)
                .filter(|&sw| switch_slot[sw] != NO_ROUTE && alive(NodeId(sw as u32)))
                .collect();
            attached.sort_unstable();
            attached.dedup();
            if capacity.is_none() {
                if let Some(&like) = routed_like.get(&attached) {
                    for s in 0..switches as usize {
                        table[s * width + d] = table[s * width + like];
                    }
                    for &sw in &attached {
                        hops.clear();
                        let toward = |out: &&PortId| port_node(out.peer()).0 as usize == dst && usable(**out);
                        hops.extend(node_ports[sw].iter().filter(toward));
                        table[switch_slot[sw] as usize * width + d] = groups.intern(&hops, &[]);
                    }
                    continue;
                }
                routed_like.insert(attached, d);
            }
            dist.fill(u32::MAX);
            behind.fill(None);
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
                weights.clear();
                if let Some(capacity) = capacity {
                    let dag = Dag { node_ports, port_node: &port_node, usable: &usable, dist: &dist };
                    for &out in &hops {
                        let next = port_node(out.peer()).0 as usize;
                        let rate = capacity(out) as u64;
                        let weight = if next == dst {
                            rate
                        } else {
                            let parallel = hops.iter().filter(|&&h| port_node(h.peer()).0 as usize == next).count();
                            let flow = *behind[next].get_or_insert_with(|| dag.max_flow(next, capacity));
                            rate.min(flow / parallel as u64)
                        };
                        weights.push(weight.min(u32::MAX as u64) as u32);
                    }
                }
                table[switch_slot[sw] as usize * width + d] = groups.intern(&hops, &weights);
            }
        }
        // A switch attached to a NIC has a group of its own toward it (the
        // port to it); kept aside, the NICs that every other switch routes
        // alike (in a Clos, those under the same leaves) share one column:
        // the table shrinks by the NICs per leaf, and so do the cache misses
        // of reading it for every packet at every switch.
        let mut attached = vec![UNATTACHED; n];
        let mut direct = Vec::new();
        for nic in (0..n).filter(|&i| nic_slot[i] != NO_ROUTE) {
            let d = nic_slot[nic] as usize;
            let start = direct.len();
            for &port in &node_ports[nic] {
                let sw = port_node(port.peer()).0 as usize;
                if switch_slot[sw] == NO_ROUTE {
                    continue;
                }
                let entry = &mut table[switch_slot[sw] as usize * nics as usize + d];
                // A switch with several links to the NIC is listed once.
                if *entry != DIRECT {
                    direct.push((switch_slot[sw], *entry));
                    *entry = DIRECT;
                }
            }
            // By switch: a NIC of many planes has as many switches.
            direct[start..].sort_unstable_by_key(|&(s, _)| s);
            if direct.len() > start {
                let (slot, group) = direct.remove(start);
                attached[nic] = Attachment { slot, group, more: start as u32, more_end: direct.len() as u32 };
            }
        }
        let (columns, nic_column) = route_classes(&table, nics as usize, switches as usize);
        let Groups { groups, flat, weights: flat_weights, .. } = groups;
        let narrow = groups.len() < (u16::MAX - 1) as usize;
        let mut rows = vec![NO_ROW; n];
        let mut whole = Vec::new();
        let mut exceptions = Vec::new();
        let mut row = Vec::with_capacity(columns.len());
        for (node, &s) in switch_slot.iter().enumerate().filter(|&(_, &s)| s != NO_ROUTE) {
            let s = s as usize;
            row.clear();
            row.extend(columns.iter().map(|&d| table[s * nics as usize + d]));
            let default = most_common(&row);
            let differ = row.iter().filter(|&&g| g != default).count();
            let first = row.iter().position(|&g| g != default).unwrap_or(0);
            let end = row.iter().rposition(|&g| g != default).map_or(first, |last| last + 1);
            let entry_bytes = if narrow { 2 } else { 4 };
            let (window_bytes, pairs_bytes) = ((end - first) * entry_bytes, differ * 8);
            // Pairs only where the window would take more than its slack
            // and the pairs at most half the whole row.
            if window_bytes > (WINDOW_SLACK * pairs_bytes).max(64) && pairs_bytes * 2 <= row.len() * entry_bytes {
                let start = exceptions.len() as u32;
                let routed_otherwise = row.iter().enumerate().filter(|&(_, &g)| g != default);
                exceptions.extend(routed_otherwise.map(|(c, &g)| (c as u32, g)));
                rows[node] = Row { default, start, first: differ as u32, width: PAIRS, slot: s as u32 };
            } else {
                let (start, width) = (whole.len() as u32, (end - first) as u32);
                rows[node] = Row { default, start, first: first as u32, width, slot: s as u32 };
                whole.extend_from_slice(&row[first..end]);
            }
        }
        let table = if narrow {
            let narrow = |g: u32| match g {
                NO_ROUTE => u16::MAX,
                DIRECT => u16::MAX - 1,
                g => g as u16,
            };
            Table::Narrow(whole.into_iter().map(narrow).collect())
        } else {
            Table::Wide(whole)
        };
        let column = nic_slot.iter().map(|&d| if d == NO_ROUTE { NO_ROUTE } else { nic_column[d as usize] }).collect();
        Routes { column, rows, table, exceptions, attached, direct, groups, hops: flat, weights: flat_weights }
    }

    /// The most next hops any switch has toward any NIC.
    pub fn widest_group(&self) -> usize {
        self.groups.iter().map(|g| g.len as usize).max().unwrap_or(0)
    }

    /// Groups of next hops (their ids run below this).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// The group of next hops from `switch` toward NIC `dst`, if any: its
    /// id and its record.
    #[inline]
    fn group(&self, switch: NodeId, dst: NodeId) -> Option<(usize, &Group)> {
        let row = self.rows[switch.0 as usize];
        let column = self.column[dst.0 as usize];
        if column == NO_ROUTE {
            return None;
        }
        let entry = if row.width != PAIRS {
            let at = column.wrapping_sub(row.first);
            if at < row.width {
                self.table.entry((row.start + at) as usize)
            } else {
                row.default
            }
        } else {
            let pairs = &self.exceptions[row.start as usize..][..row.first as usize];
            pairs.binary_search_by_key(&column, |&(c, _)| c).map_or(row.default, |i| pairs[i].1)
        };
        let group = match entry {
            NO_ROUTE => return None,
            DIRECT => self.direct_group(row.slot, dst)?,
            g => g as usize,
        };
        Some((group, &self.groups[group]))
    }

    /// The hops of `group`: a one-port group's from its record.
    #[inline]
    fn hops_of<'a>(&'a self, group: &'a Group) -> &'a [PortId] {
        if group.len == 1 {
            std::slice::from_ref(&group.first)
        } else {
            &self.hops[group.start as usize..][..group.len as usize]
        }
    }

    /// The group of switch slot `s` toward NIC `dst`, attached to it.
    fn direct_group(&self, s: u32, dst: NodeId) -> Option<usize> {
        let at = &self.attached[dst.0 as usize];
        let group = if at.slot == s {
            at.group
        } else {
            let more = &self.direct[at.more as usize..at.more_end as usize];
            more[more.binary_search_by_key(&s, |&(sw, _)| sw).ok()?].1
        };
        (group != NO_ROUTE).then_some(group as usize)
    }

    /// Starts loading the first reads of a lookup from `switch` toward
    /// `dst` (a hint).
    #[inline]
    pub fn prefetch(&self, switch: NodeId, dst: NodeId) {
        if let (Some(row), Some(column)) = (self.rows.get(switch.0 as usize), self.column.get(dst.0 as usize)) {
            crate::engine::prefetch(row);
            crate::engine::prefetch(column);
        }
    }

    /// Equal-cost next hops from `switch` toward NIC `dst` (empty: no route).
    #[inline]
    pub fn next_hops(&self, switch: NodeId, dst: NodeId) -> &[PortId] {
        self.group(switch, dst).map_or(&[], |(_, group)| self.hops_of(group))
    }

    /// `next_hops` with the id of their group (`group_count` ids): what a
    /// switch keeps state per group of next hops by.
    #[inline]
    pub fn next_hop_group(&self, switch: NodeId, dst: NodeId) -> (usize, &[PortId]) {
        self.group(switch, dst).map_or((0, &[]), |(g, group)| (g, self.hops_of(group)))
    }

    /// `next_hops` with their weights (Mb/s behind each), or with an empty
    /// slice when the routes are unweighted.
    #[inline]
    pub fn weighted_next_hops(&self, switch: NodeId, dst: NodeId) -> (&[PortId], &[u32]) {
        match self.group(switch, dst) {
            None => (&[], &[]),
            Some((_, group)) if self.weights.is_empty() => (self.hops_of(group), &[]),
            Some((_, group)) => (self.hops_of(group), &self.weights[group.start as usize..][..group.len as usize]),
        }
    }
}

/// A group of next hops: `len` of `Routes::hops` from `start`, the first
/// of them also here.
#[derive(Clone, Copy)]
struct Group {
    first: PortId,
    start: u32,
    len: u32,
}

/// Groups of next hops (with their weights), each stored once.
#[derive(Default)]
struct Groups {
    index: FastMap<(Vec<PortId>, Vec<u32>), u32>,
    groups: Vec<Group>,
    flat: Vec<PortId>,
    weights: Vec<u32>,
}

impl Groups {
    /// The index of the group of `hops` with `weights`.
    fn intern(&mut self, hops: &[PortId], weights: &[u32]) -> u32 {
        if let Some(&g) = self.index.get(&(hops.to_vec(), weights.to_vec())) {
            return g;
        }
        // An empty group (a NIC's one link unusable) is no route; its
        // `first` is never read.
        let first = hops.first().copied().unwrap_or(PortId(0));
        self.groups.push(Group { first, start: self.flat.len() as u32, len: hops.len() as u32 });
        self.flat.extend_from_slice(hops);
        self.weights.extend_from_slice(weights);
        let g = self.groups.len() as u32 - 1;
        self.index.insert((hops.to_vec(), weights.to_vec()), g);
        g
    }
}

/// The entry that occurs most often in `row` (the smallest of those tied).
fn most_common(row: &[u32]) -> u32 {
    let mut counts: FastMap<u32, usize> = FastMap::default();
    for &g in row {
        *counts.entry(g).or_default() += 1;
    }
    counts.into_iter().max_by_key(|&(g, n)| (n, std::cmp::Reverse(g))).map_or(NO_ROUTE, |(g, _)| g)
}

/// The distinct columns of a `switches` x `nics` table: one NIC's slot for
/// each, and each NIC's column index.
fn route_classes(table: &[u32], nics: usize, switches: usize) -> (Vec<usize>, Vec<u32>) {
    let mut seen: FastMap<Vec<u32>, u32> = FastMap::default();
    let mut columns = Vec::new();
    let class = (0..nics)
        .map(|d| {
            let column: Vec<u32> = (0..switches).map(|s| table[s * nics + d]).collect();
            *seen.entry(column).or_insert_with(|| {
                columns.push(d);
                columns.len() as u32 - 1
            })
        })
        .collect();
    (columns, class)
}

/// The shortest-path DAG toward one destination: from a node, the usable
/// ports toward a neighbour one step closer.
struct Dag<'a, F: Fn(PortId) -> NodeId, U: Fn(PortId) -> bool> {
    node_ports: &'a [Vec<PortId>],
    port_node: &'a F,
    usable: &'a U,
    dist: &'a [u32],
}

impl<F: Fn(PortId) -> NodeId, U: Fn(PortId) -> bool> Dag<'_, F, U> {
    fn closer(&self, node: usize) -> impl Iterator<Item = (PortId, usize)> + '_ {
        self.node_ports[node].iter().filter_map(move |&out| {
            let next = (self.port_node)(out.peer()).0 as usize;
            let closer = self.dist[next] != u32::MAX && self.dist[next] + 1 == self.dist[node];
            (closer && (self.usable)(out)).then_some((out, next))
        })
    }

    /// Max-flow from `source` to the destination's leaves (the switches
    /// attached to it) over the DAG's links: what the control plane
    /// advertises for the destination's prefix (BGP's link bandwidth,
    /// spectrum-x.txt s4.4.2), which the NIC's own link would otherwise
    /// hide. Edmonds-Karp on the part of the DAG below `source`; unbounded
    /// from a leaf itself.
    fn max_flow(&self, source: usize, capacity: &dyn Fn(PortId) -> u32) -> u64 {
        let leaf = |node: usize| self.dist[node] == 1;
        if leaf(source) {
            return u64::MAX;
        }
        // Index the nodes below `source`, the leaves last reached.
        let mut index: HashMap<usize, usize> = HashMap::from([(source, 0)]);
        let mut order = vec![source];
        let mut k = 0;
        while k < order.len() {
            let node = order[k];
            k += 1;
            if leaf(node) {
                continue;
            }
            for (_, next) in self.closer(node) {
                if let std::collections::hash_map::Entry::Vacant(e) = index.entry(next) {
                    e.insert(order.len());
                    order.push(next);
                }
            }
        }
        // Residual graph: edge 2i forward, 2i+1 its reverse; every leaf
        // drains into one sink past the last node.
        let sink = order.len();
        let mut residual: Vec<u64> = Vec::new();
        let mut head: Vec<usize> = Vec::new();
        let mut adjacent: Vec<Vec<usize>> = vec![Vec::new(); order.len() + 1];
        let mut link = |from: usize, to: usize, cap: u64| {
            adjacent[from].push(residual.len());
            residual.push(cap);
            head.push(to);
            adjacent[to].push(residual.len());
            residual.push(0);
            head.push(from);
        };
        for (from, &node) in order.iter().enumerate() {
            if leaf(node) {
                link(from, sink, u64::MAX / 2);
                continue;
            }
            for (out, next) in self.closer(node) {
                link(from, index[&next], capacity(out) as u64);
            }
        }
        let mut flow = 0;
        let mut via = vec![usize::MAX; order.len() + 1];
        loop {
            via.fill(usize::MAX);
            let mut queue = VecDeque::from([0usize]);
            while let Some(u) = queue.pop_front() {
                for &e in &adjacent[u] {
                    let v = head[e];
                    if residual[e] > 0 && v != 0 && via[v] == usize::MAX {
                        via[v] = e;
                        queue.push_back(v);
                    }
                }
            }
            if via[sink] == usize::MAX {
                return flow;
            }
            let mut bottleneck = u64::MAX;
            let mut v = sink;
            while v != 0 {
                bottleneck = bottleneck.min(residual[via[v]]);
                v = head[via[v] ^ 1];
            }
            let mut v = sink;
            while v != 0 {
                residual[via[v]] -= bottleneck;
                residual[via[v] ^ 1] += bottleneck;
                v = head[via[v] ^ 1];
            }
            flow += bottleneck;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_by_node_route_switches_only_and_only_toward_nics() {
        let scenario = r#"{"topology": {"kind": "clos", "tiers": 3, "radix": 4, "link_rate": "100Gbps"}}"#;
        let topo = crate::Scenario::from_json(scenario).expect("valid").topology.build().expect("builds");
        let node_ports = topo.node_ports();
        let routes = Routes::compute(&topo, &node_ports, |p| topo.port_node(p), |_| true, |_| true, None);
        let nodes = (0..topo.nodes.len() as u32).map(NodeId);
        let (nics, switches): (Vec<NodeId>, Vec<NodeId>) = nodes.partition(|&n| topo.is_nic(n));
        for &at in &switches {
            for &dst in &nics {
                let hops = routes.next_hops(at, dst);
                assert!(!hops.is_empty(), "a route from {at:?} to {dst:?}");
                assert!(hops.iter().all(|&p| topo.port_node(p) == at), "{at:?}'s own ports");
            }
            // A switch is no destination.
            assert!(routes.next_hops(at, switches[0]).is_empty());
        }
        // A NIC's row routes nothing: NICs never transit.
        assert!(routes.next_hops(nics[0], nics[1]).is_empty());
    }

    /// The next hops of every switch toward every NIC, computed directly:
    /// the usable ports toward a neighbour one step closer over switches.
    fn shortest_next_hops(
        topo: &Topology,
        node_ports: &[Vec<PortId>],
        usable: &dyn Fn(PortId) -> bool,
        alive: &dyn Fn(NodeId) -> bool,
        dst: NodeId,
    ) -> Vec<Vec<PortId>> {
        let n = topo.nodes.len();
        let is_switch = |i: usize| !topo.is_nic(NodeId(i as u32)) && alive(NodeId(i as u32));
        let mut dist = vec![u32::MAX; n];
        dist[dst.0 as usize] = 0;
        let mut frontier = VecDeque::from([dst.0 as usize]);
        while let Some(node) = frontier.pop_front() {
            for &out in &node_ports[node] {
                let neighbour = topo.port_node(out.peer()).0 as usize;
                if dist[neighbour] == u32::MAX && is_switch(neighbour) && usable(out.peer()) {
                    dist[neighbour] = dist[node] + 1;
                    frontier.push_back(neighbour);
                }
            }
        }
        (0..n)
            .map(|sw| {
                if !is_switch(sw) || dist[sw] == u32::MAX {
                    return Vec::new();
                }
                let closer = |out: &&PortId| {
                    let next = topo.port_node(out.peer()).0 as usize;
                    let transit = next == dst.0 as usize || is_switch(next);
                    dist[next] != u32::MAX && dist[next] + 1 == dist[sw] && transit && usable(**out)
                };
                node_ports[sw].iter().filter(closer).copied().collect()
            })
            .collect()
    }

    #[test]
    fn every_lookup_gives_the_shortest_paths_next_hops_however_the_rows_are_stored() {
        // Whole rows, windows, pairs and attached NICs all occur: a
        // three-tier Clos intact, with links and a switch failed (a few
        // failures in a larger one scatter a spine's exceptions over the
        // pods, which a window would span), two planes, dual-ToR, parallel
        // links.
        let clos =
            |extra: &str| format!(r#"{{"topology": {{"kind": "clos", "radix": 4, "link_rate": "100Gbps"{extra}}}}}"#);
        let cases = [
            (clos(r#", "tiers": 3"#), 0, None),
            (clos(r#", "tiers": 3"#), 5, None),
            (clos(r#", "tiers": 3"#), 3, Some(22)),
            (clos(r#", "tiers": 3, "radix": 16"#), 997, None),
            (clos(r#", "tiers": 2, "planes": 2"#), 7, None),
            (clos(r#", "tiers": 2, "nic_ports": 2"#), 4, None),
            (clos(r#", "tiers": 2, "radix": 8, "parallel_links": 2"#), 6, None),
        ];
        let (mut pairs, mut windows, mut whole, mut attached) = (0, 0, 0, 0);
        for (scenario, fail_every, dead) in cases {
            let topo = crate::Scenario::from_json(&scenario).expect("valid").topology.build().expect("builds");
            let node_ports = topo.node_ports();
            // Every `fail_every`-th link down, both ways.
            let usable = |p: PortId| fail_every == 0 || p.link().0 % fail_every != 1;
            let alive = |node: NodeId| Some(node.0 as usize) != dead.filter(|&d| !topo.is_nic(NodeId(d as u32)));
            let routes = Routes::compute(&topo, &node_ports, |p| topo.port_node(p), usable, alive, None);
            let columns = routes.column.iter().filter(|&&c| c != NO_ROUTE).max().map_or(0, |&c| c + 1);
            for row in routes.rows.iter().filter(|r| r.slot != NO_ROUTE) {
                match row.width {
                    PAIRS => pairs += 1,
                    w if w == columns => whole += 1,
                    w if w > 0 => windows += 1,
                    _ => {}
                }
            }
            attached += routes.direct.len() + routes.attached.iter().filter(|a| a.slot != NO_ROUTE).count();
            let nics = (0..topo.nodes.len() as u32).map(NodeId).filter(|&n| topo.is_nic(n));
            for dst in nics {
                let expected = shortest_next_hops(&topo, &node_ports, &usable, &alive, dst);
                for (sw, hops) in expected.iter().enumerate() {
                    let at = NodeId(sw as u32);
                    assert_eq!(routes.next_hops(at, dst), &hops[..], "{scenario}: from {at:?} to {dst:?}");
                }
            }
        }
        assert!(pairs > 0 && windows > 0 && whole > 0 && attached > 0, "{pairs} {windows} {whole} {attached}");
    }
}
