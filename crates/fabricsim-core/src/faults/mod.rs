//! Failures: a schedule of link, switch and NIC-port events, and random link
//! flaps drawn from a per-link MTBF (spectrum-x.txt s6.6: exponential times
//! between flaps, each holding the link down for a fixed duration).
//!
//! The schedule is expanded before the run into timed state changes of
//! ports (one direction of a link) and switches, which `sim` applies.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::engine::Rng;
use crate::error::{invalid, number, ScenarioError};
use crate::net::Ev;
use crate::topology::{LinkId, NicRef, NodeId, PortId, Topology};
use crate::units::Time;

/// Which directions of a link a fault affects, seen from the named port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    #[default]
    Both,
    /// Only packets leaving the named port.
    Egress,
    /// Only packets arriving at the named port.
    Ingress,
}

/// A loss rate is a probability.
fn loss_rate(field: &str, rate: f64) -> Result<(), ScenarioError> {
    if !(0.0..=1.0).contains(&rate) {
        return invalid(field, format!("{}: a loss rate is a probability in [0, 1]", number(rate)));
    }
    Ok(())
}

/// A link is down for some time: one down for none would come back up at
/// the instant it failed, and nothing would happen.
fn lasting(field: &str, duration: Time) -> Result<(), ScenarioError> {
    if duration == Time::ZERO {
        return invalid(field, "0ns: a link down for no time is never down");
    }
    Ok(())
}

/// One entry of the fault schedule, chosen by `kind`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultSpec {
    LinkDown(LinkChange),
    LinkUp(LinkChange),
    LinkFlap(LinkFlap),
    SwitchDown(SwitchDown),
    SwitchUp(SwitchUp),
    NicPortDown(NicPortChange),
    NicPortUp(NicPortChange),
    LossRate(LossRate),
    NicLoss(NicLoss),
    EvLoss(EvLoss),
    RandomFlaps(RandomFlaps),
    RandomLinksDown(RandomLinksDown),
}

crate::kind_tagged!(FaultSpec {
    "link_down" => LinkDown,
    "link_up" => LinkUp,
    "link_flap" => LinkFlap,
    "switch_down" => SwitchDown,
    "switch_up" => SwitchUp,
    "nic_port_down" => NicPortDown,
    "nic_port_up" => NicPortUp,
    "loss_rate" => LossRate,
    "nic_loss" => NicLoss,
    "ev_loss" => EvLoss,
    "random_flaps" => RandomFlaps,
    "random_links_down" => RandomLinksDown,
});

impl FaultSpec {
    /// When it strikes; random flaps strike from the start on.
    pub fn at(&self) -> Time {
        match self {
            FaultSpec::LinkDown(f) | FaultSpec::LinkUp(f) => f.at,
            FaultSpec::LinkFlap(f) => f.at,
            FaultSpec::SwitchDown(f) => f.at,
            FaultSpec::SwitchUp(f) => f.at,
            FaultSpec::NicPortDown(f) | FaultSpec::NicPortUp(f) => f.at,
            FaultSpec::LossRate(f) => f.at,
            FaultSpec::NicLoss(f) => f.at,
            FaultSpec::EvLoss(f) => f.at,
            FaultSpec::RandomFlaps(_) => Time::ZERO,
            FaultSpec::RandomLinksDown(f) => f.at,
        }
    }

    /// Whether the seed draws the links it strikes.
    fn is_random(&self) -> bool {
        matches!(self, FaultSpec::RandomFlaps(_) | FaultSpec::RandomLinksDown(_))
    }

