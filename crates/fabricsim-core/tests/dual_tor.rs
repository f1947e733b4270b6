//! HPN's non-stacked dual-ToR (alibaba-hpn.txt s4): a NIC's two ports go to
//! two independent ToRs, each of which announces a host route to it. When a
//! NIC-ToR link fails, the NIC moves its QPs to the other port at once
//! (LACP), and the ToR withdraws the host route: once the fabric converges,
//! traffic to the NIC goes through the other ToR and nothing more is lost.

mod common;

use common::{run, summary_u64};
use serde_json::{json, Value};

/// A 2-tier Clos of 8 ToRs (4 NICs each, every NIC on two of them), flows
/// both ways between NIC 0 and NIC 12, and NIC 0's port 0 failing at
/// `fail_at` with routes converging `converge` later.
fn dual_tor(failover: &str, traffic: Value, fail_at: &str, converge: &str) -> Value {
    json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "nic_ports": 2},
        "switch": {"reconvergence_delay": converge},
        "nic": {"port_failover": failover},
        "transport": {"kind": "rocev2", "qps": 4, "timeout_exponent": 8},
        "traffic": traffic,
        "faults": [{"kind": "link_down", "at": fail_at, "port": "nic0:0"}],
    })
}

fn both_ways(start: &str) -> Value {
    json!([
        {"kind": "flow", "src": 0, "dst": 12, "bytes": "4MB", "start": start},
        {"kind": "flow", "src": 12, "dst": 0, "bytes": "4MB", "start": start},
    ])
}

#[test]
fn with_lacp_a_nic_to_tor_link_failure_costs_only_what_the_convergence_loses() {
    // Without failover the QPs bound to the dead port send into it until
    // their retries run out: a QP error, a flow lost.
    let none = run(dual_tor("none", both_ways("0us"), "50us", "50us"));
    assert!(summary_u64(&none, "qp_errors") > 0, "{}", none.summary);
    assert_eq!(summary_u64(&none, "flows_completed"), 1);
    // With LACP both flows finish and no QP fails.
    let lacp = run(dual_tor("lacp", both_ways("0us"), "50us", "50us"));
    assert_eq!(summary_u64(&lacp, "qp_errors"), 0, "{}", lacp.summary);
    assert_eq!(summary_u64(&lacp, "flows_completed"), 2);
    // What is lost is what the fabric sent toward the dead link before the
    // host route was withdrawn: the longer the convergence, the more.
    let lost = |out: &fabricsim_core::RunOutput| out.summary["drops_by_cause"]["link_down"].as_u64().unwrap();
    let slow = run(dual_tor("lacp", both_ways("0us"), "50us", "200us"));
    assert!(lost(&slow) > 2 * lost(&lacp), "{} against {}", lost(&slow), lost(&lacp));
    assert_eq!(summary_u64(&slow, "qp_errors"), 0);
    // Flows that start once the routes have converged lose nothing: the
    // host route through the dead link is gone, and the NIC sends on its
    // other port.
    let after = run(dual_tor("lacp", both_ways("100us"), "0us", "50us"));
    assert_eq!(lost(&after), 0, "{}", after.summary);
    assert_eq!(summary_u64(&after, "retransmitted_packets"), 0);
    assert_eq!(summary_u64(&after, "flows_completed"), 2);
}

#[test]
fn a_qp_returns_to_its_own_port_when_the_link_comes_back() {
    // NIC 0 sends on both ports (two QPs each way hashed apart); port 0
    // fails and returns mid-flow: after it returns it carries data again.
    let mut s = dual_tor("lacp", both_ways("0us"), "20us", "10us");
    s["traffic"][0]["bytes"] = json!("16MB");
    s["faults"] = json!([
        {"kind": "link_down", "at": "20us", "port": "nic0:0"},
        {"kind": "link_up", "at": "200us", "port": "nic0:0"},
    ]);
    s["telemetry"] = json!({"sample_interval": "10us", "ports": ["nic0:0"]});
    let out = run(s);
    assert_eq!(summary_u64(&out, "qp_errors"), 0, "{}", out.summary);
    let rate = common::tx_rate(&out, "nic0:0");
    let sent = |from: f64, to: f64| rate.iter().filter(|(t, _)| *t >= from && *t < to).map(|(_, r)| r).sum::<f64>();
    assert_eq!(sent(50e-6, 190e-6), 0.0, "nothing leaves a dead port: {rate:?}");
    assert!(sent(220e-6, 1.0) > 0.0, "the QPs came back: {rate:?}");
}

