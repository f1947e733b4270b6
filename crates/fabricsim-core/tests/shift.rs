//! SHIFT (shift-rdma-failover.txt s4.2): a QP that fails moves its
//! outstanding work to a backup QP between other NICs of the same hosts,
//! and moves back once the default path works again, in order.

mod common;

use common::{floats, ints, run, summary_u64};
use serde_json::{json, Value};

/// Hosts of 2 NICs (NIC 0's backup is NIC 1, NIC 12's is NIC 13); RoCE
/// gives up after 8 timeouts of 32.8us; SHIFT falls back in 50us and
/// probes every 100us.
fn two_nic_hosts(shift: bool) -> Value {
    json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "nics_per_host": 2},
        "nic": if shift {
            json!({"shift": {"fallback_time": "50us", "probe_interval": "100us", "setup_time": "0us"}})
        } else {
            json!({})
        },
        "transport": {"kind": "rocev2", "timeout_exponent": 3},
    })
}

#[test]
fn a_failed_qp_goes_on_over_the_backup_nics() {
    let flow = |shift: bool| {
        let mut s = two_nic_hosts(shift);
        s["traffic"] = json!([{"kind": "flow", "src": 0, "dst": 12, "bytes": "8MB"}]);
        s["faults"] = json!([{"kind": "nic_port_down", "at": "20us", "nic": 0, "port": 0}]);
        run(s)
    };
    let plain = flow(false);
    assert_eq!(summary_u64(&plain, "flows_completed"), 0, "{}", plain.summary);
    let out = flow(true);
    assert_eq!(summary_u64(&out, "flows_completed"), 1, "{}", out.summary);
    let shift = &out.summary["shift"];
    assert_eq!((shift["fallbacks"].as_u64(), shift["reposted_messages"].as_u64()), (Some(1), Some(1)), "{shift}");
    // Part of the write had reached the receiver before the link failed: the
    // repost writes it again (the LL128 hazard of s4.3), counted.
    assert_eq!(shift["rewritten_messages"].as_u64(), Some(1), "{shift}");
    let rewritten = shift["rewritten_bytes"].as_u64().unwrap();
    assert!(rewritten > 0 && rewritten < 8_000_000, "{rewritten}");
    // The write is reposted whole on the backup, once: NIC 1 sends it.
    let (node, sent) = (common::texts(&out.ports, "node"), ints(&out.ports, "tx_bytes"));
    let nic1: u64 = (0..node.len()).filter(|&i| node[i] == "nic1").map(|i| sent[i]).sum();
    assert!((8_000_000..8_600_000).contains(&nic1), "{nic1}");
    // It finishes after the failure is noticed (262us of retries) and the
    // fallback (50us).
    let end = floats(&out.flows, "end_s")[0].unwrap();
    assert!(end > 20e-6 + 262e-6 + 50e-6, "{end}");
}

/// Rank 0 on NIC 0 sends rank 1 on NIC 12 a 256KB message every 40us
/// (30 iterations); NIC 0's link is down from 100us for `outage`.
fn training(outage: &str) -> Value {
    let mut s = two_nic_hosts(true);
    s["jobs"] = json!([{"name": "j", "ranks": 2, "placement": {"explicit": [0, 12]}, "iterations": 30,
        "phases": [{"name": "c", "compute": "40us"},
                   {"name": "p", "collective": {"op": "send_recv", "bytes": "256KB", "channels": 1}}]}]);
    s["faults"] = json!([{"kind": "link_flap", "at": "100us", "port": "nic0:0", "duration": outage}]);
    s["telemetry"] = json!({"sample_interval": "20us", "ports": ["nic0:0", "nic1:0"], "transfers": true});
    s
}

