//! Two-sided RDMA (IBTA Vol.1 ch.9): a SEND takes a RECV the responder
//! posted; one that finds none is refused with an RNR NAK, and the
//! requester waits and tries again, for ever or `rnr_retry` times. Under
//! SHIFT the RECVs follow the SENDs to the backup QP and back.

mod common;

use common::{floats, ints, run, summary_f64, summary_u64, texts};
use serde_json::{json, Value};

/// Two NICs under one ToR pair of a small Clos, 100G, RoCE timing out
/// after 8 x 32.8us.
fn pair(op: &str) -> Value {
    json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "nics_per_host": 2},
        "transport": {"kind": "rocev2", "timeout_exponent": 3},
        "traffic": [{"kind": "flow", "src": 0, "dst": 12, "bytes": "1MB", "op": op}],
    })
}

fn error_of(scenario: Value) -> String {
    let scenario = fabricsim_core::Scenario::from_json(&scenario.to_string()).expect("a well-formed scenario");
    match fabricsim_core::Simulation::new(scenario) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    }
}

fn sent_by(out: &fabricsim_core::RunOutput, nic: &str) -> u64 {
    let (node, sent) = (texts(&out.ports, "node"), ints(&out.ports, "tx_bytes"));
    (0..node.len()).filter(|&i| node[i] == nic).map(|i| sent[i]).sum()
}

#[test]
fn a_send_arrives_like_a_write_without_its_reth() {
    let (write, send) = (run(pair("write")), run(pair("send")));
    for out in [&write, &send] {
        assert_eq!(summary_u64(out, "flows_completed"), 1, "{}", out.summary);
        assert_eq!(summary_u64(out, "rnr_naks"), 0);
    }
    // The same packets, but the first carries no RETH (16 bytes): its RECV
    // says where the data goes.
    assert_eq!(sent_by(&write, "nic0") - sent_by(&send, "nic0"), 16);
}

#[test]
fn a_send_that_finds_no_recv_is_refused_until_the_rnr_retries_run_out() {
    let mut s = pair("send");
    s["transport"]["recv_depth"] = json!(0);
    s["transport"]["rnr_retry"] = json!(2);
    s["transport"]["rnr_timer"] = json!("100us");
    let out = run(s);
    assert_eq!(summary_u64(&out, "flows_completed"), 0, "{}", out.summary);
    // The first try and two retries, each refused; then the QP fails.
    assert_eq!(summary_u64(&out, "rnr_naks"), 3, "{}", out.summary);
    assert_eq!(summary_u64(&out, "qp_errors"), 1);
    // It fails at the third RNR NAK: two waits of 100us and three round
    // trips of a few microseconds, long before a timeout could fire.
    let end = summary_f64(&out, "sim_time_s");
    assert!(end > 200e-6 && end < 240e-6, "{end}");
}

#[test]
fn with_rnr_retry_7_the_requester_waits_for_ever() {
    let mut s = pair("send");
    s["duration"] = json!("1ms");
    s["transport"]["recv_depth"] = json!(0);
    s["transport"]["rnr_timer"] = json!("100us");
    let out = run(s);
    assert_eq!(summary_u64(&out, "qp_errors"), 0, "{}", out.summary);
    // One refusal per 100us wait (and its round trip) over the millisecond.
    let naks = summary_u64(&out, "rnr_naks");
    assert!((9..=10).contains(&naks), "{naks}");
    // Only the head packet is ever delivered in vain; nothing is placed.
    assert_eq!(summary_u64(&out, "flows_completed"), 0);
}

#[test]
fn sends_go_on_over_shift_with_their_recvs() {
    // NIC 0 fails 20us in: SHIFT moves the SEND, and the RECVs the receiver
    // had posted on the default QP, to the backup QP; without the RECVs the
    // backup would refuse it for ever.
    let mut s = pair("send");
    s["traffic"][0]["bytes"] = json!("8MB");
    s["nic"] = json!({"shift": {"fallback_time": "50us", "probe_interval": "100us", "setup_time": "0us"}});
    s["faults"] = json!([{"kind": "nic_port_down", "at": "20us", "nic": 0, "port": 0}]);
    let out = run(s);
    assert_eq!(summary_u64(&out, "flows_completed"), 1, "{}", out.summary);
    assert_eq!(summary_u64(&out, "rnr_naks"), 0, "{}", out.summary);
    let shift = &out.summary["shift"];
    assert_eq!(shift["fallbacks"].as_u64(), Some(1), "{shift}");
    // The SEND had taken a RECV before the failure: its repost takes
    // another (s4.3's first corner case), counted, and is not a rewrite.
    assert_eq!(shift["resent_sends"].as_u64(), Some(1), "{shift}");
    assert_eq!(shift["rewritten_messages"].as_u64(), Some(0), "{shift}");
    assert!(sent_by(&out, "nic1") >= 8_000_000);
}

#[test]
fn sends_refuse_transports_that_place_out_of_order() {
    let mut s = pair("send");
    s["transport"] = json!({"kind": "mrc"});
    let err = error_of(s);
    assert!(err.contains("traffic") && err.contains("op: send") && err.contains("rocev2"), "{err}");
    let mut s = pair("write");
    s["traffic"] = json!([]);
    s["transport"]["direct_placement"] = json!(true);
    s["jobs"] = json!([{"name": "j", "ranks": 2, "placement": {"explicit": [0, 12]},
        "phases": [{"name": "p", "collective": {"op": "send_recv", "bytes": "1MB", "rdma_op": "send"}}]}]);
    let err = error_of(s);
    assert!(err.contains("jobs[0]") && err.contains("rdma_op: send"), "{err}");
}

#[test]
fn a_job_can_send_its_transfers() {
    let mut s = pair("write");
    s["traffic"] = json!([]);
    s["jobs"] = json!([{"name": "j", "ranks": 2, "placement": {"explicit": [0, 12]}, "iterations": 3,
        "phases": [{"name": "p", "collective": {"op": "send_recv", "bytes": "1MB", "slice": "64KB",
                                                 "rdma_op": "send"}}]}]);
    let out = run(s);
    assert_eq!(out.summary["jobs"]["j"]["completed"], true, "{}", out.summary);
    // No write with immediate went out: every transfer was a SEND.
    assert_eq!(summary_u64(&out, "imm_completions"), 0);
    let ends = floats(&out.collectives, "end_s");
    assert_eq!(ends.len(), 3);
}

/// A SEND's first packet names no address: its ideal counts no RETH, or a
/// lone SEND flow ends 5 ns before its ideal at every size.
#[test]
fn a_send_flow_ends_no_sooner_than_its_ideal() {
    for bytes in ["1B", "4096B", "64KB", "2MB"] {
        let out = run(json!({
            "topology": {"kind": "clos", "tiers": 2, "radix": 8, "nics": 16, "link_rate": "100Gbps", "link_delay": "1us"},
            "traffic": [{"kind": "flow", "src": 0, "dst": 5, "bytes": bytes, "op": "send"}],
        }));
        let slowdown = floats(&out.flows, "slowdown")[0].unwrap();
        assert!((1.0..1.001).contains(&slowdown), "{bytes}: {slowdown}");
    }
}
