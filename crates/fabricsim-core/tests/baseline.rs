//! Whole-simulation checks of the RoCEv2/ECMP baseline against results that
//! theory fixes: one flow's completion time in closed form, PFC's
//! losslessness and fairness under incast, payload conservation with
//! trimming, ECMP collision statistics, determinism, and recovery from a
//! link failure.

mod common;

use common::{floats, ints, run, summary_f64, summary_u64, texts};
use fabricsim_core::net::{headers, IpVersion};
use fabricsim_core::units::{Rate, Time};
use serde_json::json;

fn two_tier(radix: u32) -> serde_json::Value {
    json!({"kind": "clos", "tiers": 2, "radix": radix, "link_rate": "100Gbps", "link_delay": "1us"})
}

/// Closed form of store-and-forward on equal links: every packet serialized
/// once, the largest (the first, with its RETH) once more at every other
/// hop, and each hop's propagation and switch latency.
#[test]
fn one_flow_on_an_idle_path_matches_the_closed_form() {
    for bytes in [1u64 << 20, 4097, 100_000] {
        let mut topo = two_tier(4);
        topo["switch_latency"] = json!("300ns");
        let out = run(json!({
            "topology": topo,
            // nic0 is under ToR 0, nic2 under ToR 1: NIC, T0, T1, T0, NIC.
            "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": format!("{bytes}B")}],
        }));
        let mtu = 4096u64;
        let packets = bytes.div_ceil(mtu);
        let rate = Rate::from_gbps(100);
        let serialization = |i: u64| {
            let payload = if i + 1 == packets { bytes - (packets - 1) * mtu } else { mtu };
            let reth = if i == 0 { headers::RETH } else { 0 };
            rate.tx_time(headers::data_wire(IpVersion::Ipv6, payload as u32, reth) as u64)
        };
        let hops = 4;
        let expected = (0..packets).map(serialization).fold(Time::ZERO, |a, b| a + b)
            + Time(serialization(0).0 * (hops - 1))
            + Time(Time::from_us(1).0 * hops)
            + Time(Time::from_ns(300).0 * (hops - 1));
        // Both read back from seconds as f64: a picosecond either way.
        let fct = Time::from_secs_f64(floats(&out.flows, "fct_s")[0].unwrap());
        assert!(fct.0.abs_diff(expected.0) <= 1, "{bytes} B: fct {fct} vs closed form {expected}");
        // The simulator's own ideal FCT is the same closed form.
        let ideal = Time::from_secs_f64(floats(&out.flows, "ideal_fct_s")[0].unwrap());
        assert!(ideal.0.abs_diff(expected.0) <= 1, "{bytes} B: ideal {ideal} vs {expected}");
    }
}

