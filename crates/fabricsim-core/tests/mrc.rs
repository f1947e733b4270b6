//! MRC against the RoCEv2 baseline: spraying removes ECMP collisions,
//! trimmed packets are resent once, a lossy path's EVs are retired, and the
//! planes share the load.

mod common;

use common::{floats, ints, run, summary_u64, texts, tx_rate};
use serde_json::{json, Value};

/// MRC's fabric: lossy (no PFC), trimming, no ECN on the last hop.
fn mrc_switch() -> Value {
    json!({"pfc": {"enabled": false}, "trimming": {"enabled": true}, "ecn": {"last_hop": false}})
}

fn slowest_share(out: &fabricsim_core::RunOutput) -> f64 {
    let (fct, ideal) = (floats(&out.flows, "fct_s"), floats(&out.flows, "ideal_fct_s"));
    fct.iter().zip(&ideal).map(|(f, i)| i.unwrap() / f.unwrap()).fold(1.0, f64::min)
}

#[test]
fn spraying_gives_every_flow_of_a_permutation_its_line_rate() {
    let topo = json!({"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"});
    let roce = run(json!({"topology": topo, "traffic": [{"kind": "permutation", "bytes": "2MB"}]}));
    let mrc = run(json!({
        "topology": topo, "switch": mrc_switch(), "transport": {"kind": "mrc"},
        "traffic": [{"kind": "permutation", "bytes": "2MB"}],
    }));
    assert_eq!(summary_u64(&mrc, "flows_completed"), 32);
    assert_eq!(summary_u64(&mrc, "qp_errors"), 0);
    let (r, m) = (slowest_share(&roce), slowest_share(&mrc));
    assert!(r < 0.6, "RoCE with one QP collides: slowest flow at {r:.2} of line rate");
    assert!(m > 0.75, "MRC sprays: slowest flow at {m:.2} of line rate");
}

#[test]
fn trimmed_packets_are_resent_once_and_nothing_is_delivered_twice() {
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"},
        "switch": {"pfc": {"enabled": false}, "trimming": {"enabled": true}, "buffer": "1MB"},
        "transport": {"kind": "mrc"},
        "traffic": [{"kind": "incast", "receiver": 0, "count": 12, "bytes": "1MB"}],
    }));
    assert_eq!(summary_u64(&out, "flows_completed"), 12);
    let trims = summary_u64(&out, "trims");
    assert!(trims > 0, "{}", out.summary);
    assert_eq!(summary_u64(&out, "trimmed_received"), trims);
    // Every trimmed packet was resent once (nothing else was lost here),
    // and no byte reached the application twice.
    let retx: u64 = ints(&out.flows, "retransmitted_packets").iter().sum();
    assert_eq!(retx, trims, "{retx} retransmissions for {trims} trims");
    assert_eq!(summary_u64(&out, "discarded_payload_bytes"), 0);
    assert_eq!(summary_u64(&out, "delivered_payload_bytes"), 12 * 1_000_000);
}

#[test]
fn a_lossy_link_retires_the_evs_that_cross_it() {
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"},
        "switch": mrc_switch(),
        // Enough backups to replace every EV that lands on the bad uplink.
        "transport": {"kind": "mrc", "backup_evs": 128},
        "traffic": [{"kind": "flow", "src": 0, "dst": 4, "bytes": "32MB"}],
        // One of ToR 0's four uplinks drops 20% of what it carries.
        "faults": [{"kind": "loss_rate", "at": "0us", "port": "t0.p0.0:4", "rate": 0.2, "direction": "egress"}],
    }));
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    assert!(summary_u64(&out, "retired_evs") > 0, "{}", out.summary);
    // Retired EVs stop using the lossy uplink: it carries far less than the others.
    let (node, peer, tx) = (texts(&out.ports, "node"), texts(&out.ports, "peer"), ints(&out.ports, "tx_bytes"));
    let up: Vec<u64> =
        (0..node.len()).filter(|&i| node[i] == "t0.p0.0" && peer[i].starts_with("t1.")).map(|i| tx[i]).collect();
    assert_eq!(up.len(), 4);
    assert!(up[0] * 3 < up[1].min(up[2]).min(up[3]), "uplink bytes {up:?}");
}

#[test]
fn planes_carry_equal_shares() {
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "planes": 4},
        "switch": mrc_switch(),
        "transport": {"kind": "mrc"},
        "traffic": [{"kind": "flow", "src": 0, "dst": 9, "bytes": "16MB"}],
    }));
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    let (node, tx) = (texts(&out.ports, "node"), ints(&out.ports, "tx_bytes"));
    let nic: Vec<u64> = (0..node.len()).filter(|&i| node[i] == "nic0").map(|i| tx[i]).collect();
    assert_eq!(nic.len(), 4);
    let (lo, hi) = (*nic.iter().min().unwrap(), *nic.iter().max().unwrap());
    assert!(hi - lo < hi / 50, "per-plane bytes {nic:?}");
    let slowdown = floats(&out.flows, "slowdown")[0].unwrap();
    assert!(slowdown < 1.1, "one QP over four planes at {slowdown:.3} of its ideal");
}

