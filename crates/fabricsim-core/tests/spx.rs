//! Spectrum-X's NIC (spectrum-x.txt s4.2-s4.4): one QP sprayed over the
//! planes by the plane load balancer, a congestion context per plane that
//! keeps a congested plane from slowing the others, and plane failures
//! found at once (local) or after missed RTT probes (remote).

mod common;

use common::{ints, run, summary_u64, texts, tx_rate};
use fabricsim_core::transport::SpxConfig;
use fabricsim_core::RunOutput;
use serde_json::{json, Value};

fn topology() -> Value {
    json!({"kind": "clos", "tiers": 2, "radix": 8, "nics": 16, "planes": 4, "link_rate": "100Gbps", "link_delay": "1us"})
}

fn spx(transport: Value, traffic: Value, faults: Value) -> Value {
    let mut t = json!({"kind": "spx"});
    t.as_object_mut().unwrap().extend(transport.as_object().unwrap().clone());
    json!({
        "topology": topology(),
        "switch": {"forwarding": "adaptive", "reconvergence_delay": "1us"},
        "transport": t,
        "traffic": traffic,
        "faults": faults,
    })
}

/// Bytes each port of `node` sent, by port index.
fn port_bytes(out: &RunOutput, node: &str) -> Vec<u64> {
    let (nodes, bytes) = (texts(&out.ports, "node"), ints(&out.ports, "tx_bytes"));
    (0..nodes.len()).filter(|&i| nodes[i] == node).map(|i| bytes[i]).collect()
}

/// nic0-3 (leaf 0) write to nic4-7 (leaf 1). On plane 2, leaf 1 keeps one
/// of its four uplinks: that plane carries a quarter of what the others
/// do into leaf 1 (s6.7's asymmetry, Fig 16).
fn one_plane_degraded(plane_lb: &str) -> RunOutput {
    let traffic: Vec<Value> = (0..4).map(|k| json!({"kind": "flow", "src": k, "dst": k + 4, "bytes": "4MB"})).collect();
    let faults: Vec<Value> =
        (5..8).map(|p| json!({"kind": "link_down", "at": "0us", "port": format!("t0.p2.1:{p}")})).collect();
    run(spx(json!({"plane_lb": plane_lb}), json!(traffic), json!(faults)))
}

#[test]
fn per_plane_contexts_hold_back_the_congested_plane_while_the_others_keep_line_rate() {
    let plb = one_plane_degraded("plb");
    let global = one_plane_degraded("global_cc");
    assert_eq!(summary_u64(&plb, "flows_completed"), 4);
    assert_eq!(summary_u64(&global, "flows_completed"), 4);
    let planes = port_bytes(&plb, "nic0");
    let others = planes[0].min(planes[1]).min(planes[3]);
    // Plane 2 has a quarter of the capacity: the PLB moves the rest of the
    // data onto the planes that have room.
    assert!(planes[2] * 10 < others * 7, "bytes per plane {planes:?}");
    // One shared context slows every plane to plane 2's pace.
    let (fast, slow) = (plb.summary["fct_max_us"].as_f64().unwrap(), global.summary["fct_max_us"].as_f64().unwrap());
    assert!(slow > 1.1 * fast, "plb {fast:.0}us, global_cc {slow:.0}us");
}

/// nic0 writes to nic4; a port goes down at 30us: nic4's plane-1 port
/// (remote for nic0), or nic0's own.
fn plane_failure(transport: Value, nic: u32) -> RunOutput {
    plane_failure_of("8MB", "30us", transport, nic)
}

fn plane_failure_of(bytes: &str, at: &str, transport: Value, nic: u32) -> RunOutput {
    let mut s = spx(
        transport,
        json!([{"kind": "flow", "src": 0, "dst": 4, "bytes": bytes}]),
        json!([{"kind": "nic_port_down", "at": at, "nic": nic, "port": 1}]),
    );
    s["telemetry"] = json!({"sample_interval": "5us", "ports": ["nic0:1"]});
    run(s)
}

/// When nic0 stopped sending on plane 1: the first sample after which its
/// rate stays zero.
fn stopped_at(out: &RunOutput) -> f64 {
    let rate = tx_rate(out, "nic0:1");
    // Probes of the failed plane go on, at a few Mb/s.
    let last_busy = rate.iter().rposition(|&(_, r)| r > 1e9).expect("plane 1 carried traffic");
    rate[last_busy].0
}

