//! Spectrum-X's RTT probes in the flow model: what each sender has found of
//! the NIC links at the far end of its planes.
//!
//! The packet model's NIC keeps one context per plane for every
//! destination NIC, shared by its QPs there, and probes the planes while
//! one of them has data outstanding; a plane toward the destination is
//! dropped after `failure_probes` probe timeouts in a row (backing off)
//! that heard nothing back, and taken back at the first reply
//! (`transport/spx/`). So a sender that starts sending to a NIC whose
//! plane died long ago finds it dead only its own detection time later, and
//! so does one that was idle when the link failed: each new destination
//! costs the detection time again (spectrum-x.txt s4.4.1), but a QP that
//! joins one its NIC is already probing finds it when the probing does.
//! With `plane_contexts: qp` each QP probes for itself.
//!
//! Here a NIC link is *found* dead once it has carried nothing for the
//! detection time, whatever killed it (a port, its switch, a gray switch
//! the control plane still advertises: probes see what the fabric
//! forwards), a probe that gets through starting the count again; it is
//! found alive once it has been up for a probe interval
//! (`Probes::recovery`). A sender believes a link found dead once it has
//! itself probed for the detection time (`Probes::since`). What the probes
//! find is not in the routes' view, which every sender shares: a NIC that
//! sprays leaves out, per destination, the planes its sender believes dead
//! (`FluidSimulation::planes_toward`).

use super::{Event, FluidSimulation};
use crate::engine::FastMap;
use crate::net::PortId;
use crate::topology::{NodeId, NodeRole, Topology};
use crate::transport::{PlaneContexts, TransportSpec};
use crate::units::Time;

/// A sender that is not probing now.
pub(super) const IDLE: Time = Time(u64::MAX);

/// A plane toward a destination whose links there are all down, as a
/// sender sees it (`FluidSimulation::planes_toward`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plane {
    Found,
    Unfound,
}

pub(super) struct Probes {
    /// Probe rounds missed in a row before a plane is dropped, in time.
    detection: Time,
    /// One probe interval: a link up this long has answered a probe.
    recovery: Time,
    /// Per node, the plane of a switch (NICs: none).
    plane_of: Vec<u16>,
    /// When each NIC link that ever failed last changed (by its NIC's
    /// port; a link fails when either direction or the switch does).
    changed_at: FastMap<u32, Time>,
    /// NIC links to look at, each when it will have held its state long
    /// enough to be found.
    checks: Vec<(Time, PortId)>,
    /// NIC links found dead.
    found_down: FastMap<u32, ()>,
    /// Per QP, since when it has been probing; `IDLE` while it is not.
    since: Vec<Time>,
    /// The QPs that share each QP's probing (its NIC's toward the same
    /// destination, or itself alone), by index into `sharing`.
    shared_by: Vec<u32>,
    sharing: Vec<Vec<u32>>,
    /// Per QP that went on probing when it had sent all it had (its
    /// destination had a link down), since when it has been idle.
    idle_since: Vec<Time>,
    /// NICs with a link down that a sender (a QP, or an all-to-all's pairs)
    /// began to probe toward: their routes are looked at again when the
    /// sender's detection time is up.
    sender_checks: Vec<(Time, NodeId)>,
}

impl Probes {
    /// `groups`, per QP: the QPs whose probing it shares are those of the
    /// same number.
    pub fn new(detection: Time, recovery: Time, topo: &Topology, groups: Vec<u32>) -> Probes {
        let qps = groups.len();
        let mut sharing: Vec<Vec<u32>> = Vec::new();
        for (qp, &group) in groups.iter().enumerate() {
            if sharing.len() <= group as usize {
                sharing.resize(group as usize + 1, Vec::new());
            }
            sharing[group as usize].push(qp as u32);
        }
        let plane_of = (topo.nodes.iter())
            .map(|node| match node.role {
                NodeRole::Switch { plane, .. } => plane,
                NodeRole::Nic { .. } => u16::MAX,
            })
            .collect();
        Probes {
            detection,
            recovery,
            plane_of,
            changed_at: FastMap::default(),
            checks: Vec::new(),
            found_down: FastMap::default(),
            since: vec![IDLE; qps],
            shared_by: groups,
            sharing,
            idle_since: vec![IDLE; qps],
            sender_checks: Vec::new(),
        }
    }
}

