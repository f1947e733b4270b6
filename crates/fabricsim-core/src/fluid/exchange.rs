//! An all-to-all run whole (`flow_mode.collectives: pipelined`, where the
//! design sprays): one stream stands for every pair of ranks.
//!
//! Max-min fair rates give every pair of an all-to-all of equal messages
//! the same rate until a bundle fills; progressive filling then freezes the
//! pairs that cross it and raises the others, so no pair is slower than
//! those through the most loaded bundle, and these, of one size, end last
//! and together. One stream at a pair's rate, loading each bundle with
//! every pair's share there, ends at that same time: the collective's
//! completion is its most loaded bundle's bytes over its capacity (and the
//! last packet's way), for n ranks in one stream instead of n(n - 1).
//!
//! The load is added up without routing every pair. Ranks whose NICs are
//! attached to the same switches by links in the same state (a group) have
//! the same route to a destination but for their own links; so do
//! destinations. One route per pair of groups gives the fabric's shares
//! between them, counted once per pair of ranks on different hosts; its
//! shares on the two representatives' own links go to each member's own
//! links, counted once per peer on another host. Pairs on one host use the
//! intra-host link instead, one message at a time per GPU, as the packet
//! model sends them: they cap the pair rate (`ExchangeRun::intra_cap`).

use super::paths::{Placement, Route};
use super::{FluidSimulation, Learner};
use crate::engine::FastMap;
use crate::ids::CollectiveId;
use crate::topology::NodeId;
use crate::units::Time;

/// One all-to-all run whole.
#[derive(Clone, Debug)]
pub(super) struct ExchangeRun {
    pub collective: CollectiveId,
    /// Each rank's NIC, in rank order.
    pub nics: Vec<NodeId>,
    /// Each rank's host.
    pub hosts: Vec<u32>,
    /// Each rank's peers on other hosts (over the network).
    pub network_peers: Vec<u32>,
    /// The share of a pair's bytes each of the sender's ports carries when
    /// the NIC does not spray: its QPs' (channel + k) mod ports, as the
    /// packet model binds them.
    pub port_shares: Vec<(usize, f64)>,
    /// Bytes each rank sends each other rank.
    pub pair_bytes: u64,
    /// Payload bytes per second a pair may move while a GPU sends to its
    /// host mates one after another over its intra-host link; infinite
    /// when no two ranks share a host.
    pub intra_cap: f64,
    /// The slowest pair's one-packet latency, as routed now.
    pub latency: Time,
    /// Its route and the fabric version it was computed at.
    pub routed: Option<(u64, Route)>,
    /// When it started: its pairs' probes run from then (`probes`).
    pub started: Time,
}

impl ExchangeRun {
    /// The all-to-all over `nics` (one per rank, on `hosts`), each pair
    /// `pair_bytes`, with the intra-host link's payload rate `intra_rate`;
    /// `port_shares` as the field says.
    pub fn new(
        collective: CollectiveId,
        nics: Vec<NodeId>,
        hosts: Vec<u32>,
        pair_bytes: u64,
        intra_rate: f64,
        port_shares: Vec<(usize, f64)>,
    ) -> Self {
        let mut per_host: FastMap<u32, u32> = FastMap::default();
        for &h in &hosts {
            *per_host.entry(h).or_default() += 1;
        }
        let mates = per_host.values().copied().max().unwrap_or(1).saturating_sub(1);
        let intra_cap = if mates == 0 { f64::INFINITY } else { intra_rate / f64::from(mates) };
        let network_peers = hosts.iter().map(|h| hosts.len() as u32 - per_host[h]).collect();
        ExchangeRun {
            collective,
            nics,
            hosts,
            network_peers,
            port_shares,
            pair_bytes,
            intra_cap,
            latency: Time::ZERO,
            routed: None,
            started: super::probes::IDLE,
        }
    }
}

impl ExchangeRun {
    /// Pairs of ranks on different hosts.
    pub fn network_pairs(&self) -> u64 {
        self.network_peers.iter().map(|&p| u64::from(p)).sum()
    }
}

/// How a pair's bytes spread over the sender's `ports` when each QP is
/// bound to one: QP k of channel c on port (c + k) mod ports, the bytes
/// split evenly over channels and QPs.
pub(super) fn port_shares(ports: usize, channels: u32, qps: u32) -> Vec<(usize, f64)> {
    let mut shares = vec![0.0; ports.max(1)];
    let (each, len) = (1.0 / f64::from(channels.max(1) * qps.max(1)), shares.len());
    for c in 0..channels.max(1) as usize {
        for k in 0..qps.max(1) as usize {
            shares[(c + k) % len] += each;
        }
    }
    shares.into_iter().enumerate().filter(|&(_, s)| s > 0.0).collect()
}

