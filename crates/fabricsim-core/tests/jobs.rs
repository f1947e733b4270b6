//! Jobs: every collective reaches the bandwidth its nccl-tests formula
//! promises on a non-blocking fabric; GPUs of one host talk over the
//! intra-host link; hierarchical all-reduce keeps most bytes inside hosts;
//! training steps run their phases in dependency order, overlapped where
//! the scenario says.

mod common;

use common::{floats, ints, run, summary_u64, texts};
use fabricsim_core::net::{headers, IpVersion};
use serde_json::{json, Value};

fn line() -> f64 {
    100.0 * headers::payload_efficiency(IpVersion::Ipv6, 4096)
}

fn one_phase(ranks: u32, placement: Value, collective: Value) -> Value {
    json!([{"name": "j", "ranks": ranks, "placement": placement, "phases": [{"name": "c", "collective": collective}]}])
}

#[test]
fn every_collective_reaches_its_bus_bandwidth_without_contention() {
    let matrix: Vec<Vec<String>> = (0..8)
        .map(|i| {
            (0..8).map(|j| if i == j { "0B".into() } else { format!("{}KB", 500 + 100 * ((i + j) % 3)) }).collect()
        })
        .collect();
    for collective in [
        json!({"op": "all_gather", "bytes": "64MB"}),
        json!({"op": "reduce_scatter", "bytes": "64MB"}),
        json!({"op": "broadcast", "bytes": "128MB", "root": 3}),
        json!({"op": "reduce", "bytes": "128MB"}),
        json!({"op": "send_recv", "bytes": "16MB"}),
        json!({"op": "all_to_all", "bytes": "32MB"}),
        json!({"op": "all_to_allv", "matrix": matrix}),
        json!({"op": "all_reduce", "bytes": "64MB", "algorithm": "tree"}),
    ] {
        let out = run(json!({
            "topology": {"kind": "clos", "tiers": 2, "radix": 16, "link_rate": "100Gbps"},
            "jobs": one_phase(8, json!("t0_local"), collective.clone()),
        }));
        let busbw = floats(&out.collectives, "busbw_gbps")[0].unwrap();
        let slowdown = floats(&out.collectives, "slowdown")[0].unwrap();
        // all_to_allv's busbw counts the mean bytes per rank, but its uneven
        // matrix makes the busiest rank the bottleneck. A tree's interior
        // rank moves 2S where a ring rank moves 2(n-1)/n S, and two children
        // sending to one parent are a 2:1 incast that DCQCN slows down (about
        // 20%: with ECN off the same tree runs at 1.05 of its ideal). Its
        // ideal counts no pipeline fill on the busiest rank since that was
        // shown not to bound a tree of several channels: 1.40 (1.33 before).
        let tree = collective["algorithm"] == "tree";
        let floor = if tree {
            0.6
        } else if collective["op"] == "all_to_allv" {
            0.75
        } else {
            0.88
        };
        let ceiling = if tree { 1.5 } else { 1.2 };
        assert!(busbw > floor * line() && busbw < 1.01 * line(), "{collective}: busbw {busbw:.1} Gb/s");
        assert!(
            (0.9..ceiling).contains(&slowdown),
            "{collective}: slowdown {slowdown:.3} against the alpha-beta ideal"
        );
    }
}

/// The alpha-beta ideal bounds every collective from below, whatever its
/// channels: a double binary tree of two channels once ran at 0.74 of it
/// (its pipeline's fill was added to the busiest rank's bytes once per
/// channel), and broadcasts and reduces of several channels below 1 too;
/// and small ones (a 4 KB send_recv ran at 0.89 of an ideal that counted
/// its packet's first serialization twice).
#[test]
fn no_collective_beats_its_ideal_whatever_its_channels() {
    let ops = [("all_reduce", "tree"), ("broadcast", "ring"), ("reduce", "ring"), ("all_reduce", "ring")];
    let small = [("send_recv", "ring"), ("all_gather", "ring"), ("all_to_all", "ring")];
    for (op, algorithm) in ops.into_iter().chain(small) {
        for bytes in ["4096B", "64KB", "512KB", "2MB"] {
            for channels in [1, 2, 4] {
                let collective = json!({"op": op, "algorithm": algorithm, "bytes": bytes, "channels": channels});
                let out = run(json!({
                    "topology": {"kind": "clos", "tiers": 2, "radix": 8, "nics": 16, "link_rate": "100Gbps"},
                    "jobs": one_phase(8, json!("cross_t1"), collective.clone()),
                }));
                let slowdown = floats(&out.collectives, "slowdown")[0].unwrap();
                assert!(slowdown >= 1.0, "{collective}: {slowdown:.3} of its ideal");
            }
        }
    }
}

