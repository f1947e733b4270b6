//! ConWeave's part in the fabric (`switch::conweave` decides): which role
//! a ToR plays for a packet, the control packets between ToRs, and the
//! release of held packets.

use super::{Event, Simulation};
use crate::net::{headers, Packet, PacketId, PacketKind, PortId};
use crate::switch::conweave::{self, Conweave, Signal};
use crate::switch::{ecmp_pick, Balancer};
use crate::topology::NodeId;

/// The ConWeave state of a fabric whose switches run it (a field apart,
/// so that the routes and ports can be read beside it).
fn conweave_of(balancer: &mut Balancer) -> &mut Conweave {
    match balancer {
        Balancer::Conweave(cw) => cw,
        _ => unreachable!("called only under ConWeave"),
    }
}

impl Simulation {
    /// Routes a packet that entered `switch` by `ingress`. A data packet
    /// from a NIC to another ToR is this ToR's to steer; one to a NIC
    /// below from another ToR is this ToR's to put in order; in between
    /// it follows its tag. Everything else, and a ToR's signals, go by
    /// ECMP; a signal for a flow this ToR steers ends here.
    pub(super) fn conweave_receive(&mut self, switch: NodeId, ingress: PortId, id: PacketId) {
        let pkt = *self.pool.get(id);
        let now = self.now();
        let seed = self.switches[switch.0 as usize].as_ref().expect("a switch").ecmp_seed;
        let hops = self.routes.next_hops(switch, pkt.dst);
        // Hashed only for the packets ConWeave does not route.
        let ecmp = || ecmp_pick(hops, pkt.src.0, pkt.dst.0, pkt.entropy, seed);
        let to_nic = match hops {
            [only] if self.ports[only.0 as usize].faces_nic => Some(*only),
            _ => None,
        };
        let from_nic = self.ports[ingress.0 as usize].faces_nic;
        let out = match pkt.kind {
            PacketKind::Conweave if to_nic.is_some() => {
                if let Some(signal) = Signal::decode(pkt.echo, pkt.psn, pkt.ack) {
                    // The signal is about the data's direction: back from its destination.
                    conweave_of(&mut self.balancer).on_signal(switch, (pkt.dst, pkt.src, pkt.entropy), signal, now);
                }
                self.pool.free(id);
                return;
            }
            kind if kind.carries_data() && from_nic && to_nic.is_none() => {
                let (routes, ports) = (&self.routes, &self.ports);
                let sample = |raw| conweave::walk(routes, ports, switch, pkt.dst, raw);
                let cw = conweave_of(&mut self.balancer);
                let path = cw.on_source(switch, (pkt.src, pkt.dst, pkt.entropy), id, now, &sample);
                path.and_then(|path| Conweave::hop_along(path, 0, hops)).or_else(ecmp)
            }
            kind if kind.carries_data() && !from_nic && to_nic.is_none() => {
                conweave_of(&mut self.balancer).on_transit(id, hops).or_else(ecmp)
            }
            kind if kind.carries_data() && !from_nic => {
                let marked = pkt.has(crate::net::flag::CE);
                let mut signals = std::mem::take(&mut self.conweave_signals);
                let flow = (pkt.src, pkt.dst, pkt.entropy);
                let arrival =
                    conweave_of(&mut self.balancer).on_destination(switch, flow, id, marked, now, &mut signals);
                for signal in signals.drain(..) {
                    self.send_conweave_signal(switch, &pkt, signal);
                }
                self.conweave_signals = signals;
                if let Some((voq, at)) = arrival.flush {
                    self.events.schedule(at, Event::ConweaveFlush(voq));
                }
                if let Some(voq) = arrival.hold {
                    // Remembered for the release: the port it entered by.
                    self.pool.get_mut(id).port = ingress.0;
                    conweave_of(&mut self.balancer).hold(voq, id, &mut self.pool);
                    return;
                }
                to_nic
            }
            _ => ecmp(),
        };
        self.forward(switch, Some(ingress), id, out, None);
    }

    /// Sends `signal` about data packet `data` from its destination ToR
    /// `switch` toward the data's source, as a minimum-size control packet
    /// routed by ECMP.
    fn send_conweave_signal(&mut self, switch: NodeId, data: &Packet, signal: Signal) {
        let (code, a, b) = signal.encode();
        let wire = headers::ack_wire(self.framing.ip);
        let packet = Packet {
            echo: code,
            ack: b,
            ..Packet::control(PacketKind::Conweave, data.dst, data.src, data.qp, a, data.entropy, wire)
        };
        let seed = self.switches[switch.0 as usize].as_ref().expect("a switch").ecmp_seed;
        let out = ecmp_pick(self.routes.next_hops(switch, data.src), data.dst.0, data.src.0, data.entropy, seed);
        let id = self.pool.alloc(packet);
        self.forward(switch, None, id, out, None);
    }

    /// A VOQ's flush is due: its packets go on to their NIC, in order.
    pub(super) fn on_conweave_flush(&mut self, voq: u32) {
        let now = self.now();
        let mut released = std::mem::take(&mut self.conweave_released);
        conweave_of(&mut self.balancer).flush(voq, now, &mut self.pool, &mut released);
        for id in released.drain(..) {
            let ingress = PortId(self.pool.get(id).port);
            let switch = self.ports[ingress.0 as usize].node;
            let dst = self.pool.get(id).dst;
            let out = self.routes.next_hops(switch, dst).first().copied();
            self.forward(switch, Some(ingress), id, out, None);
        }
        self.conweave_released = released;
    }
}
