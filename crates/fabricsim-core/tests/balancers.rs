//! The switch-side load balancers PRO is measured against (pro-deterministic-lb.txt
//! s6): DRILL spreads a burst over the uplinks by queue occupancy, packet by
//! packet; LetFlow keeps a flow on one uplink while it sends back to back and
//! moves it when a gap starts a new flowlet. Both against ECMP, which pins a
//! flow to one uplink whatever happens.

mod common;

use common::{ints, run, texts};
use fabricsim_core::RunOutput;
use serde_json::{json, Value};

/// Bytes each uplink of ToR `t0.p0.0` sent (its ports toward tier 1).
fn uplink_bytes(out: &RunOutput) -> Vec<u64> {
    let (nodes, peers, bytes) = (texts(&out.ports, "node"), texts(&out.ports, "peer"), ints(&out.ports, "tx_bytes"));
    (0..nodes.len()).filter(|&i| nodes[i] == "t0.p0.0" && peers[i].starts_with("t1.")).map(|i| bytes[i]).collect()
}

/// A 2-tier Clos of 8 ToRs with 4 uplinks each, at 100G.
fn scenario(forwarding: &str, traffic: Value, jobs: Value) -> Value {
    json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "link_delay": "1us"},
        "switch": {"forwarding": forwarding},
        "transport": {"kind": "rocev2", "direct_placement": true},
        "traffic": traffic,
        "jobs": jobs,
    })
}

#[test]
fn drill_spreads_one_flow_over_every_uplink_by_queue_where_ecmp_pins_it() {
    // Four NICs of ToR 0 send to four of ToR 7: ECMP puts each QP on one
    // uplink (collisions likely); DRILL spreads every flow over all four.
    let traffic = json!([{"kind": "racks_to_racks", "src_racks": [0], "dst_racks": [7], "bytes": "4MB"}]);
    let ecmp = uplink_bytes(&run(scenario("ecmp", traffic.clone(), json!([]))));
    let drill = uplink_bytes(&run(scenario("drill", traffic, json!([]))));
    assert_eq!(drill.len(), 4);
    let (max, min) = (*drill.iter().max().unwrap() as f64, *drill.iter().min().unwrap() as f64);
    assert!(max / min < 1.05, "DRILL: {drill:?}");
    // ECMP: every uplink carries whole flows (4,099,670 wire bytes each).
    let flow = 4_099_670;
    assert!(ecmp.iter().all(|&b| b % flow < 1_000), "ECMP: {ecmp:?}");
    let total: u64 = drill.iter().sum();
    assert!(total >= 16_000_000, "every byte of the four flows crossed: {drill:?}");
}

#[test]
fn tomahawk_ar_spreads_flows_by_port_quality() {
    // Four flows from ToR 0: graded by load and queue once a microsecond,
    // the uplinks share them almost evenly; ECMP left one idle (above).
    let traffic = json!([{"kind": "racks_to_racks", "src_racks": [0], "dst_racks": [7], "bytes": "4MB"}]);
    let ar = uplink_bytes(&run(scenario("ar_tomahawk", traffic, json!([]))));
    let (max, min) = (*ar.iter().max().unwrap() as f64, *ar.iter().min().unwrap() as f64);
    assert!(min > 0.0 && max / min < 1.3, "AR: {ar:?}");
}

#[test]
fn letflow_moves_a_flow_only_at_gaps() {
    // One QP sends 64 KB messages back to back (one flowlet: one uplink),
    // or with 200 us of compute between them (each a new flowlet).
    let job = |gap: &str| {
        let mut phases =
            vec![json!({"name": "send", "collective": {"op": "broadcast", "bytes": "64KB", "channels": 1}})];
        if gap != "0us" {
            phases.push(json!({"name": "compute", "compute": gap}));
        }
        json!([{"name": "j", "ranks": 2, "placement": {"explicit": [0, 31]}, "iterations": 24, "phases": phases}])
    };
    let used = |out: &RunOutput| uplink_bytes(out).iter().filter(|&&b| b > 32_000).count();
    let back_to_back = run(scenario("letflow", json!([]), job("0us")));
    assert_eq!(used(&back_to_back), 1, "{:?}", uplink_bytes(&back_to_back));
    let gapped = run(scenario("letflow", json!([]), job("200us")));
    assert!(used(&gapped) >= 3, "new flowlets draw new uplinks: {:?}", uplink_bytes(&gapped));
    // Counted: at least one flowlet per message per switch on its path.
    let started = |out: &RunOutput| out.summary["flowlets_started"].as_u64().expect("counted under letflow");
    assert!(started(&gapped) >= 24 * 3, "{}", started(&gapped));
    assert!(started(&back_to_back) < started(&gapped) / 4, "{}", started(&back_to_back));
    let ecmp = run(scenario("ecmp", json!([]), job("200us")));
    assert_eq!(used(&ecmp), 1, "{:?}", uplink_bytes(&ecmp));
}