impl FluidSimulation {
    /// Per QP, the group of QPs whose probing it shares: its NIC's toward
    /// the same destination, unless the contexts are per QP.
    pub(super) fn probe_groups(&self) -> Vec<u32> {
        let per_qp = matches!(&self.scenario.transport, TransportSpec::Spx(c) if c.plane_contexts == PlaneContexts::Qp);
        if per_qp {
            return (0..self.qps.len() as u32).collect();
        }
        let mut of_pair: FastMap<(NodeId, NodeId), u32> = FastMap::default();
        (self.qps.iter())
            .map(|q| {
                let next = of_pair.len() as u32;
                *of_pair.entry((q.src, q.dst)).or_insert(next)
            })
            .collect()
    }

    /// The link of NIC port `port` began or stopped carrying traffic: the
    /// probes look at it once it has held that long.
    pub(super) fn probes_watch(&mut self, port: PortId, alive: bool) {
        let now = self.now();
        let Some(probes) = self.probes.as_mut() else { return };
        let at = now + if alive { probes.recovery } else { probes.detection };
        probes.changed_at.insert(port.0, now);
        probes.checks.push((at, port));
        self.schedule_transport_catch_up(at);
    }

    /// The probes' checks that are due: a link that held its state for its
    /// time is found dead or alive (a flap shorter than the detection time
    /// is never found), and the routes from and to its NIC are looked at
    /// again; so are those toward a NIC a sender has now probed long enough
    /// to find its dead link.
    pub(super) fn probes_find(&mut self) {
        let now = self.now();
        let Some(probes) = self.probes.as_mut() else { return };
        let (due, waiting): (Vec<_>, Vec<_>) = probes.checks.iter().partition(|(at, _)| *at <= now);
        probes.checks = waiting;
        let (senders_due, senders_waiting): (Vec<_>, Vec<_>) =
            probes.sender_checks.iter().partition(|(at, _)| *at <= now);
        probes.sender_checks = senders_waiting;
        let mut nics: Vec<NodeId> = senders_due.into_iter().map(|(_, nic)| nic).collect();
        for (_, port) in due {
            let up = self.link_alive(port);
            let probes = self.probes.as_mut().expect("probes looked at above");
            let held = if up { probes.recovery } else { probes.detection };
            if now - probes.changed_at[&port.0] < held {
                continue;
            }
            let changed = if up {
                probes.found_down.remove(&port.0).is_some()
            } else {
                probes.found_down.insert(port.0, ()).is_none()
            };
            if changed {
                nics.push(self.routing.peer(port.peer()));
            }
        }
        nics.sort_unstable_by_key(|n| n.0);
        nics.dedup();
        nics.into_iter().for_each(|nic| self.nic_changed(nic));
    }

    /// QP `qp` has a message to send: it probes its planes from now on, if
    /// it was not already. One that went on probing while idle stopped
    /// once its destination's links were back: if every link down now went
    /// down after it went idle, it starts again.
    pub(super) fn start_probing(&mut self, qp: u32) {
        let (now, dst) = (self.now(), self.qps[qp as usize].dst);
        let Some(probes) = self.probes.as_ref() else { return };
        let idle_since = probes.idle_since[qp as usize];
        let restart = probes.since[qp as usize] == IDLE
            || (idle_since != IDLE && self.nic_links_down_since(dst).all(|down| down > idle_since));
        let probes = self.probes.as_mut().expect("looked at above");
        probes.idle_since[qp as usize] = IDLE;
        if restart {
            // It joins the probing its NIC already runs toward `dst` for
            // the QPs there that have data (not one idle, whose probing may
            // have stopped when the links came back).
            let sharing = &probes.sharing[probes.shared_by[qp as usize] as usize];
            let sending = |&&q: &&u32| q != qp && probes.idle_since[q as usize] == IDLE;
            let running =
                sharing.iter().filter(sending).map(|&q| probes.since[q as usize]).filter(|&t| t != IDLE).min();
            let since = running.unwrap_or(now);
            probes.since[qp as usize] = since;
            self.check_after_detection(dst, since);
        }
    }

    /// QP `qp` sent all it had. It stops probing unless its destination
    /// has a link down: then what it sent into the dead plane waits to be
    /// sent again, and the QP, still outstanding, keeps probing.
    pub(super) fn stop_probing(&mut self, qp: u32) {
        let (now, outstanding) = (self.now(), self.nic_link_down(self.qps[qp as usize].dst));
        let Some(probes) = self.probes.as_mut() else { return };
        if outstanding {
            probes.idle_since[qp as usize] = now;
        } else {
            probes.since[qp as usize] = IDLE;
        }
    }

