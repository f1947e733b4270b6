//! Where a stream's traffic goes: one path per QP under ECMP, or spread
//! over every shortest path for a design that sprays, and what of it is
//! lost on links that are down but still used.
//!
//! A sprayed stream's traffic is pushed hop by hop down the shortest-path
//! DAG toward its destination, split at every switch over the next hops it
//! uses (equally, or by their rates): the share reaching a dead link is
//! lost, the share reaching a switch with no next hop too. Shares are added
//! up per bundle: the links from a switch to the tier above, or from the
//! tier above into a switch, which spraying loads evenly in a Clos. A
//! bundle is one resource with the capacity of its working links, so a
//! sprayed stream of a 131,072-GPU fabric crosses tens of resources, not
//! thousands of links. Where a Clos is not symmetric (links of one bundle
//! leading to different places) this is an approximation: docs/EXPERIMENTS.md
//! ("flow mode vs packet mode") says where it shows.

use super::routing::{Routing, View};
use crate::engine::FastMap;
use crate::net::PortId;
use crate::switch::ecmp_pick;
use crate::topology::{NodeId, NodeRole, Topology};

/// How a design places a QP's traffic on the fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Every packet of a QP takes the path ECMP hashes its 5-tuple to.
    Hash,
    /// Packets are spread over every shortest path. `nic` when the NIC
    /// sprays over its ports (planes) too; `avoid` when a switch stops
    /// using its own dead links at once (adaptive routing); otherwise
    /// only the routes' reaction removes them.
    Spray { nic: bool, avoid: bool },
}

/// Resources of the flow model: single links, or bundles of them.
pub struct Bundles {
    /// The bundle of each port.
    pub of_port: Vec<u32>,
    /// Ports of each bundle: `ports[start[b]..start[b + 1]]`.
    pub start: Vec<u32>,
    pub ports: Vec<PortId>,
}

impl Bundles {
    /// Each port its own resource.
    pub fn single(ports: usize) -> Bundles {
        Bundles {
            of_port: (0..ports as u32).collect(),
            start: (0..=ports as u32).collect(),
            ports: (0..ports as u32).map(PortId).collect(),
        }
    }

    /// Links between switches grouped by the lower switch and direction:
    /// its links up, and the links down into it. Links to NICs and between
    /// switches of one tier stay single.
    pub fn tiered(topo: &Topology) -> Bundles {
        let tier = |n: NodeId| match topo.node(n).role {
            NodeRole::Switch { tier, .. } => Some(tier),
            NodeRole::Nic { .. } => None,
        };
        let mut key_of: FastMap<(u32, u8), u32> = FastMap::default();
        let mut of_port = Vec::with_capacity(topo.links.len() * 2);
        let mut next = 0u32;
        for link in &topo.links {
            for (from, to) in [(link.a, link.b), (link.b, link.a)] {
                let key = match (tier(from), tier(to)) {
                    (Some(a), Some(b)) if a < b => Some((from.0, 0)),
                    (Some(a), Some(b)) if a > b => Some((to.0, 1)),
                    _ => None,
                };
                let b = match key {
                    Some(key) => *key_of.entry(key).or_insert_with(|| {
                        next += 1;
                        next - 1
                    }),
                    None => {
                        next += 1;
                        next - 1
                    }
                };
                of_port.push(b);
            }
        }
        let mut start = vec![0u32; next as usize + 1];
        for &b in &of_port {
            start[b as usize + 1] += 1;
        }
        for b in 0..next as usize {
            start[b + 1] += start[b];
        }
        let mut fill = start.clone();
        let mut ports = vec![PortId(0); of_port.len()];
        for (p, &b) in of_port.iter().enumerate() {
            ports[fill[b as usize] as usize] = PortId(p as u32);
            fill[b as usize] += 1;
        }
        Bundles { of_port, start, ports }
    }

    pub fn len(&self) -> usize {
        self.start.len() - 1
    }

    pub fn members(&self, b: u32) -> &[PortId] {
        &self.ports[self.start[b as usize] as usize..self.start[b as usize + 1] as usize]
    }
}

/// Where one stream's traffic goes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Route {
    /// (bundle, share of the stream's rate it carries); each bundle once.
    pub uses: Vec<(u32, f64)>,
    /// Share of the stream's rate that reaches the destination.
    pub delivered: f64,
    /// Ports of one of its paths (the first next hop at every switch), for
    /// its latency.
    pub path: Vec<PortId>,
}

impl Route {
    /// A route that moves nothing, its latency measured from `port`.
    pub fn stalled_at(port: PortId) -> Route {
        Route { path: vec![port], ..Route::default() }
    }
}