#[test]
fn conweave_moves_flows_off_slow_paths_and_its_destination_tor_puts_them_back_in_order() {
    // Sixteen 4 MB flows from four racks to four: some share an uplink or
    // a spine's downlink, their RTT replies come late, and ConWeave moves
    // them; the packets of the new path that overtake the old path's TAIL
    // wait at the destination ToR, so the NICs see every flow in order.
    let traffic =
        json!([{"kind": "racks_to_racks", "src_racks": [0, 1, 2, 3], "dst_racks": [4, 5, 6, 7], "bytes": "4MB"}]);
    let mut slowest = [0.0; 2];
    for seed in 1..=3 {
        let mut s = scenario("conweave", traffic.clone(), json!([]));
        s["transport"] = json!({"kind": "rocev2"});
        s["seed"] = json!(seed);
        let cw = run(s.clone());
        let c = &cw.summary["conweave"];
        let count = |k: &str| c[k].as_u64().expect("counted");
        assert!(count("reroutes") > 10 && count("clears") > 10, "seed {seed}: {c}");
        assert!(count("held_packets") > 100 && count("voq_flushes") > 10, "seed {seed}: {c}");
        assert_eq!(count("still_held"), 0, "seed {seed}: {c}");
        assert_eq!(cw.summary["out_of_order_packets"], 0, "seed {seed}: reordering reached a NIC: {c}");
        assert_eq!(cw.summary["retransmitted_packets"], 0, "seed {seed}");
        s["switch"]["forwarding"] = json!("ecmp");
        let ecmp = run(s);
        slowest[0] += cw.summary["fct_max_us"].as_f64().unwrap();
        slowest[1] += ecmp.summary["fct_max_us"].as_f64().unwrap();
    }
    assert!(slowest[0] < 0.9 * slowest[1], "ConWeave's slowest flows against ECMP's: {slowest:?}");
}

#[test]
fn drill_samples_more_than_a_group_has_is_refused() {
    let mut s = scenario("drill", json!([{"kind": "flow", "src": 0, "dst": 31, "bytes": "1MB"}]), json!([]));
    s["switch"]["drill"] = json!({"samples": 5});
    let scenario = fabricsim_core::Scenario::from_json(&s.to_string()).expect("valid on its own");
    let err = fabricsim_core::Simulation::new(scenario).err().expect("refused at build");
    assert_eq!(err.field, "switch.drill.samples", "{err}");
}

#[test]
fn path_ids_on_a_topology_wider_than_six_bits_and_a_bitmap_beside_the_window_are_refused() {
    // 80 uplinks per ToR: more than a PathID's 6 bits name.
    let mut s = scenario("path_id", json!([{"kind": "flow", "src": 0, "dst": 100, "bytes": "64KB"}]), json!([]));
    s["topology"] = json!({"kind": "clos", "tiers": 2, "radix": 160, "link_rate": "100Gbps", "nics": 160});
    let wide = fabricsim_core::Scenario::from_json(&s.to_string()).expect("valid on its own");
    let err = fabricsim_core::Simulation::new(wide).err().expect("refused at build");
    assert_eq!(err.field, "switch.forwarding", "{err}");
    assert!(err.to_string().contains("80 next hops"), "{err}");
    // MP-RDMA's bitmap and PRO's window are two loss detections: one at a time.
    let mut s = scenario("ecmp", json!([{"kind": "flow", "src": 0, "dst": 31, "bytes": "64KB"}]), json!([]));
    s["transport"] = json!({"kind": "rocev2", "direct_placement": true, "ooo_window": true, "mprdma_bitmap": 64});
    let err = fabricsim_core::Scenario::from_json(&s.to_string()).expect_err("refused");
    assert_eq!(err.field, "transport.mprdma_bitmap", "{err}");
    s["transport"] = json!({"kind": "rocev2", "mprdma_bitmap": 64});
    let err = fabricsim_core::Scenario::from_json(&s.to_string()).expect_err("refused without placement");
    assert_eq!(err.field, "transport.mprdma_bitmap", "{err}");
}