/// A flow alone on an idle fabric is its own ideal under every design that
/// keeps it on one path, and no design's spreading (nor pacing) beats the
/// ideal: the best spreading is each hop's ports in turn, with packets
/// queueing only where the paths meet.
#[test]
fn a_lone_flow_meets_its_ideal_and_nothing_beats_it() {
    let one_path = [
        json!({}),
        json!({"switch": {"forwarding": "letflow"}}),
        json!({"switch": {"forwarding": "conweave"}}),
        json!({"nic": {"ip": "ipv4"}}),
    ];
    let spread = [
        json!({"switch": {"forwarding": "srv6"}, "transport": {"kind": "mrc"}}),
        json!({"switch": {"forwarding": "adaptive"}, "transport": {"kind": "spx"}}),
        json!({"topology": {"planes": 2}, "switch": {"forwarding": "adaptive"}, "transport": {"kind": "spx"}}),
        json!({"switch": {"forwarding": "drill"}, "transport": {"kind": "rocev2", "direct_placement": true}}),
        json!({"switch": {"forwarding": "ar_tomahawk"}, "transport": {"kind": "rocev2", "direct_placement": true}}),
        json!({"switch": {"forwarding": "path_id"}, "nic": {"path_selection": "orchestrated"},
               "transport": {"kind": "rocev2", "direct_placement": true, "ooo_window": true}}),
        json!({"traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "BYTES", "qps": 4}]}),
        // Paced below line rate, by the NIC's rate limiter.
        json!({"traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "BYTES", "rate": "10Gbps"}]}),
        json!({"traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "BYTES", "rate": "99Gbps"}]}),
    ];
    for (designs, exact) in [(&one_path[..], true), (&spread[..], false)] {
        for design in designs {
            for bytes in ["1000B", "4097B", "9000B", "64KB", "1MB"] {
                let mut scenario = json!({
                    "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps", "link_delay": "1us"},
                    "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": bytes}],
                });
                for (key, value) in design.as_object().unwrap() {
                    match (scenario.get_mut(key), value) {
                        (Some(serde_json::Value::Object(base)), serde_json::Value::Object(more)) => {
                            base.extend(more.clone())
                        }
                        _ => scenario[key] = value.clone(),
                    }
                }
                scenario["traffic"][0]["bytes"] = json!(bytes);
                let slowdown = floats(&run(scenario).flows, "slowdown")[0].unwrap();
                if exact {
                    assert!((slowdown - 1.0).abs() < 1e-6, "{design} {bytes}: slowdown {slowdown}");
                } else {
                    assert!((1.0 - 1e-6..1.05).contains(&slowdown), "{design} {bytes}: slowdown {slowdown}");
                }
            }
        }
    }
}

/// Two NICs under one switch, 100G links of 1us, and one flow from `a` to
/// `b` of `op` and `bytes` (`b` reads when `op` is a read).
fn across_one_switch(mode: &str, op: &str, bytes: &str) -> serde_json::Value {
    json!({
        "mode": mode,
        "topology": {"kind": "explicit",
            "nodes": [{"name": "sw", "kind": "switch"}, {"name": "a", "kind": "nic"}, {"name": "b", "kind": "nic"}],
            "links": [{"a": "a", "b": "sw", "rate": "100Gbps", "delay": "1us"},
                      {"a": "b", "b": "sw", "rate": "100Gbps", "delay": "1us"}]},
        "traffic": [{"kind": "flow", "src": "a", "dst": "b", "bytes": bytes, "op": op}],
    })
}

/// The ideal of a READ and of a write with immediate, by hand, over two
/// hops (IPv6, MTU 4096): a data frame is Eth+FCS 18, IPv6 40, UDP 8, BTH
/// 12, its headers, its payload padded to 4 and ICRC 4, plus 20 of
/// preamble and gap on the wire, 80 ps a byte at 100G. Store and forward on
/// equal links: each packet serialized once, the largest (the first) once
/// more, and 1us a link. A READ response carries an AETH (4) on its first,
/// last and only packets and no RETH, and leaves only once the reader's
/// request (a RETH of 16 and no payload: 118 B) has crossed both hops; a
/// write with immediate carries a RETH (16) on its first and ImmDt (4) on
/// its last. The flow model sends a message of several packets as a fluid
/// at the rate of full ones (4096 payload bytes in 4198 on the wire), then
/// its largest packet crosses the second hop. The READ's ideal counted a
/// RETH for the AETHs and no request (2.0 of it for one packet), the
/// write's no ImmDt.
#[test]
fn a_read_and_a_write_with_immediate_ideal_counts_their_headers() {
    let (byte, link) = (80e-12, 1e-6);
    let frame = |headers: f64, payload: f64| (18.0 + 40.0 + 8.0 + 12.0 + headers + payload + 4.0 + 20.0) * byte;
    let request = 2.0 * (link + frame(16.0, 0.0));
    let fluid = 10_000.0 * 4198.0 / 4096.0 * byte;
    // (op, bytes, the packet model's ideal, the flow model's).
    let cases = [
        // One 1 B packet (padded to 4): AETH, twice serialized.
        ("read", "1B", request + 2.0 * link + 2.0 * frame(4.0, 4.0), request + 2.0 * link + 2.0 * frame(4.0, 4.0)),
        // 4096 + 4096 + 1808: AETH on the first and last, the first twice.
        (
            "read",
            "10000B",
            request + 2.0 * link + 2.0 * frame(4.0, 4096.0) + frame(0.0, 4096.0) + frame(4.0, 1808.0),
            request + 2.0 * link + fluid + frame(4.0, 4096.0),
        ),
        ("write_with_imm", "1B", 2.0 * link + 2.0 * frame(16.0 + 4.0, 4.0), 2.0 * link + 2.0 * frame(16.0 + 4.0, 4.0)),
        (
            "write_with_imm",
            "10000B",
            2.0 * link + 2.0 * frame(16.0, 4096.0) + frame(0.0, 4096.0) + frame(4.0, 1808.0),
            2.0 * link + fluid + frame(16.0, 4096.0),
        ),
    ];
    for (op, bytes, packet_model, flow_model) in cases {
        for (mode, expected) in [("packet", packet_model), ("flow", flow_model)] {
            let out = run(across_one_switch(mode, op, bytes));
            let ideal = floats(&out.flows, "ideal_fct_s")[0].unwrap();
            assert!((ideal - expected).abs() < 1e-12, "{mode}: {op} {bytes}: ideal {ideal:e}, by hand {expected:e}");
            // The run takes just that: its packets carry what the ideal counts.
            let fct = floats(&out.flows, "fct_s")[0].unwrap();
            assert!((fct - expected).abs() < 1e-12, "{mode}: {op} {bytes}: fct {fct:e}, by hand {expected:e}");
        }
    }
}

/// No flow of any verb and size beats its ideal, in either model, under
/// RoCE (on one path: it meets it), MRC or Spectrum-X (spread over paths,
/// within 5% of it): each packet carries the headers its ideal counts, and
/// a READ's data waits for its request in both.
#[test]
fn no_flow_of_any_verb_beats_its_ideal() {
    let every_verb = ["write", "write_with_imm", "send", "read"];
    // SENDs and READs need RoCE's in-order responder.
    let writes = ["write", "write_with_imm"];
    let designs = [("rocev2", "ecmp", &every_verb[..]), ("mrc", "srv6", &writes[..]), ("spx", "adaptive", &writes[..])];
    for mode in ["packet", "flow"] {
        for (transport, forwarding, verbs) in designs {
            for op in verbs {
                // 1 B, an MTU less one, an MTU, a few, 1 MB.
                for bytes in ["1B", "4095B", "4096B", "12289B", "1MB"] {
                    let out = run(json!({
                        "mode": mode,
                        "topology": two_tier(4),
                        "switch": {"forwarding": forwarding},
                        "transport": {"kind": transport},
                        "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": bytes, "op": op}],
                    }));
                    let slowdown = floats(&out.flows, "slowdown")[0].unwrap();
                    let ceiling = if transport == "rocev2" { 1.0 + 1e-6 } else { 1.05 };
                    assert!(
                        (1.0..ceiling).contains(&slowdown),
                        "{mode}: {transport} {op} of {bytes} at {slowdown} of its ideal"
                    );
                }
            }
        }
    }
}

fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    s * s / (xs.len() as f64 * s2)
}

