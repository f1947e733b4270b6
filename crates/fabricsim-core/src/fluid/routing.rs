//! Shortest-path next hops for the flow-level model, at any scale.
//!
//! The packet model's table (`switch::Routes`) holds a group per switch and
//! class of NICs, built for every class up front; at 100,000 GPUs that is
//! too big. Here a breadth-first search from a destination's switches gives
//! every switch its distance, computed when a destination is first asked
//! for and kept per class of NICs attached to the same switches (in a Clos,
//! the NICs of one rack): a 131,072-GPU fabric has a few hundred classes.
//! Next hops are read from the distances in the same order as the packet
//! model's (the switch's ports in order), so that ECMP's hash picks the
//! same port in both models.

use crate::engine::FastMap;
use crate::net::PortId;
use crate::topology::{NodeId, Topology};

/// Which links and switches the routes are computed over: the control
/// plane's view of the fabric, which lags the fabric itself.
#[derive(Clone)]
pub struct View {
    /// Per port (the egress direction of a link end): up in this view.
    pub port_up: Vec<bool>,
    /// Per node: a switch advertised by its control plane (NICs: true).
    pub node_up: Vec<bool>,
}

impl View {
    pub fn all_up(ports: usize, nodes: usize) -> View {
        View { port_up: vec![true; ports], node_up: vec![true; nodes] }
    }

    /// A link is used in either direction only while both are up.
    pub fn usable(&self, port: PortId) -> bool {
        self.port_up[port.0 as usize] && self.port_up[port.peer().0 as usize]
    }
}

const UNREACHABLE: u16 = u16::MAX;

/// A switch's next hops toward a class of NICs (`Routing::groups`).
#[derive(Clone, Copy, Debug)]
enum Hops {
    One(PortId),
    /// These hops: an index into `Routing::hop_lists`.
    Shared(u32),
    /// The switch's usable ports to switches but these (an index into
    /// `Routing::hop_lists`): a ToR's uplinks but the few whose spine has
    /// lost its link toward the class. With failures spread over a big
    /// fabric nearly every (ToR, class) has its own next hops; kept whole
    /// they took gigabytes.
    AllBut(u32),
}

pub struct Routing {
    node_ports: Vec<Vec<PortId>>,
    /// Each node's ports to switches, in order: what a search walks (a
    /// ToR of a big fabric has hundreds of NICs below it).
    switch_ports: Vec<Vec<PortId>>,
    /// The node at the far end of each port.
    peer_node: Vec<NodeId>,
    is_nic: Vec<bool>,
    /// Per switch (by node), its index among switches.
    switch_slot: Vec<u32>,
    switches: usize,
    searched: Searches,
}

/// What the searches over one view found, kept until the view changes.
#[derive(Default)]
struct Searches {
    /// Distances (in hops, the destination's switches being 1) per class,
    /// by switch slot; classes by the sorted switches their NICs attach to.
    classes: FastMap<Vec<u32>, u32>,
    dist: Vec<Vec<u16>>,
    /// Classes of NICs asked for, by node: cleared with the view.
    class_of: FastMap<u32, u32>,
    /// Next hops of (switch, class) toward the class's switches, once
    /// read from the distances (the hops into a NIC itself are not kept:
    /// they differ by NIC): one port, a list, or the ports it leaves out.
    /// A ToR's hops toward every class beyond it are its uplinks: one
    /// empty list of ports left out, for hundreds of classes.
    groups: FastMap<(u32, u32), Hops>,
    hop_lists: Vec<Vec<PortId>>,
    hop_list_of: FastMap<Vec<PortId>, u32>,
    frontier: Vec<u32>,
}

impl Routing {
    pub fn new(topo: &Topology, node_ports: Vec<Vec<PortId>>) -> Routing {
        let n = topo.nodes.len();
        let mut peer_node = vec![NodeId(0); topo.links.len() * 2];
        for (l, link) in topo.links.iter().enumerate() {
            peer_node[2 * l] = link.b;
            peer_node[2 * l + 1] = link.a;
        }
        let is_nic: Vec<bool> = (0..n).map(|i| topo.is_nic(NodeId(i as u32))).collect();
        let mut switch_slot = vec![u32::MAX; n];
        let mut switches = 0;
        for i in (0..n).filter(|&i| !is_nic[i]) {
            switch_slot[i] = switches as u32;
            switches += 1;
        }
        let switch_ports = (node_ports.iter())
            .map(|ports| ports.iter().copied().filter(|p| !is_nic[peer_node[p.0 as usize].0 as usize]).collect())
            .collect();
        Routing { switch_ports, node_ports, peer_node, is_nic, switch_slot, switches, searched: Searches::default() }
    }

