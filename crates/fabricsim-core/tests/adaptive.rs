//! Per-packet adaptive routing (spectrum-x.txt s4.1, s4.4.2): it spreads one
//! flow's packets over every next hop, drops a failed local port from the
//! choice at once, and under a remote failure weighs next hops by the
//! capacity behind them (the paper's Fig 5). RoCE's responder places the
//! reordered packets directly instead of going back N.

mod common;

use common::{ints, run, summary_u64, texts};
use fabricsim_core::RunOutput;
use serde_json::{json, Value};

/// Fig 5's fabric: leaf `la` (hosts a1, a2) reaches leaves `lc` (host c)
/// and `ld` (host d) through spines s1 and s2. Behind s2, d's leaf has two
/// 50G links, one of which `fail_remote` takes down: s2 then carries half
/// of what s1 can toward d.
fn fig5(forwarding: &str, weighted: bool, traffic: Value, faults: Value) -> Value {
    json!({
        "topology": {"kind": "explicit",
            "nodes": [
                {"name": "la", "kind": "switch"}, {"name": "lc", "kind": "switch"},
                {"name": "ld", "kind": "switch"}, {"name": "s1", "kind": "switch"},
                {"name": "s2", "kind": "switch", "latency": "1us"},
                {"name": "a1", "kind": "nic"}, {"name": "a2", "kind": "nic"},
                {"name": "c", "kind": "nic"}, {"name": "d", "kind": "nic"}],
            "links": [
                {"a": "a1", "b": "la", "rate": "100Gbps", "delay": "1us"},
                {"a": "a2", "b": "la", "rate": "100Gbps", "delay": "1us"},
                {"a": "c", "b": "lc", "rate": "100Gbps", "delay": "1us"},
                {"a": "d", "b": "ld", "rate": "100Gbps", "delay": "1us"},
                {"a": "la", "b": "s1", "rate": "100Gbps", "delay": "1us"},
                {"a": "la", "b": "s2", "rate": "100Gbps", "delay": "1us"},
                {"a": "s1", "b": "lc", "rate": "100Gbps", "delay": "1us"},
                {"a": "s2", "b": "lc", "rate": "100Gbps", "delay": "1us"},
                {"a": "s1", "b": "ld", "rate": "100Gbps", "delay": "1us"},
                {"a": "s2", "b": "ld", "rate": "50Gbps", "delay": "1us"},
                {"a": "s2", "b": "ld", "rate": "50Gbps", "delay": "1us"}]},
        "switch": {"forwarding": forwarding, "adaptive": {"weighted": weighted}, "reconvergence_delay": "1us"},
        "transport": {"kind": "rocev2", "direct_placement": true, "timeout_exponent": 3},
        "traffic": traffic,
        "faults": faults,
    })
}

/// The remote failure: one of s2's two links to d's leaf, at the start.
fn fail_remote() -> Value {
    json!([{"kind": "link_down", "at": "0us", "port": "ld:2"}])
}

/// Bytes sent out of the port of `node` whose peer is `peer`'s port `k`.
fn tx(out: &RunOutput, node: &str, peer: &str) -> u64 {
    let (nodes, peers, bytes) = (texts(&out.ports, "node"), texts(&out.ports, "peer"), ints(&out.ports, "tx_bytes"));
    (0..nodes.len()).filter(|&i| nodes[i] == node && peers[i].split(':').next() == Some(peer)).map(|i| bytes[i]).sum()
}

fn share(a: u64, b: u64) -> f64 {
    a as f64 / (a + b) as f64
}

#[test]
fn one_flow_is_sprayed_over_both_spines_and_placed_out_of_order_without_retransmission() {
    let traffic = json!([{"kind": "flow", "src": "a1", "dst": "c", "bytes": "2MB"}]);
    let out = run(fig5("adaptive", true, traffic.clone(), json!([])));
    let s1 = share(tx(&out, "s1", "lc"), tx(&out, "s2", "lc"));
    assert!((0.35..0.65).contains(&s1), "s1 carried {s1:.2} of the flow");
    assert!(ints(&out.flows, "out_of_order_packets")[0] > 0);
    assert_eq!(ints(&out.flows, "retransmitted_packets"), [0]);
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    // ECMP keeps the QP on one path and in order.
    let ecmp = run(fig5("ecmp", true, traffic.clone(), json!([])));
    assert_eq!(tx(&ecmp, "s1", "lc").min(tx(&ecmp, "s2", "lc")), 0);
    assert_eq!(ints(&ecmp.flows, "out_of_order_packets"), [0]);
    // The standard responder under the same spraying NAKs the gaps and the
    // requester goes back N.
    let mut in_order = fig5("adaptive", true, traffic, json!([]));
    in_order["transport"]["direct_placement"] = json!(false);
    let gbn = run(in_order);
    assert!(ints(&gbn.flows, "retransmitted_packets")[0] > 0);
}