#[test]
fn traffic_returns_to_the_default_nic_when_a_probe_gets_through_and_keeps_its_order() {
    let out = run(training("300us"));
    assert_eq!(out.summary["jobs"]["j"]["completed"], true, "{}", out.summary);
    let shift = &out.summary["shift"];
    assert!(shift["fallbacks"].as_u64() >= Some(1), "{shift}");
    assert!(shift["recoveries"].as_u64() >= Some(1), "{shift}");
    assert!(shift["probes"].as_u64() >= Some(1), "{shift}");
    // After the link is back and a probe got through, NIC 0 sends again and
    // NIC 1 falls silent.
    let default = common::tx_rate(&out, "nic0:0");
    let backup = common::tx_rate(&out, "nic1:0");
    let last = default.last().unwrap().0;
    let late = |series: &[(f64, f64)]| series.iter().filter(|(t, _)| *t > last - 200e-6).map(|(_, r)| r).sum::<f64>();
    assert!(late(&default) > 0.0 && late(&backup) == 0.0, "{default:?} / {backup:?}");
    assert!(backup.iter().any(|&(_, r)| r > 0.0), "the backup carried traffic meanwhile");
    // Rank 0's messages complete in the order they were posted.
    let (src, posted, done) =
        (ints(&out.transfers, "src_rank"), floats(&out.transfers, "posted_s"), floats(&out.transfers, "end_s"));
    let mut mine: Vec<(f64, f64)> =
        (0..src.len()).filter(|&i| src[i] == 0).map(|i| (posted[i].unwrap(), done[i].unwrap())).collect();
    mine.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(mine.windows(2).all(|w| w[0].1 <= w[1].1), "{mine:?}");
}

#[test]
fn a_probe_that_fails_leaves_traffic_on_the_backup() {
    // Down for good: the probes keep failing; the job finishes on the backup.
    let out = run(training("1s"));
    assert_eq!(out.summary["jobs"]["j"]["completed"], true, "{}", out.summary);
    let shift = &out.summary["shift"];
    assert_eq!(shift["recoveries"].as_u64(), Some(0), "{shift}");
    assert!(shift["failed_probes"].as_u64() >= Some(1) || shift["probes"].as_u64() >= Some(1), "{shift}");
}

#[test]
fn with_shift_a_job_goes_on_where_without_it_it_restarts_from_its_checkpoint() {
    let job = |shift: bool| {
        let mut s = training("2ms");
        if !shift {
            s["nic"] = json!({});
        }
        s["jobs"][0]["checkpoint"] = json!({"every": 5, "restart_delay": "100us"});
        run(s)
    };
    let plain = job(false);
    assert!(plain.summary["jobs"]["j"]["restarts"].as_u64() >= Some(1), "{}", plain.summary);
    let shifted = job(true);
    assert_eq!(shifted.summary["jobs"]["j"]["restarts"], 0, "{}", shifted.summary);
    assert_eq!(shifted.summary["jobs"]["j"]["completed"], true);
    let jct = |out: &fabricsim_core::RunOutput| out.summary["jobs"]["j"]["jct_s"].as_f64().unwrap();
    assert!(jct(&shifted) < jct(&plain), "{} against {}", jct(&shifted), jct(&plain));
}

#[test]
fn a_fallback_cannot_end_before_the_backup_qps_are_set_up() {
    // The QP fails at about 282us; with the backup set up only at 2ms, the
    // write reaches the backup then, not 50us after the error.
    let end = |setup: &str| {
        let mut s = two_nic_hosts(true);
        s["nic"]["shift"]["setup_time"] = json!(setup);
        s["traffic"] = json!([{"kind": "flow", "src": 0, "dst": 12, "bytes": "1MB"}]);
        s["faults"] = json!([{"kind": "nic_port_down", "at": "20us", "nic": 0, "port": 0}]);
        let out = run(s);
        assert_eq!(summary_u64(&out, "flows_completed"), 1, "{}", out.summary);
        floats(&out.flows, "end_s")[0].unwrap()
    };
    let (ready, late) = (end("0us"), end("2ms"));
    assert!(ready < 1e-3, "{ready}");
    assert!(late > 2e-3 && late < 2.2e-3, "{late}");
}