fn incast(pfc: bool) -> fabricsim_core::RunOutput {
    run(json!({
        "topology": two_tier(8),
        // A buffer that 8 x 2MB cannot fit: without PFC the incast drops.
        "switch": {"buffer": "2MB", "pfc": {"enabled": pfc}},
        "traffic": [{"kind": "incast", "receiver": 0, "senders": [1, 2, 3, 4, 5, 8, 12, 20], "bytes": "2MB"}],
        "telemetry": {"sample_interval": "20us", "hosts": [0]},
    }))
}

#[test]
fn incast_with_pfc_and_dcqcn_is_lossless_fast_and_fair() {
    let out = incast(true);
    assert_eq!(summary_u64(&out, "drops"), 0, "{}", out.summary);
    assert_eq!(summary_u64(&out, "flows_completed"), 8);
    assert!(summary_u64(&out, "pauses_sent") > 0, "the incast must trigger PFC");
    let lossy = incast(false);
    assert!(summary_u64(&lossy, "drops") > 0, "without PFC the same incast must overflow the buffer");
    // Receiver goodput while the incast lasts (until the first sender
    // finishes), from the sampled receive rate, against the payload rate of
    // the receiver's link.
    let first_end = floats(&out.flows, "end_s").into_iter().flatten().fold(f64::MAX, f64::min);
    let times = floats(&out.timeseries, "time_s");
    let values = floats(&out.timeseries, "value");
    let metrics = texts(&out.timeseries, "metric");
    let window: Vec<f64> = (0..times.len())
        .filter(|&i| metrics[i] == "rx_goodput_bps" && times[i].unwrap() <= first_end)
        .map(|i| values[i].unwrap())
        .skip(1)
        .collect();
    let goodput = window.iter().sum::<f64>() / window.len() as f64;
    let line = 100e9 * headers::payload_efficiency(IpVersion::Ipv6, 4096);
    assert!(goodput >= 0.95 * line, "receiver goodput {:.1} Gb/s of {:.1}", goodput / 1e9, line / 1e9);
    // Fairness: every sender's average throughput over the run.
    let fct = floats(&out.flows, "fct_s");
    let rates: Vec<f64> = fct.iter().map(|t| 2e6 * 8.0 / t.unwrap()).collect();
    assert!(jain(&rates) >= 0.9, "Jain index {} of {rates:?}", jain(&rates));
}

