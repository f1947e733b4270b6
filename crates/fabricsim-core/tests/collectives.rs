//! Collectives against theory: ring all-reduce at line rate on a fabric
//! where every flow has its own path, latency-bound small messages as the
//! alpha-beta model predicts, all-to-all limited by oversubscribed uplinks,
//! NCCL's dependencies on a trace, and jobs accounted separately.

mod common;

use std::collections::HashMap;

use common::{floats, ints, run, summary_u64, texts};
use fabricsim_core::net::{headers, IpVersion};
use serde_json::{json, Value};

fn clos(radix: u32) -> Value {
    json!({"kind": "clos", "tiers": 2, "radix": radix, "link_rate": "100Gbps", "link_delay": "1us"})
}

fn job(name: &str, ranks: u32, placement: Value, collective: Value) -> Value {
    json!({"name": name, "ranks": ranks, "placement": placement, "phases": [{"name": "c", "collective": collective}]})
}

fn line_payload_gbps() -> f64 {
    100.0 * headers::payload_efficiency(IpVersion::Ipv6, 4096)
}

#[test]
fn large_ring_all_reduce_reaches_line_rate_on_a_non_blocking_fabric() {
    // Eight ranks under one ToR: every ring hop has its own links.
    let out = run(json!({
        "topology": clos(16),
        "jobs": [job("ar", 8, json!("t0_local"), json!({"op": "all_reduce", "bytes": "64MB"}))],
    }));
    let busbw = floats(&out.collectives, "busbw_gbps")[0].unwrap();
    let line = line_payload_gbps();
    assert!((busbw - line).abs() <= 0.03 * line, "busbw {busbw:.2} Gb/s vs {line:.2}");
    let slowdown = floats(&out.collectives, "slowdown")[0].unwrap();
    assert!((0.97..1.05).contains(&slowdown), "slowdown {slowdown}");
}

#[test]
fn small_collectives_are_latency_bound_as_the_alpha_beta_model_predicts() {
    let out = run(json!({
        "topology": clos(16),
        "jobs": [job("ar", 8, json!("t0_local"), json!({"op": "all_reduce", "bytes": "16KB"}))],
    }));
    let cct = floats(&out.collectives, "cct_s")[0].unwrap();
    let ideal = floats(&out.collectives, "ideal_s")[0].unwrap();
    // 2(n-1) = 14 latency-bound steps: the bandwidth term is a few percent.
    assert!((cct / ideal - 1.0).abs() < 0.15, "cct {cct:e} vs alpha-beta {ideal:e}");
    let busbw = floats(&out.collectives, "busbw_gbps")[0].unwrap();
    assert!(busbw < 0.2 * line_payload_gbps(), "a 16KB all-reduce is latency-bound, not at {busbw} Gb/s");
}

#[test]
fn all_to_all_is_limited_by_oversubscribed_uplinks() {
    // 8 ToRs of 6 NICs with 2 uplinks each (3:1); 48 ranks.
    let mut topo = clos(8);
    topo["oversubscription"] = json!([3.0]);
    let bytes = 4_800_000u64;
    let out = run(json!({
        "topology": topo,
        "transport": {"kind": "rocev2", "qps": 4},
        "jobs": [job("a2a", 48, json!("contiguous"), json!({"op": "all_to_all", "bytes": "4.8MB"}))],
    }));
    let cct = floats(&out.collectives, "cct_s")[0].unwrap();
    // Each ToR sends 6 ranks x 42 remote peers x S/48 over 2 x 100 Gb/s.
    let wire = 4198.0 / 4096.0;
    let uplink_bound = 6.0 * 42.0 * (bytes as f64 / 48.0) * wire * 8.0 / 200e9;
    let nic_bound = 47.0 * (bytes as f64 / 48.0) * wire * 8.0 / 100e9;
    assert!(uplink_bound > 2.0 * nic_bound);
    assert!(cct >= uplink_bound && cct <= 1.3 * uplink_bound, "cct {cct:e} vs uplink bound {uplink_bound:e}");
}