#[test]
fn messages_that_arrived_but_whose_acks_were_lost_are_reposted_and_counted() {
    // Rank 1's NIC stops sending at 30us (its uplink's egress fails): rank
    // 0's writes keep arriving but their ACKs do not, so the QP fails with
    // messages complete at the receiver yet unacknowledged. SHIFT reposts
    // them with the lost ones (s4.3): they are written a second time.
    let mut s = two_nic_hosts(true);
    s["jobs"] = json!([{"name": "j", "ranks": 2, "placement": {"explicit": [0, 12]},
        "phases": [{"name": "p", "collective": {"op": "send_recv", "bytes": "2MB", "channels": 1,
                                                 "slice": "64KB", "credits": 8}}]}]);
    s["faults"] = json!([{"kind": "link_down", "at": "30us", "port": "nic12:0", "direction": "egress"}]);
    s["telemetry"] = json!({"transfers": true});
    let out = run(s);
    assert_eq!(out.summary["jobs"]["j"]["completed"], true, "{}", out.summary);
    let shift = &out.summary["shift"];
    assert!(shift["fallbacks"].as_u64() >= Some(1), "{shift}");
    let rewritten = shift["rewritten_messages"].as_u64().unwrap();
    assert!(rewritten >= 1, "{shift}");
    // Whole 64KB slices were written again, not just a head's part.
    assert!(shift["rewritten_bytes"].as_u64().unwrap() >= 64 * 1024, "{shift}");
    // Every transfer completed once: the duplicates complete nothing.
    let ends = floats(&out.transfers, "end_s");
    assert!(ends.iter().all(Option::is_some));
}

#[test]
fn a_job_restarted_from_its_checkpoint_keeps_its_backups() {
    // NIC 0 fails for good at 100us: SHIFT moves the job to NIC 1. NIC 1
    // then fails for 600us: a real failure, so the job aborts and restarts
    // from its checkpoint on new QPs, which NIC 0 cannot carry; they fall
    // back to the backup too, and the job finishes on it once NIC 1 is back.
    let mut s = training("1s");
    s["faults"] = json!([
        {"kind": "nic_port_down", "at": "100us", "nic": 0, "port": 0},
        {"kind": "link_flap", "at": "700us", "port": "nic1:0", "duration": "600us"},
    ]);
    s["jobs"][0]["checkpoint"] = json!({"every": 5, "restart_delay": "100us"});
    let out = run(s);
    let job = &out.summary["jobs"]["j"];
    assert_eq!(job["completed"], true, "{}", out.summary);
    assert!(job["restarts"].as_u64() >= Some(1), "{job}");
    // Fallbacks before the restart and after it, on the new QPs.
    assert!(out.summary["shift"]["fallbacks"].as_u64() >= Some(2), "{}", out.summary["shift"]);
}

#[test]
fn a_job_told_of_a_fallback_stops_at_its_next_checkpoint_and_restarts_on_the_default_nic() {
    // NIC 0 fails at 100us and is back at 600us. Told of the fallback, the
    // job runs on over the backup until its next checkpoint (every 5
    // iterations), then stops and restarts from it 100us later, on new QPs
    // of the default NICs: nothing is run twice.
    let job = |stop: bool| {
        let mut s = training("500us");
        s["faults"] = json!([
            {"kind": "nic_port_down", "at": "100us", "nic": 0, "port": 0},
            {"kind": "nic_port_up", "at": "600us", "nic": 0, "port": 0},
        ]);
        s["nic"]["shift"]["probe_interval"] = json!("10ms");
        s["jobs"][0]["checkpoint"] = json!({"every": 5, "restart_delay": "100us", "stop_after_fallback": stop});
        run(s)
    };
    let on = job(false);
    assert_eq!(on.summary["jobs"]["j"]["restarts"], 0, "{}", on.summary);
    let stopped = job(true);
    let summary = &stopped.summary["jobs"]["j"];
    assert_eq!(summary["completed"], true, "{}", stopped.summary);
    assert_eq!(summary["restarts"], 1, "{summary}");
    assert!((summary["halted_s"].as_f64().unwrap() - 100e-6).abs() < 1e-9, "{summary}");
    // After the restart rank 0 sends from NIC 0 again, not from the backup.
    let (default, backup) = (common::tx_rate(&stopped, "nic0:0"), common::tx_rate(&stopped, "nic1:0"));
    let last = default.last().unwrap().0;
    let late = |series: &[(f64, f64)]| series.iter().filter(|(t, _)| *t > last - 200e-6).map(|(_, r)| r).sum::<f64>();
    assert!(late(&default) > 0.0 && late(&backup) == 0.0, "{default:?} / {backup:?}");
    // It stopped right after a checkpoint, so no iteration ran twice: the
    // job took the restart's 100us longer than running on, and not a step
    // (66us) more.
    let jct = |out: &fabricsim_core::RunOutput| out.summary["jobs"]["j"]["jct_s"].as_f64().unwrap();
    let extra = jct(&stopped) - jct(&on);
    assert!((extra - 100e-6).abs() < 10e-6, "{extra}");
}