    /// Switches are numbered 0.. apart from NICs: `switch`'s number.
    pub fn switch_slot(&self, switch: NodeId) -> usize {
        self.switch_slot[switch.0 as usize] as usize
    }

    pub fn switch_count(&self) -> usize {
        self.switches
    }

    pub fn node_ports(&self, node: NodeId) -> &[PortId] {
        &self.node_ports[node.0 as usize]
    }

    pub fn peer(&self, port: PortId) -> NodeId {
        self.peer_node[port.0 as usize]
    }

    pub fn is_nic(&self, node: NodeId) -> bool {
        self.is_nic[node.0 as usize]
    }

    /// Forgets every search: the view changed.
    pub fn clear(&mut self) {
        self.searched = Searches::default();
    }

    /// The same fabric with no search made yet: routes over another view.
    /// The searches are not copied (a big fabric's run to gigabytes).
    pub fn unsearched(&self) -> Routing {
        Routing {
            switch_ports: self.switch_ports.clone(),
            node_ports: self.node_ports.clone(),
            peer_node: self.peer_node.clone(),
            is_nic: self.is_nic.clone(),
            switch_slot: self.switch_slot.clone(),
            switches: self.switches,
            searched: Searches::default(),
        }
    }

    /// Forgets NIC `nic`'s class: the view of its links changed, and the
    /// switches it is attached to with them.
    pub fn forget(&mut self, nic: NodeId) {
        self.searched.class_of.remove(&nic.0);
    }

    /// The class of NIC `dst` in `view` (NICs on the same switches share
    /// one): its distances, searched once.
    pub fn class(&mut self, dst: NodeId, view: &View) -> u32 {
        if let Some(&c) = self.searched.class_of.get(&dst.0) {
            return c;
        }
        let mut attached: Vec<u32> = (self.node_ports[dst.0 as usize].iter())
            .filter(|p| view.usable(**p))
            .map(|p| self.peer_node[p.0 as usize])
            .filter(|sw| !self.is_nic[sw.0 as usize] && view.node_up[sw.0 as usize])
            .map(|sw| sw.0)
            .collect();
        attached.sort_unstable();
        attached.dedup();
        let c = match self.searched.classes.get(&attached) {
            Some(&c) => c,
            None => {
                let c = self.searched.dist.len() as u32;
                let dist = self.search(&attached, view);
                self.searched.dist.push(dist);
                self.searched.classes.insert(attached, c);
                c
            }
        };
        self.searched.class_of.insert(dst.0, c);
        c
    }

    /// Breadth-first from `attached` (at distance 1) backwards over usable
    /// links between switches that are up: NICs never transit.
    fn search(&mut self, attached: &[u32], view: &View) -> Vec<u16> {
        let mut dist = vec![UNREACHABLE; self.switches];
        self.searched.frontier.clear();
        for &sw in attached {
            dist[self.switch_slot[sw as usize] as usize] = 1;
            self.searched.frontier.push(sw);
        }
        let mut next = Vec::new();
        let mut d = 1u16;
        while !self.searched.frontier.is_empty() {
            d = d.saturating_add(1);
            for &node in &self.searched.frontier {
                for &out in &self.switch_ports[node as usize] {
                    let neighbour = self.peer_node[out.0 as usize];
                    let slot = self.switch_slot[neighbour.0 as usize];
                    if slot == u32::MAX || dist[slot as usize] != UNREACHABLE || !view.node_up[neighbour.0 as usize] {
                        continue;
                    }
                    // The neighbour forwards to `node` over the peer port.
                    if !view.usable(out.peer()) {
                        continue;
                    }
                    dist[slot as usize] = d;
                    next.push(neighbour.0);
                }
            }
            std::mem::swap(&mut self.searched.frontier, &mut next);
            next.clear();
        }
        dist
    }

    /// The distance from `switch` to NIC `dst` (its own switches are 1),
    /// or `None` if it cannot reach it.
    pub fn distance(&mut self, switch: NodeId, dst: NodeId, view: &View) -> Option<u16> {
        let c = self.class(dst, view) as usize;
        let d = self.searched.dist[c][self.switch_slot[switch.0 as usize] as usize];
        (d != UNREACHABLE).then_some(d)
    }