#[test]
fn weighted_routing_shifts_d_to_s1_and_c_to_s2_only_while_d_is_active() {
    // Fig 5: with d's capacity behind s2 halved, d's traffic goes mostly
    // through s1; c's traffic, which sees equal capacity, moves to s2 to
    // make room, but only while d's traffic runs.
    let both = json!([
        {"kind": "flow", "src": "a1", "dst": "d", "bytes": "4MB"},
        {"kind": "flow", "src": "a2", "dst": "c", "bytes": "4MB"},
    ]);
    let out = run(fig5("adaptive", true, both.clone(), fail_remote()));
    let d_via_s1 = share(tx(&out, "s1", "ld"), tx(&out, "s2", "ld"));
    let c_via_s2 = share(tx(&out, "s2", "lc"), tx(&out, "s1", "lc"));
    assert!(d_via_s1 > 0.55, "d via s1: {d_via_s1:.2}");
    assert!(c_via_s2 > 0.55, "c via s2: {c_via_s2:.2}");
    // Unweighted, d's traffic splits evenly and c's with it.
    let plain = run(fig5("adaptive", false, both, fail_remote()));
    let d_plain = share(tx(&plain, "s1", "ld"), tx(&plain, "s2", "ld"));
    assert!(d_plain < d_via_s1 - 0.05, "unweighted {d_plain:.2}, weighted {d_via_s1:.2}");
    // c alone splits evenly: its weights are equal and s1 is free.
    let alone =
        run(fig5("adaptive", true, json!([{"kind": "flow", "src": "a2", "dst": "c", "bytes": "4MB"}]), fail_remote()));
    let c_alone = share(tx(&alone, "s2", "lc"), tx(&alone, "s1", "lc"));
    assert!((0.4..0.6).contains(&c_alone), "c alone via s2: {c_alone:.2}");
}

#[test]
fn a_failed_local_port_leaves_the_choice_at_once_without_waiting_for_the_control_plane() {
    let traffic = json!([
        {"kind": "flow", "src": "a1", "dst": "c", "bytes": "2MB", "qps": 4},
        {"kind": "flow", "src": "a2", "dst": "d", "bytes": "2MB", "qps": 4},
    ]);
    // la's link to s2 fails at 20us; the routes reconverge `delay` later.
    let scenario = |forwarding: &str, delay: &str| {
        let fail = json!([{"kind": "link_down", "at": "20us", "port": "la:3"}]);
        let mut s = fig5(forwarding, false, traffic.clone(), fail);
        s["switch"]["reconvergence_delay"] = json!(delay);
        // Until then s2, for which the failure is remote, still routes
        // toward la into the dead link: the QPs must outlast that.
        s["transport"]["timeout_exponent"] = json!(8);
        s
    };
    let lost = |o: &RunOutput| o.summary["drops_by_cause"]["link_down"].as_u64().unwrap();
    let (adaptive, adaptive_late) = (run(scenario("adaptive", "10us")), run(scenario("adaptive", "1ms")));
    let (ecmp, ecmp_late) = (run(scenario("ecmp", "10us")), run(scenario("ecmp", "1ms")));
    // Adaptive routing loses only what was queued at or on the link when it
    // failed, however long the control plane takes; ECMP keeps hashing QPs
    // onto the dead link until the routes change.
    assert_eq!(lost(&adaptive), lost(&adaptive_late));
    assert!(lost(&ecmp_late) > 5 * lost(&ecmp).max(1), "ecmp lost {} then {}", lost(&ecmp), lost(&ecmp_late));
    assert!(lost(&ecmp_late) > 10 * lost(&adaptive_late), "{} vs {}", lost(&ecmp_late), lost(&adaptive_late));
    assert_eq!(summary_u64(&adaptive_late, "flows_completed"), 2, "{}", adaptive_late.summary);
}

#[test]
fn weights_count_the_capacity_to_the_destination_leaf_even_beyond_the_nic_link() {
    // Behind s1, b's leaf keeps 3 of its 4 links after the failure, behind
    // s2 all 4: 300 against 400 Gb/s, both above b's own 100G link, which
    // must not flatten the weights (it did: every weight came out 100G).
    let link = |a: &str, b: &str, rate: &str| json!({"a": a, "b": b, "rate": rate, "delay": "1us"});
    let mut links = vec![link("a", "la", "100Gbps"), link("b", "lb", "100Gbps")];
    links.push(link("la", "s1", "400Gbps"));
    links.push(link("la", "s2", "400Gbps"));
    for _ in 0..4 {
        links.push(link("s1", "lb", "100Gbps"));
        links.push(link("s2", "lb", "100Gbps"));
    }
    let out = run(json!({
        "topology": {"kind": "explicit",
            "nodes": [
                {"name": "la", "kind": "switch"}, {"name": "lb", "kind": "switch"},
                {"name": "s1", "kind": "switch"}, {"name": "s2", "kind": "switch"},
                {"name": "a", "kind": "nic"}, {"name": "b", "kind": "nic"}],
            "links": links},
        "switch": {"forwarding": "adaptive", "reconvergence_delay": "1us"},
        "transport": {"kind": "rocev2", "direct_placement": true},
        "traffic": [{"kind": "flow", "src": "a", "dst": "b", "bytes": "8MB", "start": "5us"}],
        "faults": [{"kind": "link_down", "at": "0us", "port": "s1:1"}],
    }));
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    // The flow fills only b's 100G link: la's uplinks never queue, and the
    // weighted tie-break splits it 3:4.
    let via_s1 = share(tx(&out, "la", "s1"), tx(&out, "la", "s2"));
    assert!((0.38..0.48).contains(&via_s1), "via s1: {via_s1:.3}");
}
