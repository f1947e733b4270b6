//! Every run ends, and says why: its work done, its duration, its time
//! limit, a livelock, a stall, or the memory it was allowed; a QP that
//! cannot progress fails on either transport; a scenario that would not
//! fit in memory is refused before it is built; a build can be stopped.

mod common;

use common::summary_u64;
use fabricsim_core::metrics::StopReason;
use fabricsim_core::{RunOutput, Scenario, Setup, Simulation};
use serde_json::{json, Value};

fn topology() -> Value {
    json!({"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps", "link_delay": "1us"})
}

fn scenario(extra: Value) -> Scenario {
    let mut base = json!({
        "topology": topology(),
        "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "1MB"}],
    });
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    Scenario::from_json(&base.to_string()).expect("valid scenario")
}

fn run(extra: Value) -> RunOutput {
    Simulation::new(scenario(extra)).expect("buildable").run(&mut |_| true)
}

#[test]
fn a_run_that_finishes_says_completed() {
    let out = run(json!({}));
    assert_eq!(out.stop, StopReason::Completed);
    assert!(out.complete);
    assert_eq!(out.summary["stop_reason"], "completed");
}

#[test]
fn the_time_limit_ends_a_run_marked_incomplete() {
    let out = run(json!({"limits": {"sim_time": "20us"}}));
    assert_eq!(out.stop, StopReason::TimeLimit);
    assert!(!out.complete);
    assert_eq!(out.summary["stop_reason"], "time_limit");
    assert!(out.summary["sim_time_s"].as_f64().unwrap() <= 20e-6);
    assert_eq!(summary_u64(&out, "flows_completed"), 0);
}

#[test]
fn a_duration_is_a_complete_end() {
    let out = run(json!({"duration": "20us"}));
    assert_eq!(out.stop, StopReason::Duration);
    assert!(out.complete);
}

#[test]
fn too_many_events_at_one_instant_is_a_livelock() {
    // Eight flows start at once: their start events alone pass a guard of 3.
    let out = run(json!({
        "traffic": [{"kind": "all_to_all", "bytes": "4KB"}],
        "limits": {"events_per_instant": 3},
    }));
    assert_eq!(out.stop, StopReason::Livelock);
    assert_eq!(out.summary["stop_reason"], "livelock");
    assert!(!out.complete);
}

#[test]
fn nothing_left_to_happen_with_work_unfinished_is_a_stall() {
    // Every port of a Spectrum-X sender is down before it sends anything:
    // its plane load balancer has no plane to send on, no packet leaves, no
    // timer ever runs, and the flow never finishes.
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps", "link_delay": "1us", "planes": 2},
        "switch": {"forwarding": "adaptive"},
        "transport": {"kind": "spx"},
        "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "1MB", "start": "10us"}],
        "faults": [
            {"kind": "nic_port_down", "at": "0us", "nic": 0, "port": 0},
            {"kind": "nic_port_down", "at": "0us", "nic": 0, "port": 1},
        ],
    }));
    assert_eq!(out.stop, StopReason::Stalled);
    assert!(!out.complete);
}

#[test]
fn a_roce_qp_whose_only_port_is_down_sends_into_it_and_fails() {
    // An RNIC processes the work posted on a QP whose port is down: the
    // packets go nowhere, the retransmission timer runs, the retries run
    // out and the QP fails; the run ends rather than stalls.
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps", "link_delay": "1us"},
        "transport": {"kind": "rocev2", "timeout_exponent": 3},
        "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "1MB", "start": "10us"}],
        "faults": [{"kind": "nic_port_down", "at": "0us", "nic": 0, "port": 0}],
    }));
    assert!(out.complete, "{}", out.summary);
    assert_eq!(out.summary["qp_errors"], 1);
    assert!(out.summary["drops_by_cause"]["link_down"].as_u64().unwrap() > 0);
}

/// A fault that drops everything the sender sends, forever.
fn dead_path() -> Value {
    json!([{"kind": "loss_rate", "at": "0us", "port": "nic0:0", "rate": 1.0}])
}