#[test]
fn sends_return_to_the_default_qp_with_their_recvs() {
    // The training job SENDs its transfers and the receiver keeps only 4
    // RECVs posted. NIC 0's link is down 300us: SHIFT moves the SENDs and
    // the RECVs to the backup, and back once a probe gets through; a RECV
    // left behind on either QP would leave the other refusing SENDs for
    // ever (RNR NAKs without end).
    let mut s = training("300us");
    s["transport"]["recv_depth"] = json!(4);
    s["jobs"][0]["phases"][1]["collective"]["rdma_op"] = json!("send");
    let out = run(s);
    assert_eq!(out.summary["jobs"]["j"]["completed"], true, "{}", out.summary);
    assert!(out.summary["shift"]["recoveries"].as_u64() >= Some(1), "{}", out.summary["shift"]);
    assert_eq!(summary_u64(&out, "rnr_naks"), 0, "{}", out.summary);
}

#[test]
fn a_fallback_notifies_the_receiver_on_the_backup_before_reposting() {
    // The host's steps take 50us; then a WRITE_WITH_IMM on the backup QP
    // tells the receiver, and the reposts wait for its completion: the
    // measured fallback is the 50us and the notification's trip (a few us
    // over the 2-tier fabric of 1us links).
    let mut s = two_nic_hosts(true);
    s["traffic"] = json!([{"kind": "flow", "src": 0, "dst": 12, "bytes": "1MB"}]);
    s["faults"] = json!([{"kind": "nic_port_down", "at": "20us", "nic": 0, "port": 0}]);
    let out = run(s.clone());
    assert_eq!(summary_u64(&out, "flows_completed"), 1, "{}", out.summary);
    let measured = out.summary["shift"]["fallback_time_mean_s"].as_f64().unwrap();
    assert!(measured > 53e-6 && measured < 60e-6, "{measured}");
    // The notification is a write with immediate: its completion is counted.
    assert_eq!(summary_u64(&out, "imm_completions"), 1);
    // With the backup NIC dead too, the notification never completes and
    // the write waiting for it fails with the backup QP.
    s["faults"] = json!([
        {"kind": "nic_port_down", "at": "20us", "nic": 0, "port": 0},
        {"kind": "nic_port_down", "at": "20us", "nic": 1, "port": 0},
    ]);
    let out = run(s);
    assert_eq!(summary_u64(&out, "flows_completed"), 0, "{}", out.summary);
    assert_eq!(out.summary["shift"]["fallback_time_mean_s"], serde_json::Value::Null);
    // It is given up, not left waiting: the run ends once the backup QP
    // has failed (the default's 262us of retries, 50us, the backup's).
    assert_eq!(floats(&out.flows, "end_s")[0], None);
    assert!(common::summary_f64(&out, "sim_time_s") < 1e-3, "{}", out.summary);
}