#[test]
fn trimming_on_a_lossy_fabric_accounts_for_every_payload_byte() {
    let out = run(json!({
        "topology": two_tier(8),
        "switch": {"pfc": {"enabled": false}, "trimming": {"enabled": true}, "buffer": "400KB"},
        "transport": {"kind": "rocev2", "dcqcn": {"enabled": false}},
        "traffic": [{"kind": "incast", "receiver": 0, "count": 12, "bytes": "512KB"}],
    }));
    let trims = summary_u64(&out, "trims");
    assert!(trims > 0, "the incast must overflow the buffer: {}", out.summary);
    // Every trimmed header reached the receiver and was counted there.
    assert_eq!(summary_u64(&out, "trimmed_received"), trims);
    let port_trims: u64 = ints(&out.ports, "trims").iter().sum();
    assert_eq!(port_trims, trims);
    // Conservation: every payload byte sent was delivered once, discarded by
    // go-back-N, dropped (counted by cause), trimmed, or is still in flight.
    let sent = summary_u64(&out, "sent_payload_bytes");
    let accounted = summary_u64(&out, "delivered_payload_bytes")
        + summary_u64(&out, "discarded_payload_bytes")
        + summary_u64(&out, "dropped_payload_bytes")
        + summary_u64(&out, "trimmed_payload_bytes")
        + summary_u64(&out, "in_flight_payload_bytes");
    assert_eq!(sent, accounted, "{}", out.summary);
    assert_eq!(summary_u64(&out, "delivered_payload_bytes"), 12 * 512_000);
    assert_eq!(summary_u64(&out, "flows_completed"), 12);
}

/// Flows per ToR uplink, read off the uplinks' transmitted bytes.
fn uplink_flow_counts(out: &fabricsim_core::RunOutput, flow_wire: f64) -> Vec<Vec<u64>> {
    let nodes = texts(&out.ports, "node");
    let peers = texts(&out.ports, "peer");
    let tx = ints(&out.ports, "tx_bytes");
    let mut per_tor: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for i in 0..nodes.len() {
        if nodes[i].starts_with("t0.") && peers[i].starts_with("t1.") {
            per_tor.entry(nodes[i].clone()).or_default().push((tx[i] as f64 / flow_wire).round() as u64);
        }
    }
    per_tor.into_values().collect()
}

/// E[max bin load] for `balls` thrown uniformly into `bins`, exactly.
fn expected_max_load(balls: u32, bins: u32) -> f64 {
    let total = (bins as u64).pow(balls);
    let mut sum = 0u64;
    for code in 0..total {
        let mut load = vec![0u32; bins as usize];
        let mut c = code;
        for _ in 0..balls {
            load[(c % bins as u64) as usize] += 1;
            c /= bins as u64;
        }
        sum += *load.iter().max().unwrap() as u64;
    }
    sum as f64 / total as f64
}

