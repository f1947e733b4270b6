//! Spectrum-X's `sw_lb` in the flow model: load balancing above the
//! transport, as NCCL splits a transfer over its connections
//! (spectrum-x.txt s6.5).
//!
//! The packet model's QP gives its planes equal shares (a plane may not
//! get ahead of the plane furthest behind), has no probes and no NAK for a
//! gap, and does not see its NIC's ports. So a plane that carries nothing
//! (its own port down, which the NIC then stops asking, or every path on
//! it dead, whose window fills within a round trip) holds the whole QP up
//! until the retransmission timer fires; the timer then takes out of use
//! every plane that sent and heard nothing for a whole timeout, and the QP
//! goes back and goes on over the rest (`SpxQp::on_timer`). A plane comes
//! back when its NIC's port comes up.
//!
//! Here a QP's route splits equally over the planes it has not taken out;
//! one of them that delivers nothing (its port seen down, or its share
//! lost whole) stalls the route. A stall arms the QP's timer for the
//! retransmission timeout; when it fires, the planes that deliver nothing
//! are taken out and the QP's message is routed again. A plane that loses
//! part is not silent and stays: its message moves at the share that
//! arrives and goes back at the timer's rounds (`recovery.rs`).

use super::paths::Route;
use super::probes::IDLE;
use super::{Event, FluidSimulation, Owner};
use crate::net::PortId;
use crate::transport::spx::PlaneLb;
use crate::transport::TransportSpec;

/// Planes a QP's bitmask of those taken out can name; planes past them
/// are never taken out (a NIC has a few).
const MASKED_PLANES: usize = u64::BITS as usize;

/// What software load balancing keeps per QP.
#[derive(Default)]
pub(super) struct SoftwareLb {
    /// Per QP, the planes (port indices) taken out of use.
    dropped: Vec<u64>,
    /// Per QP, its retransmission timer is armed.
    armed: Vec<bool>,
}

impl SoftwareLb {
    pub fn new(qps: usize) -> SoftwareLb {
        SoftwareLb { dropped: vec![0; qps], armed: vec![false; qps] }
    }
}

impl FluidSimulation {
    /// Whether the NICs balance in software above the transport.
    pub(super) fn balances_in_software(&self) -> bool {
        matches!(&self.scenario.transport, TransportSpec::Spx(c) if c.plane_lb == PlaneLb::SwLb)
    }

    /// QP `qp`'s route under software load balancing: equal shares over
    /// the planes it has not taken out, or a stall if one of them delivers
    /// nothing.
    pub(super) fn software_route(&mut self, qp: u32, avoid: bool, unaware: bool) -> Route {
        let q = self.qps[qp as usize];
        let ports = self.routing.node_ports(q.src).to_vec();
        let dropped = self.software_lb.dropped[qp as usize];
        let planes: Vec<usize> = (0..ports.len()).filter(|&k| k >= MASKED_PLANES || dropped & (1 << k) == 0).collect();
        if planes.is_empty() {
            return Route::stalled_at(ports[0]);
        }
        if let Some(&k) = planes.iter().find(|&&k| self.plane_delivers_nothing(qp, k, avoid, unaware)) {
            return Route::stalled_at(ports[k]);
        }
        let share = 1.0 / planes.len() as f64;
        let bound: Vec<(usize, f64)> = planes.iter().map(|&k| (k, share)).collect();
        self.sprayed_route(q.src, q.dst, (false, IDLE), (avoid, unaware), &bound)
    }

    /// Whether QP `qp`'s plane `k` (its NIC's port index) delivers nothing:
    /// its NIC sees the port down, or every path of it is dead.
    fn plane_delivers_nothing(&mut self, qp: u32, k: usize, avoid: bool, unaware: bool) -> bool {
        let q = self.qps[qp as usize];
        let port = self.routing.node_ports(q.src)[k];
        !self.nic_sees[port.0 as usize]
            || self.sprayed_route(q.src, q.dst, (false, IDLE), (avoid, unaware), &[(k, 1.0)]).delivered <= 0.0
    }

    /// Stream `s`, of a QP balanced in software, stalled: its QP's
    /// retransmission timer is armed.
    pub(super) fn arm_software_timer(&mut self, s: u32) {
        let stream = &self.streams[s as usize];
        let qp = stream.qp as usize;
        if self.software_lb.armed[qp] {
            return;
        }
        let TransportSpec::Spx(c) = &self.scenario.transport else { return };
        let timeout = c.retransmit_timeout(!matches!(stream.owner, Owner::Flow(_)));
        self.software_lb.armed[qp] = true;
        self.events.schedule_in(timeout, Event::SoftwareTimeout(stream.qp));
    }

    /// QP `qp`'s retransmission timer fired: it takes out the planes that
    /// deliver nothing, and its message is routed again.
    pub(super) fn on_software_timeout(&mut self, qp: u32) {
        self.software_lb.armed[qp as usize] = false;
        let Some(&s) = self.qp_queue[qp as usize].front() else { return };
        let stream = &self.streams[s as usize];
        if !stream.started || stream.done || stream.stalled_since.is_none() {
            return;
        }
        let planes = self.routing.node_ports(self.qps[qp as usize].src).len().min(MASKED_PLANES);
        let avoid = matches!(self.placement, super::Placement::Spray { avoid: true, .. });
        for k in 0..planes {
            let taken_out = self.software_lb.dropped[qp as usize] & (1 << k) != 0;
            if !taken_out && self.plane_delivers_nothing(qp, k, avoid, false) {
                self.software_lb.dropped[qp as usize] |= 1 << k;
            }
        }
        let route = self.route_of(s);
        self.set_route(s, route);
    }

    /// NIC port `port` came up as its NIC sees it: every QP from that NIC
    /// may use its plane again.
    pub(super) fn software_plane_back(&mut self, port: PortId) {
        let nic = self.routing.peer(port.peer());
        let Some(k) = self.routing.node_ports(nic).iter().position(|&p| p == port) else { return };
        if k >= MASKED_PLANES {
            return;
        }
        for (qp, q) in self.qps.iter().enumerate() {
            if q.src == nic {
                self.software_lb.dropped[qp] &= !(1 << k);
            }
        }
    }
}
