//! The equal-cost paths a host would have to search to pick disjoint ones
//! (alibaba-hpn.txt s6.1, Table 1): from a NIC's first port to the NIC
//! farthest from it, every shortest path over the links, and at each hop
//! how many next hops a switch chooses among. HPN's dual plane leaves a
//! choice only at the ToR (60 uplinks); a 3-tier Clos multiplies the
//! choices of its ToR and aggregation switches.

use std::collections::VecDeque;

use schemars::JsonSchema;
use serde::Serialize;

use super::{LinkId, NodeId, Topology};

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct PathSpace {
    /// The pair measured: the first NIC (from its port 0) and the first of
    /// the NICs farthest from it.
    pub from: String,
    pub to: String,
    /// Switch hops from the first switch to the destination NIC.
    pub hops: u32,
    /// Shortest paths between them, parallel links counted apart.
    pub paths: u64,
    /// Per hop from the first switch on, the most next hops a switch on
    /// those paths chooses among.
    pub fanout: Vec<u64>,
}

/// Hop counts from `start` over links, entering NICs but never leaving
/// one other than `start` (NICs do not transit traffic).
fn distances(topo: &Topology, adjacency: &[Vec<LinkId>], start: NodeId) -> Vec<u32> {
    let mut dist = vec![u32::MAX; topo.nodes.len()];
    dist[start.0 as usize] = 0;
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        if n != start && topo.is_nic(n) {
            continue;
        }
        for &l in &adjacency[n.0 as usize] {
            let m = topo.peer(l, n);
            if dist[m.0 as usize] == u32::MAX {
                dist[m.0 as usize] = dist[n.0 as usize] + 1;
                queue.push_back(m);
            }
        }
    }
    dist
}

/// The path space between the first NIC and the farthest from it; None
/// without two connected NICs.
pub fn path_space(topo: &Topology) -> Option<PathSpace> {
    let adjacency = topo.adjacency();
    let src = topo.nics().into_iter().next()?;
    let first_link = *adjacency[src.0 as usize].first()?;
    let from_src = distances(topo, &adjacency, src);
    let dst = (topo.nics().into_iter())
        .filter(|&n| n != src && from_src[n.0 as usize] != u32::MAX)
        .max_by_key(|&n| (from_src[n.0 as usize], std::cmp::Reverse(n.0)))?;
    let to_dst = distances(topo, &adjacency, dst);
    let first = topo.peer(first_link, src);
    if to_dst[first.0 as usize] == u32::MAX {
        return None;
    }
    // Walk the shortest-path DAG hop by hop, counting the paths into each node.
    let hops = to_dst[first.0 as usize];
    let mut count = vec![0u64; topo.nodes.len()];
    count[first.0 as usize] = 1;
    let mut layer = vec![first];
    let mut fanout = Vec::with_capacity(hops as usize);
    for _ in 0..hops {
        let mut next = Vec::new();
        let mut widest = 0;
        for &n in &layer {
            let d = to_dst[n.0 as usize];
            let closer: Vec<NodeId> = (adjacency[n.0 as usize].iter())
                .map(|&l| topo.peer(l, n))
                .filter(|&m| to_dst[m.0 as usize] == d - 1 && (m == dst || !topo.is_nic(m)))
                .collect();
            widest = widest.max(closer.len() as u64);
            for m in closer {
                if count[m.0 as usize] == 0 {
                    next.push(m);
                }
                count[m.0 as usize] = count[m.0 as usize].saturating_add(count[n.0 as usize]);
            }
        }
        fanout.push(widest);
        layer = next;
    }
    Some(PathSpace { from: topo.name(src), to: topo.name(dst), hops, paths: count[dst.0 as usize], fanout })
}