#[test]
fn ecmp_collisions_follow_balls_into_bins() {
    let bytes = 256 * 1024;
    let flow_wire = (bytes as f64 / 4096.0) * 4198.0;
    let (mut observed, mut expected, mut samples) = (0.0, 0.0, 0);
    let mut slowest_share: f64 = 1.0;
    for seed in 1..=12 {
        let out = run(json!({
            "seed": seed,
            "topology": two_tier(8),
            "traffic": [{"kind": "permutation", "bytes": "256KiB"}],
        }));
        for loads in uplink_flow_counts(&out, flow_wire) {
            let balls: u64 = loads.iter().sum();
            if balls == 0 {
                continue;
            }
            observed += *loads.iter().max().unwrap() as f64;
            expected += expected_max_load(balls as u32, loads.len() as u32);
            samples += 1;
        }
        let fct = floats(&out.flows, "fct_s");
        let ideal = floats(&out.flows, "ideal_fct_s");
        for (f, i) in fct.iter().zip(&ideal) {
            slowest_share = slowest_share.min(i.unwrap() / f.unwrap());
        }
    }
    let (observed, expected) = (observed / samples as f64, expected / samples as f64);
    assert!((observed - expected).abs() <= 0.1 * expected, "mean max uplink load {observed:.3} vs {expected:.3}");
    // Some flows shared an uplink and ran at half (or a third) of line rate.
    assert!(slowest_share < 0.6, "no collision slowed a flow: best share {slowest_share}");
}

fn throughput_spread(qps: u32) -> f64 {
    let mut rates = Vec::new();
    for seed in 1..=4 {
        let out = run(json!({
            "seed": seed,
            "topology": two_tier(8),
            "transport": {"kind": "rocev2", "qps": qps},
            "traffic": [{"kind": "permutation", "bytes": "1MB"}],
        }));
        rates.extend(floats(&out.flows, "fct_s").iter().map(|t| 1.0 / t.unwrap()));
    }
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    let var = rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / rates.len() as f64;
    var.sqrt() / mean
}

#[test]
fn more_qps_per_flow_narrow_the_throughput_spread() {
    let (one, sixteen) = (throughput_spread(1), throughput_spread(16));
    assert!(sixteen < 0.7 * one, "coefficient of variation: 1 QP {one:.3}, 16 QPs {sixteen:.3}");
}

#[test]
fn same_seed_is_identical_and_another_seed_moves_ecmp() {
    let scenario = |seed: u64| {
        json!({
            "seed": seed,
            "topology": two_tier(8),
            "traffic": [{"kind": "permutation", "bytes": "128KiB"}],
            "telemetry": {"sample_interval": "5us", "ports": ["t0.p0.0:4"], "hosts": [0]},
        })
    };
    let a = run(scenario(7)).to_json().to_string();
    let b = run(scenario(7)).to_json().to_string();
    assert_eq!(a, b);
    let uplinks = |out: &fabricsim_core::RunOutput| uplink_flow_counts(out, 1.0);
    assert_ne!(uplinks(&run(scenario(7))), uplinks(&run(scenario(8))));
}

#[test]
fn a_link_failure_loses_packets_until_reconvergence_then_every_flow_completes() {
    let out = run(json!({
        "topology": two_tier(4),
        "switch": {"reconvergence_delay": "50us"},
        "traffic": [
            {"kind": "flow", "src": 0, "dst": 2, "bytes": "2MB", "qps": 4},
            {"kind": "flow", "src": 1, "dst": 3, "bytes": "2MB", "qps": 4},
        ],
        // ToR 0's first uplink.
        "faults": [{"kind": "link_down", "at": "30us", "port": "t0.p0.0:2"}],
    }));
    let drops = &out.summary["drops_by_cause"];
    assert!(drops["link_down"].as_u64().unwrap() > 0, "{}", out.summary);
    assert_eq!(summary_u64(&out, "flows_completed"), 2, "{}", out.summary);
    assert!(floats(&out.flows, "fct_s").iter().all(Option::is_some));
    let retx: u64 = ints(&out.flows, "retransmitted_packets").iter().sum();
    assert!(retx > 0);
    // After reconvergence the dead uplink carries nothing: everything ToR 0
    // sent up after 80us went through the other uplink.
    let node = texts(&out.ports, "node");
    let peer = texts(&out.ports, "peer");
    let tx = ints(&out.ports, "tx_bytes");
    let up: Vec<u64> =
        (0..node.len()).filter(|&i| node[i] == "t0.p0.0" && peer[i].starts_with("t1.")).map(|i| tx[i]).collect();
    assert_eq!(up.len(), 2);
    assert!(up[1] > 2 * up[0], "uplink bytes {up:?}");
    assert!(summary_f64(&out, "sim_time_s") > 80e-6);
}

