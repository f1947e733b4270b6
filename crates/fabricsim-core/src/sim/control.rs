//! Faults and the slow control plane: applying scheduled failures and
//! recomputing routes after the reconvergence delay.

use std::collections::VecDeque;

use super::{Event, Simulation};
use crate::faults::FaultAction;
use crate::net::{DropCause, PortId};
use crate::nic::PortFailover;
use crate::switch::{Balancer, Routes};
use crate::topology::NodeId;
use crate::units::Time;

impl Simulation {
    pub(super) fn on_fault(&mut self, i: u32) {
        let (_, action) = self.faults[i as usize];
        let routed = match action {
            FaultAction::PortUp { port, up, routed } => {
                let nic_port = [port, port.peer()].into_iter().find(|p| self.is_nic_port(*p));
                let seen_before = nic_port.map(|p| self.nic_sees_up(p));
                self.set_port_up(port, up);
                if let (Some(p), Some(before)) = (nic_port, seen_before) {
                    let now_up = self.nic_sees_up(p);
                    if now_up != before {
                        self.events
                            .schedule_in(self.nic_notice_delay(p, now_up), Event::NicPortState { port: p, up: now_up });
                    }
                }
                if up {
                    self.try_transmit(port);
                } else {
                    self.flush_port(port);
                }
                routed
            }
            FaultAction::PortLoss { port, rate } => {
                self.ports[port.0 as usize].loss = rate;
                false
            }
            FaultAction::EvLoss { port, ev, rate } => {
                self.ev_loss.retain(|&(p, e, _)| (p, e) != (port, ev));
                if rate > 0.0 {
                    self.ev_loss.push((port, ev, rate));
                }
                false
            }
            FaultAction::SwitchUp { node, up, gray } => {
                self.set_switch(node, up, gray);
                !gray
            }
        };
        self.watch_stacks();
        if routed {
            let changed = match action {
                FaultAction::SwitchUp { node, .. } => Watched::Switch(node),
                FaultAction::PortUp { port, .. } => Watched::Port(port),
                FaultAction::PortLoss { .. } | FaultAction::EvLoss { .. } => unreachable!("not routed"),
            };
            self.tell_control_plane(changed);
        }
    }

    /// The control plane looks at `changed` its reconvergence delay from now.
    fn tell_control_plane(&mut self, changed: Watched) {
        let delay = self.scenario.switch.reconvergence_delay;
        self.control.pending.push_back((self.events.now() + delay, changed));
        self.events.schedule_in(delay, Event::Reconverge);
    }

    fn is_nic_port(&self, port: PortId) -> bool {
        self.switches[self.ports[port.0 as usize].node.0 as usize].is_none()
    }

    /// Whether the NIC can use its port `port`: the NIC sees its receive
    /// direction fail (loss of signal); its transmit direction only when
    /// the ToR tells it (IEEE 802.3 link fault signalling) or, failing
    /// that, when LACP notices (alibaba-hpn.txt s10: a NIC firmware that
    /// ignored the remote fault kept sending into a dead direction).
    pub(super) fn nic_sees_up(&self, port: PortId) -> bool {
        let (tx, rx) = (self.ports[port.0 as usize].up, self.ports[port.peer().0 as usize].up);
        // A switch that is down (not gray) takes the light off its links.
        let tor = self.switches[self.ports[port.peer().0 as usize].node.0 as usize].as_ref();
        let lit = tor.is_none_or(|s| s.up || s.advertised);
        let nic = &self.scenario.nic;
        lit && rx && (tx || !(nic.link_fault_signaling || nic.port_failover == PortFailover::Lacp))
    }

    /// How long the NIC takes to notice its port `port` went down (or up):
    /// its remap delay, or LACP's timeout for a transmit direction that
    /// failed silently.
    fn nic_notice_delay(&self, port: PortId, up: bool) -> Time {
        let nic = &self.scenario.nic;
        match up {
            true => Time::ZERO,
            false if !nic.link_fault_signaling && self.ports[port.peer().0 as usize].up => {
                nic.remap_delay + nic.lacp_timeout
            }
            false => nic.remap_delay,
        }
    }

