//! The Clos generator: 2- or 3-tier folded Clos (leaf-spine, fat tree),
//! generalised the way AI-training fabrics generalise it.
//!
//! - Tiers, ports and oversubscription: each tier below the top splits its
//!   ports into down and up; the top tier points every port down. A 3-tier
//!   Clos is pods of T0 and T1 under T2 groups, as in the fat tree and in
//!   mrc-srv6-multiplane.txt s2, Fig. 1a.
//! - Planes: P independent copies of the switch fabric that share only the
//!   NICs; NIC port p lands in plane p % P (mrc-srv6-multiplane.txt s2,
//!   Fig. 1b: an 800G NIC broken out to 8 x 100G planes).
//! - Dual-ToR: the ports a NIC has in one plane go to different ToRs of a
//!   "ToR set" (alibaba-hpn.txt s4). HPN's dual-plane tier 2 is two planes
//!   with one port each (alibaba-hpn.txt s6.1).
//! - Rail-optimised wiring: NIC r of every host of a segment shares ToR set r
//!   of that segment (alibaba-hpn.txt s5.2, Fig. 11).

use std::fmt::Display;
use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::de::value::SeqAccessDeserializer;
use serde::de::{self, IntoDeserializer};
use serde::{Deserialize, Deserializer, Serialize};

use super::{Link, ModuleSpec, Node, NodeId, NodeRole, Topology};
use crate::error::{invalid, link_delay, link_rate, number, ScenarioError};
use crate::units::{Rate, Time};

/// Logical ports per switch accepted before we call a value a typo. Real
/// 51.2 Tb/s chips expose at most 512 logical ports; the link cap below is
/// what really bounds the size.
const MAX_PORTS: u32 = 65_536;

/// The largest graph the generator builds. A link is 24 bytes, so this is a
/// few GB; beyond it, build part of the fabric with `nics`.
const MAX_LINKS: u64 = 100_000_000;

/// A 2- or 3-tier Clos, optionally multi-plane, dual-ToR and rail-optimised.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClosSpec {
    /// Number of switch tiers: 2 (ToR and spine) or 3 (pods of ToR and
    /// aggregation switches under a core tier). Tier 0 is the ToR tier.
    pub tiers: u8,
    /// Logical ports per switch, the same at every tier. Each tier below the
    /// top splits them into down and up ports by `oversubscription`; the top
    /// tier uses all of them down. Give either `radix` or `ports`.
    #[serde(default)]
    pub radix: Option<u32>,
    /// Down:up port ratio of each tier below the top, T0 first (used with
    /// `radix`). Missing entries are 1 (non-blocking). With ratio o a switch
    /// has radix/(o+1) up ports and the rest down; both must be whole.
    #[serde(default)]
    pub oversubscription: Vec<f64>,
    /// Down and up port counts per switch tier, T0 first, instead of
    /// `radix`; the top tier has no up ports. Needed when tiers differ, e.g.
    /// HPN: ToR 128 down + 60 up, aggregation 120 down.
    #[serde(default)]
    pub ports: Option<Vec<TierPorts>>,
    /// Rate of every link, or one rate per link layer: NIC-T0, T0-T1, T1-T2.
    pub link_rate: PerTier<Rate>,
    /// Propagation delay of every link, or one per link layer (NIC-T0,
    /// T0-T1, T1-T2). The default 1us is the per-link delay of HPCC,
    /// ConWeave and htsim (shared/reference/protocols.md s8.3).
    #[serde(default = "default_link_delay")]
    pub link_delay: PerTier<Time>,
    /// Forwarding latency of every switch, or one per switch tier (T0, T1,
    /// T2). Default 0ns, as htsim.
    #[serde(default = "default_switch_latency")]
    pub switch_latency: PerTier<Time>,
    /// Rate of a switch's physical port (one transceiver module), for all
    /// tiers or one per switch tier. Logical ports slower than it are lanes
    /// of a broken-out port. Default: the fastest link rate at that tier.
    #[serde(default)]
    pub native_port_rate: Option<PerTier<Rate>>,
    /// Independent copies of the switch fabric; planes share nothing but the
    /// NICs. Default 1.
    #[serde(default = "one")]
    pub planes: u32,
    /// Ports per NIC, a multiple of `planes` (default: `planes`). Port p
    /// attaches to plane p % planes; the m = nic_ports/planes ports a NIC has
    /// in one plane go to m different ToRs (m = 2 is dual-ToR).
    #[serde(default)]
    pub nic_ports: Option<u32>,
    /// NIC ports that share one cage and so one transceiver module (default:
    /// all of them, e.g. an 800G NIC broken out to 8 x 100G).
    #[serde(default)]
    pub nic_ports_per_cage: Option<u32>,
    /// NICs per host, one per GPU; NIC r of a host is on rail r. Default 1.
    #[serde(default = "one")]
    pub nics_per_host: u32,
    /// Rail-optimised wiring: a segment is as many hosts as a ToR has down
    /// ports, and NIC r of every host in a segment attaches to ToR set r of
    /// that segment. Otherwise NICs fill ToR sets in order. Default false.
    #[serde(default)]
    pub rail_optimized: bool,
    /// Links between each connected pair of switches; must divide the up
    /// ports of every tier and the down ports above T0. Default 1.
    #[serde(default = "one")]
    pub parallel_links: u32,
    /// Build only enough ToR sets to hold this many NICs (rounded up to whole
    /// hosts) instead of the largest fabric the ports allow. In a 3-tier Clos
    /// every started pod has all its T1s and every T2 is built.
    #[serde(default)]
    pub nics: Option<u32>,
    /// Stacked dual-ToR (alibaba-hpn.txt s4.1, Fig 8a): a direct link
    /// between the two ToRs of each ToR set, over which they synchronise
    /// as primary (the first) and secondary. Needs two NIC ports per plane.
    /// Default false: non-stacked, the ToRs independent (s4.2).
    #[serde(default)]
    pub tor_stack: bool,
}

