//! HPN's path selection in the collective library (alibaba-hpn.txt s6.1,
//! Appendix B): connections on source ports whose paths, replayed from
//! the switches' own hash (RePaC), share no link.

mod common;

use common::{ints, run, summary_u64, texts};
use serde_json::{json, Value};

/// HPN's dual plane in small: every NIC has a port in each of two planes,
/// each plane a 2-tier Clos whose ToRs have 4 uplinks. One flow of `qps`
/// QPs from NIC 0 to NIC 12 (another ToR), QP k on port k mod 2.
fn dual_plane(selection: &str, qps: u32, seed: u64) -> Value {
    json!({
        "seed": seed,
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "planes": 2, "nic_ports": 2},
        "nic": {"path_selection": selection},
        "transport": {"kind": "rocev2", "qps": qps},
        "traffic": [{"kind": "flow", "src": 0, "dst": 12, "bytes": "2MB"}],
    })
}

/// The ToR uplinks (ToR to spine) NIC 0's flow sent data on.
fn uplinks_used(out: &fabricsim_core::RunOutput) -> usize {
    let (node, peer) = (texts(&out.ports, "node"), texts(&out.ports, "peer"));
    let sent = ints(&out.ports, "tx_bytes");
    let tors: Vec<String> = (0..node.len())
        .filter(|&i| node[i] == "nic0")
        .map(|i| peer[i].split(':').next().unwrap().to_string())
        .collect();
    (0..node.len()).filter(|&i| tors.contains(&node[i]) && peer[i].starts_with("t1") && sent[i] > 100_000).count()
}

#[test]
fn disjoint_connections_share_no_link_where_hashed_ones_collide() {
    // 8 QPs, 4 per plane, 4 uplinks per ToR: disjoint paths use all 8
    // uplinks, one QP each (and so a spine each, and its one link down).
    for seed in 1..=3 {
        let out = run(dual_plane("disjoint", 8, seed));
        assert_eq!(uplinks_used(&out), 8, "seed {seed}: {}", out.summary);
        assert_eq!(out.summary["path_search"]["disjoint_qps"], 8);
        assert!(out.summary["path_search"]["links_examined"].as_u64().unwrap() >= 8);
        assert!(out.summary.get("warnings").is_none());
    }
    // Hashing alone: 4 QPs land on 4 uplinks all apart with probability
    // 4!/4^4 per plane; over three seeds some share.
    let hashed: usize = (1..=3).map(|seed| uplinks_used(&run(dual_plane("transport", 8, seed)))).sum();
    assert!(hashed < 24, "hashing found disjoint paths by chance on every seed");
}

#[test]
fn fewer_disjoint_paths_than_qps_is_a_warning_with_the_number_found() {
    // 10 QPs: 5 per plane, but a ToR has only 4 uplinks.
    let out = run(dual_plane("disjoint", 10, 1));
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    assert_eq!(out.summary["path_search"]["disjoint_qps"], 8);
    let warning = out.summary["warnings"][0].as_str().unwrap();
    assert!(warning.contains("fewest: 8 of 10"), "{warning}");
    assert!(warning.starts_with("nic.path_selection"), "{warning}");
}

#[test]
fn a_restarted_job_searches_its_disjoint_paths_again() {
    // Two ranks on NICs 0 and 12, 4 QPs per connection; NIC 0's port 0
    // goes down for 400us with no LACP, so its QPs there fail, the job
    // aborts and restarts 20us later on new QPs, whose paths are searched
    // again over the routes as they are then.
    let s = json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "planes": 2, "nic_ports": 2},
        "nic": {"path_selection": "disjoint"},
        "transport": {"kind": "rocev2", "timeout_exponent": 3},
        "switch": {"reconvergence_delay": "10us"},
        "jobs": [{"name": "train", "ranks": 2, "placement": {"explicit": [0, 12]}, "iterations": 3,
            "checkpoint": {"every": 1, "restart_delay": "20us"},
            "phases": [{"name": "fwd", "compute": "10us"},
                       {"name": "sync", "collective": {"op": "all_reduce", "bytes": "1MB", "qps": 4}}]}],
        "faults": [{"kind": "link_flap", "at": "30us", "port": "nic0:0", "duration": "400us"}],
    });
    let out = run(s);
    let job = &out.summary["jobs"]["train"];
    assert_eq!(job["completed"], true, "{job}");
    let restarts = job["restarts"].as_u64().unwrap();
    assert!(restarts >= 1, "{job}");
    let search = &out.summary["path_search"];
    // 2 ranks, 2 channels: 4 connections, opened once more per restart.
    assert_eq!(search["connections"].as_u64(), Some(4 * (1 + restarts)), "{search}");
    assert_eq!(search["qps"].as_u64(), Some(16 * (1 + restarts)), "{search}");
}

#[test]
fn dual_plane_keeps_a_flow_in_the_plane_of_the_port_it_left_by() {
    // One QP, on NIC 0's port 0: nothing of it touches a plane-1 switch.
    let mut s = dual_plane("transport", 1, 1);
    s["traffic"][0]["bytes"] = json!("1MB");
    let out = run(s);
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    let (node, sent) = (texts(&out.ports, "node"), ints(&out.ports, "tx_bytes"));
    let in_plane = |p: &str| (0..node.len()).filter(|&i| node[i].contains(p)).map(|i| sent[i]).sum::<u64>();
    assert!(in_plane(".p0.") > 1_000_000);
    assert_eq!(in_plane(".p1."), 0, "plane 1 carried some of it");
}