    /// What it strikes, as the scenario names it.
    fn element(&self) -> String {
        let direction = |d: Direction| match d {
            Direction::Both => "",
            Direction::Egress => " (egress)",
            Direction::Ingress => " (ingress)",
        };
        match self {
            FaultSpec::LinkDown(LinkChange { port, direction: d, .. })
            | FaultSpec::LinkUp(LinkChange { port, direction: d, .. })
            | FaultSpec::LinkFlap(LinkFlap { port, direction: d, .. }) => format!("link '{port}'{}", direction(*d)),
            FaultSpec::NicPortDown(NicPortChange { nic, port, .. })
            | FaultSpec::NicPortUp(NicPortChange { nic, port, .. }) => match nic {
                NicRef::Index(n) => format!("port {port} of NIC {n}"),
                NicRef::Name(n) => format!("port {port} of NIC '{n}'"),
            },
            FaultSpec::SwitchDown(SwitchDown { switch, .. }) | FaultSpec::SwitchUp(SwitchUp { switch, .. }) => {
                format!("switch '{switch}'")
            }
            _ => unreachable!("only the up and down kinds are refused for changing nothing"),
        }
    }
}

/// A link goes down (`link_down`) or comes back up (`link_up`). `port` names
/// one end as `node:port`, e.g. `t0.p0.3:5`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkChange {
    pub at: Time,
    pub port: String,
    #[serde(default)]
    pub direction: Direction,
}

/// Down at `at`, up again `duration` later.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkFlap {
    pub at: Time,
    pub port: String,
    pub duration: Time,
    #[serde(default)]
    pub direction: Direction,
}

/// A switch stops forwarding. With `gray`, its control plane stays up so
/// routes do not change and traffic keeps being sent into it.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchDown {
    pub at: Time,
    pub switch: String,
    #[serde(default)]
    pub gray: bool,
}

/// A failed switch forwards again.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchUp {
    pub at: Time,
    pub switch: String,
}

/// A NIC port and its link, both ways, go down (`nic_port_down`) or come
/// back up (`nic_port_up`).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NicPortChange {
    pub at: Time,
    pub nic: NicRef,
    pub port: u16,
}

/// Sets the random loss probability of a link from `at` on.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LossRate {
    pub at: Time,
    pub port: String,
    pub rate: f64,
    #[serde(default)]
    pub direction: Direction,
}

/// Random loss on the links of every NIC port, from `at` on: the MRC
/// paper's loss experiments drop packets at random at every NIC with an
/// inline P4 program (s5.2.7). By default the packets arriving at the NICs
/// are lost.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NicLoss {
    pub at: Time,
    pub rate: f64,
    /// Seen from the NIC port: `ingress` (default), `egress` or `both`.
    #[serde(default = "ingress")]
    pub direction: Direction,
}

fn ingress() -> Direction {
    Direction::Ingress
}

/// From `at` on, a NIC drops this fraction of the MRC data packets it
/// sends on one EV, as the MRC paper injects loss on a single EV with the
/// NIC's debug capability (s5.2.4, Figs 12-13). The EV's low 3 bits name
/// its plane, so the NIC port it leaves by.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvLoss {
    pub at: Time,
    pub nic: NicRef,
    pub ev: u16,
    pub rate: f64,
}

/// Every switch-to-switch link flaps with exponentially distributed
/// times between flaps (mean `mtbf`), each lasting `duration`, until
/// `until`. The control plane does not see these flaps (spectrum-x.txt
/// s6.6): routes stay as they are.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RandomFlaps {
    pub mtbf: Time,
    pub duration: Time,
    pub until: Time,
    /// Include NIC-to-switch links as well.
    #[serde(default)]
    pub host_links: bool,
    /// Only NIC-to-switch links flap (spectrum-x.txt s6.6's host-link
    /// flaps, Fig. 14b).
    #[serde(default)]
    pub hosts_only: bool,
}

/// Links drawn at random (with the scenario's seed) among the
/// switch-to-switch links, and the NIC links with `host_links`, go down at
/// `at` and stay down: `count` of them, or a `fraction` (rounded to the
/// nearest count), e.g. MRC's 1% of T0-T1 links, or Spectrum-X s6.6's 1 to
/// 10 concurrent flaps.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RandomLinksDown {
    pub at: Time,
    #[serde(default)]
    pub count: Option<u64>,
    #[serde(default)]
    pub fraction: Option<f64>,
    #[serde(default)]
    pub host_links: bool,
    /// Whether the control plane sees the failures and reconverges routes
    /// (default); false for ports a switch disables on its own, unseen by
    /// the control plane (spectrum-x.txt s6.6).
    #[serde(default = "seen")]
    pub control_plane: bool,
}

