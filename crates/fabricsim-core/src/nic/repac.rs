//! Disjoint paths by hash reproduction (RePaC), as HPN's collective library
//! opens its connections (alibaba-hpn.txt s6.1, Appendix B, Algorithm 1):
//! the host knows every switch's ECMP hash and seed and its next-hop
//! groups, so it can replay, for a candidate UDP source port, the exact
//! path a packet will take, and keep only source ports whose paths share
//! no link with those already chosen.
//!
//! The replay reads the same route table and calls the same hash as the
//! switches (`switch::ecmp_pick`), so a chosen path is the one packets
//! take for as long as the routes do not change.

use crate::engine::Rng;
use crate::ids::QpId;
use crate::switch::{ecmp_pick, Routes};
use crate::topology::{LinkId, NodeId, PortId};
use crate::transport::STREAM_QP;

/// How many candidate source ports a QP tries before settling for the
/// least-shared path. The RoCE source-port space is 16384 values
/// (0xC000-0xFFFF); 1024 finds a free path among 60 uplinks with
/// overwhelming probability and keeps the search bounded on large fabrics.
pub const CANDIDATES: u32 = 1024;

/// The candidate source ports of QP `qp`: draws of its own stream, the
/// first its default (`QpSetup::entropy_of`).
pub fn candidates(seed: u64, qp: QpId) -> impl Iterator<Item = u16> {
    let mut draws = Rng::stream(seed, &[STREAM_QP, qp.0 as u64]);
    std::iter::repeat_with(move || 0xC000 | (draws.next_u64() as u16 & 0x3FFF)).take(CANDIDATES as usize)
}

/// How many of a connection's `qps` paths may share one NIC access link:
/// as many as its ports force onto it.
pub fn per_access(qps: u32, src_ports: usize, dst_ports: usize) -> u32 {
    qps.div_ceil(src_ports.min(dst_ports).max(1) as u32)
}

/// The fabric a path is replayed on.
pub struct Fabric<'a> {
    pub routes: &'a Routes,
    /// The node at the sending end of each port.
    pub port_node: &'a dyn Fn(PortId) -> NodeId,
    /// Each switch's ECMP seed.
    pub seed: &'a dyn Fn(NodeId) -> u64,
    /// Whether a link attaches a NIC.
    pub is_access: &'a dyn Fn(LinkId) -> bool,
}

impl Fabric<'_> {
    /// The links from NIC port `from` to NIC `dst` a packet of
    /// (`src`, `dst`, `entropy`) crosses, and the next-hop groups the
    /// replay looked into (their sizes summed). Empty when some switch
    /// has no route.
    pub fn hashed_path(&self, from: PortId, src: NodeId, dst: NodeId, entropy: u16) -> (Vec<LinkId>, u64) {
        let mut links = vec![from.link()];
        let mut examined = 0;
        let mut node = (self.port_node)(from.peer());
        // A shortest path visits each switch once; the bound guards the loop.
        for _ in 0..64 {
            if node == dst {
                return (links, examined);
            }
            let hops = self.routes.next_hops(node, dst);
            examined += hops.len() as u64;
            let Some(out) = ecmp_pick(hops, src.0, dst.0, entropy, (self.seed)(node)) else {
                return (Vec::new(), examined);
            };
            links.push(out.link());
            node = (self.port_node)(out.peer());
        }
        (Vec::new(), examined)
    }

    /// The first of `candidates` (source ports) whose path from `from`
    /// conflicts with none of `chosen`, else the one with the fewest
    /// conflicts (the first when none has a route); takes its path into
    /// `chosen`. Returns it and whether its path is disjoint.
    pub fn pick(
        &self,
        chosen: &mut Chosen,
        (from, src, dst): (PortId, NodeId, NodeId),
        per_access: u32,
        candidates: impl Iterator<Item = u16>,
        tally: &mut SearchTally,
    ) -> (u16, bool) {
        let mut best: Option<(usize, u16, Vec<LinkId>)> = None;
        let mut first = None;
        for entropy in candidates {
            first = first.or(Some(entropy));
            let (path, examined) = self.hashed_path(from, src, dst, entropy);
            tally.candidates += 1;
            tally.links_examined += examined;
            if path.is_empty() {
                continue;
            }
            let conflicts = chosen.conflicts(&path, self.is_access, per_access);
            if best.as_ref().is_none_or(|(c, ..)| conflicts < *c) {
                best = Some((conflicts, entropy, path));
                if conflicts == 0 {
                    break;
                }
            }
        }
        let Some((conflicts, entropy, path)) = best else { return (first.unwrap_or_default(), false) };
        chosen.take(&path, self.is_access);
        (entropy, conflicts == 0)
    }
}

/// The paths chosen so far for one connection.
#[derive(Default)]
pub struct Chosen {
    /// Links between switches any chosen path crosses.
    fabric: Vec<LinkId>,
    /// How many chosen paths cross each NIC access link.
    access: Vec<(LinkId, u32)>,
}

impl Chosen {
    /// Links of `path` already taken: every shared link between switches,
    /// plus each access link shared by more than `per_access` paths (QPs
    /// that share a NIC port cannot avoid its link; the rest must).
    pub fn conflicts(&self, path: &[LinkId], is_access: impl Fn(LinkId) -> bool, per_access: u32) -> usize {
        path.iter()
            .filter(|&&l| match is_access(l) {
                true => self.access.iter().any(|&(a, n)| a == l && n >= per_access),
                false => self.fabric.contains(&l),
            })
            .count()
    }

    pub fn take(&mut self, path: &[LinkId], is_access: impl Fn(LinkId) -> bool) {
        for &l in path {
            if !is_access(l) {
                self.fabric.push(l);
            } else if let Some(entry) = self.access.iter_mut().find(|(a, _)| *a == l) {
                entry.1 += 1;
            } else {
                self.access.push((l, 1));
            }
        }
    }
}

/// What the search cost and found, over a run's connections.
#[derive(Clone, Copy, Debug, Default)]
pub struct SearchTally {
    pub connections: u64,
    pub qps: u64,
    /// QPs whose path shares no link it need not share.
    pub disjoint_qps: u64,
    /// Connections that got fewer disjoint paths than QPs, and the fewest
    /// such a connection got (with its QP count).
    pub short_connections: u64,
    pub fewest: Option<(u64, u64)>,
    /// Candidate source ports replayed, and next hops looked at.
    pub candidates: u64,
    pub links_examined: u64,
}

impl SearchTally {
    /// One connection of `qps` QPs, `disjoint` of which got disjoint paths.
    pub fn add_connection(&mut self, qps: u64, disjoint: u64) {
        self.connections += 1;
        self.qps += qps;
        self.disjoint_qps += disjoint;
        if disjoint < qps {
            self.short_connections += 1;
            if self.fewest.is_none_or(|(d, q)| disjoint * q < d * qps) {
                self.fewest = Some((disjoint, qps));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_fabric_link_conflicts_a_shared_access_link_only_beyond_its_share() {
        let access = |l: LinkId| l.0 < 10;
        let mut chosen = Chosen::default();
        chosen.take(&[LinkId(1), LinkId(20), LinkId(30), LinkId(5)], access);
        assert_eq!(chosen.conflicts(&[LinkId(1), LinkId(21), LinkId(31), LinkId(5)], access, 2), 0);
        assert_eq!(chosen.conflicts(&[LinkId(1), LinkId(20), LinkId(31), LinkId(5)], access, 2), 1);
        assert_eq!(chosen.conflicts(&[LinkId(1), LinkId(21), LinkId(31), LinkId(5)], access, 1), 2);
    }
}
