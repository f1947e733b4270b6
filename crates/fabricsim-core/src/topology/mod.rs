//! The network graph and its generators.
//!
//! A `Topology` is a plain list of nodes (NICs and switches) and cables. It is
//! what the generators produce, what the calculator counts, and what the
//! packet simulator instantiates ports and routes from. Generators:
//! - `clos`: 2- or 3-tier Clos / fat tree with per-tier ports, rates,
//!   oversubscription and parallel links, generalised with planes
//!   (multi-plane, mrc-srv6-multiplane.txt s2), several NICs per host with
//!   rail-optimised wiring (alibaba-hpn.txt s5.2), and several ToRs per NIC
//!   in one plane (dual-ToR, alibaba-hpn.txt s4). HPN's dual-plane tier 2
//!   is two planes of dual-homed NICs (alibaba-hpn.txt s6.1).
//! - `explicit`: a list of nodes and links for anything else.

mod clos;
mod explicit;
mod nic_ref;
mod path_space;
mod report;

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{invalid, ScenarioError};
use crate::units::{Rate, Time};

pub use clos::ClosSpec;
pub use explicit::ExplicitSpec;
pub use nic_ref::NicRef;
pub use path_space::PathSpace;
pub use report::TopologyReport;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);

/// One end of a link: port `2 x link + side` is the end at the link's `a`
/// (side 0) or `b` (side 1). This is the one place that numbering is
/// written down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortId(pub u32);

impl PortId {
    /// The end of `link` at its `a` (side 0) or `b` (side 1).
    pub fn of_link(link: LinkId, side: u32) -> PortId {
        PortId(2 * link.0 + (side & 1))
    }

    /// The port at the other end of the same link.
    #[inline(always)]
    pub fn peer(self) -> PortId {
        PortId(self.0 ^ 1)
    }

    pub fn link(self) -> LinkId {
        LinkId(self.0 / 2)
    }

    /// 0 at the link's `a`, 1 at its `b`.
    pub fn side(self) -> u32 {
        self.0 & 1
    }
}

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRole {
    /// A NIC. `host` groups the NICs of one server; `rail` is the NIC's index
    /// within its host (GPU r uses NIC r).
    Nic { host: u32, rail: u16 },
    /// A switch. Tier 0 is the ToR (leaf) tier. `plane` is the plane of a
    /// multi-plane fabric; `pod` the pod (or segment) for tiers below the top.
    Switch { tier: u8, plane: u16, pod: u32 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub role: NodeRole,
    /// Index among the nodes of the same role, tier and plane (for naming).
    pub index: u32,
    /// Forwarding latency of a switch (zero for NICs).
    pub latency: Time,
    /// Speed of a switch's physical port (one transceiver module); lower
    /// speed logical ports are lanes of a broken-out physical port. For a
    /// NIC: how many of its ports share one cage (one module).
    pub module: ModuleSpec,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ModuleSpec {
    /// Switch: native physical port rate; logical ports of lower rate are
    /// lanes of one module.
    SwitchPort(Rate),
    /// NIC: number of NIC ports that share one cage.
    NicCage(u32),
}

/// A full-duplex cable between two nodes. `a` is the lower node (the NIC or
/// the lower-tier switch) and `b` the upper one. The links of a NIC are
/// stored in the order of its ports, so a NIC's port `p` is its `p`-th link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    pub a: NodeId,
    pub b: NodeId,
    pub rate: Rate,
    pub delay: Time,
}

#[derive(Clone, Debug, Default)]
pub struct Topology {
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
    /// Node names given by an explicit topology; generated names otherwise.
    pub names: Vec<String>,
    /// Every node by its name, made when a name is first looked up: a
    /// scenario may name each of 100,000 NICs.
    by_name: std::sync::OnceLock<HashMap<String, NodeId>>,
}

/// Which generator builds the topology, with its parameters.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TopologySpec {
    /// k-tier Clos / fat tree, optionally multi-plane, rail-optimised, dual-ToR.
    Clos(ClosSpec),
    /// Nodes and links listed one by one.
    Explicit(ExplicitSpec),
}

crate::kind_tagged!(TopologySpec { "clos" => Clos, "explicit" => Explicit });

impl TopologySpec {
    /// Builds the graph, or says which field makes it impossible.
    pub fn build(&self) -> Result<Topology, ScenarioError> {
        match self {
            TopologySpec::Clos(spec) => spec.build(),
            TopologySpec::Explicit(spec) => spec.build(),
        }
    }

    /// Builds the graph if it fits in `available` bytes: about 100 B a
    /// link, with its adjacency entries and its share of the nodes (what
    /// `fabricsim topo` needs; a simulation checks far more, `sim::footprint`).
    pub fn build_within(&self, available: Option<u64>) -> Result<Topology, ScenarioError> {
        let needs = self.links()?.saturating_mul(100);
        if let Some(available) = available.filter(|&a| needs > a) {
            return invalid(
                "topology",
                format!(
                    "its graph needs about {} MiB, more than the {} MiB this machine has available",
                    needs >> 20,
                    available >> 20
                ),
            );
        }
        self.build()
    }