/// What the fabric is doing now, as the route computation needs it.
pub struct Fabric<'a> {
    pub routing: &'a mut Routing,
    /// The routes' view (the control plane's, or MRC's own of its paths).
    pub view: &'a View,
    /// Per port: carrying traffic now.
    pub alive: &'a [bool],
    /// Per NIC port: the NIC believes it up.
    pub nic_sees: &'a [bool],
    pub bundles: &'a Bundles,
    /// Each switch's ECMP seed, by node.
    pub seeds: &'a [u64],
    /// Per port: its rate, which weighs a split.
    pub rate: &'a [u64],
}

/// The ECMP path of a QP leaving by `first` with UDP source port `entropy`,
/// hashed at every switch as the packet model hashes it.
pub fn hashed(fabric: &mut Fabric<'_>, first: PortId, src: NodeId, dst: NodeId, entropy: u16) -> Route {
    let mut route = Route { delivered: 0.0, ..Route::default() };
    let mut hops = Vec::new();
    let mut port = first;
    for _ in 0..64 {
        route.path.push(port);
        if !fabric.alive[port.0 as usize] {
            break;
        }
        route.uses.push((fabric.bundles.of_port[port.0 as usize], 1.0));
        let next = fabric.routing.peer(port);
        if next == dst {
            route.delivered = 1.0;
            break;
        }
        if fabric.routing.is_nic(next) {
            break;
        }
        fabric.routing.next_hops(next, dst, fabric.view, &mut hops);
        match ecmp_pick(&hops, src.0, dst.0, entropy, fabric.seeds[next.0 as usize]) {
            Some(p) => port = p,
            None => break,
        }
    }
    route
}

/// Shares of a sprayed stream, from each switch it reaches toward each
/// class of destinations, kept until the fabric changes.
#[derive(Default)]
pub struct SprayCache {
    /// Per class of destinations, per switch (by its number): its spread
    /// in `spreads`, or `UNKNOWN`.
    by_class: FastMap<u32, Vec<u32>>,
    /// Spreads, each once: the switches of a tier toward one class mostly
    /// spread alike (one bundle down into the destination's switch), and a
    /// switch above them adds up one share per distinct spread, not one
    /// per next hop.
    spreads: Vec<Spread>,
    interned: FastMap<Vec<(u32, u64)>, u32>,
}

const UNKNOWN: u32 = u32::MAX;

/// A unit of traffic pushed from a switch toward a class of NICs.
struct Spread {
    /// Bundles it loads, up to the switches attached to the destination.
    uses: Vec<(u32, f64)>,
    /// What arrives at each of those switches.
    arrivals: Vec<(NodeId, f64)>,
    /// One path's ports.
    path: Vec<PortId>,
}

impl SprayCache {
    pub fn clear(&mut self) {
        self.by_class.clear();
        self.spreads.clear();
        self.interned.clear();
    }

    /// The spread's index, the same for the same loads and arrivals.
    fn intern(&mut self, spread: Spread) -> u32 {
        // Loads, a separator, arrivals: exact bits, so only equal sums match.
        let key: Vec<(u32, u64)> = (spread.uses.iter().map(|&(b, x)| (b, x.to_bits())))
            .chain(std::iter::once((u32::MAX, 0)))
            .chain(spread.arrivals.iter().map(|&(n, m)| (n.0, m.to_bits())))
            .collect();
        if let Some(&at) = self.interned.get(&key) {
            return at;
        }
        let at = self.spreads.len() as u32;
        self.spreads.push(spread);
        self.interned.insert(key, at);
        at
    }
}

/// The route of a stream that sprays from `src` to `dst`, starting on the
/// NIC ports `first` with the shares given (a QP bound to one port gives
/// one; a NIC that sprays over its planes gives each plane whose switch
/// reaches the destination an equal share).
pub fn sprayed(
    fabric: &mut Fabric<'_>,
    cache: &mut SprayCache,
    avoid: bool,
    first: &[(PortId, f64)],
    dst: NodeId,
) -> Route {
    let mut route = Route::default();
    // (bundle, share) as they come, summed per bundle at the end: cheaper
    // than a map for the hundred-odd bundles of a route over many planes.
    let mut uses: Vec<(u32, f64)> = Vec::new();
    let mut hops = Vec::new();
    for &(port, share) in first {
        if route.path.is_empty() {
            route.path.push(port);
        }
        if !fabric.alive[port.0 as usize] {
            continue;
        }
        uses.push((fabric.bundles.of_port[port.0 as usize], share));
        let tor = fabric.routing.peer(port);
        if tor == dst {
            route.delivered += share;
            continue;
        }
        let class = fabric.routing.class(dst, fabric.view);
        let at = spread_from(fabric, cache, avoid, tor, dst, class);
        let Spread { uses: from_switch, arrivals, path } = &cache.spreads[at as usize];
        if route.path.len() == 1 {
            route.path.extend_from_slice(path);
        }
        uses.extend(from_switch.iter().map(|&(b, s)| (b, s * share)));
        // The last hop, from a switch attached to the destination.
        for &(sw, mass) in arrivals {
            fabric.routing.next_hops(sw, dst, fabric.view, &mut hops);
            if avoid {
                hops.retain(|p| fabric.alive[p.0 as usize]);
            }
            let total: u64 = hops.iter().map(|p| fabric.rate[p.0 as usize]).sum();
            for &h in &hops {
                let s = share * mass * fabric.rate[h.0 as usize] as f64 / total as f64;
                if fabric.alive[h.0 as usize] {
                    uses.push((fabric.bundles.of_port[h.0 as usize], s));
                    route.delivered += s;
                }
            }
        }
    }
    route.uses = summed_by_bundle(uses);
    route.uses.retain(|&(_, s)| s > 0.0);
    route
}