/// Port counts of one switch tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TierPorts {
    /// Ports towards the NICs or the tier below.
    pub down: u32,
    /// Ports towards the tier above; 0 on the top tier.
    #[serde(default)]
    pub up: u32,
}

/// One value for every tier, or a list with one value per tier.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
#[schemars(rename = "PerTier{T}")]
pub enum PerTier<T> {
    /// The same value at every tier.
    One(T),
    /// One value per tier, lowest first.
    Each(Vec<T>),
}

// Written by hand rather than derived with `untagged`: the derived version
// reports any mistake as "did not match any variant", while this one passes
// on the unit parser's message ("'100G' has an unknown rate unit 'G'").
impl<'de, T: Deserialize<'de>> Deserialize<'de> for PerTier<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> de::Visitor<'de> for Visitor<T> {
            type Value = PerTier<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("one value for every tier, or a list with one value per tier")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PerTier<T>, E> {
                T::deserialize(v.into_deserializer()).map(PerTier::One)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PerTier<T>, E> {
                T::deserialize(v.into_deserializer()).map(PerTier::One)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PerTier<T>, E> {
                T::deserialize(v.into_deserializer()).map(PerTier::One)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<PerTier<T>, E> {
                T::deserialize(v.into_deserializer()).map(PerTier::One)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<PerTier<T>, A::Error> {
                Vec::<T>::deserialize(SeqAccessDeserializer::new(seq)).map(PerTier::Each)
            }
        }
        d.deserialize_any(Visitor(PhantomData))
    }
}

impl<T: Copy> PerTier<T> {
    /// Each value as written, with its field: `field` itself, or
    /// `field[i]` for the values of a list.
    fn written(&self, field: &str) -> Vec<(String, T)> {
        match self {
            PerTier::One(value) => vec![(field.to_string(), *value)],
            PerTier::Each(values) => values.iter().enumerate().map(|(i, v)| (format!("{field}[{i}]"), *v)).collect(),
        }
    }
}

impl<T: Copy + Display> PerTier<T> {
    /// The value at each of `n` tiers; `layers` names them for the message.
    fn resolve(&self, n: usize, field: &str, layers: &str) -> Result<Vec<T>, ScenarioError> {
        match self {
            PerTier::One(value) => Ok(vec![*value; n]),
            PerTier::Each(values) if values.len() == n => Ok(values.clone()),
            PerTier::Each(values) => {
                let shown: Vec<String> = values.iter().map(ToString::to_string).collect();
                invalid(
                    field,
                    format!(
                        "[{}] has {} values; this Clos needs one value or a list of {n} ({layers})",
                        shown.join(", "),
                        values.len()
                    ),
                )
            }
        }
    }
}

fn default_link_delay() -> PerTier<Time> {
    PerTier::One(Time::from_us(1))
}

fn default_switch_latency() -> PerTier<Time> {
    PerTier::One(Time::ZERO)
}

fn one() -> u32 {
    1
}

impl ClosSpec {
    /// Builds the graph, or says which field makes it impossible.
    pub fn build(&self) -> Result<Topology, ScenarioError> {
        Ok(Plan::new(self)?.build())
    }

    /// How many links the graph has, counted without building it.
    pub fn links(&self) -> Result<u64, ScenarioError> {
        Ok(Plan::new(self)?.links)
    }
}

/// The validated shape of the fabric: every count the builder needs.
struct Plan {
    tiers: usize,
    ports: Vec<TierPorts>,
    rate: Vec<Rate>,
    delay: Vec<Time>,
    latency: Vec<Time>,
    native: Vec<Rate>,
    planes: u32,
    /// NIC ports in one plane: the size of a ToR set.
    ports_per_plane: u32,
    nic_ports: u32,
    ports_per_cage: u32,
    nics_per_host: u32,
    rail_optimized: bool,
    tor_stack: bool,
    parallel: u32,
    /// ToRs under one T1 group: a whole 2-tier plane, or one 3-tier pod.
    tors_per_pod: u32,
    nics: u32,
    /// Switches built per plane, by tier.
    switches: Vec<u32>,
    /// Links in all.
    links: u64,
}

impl Plan {
    fn new(spec: &ClosSpec) -> Result<Plan, ScenarioError> {
        if !(2..=3).contains(&spec.tiers) {
            return invalid("topology.tiers", format!("{} is not supported: build a 2- or 3-tier Clos", spec.tiers));
        }
        let tiers = spec.tiers as usize;
        let ports = tier_ports(spec, tiers)?;

        let rate = spec.link_rate.resolve(tiers, "topology.link_rate", LINK_LAYERS[tiers])?;
        let natives = spec.native_port_rate.iter().flat_map(|n| n.written("topology.native_port_rate"));
        for (field, written) in spec.link_rate.written("topology.link_rate").into_iter().chain(natives) {
            link_rate(field, written)?;
        }
        for (field, written) in spec.link_delay.written("topology.link_delay") {
            link_delay(field, written)?;
        }
        let delay = spec.link_delay.resolve(tiers, "topology.link_delay", LINK_LAYERS[tiers])?;
        let latency = spec.switch_latency.resolve(tiers, "topology.switch_latency", SWITCH_TIERS[tiers])?;
        // A switch's physical ports are by default as fast as its fastest
        // logical port: tier t has link layer t below it and t + 1 above.
        let native = match &spec.native_port_rate {
            Some(native) => native.resolve(tiers, "topology.native_port_rate", SWITCH_TIERS[tiers])?,
            None => (0..tiers).map(|t| rate[t].max(rate.get(t + 1).copied().unwrap_or_default())).collect(),
        };

        let planes = spec.planes;
        if planes == 0 || planes > u16::MAX as u32 {
            return invalid("topology.planes", format!("{planes} is not a number of planes: use 1 to {}", u16::MAX));
        }
        let nic_ports = spec.nic_ports.unwrap_or(planes);
        if nic_ports == 0 || !nic_ports.is_multiple_of(planes) {
            return invalid(
                "topology.nic_ports",
                format!(
                    "{nic_ports} must be a positive multiple of planes ({planes}): every plane gets the same ports"
                ),
            );
        }
        let ports_per_plane = nic_ports / planes;
        let ports_per_cage = spec.nic_ports_per_cage.unwrap_or(nic_ports);
        if ports_per_cage == 0 {
            return invalid("topology.nic_ports_per_cage", "0: a cage holds at least one NIC port");
        }
        let nics_per_host = spec.nics_per_host;
        if nics_per_host == 0 || nics_per_host > u16::MAX as u32 {
            return invalid(
                "topology.nics_per_host",
                format!("{nics_per_host} is not a number of NICs per host: use 1 to {}", u16::MAX),
            );
        }

        let parallel = spec.parallel_links;
        if parallel == 0 {
            return invalid("topology.parallel_links", "0: switches that are connected have at least one link");
        }
        for (t, p) in ports.iter().enumerate() {
            // Up ports of every tier but the top, down ports of every tier
            // but the ToRs, face switches.
            for (count, side, faces_switches) in [(p.up, "up", t + 1 < tiers), (p.down, "down", t > 0)] {
                if faces_switches && !count.is_multiple_of(parallel) {
                    return invalid(
                        "topology.parallel_links",
                        format!("{parallel} does not divide the {count} {side} ports of tier {t}"),
                    );
                }
            }
        }

        // A T1 group (a 2-tier plane or a 3-tier pod) has T1.down/parallel
        // ToRs, split into ToR sets of `ports_per_plane`.
        let tors_per_pod = ports[1].down / parallel;
        let pod = if tiers == 2 { "plane" } else { "pod" };
        if !tors_per_pod.is_multiple_of(ports_per_plane) {
            return invalid(
                "topology.nic_ports",
                format!(
                    "{nic_ports} ports over {planes} plane(s) need ToR sets of {ports_per_plane}, \
                     but a {pod} has {tors_per_pod} ToRs"
                ),
            );
        }
        let sets_per_pod = tors_per_pod / ports_per_plane;
        let down = ports[0].down;
        if spec.rail_optimized && !sets_per_pod.is_multiple_of(nics_per_host) {
            return invalid(
                "topology.nics_per_host",
                format!(
                    "{nics_per_host} rails need a multiple of {nics_per_host} ToR sets per {pod}, not {sets_per_pod}"
                ),
            );
        }
        let pods_max = if tiers == 2 { 1 } else { (ports[2].down / parallel) as u64 };
        let sets_max = sets_per_pod as u64 * pods_max;
        let hosts_max = if spec.rail_optimized {
            sets_max / nics_per_host as u64 * down as u64
        } else {
            sets_max * down as u64 / nics_per_host as u64
        };
        let nics_max = hosts_max * nics_per_host as u64;

        let nics = match spec.nics {
            Some(0) => return invalid("topology.nics", "0: build at least one NIC"),
            Some(n) if n as u64 > nics_max => {
                return invalid("topology.nics", format!("{n} NICs do not fit: this Clos holds at most {nics_max}"))
            }
            Some(n) => (n as u64).div_ceil(nics_per_host as u64) * nics_per_host as u64,
            None => nics_max,
        };
        if nics == 0 {
            return invalid(
                "topology.nics_per_host",
                format!("{nics_per_host} NICs per host do not fit: a ToR set holds {down} NICs"),
            );
        }
        let hosts = nics / nics_per_host as u64;
        let sets = if spec.rail_optimized {
            hosts.div_ceil(down as u64) * nics_per_host as u64
        } else {
            nics.div_ceil(down as u64)
        };
        let tors = sets * ports_per_plane as u64;
        let mut switches = vec![tors, 0, 0];
        if tiers == 2 {
            switches[1] = (ports[0].up / parallel) as u64;
        } else {
            let t1_per_pod = (ports[0].up / parallel) as u64;
            switches[1] = tors.div_ceil(tors_per_pod as u64) * t1_per_pod;
            switches[2] = t1_per_pod * (ports[1].up / parallel) as u64;
        }
        switches.truncate(tiers);

        // Every ToR uses all its up ports and every T1 of a built pod all of
        // its up ports, so the link count follows from the switch counts.
        // Saturating: a count past u64 is refused below like any too large.
        let per_plane = (nics.saturating_mul(ports_per_plane as u64))
            .saturating_add(tors.saturating_mul(ports[0].up as u64))
            .saturating_add(if tiers == 3 { switches[1].saturating_mul(ports[1].up as u64) } else { 0 });
        if spec.tor_stack && ports_per_plane != 2 {
            return invalid(
                "topology.tor_stack",
                format!(
                    "true: a stack joins the two ToRs of a dual-ToR set, and {nic_ports} NIC ports over {planes} \
                     plane(s) make ToR sets of {ports_per_plane}"
                ),
            );
        }
        let stacks = if spec.tor_stack { sets } else { 0 };
        let links = per_plane.saturating_add(stacks).saturating_mul(planes as u64);
        let nodes =
            nics.saturating_add(switches.iter().fold(0u64, |a, &b| a.saturating_add(b)).saturating_mul(planes as u64));
        if links > MAX_LINKS || nodes > u32::MAX as u64 {
            return invalid(
                "topology",
                format!(
                    "this Clos has {nics} NICs and {links} links; fabricsim builds at most {MAX_LINKS} links: \
                     set topology.nics to build part of it"
                ),
            );
        }

        Ok(Plan {
            tiers,
            ports,
            rate,
            delay,
            latency,
            native,
            planes,
            ports_per_plane,
            nic_ports,
            ports_per_cage,
            nics_per_host,
            rail_optimized: spec.rail_optimized,
            tor_stack: spec.tor_stack,
            parallel,
            links,
            tors_per_pod,
            nics: nics as u32,
            switches: switches.into_iter().map(|s| s as u32).collect(),
        })
    }

    /// The ToR set NIC `nic` attaches to, in every plane.
    fn tor_set(&self, nic: u32) -> u32 {
        let down = self.ports[0].down;
        if self.rail_optimized {
            let (host, rail) = (nic / self.nics_per_host, nic % self.nics_per_host);
            host / down * self.nics_per_host + rail
        } else {
            nic / down
        }
    }

    /// The `pod` recorded for a switch: the pod in a 3-tier Clos; for a
    /// 2-tier ToR, its segment (a group of ToR sets holding whole hosts).
    fn pod(&self, tier: usize, index: u32) -> u32 {
        match (self.tiers, tier) {
            (3, 0) => index / self.tors_per_pod,
            (3, 1) => index / (self.ports[0].up / self.parallel),
            (2, 0) => {
                let set = index / self.ports_per_plane;
                if self.rail_optimized {
                    set / self.nics_per_host
                } else {
                    set
                }
            }
            _ => 0,
        }
    }

    fn switch_count(&self) -> u32 {
        self.switches.iter().sum()
    }

    /// Node id of switch `index` of `tier` in `plane`. Nodes are the NICs,
    /// then each plane's switches tier by tier.
    fn switch(&self, plane: u32, tier: usize, index: u32) -> NodeId {
        let below: u32 = self.switches[..tier].iter().sum();
        NodeId(self.nics + plane * self.switch_count() + below + index)
    }

    fn build(&self) -> Topology {
        let switch_total = self.switch_count() as usize * self.planes as usize;
        let mut nodes = Vec::with_capacity(self.nics as usize + switch_total);
        for nic in 0..self.nics {
            nodes.push(Node {
                role: NodeRole::Nic { host: nic / self.nics_per_host, rail: (nic % self.nics_per_host) as u16 },
                index: nic,
                latency: Time::ZERO,
                module: ModuleSpec::NicCage(self.ports_per_cage),
            });
        }
        for plane in 0..self.planes {
            for (tier, &count) in self.switches.iter().enumerate() {
                for index in 0..count {
                    nodes.push(Node {
                        role: NodeRole::Switch { tier: tier as u8, plane: plane as u16, pod: self.pod(tier, index) },
                        index,
                        latency: self.latency[tier],
                        module: ModuleSpec::SwitchPort(self.native[tier]),
                    });
                }
            }
        }

        let mut links = Vec::new();
        // NIC links first and port by port, so that a NIC's p-th link is its
        // port p (the contract of `Link`).
        for nic in 0..self.nics {
            let set = self.tor_set(nic);
            for port in 0..self.nic_ports {
                let (plane, member) = (port % self.planes, port / self.planes);
                let tor = self.switch(plane, 0, set * self.ports_per_plane + member);
                links.push(self.link(0, NodeId(nic), tor));
            }
        }
        let t1_per_pod = self.ports[0].up / self.parallel;
        for plane in 0..self.planes {
            for tor in 0..self.switches[0] {
                // A 2-tier plane is one pod whose T1s are all the spines.
                let first_t1 = if self.tiers == 2 { 0 } else { tor / self.tors_per_pod * t1_per_pod };
                for t1 in first_t1..first_t1 + t1_per_pod {
                    self.push_parallel(&mut links, 1, self.switch(plane, 0, tor), self.switch(plane, 1, t1));
                }
            }
            if self.tiers == 3 {
                // T1 j of every pod connects to T2 group j.
                let group = self.ports[1].up / self.parallel;
                for t1 in 0..self.switches[1] {
                    let first_t2 = t1 % t1_per_pod * group;
                    for t2 in first_t2..first_t2 + group {
                        self.push_parallel(&mut links, 2, self.switch(plane, 1, t1), self.switch(plane, 2, t2));
                    }
                }
            }
            if self.tor_stack {
                for set in 0..self.switches[0] / 2 {
                    links.push(self.link(0, self.switch(plane, 0, 2 * set), self.switch(plane, 0, 2 * set + 1)));
                }
            }
        }
        Topology { nodes, links, ..Topology::default() }
    }

    fn link(&self, layer: usize, a: NodeId, b: NodeId) -> Link {
        Link { a, b, rate: self.rate[layer], delay: self.delay[layer] }
    }

    fn push_parallel(&self, links: &mut Vec<Link>, layer: usize, a: NodeId, b: NodeId) {
        for _ in 0..self.parallel {
            links.push(self.link(layer, a, b));
        }
    }
}

/// Names of the link layers and switch tiers of a Clos with n tiers, for
/// error messages.
const LINK_LAYERS: [&str; 4] = ["", "", "NIC-T0, T0-T1", "NIC-T0, T0-T1, T1-T2"];
const SWITCH_TIERS: [&str; 4] = ["", "", "T0, T1", "T0, T1, T2"];

/// Down and up ports of every tier, from `ports` or from `radix` and
/// `oversubscription`.
fn tier_ports(spec: &ClosSpec, tiers: usize) -> Result<Vec<TierPorts>, ScenarioError> {
    let top = tiers - 1;
    let ports = match (spec.radix, &spec.ports) {
        (Some(_), Some(_)) => return invalid("topology.ports", "give either radix or ports, not both"),
        (None, None) => {
            return invalid("topology.radix", "missing: give radix (ports per switch) or ports (down/up per tier)")
        }
        (Some(radix), None) => {
            if radix == 0 || radix > MAX_PORTS {
                return invalid("topology.radix", format!("{radix} is not a switch radix: use 1 to {MAX_PORTS}"));
            }
            if spec.oversubscription.len() > top {
                return invalid(
                    "topology.oversubscription",
                    format!(
                        "{} ratios given, but only the {top} tier(s) below the top have up ports",
                        spec.oversubscription.len()
                    ),
                );
            }
            let mut ports = Vec::with_capacity(tiers);
            for t in 0..top {
                let ratio = spec.oversubscription.get(t).copied().unwrap_or(1.0);
                let field = format!("topology.oversubscription[{t}]");
                if !(ratio.is_finite() && ratio > 0.0) {
                    return invalid(
                        field,
                        format!("{} is not a down:up ratio: use a positive number such as 1 or 3", number(ratio)),
                    );
                }
                let up = radix as f64 / (ratio + 1.0);
                if (up - up.round()).abs() > 1e-9 || up.round() < 1.0 {
                    return if ratio == 1.0 {
                        invalid(
                            "topology.radix",
                            format!("{radix} cannot build a {tiers}-tier Clos: ports per tier must be even"),
                        )
                    } else {
                        invalid(
                            field,
                            format!("{ratio}:1 splits radix {radix} into {up:.2} up ports, not a whole number"),
                        )
                    };
                }
                let up = up.round() as u32;
                ports.push(TierPorts { down: radix - up, up });
            }
            ports.push(TierPorts { down: radix, up: 0 });
            ports
        }
        (None, Some(ports)) => {
            if !spec.oversubscription.is_empty() {
                return invalid(
                    "topology.oversubscription",
                    "applies to radix; with ports, give each tier's down and up counts directly",
                );
            }
            if ports.len() != tiers {
                return invalid(
                    "topology.ports",
                    format!(
                        "{} entries for a {tiers}-tier Clos: give one {{down, up}} per switch tier, T0 first",
                        ports.len()
                    ),
                );
            }
            for (t, p) in ports.iter().enumerate() {
                if p.down == 0 || p.down > MAX_PORTS {
                    return invalid(
                        format!("topology.ports[{t}].down"),
                        format!("{} is not a port count: use 1 to {MAX_PORTS}", p.down),
                    );
                }
                if t < top && (p.up == 0 || p.up > MAX_PORTS) {
                    return invalid(
                        format!("topology.ports[{t}].up"),
                        format!(
                            "{} is not a port count: tier {t} needs 1 to {MAX_PORTS} ports up to tier {}",
                            p.up,
                            t + 1
                        ),
                    );
                }
                if t == top && p.up != 0 {
                    return invalid(
                        format!("topology.ports[{t}].up"),
                        format!("{}: the top tier has no up ports; set 0", p.up),
                    );
                }
            }
            ports.clone()
        }
    };
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clos(tiers: u8, radix: u32, rate: &str) -> ClosSpec {
        ClosSpec {
            tiers,
            radix: Some(radix),
            oversubscription: Vec::new(),
            ports: None,
            link_rate: PerTier::One(rate.parse().unwrap()),
            link_delay: default_link_delay(),
            switch_latency: default_switch_latency(),
            native_port_rate: None,
            planes: 1,
            nic_ports: None,
            nic_ports_per_cage: None,
            nics_per_host: 1,
            rail_optimized: false,
            parallel_links: 1,
            nics: None,
            tor_stack: false,
        }
    }

    fn tiers_of(topo: &Topology) -> Vec<usize> {
        let mut count = vec![0; 3];
        for node in &topo.nodes {
            if let NodeRole::Switch { tier, .. } = node.role {
                count[tier as usize] += 1;
            }
        }
        count
    }

    #[test]
    fn fat_tree_k4_has_the_textbook_counts() {
        let topo = clos(3, 4, "100Gbps").build().unwrap();
        assert_eq!(topo.nics().len(), 16);
        assert_eq!(tiers_of(&topo), [8, 8, 4]);
        assert_eq!(topo.links.len(), 48);
        // Every switch uses all of its 4 ports.
        let adj = topo.adjacency();
        assert!((16..topo.nodes.len()).all(|n| adj[n].len() == 4));
    }

    #[test]
    fn three_tier_core_groups_follow_t1_index() {
        let topo = clos(3, 4, "100Gbps").build().unwrap();
        // T1 j of every pod reaches only T2 group j (2 cores each).
        for link in &topo.links {
            let (a, b) = (topo.node(link.a), topo.node(link.b));
            if let (NodeRole::Switch { tier: 1, .. }, NodeRole::Switch { tier: 2, .. }) = (a.role, b.role) {
                assert_eq!(a.index % 2, b.index / 2);
            }
        }
    }

    #[test]
    fn oversubscription_splits_the_radix() {
        let mut spec = clos(2, 64, "400Gbps");
        spec.oversubscription = vec![3.0];
        let plan = Plan::new(&spec).unwrap();
        assert_eq!(plan.ports, [TierPorts { down: 48, up: 16 }, TierPorts { down: 64, up: 0 }]);
        assert_eq!(plan.nics, 64 * 48);

        spec.oversubscription = vec![1.5];
        let err = spec.build().unwrap_err();
        assert_eq!(err.field, "topology.oversubscription[0]");
        assert!(err.message.contains("1.5"), "{err}");
    }

    #[test]
    fn odd_radix_is_rejected_by_name() {
        let err = clos(3, 7, "100Gbps").build().unwrap_err();
        assert_eq!(err.to_string(), "topology.radix: 7 cannot build a 3-tier Clos: ports per tier must be even");
    }

    #[test]
    fn parallel_links_divide_the_uplinks() {
        let mut spec = clos(2, 8, "100Gbps");
        spec.parallel_links = 2;
        let topo = spec.build().unwrap();
        // T0: 4 up ports as 2 spines x 2 links; 4 ToRs (8 spine ports / 2).
        assert_eq!(tiers_of(&topo), [4, 2, 0]);
        assert_eq!(topo.links.len(), 16 + 16);
        spec.parallel_links = 3;
        assert_eq!(spec.build().unwrap_err().field, "topology.parallel_links");
    }

    #[test]
    fn nics_trims_the_fabric_to_whole_hosts() {
        let mut spec = clos(2, 8, "100Gbps");
        spec.nics_per_host = 2;
        spec.nics = Some(5);
        let topo = spec.build().unwrap();
        // Rounded up to 3 hosts; 6 NICs need 2 ToRs of 4 down ports.
        assert_eq!(topo.nics().len(), 6);
        assert_eq!(tiers_of(&topo), [2, 4, 0]);
        spec.nics = Some(33);
        assert_eq!(spec.build().unwrap_err().field, "topology.nics");
    }

    /// HPN with its core tier (alibaba-hpn.txt s6.2, s7): aggregation
    /// switches keep 8 of their ports for the core (15:1). A second pod
    /// holding one segment is built with all of its aggregation switches.
    #[test]
    fn hpn_with_core_builds_a_partial_second_pod() {
        let mut spec = clos(3, 8, "400Gbps");
        spec.radix = None;
        spec.ports =
            Some(vec![TierPorts { down: 128, up: 60 }, TierPorts { down: 120, up: 8 }, TierPorts { down: 128, up: 0 }]);
        spec.link_rate = PerTier::Each(["200Gbps", "400Gbps", "400Gbps"].map(|r| r.parse().unwrap()).to_vec());
        (spec.planes, spec.nic_ports, spec.nics_per_host, spec.rail_optimized) = (2, Some(2), 8, true);
        spec.nics = Some(15_360 + 1024);
        let topo = spec.build().unwrap();
        assert_eq!(topo.nics().len(), 16_384);
        assert_eq!(tiers_of(&topo), [2 * 128, 2 * 120, 2 * 480]);
        let second_pod_tors =
            topo.nodes.iter().filter(|n| matches!(n.role, NodeRole::Switch { tier: 0, plane: 0, pod: 1 })).count();
        assert_eq!(second_pod_tors, 8);
        // NIC links, ToR up ports, aggregation up ports.
        assert_eq!(topo.links.len(), 2 * (16_384 + 128 * 60 + 120 * 8));
    }

    #[test]
    fn per_tier_lists_must_match_the_tiers() {
        let mut spec = clos(3, 8, "100Gbps");
        spec.link_rate = PerTier::Each(vec![Rate::from_gbps(100), Rate::from_gbps(400)]);
        let err = spec.build().unwrap_err();
        assert_eq!(err.field, "topology.link_rate");
        assert!(err.message.contains("[100Gbps, 400Gbps]"), "{err}");
    }

    #[test]
    fn per_tier_parses_one_value_or_a_list_and_keeps_unit_errors() {
        let one: PerTier<Rate> = serde_json::from_str("\"100Gbps\"").unwrap();
        assert_eq!(one, PerTier::One(Rate::from_gbps(100)));
        let each: PerTier<Time> = serde_json::from_str("[\"1us\", \"500ns\"]").unwrap();
        assert_eq!(each, PerTier::Each(vec![Time::from_us(1), Time::from_ns(500)]));
        let err = serde_json::from_str::<PerTier<Rate>>("\"100G\"").unwrap_err().to_string();
        assert!(err.contains("unknown rate unit 'G'"), "{err}");
        let err = serde_json::from_str::<PerTier<Rate>>("100").unwrap_err().to_string();
        assert!(err.contains("no unit"), "{err}");
    }

    #[test]
    fn native_port_rate_defaults_to_the_fastest_link_at_the_tier() {
        let mut spec = clos(3, 8, "100Gbps");
        spec.link_rate = PerTier::Each(["200Gbps", "400Gbps", "100Gbps"].map(|r| r.parse().unwrap()).to_vec());
        let plan = Plan::new(&spec).unwrap();
        assert_eq!(plan.native, [400, 400, 100].map(Rate::from_gbps));
    }
}
