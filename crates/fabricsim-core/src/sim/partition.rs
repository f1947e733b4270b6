//! One run on two threads (`threads: 2`): the fabric cut in two along
//! links, each side a whole `Simulation` that runs only its own nodes'
//! events, the two advancing in windows no longer than the smallest delay
//! of a link across the cut (the lookahead, as in conservative parallel
//! discrete-event simulation with a synchronous window). Whatever one side
//! sends across in a window arrives at least that delay later, so in the
//! next window or after: each side runs its window alone, then the two
//! swap what crossed.
//!
//! The NICs and one first-tier switch in three are the edge side, run on
//! the caller's thread; every other switch the upper side, on a thread of
//! its own (`fabric_thread`). The transports, jobs and flows are all on
//! the edge side, so no transport's state is ever shared; the leaves are
//! split because a NIC's events cost about three times a switch's.
//!
//! Each side orders its events as the one-thread run does, and what
//! crosses enters the other side's queue at the window's end, in the order
//! it was sent. The run is byte-identical to itself; among events at the
//! same picosecond the order can differ from the one-thread run's, so its
//! results are another, equally valid ordering of the same model. The
//! upper side also runs to the end of the window in which the last flow
//! completed (at most one lookahead past it); its counters include that
//! tail.

use super::{Event, Simulation, SwitchState, Totals};
use crate::error::ScenarioError;
use crate::net::{Forwarding, Packet, Port, PortId, Usids};
use crate::scenario::Scenario;
use crate::topology::{NodeRole, Topology};
use crate::units::Time;

/// Which side of the cut a node runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    /// The NICs and one leaf in three, on the caller's thread.
    Edge,
    /// Every other switch, on a thread of its own.
    Upper,
}

/// What a side sent across the cut, due at the other side at `at`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Crossing {
    pub(super) at: Time,
    pub(super) what: Across,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Across {
    /// A packet, with its micro-SIDs when source-routed, reaching the far
    /// end of the link it was sent on (its `port`).
    Packet(Packet, Usids),
    /// A PFC frame reaching the egress `port` it pauses or resumes.
    Pfc { port: PortId, class: u8, pause: bool },
}

/// The cut as one side sees it.
pub(super) struct Cut {
    side: Side,
    /// By port: what it sends arrives on the other side.
    crosses: Vec<bool>,
    /// By node: the side that runs it.
    sides: Vec<Side>,
    /// The smallest delay of a link across the cut.
    pub(super) lookahead: Time,
    /// What this side sent across since the last exchange, in sending order.
    pub(super) outbox: Vec<Crossing>,
}

/// Of the first tier's switches, how many in `LEAVES_IN` run on the edge
/// side, in node order. The edge side's events cost more than the others
/// (a NIC's run the transport too): at 8,192 hosts over MRC, with every
/// leaf on the edge side, its half of the events took 12 s to the upper
/// side's 7.3; one in three measured fastest (docs/PERFORMANCE.md).
const LEAVES_ON_EDGE: usize = 1;
const LEAVES_IN: usize = 3;

/// The side each node runs on.
fn sides(topo: &Topology) -> Vec<Side> {
    let mut leaves = 0;
    let mut side = |role: NodeRole| match role {
        NodeRole::Nic { .. } => Side::Edge,
        NodeRole::Switch { tier: 0, .. } => {
            leaves += 1;
            if (leaves - 1) % LEAVES_IN < LEAVES_ON_EDGE {
                Side::Edge
            } else {
                Side::Upper
            }
        }
        NodeRole::Switch { .. } => Side::Upper,
    };
    topo.nodes.iter().map(|n| side(n.role)).collect()
}