/// A transfer sprayed over planes or split over QPs sends its packets side
/// by side: each transfer of the ideal's dependent chain is the same
/// message alone as a flow on its connection. With one packet's way at one
/// port plus the rest at every port's rate, a 32 KB slice over four planes
/// was charged three quarters of a packet too many (packet-model rings at
/// 0.97-0.99 of it under MRC and Spectrum-X, flow-model ones at 0.96); and
/// the flow model's two-QP send_recv of 4 KB ran at 0.91 of it. Nor
/// whatever its verb: a READ's data waits for its request (`rdma_op`).
#[test]
fn no_collective_beats_its_ideal_whatever_its_planes_and_qps() {
    let designs = [
        ("mrc", "ecmp", 2, 1),
        ("mrc", "ecmp", 4, 1),
        ("spx", "adaptive", 4, 1),
        ("mrc", "ecmp", 1, 2),
        ("rocev2", "ecmp", 1, 1),
        ("rocev2", "ecmp", 2, 2),
    ];
    for mode in ["packet", "flow"] {
        for (transport, forwarding, planes, qps) in designs {
            // SENDs and READs need RoCE's in-order responder.
            let verbs = if transport == "rocev2" {
                &["write_with_imm", "write", "send", "read"][..]
            } else {
                &["write_with_imm"]
            };
            let ops = ["send_recv", "all_gather", "all_reduce"];
            for (op, rdma_op) in ops.into_iter().flat_map(|op| verbs.iter().map(move |verb| (op, verb))) {
                for bytes in ["4096B", "100000B", "256KB"] {
                    let collective = json!({"op": op, "bytes": bytes, "rdma_op": rdma_op});
                    let out = run(json!({
                        "mode": mode,
                        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "nics": 16, "planes": planes,
                            "link_rate": "100Gbps"},
                        "switch": {"forwarding": forwarding},
                        "transport": {"kind": transport, "qps": qps},
                        "jobs": one_phase(8, json!("cross_t1"), collective.clone()),
                    }));
                    let slowdown = floats(&out.collectives, "slowdown")[0].unwrap();
                    assert!(
                        slowdown >= 1.0,
                        "{mode}: {transport} on {planes} planes, {qps} QPs, {collective}: {slowdown:.4} of its ideal"
                    );
                }
            }
        }
    }
}