/// Packets each uplink of ToR `t0.p0.0` sent.
fn uplink_packets(out: &RunOutput) -> Vec<u64> {
    let (nodes, peers, packets) =
        (texts(&out.ports, "node"), texts(&out.ports, "peer"), ints(&out.ports, "tx_packets"));
    (0..nodes.len()).filter(|&i| nodes[i] == "t0.p0.0" && peers[i].starts_with("t1.")).map(|i| packets[i]).collect()
}

fn pro(traffic: Value, faults: Value) -> Value {
    json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "link_delay": "1us"},
        "switch": {"forwarding": "path_id", "reconvergence_delay": "20us"},
        "nic": {"path_selection": "orchestrated"},
        "transport": {"kind": "rocev2", "direct_placement": true, "timeout_exponent": 4},
        "traffic": traffic,
        "faults": faults,
    })
}

#[test]
fn path_id_forwarding_follows_the_orchestrated_round_robin_exactly() {
    // One QP from ToR 0 to ToR 7: its PathIDs walk the 4 uplinks in turn,
    // so each carries a quarter of its 1,024 packets, to the packet.
    let out = run(pro(json!([{"kind": "flow", "src": 0, "dst": 31, "bytes": "4MiB"}]), json!([])));
    assert_eq!(uplink_packets(&out), [256, 256, 256, 256]);
    // The same QP hashed by ECMP: one uplink carries all of it.
    let mut ecmp = pro(json!([{"kind": "flow", "src": 0, "dst": 31, "bytes": "4MiB"}]), json!([]));
    ecmp["switch"]["forwarding"] = json!("ecmp");
    ecmp["nic"]["path_selection"] = json!("transport");
    let mut hashed = uplink_packets(&run(ecmp));
    hashed.sort();
    assert_eq!(hashed, [0, 0, 0, 1024]);
}

#[test]
fn after_a_failure_and_convergence_path_ids_of_the_dead_port_go_adaptive() {
    // Four QPs from ToR 0 to ToR 7; one uplink fails at 50 us. Until the
    // routes converge (20 us later) the packets whose PathID names it are
    // lost; then they are routed adaptively over the three left, and every
    // flow completes.
    let traffic = json!([{"kind": "racks_to_racks", "src_racks": [0], "dst_racks": [7], "bytes": "8MiB"}]);
    let faults = json!([{"kind": "link_down", "at": "50us", "port": "t0.p0.0:4"}]);
    let out = run(pro(traffic, faults));
    let lost = out.summary["drops_by_cause"]["link_down"].as_u64().unwrap();
    assert!(lost > 0, "the PathIDs of the dead port lose packets until convergence");
    // 20us at 100G is about 60 packets per uplink: the loss ends with convergence.
    assert!(lost < 200, "{lost} packets lost");
    assert_eq!(out.summary["flows_completed"].as_u64(), Some(4), "{}", out.summary);
    let packets = uplink_packets(&out);
    let after: u64 = packets.iter().sum::<u64>() - packets[0];
    assert!(after > 3 * 2048, "the three live uplinks carry the rest: {packets:?}");
}

