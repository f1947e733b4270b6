//! MRC's path lifecycle: an EV that loses a packet is retired and its
//! backup takes over, background probes bring repaired paths back, and a
//! denylist keeps EVs off links known to be bad (mrc-srv6-multiplane.txt
//! s2.4, s3, s5.2.4).

mod common;

use common::{floats, ints, run, summary_u64, texts, tx_rate};
use serde_json::{json, Value};

fn mrc_switch() -> Value {
    json!({"pfc": {"enabled": false}, "trimming": {"enabled": true}, "ecn": {"last_hop": false}, "forwarding": "srv6"})
}

fn topology(planes: u32) -> Value {
    json!({"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "planes": planes})
}

/// The EV log as (time, ev, state) rows.
fn ev_log(out: &fabricsim_core::RunOutput) -> Vec<(f64, u64, String)> {
    let (t, ev, state) = (floats(&out.ev_log, "time_s"), ints(&out.ev_log, "ev"), texts(&out.ev_log, "state"));
    (0..t.len()).map(|i| (t[i].unwrap(), ev[i], state[i].clone())).collect()
}

#[test]
fn a_repaired_uplink_is_probed_back_into_use() {
    // No backups: the slots of the EVs that cross the failed uplink stay
    // empty until probes show the path works again.
    let out = run(json!({
        "topology": topology(1), "switch": mrc_switch(),
        "transport": {"kind": "mrc", "backup_evs": 0},
        "traffic": [{"kind": "flow", "src": 0, "dst": 4, "bytes": "16MB"}],
        "faults": [{"kind": "link_flap", "at": "50us", "port": "t0.p0.0:4", "duration": "250us"}],
        "telemetry": {"sample_interval": "50us", "ports": ["t0.p0.0:4"], "ev_log": true, "ev_activity": true},
    }));
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    let retired = summary_u64(&out, "retired_evs");
    assert!(retired > 10, "{}", out.summary);
    assert_eq!(summary_u64(&out, "resurrected_evs"), retired);
    // Probes of the retired EVs die on the dead link too, not only data.
    let (all, data) = (summary_u64(&out, "drops"), summary_u64(&out, "data_drops"));
    assert!(data > 0 && all > data, "drops {all}, of them data {data}");
    // The per-EV drop counts place every lost data packet on its EV, and
    // each EV that lost one was retired.
    let (e, m, v) =
        (texts(&out.timeseries, "entity"), texts(&out.timeseries, "metric"), floats(&out.timeseries, "value"));
    let dropped: Vec<(String, f64)> =
        (0..e.len()).filter(|&i| m[i] == "ev_drops").map(|i| (e[i].clone(), v[i].unwrap())).collect();
    assert_eq!(dropped.iter().map(|(_, n)| n).sum::<f64>(), data as f64);
    let retired: Vec<String> =
        ev_log(&out).iter().filter(|(_, _, s)| s == "retired").map(|(_, ev, _)| format!("qp0/ev{ev}")).collect();
    assert!(dropped.iter().all(|(entity, _)| retired.contains(entity)), "{dropped:?} vs {retired:?}");
    let rate = tx_rate(&out, "t0.p0.0:4");
    let at = |lo: f64, hi: f64| rate.iter().filter(|&&(t, _)| t > lo && t <= hi).map(|&(_, r)| r).collect::<Vec<_>>();
    assert!(at(0.0, 50e-6).iter().all(|&r| r > 10e9), "{rate:?}");
    assert!(at(100e-6, 300e-6).iter().all(|&r| r == 0.0), "{rate:?}");
    // Three answered probes 100us apart bring the EVs back.
    assert!(at(700e-6, 1e-3).iter().all(|&r| r > 10e9), "{rate:?}");
    // Each retired EV is logged retired, then in use again; one that lost
    // data on the dead link only once the link is back (a retirement for
    // a lost SACK is undone as soon as a D-SACK shows the data arrived).
    let log = ev_log(&out);
    for &(t, ev, _) in log.iter().filter(|(_, _, s)| s == "retired") {
        assert!(t >= 50e-6);
        let lost_data = dropped.iter().any(|(entity, _)| *entity == format!("qp0/ev{ev}"));
        let back_after = if lost_data { 300e-6 } else { t };
        let back = |s2: &str| s2 == "active" || s2 == "backup";
        assert!(
            log.iter().any(|&(t2, e2, ref s2)| e2 == ev && t2 > back_after && back(s2)),
            "EV {ev}: {:?}, run end {}",
            log.iter().filter(|e| e.1 == ev).collect::<Vec<_>>(),
            out.summary["sim_time_s"]
        );
    }
}

#[test]
fn one_lossy_ev_is_replaced_by_its_backup_at_line_rate() {
    // The paper's Fig 12-13 setup: 8 planes, one active and one backup EV
    // per plane over two paths, 20% loss injected on one EV.
    let out = run(json!({
        "topology": topology(8), "switch": mrc_switch(),
        "transport": {"kind": "mrc", "evs": 8, "backup_evs": 8, "paths_per_plane": 2},
        "traffic": [{"kind": "flow", "src": 0, "dst": 4, "bytes": "32MB"}],
        "faults": [{"kind": "ev_loss", "at": "100us", "nic": 0, "ev": 0, "rate": 0.2}],
        "telemetry": {"ev_log": true},
    }));
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    let log = ev_log(&out);
    let first = |ev: u64, state: &str| log.iter().find(|(_, e, s)| *e == ev && s == state).map(|&(t, _, _)| t);
    assert_eq!(first(0, "active"), Some(0.0));
    assert_eq!(first(8, "backup"), Some(0.0));
    let retired = first(0, "retired").expect("EV 0 retired");
    assert!((100e-6..130e-6).contains(&retired), "retired at {retired}");
    assert_eq!(first(8, "active"), Some(retired), "its backup, same plane, takes over at once");
    // EV 0 stays out of the active set: resurrected only as a backup.
    assert_eq!(log.iter().filter(|(_, e, s)| *e == 0 && s == "active").count(), 1);
    let slowdown = floats(&out.flows, "slowdown")[0].unwrap();
    assert!(slowdown < 1.1, "the flow keeps line rate: slowdown {slowdown:.3}");
}

#[test]
fn a_denied_uplink_carries_nothing() {
    let out = run(json!({
        "topology": topology(1), "switch": mrc_switch(),
        "transport": {"kind": "mrc", "denylist": ["t0.p0.0:4"]},
        "traffic": [{"kind": "flow", "src": 0, "dst": 4, "bytes": "4MB"}],
    }));
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    assert_eq!(summary_u64(&out, "retired_evs"), 0);
    let (node, port, tx) = (texts(&out.ports, "node"), ints(&out.ports, "port"), ints(&out.ports, "tx_bytes"));
    let uplinks: Vec<u64> = (0..node.len()).filter(|&i| node[i] == "t0.p0.0" && port[i] >= 4).map(|i| tx[i]).collect();
    assert_eq!(uplinks[0], 0, "denied uplink {uplinks:?}");
    assert!(uplinks[1..].iter().all(|&b| b > 1_000_000), "{uplinks:?}");
}

/// The paper's Fig 14 set-up: flow 1 sprays on EV A alone (EV B, the other
/// T0 uplink, is its backup); flow 2, from a neighbour under the same ToR,
/// is forced onto A from 200us. Returns flow 1's share of packets on A
/// alone and once A is shared, and the flows' slowdowns.
fn pinned_evs(ecn_replace: bool) -> (f64, f64, Vec<f64>) {
    let out = run(json!({
        "topology": topology(1), "switch": mrc_switch(),
        "transport": {"kind": "mrc", "ecn_replace": ecn_replace},
        "traffic": [
            {"kind": "flow", "src": 0, "dst": 4, "bytes": "8MB", "ev_set": {"active": [0], "backup": [8]}},
            {"kind": "flow", "src": 1, "dst": 5, "bytes": "4MB", "start": "200us", "ev_set": {"active": [0]}},
        ],
        "telemetry": {"sample_interval": "50us", "ev_activity": true},
    }));
    assert_eq!(summary_u64(&out, "flows_completed"), 2);
    let (t, e, v) =
        (floats(&out.timeseries, "time_s"), texts(&out.timeseries, "entity"), floats(&out.timeseries, "value"));
    let packets = |entity: &str, lo: f64, hi: f64| -> f64 {
        (0..t.len())
            .filter(|&i| e[i] == entity && t[i].unwrap() > lo && t[i].unwrap() <= hi)
            .map(|i| v[i].unwrap())
            .sum()
    };
    let share = |lo, hi| {
        let (a, b) = (packets("qp0/ev0", lo, hi), packets("qp0/ev8", lo, hi));
        a / (a + b)
    };
    let slowdowns = floats(&out.flows, "slowdown").into_iter().map(Option::unwrap).collect();
    (share(0.0, 200e-6), share(300e-6, 600e-6), slowdowns)
}

#[test]
fn ecn_moves_a_flow_off_an_ev_another_flow_is_pinned_to() {
    let (alone, shared, slowdowns) = pinned_evs(true);
    assert_eq!(alone, 1.0, "alone, flow 1 keeps to its one active EV");
    assert!(shared < 0.1, "shared: {shared:.2} of flow 1 still on A");
    assert!(slowdowns[0] < 1.15 && slowdowns[1] < 1.15, "both near line rate: {slowdowns:?}");
    // Without replacement the marks only make flow 1 skip A for a while,
    // and with no other active EV it stays there.
    let (_, shared, _) = pinned_evs(false);
    assert!(shared > 0.9, "without replacement {shared:.2} on A");
}

/// Bytes each port of `node` sent.
fn port_tx(out: &fabricsim_core::RunOutput, node: &str) -> Vec<u64> {
    let (nodes, tx) = (texts(&out.ports, "node"), ints(&out.ports, "tx_bytes"));
    (0..nodes.len()).filter(|&i| nodes[i] == node).map(|i| tx[i]).collect()
}

/// A QP held back by its window, not its ports, still takes the planes in
/// turn (s2.1: "rotates through this set"): the NIC offers its free ports
/// in the QP's rotation order, not always the first port first.
#[test]
fn a_window_limited_qp_sends_equal_bytes_on_every_plane() {
    for window in ["4KiB", "12KiB", "20KiB"] {
        let out = run(json!({
            "topology": topology(4), "switch": mrc_switch(),
            "transport": {"kind": "mrc", "window": window},
            "traffic": [{"kind": "flow", "src": 0, "dst": 4, "bytes": "2MB"}],
        }));
        assert_eq!(summary_u64(&out, "flows_completed"), 1);
        let tx = port_tx(&out, "nic0");
        let (lo, hi) = (*tx.iter().min().unwrap(), *tx.iter().max().unwrap());
        assert!(hi - lo <= 4200, "window {window}: bytes per plane {tx:?}");
    }
}

/// Half the uplinks of the sender's ToR die: the responder's reverse EV,
/// drawn at random, may cross one, and then no SACK comes back until a
/// reverse probe is answered. The answers take the sender's active EVs in
/// turn, so one soon gets through: before, they all took the first active
/// EV, and when that one was dead the QP resent what had arrived for as
/// long as the links stayed down (Fig 19c, seed 2: no goodput for 4 ms).
#[test]
fn a_dead_first_ev_does_not_keep_the_reverse_path_dead() {
    for seed in 1..=4 {
        let out = run(json!({
            "seed": seed,
            "topology": {"kind": "clos", "tiers": 2, "radix": 8, "nics": 16, "link_rate": ["400Gbps", "100Gbps"]},
            "switch": mrc_switch(),
            "transport": {"kind": "mrc"},
            "traffic": [{"kind": "flow", "src": 0, "dst": 4, "bytes": "16MB", "start": "10us"}],
            "faults": [
                {"kind": "link_down", "at": "0us", "port": "t0.p0.0:4"},
                {"kind": "link_down", "at": "0us", "port": "t0.p0.0:5"},
            ],
        }));
        assert_eq!(summary_u64(&out, "flows_completed"), 1, "seed {seed}");
        // Two of four 100G uplinks left: 200 Gb/s, a slowdown of 2 over
        // the pristine 400 Gb/s. Learning which EVs are dead costs up to
        // 0.4 ms more (3.35 on seed 4); the stall this guards against cost
        // 4 ms, a slowdown of 12.
        let slowdown = floats(&out.flows, "slowdown")[0].unwrap();
        assert!(slowdown < 4.0, "seed {seed}: slowdown {slowdown:.2}");
    }
}

/// One of four 400G uplinks of the sender's ToR dies mid-transfer (Fig 19a):
/// the rest carry the NIC's rate, so the transfer must barely notice. The
/// lost packets fill the window and stop the sender, so no later SACK shows
/// them lost: RACK's reordering timer must (it waited for the 320us
/// retransmission timer before), and a loss must not collapse the window
/// as a trim does (a path that died is not congestion).
#[test]
fn a_dead_uplink_costs_a_single_plane_transfer_next_to_nothing() {
    for seed in 1..=3 {
        let out = run(json!({
            "seed": seed,
            "topology": {"kind": "clos", "tiers": 2, "radix": 8, "nics": 16, "link_rate": "400Gbps"},
            "switch": mrc_switch(),
            "transport": {"kind": "mrc"},
            "traffic": [{"kind": "flow", "src": 0, "dst": 4, "bytes": "32MB"}],
            "faults": [{"kind": "link_down", "at": "200us", "port": "t0.p0.0:4"}],
        }));
        assert_eq!(summary_u64(&out, "flows_completed"), 1, "seed {seed}");
        let slowdown = floats(&out.flows, "slowdown")[0].unwrap();
        assert!(slowdown < 1.15, "seed {seed}: slowdown {slowdown:.2}");
    }
}