fn multi_gpu_hosts() -> Value {
    json!({"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "nics_per_host": 4, "rail_optimized": true})
}

#[test]
fn ranks_on_one_host_use_the_intra_host_link() {
    let out = run(json!({
        "topology": multi_gpu_hosts(),
        "intra_host": {"rate": "3600Gbps", "latency": "1us"},
        "jobs": one_phase(4, json!({"explicit": [0, 1, 2, 3]}), json!({"op": "all_reduce", "bytes": "64MB"})),
    }));
    assert_eq!(summary_u64(&out, "delivered_payload_bytes"), 0, "nothing crosses the network");
    assert_eq!(out.summary["jobs"]["j"]["network_bytes"], 0);
    let busbw = floats(&out.collectives, "busbw_gbps")[0].unwrap();
    assert!((busbw / 3600.0 - 1.0).abs() < 0.02, "busbw {busbw} Gb/s over a 3600 Gb/s link");
}

/// The intra-host link carries a transfer whole, its bytes and latency: a
/// collective of one channel between two GPUs of a host takes just that.
/// The packet model's ideal once charged each such transfer a network
/// packet's headers (the largest transfer's first packet), and these ran
/// at 0.9997 of it.
#[test]
fn a_collective_inside_one_host_takes_its_ideal() {
    for mode in ["packet", "flow"] {
        for op in ["all_gather", "send_recv", "all_reduce"] {
            let collective = json!({"op": op, "bytes": "4KB", "channels": 1});
            let out = run(json!({
                "mode": mode,
                "topology": multi_gpu_hosts(),
                "jobs": one_phase(2, json!({"explicit": [0, 1]}), collective),
            }));
            let slowdown = floats(&out.collectives, "slowdown")[0].unwrap();
            assert!((1.0..1.00001).contains(&slowdown), "{mode}: {op} at {slowdown} of its ideal");
        }
    }
}

#[test]
fn hierarchical_all_reduce_keeps_most_bytes_inside_hosts() {
    let s = 16u64 << 20;
    let scenario = |hierarchical: bool| {
        json!({
            "topology": multi_gpu_hosts(),
            "jobs": one_phase(16, json!("contiguous"),
                json!({"op": "all_reduce", "bytes": "16MiB", "hierarchical": hierarchical})),
        })
    };
    let (hier, flat) = (run(scenario(true)), run(scenario(false)));
    // 4 hosts x 4 GPUs: each GPU all-reduces S/4 with its 3 peers on other hosts.
    let expected = 16 * 2 * 3 * (s / 4) / 4;
    assert_eq!(hier.summary["jobs"]["j"]["network_bytes"].as_u64().unwrap(), expected);
    let (h, f) = (floats(&hier.collectives, "cct_s")[0].unwrap(), floats(&flat.collectives, "cct_s")[0].unwrap());
    assert!(h < 0.5 * f, "hierarchical {h:e} s vs flat ring {f:e} s");
}

#[test]
fn rings_in_rail_order_cross_between_hosts_on_one_rail() {
    // 4 hosts of 4 GPUs, rail-optimized: NIC r of a host is on rail r.
    let pairs = |order: &str| {
        let out = run(json!({
            "topology": multi_gpu_hosts(),
            "telemetry": {"transfers": true},
            "jobs": one_phase(16, json!("contiguous"),
                json!({"op": "all_gather", "bytes": "4MiB", "channels": 4, "ring_order": order})),
        }));
        assert_eq!(out.summary["jobs"]["j"]["completed"], true);
        let (src, dst) = (ints(&out.transfers, "src_rank"), ints(&out.transfers, "dst_rank"));
        let between_hosts: Vec<(u64, u64)> = src.into_iter().zip(dst).filter(|(s, d)| s / 4 != d / 4).collect();
        let cross_rail = between_hosts.iter().filter(|(s, d)| s % 4 != d % 4).count();
        (between_hosts.len(), cross_rail)
    };
    let (ranks_hops, ranks_cross) = pairs("ranks");
    assert_eq!(ranks_cross, ranks_hops, "rank order leaves a host by its last GPU and enters the next by its first");
    // In rail order every host-to-host hop stays on its rail (4 hosts of 4:
    // the closing hop too), and each channel starts on its own rail.
    let (rails_hops, rails_cross) = pairs("rails");
    assert_eq!(rails_cross, 0);
    assert_eq!(rails_hops, ranks_hops, "the same number of hops between hosts");
}

#[test]
fn nvls_all_reduce_reduces_in_the_host_and_sends_each_gpus_result_once() {
    let s = 16u64 << 20;
    let scenario = |collective: Value| {
        json!({
            "topology": multi_gpu_hosts(),
            "intra_host": {"rate": "400Gbps", "latency": "1us"},
            "telemetry": {"transfers": true},
            "jobs": one_phase(16, json!("contiguous"), collective),
        })
    };
    let nvls = run(scenario(json!({"op": "all_reduce", "bytes": "16MiB", "algorithm": "nvls"})));
    let hier = run(scenario(json!({"op": "all_reduce", "bytes": "16MiB", "hierarchical": true})));
    // The network part is the same: each GPU all-reduces S/4 with its 3 peers on other hosts.
    let network = |out: &fabricsim_core::RunOutput| out.summary["jobs"]["j"]["network_bytes"].as_u64().unwrap();
    assert_eq!(network(&nvls), 16 * 2 * 3 * (s / 4) / 4);
    assert_eq!(network(&nvls), network(&hier));
    // Inside a host each GPU sends its 3 peers their shares (3 S/4) and its
    // result once (S/4), where the rings send 2 x 3 S/4.
    let total = |out: &fabricsim_core::RunOutput| ints(&out.transfers, "bytes").iter().sum::<u64>();
    assert_eq!(total(&nvls) - network(&nvls), 16 * (3 * s / 4 + s / 4));
    assert_eq!(total(&hier) - network(&hier), 16 * 2 * 3 * s / 4);
    assert_eq!(texts(&nvls.collectives, "algorithm")[0], "nvls");
    // With NVLink no faster than the network, sending less inside hosts shows.
    let cct = |out: &fabricsim_core::RunOutput| floats(&out.collectives, "cct_s")[0].unwrap();
    assert!(cct(&nvls) < cct(&hier), "nvls {:e} s vs hierarchical rings {:e} s", cct(&nvls), cct(&hier));
}

#[test]
fn training_steps_follow_their_phases_and_overlap_where_asked() {
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"},
        "jobs": [{
            "name": "train", "ranks": 8, "iterations": 3,
            "phases": [
                {"name": "forward", "compute": "200us"},
                {"name": "grads", "after": ["forward"], "collective": {"op": "all_reduce", "bytes": "8MB"}},
                {"name": "backward", "after": ["forward"], "compute": "300us"},
            ],
        }],
    }));
    assert_eq!(texts(&out.steps, "job"), ["train"; 3]);
    let (start, end, step) =
        (floats(&out.steps, "start_s"), floats(&out.steps, "end_s"), floats(&out.steps, "step_time_s"));
    let cct: Vec<f64> = floats(&out.collectives, "cct_s").into_iter().flatten().collect();
    for i in 0..3 {
        // The all-reduce overlaps the backward pass: the step is forward plus
        // the longer of the two, not their sum.
        let expected = 200e-6 + cct[i].max(300e-6);
        assert!((step[i].unwrap() - expected).abs() < 1e-9, "step {i}: {:?} vs {expected}", step[i]);
        if i > 0 {
            assert!(start[i].unwrap() >= end[i - 1].unwrap(), "iterations run one after the other");
        }
    }
    assert_eq!(ints(&out.collectives, "iteration"), [0, 1, 2]);
    let jct = out.summary["jobs"]["train"]["jct_slowdown"].as_f64().unwrap();
    assert!((1.0..1.3).contains(&jct), "JCT slowdown {jct}");
}