#[test]
fn a_roce_qp_on_a_dead_path_fails_after_its_retries() {
    // (7 + 1) timeouts of 4.096us x 2^exponent after the first send: a
    // flow's QP takes perftest's exponent 14 unless the scenario sets one.
    for (transport, seconds) in
        [(json!({"kind": "rocev2"}), 0.537), (json!({"kind": "rocev2", "timeout_exponent": 8}), 8.4e-3)]
    {
        let out = run(json!({"transport": transport, "faults": dead_path()}));
        assert_eq!(summary_u64(&out, "qp_errors"), 1);
        assert_eq!(out.stop, StopReason::Completed);
        let t = out.summary["sim_time_s"].as_f64().unwrap();
        assert!((t / seconds - 1.0).abs() < 0.02, "{transport}: {t}");
    }
}

#[test]
fn an_mrc_qp_with_no_progress_fails_after_its_error_timeout() {
    let mrc = |timeout: &str| {
        run(json!({
            "transport": {"kind": "mrc", "error_timeout": timeout},
            "faults": dead_path(),
        }))
    };
    for (timeout, seconds) in [("2ms", 2e-3), ("5ms", 5e-3)] {
        let out = mrc(timeout);
        assert_eq!(summary_u64(&out, "qp_errors"), 1, "{timeout}");
        assert_eq!(out.stop, StopReason::Completed);
        let t = out.summary["sim_time_s"].as_f64().unwrap();
        // It gives up at the first retransmission timer past the timeout.
        assert!(t >= seconds && t < seconds + 0.5e-3, "{timeout}: gave up at {t}");
        assert!(out.summary["timeouts"].as_u64().unwrap() > 1);
    }
}

#[test]
fn an_mrc_qp_that_progresses_never_fails() {
    // Lossy but alive: 20% loss slows the flow without stopping it. (Each
    // loss also costs window, so with one packet in flight two losses in
    // a row can hold progress for 200us: the timeout must be longer.)
    let out = run(json!({
        "transport": {"kind": "mrc", "error_timeout": "2ms"},
        "faults": [{"kind": "loss_rate", "at": "0us", "port": "nic0:0", "rate": 0.2}],
    }));
    assert_eq!(summary_u64(&out, "qp_errors"), 0);
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
}

#[test]
fn a_scenario_larger_than_the_memory_is_refused_before_it_is_built() {
    let big = scenario(json!({
        "topology": {"kind": "clos", "tiers": 3, "radix": 32, "link_rate": "100Gbps"},
        "traffic": [{"kind": "all_to_all", "bytes": "4KB"}],
    }));
    let err = Simulation::check(&big, Some(8 << 30)).unwrap_err();
    // 8,192 NICs: 67 M flows, each with its QP.
    assert_eq!(err.field, "scenario");
    assert!(err.message.contains("67100672 flows"), "{err}");
    assert!(err.message.contains("8.00 GiB this machine has available"), "{err}");
    // The same limit set in the scenario is named as such.
    let small = scenario(json!({"limits": {"memory": "1KiB"}}));
    let err = Simulation::check(&small, None).unwrap_err();
    assert!(err.message.contains("set by limits.memory"), "{err}");
    // And it replaces what the machine has.
    let generous = scenario(json!({"limits": {"memory": "1GiB"}}));
    assert!(Simulation::check(&generous, Some(1)).is_ok());
}

#[test]
fn a_collective_is_counted_before_it_is_expanded() {
    let job = |iterations: u64| {
        scenario(json!({
            "topology": topology(),
            "traffic": [],
            "jobs": [{"name": "j", "ranks": 8, "iterations": iterations, "phases": [
                {"name": "ar", "collective": {"op": "all_reduce", "bytes": "1GiB", "slice": "1KiB"}}
            ]}],
        }))
    };
    assert!(Simulation::check(&job(1), Some(16 << 30)).is_ok());
    let err = Simulation::check(&job(4_294_967_295), Some(16 << 30)).unwrap_err();
    assert!(err.message.contains("collective transfers"), "{err}");
}

#[test]
fn a_collective_counts_the_connections_its_algorithm_opens() {
    // A 1,024-rank ring over MRC opens a QP per rank and channel (2,048 of
    // them), not one per rank pair: it was refused at 44 GiB.
    let ring = |algorithm: &str| {
        scenario(json!({
            "topology": {"kind": "clos", "tiers": 3, "radix": 16, "link_rate": "100Gbps"},
            "transport": {"kind": "mrc"},
            "traffic": [],
            "jobs": [{"name": "j", "ranks": 1024, "phases": [
                {"name": "ar", "collective": {"op": "all_reduce", "algorithm": algorithm, "bytes": "16MB"}}
            ]}],
        }))
    };
    let refusal = |s: &Scenario| Simulation::check(s, Some(30 << 20)).unwrap_err().message;
    assert!(refusal(&ring("ring")).contains("2048 QPs"), "{}", refusal(&ring("ring")));
    // A double binary tree: 2 trees of 1,023 pairs both ways, per channel.
    assert!(refusal(&ring("tree")).contains(&format!("{} QPs", 4 * 1023 * 2)), "{}", refusal(&ring("tree")));
    assert!(Simulation::check(&ring("ring"), Some(4 << 30)).is_ok());
}