#[test]
fn least_loaded_puts_a_message_whole_on_one_qp_where_striping_splits_it() {
    // Two QPs per connection, bound to NIC 0's two ports: striping sends
    // half the flow out of each; least-loaded posting puts the message on
    // the QP with the fewest outstanding bytes (both empty: the first).
    let sent = |split: &str| {
        let mut s = dual_tor("none", json!([{"kind": "flow", "src": 0, "dst": 12, "bytes": "1MB"}]), "1s", "1us");
        s["faults"] = json!([]);
        s["transport"]["qps"] = json!(2);
        s["nic"]["message_split"] = json!(split);
        let out = run(s);
        let (nodes, bytes) = (common::texts(&out.ports, "node"), common::ints(&out.ports, "tx_bytes"));
        (0..nodes.len()).filter(|&i| nodes[i] == "nic0").map(|i| bytes[i]).collect::<Vec<_>>()
    };
    let stripe = sent("stripe");
    assert!(stripe.len() == 2 && stripe[0].abs_diff(stripe[1]) < stripe[0] / 100, "{stripe:?}");
    let least = sent("least_loaded");
    assert!(least[0] > 1_000_000 && least[1] == 0, "{least:?}");
}

/// Stacked dual-ToR (alibaba-hpn.txt s4.1, Fig 8a): the same fabric with
/// each ToR pair joined by a stack link, NIC 0 under the pair t0.p0.0
/// (primary) and t0.p0.1 (secondary), and `faults` at 50us; the secondary
/// gives up 20us after it loses sync.
fn stacked(stack: bool, faults: Value) -> Value {
    let mut s = dual_tor("lacp", both_ways("0us"), "0us", "10us");
    s["topology"]["tor_stack"] = json!(stack);
    s["switch"]["stack_failover_delay"] = json!("20us");
    s["traffic"][0]["bytes"] = json!("8MB");
    s["traffic"][1]["bytes"] = json!("8MB");
    s["faults"] = faults;
    s["telemetry"] = json!({"sample_interval": "10us", "ports": ["nic0:1"]});
    s
}

/// What NIC 0 sent on its port to the secondary ToR from 100us to 300us.
fn secondary_traffic(out: &fabricsim_core::RunOutput) -> f64 {
    let rate = common::tx_rate(out, "nic0:1");
    rate.iter().filter(|(t, _)| (100e-6..300e-6).contains(t)).map(|(_, r)| r).sum()
}

#[test]
fn a_stacked_primary_whose_data_plane_fails_takes_its_secondary_and_the_nics_offline() {
    let gray_primary = json!([{"kind": "switch_down", "at": "50us", "switch": "t0.p0.0", "gray": true}]);
    // Stacked: the secondary loses sync and shuts down, so NIC 0 has no
    // working ToR left; its QPs fail.
    let out = run(stacked(true, gray_primary.clone()));
    assert_eq!(secondary_traffic(&out), 0.0, "the secondary is offline");
    assert!(summary_u64(&out, "qp_errors") > 0, "{}", out.summary);
    assert_eq!(summary_u64(&out, "flows_completed"), 0);
    // Non-stacked: the secondary runs on by itself and carries NIC 0's
    // port-1 traffic.
    let apart = run(stacked(false, gray_primary));
    assert!(secondary_traffic(&apart) > 0.0, "{}", apart.summary);
}

#[test]
fn a_stack_link_failure_shuts_the_secondary_down_and_lacp_keeps_the_nics_on_the_primary() {
    let out = run(stacked(true, json!([{"kind": "link_down", "at": "50us", "port": "t0.p0.0:8"}])));
    assert_eq!(secondary_traffic(&out), 0.0, "the secondary is offline");
    assert_eq!(summary_u64(&out, "qp_errors"), 0, "{}", out.summary);
    assert_eq!(summary_u64(&out, "flows_completed"), 2);
    // It comes back once the stack is whole.
    let mut healed =
        stacked(true, json!([{"kind": "link_flap", "at": "50us", "port": "t0.p0.0:8", "duration": "40us"}]));
    healed["traffic"][0]["bytes"] = json!("32MB");
    let out = run(healed);
    let rate = common::tx_rate(&out, "nic0:1");
    assert!(rate.iter().any(|&(t, r)| t > 200e-6 && r > 0.0), "{rate:?}");
}