#[test]
fn no_chunk_leaves_a_rank_before_it_arrived_there() {
    for collective in [
        json!({"op": "all_reduce", "bytes": "3MB", "slice": "256KiB"}),
        json!({"op": "all_gather", "bytes": "3MB", "slice": "256KiB"}),
        json!({"op": "broadcast", "bytes": "2MB", "slice": "256KiB", "root": 2}),
    ] {
        let out = run(json!({
            "topology": clos(8),
            "telemetry": {"transfers": true},
            "jobs": [job("j", 6, json!("cross_t1"), collective.clone())],
        }));
        let t = &out.transfers;
        let (src, dst, step, chunk, channel) =
            (ints(t, "src_rank"), ints(t, "dst_rank"), ints(t, "step"), ints(t, "chunk"), ints(t, "channel"));
        let (ready, end) = (floats(t, "ready_s"), floats(t, "end_s"));
        let mut arrived: HashMap<(u64, u64, u64, u64), f64> = HashMap::new();
        for i in 0..src.len() {
            arrived.insert((channel[i], dst[i], step[i], chunk[i]), end[i].unwrap());
        }
        let mut checked = 0;
        for i in 0..src.len() {
            if step[i] == 0 {
                continue;
            }
            let came = arrived[&(channel[i], src[i], step[i] - 1, chunk[i])];
            assert!(ready[i].unwrap() >= came, "{collective}: transfer {i} left before its chunk arrived");
            checked += 1;
        }
        assert!(checked > 0);
    }
}

#[test]
fn concurrent_jobs_are_accounted_separately_and_add_up() {
    let out = run(json!({
        "topology": clos(8),
        "jobs": [
            job("victim", 8, json!("contiguous"), json!({"op": "all_reduce", "bytes": "4MB"})),
            job("noise", 16, json!("random"), json!({"op": "all_to_all", "bytes": "8MB"})),
        ],
    }));
    let jobs = &out.summary["jobs"];
    let victim = jobs["victim"]["network_bytes"].as_u64().unwrap();
    let noise = jobs["noise"]["network_bytes"].as_u64().unwrap();
    assert!(victim > 0 && noise > 0);
    assert_eq!(victim + noise, summary_u64(&out, "delivered_payload_bytes"));
    assert_eq!(texts(&out.collectives, "job"), ["victim", "noise"]);
    assert!(jobs["victim"]["completed"].as_bool().unwrap() && jobs["noise"]["completed"].as_bool().unwrap());
}

#[test]
fn a_connection_never_has_more_slices_in_flight_than_its_buffer_slots() {
    let in_flight = |credits: Option<u32>| {
        let mut c = json!({"op": "broadcast", "bytes": "4MiB", "slice": "64KiB", "channels": 1});
        if let Some(k) = credits {
            c["credits"] = json!(k);
        }
        let out = run(json!({
            "topology": clos(8),
            "telemetry": {"transfers": true},
            "jobs": [job("b", 4, json!("t0_local"), c)],
        }));
        let t = &out.transfers;
        let (src, posted, end) = (ints(t, "src_rank"), floats(t, "posted_s"), floats(t, "end_s"));
        // Most transfers in flight at once from the root (rank 0).
        let mut edges: Vec<(f64, i32)> = Vec::new();
        for i in 0..src.len() {
            if src[i] == 0 {
                edges.push((posted[i].unwrap(), 1));
                edges.push((end[i].unwrap(), -1));
            }
        }
        edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        edges
            .iter()
            .scan(0, |n, e| {
                *n += e.1;
                Some(*n)
            })
            .max()
            .unwrap()
    };
    // NCCL's 8 buffer steps of one step per broadcast slice.
    assert_eq!(in_flight(None), 8);
    assert_eq!(in_flight(Some(2)), 2);
}