fn seen() -> bool {
    true
}

/// A state change the simulation applies at a time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FaultAction {
    /// Sets the up state of a port's egress direction. `routed` says whether
    /// the control plane sees it (and reconverges).
    PortUp {
        port: PortId,
        up: bool,
        routed: bool,
    },
    PortLoss {
        port: PortId,
        rate: f64,
    },
    /// Data packets on entropy `ev` leaving NIC port `port` are lost with
    /// probability `rate`.
    EvLoss {
        port: PortId,
        ev: u16,
        rate: f64,
    },
    SwitchUp {
        node: NodeId,
        up: bool,
        gray: bool,
    },
}

/// Resolves `node:port` to the port it names.
pub fn resolve_port(
    topo: &Topology,
    node_ports: &[Vec<PortId>],
    text: &str,
    field: &str,
) -> Result<PortId, ScenarioError> {
    let Some((node, index)) = text.rsplit_once(':') else {
        return invalid(field, format!("'{text}' is not a port: write `node:port`, e.g. `t0.p0.3:5`"));
    };
    let Some(id) = topo.find(node) else {
        return invalid(field, format!("'{text}': there is no node named '{node}'"));
    };
    let ports = &node_ports[id.0 as usize];
    match index.parse::<usize>().ok().and_then(|i| ports.get(i)) {
        Some(&p) => Ok(p),
        None => invalid(
            field,
            format!("'{text}': node '{node}' has {} ports, 0 to {}", ports.len(), ports.len().saturating_sub(1)),
        ),
    }
}