#[test]
fn placements_put_ranks_where_they_say() {
    use fabricsim_core::ids::JobId;
    use fabricsim_core::topology::{NodeRole, TopologySpec};
    use fabricsim_core::workload::job::JobSpec;
    use fabricsim_core::workload::program::{expand, Whole};
    let topo: TopologySpec =
        serde_json::from_value(json!({"kind": "clos", "tiers": 3, "radix": 8, "link_rate": "100Gbps"})).unwrap();
    let topo = topo.build().unwrap();
    let tor = |nic: fabricsim_core::topology::NodeId| {
        let adj = topo.adjacency();
        let sw = topo.peer(adj[nic.0 as usize][0], nic);
        match topo.node(sw).role {
            NodeRole::Switch { pod, .. } => (topo.node(sw).index, pod),
            NodeRole::Nic { .. } => unreachable!(),
        }
    };
    let job = |placement: Value| -> JobSpec {
        serde_json::from_value(json!({"name": "j", "ranks": 4, "placement": placement,
            "phases": [{"name": "c", "compute": "1us"}]}))
        .unwrap()
    };
    let placed = |placement: Value| {
        expand(&[job(placement)], &topo, 1, 1, Whole::default()).unwrap().jobs[JobId(0)].nics.clone()
    };
    let local = placed(json!("t0_local"));
    assert!(local.iter().all(|&n| tor(n) == tor(local[0])));
    let cross = placed(json!("cross_t1"));
    for w in cross.windows(2) {
        // Consecutive ranks sit in different pods: their traffic crosses T1.
        assert_ne!(tor(w[0]).1, tor(w[1]).1);
    }
    let contiguous = placed(json!("contiguous"));
    assert_eq!(contiguous.iter().map(|n| topo.name(*n)).collect::<Vec<_>>(), ["nic0", "nic1", "nic2", "nic3"]);
    let (a, b) = (
        placed(json!("random")),
        expand(&[job(json!("random"))], &topo, 1, 2, Whole::default()).unwrap().jobs[JobId(0)].nics.clone(),
    );
    assert_ne!(a, b, "another seed draws another random placement");
    // Two jobs never share a NIC.
    let two = expand(
        &[job(json!("random")), {
            let mut j = job(json!("contiguous"));
            j.name = "k".into();
            j
        }],
        &topo,
        1,
        1,
        Whole::default(),
    )
    .unwrap();
    assert!(two.jobs[JobId(0)].nics.iter().all(|n| !two.jobs[JobId(1)].nics.contains(n)));
}