/// Ranks whose NICs look alike to the routes.
struct Group {
    members: Vec<u32>,
    /// Members per host.
    per_host: FastMap<u32, u32>,
}

impl Group {
    /// Pairs (a in `self`, b in `other`) on different hosts.
    fn pairs_with(&self, other: &Group) -> u64 {
        let same: u64 = (self.per_host.iter())
            .map(|(h, &n)| u64::from(n) * u64::from(other.per_host.get(h).copied().unwrap_or(0)))
            .sum();
        self.members.len() as u64 * other.members.len() as u64 - same
    }
}

impl FluidSimulation {
    /// Where all-to-all `x`'s traffic goes now, per pair: the route of a
    /// stream at one pair's rate standing for every pair.
    pub(super) fn exchange_route(&mut self, x: u32) -> Route {
        if let Some((version, route)) = &self.exchanges[x as usize].routed {
            if *version == self.fabric_version {
                return route.clone();
            }
        }
        let run = &self.exchanges[x as usize];
        let (nics, hosts, bound) = (run.nics.clone(), run.hosts.clone(), run.port_shares.clone());
        let intra = run.intra_cap.is_finite();
        // A pair's message is split over its connection's QPs.
        let qps = self.scenario.transport.qps().max(1);
        let piece = run.pair_bytes.div_ceil(u64::from(qps));
        let wire = self.largest_packet(piece, self.verb_of(super::Owner::Exchange(x))).wire;
        let groups = self.groups_of(&nics, &hosts, run.started);
        let group_of: Vec<u32> = {
            let mut of = vec![0u32; nics.len()];
            for (g, group) in groups.iter().enumerate() {
                group.members.iter().for_each(|&m| of[m as usize] = g as u32);
            }
            of
        };
        let own = |sim: &Self, nic: NodeId| -> (Vec<u32>, Vec<u32>) {
            let ports = sim.routing.node_ports(nic);
            let up = ports.iter().map(|p| sim.bundles.of_port[p.0 as usize]).collect();
            let down = ports.iter().map(|p| sim.bundles.of_port[p.peer().0 as usize]).collect();
            (up, down)
        };
        // Per pair of groups sharing a host, the shares on the two ends' own
        // links (a rank's own peers on its host are taken off those).
        let mut shares: FastMap<(u32, u32), (Vec<f64>, Vec<f64>)> = FastMap::default();
        let mut up_sum: Vec<Vec<f64>> = vec![Vec::new(); groups.len()];
        let mut down_sum: Vec<Vec<f64>> = vec![Vec::new(); groups.len()];
        let mut middle: FastMap<u32, f64> = FastMap::default();
        let mut delivered = 1.0f64;
        let (mut latency, mut path) = (Time::ZERO, Vec::new());
        if intra {
            latency = self.scenario.intra_host.latency;
        }
        for (g, from) in groups.iter().enumerate() {
            for (h, to) in groups.iter().enumerate() {
                let pairs = from.pairs_with(to);
                if pairs == 0 {
                    continue;
                }
                let (a, b) = representatives(from, to, &hosts);
                let (src, dst) = (nics[a as usize], nics[b as usize]);
                let route = self.pair_route(x, src, dst, &bound);
                let ((src_up, _), (_, dst_down)) = (own(self, src), own(self, dst));
                let mut up = vec![0.0; src_up.len()];
                let mut down = vec![0.0; dst_down.len()];
                for &(bundle, share) in &route.uses {
                    if let Some(k) = src_up.iter().position(|&u| u == bundle) {
                        up[k] += share;
                    } else if let Some(k) = dst_down.iter().position(|&d| d == bundle) {
                        down[k] += share;
                    } else {
                        *middle.entry(bundle).or_default() += share * pairs as f64;
                    }
                }
                add_scaled(&mut up_sum[g], &up, to.members.len() as f64);
                add_scaled(&mut down_sum[h], &down, from.members.len() as f64);
                delivered = delivered.min(route.delivered);
                // Each of the pair's QPs moves its share of the pair's rate.
                let qp_rate = self.rate_alone(&route, f64::INFINITY) / qps as f64;
                let pair_latency = self.message_latency(&route, piece as f64, wire, qp_rate);
                if pair_latency > latency || path.is_empty() {
                    latency = latency.max(pair_latency);
                    path = route.path;
                }
                if from.per_host.keys().any(|host| to.per_host.contains_key(host)) {
                    shares.insert((g as u32, h as u32), (up, down));
                }
            }
        }
        // Each member's own links: its group's shares toward every rank,
        // less those toward the ranks of its own host.
        let mut on_host: FastMap<u32, Vec<u32>> = FastMap::default();
        for (i, &h) in hosts.iter().enumerate() {
            on_host.entry(h).or_default().push(i as u32);
        }
        let mut uses: Vec<(u32, f64)> = middle.into_iter().collect();
        for (i, &nic) in nics.iter().enumerate() {
            let g = group_of[i];
            let (src_up, dst_down) = own(self, nic);
            let mut up = up_sum[g as usize].clone();
            let mut down = down_sum[g as usize].clone();
            for &mate in &on_host[&hosts[i]] {
                let h = group_of[mate as usize];
                if let Some((mate_up, _)) = shares.get(&(g, h)) {
                    add_scaled(&mut up, mate_up, -1.0);
                }
                if let Some((_, mate_down)) = shares.get(&(h, g)) {
                    add_scaled(&mut down, mate_down, -1.0);
                }
            }
            let own_uses = src_up.iter().zip(&up).chain(dst_down.iter().zip(&down));
            uses.extend(own_uses.map(|(&b, &share)| (b, share)).filter(|&(_, share)| share > 1e-12));
        }
        uses.sort_unstable_by_key(|&(b, _)| b);
        let route = Route { uses, delivered, path };
        let run = &mut self.exchanges[x as usize];
        run.latency = latency;
        run.routed = Some((self.fabric_version, route.clone()));
        route
    }