#[test]
fn sampling_that_outgrows_the_memory_stops_the_run() {
    // Expected to last about twice its ideal 85us, so that is all the
    // sampling the smallest budget it builds with has room for; the dead
    // path keeps it going until the QP fails at 8.4ms, 840 samples.
    let s = json!({
        "faults": dead_path(),
        "telemetry": {"sample_interval": "10us", "hosts": [2]},
    });
    // Find the footprint's own size by bisection on limits.memory: the
    // smallest budget the build accepts leaves room for the expected rows only.
    let builds = |bytes: u64| {
        let mut with = s.clone();
        with["limits"] = json!({"memory": format!("{bytes}B")});
        Simulation::new(scenario(with)).is_ok()
    };
    let (mut lo, mut hi) = (0u64, 1 << 40);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if builds(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let mut with = s.clone();
    with["limits"] = json!({"memory": format!("{hi}B")});
    let out = Simulation::new(scenario(with)).unwrap().run(&mut |_| true);
    assert_eq!(out.stop, StopReason::MemoryLimit);
    assert!(!out.complete);
    // Reaching the time limit after the sampling stopped still says why
    // the records are short.
    let mut with = s.clone();
    with["limits"] = json!({"memory": format!("{hi}B"), "sim_time": "5ms"});
    let out = Simulation::new(scenario(with)).unwrap().run(&mut |_| true);
    assert_eq!(out.stop, StopReason::MemoryLimit);
    // With room, the same run samples to its end.
    let out = run(s);
    assert_eq!(out.stop, StopReason::Completed);
}

#[test]
fn a_build_can_be_stopped() {
    let many = scenario(json!({"traffic": [{"kind": "uniform_random", "flows": 100000, "bytes": "4KB"}]}));
    let mut asked = 0;
    let mut stop = || {
        asked += 1;
        false
    };
    let mut setup = Setup { available_memory: None, keep_going: Some(&mut stop) };
    assert!(Simulation::new_within(many, &mut setup).unwrap().is_none());
    assert_eq!(asked, 1);
}

/// A QP whose rate limiter holds its next packet back longer than its
/// retransmission timeout has nothing in flight meanwhile: its timer does
/// not run, and it neither times out nor fails. At 100 Kb/s a 4 KB packet
/// leaves every 0.33 s against perftest's 67 ms timeout; before, the timer
/// ran between packets (75 timeouts, none resending anything), and at
/// 1 Kb/s the QP failed after its retries.
#[test]
fn a_qp_held_back_by_its_rate_limiter_does_not_time_out() {
    for transport in ["rocev2", "spx"] {
        let out = run(json!({
            "transport": {"kind": transport},
            "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "64KB", "rate": "100Kbps"}],
        }));
        assert_eq!(out.stop, StopReason::Completed, "{transport}");
        assert_eq!(summary_u64(&out, "flows_completed"), 1, "{transport}");
        assert_eq!(summary_u64(&out, "timeouts"), 0, "{transport}");
        assert_eq!(summary_u64(&out, "qp_errors"), 0, "{transport}");
    }
}

/// A run stopped by its duration has simulated up to it, whenever its last
/// event was: the flow model reported 0 s when no flow finished before the
/// duration, and the packet model its last event's time.
#[test]
fn a_run_stopped_by_its_duration_reports_the_duration_in_both_models() {
    for mode in ["packet", "flow"] {
        for (rate, link) in [("10Gbps", "100Gbps"), ("1Gbps", "1Mbps")] {
            let out = common::run(json!({
                "mode": mode,
                "duration": "50us",
                "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": link, "link_delay": "1us"},
                "traffic": [{"kind": "permutation", "bytes": "64KB", "rate": rate}],
            }));
            assert_eq!(out.summary["stop_reason"], "duration", "{mode} {link}");
            assert_eq!(out.summary["sim_time_s"].as_f64(), Some(50e-6), "{mode} {link}: {}", out.summary);
            assert_eq!(summary_u64(&out, "flows_completed"), 0);
        }
    }
}