fn plane_failure(nic: u32, remap_delay: &str) -> fabricsim_core::RunOutput {
    run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "planes": 4},
        "switch": mrc_switch(),
        "nic": {"remap_delay": remap_delay},
        "transport": {"kind": "mrc"},
        "traffic": [{"kind": "flow", "src": 0, "dst": 9, "bytes": "8MB"}],
        "faults": [{"kind": "nic_port_down", "at": "30us", "nic": nic, "port": 1}],
        "telemetry": {"sample_interval": "5us", "ports": ["nic0:1"]},
    }))
}

#[test]
fn a_dead_local_port_is_left_after_the_remap_delay() {
    let out = plane_failure(0, "40us");
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    assert_eq!(summary_u64(&out, "qp_errors"), 0);
    let rate = tx_rate(&out, "nic0:1");
    assert!(rate.iter().any(|&(t, r)| t < 30e-6 && r > 10e9), "plane 1 carried traffic before the failure");
    // Until the NIC notices (30 + 40 us) it keeps sending into the dead link.
    assert!(rate.iter().any(|&(t, r)| t > 35e-6 && t <= 70e-6 && r > 10e9));
    assert!(rate.iter().filter(|&&(t, _)| t > 75e-6).all(|&(_, r)| r == 0.0), "{rate:?}");
    assert!(out.summary["drops_by_cause"]["link_down"].as_u64().unwrap() > 0);
}

#[test]
fn a_dead_remote_port_is_left_one_rtt_after_a_sack_says_so() {
    let out = plane_failure(9, "0us");
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    let rate = tx_rate(&out, "nic0:1");
    assert!(rate.iter().any(|&(t, r)| t < 30e-6 && r > 10e9));
    // The receiver's SACKs carry its port bitmap back within about an RTT
    // (4 hops of 1 us each way plus queueing).
    assert!(rate.iter().filter(|&&(t, _)| t > 50e-6).all(|&(_, r)| r == 0.0), "{rate:?}");
}

/// Two ranks exchange 1 byte over two planes: each rank's message splits
/// into a 1-byte and a zero-length write with immediate. Rank 0's port on
/// plane 1 is dead from the start, so rank 1's zero-length write can go
/// into it before any SACK says so. Nothing but the retransmission timer
/// finds it; the timer once counted bytes in flight, not packets, and the
/// collective never ended.
#[test]
fn a_lost_zero_length_write_is_resent_at_the_timeout() {
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "planes": 2},
        "switch": mrc_switch(),
        "transport": {"kind": "mrc"},
        "jobs": [{"name": "j", "ranks": 2, "phases": [{"name": "x", "collective":
            {"op": "all_to_allv", "matrix": [["0B", "1B"], ["1B", "0B"]]}}]}],
        "faults": [{"kind": "nic_port_down", "at": "0s", "nic": 0, "port": 1}],
    }));
    assert_eq!(out.summary["stop_reason"], "completed");
    assert!(summary_u64(&out, "data_drops") > 0, "a write went into the dead port");
    assert!(summary_u64(&out, "timeouts") > 0);
    assert_eq!(summary_u64(&out, "imm_completions"), 4);
}

#[test]
fn a_port_wakes_once_per_packet_it_sends() {
    // Switches forwarding into ports whose wake-up is due at that instant
    // once made wake-ups pile up (100 events per packet hop on Fig 20).
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "400Gbps"},
        "switch": mrc_switch(),
        "transport": {"kind": "mrc"},
        "traffic": [{"kind": "racks_to_racks", "src_racks": [0, 1], "dst_racks": [2, 3], "bytes": "8MB"}],
    }));
    let (events, hops) = (summary_u64(&out, "events"), summary_u64(&out, "packet_hops"));
    assert!(events < 2 * hops, "{events} events for {hops} packet hops");
}