#[test]
fn a_nic_that_misses_the_remote_fault_sends_into_a_dead_direction_until_lacp_notices() {
    // alibaba-hpn.txt s10: NIC 0's transmit direction on port 0 fails while
    // the ToR-to-NIC direction works.
    let asymmetric = |failover: &str, signaling: bool| {
        let mut s = dual_tor(failover, both_ways("0us"), "0us", "10us");
        s["faults"] = json!([{"kind": "link_down", "at": "20us", "port": "nic0:0", "direction": "egress"}]);
        s["nic"]["link_fault_signaling"] = json!(signaling);
        s["nic"]["lacp_timeout"] = json!("200us");
        run(s)
    };
    let lost = |out: &fabricsim_core::RunOutput| out.summary["drops_by_cause"]["link_down"].as_u64().unwrap();
    // Told by the ToR, the NIC leaves the port at once.
    let told = asymmetric("lacp", true);
    assert_eq!(summary_u64(&told, "flows_completed"), 2, "{}", told.summary);
    // Not told, it keeps sending into it until LACP takes the port out of
    // the bond: more is lost, but the flows finish.
    let bond = asymmetric("lacp", false);
    assert_eq!(summary_u64(&bond, "qp_errors"), 0, "{}", bond.summary);
    assert_eq!(summary_u64(&bond, "flows_completed"), 2);
    assert!(lost(&bond) > 10 * lost(&told).max(1), "{} against {}", lost(&bond), lost(&told));
    // Without a bond nothing ever moves the QPs: they fail.
    let single = asymmetric("none", false);
    assert!(summary_u64(&single, "qp_errors") > 0, "{}", single.summary);
}

#[test]
fn a_nic_notices_at_once_the_direction_it_receives_on_failing() {
    // The ToR-to-NIC direction of NIC 0's port 0 fails: the NIC loses the
    // signal and leaves the port, remote fault signalling or not.
    let mut s = dual_tor("lacp", both_ways("0us"), "0us", "10us");
    s["traffic"][0]["bytes"] = json!("16MB");
    s["faults"] = json!([{"kind": "link_down", "at": "20us", "port": "t0.p0.0:0", "direction": "egress"}]);
    s["nic"]["link_fault_signaling"] = json!(false);
    s["telemetry"] = json!({"sample_interval": "10us", "ports": ["nic0:0"]});
    let out = run(s);
    assert_eq!(summary_u64(&out, "flows_completed"), 2, "{}", out.summary);
    let rate = common::tx_rate(&out, "nic0:0");
    assert!(rate.iter().filter(|(t, _)| *t > 40e-6).all(|&(_, r)| r == 0.0), "{rate:?}");
}

#[test]
fn least_loaded_sends_more_on_the_qp_whose_messages_drain_faster() {
    // A job sends 32MB from NIC 0 to NIC 12 in 1MB messages over one
    // connection of two QPs, one on each port; port 0's link loses 2% of
    // what it sends, so QP 0's messages complete more slowly (go-back-N).
    // Striping splits every message evenly; least-loaded posting gives
    // each message to the QP with fewer bytes outstanding, more often QP 1.
    let port1 = |split: &str| {
        let mut s = dual_tor("none", json!([]), "1s", "1us");
        s["faults"] =
            json!([{"kind": "loss_rate", "at": "0us", "port": "nic0:0", "rate": 0.02, "direction": "egress"}]);
        s["nic"]["message_split"] = json!(split);
        s["transport"]["qps"] = json!(1);
        s["jobs"] = json!([{"name": "j", "ranks": 2, "placement": {"explicit": [0, 12]}, "phases": [{"name": "p",
            "collective": {"op": "send_recv", "bytes": "32MB", "channels": 1, "qps": 2, "slice": "1MB"}}]}]);
        let out = run(s);
        assert_eq!(out.summary["jobs"]["j"]["completed"], true, "{}", out.summary);
        let (nodes, ports, bytes) =
            (common::texts(&out.ports, "node"), common::ints(&out.ports, "port"), common::ints(&out.ports, "tx_bytes"));
        (0..nodes.len()).find(|&i| nodes[i] == "nic0" && ports[i] == 1).map(|i| bytes[i]).unwrap()
    };
    let (stripe, least) = (port1("stripe"), port1("least_loaded"));
    assert!((16_000_000..17_000_000).contains(&stripe), "{stripe}");
    assert!(least as f64 > 1.15 * stripe as f64, "least-loaded {least} against striping {stripe}");
}