/// Expands the fault schedule into time-ordered actions (stable for equal
/// times, in scenario order).
pub fn expand(
    specs: &[FaultSpec],
    topo: &Topology,
    node_ports: &[Vec<PortId>],
    seed: u64,
) -> Result<Vec<(Time, FaultAction)>, ScenarioError> {
    let nics = topo.nics();
    let mut actions = Vec::new();
    // The fault each action comes from, by index in `specs`.
    let mut origins = Vec::new();
    let both = |port: PortId, dir: Direction| -> Vec<PortId> {
        match dir {
            Direction::Both => vec![port, port.peer()],
            Direction::Egress => vec![port],
            Direction::Ingress => vec![port.peer()],
        }
    };
    for (i, spec) in specs.iter().enumerate() {
        let field = |name: &str| format!("faults[{i}].{name}");
        let port_of = |text: &str| resolve_port(topo, node_ports, text, &field("port"));
        let switch_of = |name: &str| match topo.find(name) {
            Some(id) if !topo.is_nic(id) => Ok(id),
            _ => invalid(field("switch"), format!("there is no switch named '{name}'")),
        };
        let nic_port = |nic: &NicRef, port: u16| -> Result<PortId, ScenarioError> {
            let id = nic.resolve(topo, &nics, &field("nic"))?;
            node_ports[id.0 as usize].get(port as usize).copied().map_or_else(
                || {
                    invalid(
                        field("port"),
                        format!(
                            "{port}: the NIC has {} ports, 0 to {}",
                            node_ports[id.0 as usize].len(),
                            node_ports[id.0 as usize].len().saturating_sub(1)
                        ),
                    )
                },
                Ok,
            )
        };
        let mut set = |at: Time, ports: Vec<PortId>, up: bool| {
            actions.extend(ports.into_iter().map(|port| (at, FaultAction::PortUp { port, up, routed: true })));
        };
        match spec {
            FaultSpec::LinkDown(LinkChange { at, port, direction }) => {
                set(*at, both(port_of(port)?, *direction), false)
            }
            FaultSpec::LinkUp(LinkChange { at, port, direction }) => set(*at, both(port_of(port)?, *direction), true),
            FaultSpec::LinkFlap(LinkFlap { at, port, duration, direction }) => {
                lasting(&field("duration"), *duration)?;
                let ports = both(port_of(port)?, *direction);
                set(*at, ports.clone(), false);
                set(*at + *duration, ports, true);
            }
            FaultSpec::NicPortDown(NicPortChange { at, nic, port }) => {
                set(*at, both(nic_port(nic, *port)?, Direction::Both), false)
            }
            FaultSpec::NicPortUp(NicPortChange { at, nic, port }) => {
                set(*at, both(nic_port(nic, *port)?, Direction::Both), true)
            }
            FaultSpec::SwitchDown(SwitchDown { at, switch, gray }) => {
                actions.push((*at, FaultAction::SwitchUp { node: switch_of(switch)?, up: false, gray: *gray }))
            }
            FaultSpec::SwitchUp(SwitchUp { at, switch }) => {
                actions.push((*at, FaultAction::SwitchUp { node: switch_of(switch)?, up: true, gray: false }))
            }
            FaultSpec::LossRate(LossRate { at, port, rate, direction }) => {
                loss_rate(&field("rate"), *rate)?;
                for p in both(port_of(port)?, *direction) {
                    actions.push((*at, FaultAction::PortLoss { port: p, rate: *rate }));
                }
            }
            FaultSpec::NicLoss(NicLoss { at, rate, direction }) => {
                loss_rate(&field("rate"), *rate)?;
                for nic in &nics {
                    for &port in &node_ports[nic.0 as usize] {
                        for p in both(port, *direction) {
                            actions.push((*at, FaultAction::PortLoss { port: p, rate: *rate }));
                        }
                    }
                }
            }
            FaultSpec::EvLoss(EvLoss { at, nic, ev, rate }) => {
                loss_rate(&field("rate"), *rate)?;
                let plane = Ev(*ev).plane();
                let id = nic.resolve(topo, &nics, &field("nic"))?;
                let port = node_ports[id.0 as usize].get(plane).copied().ok_or_else(|| {
                    ScenarioError::new(field("ev"), format!("{ev}: its plane ({plane}) is not a port of the NIC"))
                })?;
                actions.push((*at, FaultAction::EvLoss { port, ev: *ev, rate: *rate }));
            }
            FaultSpec::RandomLinksDown(RandomLinksDown { at, count, fraction, host_links, control_plane }) => {
                let mut eligible: Vec<usize> = (0..topo.links.len())
                    .filter(|&l| *host_links || !(topo.is_nic(topo.links[l].a) || topo.is_nic(topo.links[l].b)))
                    .collect();
                let which = if *host_links { "links" } else { "switch-to-switch links" };
                let count = match (count, fraction) {
                    (Some(c), None) if *c as usize <= eligible.len() => *c as usize,
                    (Some(c), None) => {
                        return invalid(field("count"), format!("{c}: the topology has {} {which}", eligible.len()))
                    }
                    (None, Some(f)) if (0.0..=1.0).contains(f) => (f * eligible.len() as f64).round() as usize,
                    (None, Some(f)) => {
                        return invalid(field("fraction"), format!("{}: a fraction is in [0, 1]", number(*f)))
                    }
                    _ => return invalid(field("count"), "give either `count` or `fraction` of the links"),
                };
                if count == 0 {
                    return match fraction {
                        Some(f) => invalid(
                            field("fraction"),
                            format!("{}: of the {} {which}, that rounds to no link at all", number(*f), eligible.len()),
                        ),
                        None => invalid(field("count"), "0: no link would go down"),
                    };
                }
                let mut rng = Rng::stream(seed, &[0x11D0, i as u64]);
                rng.shuffle(&mut eligible);
                eligible.truncate(count);
                eligible.sort_unstable();
                for l in eligible {
                    for port in [PortId::of_link(LinkId(l as u32), 0), PortId::of_link(LinkId(l as u32), 1)] {
                        actions.push((*at, FaultAction::PortUp { port, up: false, routed: *control_plane }));
                    }
                }
            }
            FaultSpec::RandomFlaps(RandomFlaps { mtbf, duration, until, host_links, hosts_only }) => {
                if mtbf.0 == 0 {
                    return invalid(field("mtbf"), "0ns: the mean time between flaps must be positive");
                }
                lasting(&field("duration"), *duration)?;
                if until.0 == 0 {
                    return invalid(field("until"), "0ns: no flap could start before it");
                }
                for (l, link) in topo.links.iter().enumerate() {
                    let host = topo.is_nic(link.a) || topo.is_nic(link.b);
                    if (host && !(*host_links || *hosts_only)) || (!host && *hosts_only) {
                        continue;
                    }
                    let mut rng = Rng::stream(seed, &[0xF1A9, i as u64, l as u64]);
                    let mut t = Time::ZERO;
                    loop {
                        t += Time(rng.exponential(mtbf.0 as f64) as u64);
                        if t >= *until {
                            break;
                        }
                        for port in [PortId::of_link(LinkId(l as u32), 0), PortId::of_link(LinkId(l as u32), 1)] {
                            actions.push((t, FaultAction::PortUp { port, up: false, routed: false }));
                            actions.push((t + *duration, FaultAction::PortUp { port, up: true, routed: false }));
                        }
                        if actions.len() > MAX_FAULT_ACTIONS {
                            return invalid(
                                field("mtbf"),
                                format!(
                                    "{mtbf}: flaps this frequent until {until} make more than {MAX_FAULT_ACTIONS} \
                                     fault events; lengthen mtbf or shorten until"
                                ),
                            );
                        }
                        t += *duration;
                    }
                }
            }
        }
        origins.resize(actions.len(), i);
    }
    let mut timed: Vec<(Time, FaultAction, usize)> =
        actions.into_iter().zip(origins).map(|((t, action), i)| (t, action, i)).collect();
    // At one instant what comes back up does so before what fails, as a
    // fault's effect lasts from its start up to, not including, its end: a
    // link flapped over [10us, 20us) and again from 20us is down at 20us,
    // whichever flap is listed first.
    timed.sort_by_key(|&(t, action, _)| (t, !restores(action)));
    refuse_changes_of_nothing(specs, &timed)?;
    Ok(hold_while_any_fault_holds(specs, timed))
}

