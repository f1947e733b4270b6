//! Each kind of fault does what it says: switch failures with and without
//! a working control plane, NIC port loss, link loss rates, random flaps.

mod common;

use common::{floats, ints, run, summary_u64};
use serde_json::json;

fn topology() -> serde_json::Value {
    json!({"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps", "link_delay": "1us"})
}

fn cross_traffic() -> serde_json::Value {
    json!([
        {"kind": "flow", "src": 0, "dst": 2, "bytes": "1MB", "qps": 4},
        {"kind": "flow", "src": 1, "dst": 3, "bytes": "1MB", "qps": 4},
    ])
}

#[test]
fn a_failed_spine_is_routed_around_after_reconvergence() {
    let out = run(json!({
        "topology": topology(),
        "switch": {"reconvergence_delay": "20us"},
        "traffic": cross_traffic(),
        "faults": [{"kind": "switch_down", "at": "10us", "switch": "t1.p0.0"}],
    }));
    assert!(out.summary["drops_by_cause"]["switch_down"].as_u64().unwrap() > 0, "{}", out.summary);
    assert_eq!(summary_u64(&out, "flows_completed"), 2);
}

#[test]
fn a_gray_failure_keeps_its_routes_and_keeps_losing_packets() {
    let scenario = |gray: bool| {
        json!({
            "topology": topology(),
            "switch": {"reconvergence_delay": "20us"},
            "transport": {"kind": "rocev2", "timeout_exponent": 2},
            "traffic": cross_traffic(),
            "duration": "3ms",
            "faults": [{"kind": "switch_down", "at": "10us", "switch": "t1.p0.0", "gray": gray}],
        })
    };
    let gray = run(scenario(true));
    let plain = run(scenario(false));
    let lost = |o: &fabricsim_core::RunOutput| o.summary["drops_by_cause"]["switch_down"].as_u64().unwrap();
    // The control plane never withdraws the gray switch: QPs hashed onto it
    // lose every packet until they fail, while a visible failure costs only
    // the packets sent before reconvergence.
    assert!(lost(&gray) > 5 * lost(&plain), "gray {} vs visible {}", lost(&gray), lost(&plain));
    assert!(summary_u64(&gray, "qp_errors") > 0);
    assert_eq!(summary_u64(&plain, "qp_errors"), 0);
}

#[test]
fn a_dead_nic_port_fails_its_qps_after_the_retries() {
    let out = run(json!({
        "topology": topology(),
        "transport": {"kind": "rocev2", "timeout_exponent": 1, "retry_count": 3},
        "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "1MB"}],
        "faults": [{"kind": "nic_port_down", "at": "5us", "nic": 0, "port": 0}],
    }));
    assert_eq!(summary_u64(&out, "qp_errors"), 1);
    assert_eq!(ints(&out.flows, "qp_errors"), [1]);
    assert_eq!(ints(&out.flows, "timeouts"), [4]);
    assert_eq!(floats(&out.flows, "fct_s"), [None]);
}

#[test]
fn a_lossy_link_drops_at_its_rate_and_go_back_n_recovers() {
    let out = run(json!({
        "topology": topology(),
        "traffic": [{"kind": "flow", "src": 0, "dst": 1, "bytes": "4MB"}],
        // nic0's link to its ToR loses 1% of packets each way from the start.
        "faults": [{"kind": "loss_rate", "at": "0us", "port": "nic0:0", "rate": 0.01}],
    }));
    let lost = out.summary["drops_by_cause"]["link_loss"].as_u64().unwrap();
    let sent: u64 = ints(&out.ports, "tx_packets")[..].iter().sum();
    assert!(lost > 0 && lost < sent / 20, "{lost} of {sent}");
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    assert!(ints(&out.flows, "retransmitted_packets")[0] > 0);
}