    /// When each link of NIC `nic` that is down now went down.
    fn nic_links_down_since(&self, nic: NodeId) -> impl Iterator<Item = Time> + '_ {
        let probes = self.probes.as_ref().expect("only while probing");
        (self.routing.node_ports(nic).iter()).filter(|&&p| !self.link_alive(p)).map(|p| probes.changed_at[&p.0])
    }

    /// The QPs of pipeline `r`'s hops start or stop probing together.
    pub(super) fn pipeline_probing(&mut self, r: u32, start: bool) {
        if self.probes.is_none() {
            return;
        }
        let qps: Vec<u32> = (self.pipelines[r as usize].hops.iter().flatten())
            .flat_map(|&conn| self.connections[conn as usize].iter().copied())
            .collect();
        for qp in qps {
            if start {
                self.start_probing(qp);
            } else {
                self.stop_probing(qp);
            }
        }
    }

    /// An all-to-all's pairs start probing at its start (`ExchangeRun::started`).
    pub(super) fn exchange_probing(&mut self, x: u32) {
        if self.probes.is_some() {
            let now = self.now();
            for nic in self.exchanges[x as usize].nics.clone() {
                self.check_after_detection(nic, now);
            }
        }
    }

    /// A sender probing toward `dst` since `since`: if one of its links is
    /// down, its routes are looked at again when the sender can have found
    /// it.
    fn check_after_detection(&mut self, dst: NodeId, since: Time) {
        if !self.nic_link_down(dst) {
            return;
        }
        let probes = self.probes.as_mut().expect("only while probing");
        let at = (since + probes.detection).max(self.events.now());
        probes.sender_checks.push((at, dst));
        self.schedule_transport_catch_up(at);
    }

    /// Whether the link of `port` carries traffic both ways.
    fn link_alive(&self, port: PortId) -> bool {
        self.alive[port.0 as usize] && self.alive[port.peer().0 as usize]
    }

    /// Whether a link of NIC `nic` carries nothing now.
    fn nic_link_down(&self, nic: NodeId) -> bool {
        self.routing.node_ports(nic).iter().any(|&p| !self.link_alive(p))
    }

    /// Since when QP `qp` has been probing (`IDLE`: it is not).
    pub(super) fn qp_probing_since(&self, qp: u32) -> Time {
        self.probes.as_ref().map_or(IDLE, |probes| probes.since[qp as usize])
    }

    /// What a sender probing since `since` does with each of `src_ports`
    /// toward `dst`, by its plane: of those on which `dst`'s links are all
    /// down, the ones it has found dead (every link found down, and the
    /// sender probing for the detection time itself: left out) and the
    /// ones it has not (`Unfound`: sprayed into, even where the routes no
    /// longer reach `dst`, as the NIC knows nothing of routes).
    /// By position in `src_ports` (empty where no probes run): linear in
    /// the ports, as a NIC may have many.
    pub(super) fn planes_toward(&self, src_ports: &[PortId], dst: NodeId, since: Time) -> Vec<Option<Plane>> {
        let Some(probes) = self.probes.as_ref() else { return Vec::new() };
        let sender_found = since != IDLE && self.now() >= since + probes.detection;
        let plane = |p: PortId| probes.plane_of[self.routing.peer(p).0 as usize];
        // Per plane of `dst`: whether its every link there is found down,
        // and whether every one is unusable.
        let mut toward: FastMap<u16, (bool, bool)> = FastMap::default();
        for &q in self.routing.node_ports(dst) {
            let (found, unusable) = toward.entry(plane(q)).or_insert((true, true));
            *found &= sender_found && probes.found_down.contains_key(&q.0);
            *unusable &= !self.view.usable(q);
        }
        (src_ports.iter())
            .map(|&p| match toward.get(&plane(p)) {
                Some(&(true, _)) => Some(Plane::Found),
                Some(&(false, true)) => Some(Plane::Unfound),
                _ => None,
            })
            .collect()
    }

    /// Whether a sender probing since `since` believes NIC link `port`
    /// alive (true where no probes run).
    pub(super) fn probes_show_alive(&self, port: PortId, since: Time) -> bool {
        let Some(probes) = self.probes.as_ref() else { return true };
        !probes.found_down.contains_key(&port.0) || since == IDLE || self.now() < since + probes.detection
    }

    /// The probes' next look is due at `at`.
    pub(super) fn schedule_transport_catch_up(&mut self, at: Time) {
        if std::mem::replace(&mut self.reconverge_due[1], at) != at {
            self.events.schedule(at, Event::Reconverge { transport: true });
        }
    }
}