#[test]
fn pros_window_recovers_a_failure_by_nacks_instead_of_timeouts() {
    // The failure of after_a_failure...: with PRO's loss recovery the
    // packets lost before convergence are NACKed once they fall out of the
    // window and resent alone; without it every loss waits for a timeout.
    let traffic = json!([{"kind": "racks_to_racks", "src_racks": [0], "dst_racks": [7], "bytes": "8MiB"}]);
    let faults = json!([{"kind": "link_down", "at": "50us", "port": "t0.p0.0:4"}]);
    let mut scenario = pro(traffic, faults);
    scenario["transport"] = json!({"kind": "rocev2", "direct_placement": true, "ooo_window": true,
        "retransmit_timeout": "80us", "timeout_resend": "oldest"});
    let with_window = run(scenario.clone());
    scenario["transport"]["timeout_resend"] = json!("go_back_n");
    let going_back_on_timeouts = run(scenario.clone());
    scenario["transport"]["ooo_window"] = json!(false);
    let without = run(scenario);
    let get = |out: &RunOutput, key: &str| out.summary[key].as_u64().unwrap();
    assert_eq!(get(&with_window, "flows_completed"), 4);
    let lost = with_window.summary["drops_by_cause"]["link_down"].as_u64().unwrap();
    assert!(lost > 0);
    // Every lost packet resent, by NACK; resending only the oldest on a
    // timeout, at most one more per timeout (a tail loss's copy that
    // crossed a late original).
    let resent = get(&with_window, "retransmitted_packets");
    assert!(resent >= lost && resent <= lost + get(&with_window, "timeouts"), "{}", with_window.summary);
    assert!(get(&with_window, "timeouts") < get(&without, "timeouts"), "{} / {}", with_window.summary, without.summary);
    // Going back N without the window resends what arrived too (335
    // against 66 on seed 1); with it, only on its few timeouts (87).
    assert!(3 * resent < get(&without, "retransmitted_packets"), "{}", without.summary);
    let back = get(&going_back_on_timeouts, "retransmitted_packets");
    assert_eq!(get(&going_back_on_timeouts, "flows_completed"), 4);
    assert!(back >= resent && 3 * back < get(&without, "retransmitted_packets"), "{back}");
}

#[test]
fn reordering_is_measured_per_packet_and_ecn_marks_per_tier() {
    // An incast of 6 onto one NIC behind racks of 4: queues and marks at
    // the last hop (tier 0) and, under spraying, packets out of order.
    let traffic = json!([{"kind": "incast", "receiver": 31, "senders": [0, 1, 2, 3, 8, 9], "bytes": "2MB"}]);
    for forwarding in ["ecmp", "drill"] {
        let out = run(scenario(forwarding, traffic.clone(), json!([])));
        let by_tier = out.summary["ecn_marks_by_tier"].as_object().unwrap();
        let sum: u64 = by_tier.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(sum, out.summary["ecn_marks"].as_u64().unwrap(), "{by_tier:?}");
        assert!(by_tier.contains_key("tier0"), "{forwarding}: the incast's last hop marks: {by_tier:?}");
        let degree = &out.summary["ooo_degree"];
        assert_eq!(degree["packets"].as_u64(), Some(6 * 489), "{forwarding}: every packet placed once: {degree}");
        let max = degree["max"].as_u64().unwrap();
        if forwarding == "ecmp" {
            assert_eq!(max, 0, "one path per QP: always in order");
        } else {
            assert!(max > 0, "sprayed: some packets overtake others");
        }
    }
}

/// The imbalance table's row for `group` and `metric`: (samples, p50, p99).
fn imbalance(out: &RunOutput, group: &str, metric: &str) -> (u64, f64, f64) {
    let (groups, metrics) = (texts(&out.imbalance, "group"), texts(&out.imbalance, "metric"));
    let row = (0..groups.len()).find(|&i| groups[i] == group && metrics[i] == metric).expect("a row");
    let q = |name: &str| common::floats(&out.imbalance, name)[row].unwrap();
    (ints(&out.imbalance, "samples")[row], q("p50"), q("p99"))
}

