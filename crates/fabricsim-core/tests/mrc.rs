//! MRC against the RoCEv2 baseline: spraying removes ECMP collisions,
//! trimmed packets are resent once, a lossy path's EVs are retired, and the
//! planes share the load.

mod common;

use common::{floats, ints, run, summary_u64, texts};
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
    // Every trimmed packet was resent, and no byte reached the application twice.
    let retx: u64 = ints(&out.flows, "retransmitted_packets").iter().sum();
    assert!(retx >= trims, "{retx} retransmissions for {trims} trims");
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
