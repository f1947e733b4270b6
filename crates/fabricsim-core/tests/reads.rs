//! RDMA READ (IBTA Vol.1 9.4.3, 9.7.4): the end that receives the data asks
//! for it, at most `read_depth` READs at a time, and alone keeps it
//! reliable: it asks again past a gap or when its timer runs out, and the
//! QP fails at the reader after `retry_count` timeouts.

mod common;

use common::{floats, ints, run, summary_f64, summary_u64, texts};
use serde_json::{json, Value};

/// NIC 12 reads 1MB from NIC 0 (the data flows from 0 to 12), 100G, RoCE's
/// timeout 32.8us.
fn read(bytes: &str) -> Value {
    json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "nics_per_host": 2},
        "transport": {"kind": "rocev2", "timeout_exponent": 3},
        "traffic": [{"kind": "flow", "src": 0, "dst": 12, "bytes": bytes, "op": "read"}],
    })
}

fn sent_by(out: &fabricsim_core::RunOutput, nic: &str) -> u64 {
    let (node, sent) = (texts(&out.ports, "node"), ints(&out.ports, "tx_bytes"));
    (0..node.len()).filter(|&i| node[i] == nic).map(|i| sent[i]).sum()
}

#[test]
fn a_read_asks_for_its_data_which_comes_back_unacknowledged() {
    let out = run(read("1MB"));
    assert_eq!(summary_u64(&out, "flows_completed"), 1, "{}", out.summary);
    let mut write = read("1MB");
    write["traffic"][0]["op"] = json!("write");
    let write = run(write);
    // The same data packets, with an AETH on the first and the last instead
    // of the write's RETH on the first: 16 - 2 x 4 bytes fewer.
    assert_eq!(sent_by(&write, "nic0") - sent_by(&out, "nic0"), 8);
    // The reader sends one READ request (a 16-byte RETH where an ACK has a
    // 4-byte AETH) and no ACK; the writer's receiver sends an ACK a packet.
    let request = sent_by(&out, "nic12");
    assert!(request > 0 && request < 200, "{request}");
    assert!(sent_by(&write, "nic12") > 100 * request);
    // The request crosses the fabric before the first byte does.
    let (r, w) = (floats(&out.flows, "end_s")[0].unwrap(), floats(&write.flows, "end_s")[0].unwrap());
    assert!(r > w + 3e-6 && r < w + 6e-6, "{r} against {w}");
}

#[test]
fn a_read_loses_data_to_a_flap_and_asks_for_it_again() {
    let mut s = read("4MB");
    s["faults"] = json!([{"kind": "link_flap", "at": "100us", "port": "nic0:0", "duration": "20us"}]);
    let out = run(s);
    assert_eq!(summary_u64(&out, "flows_completed"), 1, "{}", out.summary);
    assert!(summary_u64(&out, "retransmitted_packets") > 0, "{}", out.summary);
    assert_eq!(summary_u64(&out, "qp_errors"), 0);
}

#[test]
fn a_reader_that_hears_nothing_fails_after_its_retries() {
    let mut s = read("1MB");
    s["faults"] = json!([{"kind": "nic_port_down", "at": "0us", "nic": 0, "port": 0}]);
    let out = run(s);
    assert_eq!(summary_u64(&out, "flows_completed"), 0, "{}", out.summary);
    assert_eq!(summary_u64(&out, "qp_errors"), 1);
    // Eight timeouts of 32.8us (the first try and seven retries), then the
    // QP fails at the reader.
    assert_eq!(summary_u64(&out, "timeouts"), 8, "{}", out.summary);
    let end = summary_f64(&out, "sim_time_s");
    assert!((end - 8.0 * 32.768e-6).abs() < 1e-6, "{end}");
}

#[test]
fn at_most_read_depth_reads_are_asked_for_at_once() {
    // 64 READs of 64KB over one connection: with one READ out at a time the
    // data comes a round trip at a time, slower than with 16.
    let time = |depth: u32| {
        let mut s = read("64KB");
        s["traffic"] = json!([]);
        s["transport"]["read_depth"] = json!(depth);
        s["jobs"] = json!([{"name": "j", "ranks": 2, "placement": {"explicit": [0, 12]},
            "phases": [{"name": "p", "collective": {"op": "send_recv", "bytes": "4MB", "channels": 1,
                                                     "slice": "64KB", "credits": 64, "rdma_op": "read"}}]}]);
        let out = run(s);
        assert_eq!(out.summary["jobs"]["j"]["completed"], true, "{}", out.summary);
        out.summary["jobs"]["j"]["jct_s"].as_f64().unwrap()
    };
    let (one, sixteen) = (time(1), time(16));
    assert!(one > 1.2 * sixteen, "{one} against {sixteen}");
}

#[test]
fn reads_go_on_over_shift() {
    // The reader's NIC fails 50us in; SHIFT moves the READ to the backup
    // QP, whose reader asks for what had not arrived.
    let mut s = read("8MB");
    s["nic"] = json!({"shift": {"fallback_time": "50us", "probe_interval": "100us", "setup_time": "0us"}});
    s["faults"] = json!([{"kind": "nic_port_down", "at": "50us", "nic": 12, "port": 0}]);
    let out = run(s);
    assert_eq!(summary_u64(&out, "flows_completed"), 1, "{}", out.summary);
    assert_eq!(out.summary["shift"]["fallbacks"].as_u64(), Some(1), "{}", out.summary);
    assert!(sent_by(&out, "nic1") >= 8_000_000);
}

#[test]
fn reads_refuse_transports_that_place_out_of_order() {
    let mut s = read("1MB");
    s["transport"] = json!({"kind": "spx"});
    let scenario = fabricsim_core::Scenario::from_json(&s.to_string()).expect("well-formed");
    let err = fabricsim_core::Simulation::new(scenario).err().expect("refused").to_string();
    assert!(err.contains("traffic") && err.contains("op: read") && err.contains("rocev2"), "{err}");
}