/// A port is down while any fault holds it down: the schedule the user
/// wrote (its own changes never overlap, `refuse_changes_of_nothing`)
/// or any random failure drawn over it. Without this, a random flap
/// ending on a link the schedule had taken down would bring it back up
/// early, and an explicit `link_up` would end a random failure. So each
/// port keeps the schedule's state and a count of random failures on it,
/// and only changes of the two together are applied. A routed failure
/// that finds its port down already still tells the control plane (it
/// would see the failure), and a port comes back routed when the control
/// plane was told it went down.
fn hold_while_any_fault_holds(specs: &[FaultSpec], timed: Vec<(Time, FaultAction, usize)>) -> Vec<(Time, FaultAction)> {
    use std::collections::HashMap;
    struct Held {
        scheduled_up: bool,
        random_holds: u32,
        /// The control plane was told of a failure and not yet of the repair.
        told_down: bool,
    }
    let mut held: HashMap<PortId, Held> = HashMap::new();
    let mut applied = Vec::with_capacity(timed.len());
    for (at, action, i) in timed {
        let FaultAction::PortUp { port, up, routed } = action else {
            applied.push((at, action));
            continue;
        };
        let state = held.entry(port).or_insert(Held { scheduled_up: true, random_holds: 0, told_down: false });
        let was_up = state.scheduled_up && state.random_holds == 0;
        match (specs[i].is_random(), up) {
            (true, false) => state.random_holds += 1,
            (true, true) => state.random_holds = state.random_holds.saturating_sub(1),
            (false, _) => state.scheduled_up = up,
        }
        let is_up = state.scheduled_up && state.random_holds == 0;
        let routed = if is_up != was_up {
            routed || (is_up && state.told_down)
        } else if routed && !up && !state.told_down {
            true
        } else {
            continue;
        };
        if routed {
            state.told_down = !is_up;
        }
        applied.push((at, FaultAction::PortUp { port, up: is_up, routed }));
    }
    applied
}

