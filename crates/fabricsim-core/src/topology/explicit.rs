//! An explicit topology: NICs, switches and cables listed one by one, for
//! fabrics no generator covers (test benches, failure reproductions, odd
//! wiring). Names given here are the names the simulator reports.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Link, ModuleSpec, Node, NodeId, NodeRole, Topology};
use crate::error::{invalid, link_delay, link_rate, named, ScenarioError};
use crate::units::{Rate, Time};

/// Nodes and links listed one by one.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplicitSpec {
    /// Every NIC and switch, each with a unique name.
    pub nodes: Vec<ExplicitNode>,
    /// Cables between named nodes. A NIC's ports are numbered in the order
    /// its links appear here.
    pub links: Vec<ExplicitLink>,
}

/// One NIC or switch.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplicitNode {
    /// Unique name, used by links, traffic and results.
    pub name: String,
    /// `nic` or `switch`.
    pub kind: NodeKind,
    /// Switch tier: 0 for a ToR, 1 and 2 above it, numbered without a gap
    /// (switches only; default 0). NICs link to tier-0 switches.
    #[serde(default)]
    pub tier: Option<u8>,
    /// Host the NIC belongs to; NICs of one host are its rails, in the order
    /// listed (NICs only; default: the NIC's own index, one NIC per host).
    #[serde(default)]
    pub host: Option<u32>,
    /// Forwarding latency (switches only; default 0ns).
    #[serde(default)]
    pub latency: Option<Time>,
    /// Rate of one physical port (transceiver module); slower links are
    /// lanes of a broken-out port (switches only; default: the fastest link
    /// at the switch).
    #[serde(default)]
    pub native_port_rate: Option<Rate>,
}

/// What a listed node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// A NIC: sends and receives traffic.
    Nic,
    /// A switch: forwards traffic.
    Switch,
}

/// A full-duplex cable.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplicitLink {
    /// Name of one end.
    pub a: String,
    /// Name of the other end.
    pub b: String,
    /// Rate in each direction.
    pub rate: Rate,
    /// Propagation delay. The default 1us is the per-link delay of HPCC,
    /// ConWeave and htsim (shared/reference/protocols.md s8.3).
    #[serde(default = "default_delay")]
    pub delay: Time,
}

fn default_delay() -> Time {
    Time::from_us(1)
}

