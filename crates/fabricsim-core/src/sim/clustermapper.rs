//! Clustermapper agents in the simulation (mrc-srv6-multiplane.txt s3):
//! every round, each NIC port sends an SRv6 probe to its T0 and back and
//! `t1_probes` through its T0 to a T1 and back; a timeout later the round
//! is scored into the fault map, verdict changes are logged, and, when the
//! scenario asks, links found bad go on MRC's denylist.

use super::{Event, Simulation};
use crate::clustermapper::{switch_health, ClustermapperConfig, Health, History};
use crate::net::{headers, Packet, PacketKind, PortId};
use crate::topology::NodeId;
use crate::units::Time;

/// One probe of the current round.
#[derive(Clone, Copy, Debug)]
struct Probe {
    port: PortId,
    /// 0 for the T0, k + 1 for T0 uplink k.
    target: u16,
    back: bool,
}

/// A verdict: when, which element, what kind, its health and probe loss.
pub(super) type Verdict = (Time, String, &'static str, Health, f64);

pub(super) struct Mapper {
    cfg: ClustermapperConfig,
    round: u32,
    probes: Vec<Probe>,
    /// Probe history of each NIC port's link (by NIC port id) and of each
    /// T0 uplink (by the T0's port id).
    history: Vec<History>,
    /// Last health reported for each port's link, and each switch.
    link_health: Vec<Health>,
    switch_health: Vec<Health>,
    pub(super) verdicts: Vec<Verdict>,
    pub(super) sent: u64,
}

impl Mapper {
    pub(super) fn new(cfg: ClustermapperConfig, ports: usize, nodes: usize) -> Mapper {
        Mapper {
            cfg,
            round: 0,
            probes: Vec::new(),
            history: vec![History::default(); ports],
            link_health: vec![Health::Healthy; ports],
            switch_health: vec![Health::Healthy; nodes],
            verdicts: Vec::new(),
            sent: 0,
        }
    }
}

impl Simulation {
    /// Sends a round of probes from every NIC port, and schedules the next
    /// round and this one's scoring.
    pub(super) fn mapper_round(&mut self) {
        let Some(mapper) = self.mapper.as_mut() else { return };
        let (period, timeout, t1_probes) = (mapper.cfg.period, mapper.cfg.timeout, mapper.cfg.t1_probes as usize);
        mapper.round += 1;
        mapper.probes.clear();
        let round = mapper.round;
        let srv6 = self.srv6.as_ref().expect("clustermapper needs srv6");
        let mut probes = Vec::new();
        for nic in self.topo.nics() {
            for &port in &self.node_ports[nic.0 as usize] {
                probes.push(Probe { port, target: 0, back: false });
                let uplinks = srv6.t0_uplinks(port);
                for j in 0..t1_probes.min(uplinks) {
                    // Rotate so that the NICs under a T0 cover its uplinks.
                    let k = (round as usize * t1_probes + j + nic.0 as usize) % uplinks;
                    probes.push(Probe { port, target: k as u16 + 1, back: false });
                }
            }
        }
        for (i, probe) in probes.iter().enumerate() {
            // A NIC that knows its port is down cannot probe through it.
            if self.sched[probe.port.0 as usize].known_down {
                continue;
            }
            let nic = self.ports[probe.port.0 as usize].node;
            let plane = self.ports[probe.port.0 as usize].index;
            self.send_map_probe(nic, probe.port, plane, round, i as u32, probe.target);
        }
        let mapper = self.mapper.as_mut().expect("mapper");
        mapper.sent += probes.len() as u64;
        mapper.probes = probes;
        self.events.schedule_in(timeout, Event::MapperScore(round));
        self.events.schedule_in(period, Event::MapperRound);
    }

    /// A probe out of NIC `port` to its T0 (`target` 0) or through T0
    /// uplink `target - 1`, and back, source-routed.
    fn send_map_probe(&mut self, nic: NodeId, port: PortId, plane: u16, round: u32, index: u32, target: u16) {
        let wire = self.framing.encap + headers::ack_wire(self.framing.ip);
        let ports_up = self.ports_up(nic);
        let path = self.srv6.as_ref().and_then(|srv6| srv6.loop_path(port, (target as usize).checked_sub(1)));
        let usids = path.map_or([0; crate::net::USIDS], |p| p.usids);
        let probe = Packet::control(PacketKind::MapProbe, nic, nic, round, index << 8 | target as u32, plane, wire);
        self.send_control_packet(port, Packet { ports_up, ..probe }, usids);
    }

    /// A probe came back to its NIC.
    pub(super) fn mapper_receive(&mut self, pkt: &Packet) {
        let Some(mapper) = self.mapper.as_mut() else { return };
        if pkt.qp == mapper.round {
            if let Some(probe) = mapper.probes.get_mut((pkt.psn >> 8) as usize) {
                probe.back = true;
            }
        }
    }

    /// Scores round `round` into the fault map and logs what changed.
    pub(super) fn mapper_score(&mut self, round: u32) {
        let now = self.now();
        let Some(mut mapper) = self.mapper.take() else { return };
        if mapper.round == round {
            self.score_round(&mut mapper, now);
        }
        self.mapper = Some(mapper);
    }

    fn score_round(&mut self, mapper: &mut Mapper, now: Time) {
        let srv6 = self.srv6.as_ref().expect("clustermapper needs srv6");
        let mut t0_ok = false;
        let mut touched = Vec::new();
        for probe in &mapper.probes {
            if probe.target == 0 {
                t0_ok = probe.back;
                mapper.history[probe.port.0 as usize].record(probe.back);
                touched.push(probe.port);
            } else if t0_ok {
                // Only a T1 probe whose T0 probe came back says anything
                // about the T0-T1 link.
                let path = srv6.loop_path(probe.port, Some(probe.target as usize - 1)).expect("probed path");
                let t0 = self.ports[probe.port.peer().0 as usize].node;
                let Some(uplink) = srv6.lookup(t0, path.usids[1]) else { continue };
                mapper.history[uplink.0 as usize].record(probe.back);
                touched.push(uplink);
            }
        }
        touched.sort_unstable_by_key(|p| p.0);
        touched.dedup();
        let mut denylist_changed = false;
        for port in touched {
            let health = mapper.history[port.0 as usize].health(&mapper.cfg);
            if health != mapper.link_health[port.0 as usize] {
                mapper.link_health[port.0 as usize] = health;
                let kind = if self.switches[self.ports[port.0 as usize].node.0 as usize].is_some() {
                    "t0_t1_link"
                } else {
                    "nic_t0_link"
                };
                let loss = mapper.history[port.0 as usize].loss(&mapper.cfg);
                mapper.verdicts.push((now, self.port_name(port), kind, health, loss));
                if mapper.cfg.update_denylist {
                    self.denied_links.resize(self.topo.links.len(), false);
                    self.denied_links[port.link().0 as usize] = health != Health::Healthy;
                    denylist_changed = true;
                }
            }
        }
        // Switches: down when every probed link reaching them is.
        for node in 0..self.topo.nodes.len() {
            if self.switches[node].is_none() || !srv6.is_switch(NodeId(node as u32)) {
                continue;
            }
            // The links below it, scored at their lower end.
            let links = self.node_ports[node]
                .iter()
                .map(|p| p.peer().0 as usize)
                .filter(|&low| mapper.history[low].seen() > 0)
                .map(|low| mapper.link_health[low]);
            let health = switch_health(links);
            if health != mapper.switch_health[node] {
                mapper.switch_health[node] = health;
                let tier = match self.topo.nodes[node].role {
                    crate::topology::NodeRole::Switch { tier, .. } => tier,
                    crate::topology::NodeRole::Nic { .. } => continue,
                };
                let kind = ["t0_switch", "t1_switch", "t2_switch"][tier.min(2) as usize];
                mapper.verdicts.push((now, self.topo.name(NodeId(node as u32)), kind, health, 0.0));
            }
        }
        if denylist_changed {
            self.apply_denylist();
        }
    }
}