    /// How many links the graph has, counted without building it (what
    /// the simulation's memory grows with, checked before building).
    pub fn links(&self) -> Result<u64, ScenarioError> {
        match self {
            TopologySpec::Clos(spec) => spec.links(),
            TopologySpec::Explicit(spec) => Ok(spec.links.len() as u64),
        }
    }
}

impl Topology {
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    pub fn is_nic(&self, id: NodeId) -> bool {
        matches!(self.node(id).role, NodeRole::Nic { .. })
    }

    /// The node that port `p` belongs to.
    pub fn port_node(&self, p: PortId) -> NodeId {
        let link = self.port_link(p);
        [link.a, link.b][p.side() as usize]
    }

    /// The link port `p` is an end of.
    #[inline]
    pub fn port_link(&self, p: PortId) -> &Link {
        &self.links[p.link().0 as usize]
    }

    /// The host a NIC sits in; none for a switch.
    pub fn host(&self, id: NodeId) -> Option<u32> {
        match self.node(id).role {
            NodeRole::Nic { host, .. } => Some(host),
            NodeRole::Switch { .. } => None,
        }
    }

    /// Whether NICs `a` and `b` sit in one host (their traffic stays off
    /// the network).
    pub fn same_host(&self, a: NodeId, b: NodeId) -> bool {
        self.host(a).is_some_and(|h| self.host(b) == Some(h))
    }

    /// NIC node ids in index order.
    pub fn nics(&self) -> Vec<NodeId> {
        (0..self.nodes.len() as u32).map(NodeId).filter(|&n| self.is_nic(n)).collect()
    }

    /// For every node, a label shared by exactly the nodes it has a path
    /// to (union-find over the links).
    pub fn components(&self) -> Vec<u32> {
        let mut parent: Vec<u32> = (0..self.nodes.len() as u32).collect();
        fn root(parent: &mut [u32], mut n: u32) -> u32 {
            while parent[n as usize] != n {
                parent[n as usize] = parent[parent[n as usize] as usize];
                n = parent[n as usize];
            }
            n
        }
        for link in &self.links {
            let (a, b) = (root(&mut parent, link.a.0), root(&mut parent, link.b.0));
            parent[a.max(b) as usize] = a.min(b);
        }
        (0..self.nodes.len() as u32).map(|n| root(&mut parent, n)).collect()
    }

    /// For every node, its links in insertion order (a NIC's port order).
    /// Each node's ports in order: a port's index on its node is the
    /// position of its link in the node's adjacency (a NIC's port number).
    pub fn node_ports(&self) -> Vec<Vec<PortId>> {
        let adjacency = self.adjacency();
        let side = |node: usize, l: LinkId| u32::from(self.links[l.0 as usize].a.0 as usize != node);
        (adjacency.iter().enumerate())
            .map(|(node, links)| links.iter().map(|&l| PortId::of_link(l, side(node, l))).collect())
            .collect()
    }

    pub fn adjacency(&self) -> Vec<Vec<LinkId>> {
        let mut adj = vec![Vec::new(); self.nodes.len()];
        for (i, link) in self.links.iter().enumerate() {
            adj[link.a.0 as usize].push(LinkId(i as u32));
            adj[link.b.0 as usize].push(LinkId(i as u32));
        }
        adj
    }

    /// The node at the other end of `link` from `from`.
    pub fn peer(&self, link: LinkId, from: NodeId) -> NodeId {
        let l = &self.links[link.0 as usize];
        if l.a == from {
            l.b
        } else {
            l.a
        }
    }

    /// A stable human-readable name: `nic12`, `t0.p3.5` (tier 0, plane 3,
    /// index 5), or the name an explicit topology gave.
    pub fn name(&self, id: NodeId) -> String {
        if let Some(name) = self.names.get(id.0 as usize) {
            return name.clone();
        }
        let node = self.node(id);
        match node.role {
            NodeRole::Nic { .. } => format!("nic{}", node.index),
            NodeRole::Switch { tier, plane, .. } => format!("t{tier}.p{plane}.{}", node.index),
        }
    }

    /// Looks a node up by the name `name()` gives it.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        let by_name = self.by_name.get_or_init(|| {
            let mut by_name = HashMap::with_capacity(self.nodes.len());
            for n in (0..self.nodes.len() as u32).map(NodeId) {
                // The first of two nodes of one name, as a search finds.
                by_name.entry(self.name(n)).or_insert(n);
            }
            by_name
        });
        by_name.get(name).copied()
    }

    /// Counts for the topology calculator.
    pub fn report(&self) -> TopologyReport {
        report::report(self)
    }
}