impl ExplicitSpec {
    /// Builds the graph, or says which field makes it impossible.
    pub fn build(&self) -> Result<Topology, ScenarioError> {
        if self.nodes.len() > u32::MAX as usize || self.links.len() > u32::MAX as usize {
            return invalid("topology", "more nodes or links than the simulator can number");
        }
        let mut ids: HashMap<&str, NodeId> = HashMap::with_capacity(self.nodes.len());
        let mut nodes = Vec::with_capacity(self.nodes.len());
        let mut nic_count = 0u32;
        let mut rails: HashMap<u32, u16> = HashMap::new();
        let mut switches_per_tier: HashMap<u8, u32> = HashMap::new();
        for (i, spec) in self.nodes.iter().enumerate() {
            let field = |name: &str| format!("topology.nodes[{i}].{name}");
            named(field("name"), &spec.name, "node")?;
            if let Some(first) = ids.insert(&spec.name, NodeId(i as u32)) {
                return invalid(
                    field("name"),
                    format!("'{}' is already the name of topology.nodes[{}]", spec.name, first.0),
                );
            }
            let node = match spec.kind {
                NodeKind::Nic => {
                    for (set, name) in [
                        (spec.tier.is_some(), "tier"),
                        (spec.latency.is_some(), "latency"),
                        (spec.native_port_rate.is_some(), "native_port_rate"),
                    ] {
                        if set {
                            return invalid(
                                field(name),
                                format!("NIC '{}' has no {name}: it is for switches", spec.name),
                            );
                        }
                    }
                    let host = spec.host.unwrap_or(nic_count);
                    let rail = rails.entry(host).or_insert(0);
                    let role = NodeRole::Nic { host, rail: *rail };
                    *rail = rail.checked_add(1).ok_or_else(|| {
                        ScenarioError::new(field("host"), format!("host {host} has more than {} NICs", u16::MAX))
                    })?;
                    nic_count += 1;
                    // Modules are filled in below, once the links are known.
                    Node { role, index: nic_count - 1, latency: Time::ZERO, module: ModuleSpec::NicCage(0) }
                }
                NodeKind::Switch => {
                    if spec.host.is_some() {
                        return invalid(field("host"), format!("switch '{}' has no host: it is for NICs", spec.name));
                    }
                    let tier = spec.tier.unwrap_or(0);
                    if tier > MAX_TIER {
                        return invalid(
                            field("tier"),
                            format!("{tier}: a switch is of tier 0 (ToR), 1 or 2, as in a Clos of up to 3 tiers"),
                        );
                    }
                    if let Some(native) = spec.native_port_rate {
                        link_rate(field("native_port_rate"), native)?;
                    }
                    let index = switches_per_tier.entry(tier).or_insert(0);
                    *index += 1;
                    Node {
                        role: NodeRole::Switch { tier, plane: 0, pod: 0 },
                        index: *index - 1,
                        latency: spec.latency.unwrap_or(Time::ZERO),
                        module: ModuleSpec::SwitchPort(Rate::default()),
                    }
                }
            };
            nodes.push(node);
        }

        // Tiers count up from the ToRs: a tier above an empty one names no
        // layer of the fabric.
        if let Some((i, tier)) = (self.nodes.iter().enumerate())
            .filter_map(|(i, n)| n.tier.map(|t| (i, t)))
            .find(|&(_, t)| t > 0 && !switches_per_tier.contains_key(&(t - 1)))
        {
            return invalid(
                format!("topology.nodes[{i}].tier"),
                format!("{tier}, but no switch is of tier {}: tiers count up from 0 without a gap", tier - 1),
            );
        }

        let mut links = Vec::with_capacity(self.links.len());
        let mut ports = vec![0u32; nodes.len()];
        let mut fastest = vec![Rate::default(); nodes.len()];
        for (i, spec) in self.links.iter().enumerate() {
            let end = |name: &str, side: &str| {
                ids.get(name).copied().ok_or_else(|| {
                    ScenarioError::new(format!("topology.links[{i}].{side}"), format!("no node named '{name}'"))
                })
            };
            let (mut a, mut b) = (end(&spec.a, "a")?, end(&spec.b, "b")?);
            link_rate(format!("topology.links[{i}].rate"), spec.rate)?;
            link_delay(format!("topology.links[{i}].delay"), spec.delay)?;
            if a == b {
                return invalid(format!("topology.links[{i}]"), format!("'{}' is linked to itself", spec.a));
            }
            // `Link` keeps the lower node (NIC, then lower tier) as `a`.
            if layer(&nodes[a.0 as usize]) > layer(&nodes[b.0 as usize]) {
                (a, b) = (b, a);
            }
            if let (NodeRole::Nic { .. }, NodeRole::Switch { tier: tier @ 1.., .. }) =
                (nodes[a.0 as usize].role, nodes[b.0 as usize].role)
            {
                return invalid(
                    format!("topology.links[{i}]"),
                    format!(
                        "NIC '{}' is linked to '{}' of tier {tier}: a NIC links to ToRs (tier 0)",
                        self.nodes[a.0 as usize].name, self.nodes[b.0 as usize].name
                    ),
                );
            }
            for end in [a, b] {
                ports[end.0 as usize] += 1;
                fastest[end.0 as usize] = fastest[end.0 as usize].max(spec.rate);
            }
            links.push(Link { a, b, rate: spec.rate, delay: spec.delay });
        }

        for (i, node) in nodes.iter_mut().enumerate() {
            if ports[i] == 0 {
                return invalid(
                    format!("topology.nodes[{i}]"),
                    format!("'{}' has no links: link it or remove it", self.nodes[i].name),
                );
            }
            node.module = match node.role {
                // One cage per NIC: the explicit form has no breakout detail.
                NodeRole::Nic { .. } => ModuleSpec::NicCage(ports[i]),
                NodeRole::Switch { .. } => ModuleSpec::SwitchPort(self.nodes[i].native_port_rate.unwrap_or(fastest[i])),
            };
        }

        Ok(Topology { nodes, links, names: self.nodes.iter().map(|n| n.name.clone()).collect(), ..Topology::default() })
    }
}