#[test]
fn a_write_with_immediate_completes_once_per_part_after_every_byte_is_in() {
    let flow = |op: &str| {
        run(json!({
            "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"},
            "switch": mrc_switch(),
            "transport": {"kind": "mrc"},
            "traffic": [{"kind": "flow", "src": 0, "dst": 4, "bytes": "1MB", "qps": 2, "op": op}],
            "faults": [{"kind": "loss_rate", "at": "0us", "port": "nic4:0", "rate": 0.01, "direction": "ingress"}],
        }))
    };
    let (imm, plain) = (flow("write_with_imm"), flow("write"));
    assert_eq!(summary_u64(&imm, "imm_completions"), 2, "one per QP's part");
    assert_eq!(summary_u64(&plain, "imm_completions"), 0);
    assert_eq!(summary_u64(&imm, "delivered_payload_bytes"), 1_000_000);
    // The immediate costs 4 bytes on the last packet of each part, no more.
    let sent = |out: &fabricsim_core::RunOutput| ints(&out.ports, "tx_bytes")[..].iter().sum::<u64>();
    assert!(sent(&imm) > sent(&plain));
}

#[test]
fn the_transports_qp_count_applies_to_every_flow() {
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"},
        "switch": mrc_switch(),
        "transport": {"kind": "mrc", "qps": 4},
        "traffic": [{"kind": "flow", "src": 0, "dst": 4, "bytes": "1MB", "op": "write_with_imm"}],
    }));
    assert_eq!(summary_u64(&out, "imm_completions"), 4, "one write per QP");
}

#[test]
fn a_sprayed_collective_is_never_faster_than_its_ideal() {
    // The ideal counts every plane a sprayed connection uses, and the
    // headers MRC adds (a RETH per packet, the SRv6 outer header).
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "nics": 16, "planes": 4, "link_rate": "100Gbps"},
        "switch": {"forwarding": "srv6", "pfc": {"enabled": false}, "trimming": {"enabled": true}},
        "transport": {"kind": "mrc"},
        "jobs": [{"name": "ar", "ranks": 16, "placement": "cross_t1", "phases": [
            {"name": "ar", "collective": {"op": "all_reduce", "algorithm": "ring", "bytes": "4MiB"}}]}],
    }));
    let slowdown = floats(&out.collectives, "slowdown")[0].unwrap();
    assert!((1.0..1.5).contains(&slowdown), "slowdown {slowdown:.3}");
}

/// In an all-to-all each NIC serves many QPs in turn, so a QP's next packet
/// may wait at its own NIC while nothing of it is in flight. That is not
/// loss: the retransmission timer must not run then (it fired thousands of
/// times in loss-free all-to-alls, resending packets that had arrived).
#[test]
fn a_loss_free_all_to_all_never_times_out() {
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 16, "nics": 32, "planes": 4, "link_rate": "100Gbps"},
        "switch": mrc_switch(),
        "transport": {"kind": "mrc"},
        "jobs": [{"name": "a2a", "ranks": 32, "phases": [
            {"name": "a2a", "collective": {"op": "all_to_all", "bytes": "2MiB"}}]}],
    }));
    assert_eq!(summary_u64(&out, "data_drops"), 0);
    assert_eq!(summary_u64(&out, "timeouts"), 0);
    assert_eq!(summary_u64(&out, "retransmitted_packets"), 0);
}

#[test]
fn a_timer_deadline_already_past_fires_at_once() {
    // Found by the hostile-input fuzzer: with a 1ns reordering window MRC
    // computes a reordering deadline already past, which the NIC queued in
    // the past (an internal error). It now fires at once.
    let scenario: serde_json::Value = serde_json::from_str(r#"{"seed": 1, "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps", "nics": 8, "planes": 2}, "traffic": [{"kind": "flow", "src": 0, "dst": 3, "bytes": "64KiB", "ev_set": {"active": [0, 1, 8, 9], "backup": [16]}}, {"kind": "flow", "src": 1, "dst": 6, "bytes": "32KiB", "op": "write_with_imm", "qps": 2}, {"kind": "flow", "src": 0, "dst": 3, "bytes": "64KiB", "ev_set": {"active": [0, 1, 8, 9], "backup": [16]}}, {"kind": "flow", "src": 1, "dst": 6, "bytes": "32KiB", "op": "write_with_imm", "qps": 2}, {"kind": "flow", "src": 0, "dst": 3, "bytes": "64KiB", "ev_set": {"active": [0, 1, 8, 9], "backup": [16]}}, {"kind": "flow", "src": 1, "dst": 6, "bytes": "32KiB", "op": "write_with_imm", "qps": 2}], "transport": {"kind": "mrc", "evs": 16, "backup_evs": 8, "denylist": ["t0.p0.0:3"], "reorder_window": "1ns"}, "limits": {"memory": "512MiB", "sim_time": "2ms"}, "switch": {"forwarding": "srv6", "pfc": {"enabled": false}, "trimming": {"enabled": true}, "ecn": {"last_hop": false}}, "clustermapper": {"period": "200us", "timeout": "50us", "update_denylist": true}}"#).expect("json");
    let out = run(scenario);
    assert_eq!(summary_u64(&out, "flows_completed"), 6);
}