/// Aggregation-to-core links that carried data, out of all of them.
fn busy_core_uplinks(same_seed: bool) -> (usize, usize) {
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 3, "radix": 8, "link_rate": "100Gbps"},
        "switch": {"ecmp": {"same_seed": same_seed}},
        "transport": {"kind": "rocev2", "qps": 4},
        "traffic": [{"kind": "permutation", "bytes": "256KiB"}],
    }));
    let (node, peer, tx) = (texts(&out.ports, "node"), texts(&out.ports, "peer"), ints(&out.ports, "tx_bytes"));
    let up: Vec<u64> =
        (0..node.len()).filter(|&i| node[i].starts_with("t1.") && peer[i].starts_with("t2.")).map(|i| tx[i]).collect();
    (up.iter().filter(|&&b| b > 100_000).count(), up.len())
}

#[test]
fn one_hash_seed_everywhere_polarizes_ecmp() {
    // The ToR picks aggregation switch j with h mod 4; with the same seed
    // and group size every aggregation switch then picks its uplink j
    // again, so each uses one of its four core uplinks (alibaba-hpn.txt
    // s2.2). Per-switch seeds spread the same flows over all of them.
    let (polarized, total) = busy_core_uplinks(true);
    let (spread, _) = busy_core_uplinks(false);
    assert_eq!(total, 128);
    assert_eq!(polarized, 32, "one uplink per aggregation switch");
    assert!(spread > 100, "per-switch seeds use {spread} of {total} core uplinks");
}

/// A flow's `rate` is the NIC's per-QP rate limiter: the flow takes its
/// bytes on the wire over that rate (split over its QPs, it still adds up
/// to the flow's rate), the ideal FCT counts it, and with several transports
/// (RoCE one port, SPX sprayed over planes) the limit is the same.
#[test]
fn a_rate_limited_flow_sends_at_its_limit() {
    for (transport, qps, planes) in [("rocev2", 1, 1), ("rocev2", 4, 1), ("spx", 2, 2), ("mrc", 1, 2)] {
        let mut topo = two_tier(4);
        topo["planes"] = json!(planes);
        let flow = |rate: Option<&str>| {
            let mut f = json!({"kind": "flow", "src": 0, "dst": 2, "bytes": "4MiB", "qps": qps});
            if let Some(r) = rate {
                f["rate"] = json!(r);
            }
            f
        };
        let scenario = |rate| {
            json!({"topology": topo, "transport": {"kind": transport}, "traffic": [flow(rate)],
                   "switch": {"forwarding": if transport == "spx" { "adaptive" } else { "ecmp" }}})
        };
        let free = floats(&run(scenario(None)).flows, "fct_s")[0].unwrap();
        let out = run(scenario(Some("25Gbps")));
        let limited = floats(&out.flows, "fct_s")[0].unwrap();
        // 4 MiB plus headers at 25 Gb/s is about 1.36 ms; unlimited well under a third of it.
        let at_limit = (4u64 << 20) as f64 * 8.0 / 25e9;
        assert!(limited > at_limit && limited < at_limit * 1.06, "{transport}/{qps}: {limited} s vs {at_limit} s");
        assert!(free < at_limit / 3.0, "{transport}: unlimited {free} s");
        let slowdown = floats(&out.flows, "slowdown")[0].unwrap();
        assert!((0.99..1.03).contains(&slowdown), "{transport}/{qps}: slowdown {slowdown}");
    }
}