#[test]
fn imbalance_telemetry_sees_ecmp_collisions_that_pro_avoids() {
    // Four QPs each way between ToRs 0 and 7: ECMP collides some on one
    // uplink and leaves another idle, PRO spreads every QP over all four
    // (the ACKs, one path per QP, are a few percent of the bytes).
    let traffic = json!([{"kind": "racks_to_racks", "src_racks": [0, 7], "dst_racks": [7, 0], "bytes": "4MB"}]);
    let telemetry = json!({"imbalance": {"groups": [{"tier": 0, "facing": "up"}, {"tier": 1, "facing": "down"}]}});
    let mut ecmp = scenario("ecmp", traffic.clone(), json!([]));
    ecmp["telemetry"] = telemetry.clone();
    let mut pro = pro(traffic, json!([]));
    pro["telemetry"] = telemetry;
    let (ecmp, pro) = (run(ecmp), run(pro));
    let (samples, ecmp_p50, _) = imbalance(&ecmp, "tier0_up", "load_max_over_mean");
    assert!(samples > 10, "a sample per switch per 10us window with traffic");
    let (_, pro_p50, pro_p99) = imbalance(&pro, "tier0_up", "load_max_over_mean");
    // An idle uplink and a doubled one: the busiest carries twice the mean or more.
    assert!(ecmp_p50 >= 1.9, "ECMP {ecmp_p50}");
    assert!(pro_p50 < 1.1 && pro_p99 < 1.3, "PRO {pro_p50} / {pro_p99}");
    // Where ECMP put two QPs on one uplink its queue stands above the others'.
    let (queue_samples, _, pro_queue) = imbalance(&pro, "tier0_up", "queue_max_minus_mean_bytes");
    assert!(queue_samples > 1000, "one per switch every 0.1us");
    let (_, _, ecmp_queue) = imbalance(&ecmp, "tier0_up", "queue_max_minus_mean_bytes");
    assert!(pro_queue < ecmp_queue, "PRO {pro_queue} ECMP {ecmp_queue}");
}

#[test]
fn without_inter_qp_orchestration_a_nics_qps_collide_on_the_uplinks() {
    // Fig 11b's ablation: each NIC of ToR 0 sends to the four NICs of ToR 7
    // on four QPs. Staggered, the QPs of a NIC take four different uplinks
    // at a time; in lockstep, all four take the same one, and the ToR's
    // uplink queues swing.
    let traffic: Vec<Value> = (0..4)
        .flat_map(|s| (28..32).map(move |d| json!({"kind": "flow", "src": s, "dst": d, "bytes": "1MB"})))
        .collect();
    let telemetry = json!({"imbalance": {"groups": [{"tier": 0, "facing": "up"}]}});
    let queue_p99 = |inter_qp: bool| {
        let mut s = pro(json!(traffic), json!([]));
        s["nic"]["orchestration"] = json!({"inter_qp": inter_qp});
        s["telemetry"] = telemetry.clone();
        imbalance(&run(s), "tier0_up", "queue_max_minus_mean_bytes").2
    };
    let (staggered, lockstep) = (queue_p99(true), queue_p99(false));
    // (Seed 1: 16,640 B against 8,192 B at p99.)
    assert!(lockstep > 1.5 * staggered.max(1024.0), "lockstep {lockstep} B, staggered {staggered} B");
}

#[test]
fn double_binary_tree_traffic_sends_each_nic_to_its_parent_in_both_trees() {
    // PRO's Tree pattern on 32 NICs: 31 flows per tree; a NIC sends at most
    // once per tree, receives from at most two children per tree, never
    // from itself, and a rank inner in one tree is a leaf in the other.
    let out = run(scenario("ecmp", json!([{"kind": "double_binary_tree", "bytes": "64KB"}]), json!([])));
    let (src, dst) = (texts(&out.flows, "src"), texts(&out.flows, "dst"));
    assert_eq!(src.len(), 62);
    let count = |names: &[String], nic: &str| names.iter().filter(|n| *n == nic).count();
    for k in 0..32 {
        let nic = format!("nic{k}");
        assert!((1..=2).contains(&count(&src, &nic)), "{nic} sends {}", count(&src, &nic));
        assert!(count(&dst, &nic) <= 4, "{nic} receives {}", count(&dst, &nic));
    }
    assert!(src.iter().zip(&dst).all(|(s, d)| s != d));
    assert_eq!(out.summary["flows_completed"].as_u64(), Some(62));
}