/// The highest switch tier: a Clos has at most 3 (ToR, aggregation, core).
const MAX_TIER: u8 = 2;

/// NICs below every switch, lower tiers below higher ones.
fn layer(node: &Node) -> u32 {
    match node.role {
        NodeRole::Nic { .. } => 0,
        NodeRole::Switch { tier, .. } => tier as u32 + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> ExplicitSpec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn builds_names_roles_and_port_order() {
        let topo = spec(
            r#"{"nodes": [
                {"name": "sw", "kind": "switch", "latency": "300ns"},
                {"name": "n0", "kind": "nic", "host": 7},
                {"name": "n1", "kind": "nic", "host": 7}],
              "links": [
                {"a": "sw", "b": "n0", "rate": "100Gbps"},
                {"a": "n1", "b": "sw", "rate": "100Gbps", "delay": "10ns"}]}"#,
        )
        .build()
        .unwrap();
        assert_eq!(topo.find("n1"), Some(NodeId(2)));
        assert_eq!(topo.node(NodeId(2)).role, NodeRole::Nic { host: 7, rail: 1 });
        assert_eq!(topo.node(NodeId(0)).latency, Time::from_ns(300));
        assert_eq!(topo.node(NodeId(0)).module, ModuleSpec::SwitchPort(Rate::from_gbps(100)));
        // Written switch-first, stored NIC-first.
        assert_eq!((topo.links[0].a, topo.links[0].b), (NodeId(1), NodeId(0)));
        assert_eq!(topo.links[0].delay, Time::from_us(1));
        assert_eq!(topo.links[1].delay, Time::from_ns(10));
    }

    #[test]
    fn rejects_fields_of_the_other_kind() {
        let err = spec(r#"{"nodes": [{"name": "n", "kind": "nic", "tier": 1}], "links": []}"#).build().unwrap_err();
        assert_eq!(err.field, "topology.nodes[0].tier");
        let err = spec(r#"{"nodes": [{"name": "s", "kind": "switch", "host": 1}], "links": []}"#).build().unwrap_err();
        assert_eq!(err.field, "topology.nodes[0].host");
    }

    #[test]
    fn tiers_are_0_to_2_without_a_gap_and_nics_link_to_tier_0() {
        let topo = |tiers: [u8; 2]| {
            spec(&format!(
                r#"{{"nodes": [{{"name": "tor", "kind": "switch"}}, {{"name": "up", "kind": "switch", "tier": {}}},
                  {{"name": "top", "kind": "switch", "tier": {}}}, {{"name": "n", "kind": "nic"}}],
                  "links": [{{"a": "n", "b": "tor", "rate": "1Gbps"}}, {{"a": "tor", "b": "up", "rate": "1Gbps"}},
                  {{"a": "up", "b": "top", "rate": "1Gbps"}}]}}"#,
                tiers[0], tiers[1]
            ))
            .build()
        };
        assert!(topo([1, 2]).is_ok());
        assert!(topo([0, 1]).is_ok());
        assert_eq!(
            topo([1, 99]).unwrap_err().to_string(),
            "topology.nodes[2].tier: 99: a switch is of tier 0 (ToR), 1 or 2, as in a Clos of up to 3 tiers"
        );
        assert_eq!(
            topo([2, 2]).unwrap_err().to_string(),
            "topology.nodes[1].tier: 2, but no switch is of tier 1: tiers count up from 0 without a gap"
        );
        let err = spec(
            r#"{"nodes": [{"name": "agg", "kind": "switch", "tier": 1}, {"name": "tor", "kind": "switch"},
                {"name": "n", "kind": "nic"}],
              "links": [{"a": "agg", "b": "tor", "rate": "1Gbps"}, {"a": "agg", "b": "n", "rate": "1Gbps"}]}"#,
        )
        .build()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "topology.links[1]: NIC 'n' is linked to 'agg' of tier 1: a NIC links to ToRs (tier 0)"
        );
    }

    #[test]
    fn rejects_unlinked_nodes() {
        let err = spec(r#"{"nodes": [{"name": "lonely", "kind": "nic"}], "links": []}"#).build().unwrap_err();
        assert_eq!(err.to_string(), "topology.nodes[0]: 'lonely' has no links: link it or remove it");
    }
}