/// Refuses what a run on two threads cannot do yet, and a cut no window
/// could span, before it is built.
pub(super) fn check(scenario: &Scenario, topo: &Topology) -> Result<(), ScenarioError> {
    let refuse = |what: &str| -> Result<(), ScenarioError> {
        Err(ScenarioError::new(
            "threads",
            format!("2: a run on two threads does not support {what} yet; set threads: 1"),
        ))
    };
    if !scenario.faults.is_empty() {
        return refuse("faults");
    }
    if scenario.clustermapper.is_some() {
        return refuse("clustermapper");
    }
    // Telemetry recorded packet by packet or over port groups, named by
    // the field that asks for it. (Sampled ports and hosts are read at
    // window ends: `fabric_thread`.)
    let t = &scenario.telemetry;
    let recorded = [
        (t.pcap.is_some(), "telemetry.pcap"),
        (t.ev_log, "telemetry.ev_log"),
        (t.ev_activity, "telemetry.ev_activity"),
        (t.histograms.is_some(), "telemetry.histograms"),
        (t.imbalance.is_some(), "telemetry.imbalance"),
    ];
    if let Some((_, field)) = recorded.iter().find(|(set, _)| *set) {
        return refuse(&format!("{field} (telemetry recorded as the run goes)"));
    }
    // A balancer whose state each side can keep a copy of, using only its
    // own switches' part, and whose counters the report does not read.
    let forwarding = scenario.switch.forwarding;
    if !matches!(forwarding, Forwarding::Ecmp | Forwarding::Srv6 | Forwarding::Adaptive) {
        let name = serde_json::to_value(forwarding).ok().and_then(|v| v.as_str().map(str::to_string));
        let name = name.unwrap_or_default();
        return refuse(&format!("switch.forwarding: {name} (only ecmp, srv6 and adaptive)"));
    }
    let sides = sides(topo);
    let mut uppers = false;
    for link in &topo.links {
        let (a, b) = (sides[link.a.0 as usize], sides[link.b.0 as usize]);
        uppers |= a == Side::Upper || b == Side::Upper;
        if a != b && link.delay + topo.node(link.a).latency.min(topo.node(link.b).latency) == Time::ZERO {
            return Err(ScenarioError::new(
                "threads",
                format!(
                    "2: the link {} - {} between the two threads' parts of the fabric has no delay, so they \
                     could never run apart",
                    topo.name(link.a),
                    topo.name(link.b)
                ),
            ));
        }
    }
    if !uppers {
        return refuse("a fabric without switches above its first tier");
    }
    Ok(())
}

impl Cut {
    fn new(side: Side, topo: &Topology, ports: &[Port]) -> Cut {
        let sides = sides(topo);
        let crosses: Vec<bool> = (0..ports.len())
            .map(|p| {
                let (from, to) = (ports[p].node, ports[PortId(p as u32).peer().0 as usize].node);
                sides[from.0 as usize] != sides[to.0 as usize]
            })
            .collect();
        // A port's delay is its link's and the far node's latency: what
        // it sends arrives no sooner after it is sent.
        let lookahead = (0..ports.len()).filter(|&p| crosses[p]).map(|p| ports[p].delay).min().unwrap_or(Time::MAX);
        Cut { side, crosses, sides, lookahead, outbox: Vec::new() }
    }

    /// Whether what `port` sends arrives on the other side.
    #[inline]
    pub(super) fn crosses(&self, port: PortId) -> bool {
        self.crosses[port.0 as usize]
    }

    /// Whether this side runs `port`'s node.
    pub(super) fn owns_port(&self, ports: &[Port], port: usize) -> bool {
        self.sides[ports[port].node.0 as usize] == self.side
    }
}

/// What a sample reads of a port (`report::on_sample`), taken from the
/// side that runs it.
#[derive(Clone, Debug)]
pub(super) struct PortReading {
    pub(super) port: PortId,
    queue_bytes: [u64; crate::net::CLASSES],
    counters: crate::net::PortCounters,
}

/// What the upper side leaves for the report of the whole run: the state
/// of what it ran.
pub(super) struct UpperShare {
    pub(super) ports: Vec<Port>,
    pub(super) switches: Vec<Option<SwitchState>>,
    pub(super) totals: Totals,
    pub(super) events: u64,
    pub(super) in_flight_payload: u64,
    pub(super) pool_high_water: usize,
}

impl Simulation {
    /// Makes this simulation one side of the cut: it keeps only the events
    /// of its own nodes (at the start, the upper side has none).
    pub(super) fn take_side(&mut self, side: Side) {
        let cut = Cut::new(side, &self.topo, &self.ports);
        let mut kept = crate::engine::EventQueue::default();
        while let Some((at, event)) = self.events.pop() {
            if self.side_of_event(&cut, event) == side {
                kept.schedule(at, event);
            }
        }
        self.events = kept;
        self.cut = Some(cut);
    }

