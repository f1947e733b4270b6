//! LetFlow (Vanini et al., NSDI 2017): flowlet switching with a random
//! choice. A switch remembers, per flow (source, destination and UDP source
//! port: the 5-tuple of a RoCEv2 QP), the next hop of its current flowlet
//! and when its last packet passed; a packet that comes more than
//! `flowlet_timeout` after the one before starts a new flowlet on a next
//! hop drawn at random. Flowlets that find congestion slow down, their
//! gaps grow, and they move: that, not any measurement, is what balances
//! the load. The table is exact (one entry per flow and switch, as
//! ConWeave's ns-3 model keeps it), so flows never share an entry.

use crate::engine::{FastMap, Rng};
use crate::net::{LetflowConfig, Port, PortId};
use crate::topology::NodeId;
use crate::units::Time;

/// A flow at a switch: the switch, the flow's source and destination NICs
/// and its UDP source port.
type FlowKey = (u32, u32, u32, u16);

pub struct Letflow {
    timeout: Time,
    /// Per flow and switch: the flowlet's next hop and its last packet's time.
    flowlets: FastMap<FlowKey, (PortId, Time)>,
    rng: Rng,
    /// Flowlets started (every first packet of a flow at a switch included).
    started: u64,
}

impl Letflow {
    pub fn new(cfg: &LetflowConfig, seed: u64) -> Letflow {
        Letflow {
            timeout: cfg.flowlet_timeout,
            flowlets: FastMap::default(),
            rng: Rng::stream(seed, &[0x1E7F_1017]),
            started: 0,
        }
    }

    /// The next hop among `hops` at `switch` for a packet of flow (`src`,
    /// `dst`, `entropy`) at `now`. A flowlet whose next hop left the group
    /// or went down starts anew. None when every next hop is down.
    pub fn pick(
        &mut self,
        switch: NodeId,
        (src, dst, entropy): (NodeId, NodeId, u16),
        hops: &[PortId],
        ports: &[Port],
        now: Time,
    ) -> Option<PortId> {
        let up = |p: PortId| ports[p.0 as usize].up;
        let entry = self.flowlets.entry((switch.0, src.0, dst.0, entropy)).or_insert((PortId(u32::MAX), Time::ZERO));
        let (port, last) = *entry;
        let fresh = port.0 != u32::MAX && now - last <= self.timeout && up(port) && hops.contains(&port);
        let chosen = if fresh {
            port
        } else {
            let live = hops.iter().filter(|&&p| up(p)).count();
            if live == 0 {
                return None;
            }
            self.started += 1;
            let k = self.rng.below(live as u64) as usize;
            *hops.iter().filter(|&&p| up(p)).nth(k).expect("k is below the live count")
        };
        *entry = (chosen, now);
        Some(chosen)
    }

    /// Flowlets started so far.
    pub fn flowlets_started(&self) -> u64 {
        self.started
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Rate;

    fn ports(n: usize) -> Vec<Port> {
        (0..n).map(|i| Port::new(NodeId(0), i as u16, Rate::from_gbps(100), Time::ZERO, false, false)).collect()
    }

    #[test]
    fn a_flow_keeps_its_port_within_a_flowlet_and_a_gap_moves_it() {
        let hops: Vec<PortId> = (0..8).map(PortId).collect();
        let p = ports(8);
        let mut lf = Letflow::new(&LetflowConfig::default(), 3);
        let flow = (NodeId(10), NodeId(11), 4791);
        let first = lf.pick(NodeId(0), flow, &hops, &p, Time::ZERO).unwrap();
        // Packets 1us apart for 1ms: one flowlet, one port.
        for k in 1..1000 {
            assert_eq!(lf.pick(NodeId(0), flow, &hops, &p, Time::from_us(k)), Some(first));
        }
        assert_eq!(lf.flowlets_started(), 1);
        // Gaps longer than the timeout: each packet a new flowlet on a random port.
        let mut seen = std::collections::BTreeSet::new();
        for k in 0..64 {
            seen.insert(lf.pick(NodeId(0), flow, &hops, &p, Time::from_ms(2 + k)).unwrap());
        }
        assert_eq!(lf.flowlets_started(), 65);
        assert!(seen.len() >= 6, "new flowlets draw from every port: {seen:?}");
    }

    #[test]
    fn flows_are_apart_and_a_down_port_starts_a_new_flowlet() {
        let hops = [PortId(0), PortId(1)];
        let mut p = ports(2);
        let mut lf = Letflow::new(&LetflowConfig::default(), 1);
        let a = (NodeId(10), NodeId(11), 1);
        let port = lf.pick(NodeId(0), a, &hops, &p, Time::ZERO).unwrap();
        p[port.0 as usize].up = false;
        let other = lf.pick(NodeId(0), a, &hops, &p, Time::from_us(1)).unwrap();
        assert_ne!(other, port);
        p[other.0 as usize].up = false;
        assert_eq!(lf.pick(NodeId(0), a, &hops, &p, Time::from_us(2)), None);
    }
}