#[test]
fn a_remote_plane_failure_is_found_after_the_configured_missed_probes() {
    // 1MB takes 20us on four planes: what was lost on plane 1 when it
    // failed at 10us is all that is left to send when the probes give up.
    let failing = |probes: u32, backoff: f64| {
        let transport = json!({"probe_interval": "10us", "failure_probes": probes, "failure_backoff": backoff});
        plane_failure_of("1MB", "10us", transport, 4)
    };
    let runs = [failing(3, 1.0), failing(6, 1.0), failing(3, 2.0), failing(6, 2.0)];
    for out in &runs {
        assert_eq!(summary_u64(out, "flows_completed"), 1);
        assert_eq!(summary_u64(out, "plane_failovers"), 1);
        assert!(summary_u64(out, "retransmitted_packets") > 0);
        assert_eq!(summary_u64(out, "timeouts"), 0, "found by probes, not by the retransmission timer");
    }
    let fct: Vec<f64> = runs.iter().map(|o| o.summary["fct_max_us"].as_f64().unwrap()).collect();
    // Probes every 10us, timing out at a fixed 10us: three timeouts or six,
    // 30us apart.
    assert!((20.0..=45.0).contains(&(fct[1] - fct[0])), "fixed: three {}us, six {}us", fct[0], fct[1]);
    // Backing off: 10 + 20 + 40 = 70us of silence, or 630us.
    assert!((540.0..=580.0).contains(&(fct[3] - fct[2])), "backing off: three {}us, six {}us", fct[2], fct[3]);
}

#[test]
fn a_remote_plane_failure_is_found_once_for_every_qp_to_that_destination() {
    // Four QPs from nic0 to nic4 share nic0's plane contexts towards nic4:
    // the dead plane is one failover, found by one set of probes, and no
    // QP waits for its retransmission timer.
    let out = plane_failure_of("8MB", "30us", json!({"qps": 4}), 4);
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    assert_eq!(summary_u64(&out, "plane_failovers"), 1, "{}", out.summary);
    assert_eq!(summary_u64(&out, "timeouts"), 0);
    let detection = SpxConfig::default().remote_failure_detection().as_secs_f64();
    assert!(stopped_at(&out) <= 30e-6 + detection + 25e-6, "stopped at {}", stopped_at(&out));
}

/// Fifteen NICs write to nic0 with congestion control off, so that their
/// windows (250KB per plane each) queue about 300us at nic0's leaf; nic15
/// joins at 60us, and its first answers come back only after that queue.
fn late_into_a_deep_queue(transport: Value) -> RunOutput {
    let mut traffic: Vec<Value> =
        (1..15).map(|k| json!({"kind": "flow", "src": k, "dst": 0, "bytes": "4MB"})).collect();
    traffic.push(json!({"kind": "flow", "src": 15, "dst": 0, "bytes": "1MB", "start": "60us"}));
    let mut t = json!({"cc": {"enabled": false}});
    t.as_object_mut().unwrap().extend(transport.as_object().unwrap().clone());
    run(spx(t, json!(traffic), json!([])))
}

#[test]
fn a_plane_whose_answers_wait_behind_a_deep_queue_is_not_taken_for_dead() {
    // Probes timing out every 20us without backing off give up after 100us
    // of silence: the late sender takes its planes for dead and resends.
    let fixed = late_into_a_deep_queue(json!({"failure_backoff": 1.0}));
    assert!(summary_u64(&fixed, "plane_failovers") > 0, "{}", fixed.summary);
    // Doubling each timeout, it waits 620us before it gives up on a plane.
    let backing_off = late_into_a_deep_queue(json!({"failure_backoff": 2.0}));
    for out in [&fixed, &backing_off] {
        assert_eq!(summary_u64(out, "flows_completed"), 15);
    }
    assert_eq!(summary_u64(&backing_off, "plane_failovers"), 0, "{}", backing_off.summary);
    assert_eq!(summary_u64(&backing_off, "retransmitted_packets"), 0);
}

#[test]
fn a_local_plane_failure_is_left_at_once() {
    let out = plane_failure(json!({}), 0);
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    assert_eq!(summary_u64(&out, "plane_failovers"), 1);
    assert!(stopped_at(&out) <= 35e-6, "stopped at {}", stopped_at(&out));
}

/// The sender's own plane-1 link fails just after that plane's last ACK
/// came back: software load balancing, which does not see the port, holds
/// the flow up until the retransmission timeout (exponent 10: 4.19 ms),
/// then takes out the plane that could not send its share. Before, a plane
/// had to have sent since it last heard to be taken out: this one had not,
/// and the QP failed after its retries (33.6 ms), the flow never ending.
#[test]
fn software_load_balancing_takes_out_a_plane_whose_own_port_died() {
    let out = run(spx(
        json!({"plane_lb": "sw_lb", "timeout_exponent": 10}),
        json!([{"kind": "flow", "src": 0, "dst": 4, "bytes": "8MB"}]),
        json!([{"kind": "link_down", "at": "30us", "port": "nic0:1"}]),
    ));
    assert_eq!(summary_u64(&out, "flows_completed"), 1, "{}", out.summary);
    assert_eq!(summary_u64(&out, "plane_failovers"), 1);
    assert!(out.summary["fct_max_us"].as_f64().unwrap() > 4_194.0);
}