/// `pairs` summed per bundle, sorted by bundle: each bundle's shares added
/// in the order they came.
fn summed_by_bundle(mut pairs: Vec<(u32, f64)>) -> Vec<(u32, f64)> {
    pairs.sort_by_key(|&(b, _)| b);
    let mut summed: Vec<(u32, f64)> = Vec::with_capacity(pairs.len());
    for (b, share) in pairs {
        match summed.last_mut() {
            Some(last) if last.0 == b => last.1 += share,
            _ => summed.push((b, 0.0 + share)),
        }
    }
    summed
}

/// A unit of traffic from switch `from` toward NIC `dst` (of `class`),
/// split at every switch over its next hops by their rates, down the
/// shortest-path DAG: the index of its spread in `cache`. Each switch's
/// spread is computed once per class and shared by every switch above it.
fn spread_from(
    fabric: &mut Fabric<'_>,
    cache: &mut SprayCache,
    avoid: bool,
    from: NodeId,
    dst: NodeId,
    class: u32,
) -> u32 {
    let slot = fabric.routing.switch_slot(from);
    let switches = fabric.routing.switch_count();
    let known = cache.by_class.entry(class).or_insert_with(|| vec![UNKNOWN; switches])[slot];
    if known != UNKNOWN {
        return known;
    }
    let spread = match fabric.routing.distance(from, dst, fabric.view) {
        None => Spread { uses: Vec::new(), arrivals: Vec::new(), path: Vec::new() },
        Some(1) => {
            // Its path is the last hop, to the destination (one of the
            // class's: their links from here are alike).
            let mut last = Vec::new();
            fabric.routing.next_hops(from, dst, fabric.view, &mut last);
            last.truncate(1);
            Spread { uses: Vec::new(), arrivals: vec![(from, 1.0)], path: last }
        }
        Some(_) => {
            let mut hops = Vec::new();
            fabric.routing.next_hops(from, dst, fabric.view, &mut hops);
            if avoid {
                hops.retain(|p| fabric.alive[p.0 as usize]);
            }
            let total: u64 = hops.iter().map(|p| fabric.rate[p.0 as usize]).sum();
            // Shares by bundle of the hop and by spread below it: few of each.
            let mut first: Vec<(u32, f64)> = Vec::new();
            let mut below: Vec<(u32, f64)> = Vec::new();
            let mut path = Vec::new();
            for (k, &h) in hops.iter().enumerate() {
                if !fabric.alive[h.0 as usize] {
                    // Its share is lost; the path still shows where it went.
                    if k == 0 {
                        path.push(h);
                    }
                    continue;
                }
                let share = fabric.rate[h.0 as usize] as f64 / total as f64;
                add(&mut first, fabric.bundles.of_port[h.0 as usize], share);
                let child = spread_from(fabric, cache, avoid, fabric.routing.peer(h), dst, class);
                add(&mut below, child, share);
                if k == 0 {
                    path.push(h);
                    path.extend_from_slice(&cache.spreads[child as usize].path);
                }
            }
            let mut uses: FastMap<u32, f64> = first.into_iter().collect();
            let mut arrivals: FastMap<u32, f64> = FastMap::default();
            for (child, share) in below {
                let spread = &cache.spreads[child as usize];
                for &(b, x) in &spread.uses {
                    *uses.entry(b).or_default() += share * x;
                }
                for &(n, m) in &spread.arrivals {
                    *arrivals.entry(n.0).or_default() += share * m;
                }
            }
            let mut uses: Vec<(u32, f64)> = uses.into_iter().collect();
            uses.sort_unstable_by_key(|&(b, _)| b);
            let mut arrivals: Vec<(NodeId, f64)> = arrivals.into_iter().map(|(n, m)| (NodeId(n), m)).collect();
            // Hash maps iterate in no fixed order: sort, for the same sums every run.
            arrivals.sort_unstable_by_key(|&(n, _)| n.0);
            Spread { uses, arrivals, path }
        }
    };
    // Spreads alike but for their path share one entry (and its path).
    let at = cache.intern(spread);
    cache.by_class.get_mut(&class).expect("made above")[slot] = at;
    at
}

/// Adds `share` to `key`'s entry of a short list.
fn add(list: &mut Vec<(u32, f64)>, key: u32, share: f64) {
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some((_, sum)) => *sum += share,
        None => list.push((key, share)),
    }
}