    /// A switch stops (or resumes) forwarding; with `gray`, its control
    /// plane goes on advertising it.
    fn set_switch(&mut self, node: NodeId, up: bool, gray: bool) {
        if let Some(sw) = self.switches[node.0 as usize].as_mut() {
            sw.up = up;
            sw.advertised = up || gray;
        }
        if !gray {
            // A switch that dies takes the light off its links: the
            // NICs attached to it see their ports go down (after
            // their remap delay) and come back with it.
            let delay = if up { Time::ZERO } else { self.scenario.nic.remap_delay };
            for k in 0..self.node_ports[node.0 as usize].len() {
                let peer = self.node_ports[node.0 as usize][k].peer();
                if self.switches[self.ports[peer.0 as usize].node.0 as usize].is_none() {
                    self.events.schedule_in(delay, Event::NicPortState { port: peer, up });
                }
            }
        }
    }

    /// Whether stack `i`'s secondary has lost its synchronisation with the
    /// primary: the stack link is down, or the primary's data plane is
    /// while its control plane still holds the primary role
    /// (alibaba-hpn.txt s4.1, Fig 8a). A primary that is wholly down is
    /// not a split: the secondary takes over.
    fn stack_split(&self, i: usize) -> bool {
        let stack = &self.stacks[i];
        let link_up = self.ports[stack.link.0 as usize].up && self.ports[stack.link.peer().0 as usize].up;
        let primary = self.switches[stack.primary.0 as usize].as_ref().expect("a stack joins switches");
        !link_up || (!primary.up && primary.advertised)
    }

    /// After a fault, every stack whose split state changed re-checks it
    /// once its failover delay has passed.
    fn watch_stacks(&mut self) {
        let delay = self.scenario.switch.stack_failover_delay;
        for i in 0..self.stacks.len() {
            if self.stack_split(i) != self.stacks[i].suspended {
                self.events.schedule_in(delay, Event::StackCheck(i as u32));
            }
        }
    }

    /// A split that still holds shuts the secondary down to keep the two
    /// from forwarding inconsistently; once the stack is whole again it
    /// resumes.
    pub(super) fn on_stack_check(&mut self, i: u32) {
        let i = i as usize;
        let split = self.stack_split(i);
        if split == self.stacks[i].suspended {
            return;
        }
        self.stacks[i].suspended = split;
        let secondary = self.stacks[i].secondary;
        self.set_switch(secondary, !split, false);
        self.tell_control_plane(Watched::Switch(secondary));
    }

    /// A port whose link went down loses what is queued for it. NIC ports
    /// keep their QPs' data, which the transport will retransmit.
    fn flush_port(&mut self, port: PortId) {
        let p = port.0 as usize;
        let is_switch = self.switches[self.ports[p].node.0 as usize].is_some();
        for class in 0..self.ports[p].queues.len() {
            while let Some(id) = self.ports[p].queues[class].front() {
                let wire = self.pool.get(id).wire();
                self.ports[p].dequeue(class, wire, &mut self.pool);
                if is_switch {
                    self.release_switch_buffer(port, id, class);
                }
                self.drop_packet(port, id, DropCause::LinkDown);
            }
        }
    }

    /// The control plane looks at each link or switch whose change is due
    /// by now, takes in its state as it is now, and recomputes its routes
    /// over links up in both directions and switches that advertise
    /// themselves, as it knows them. A failure is routed around its
    /// reconvergence delay after it happened if it still holds (a flap
    /// shorter than that is never seen, as BFD misses one shorter than its
    /// detection time), whatever else failed meanwhile; one the control
    /// plane is not told of (`control_plane: false`, a gray switch) never.
    /// Under weighted adaptive routing, with a link or switch down, every
    /// next hop is weighted by the capacity left behind it (spectrum-x.txt
    /// s4.4.2); with none down the weights would all be equal.
    pub(super) fn reconverge(&mut self) {
        let now = self.events.now();
        let mut changed = false;
        while let Some(&(_, watched)) = self.control.pending.front().filter(|(due, _)| *due <= now) {
            self.control.pending.pop_front();
            changed |= match watched {
                Watched::Port(port) => {
                    let up = self.ports[port.0 as usize].up;
                    std::mem::replace(&mut self.control.port_up[port.0 as usize], up) != up
                }
                Watched::Switch(node) => {
                    let advertised = self.switches[node.0 as usize].as_ref().is_none_or(|s| s.advertised);
                    std::mem::replace(&mut self.control.advertised[node.0 as usize], advertised) != advertised
                }
            };
        }
        // Changes of one instant are routed once; a flap already over
        // changes nothing.
        if !changed {
            return;
        }
        let ports = &self.ports;
        let view = &self.control;
        let usable = |p: PortId| view.port_up[p.0 as usize] && view.port_up[p.peer().0 as usize];
        let alive = |n: NodeId| view.advertised[n.0 as usize];
        let weighted = matches!(self.balancer, Balancer::Adaptive(_))
            && self.scenario.switch.adaptive.weighted
            && (view.port_up.iter().any(|up| !up) || view.advertised.iter().any(|a| !a));
        // Mb/s: a pebibit link still fits, a kilobit one still counts.
        let capacity = |p: PortId| (ports[p.0 as usize].rate.0 / 1_000_000).clamp(1, u32::MAX as u64) as u32;
        self.routes = Routes::compute(
            &self.topo,
            &self.node_ports,
            |p| ports[p.0 as usize].node,
            usable,
            alive,
            weighted.then_some(&capacity as &dyn Fn(PortId) -> u32),
        );
        // Next hops worked out ahead followed the old routes.
        self.next_hops.clear();
        match &mut self.balancer {
            Balancer::Drill(drill) => drill.routes_changed(self.routes.group_count()),
            Balancer::PathId(pro) => pro.routes_changed(),
            Balancer::Hash
            | Balancer::Adaptive(_)
            | Balancer::Letflow(_)
            | Balancer::ArTomahawk(_)
            | Balancer::Conweave(_) => {}
        }
    }
}