#[test]
fn software_load_balancing_waits_for_the_retransmission_timeout() {
    // Exponent 10: a 4.2ms timeout. Equal shares per plane stall the whole
    // transfer behind the dead plane until then.
    let sw = run(spx(
        json!({"plane_lb": "sw_lb", "timeout_exponent": 10}),
        json!([{"kind": "flow", "src": 0, "dst": 4, "bytes": "8MB"}]),
        json!([{"kind": "nic_port_down", "at": "30us", "nic": 4, "port": 1}]),
    ));
    let hw = plane_failure(json!({"timeout_exponent": 10}), 4);
    assert_eq!(summary_u64(&sw, "flows_completed"), 1);
    assert_eq!(summary_u64(&sw, "plane_failovers"), 1);
    assert_eq!(summary_u64(&sw, "timeouts"), 1);
    let fct = |o: &RunOutput| o.summary["fct_max_us"].as_f64().unwrap();
    assert!(fct(&sw) > 4_194.0, "sw_lb finished in {}us", fct(&sw));
    assert!(fct(&hw) < 400.0, "plb finished in {}us", fct(&hw));
}

#[test]
fn telemetry_gives_microsecond_bandwidth_histograms_and_per_plane_throughput() {
    let mut s = spx(json!({}), json!([{"kind": "flow", "src": 0, "dst": 4, "bytes": "4MB"}]), json!([]));
    s["telemetry"] = json!({
        "sample_interval": "10us",
        "hosts": [0],
        "histograms": {"ports": ["nic0:0", "nic1:0"], "bands": 10},
    });
    let out = run(s);
    let (port, band, intervals) =
        (texts(&out.histograms, "port"), ints(&out.histograms, "band"), ints(&out.histograms, "intervals"));
    let of = |p: &str| -> Vec<u64> { (0..port.len()).filter(|&i| port[i] == p).map(|i| intervals[i]).collect() };
    let (busy, idle) = (of("nic0:0"), of("nic1:0"));
    assert_eq!((busy.len(), band[9]), (10, 9));
    // One time bin per microsecond of the run, at line rate or idle but
    // for the bins where the flow starts and ends.
    let run_us = (out.summary["sim_time_s"].as_f64().unwrap() * 1e6).ceil() as u64;
    assert_eq!(busy.iter().sum::<u64>(), run_us);
    assert!(busy[9] + busy[8] > run_us * 8 / 10, "{busy:?}");
    assert_eq!(idle[0], run_us, "nic1 sends nothing: {idle:?}");
    // The NIC's throughput per plane, as a time series.
    let (entity, metric) = (texts(&out.timeseries, "entity"), texts(&out.timeseries, "metric"));
    let planes: std::collections::BTreeSet<&str> =
        (0..entity.len()).filter(|&i| metric[i] == "plane_tx_bps").map(|i| entity[i].as_str()).collect();
    assert_eq!(planes.into_iter().collect::<Vec<_>>(), ["nic0:0", "nic0:1", "nic0:2", "nic0:3"]);
}

#[test]
fn entropy_source_routing_spreads_a_qp_over_the_paths_of_each_plane() {
    // Under ECMP a QP's one entropy value keeps each plane's packets on one
    // uplink; `esr`'s EVs name a path each, and they spread.
    let uplinks = |plane_lb: &str| {
        let mut s = spx(
            json!({"plane_lb": plane_lb}),
            json!([{"kind": "flow", "src": 0, "dst": 4, "bytes": "4MB"}]),
            json!([]),
        );
        s["switch"]["forwarding"] = json!("ecmp");
        let out = run(s);
        assert_eq!(summary_u64(&out, "flows_completed"), 1);
        let bytes = port_bytes(&out, "t0.p1.0");
        bytes[4..8].iter().filter(|&&b| b > 100_000).count()
    };
    assert_eq!(uplinks("plb"), 1);
    assert!(uplinks("esr") >= 3, "16 EVs hash onto the 4 uplinks");
}

#[test]
fn a_packet_lost_on_a_failing_fabric_link_is_resent_after_the_loss_timeout_not_the_retransmission_timeout() {
    // Two parallel uplinks per ToR and spine; one of nic0's ToR's uplinks
    // flaps with packets on it. The responder's gap outlasts `loss_timeout`
    // and its NAK brings them back; the transport's timeout (67 ms for a
    // flow) never fires.
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "ports": [{"down": 2, "up": 2}, {"down": 4}], "parallel_links": 2,
                     "nics": 4, "link_rate": "100Gbps"},
        "switch": {"forwarding": "adaptive"},
        "transport": {"kind": "spx", "loss_timeout": "100us"},
        "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "10MB"}],
        "faults": [{"kind": "link_flap", "at": "200us", "port": "t0.p0.0:2", "duration": "100us"}],
    }));
    assert!(out.summary["drops_by_cause"]["link_down"].as_u64().unwrap() > 0, "{}", out.summary);
    assert_eq!(summary_u64(&out, "timeouts"), 0);
    assert!(summary_u64(&out, "retransmitted_packets") > 0);
    let slowdown = out.summary["slowdown_p50"].as_f64().unwrap();
    assert!(slowdown < 1.2, "slowdown {slowdown}");
}