    fn side_of_event(&self, cut: &Cut, event: Event) -> Side {
        let of_port = |port: PortId| cut.sides[self.ports[port.0 as usize].node.0 as usize];
        match event {
            Event::Arrive(id) => of_port(PortId(self.pool.get(id).port).peer()),
            Event::TxDone(port) | Event::NicWake(port) | Event::Pfc { port, .. } => of_port(port),
            _ => Side::Edge,
        }
    }

    /// Takes what the other side sent across into this side's queue, in
    /// the order of its times and, among equal times, of its sending.
    pub(super) fn receive(&mut self, mut inbox: Vec<Crossing>) {
        inbox.sort_by_key(|c| c.at);
        for crossing in inbox {
            let event = match crossing.what {
                Across::Packet(packet, usids) => Event::Arrive(self.pool.alloc_routed(packet, usids)),
                Across::Pfc { port, class, pause } => Event::Pfc { port, class, pause },
            };
            self.events.schedule(crossing.at, event);
        }
    }

    /// Sends a packet leaving `port` across the cut, to arrive at `at`.
    /// Out of line, so that a run on one thread pays only the test.
    #[cold]
    #[inline(never)]
    pub(super) fn send_across(&mut self, id: crate::net::PacketId, at: Time) {
        let what = Across::Packet(*self.pool.get(id), self.pool.usids(id));
        self.cut.as_mut().expect("a side of a cut").outbox.push(Crossing { at, what });
        self.pool.free(id);
    }

    /// The sampled ports this side does not run.
    pub(super) fn sampled_elsewhere(&self) -> Vec<PortId> {
        let cut = self.cut.as_ref().expect("a side of a cut");
        let ports = self.telemetry_ports.iter().copied();
        ports.filter(|p| !cut.owns_port(&self.ports, p.0 as usize)).collect()
    }

    /// What a sample reads of `ports`, which this side runs.
    pub(super) fn read_ports(&self, ports: &[PortId]) -> Vec<PortReading> {
        let reading = |&port: &PortId| {
            let p = &self.ports[port.0 as usize];
            PortReading { port, queue_bytes: p.queue_bytes, counters: p.counters.clone() }
        };
        ports.iter().map(reading).collect()
    }

    /// Takes readings of ports the other side runs into this side's copies
    /// of them, which nothing else here reads, for the sample about to be
    /// taken.
    pub(super) fn take_readings(&mut self, readings: Vec<PortReading>) {
        for r in readings {
            let p = &mut self.ports[r.port.0 as usize];
            p.queue_bytes = r.queue_bytes;
            p.counters = r.counters;
        }
    }

    /// What the upper side ran, for the edge side's report.
    pub(super) fn upper_share(mut self) -> UpperShare {
        UpperShare {
            in_flight_payload: self.in_flight_payload(),
            events: self.events.executed(),
            pool_high_water: self.pool.capacity(),
            ports: std::mem::take(&mut self.ports),
            switches: std::mem::take(&mut self.switches),
            totals: std::mem::take(&mut self.totals),
        }
    }

    /// Takes the upper side's state of what it ran into this (edge) side,
    /// so that the report reads the whole fabric. The ports it takes are
    /// emptied of their queues, whose packets are the other side's.
    pub(super) fn absorb(&mut self, share: UpperShare) {
        let cut = self.cut.as_ref().expect("the edge side of a cut");
        let upper: Vec<usize> = (0..self.ports.len()).filter(|&p| !cut.owns_port(&self.ports, p)).collect();
        let mut ports = share.ports;
        for p in upper {
            std::mem::swap(&mut self.ports[p], &mut ports[p]);
            self.ports[p].queues = Default::default();
        }
        for (node, switch) in share.switches.into_iter().enumerate() {
            if cut.sides[node] == Side::Upper {
                self.switches[node] = switch;
            }
        }
        self.totals.absorb(&share.totals);
        self.absorbed = Some(super::Absorbed {
            events: share.events,
            in_flight_payload: share.in_flight_payload,
            pool_high_water: share.pool_high_water,
        });
    }
}