/// Whether `action` brings a port or a switch back up.
fn restores(action: FaultAction) -> bool {
    matches!(action, FaultAction::PortUp { up: true, .. } | FaultAction::SwitchUp { up: true, .. })
}

/// Refuses a scheduled fault that finds its element as it would leave it:
/// a link brought up while it is up, a switch failed twice, a flap started
/// while the link is down. A scheduled failure is the user's statement of
/// the element's state, so two that overlap contradict each other (the
/// second would end with the first, or never begin). A change that finds
/// only some of its directions already so is allowed (it changes the
/// others), as is a gray switch failing for good. The random kinds are
/// neither refused nor counted: they hold links down apart from the
/// schedule (`hold_while_any_fault_holds`), so a `link_up` never ends one.
/// `timed` is the expanded schedule in the order it is applied, with each
/// action's fault.
fn refuse_changes_of_nothing(specs: &[FaultSpec], timed: &[(Time, FaultAction, usize)]) -> Result<(), ScenarioError> {
    use std::collections::HashMap;
    /// The fault that last set an element, and when.
    type SetBy = Option<(usize, Time)>;
    // Up, and for a switch also whether its control plane advertises it:
    // every element starts up.
    let mut ports: HashMap<PortId, (bool, SetBy)> = HashMap::new();
    let mut switches: HashMap<NodeId, ((bool, bool), SetBy)> = HashMap::new();
    let scheduled = timed.iter().filter(|&&(_, _, i)| !specs[i].is_random()).copied().collect::<Vec<_>>();
    for group in scheduled.chunk_by(|a, b| (a.0, a.2) == (b.0, b.2)) {
        let (at, _, i) = group[0];
        let (mut changes, mut found) = (false, None);
        for &(_, action, _) in group {
            let (already, set_by) = match action {
                FaultAction::PortUp { port, up, .. } => {
                    let state = ports.entry(port).or_insert((true, None));
                    let was = std::mem::replace(state, (up, Some((i, at))));
                    (was.0 == up, was.1)
                }
                FaultAction::SwitchUp { node, up, gray } => {
                    let state = switches.entry(node).or_insert(((true, true), None));
                    let was = std::mem::replace(state, ((up, up || gray), Some((i, at))));
                    (was.0 == (up, up || gray), was.1)
                }
                FaultAction::PortLoss { .. } | FaultAction::EvLoss { .. } => continue,
            };
            changes |= !already;
            found = found.or(Some(set_by));
        }
        let Some(set_by) = found else { continue };
        if changes {
            continue;
        }
        let spec = &specs[i];
        let when = if at == spec.at() { format!("at {at}") } else { format!("at {}, ending at {at}", spec.at()) };
        let state = if group.iter().any(|&(_, action, _)| restores(action)) { "up" } else { "down" };
        let left = match set_by {
            Some((k, t)) => format!("as faults[{k}] ({} at {t}) left it", specs[k].kind()),
            None if specs.iter().any(FaultSpec::is_random) => {
                "as the schedule has it from the start (a random failure is not the schedule's to end)".to_string()
            }
            None => "as it is from the start".to_string(),
        };
        return invalid(
            format!("faults[{i}]"),
            format!(
                "{} {when}: {} is {state} already then, {left}; a fault that changes nothing contradicts the schedule",
                spec.kind(),
                spec.element()
            ),
        );
    }
    Ok(())
}

/// The most fault events a scenario may schedule (128 MB of them): random
/// flaps far beyond what any failure study needs are refused, not built.
const MAX_FAULT_ACTIONS: usize = 4_000_000;