#[test]
fn random_flaps_lose_packets_and_are_reproducible() {
    let scenario = json!({
        "topology": topology(),
        "duration": "2ms",
        "traffic": [{"kind": "permutation", "bytes": "8MB", "qps": 8}],
        "faults": [{"kind": "random_flaps", "mtbf": "500us", "duration": "50us", "until": "2ms"}],
    });
    let a = run(scenario.clone());
    let b = run(scenario);
    assert_eq!(a.to_json(), b.to_json());
    assert!(a.summary["drops_by_cause"]["link_down"].as_u64().unwrap() > 0, "{}", a.summary);
}

#[test]
fn random_flap_counts_match_the_mtbf() {
    use fabricsim_core::faults::{expand, FaultAction, FaultSpec};
    use fabricsim_core::topology::TopologySpec;
    let topo: TopologySpec = serde_json::from_value(json!(
        {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"}
    ))
    .unwrap();
    let topo = topo.build().unwrap();
    let node_ports = topo.node_ports();
    let spec: FaultSpec =
        serde_json::from_value(json!({"kind": "random_flaps", "mtbf": "10ms", "duration": "1ms", "until": "1s"}))
            .unwrap();
    let actions = expand(&[spec], &topo, &node_ports, 7).unwrap();
    // One flap takes a link down in both directions.
    let flaps = actions.iter().filter(|(_, a)| matches!(a, FaultAction::PortUp { up: false, .. })).count() / 2;
    let fabric_links = topo.links.iter().filter(|l| !topo.is_nic(l.a) && !topo.is_nic(l.b)).count();
    // A renewal process: one flap per (mtbf + duration) on average.
    let expected = fabric_links as f64 * 1.0 / 0.011;
    assert!((flaps as f64 - expected).abs() < 0.05 * expected, "{flaps} flaps, expected {expected:.0}");
    assert!(actions.iter().all(|(_, a)| matches!(a, FaultAction::PortUp { routed: false, .. })));
}

#[test]
fn random_links_down_takes_that_many_links_and_tells_the_control_plane_as_asked() {
    use fabricsim_core::faults::{expand, FaultAction, FaultSpec};
    use fabricsim_core::topology::TopologySpec;
    let topo: TopologySpec =
        serde_json::from_value(json!({"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"})).unwrap();
    let topo = topo.build().unwrap();
    let node_ports = topo.node_ports();
    let fabric_links = topo.links.iter().filter(|l| !topo.is_nic(l.a) && !topo.is_nic(l.b)).count();
    let down = |spec: serde_json::Value, seed: u64| {
        let spec: FaultSpec = serde_json::from_value(spec).unwrap();
        expand(&[spec], &topo, &node_ports, seed)
    };
    let links = |actions: &[(fabricsim_core::units::Time, FaultAction)]| {
        let mut links: Vec<u32> = (actions.iter())
            .map(|(_, a)| match a {
                FaultAction::PortUp { port, up: false, .. } => port.link().0,
                other => panic!("{other:?}"),
            })
            .collect();
        links.dedup();
        links
    };
    let five = down(json!({"kind": "random_links_down", "at": "1us", "count": 5}), 1).unwrap();
    let chosen = links(&five);
    assert_eq!(chosen.len(), 5);
    // Both directions of each, switch-to-switch only, seen by the control plane unless told otherwise.
    assert_eq!(five.len(), 10);
    assert!(chosen.iter().all(|&l| {
        let link = &topo.links[l as usize];
        !topo.is_nic(link.a) && !topo.is_nic(link.b)
    }));
    assert!(five.iter().all(|(_, a)| matches!(a, FaultAction::PortUp { routed: true, .. })));
    // The same seed draws the same links; another seed others.
    assert_eq!(five, down(json!({"kind": "random_links_down", "at": "1us", "count": 5}), 1).unwrap());
    assert_ne!(chosen, links(&down(json!({"kind": "random_links_down", "at": "1us", "count": 5}), 2).unwrap()));
    let quiet =
        down(json!({"kind": "random_links_down", "at": "1us", "fraction": 0.25, "control_plane": false}), 1).unwrap();
    assert_eq!(links(&quiet).len(), (fabric_links as f64 * 0.25).round() as usize);
    assert!(quiet.iter().all(|(_, a)| matches!(a, FaultAction::PortUp { routed: false, .. })));
    // Bad counts name their field.
    for (bad, field) in [
        (json!({"kind": "random_links_down", "at": "0us", "count": 1000}), "faults[0].count"),
        (json!({"kind": "random_links_down", "at": "0us", "fraction": 1.5}), "faults[0].fraction"),
        (json!({"kind": "random_links_down", "at": "0us"}), "faults[0].count"),
        (json!({"kind": "random_links_down", "at": "0us", "count": 1, "fraction": 0.1}), "faults[0].count"),
        (json!({"kind": "random_links_down", "at": "0us", "count": 0}), "faults[0].count: 0: no link"),
        (json!({"kind": "random_links_down", "at": "0us", "fraction": 0.01}), "rounds to no link"),
    ] {
        let err = down(bad, 1).expect_err("refused").to_string();
        assert!(err.contains(field), "{err}");
    }
}

#[test]
fn host_link_flaps_touch_only_nic_links() {
    use fabricsim_core::faults::{expand, FaultAction, FaultSpec};
    use fabricsim_core::topology::TopologySpec;
    let topo: TopologySpec =
        serde_json::from_value(json!({"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"})).unwrap();
    let topo = topo.build().unwrap();
    let spec: FaultSpec = serde_json::from_value(
        json!({"kind": "random_flaps", "mtbf": "10ms", "duration": "1ms", "until": "100ms", "hosts_only": true}),
    )
    .unwrap();
    let actions = expand(&[spec], &topo, &topo.node_ports(), 3).unwrap();
    assert!(!actions.is_empty());
    for (_, a) in &actions {
        let FaultAction::PortUp { port, .. } = a else { panic!("{a:?}") };
        let link = &topo.links[port.link().0 as usize];
        assert!(topo.is_nic(link.a) || topo.is_nic(link.b));
    }
}

/// ToR 3's uplink: no route between ToRs 0 and 1 (`cross_traffic`) uses it.
const UNRELATED_LINK: &str = "t0.p0.3:2";

#[test]
fn the_control_plane_learns_each_failure_its_own_delay_after_it() {
    let scenario = |unrelated_first: bool| {
        let mut faults = vec![json!({"kind": "switch_down", "at": "15us", "switch": "t1.p0.0"})];
        if unrelated_first {
            faults.push(json!({"kind": "link_down", "at": "0us", "port": UNRELATED_LINK}));
        }
        json!({
            "topology": topology(),
            "switch": {"reconvergence_delay": "20us"},
            "traffic": cross_traffic(),
            "faults": faults,
        })
    };
    let alone = run(scenario(false));
    let after_another = run(scenario(true));
    // The spine is routed around 20 us after it fails, not when the
    // routes recomputed for the earlier failure at 20 us are installed.
    assert_same_losses("switch_down", &alone, &after_another);
}

/// `a` lost packets to `cause`, and `b` lost the same, the same way.
fn assert_same_losses(cause: &str, a: &fabricsim_core::RunOutput, b: &fabricsim_core::RunOutput) {
    assert!(a.summary["drops_by_cause"][cause].as_u64().unwrap() > 0, "{}", a.summary);
    assert_eq!(a.summary["drops_by_cause"], b.summary["drops_by_cause"]);
    assert_eq!(a.flows, b.flows);
}

#[test]
fn a_failure_the_control_plane_is_not_told_of_stays_in_its_routes() {
    let scenario = |routed_fault: bool| {
        let mut faults = vec![json!({
            "kind": "random_links_down", "at": "5us", "fraction": 0.25, "control_plane": false,
        })];
        if routed_fault {
            faults.push(json!({"kind": "link_down", "at": "6us", "port": UNRELATED_LINK}));
        }
        json!({
            "topology": topology(),
            "switch": {"reconvergence_delay": "20us"},
            "transport": {"kind": "rocev2", "timeout_exponent": 2},
            "traffic": cross_traffic(),
            "duration": "3ms",
            "faults": faults,
        })
    };
    let untold = run(scenario(false));
    let with_another = run(scenario(true));
    // QPs hashed onto the dead links keep losing their packets: another
    // failure's reconvergence does not reveal them.
    assert_same_losses("link_down", &untold, &with_another);
}

#[test]
fn a_flap_shorter_than_the_reconvergence_delay_is_never_routed_around() {
    let scenario = |delay: &str| {
        json!({
            "topology": topology(),
            "switch": {"reconvergence_delay": delay},
            "traffic": cross_traffic(),
            "faults": [{"kind": "link_flap", "at": "15us", "port": "t0.p0.0:2", "duration": "10us"}],
        })
    };
    // Looking 20 us after each change, the control plane finds the link up
    // both times: the run is the one whose control plane never looked
    // (the flows end long before 1 s).
    let quick = run(scenario("20us"));
    let never = run(scenario("1s"));
    assert_same_losses("link_down", &quick, &never);
}

#[test]
fn faults_that_would_change_nothing_are_refused() {
    use fabricsim_core::faults::{expand, FaultSpec};
    use fabricsim_core::topology::TopologySpec;
    let topo: TopologySpec =
        serde_json::from_value(json!({"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"})).unwrap();
    let topo = topo.build().unwrap();
    for (spec, expected) in [
        (
            json!({"kind": "link_flap", "at": "1us", "port": "t0.p0.0:2", "duration": "0ns"}),
            "faults[0].duration: 0ns: a link down for no time is never down",
        ),
        (
            json!({"kind": "random_flaps", "mtbf": "1ms", "duration": "0ns", "until": "1s"}),
            "faults[0].duration: 0ns: a link down for no time is never down",
        ),
        (
            json!({"kind": "random_flaps", "mtbf": "1ms", "duration": "1us", "until": "0ns"}),
            "faults[0].until: 0ns: no flap could start before it",
        ),
    ] {
        let spec: FaultSpec = serde_json::from_value(spec).unwrap();
        let err = expand(&[spec], &topo, &topo.node_ports(), 1).expect_err("refused");
        assert_eq!(err.to_string(), expected);
    }
}

fn expanded(
    faults: serde_json::Value,
) -> Result<Vec<(fabricsim_core::units::Time, fabricsim_core::faults::FaultAction)>, String> {
    use fabricsim_core::faults::{expand, FaultSpec};
    use fabricsim_core::topology::TopologySpec;
    let topo: TopologySpec = serde_json::from_value(topology()).unwrap();
    let topo = topo.build().unwrap();
    let specs: Vec<FaultSpec> = serde_json::from_value(faults).unwrap();
    expand(&specs, &topo, &topo.node_ports(), 1).map_err(|e| e.to_string())
}

#[test]
fn a_fault_that_finds_its_link_or_switch_as_it_would_leave_it_is_refused() {
    let down = |at: &str| json!({"kind": "link_down", "at": at, "port": "t0.p0.0:2"});
    let up = |at: &str| json!({"kind": "link_up", "at": at, "port": "t0.p0.0:2"});
    let flap =
        |at: &str, duration: &str| json!({"kind": "link_flap", "at": at, "port": "t0.p0.0:2", "duration": duration});
    let switch = |kind: &str, at: &str| json!({"kind": kind, "at": at, "switch": "t1.p0.0"});
    let nic_port = |kind: &str, at: &str| json!({"kind": kind, "at": at, "nic": 0, "port": 0});
    let unchanged = "a fault that changes nothing contradicts the schedule";
    for (faults, expected) in [
        (json!([up("5us")]), "faults[0]: link_up at 5us: link 't0.p0.0:2' is up already then, as it is from the start"),
        (
            json!([down("1us"), down("2us")]),
            "faults[1]: link_down at 2us: link 't0.p0.0:2' is down already then, as faults[0] (link_down at 1us) left it",
        ),
        (
            json!([flap("10us", "10us"), flap("15us", "10us")]),
            "faults[1]: link_flap at 15us: link 't0.p0.0:2' is down already then, as faults[0] (link_flap at 10us) \
             left it",
        ),
        (
            json!([flap("10us", "20us"), up("20us")]),
            "faults[0]: link_flap at 10us, ending at 30us: link 't0.p0.0:2' is up already then, as faults[1] \
             (link_up at 20us) left it",
        ),
        (
            json!([
                {"kind": "link_down", "at": "1us", "port": "t0.p0.0:2", "direction": "egress"},
                {"kind": "link_flap", "at": "2us", "port": "t0.p0.0:2", "duration": "1us", "direction": "egress"},
            ]),
            "faults[1]: link_flap at 2us: link 't0.p0.0:2' (egress) is down already then, as faults[0] (link_down \
             at 1us) left it",
        ),
        (
            json!([{"kind": "link_down", "at": "1us", "port": "nic0:0"}, nic_port("nic_port_down", "2us")]),
            "faults[1]: nic_port_down at 2us: port 0 of NIC 0 is down already then, as faults[0] (link_down at 1us) \
             left it",
        ),
        (json!([nic_port("nic_port_up", "1us")]), "faults[0]: nic_port_up at 1us: port 0 of NIC 0 is up already then"),
        (
            json!([switch("switch_down", "1us"), switch("switch_down", "2us")]),
            "faults[1]: switch_down at 2us: switch 't1.p0.0' is down already then, as faults[0] (switch_down at 1us) \
             left it",
        ),
        (json!([switch("switch_up", "1us")]), "faults[0]: switch_up at 1us: switch 't1.p0.0' is up already then"),
        // A random failure is not the schedule's to end, nor does it end
        // the schedule's own failure.
        (
            json!([{"kind": "random_links_down", "at": "1us", "fraction": 1.0}, up("20us")]),
            "faults[1]: link_up at 20us: link 't0.p0.0:2' is up already then, as the schedule has it from the start \
             (a random failure is not the schedule's to end)",
        ),
        (
            json!([
                down("1us"),
                {"kind": "random_flaps", "mtbf": "5us", "duration": "5us", "until": "100us"},
                down("50us"),
            ]),
            "faults[2]: link_down at 50us: link 't0.p0.0:2' is down already then, as faults[0] (link_down at 1us) \
             left it",
        ),
    ] {
        let e = expanded(faults.clone()).expect_err(&faults.to_string());
        assert!(e.starts_with(expected) && e.ends_with(unchanged), "{faults}: {e}");
    }
}

#[test]
fn schedules_that_change_their_elements_each_time_are_accepted() {
    use fabricsim_core::faults::FaultAction;
    use fabricsim_core::units::Time;
    let flap = |at: &str| json!({"kind": "link_flap", "at": at, "port": "t0.p0.0:2", "duration": "10us"});
    let down =
        |at: &str, direction: &str| json!({"kind": "link_down", "at": at, "port": "t0.p0.0:2", "direction": direction});
    let switch_down =
        |at: &str, gray: bool| json!({"kind": "switch_down", "at": at, "switch": "t1.p0.0", "gray": gray});
    for faults in [
        json!([flap("10us"), flap("30us")]),
        json!([down("10us", "both"), {"kind": "link_up", "at": "20us", "port": "t0.p0.0:2"}]),
        // The ingress direction is still up.
        json!([down("10us", "egress"), down("20us", "both")]),
        // A link and the switch at its end are each their own element.
        json!([down("10us", "both"), switch_down("20us", false)]),
        // A gray failure whose control plane then fails too.
        json!([switch_down("10us", true), switch_down("20us", false)]),
        // Links the seed draws hold them down apart from the schedule.
        json!([
            {"kind": "random_links_down", "at": "1us", "fraction": 1.0},
            down("10us", "both"),
            {"kind": "link_up", "at": "20us", "port": "t0.p0.0:2"},
        ]),
        json!([{"kind": "random_flaps", "mtbf": "5us", "duration": "5us", "until": "100us"}, flap("10us")]),
    ] {
        expanded(faults.clone()).unwrap_or_else(|e| panic!("{faults}: {e}"));
    }
    // Back-to-back flaps, listed either way round: the link stays down at
    // 20us, where it came back up between them when the later was listed first.
    for faults in [json!([flap("10us"), flap("20us")]), json!([flap("20us"), flap("10us")])] {
        let actions = expanded(faults.clone()).unwrap();
        let at_20: Vec<bool> = (actions.iter())
            .filter(|(t, _)| *t == Time::from_us(20))
            .map(|(_, a)| matches!(a, FaultAction::PortUp { up: true, .. }))
            .collect();
        assert_eq!(at_20, [true, true, false, false], "{faults}");
    }
}

/// The up state of `port` after each fault action, from the start.
fn states_of(
    port: fabricsim_core::topology::PortId,
    actions: &[(fabricsim_core::units::Time, fabricsim_core::faults::FaultAction)],
) -> Vec<(fabricsim_core::units::Time, bool, bool)> {
    use fabricsim_core::faults::FaultAction;
    (actions.iter())
        .filter_map(|&(t, a)| match a {
            FaultAction::PortUp { port: p, up, routed } if p == port => Some((t, up, routed)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_link_is_down_while_any_fault_holds_it_down() {
    use fabricsim_core::topology::TopologySpec;
    use fabricsim_core::units::Time;
    let topo: TopologySpec = serde_json::from_value(topology()).unwrap();
    let topo = topo.build().unwrap();
    let port = fabricsim_core::faults::resolve_port(&topo, &topo.node_ports(), "t0.p0.0:2", "port").unwrap();
    let flaps = json!({"kind": "random_flaps", "mtbf": "3us", "duration": "2us", "until": "200us"});
    let (down, up) = (Time::from_us(50), Time::from_us(120));
    // The schedule takes the link down over [50us, 120us) while random
    // flaps come and go on it: none of their ends brings it back early,
    // and the schedule's own repair waits for a flap still on.
    let faults = json!([
        flaps,
        {"kind": "link_down", "at": "50us", "port": "t0.p0.0:2"},
        {"kind": "link_up", "at": "120us", "port": "t0.p0.0:2"},
    ]);
    let actions = expanded(faults).unwrap();
    for p in [port, port.peer()] {
        let states = states_of(p, &actions);
        let mut up_now = true;
        for &(at, is_up, routed) in &states {
            // Only changes are applied, and a routed failure told.
            assert!(is_up != up_now || (routed && !is_up), "{p:?} at {at}: {states:?}");
            up_now = is_up;
            assert!(!(is_up && at >= down && at < up), "{p:?} back up at {at}, inside the scheduled failure");
        }
        assert!(states.iter().any(|&(at, is_up, _)| !is_up && at < down), "flaps before it: {states:?}");
        // The scheduled failure is routed: the control plane hears of it at
        // 50us even when a flap had the link down already, and of the repair.
        let routed: Vec<_> = states.iter().filter(|s| s.2).map(|s| (s.0, s.1)).collect();
        assert_eq!(routed.first(), Some(&(down, false)), "{states:?}");
        assert!(routed.len() == 2 && routed[1].1 && routed[1].0 >= up, "{states:?}");
    }
    // Two random failures over one link: it comes back when both are over.
    let faults = json!([
        {"kind": "random_links_down", "at": "1us", "fraction": 1.0, "control_plane": false},
        {"kind": "random_flaps", "mtbf": "3us", "duration": "2us", "until": "200us"},
    ]);
    let actions = expanded(faults).unwrap();
    assert_eq!(states_of(port, &actions), [(Time::from_us(1), false, false)]);
}