    /// The next hops of `switch` toward NIC `dst` in `view`, in the order
    /// of its ports (the packet model's order), into `hops`.
    pub fn next_hops(&mut self, switch: NodeId, dst: NodeId, view: &View, hops: &mut Vec<PortId>) {
        hops.clear();
        let Some(d) = self.distance(switch, dst, view) else { return };
        if d == 1 {
            // The switch's ports into the NIC, found from the shorter of
            // the two lists of ports: a NIC has few, unless it has many
            // planes, and a switch many.
            let (nic_ports, ports) = (&self.node_ports[dst.0 as usize], &self.node_ports[switch.0 as usize]);
            if nic_ports.len() <= ports.len() {
                let from_switch = |p: &&PortId| self.peer_node[p.0 as usize] == switch && view.usable(p.peer());
                hops.extend(nic_ports.iter().filter(from_switch).map(|p| p.peer()));
                hops.sort_unstable_by_key(|p| p.0);
            } else {
                hops.extend(ports.iter().copied().filter(|&p| self.peer_node[p.0 as usize] == dst && view.usable(p)));
            }
            return;
        }
        let c = self.searched.class_of[&dst.0];
        if let Some(&group) = self.searched.groups.get(&(switch.0, c)) {
            match group {
                Hops::One(port) => hops.push(port),
                Hops::Shared(list) => hops.extend_from_slice(&self.searched.hop_lists[list as usize]),
                Hops::AllBut(list) => {
                    let mut left_out = self.searched.hop_lists[list as usize].iter().peekable();
                    for &out in self.switch_ports[switch.0 as usize].iter().filter(|&&p| view.usable(p)) {
                        if left_out.next_if_eq(&&out).is_none() {
                            hops.push(out);
                        }
                    }
                }
            }
            return;
        }
        let dist = &self.searched.dist[c as usize];
        let mut left_out = Vec::new();
        for &out in self.switch_ports[switch.0 as usize].iter().filter(|&&p| view.usable(p)) {
            let slot = self.switch_slot[self.peer_node[out.0 as usize].0 as usize];
            if slot != u32::MAX && dist[slot as usize] == d - 1 {
                hops.push(out);
            } else {
                left_out.push(out);
            }
        }
        // A spine's one port down toward each class is its own: kept in place.
        let group = match hops[..] {
            [port] => Hops::One(port),
            _ if left_out.len() < hops.len() => Hops::AllBut(self.intern(left_out)),
            _ => Hops::Shared(self.intern(hops.clone())),
        };
        self.searched.groups.insert((switch.0, c), group);
    }

    /// The index of `list` in `hop_lists`, each list kept once.
    fn intern(&mut self, list: Vec<PortId>) -> u32 {
        if let Some(&at) = self.searched.hop_list_of.get(&list) {
            return at;
        }
        let at = self.searched.hop_lists.len() as u32;
        self.searched.hop_lists.push(list.clone());
        self.searched.hop_list_of.insert(list, at);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySpec;

    /// Every switch's next hops toward every NIC, as computed and as read
    /// back from what is kept, on a 2-tier Clos of radix 8 (4 spines, 8
    /// ToRs of 4 uplinks) with ToR 0's first uplink and a spine's link
    /// down into another ToR down in the view.
    #[test]
    fn next_hops_read_back_as_they_were_computed_with_links_down() {
        let spec: TopologySpec =
            serde_json::from_value(serde_json::json!({"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"}))
                .expect("a valid Clos");
        let topo = spec.build().expect("builds");
        let node_ports = topo.node_ports();
        let mut routing = Routing::new(&topo, node_ports.clone());
        let mut view = View::all_up(topo.links.len() * 2, topo.nodes.len());
        let switches: Vec<NodeId> = (0..topo.nodes.len() as u32).map(NodeId).filter(|&n| !topo.is_nic(n)).collect();
        let uplinks = |sw: NodeId| routing.switch_ports[sw.0 as usize].clone();
        let (tor, other_tor) =
            (routing.peer(node_ports[0][0]), routing.peer(node_ports[topo.nics()[31].0 as usize][0]));
        let spine_into_other = uplinks(other_tor)[1].peer();
        for port in [uplinks(tor)[0], spine_into_other] {
            view.port_up[port.0 as usize] = false;
        }
        let (mut computed, mut read) = (Vec::new(), Vec::new());
        let mut left_out_kept = 0;
        for &dst in &topo.nics() {
            for &sw in &switches {
                routing.next_hops(sw, dst, &view, &mut computed);
                routing.next_hops(sw, dst, &view, &mut read);
                assert_eq!(computed, read, "switch {} toward NIC {}", sw.0, dst.0);
                let toward = routing.searched.class_of.get(&dst.0).copied();
                left_out_kept += usize::from(matches!(
                    toward.and_then(|c| routing.searched.groups.get(&(sw.0, c))),
                    Some(Hops::AllBut(_))
                ));
            }
        }
        // ToR 0 toward another rack: 3 uplinks, the dead one left out (and
        // toward the other ToR's rack, also the spine that lost its link).
        let far = topo.nics()[31];
        routing.next_hops(tor, far, &view, &mut computed);
        assert_eq!(computed.len(), 2, "{computed:?}");
        assert!(left_out_kept > 0, "ToRs keep their uplinks as the ports they leave out");
    }
}
