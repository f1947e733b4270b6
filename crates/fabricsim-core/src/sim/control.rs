//! Faults and the slow control plane: applying scheduled failures and
//! recomputing routes after the reconvergence delay.

use super::{Event, Simulation};
use crate::faults::FaultAction;
use crate::net::{DropCause, PortId};
use crate::switch::{Balancer, Routes};

impl Simulation {
    pub(super) fn on_fault(&mut self, i: u32) {
        let (_, action) = self.faults[i as usize];
        let routed = match action {
            FaultAction::PortUp { port, up, routed } => {
                self.ports[port.0 as usize].up = up;
                // A NIC notices its own port going down after its remap delay.
                if self.switches[self.ports[port.0 as usize].node.0 as usize].is_none() {
                    let delay = if up { crate::units::Time::ZERO } else { self.scenario.nic.remap_delay };
                    self.events.schedule_in(delay, Event::NicPortState { port, up });
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
                if let Some(sw) = self.switches[node.0 as usize].as_mut() {
                    sw.up = up;
                    sw.advertised = up || gray;
                }
                if !gray {
                    // A switch that dies takes the light off its links: the
                    // NICs attached to it see their ports go down (after
                    // their remap delay) and come back with it.
                    let delay = if up { crate::units::Time::ZERO } else { self.scenario.nic.remap_delay };
                    for k in 0..self.node_ports[node.0 as usize].len() {
                        let peer = self.node_ports[node.0 as usize][k].peer();
                        if self.switches[self.ports[peer.0 as usize].node.0 as usize].is_none() {
                            self.events.schedule_in(delay, Event::NicPortState { port: peer, up });
                        }
                    }
                }
                !gray
            }
        };
        if routed {
            let delay = self.scenario.switch.reconvergence_delay;
            self.events.schedule_in(delay, Event::Reconverge);
        }
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

    /// Routes over links up in both directions and switches whose control
    /// plane advertises them (a gray-failed switch still does). Under
    /// weighted adaptive routing, with a link or switch down, every next
    /// hop is weighted by the capacity left behind it (spectrum-x.txt
    /// s4.4.2); with none down the weights would all be equal.
    pub(super) fn reconverge(&mut self) {
        let ports = &self.ports;
        let switches = &self.switches;
        let usable = |p: PortId| ports[p.0 as usize].up && ports[p.peer().0 as usize].up;
        let alive = |n: crate::topology::NodeId| switches[n.0 as usize].as_ref().is_none_or(|s| s.advertised);
        let weighted = matches!(self.balancer, Balancer::Adaptive(_))
            && self.scenario.switch.adaptive.weighted
            && (ports.iter().any(|p| !p.up) || switches.iter().flatten().any(|s| !s.advertised));
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