    /// Ranks in groups: NICs attached to the same switches, port by port,
    /// by links in the same state (carrying traffic, seen by the NIC, in
    /// the routes' view and the control plane's, found by probes running
    /// since `probing`) at the same rate. Numbered in rank order.
    fn groups_of(&self, nics: &[NodeId], hosts: &[u32], probing: Time) -> Vec<Group> {
        let mut by_key: FastMap<Vec<(u32, [bool; 8], u64)>, u32> = FastMap::default();
        let mut groups: Vec<Group> = Vec::new();
        // The control plane's view routes pairs still learning.
        let control_plane = &self.known_by[Learner::ControlPlane as usize];
        for (i, &nic) in nics.iter().enumerate() {
            let key: Vec<(u32, [bool; 8], u64)> = (self.routing.node_ports(nic).iter())
                .map(|&p| {
                    let (out, back) = (p.0 as usize, p.peer().0 as usize);
                    let state = [
                        self.alive[out],
                        self.alive[back],
                        self.nic_sees[out],
                        self.view.port_up[out],
                        self.view.port_up[back],
                        control_plane.port_up[out],
                        control_plane.port_up[back],
                        self.probes_show_alive(p, probing),
                    ];
                    (self.routing.peer(p).0, state, self.rate[out])
                })
                .collect();
            let next = groups.len() as u32;
            let g = *by_key.entry(key).or_insert(next);
            if g == next {
                groups.push(Group { members: Vec::new(), per_host: FastMap::default() });
            }
            groups[g as usize].members.push(i as u32);
            *groups[g as usize].per_host.entry(hosts[i]).or_default() += 1;
        }
        groups
    }

    /// The route from NIC `src` to NIC `dst` in a design that sprays; the
    /// sender's ports carry `bound`'s shares where its NIC does not spray.
    fn pair_route(&mut self, x: u32, src: NodeId, dst: NodeId, bound: &[(usize, f64)]) -> Route {
        let Placement::Spray { nic, avoid } = self.placement else {
            unreachable!("an all-to-all runs whole only where the design sprays (whole_collectives)")
        };
        let since = self.exchanges[x as usize].started;
        let unaware = self.is_exchange_unaware(x);
        self.sprayed_route(src, dst, (nic, since), (avoid, unaware), bound)
    }

    /// An all-to-all alone on the fabric as it is: a pair's bytes at the
    /// pair's rate, and the last packet's way.
    pub(super) fn ideal_exchange(&mut self, x: u32) -> Time {
        let route = self.exchange_route(x);
        let run = &self.exchanges[x as usize];
        let rate = self.rate_alone(&route, run.intra_cap);
        Time::from_secs_f64(run.pair_bytes as f64 / rate) + run.latency
    }
}

/// A rank of `from` and one of `to` on different hosts (the pair of groups
/// has one).
fn representatives(from: &Group, to: &Group, hosts: &[u32]) -> (u32, u32) {
    for &a in &from.members {
        if let Some(&b) = to.members.iter().find(|&&b| hosts[b as usize] != hosts[a as usize]) {
            return (a, b);
        }
    }
    unreachable!("pairs_with counted a pair on two hosts")
}

/// `sum += scale * add`, growing `sum` to `add`'s length.
fn add_scaled(sum: &mut Vec<f64>, add: &[f64], scale: f64) {
    if sum.len() < add.len() {
        sum.resize(add.len(), 0.0);
    }
    for (s, a) in sum.iter_mut().zip(add) {
        *s += scale * a;
    }
}
