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