/// What a change the control plane is told of touched: a link direction,
/// or a switch (whether it advertises routes through it).
#[derive(Clone, Copy, Debug)]
pub(super) enum Watched {
    Port(PortId),
    Switch(NodeId),
}

/// The fabric as the control plane knows it: each link direction and switch
/// as it was when the control plane last looked, its reconvergence delay
/// after a change there. It lags the fabric, and never sees what it is not
/// told of.
pub(super) struct ControlView {
    port_up: Vec<bool>,
    advertised: Vec<bool>,
    /// Changes told and not yet looked at, with when each is due (in time
    /// order: every change waits the same delay).
    pending: VecDeque<(Time, Watched)>,
}

impl ControlView {
    pub(super) fn all_up(ports: usize, nodes: usize) -> ControlView {
        ControlView { port_up: vec![true; ports], advertised: vec![true; nodes], pending: VecDeque::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::PacketId;
    use crate::Setup;

    #[test]
    fn a_reconvergence_forgets_the_egress_ports_worked_out_on_the_old_routes() {
        // Warming works out a hashing switch's egress a few events ahead;
        // routes that change at the same instant, between the two, must
        // not be overtaken by the port kept from the old ones.
        let scenario = r#"{"topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"},
            "traffic": [{"kind": "permutation", "bytes": "64KiB"}]}"#;
        let parsed = crate::Scenario::from_json(scenario).expect("valid");
        let Some(crate::Model::Packet(mut sim)) = crate::Model::build(parsed, &mut Setup::default()).expect("builds")
        else {
            panic!("a packet model");
        };
        // A leaf's up-link, its far end a spine.
        let leaf = (0..sim.topo.nodes.len() as u32).map(NodeId).find(|&n| !sim.topo.is_nic(n)).expect("a switch");
        let nic = (0..sim.topo.nodes.len() as u32).map(NodeId).find(|&n| sim.topo.is_nic(n)).expect("a NIC");
        let hops = sim.routes.next_hops(leaf, nic).to_vec();
        let up_link = sim.node_ports[leaf.0 as usize]
            .iter()
            .copied()
            .find(|&p| !sim.topo.is_nic(sim.topo.port_node(p.peer())) && !hops.contains(&p))
            .expect("an up-link");
        let (kept, other) = (PacketId(5), PacketId(6));
        sim.next_hops.put(kept, up_link);
        sim.next_hops.put(other, up_link);
        sim.set_port_up(up_link, false);
        sim.control.pending.push_back((sim.events.now(), Watched::Port(up_link)));
        sim.reconverge();
        assert!(sim.control.pending.is_empty(), "the change was looked at");
        assert_eq!(sim.next_hops.take(kept), None, "a port from the old routes outlived them");
        assert_eq!(sim.next_hops.take(other), None);

        // Where nothing changed, nothing is forgotten.
        sim.next_hops.put(kept, hops[0]);
        sim.control.pending.push_back((sim.events.now(), Watched::Port(up_link)));
        sim.reconverge();
        assert_eq!(sim.next_hops.take(kept), Some(hops[0]));
    }
}