/// Two ranks on NICs 0 and 4 (different ToRs, one port each), 9 iterations
/// of 20us of compute and a 256KB all-reduce; NIC 0's link down from 150us
/// for `outage`. RoCE gives up after 8 timeouts of 32.8us (exponent 3),
/// about 262us.
fn training(outage: &str, checkpoint: Value) -> Value {
    json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"},
        "transport": {"kind": "rocev2", "timeout_exponent": 3},
        "jobs": [{"name": "train", "ranks": 2, "placement": {"explicit": [0, 4]}, "iterations": 9,
            "checkpoint": checkpoint,
            "phases": [{"name": "fwd", "compute": "20us"},
                       {"name": "sync", "collective": {"op": "all_reduce", "bytes": "256KB"}}]}],
        "faults": [{"kind": "link_flap", "at": "150us", "port": "nic0:0", "duration": outage}],
    })
}

fn steps(out: &fabricsim_core::RunOutput) -> Vec<(f64, f64)> {
    let (start, end) = (common::floats(&out.steps, "start_s"), common::floats(&out.steps, "end_s"));
    start.iter().zip(&end).map(|(s, e)| (s.unwrap(), e.unwrap())).collect()
}

#[test]
fn a_job_halts_on_a_qp_error_and_restarts_from_its_checkpoint() {
    // Repaired before RoCE gives up: the job only stalls; nothing restarts.
    let short = run(training("100us", json!({"every": 3, "restart_delay": "50us"})));
    let job = &short.summary["jobs"]["train"];
    assert_eq!((job["completed"].as_bool(), job["restarts"].as_u64()), (Some(true), Some(0)), "{job}");
    // Down for longer: a QP fails. Without a checkpoint the job is lost.
    let lost = run(training("2ms", Value::Null));
    assert_eq!(lost.summary["jobs"]["train"]["failed"], true);
    assert_eq!(lost.summary["jobs"]["train"]["completed"], false);
    // With one, the job aborts, and 50us later starts again from the last
    // checkpoint on new QPs, failing again until the link is back.
    let out = run(training("2ms", json!({"every": 3, "restart_delay": "50us"})));
    let job = &out.summary["jobs"]["train"];
    assert_eq!(job["completed"], true, "{job}");
    assert!(job["restarts"].as_u64().unwrap() >= 1, "{job}");
    assert!(job["halted_s"].as_f64().unwrap() >= 0.999 * 50e-6 * job["restarts"].as_f64().unwrap(), "{job}");
    let rows = steps(&out);
    let failed_in = rows.iter().position(|&(_, e)| e > 150e-6).unwrap();
    let checkpoint = failed_in / 3 * 3;
    // Iterations before the checkpoint kept their times; from it on they
    // ran again after the link came back.
    assert!(rows[..checkpoint].iter().all(|&(_, e)| e < 150e-6), "{rows:?}");
    assert!(rows[checkpoint..].iter().all(|&(s, _)| s > 2.15e-3), "{rows:?} from {checkpoint}");
    assert!(summary_u64(&out, "qp_errors") >= 1);
}
