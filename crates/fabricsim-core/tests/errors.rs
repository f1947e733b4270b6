//! Bad scenarios are refused with a message that names the field and quotes
//! the value.

use fabricsim_core::{Scenario, Setup, Simulation};
use serde_json::{json, Value};

/// The error a scenario is refused with; checking it without building
/// (`check_within`, what `resolve` runs before any run) finds the same one,
/// so that a sweep names a bad point before any point runs. (Two checks
/// were made only by the build until 2026-11-29, the routes' and the PSN
/// space's: a sweep wrote its points up to the one they refused.)
fn error_of(scenario: Value) -> String {
    match Scenario::from_json(&scenario.to_string()) {
        Err(e) => e.to_string(),
        Ok(s) => {
            let checked = Simulation::check_within(&s, &mut Setup::default());
            match Simulation::new(s) {
                Err(e) => {
                    let e = e.to_string();
                    assert_eq!(checked.err().map(|c| c.to_string()), Some(e.clone()), "check_within: {scenario}");
                    e
                }
                Ok(_) => panic!("accepted: {scenario}"),
            }
        }
    }
}

fn base() -> Value {
    json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"},
        "traffic": [{"kind": "permutation", "bytes": "64KiB"}],
    })
}

#[test]
fn unknown_keys_are_named() {
    let mut s = base();
    s["swtich"] = json!({});
    assert!(error_of(s).contains("swtich"));
    let mut s = base();
    s["switch"] = json!({"ecn": {"kmni": "5KB"}});
    let e = error_of(s);
    assert!(e.starts_with("switch.ecn") && e.contains("kmni"), "{e}");
    let mut s = base();
    s["traffic"][0]["byts"] = json!("1MB");
    let e = error_of(s);
    assert!(e.contains("traffic") && e.contains("byts"), "{e}");
}

#[test]
fn units_are_required_and_checked() {
    let mut s = base();
    s["topology"]["link_rate"] = json!(100);
    let e = error_of(s);
    assert!(e.contains("topology") && e.contains("no unit"), "{e}");
    let mut s = base();
    s["switch"] = json!({"buffer": "32 MBytes"});
    let e = error_of(s);
    assert!(e.starts_with("switch.buffer") && e.contains("MBytes"), "{e}");
    let mut s = base();
    s["topology"]["link_rate"] = json!("0Gbps");
    assert!(error_of(s).contains("positive rate"));
    let mut s = base();
    s["topology"]["link_rate"] = json!("-5Gbps");
    assert!(error_of(s).contains("-5Gbps"));
}

#[test]
fn missing_hosts_and_impossible_topologies_are_named() {
    let mut s = base();
    s["traffic"] = json!([{"kind": "flow", "src": 0, "dst": 99, "bytes": "1MB"}]);
    let e = error_of(s);
    assert!(e.starts_with("traffic[0].dst") && e.contains("99"), "{e}");
    let mut s = base();
    s["topology"]["radix"] = json!(7);
    let e = error_of(s);
    assert!(e.starts_with("topology.radix") && e.contains('7'), "{e}");
    let mut s = base();
    s["faults"] = json!([{"kind": "link_down", "at": "1us", "port": "t9.p0.0:1"}]);
    let e = error_of(s);
    assert!(e.starts_with("faults[0].port") && e.contains("t9.p0.0"), "{e}");
    // HPN's dual plane and stacked ToRs need dual-homed NICs.
    let mut s = base();
    s["topology"]["planes"] = json!(2);
    s["topology"]["nic_ports"] = json!(1);
    let e = error_of(s);
    assert!(e.starts_with("topology.nic_ports") && e.contains("planes (2)"), "{e}");
    let mut s = base();
    s["topology"]["tor_stack"] = json!(true);
    let e = error_of(s);
    assert!(e.starts_with("topology.tor_stack") && e.contains("dual-ToR"), "{e}");
    // Disjoint paths are found by replaying ECMP: not under another balancer.
    let mut s = base();
    s["nic"] = json!({"path_selection": "disjoint"});
    s["switch"] = json!({"forwarding": "adaptive"});
    let e = error_of(s);
    assert!(e.starts_with("nic.path_selection") && e.contains("ecmp"), "{e}");
}

#[test]
fn a_fabric_too_large_for_packets_is_refused_not_allocated() {
    let mut s = base();
    s["topology"] = json!({"kind": "clos", "tiers": 3, "radix": 64, "link_rate": "800Gbps"});
    let e = error_of(s);
    assert!(e.starts_with("topology:") && e.contains("65536 NICs"), "{e}");
}

fn with_job(job: Value) -> Value {
    let mut s = base();
    s["traffic"] = json!([]);
    s["jobs"] = json!([job]);
    s
}

#[test]
fn bad_jobs_are_named() {
    let ar = json!({"op": "all_reduce", "bytes": "1MB"});
    // Ranks on NICs that do not exist.
    let e = error_of(with_job(json!({"name": "j", "ranks": 2, "placement": {"explicit": [0, 99]},
        "phases": [{"name": "p", "collective": ar}]})));
    assert!(e.starts_with("jobs[0].placement.explicit[1]") && e.contains("99"), "{e}");
    // A placement that does not fit: 8 NICs in this topology.
    let e = error_of(with_job(json!({"name": "j", "ranks": 9, "phases": [{"name": "p", "collective": ar}]})));
    assert!(e.starts_with("jobs[0].placement") && e.contains("9 ranks"), "{e}");
    let e = error_of(with_job(json!({"name": "j", "ranks": 3, "placement": "t0_local",
        "phases": [{"name": "p", "collective": ar}]})));
    assert!(e.starts_with("jobs[0].placement") && e.contains("ToR"), "{e}");
    // A size matrix of the wrong shape.
    let e = error_of(with_job(json!({"name": "j", "ranks": 3, "phases": [{"name": "p", "collective":
        {"op": "all_to_allv", "matrix": [["1KB", "1KB"], ["1KB", "1KB"]]}}]})));
    assert!(e.starts_with("jobs[0].phases[0].collective.matrix") && e.contains("3x3"), "{e}");
    // A phase that depends on itself, directly or through another.
    let e = error_of(with_job(json!({"name": "j", "ranks": 2, "phases": [
        {"name": "p", "after": ["p"], "compute": "1us"}]})));
    assert!(e.starts_with("jobs[0].phases[0].after") && e.contains("itself"), "{e}");
    let e = error_of(with_job(json!({"name": "j", "ranks": 2, "phases": [
        {"name": "a", "after": ["b"], "compute": "1us"}, {"name": "b", "after": ["a"], "compute": "1us"}]})));
    assert!(e.starts_with("jobs[0].phases[") && e.contains("depends on itself"), "{e}");
    // An unknown collective field is named with its path.
    let e = error_of(with_job(json!({"name": "j", "ranks": 2, "phases": [{"name": "p", "collective":
        {"op": "all_reduce", "bytes": "1MB", "chanels": 2}}]})));
    assert!(e.starts_with("jobs[0].phases[0].collective") && e.contains("chanels"), "{e}");
    let e = error_of(with_job(json!({"name": "j", "ranks": 2, "phases": [{"name": "p", "collective":
        {"op": "all_reduse", "bytes": "1MB"}}]})));
    assert!(e.starts_with("jobs[0].phases[0].collective.op") && e.contains("all_reduse"), "{e}");
    // NVLS reduces in the switch: all-reduce only.
    let e = error_of(with_job(json!({"name": "j", "ranks": 2, "phases": [{"name": "p", "collective":
        {"op": "all_gather", "bytes": "1MB", "algorithm": "nvls"}}]})));
    assert!(e.starts_with("jobs[0].phases[0].collective.algorithm") && e.contains("nvls"), "{e}");
    // Rail order is for rings.
    let e = error_of(with_job(json!({"name": "j", "ranks": 2, "phases": [{"name": "p", "collective":
        {"op": "all_to_all", "bytes": "1MB", "ring_order": "rails"}}]})));
    assert!(e.starts_with("jobs[0].phases[0].collective.ring_order"), "{e}");
    // SHIFT needs a backup NIC other than the default one, and RoCE QPs.
    let mut s = with_job(json!({"name": "j", "ranks": 2, "phases": [{"name": "p", "compute": "1us"}]}));
    s["nic"] = json!({"shift": {}});
    s["traffic"] = json!([{"kind": "flow", "src": 0, "dst": 3, "bytes": "1MB"}]);
    let e = error_of(s.clone());
    assert!(e.starts_with("nic.shift.backup_rail_offset") && e.contains("default NIC itself"), "{e}");
    s["topology"]["nics_per_host"] = json!(2);
    s["nic"] = json!({"shift": {"backup_rail_offset": 2}});
    let e = error_of(s.clone());
    assert!(e.starts_with("nic.shift.backup_rail_offset") && e.contains('2'), "{e}");
    s["nic"] = json!({"shift": {}});
    s["transport"] = json!({"kind": "mrc"});
    s["switch"] = json!({"forwarding": "srv6"});
    let e = error_of(s);
    assert!(e.starts_with("nic.shift") && e.contains("rocev2"), "{e}");
    // A checkpoint taken after every 0 iterations.
    let e = error_of(with_job(json!({"name": "j", "ranks": 2, "checkpoint": {"every": 0, "restart_delay": "1ms"},
        "phases": [{"name": "p", "compute": "1us"}]})));
    assert!(e.starts_with("jobs[0].checkpoint.every") && e.contains('0'), "{e}");
}

/// A collective field its operation has no use for is refused, not
/// ignored: a root on an all-reduce, a peer offset on an all-gather, an
/// all-to-all sending to no peer or to more peers than it has.
#[test]
fn collective_fields_their_operation_does_not_use_are_refused() {
    let refused = |collective: Value, field: &str, words: &str| {
        let e =
            error_of(with_job(json!({"name": "j", "ranks": 4, "phases": [{"name": "p", "collective": collective}]})));
        let at = format!("jobs[0].phases[0].collective.{field}");
        assert!(e.starts_with(&at) && e.contains(words), "{e}");
    };
    refused(json!({"op": "all_reduce", "bytes": "1MB", "root": 99}), "root", "only broadcast and reduce");
    refused(json!({"op": "broadcast", "bytes": "1MB", "root": 4}), "root", "positions 0..4");
    refused(json!({"op": "all_gather", "bytes": "1MB", "peer_offset": 3}), "peer_offset", "only send_recv");
    refused(json!({"op": "all_reduce", "bytes": "1MB", "concurrent_peers": 2}), "concurrent_peers", "all-to-alls");
    for peers in [0, 4, 99] {
        refused(json!({"op": "all_to_all", "bytes": "1MB", "concurrent_peers": peers}), "concurrent_peers", "1 to 3");
    }
    // What each operation does use is taken.
    for collective in [
        json!({"op": "reduce", "bytes": "1MB", "root": 3}),
        json!({"op": "send_recv", "bytes": "1MB", "peer_offset": 3}),
        json!({"op": "all_to_all", "bytes": "1MB", "concurrent_peers": 3}),
    ] {
        let s = with_job(json!({"name": "j", "ranks": 4, "phases": [{"name": "p", "collective": collective}]}));
        assert!(Simulation::new(Scenario::from_json(&s.to_string()).unwrap()).is_ok(), "{s}");
    }
}

#[test]
fn bad_mrc_path_settings_are_named() {
    let mut s = base();
    s["transport"] = json!({"kind": "mrc", "denylist": ["t0.p0.0:2"]});
    assert!(error_of(s.clone()).starts_with("transport.denylist: "), "{}", error_of(s.clone()));
    s["switch"] = json!({"forwarding": "srv6"});
    s["transport"]["denylist"] = json!(["t0.p0.0:99"]);
    assert!(error_of(s.clone()).starts_with("transport.denylist[0]: 't0.p0.0:99'"), "{}", error_of(s.clone()));
    let mut s = base();
    s["transport"] = json!({"kind": "mrc"});
    s["faults"] = json!([{"kind": "ev_loss", "at": "0us", "nic": 0, "ev": 3, "rate": 0.1}]);
    assert!(error_of(s.clone()).starts_with("faults[0].ev: 3"), "{}", error_of(s.clone()));
    s["faults"][0]["ev"] = json!(8);
    s["faults"][0]["rate"] = json!(1.5);
    assert!(error_of(s.clone()).starts_with("faults[0].rate: 1.5"), "{}", error_of(s));
}

#[test]
fn clustermapper_needs_srv6_and_a_timeout_inside_its_period() {
    let mut s = base();
    s["clustermapper"] = json!({});
    assert!(error_of(s.clone()).starts_with("clustermapper: "), "{}", error_of(s.clone()));
    s["switch"] = json!({"forwarding": "srv6"});
    s["clustermapper"] = json!({"period": "100us", "timeout": "200us"});
    assert!(error_of(s.clone()).starts_with("clustermapper.timeout: 200us"), "{}", error_of(s.clone()));
    // A period of 0 is the period's fault, not the (default) timeout's.
    s["clustermapper"] = json!({"period": "0ns"});
    assert!(error_of(s.clone()).starts_with("clustermapper.period: 0"), "{}", error_of(s));
}

#[test]
fn bad_ev_sets_are_named() {
    let mut s = base();
    s["transport"] = json!({"kind": "mrc"});
    s["traffic"] = json!([{"kind": "flow", "src": 0, "dst": 2, "bytes": "1MB", "ev_set": {"active": []}}]);
    assert!(error_of(s.clone()).starts_with("traffic[0].ev_set.active: []"), "{}", error_of(s.clone()));
    s["traffic"][0]["ev_set"] = json!({"active": [8, 9]});
    assert!(error_of(s.clone()).starts_with("traffic[0].ev_set: EV 9 names plane 1"), "{}", error_of(s.clone()));
    s["traffic"][0]["ev_set"] = json!({"active": [8]});
    s["transport"] = json!({"kind": "rocev2"});
    assert!(error_of(s.clone()).contains("ev_set pins MRC EVs"), "{}", error_of(s.clone()));
    s["transport"] = json!({"kind": "mrc"});
    s["telemetry"] = json!({"ev_activity": true});
    assert!(error_of(s.clone()).starts_with("telemetry.ev_activity: "), "{}", error_of(s));
}

/// `Simulation::check` (what `fabricsim` uses to resolve a scenario) refuses
/// exactly what building the simulation refuses, naming the same field.
#[test]
fn checking_refuses_what_building_refuses() {
    let cases = [
        json!({"topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"}, "telemetry": {"sample_interval": "1us", "ports": ["t0.p0.0:9"]}}),
        json!({"topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"}, "traffic": [{"kind": "flow", "src": 0, "dst": 99, "bytes": "1MB"}]}),
        json!({"topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"}, "faults": [{"kind": "switch_down", "at": "1us", "switch": "t9"}]}),
        json!({"topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"}, "telemetry": {"pcap": {"ports": ["nic0:3"]}}}),
        json!({"topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"}, "jobs": [{"name": "j", "ranks": 64, "phases": [{"name": "c", "compute": "1us"}]}]}),
        json!({"topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"}}),
    ];
    let last = cases.len() - 1;
    for (k, case) in cases.into_iter().enumerate() {
        let scenario = fabricsim_core::Scenario::from_json(&case.to_string()).expect("schema-valid");
        let checked = fabricsim_core::Simulation::check(&scenario, None).err().map(|e| e.to_string());
        let built = fabricsim_core::Simulation::new(scenario).err().map(|e| e.to_string());
        assert_eq!(checked, built, "{case}");
        assert_eq!(checked.is_none(), k == last, "only the last case is valid: {case} gave {checked:?}");
    }
}

/// An EV names its plane in 3 bits: a spraying transport on NICs with more
/// than 8 ports is refused rather than sending on the wrong planes.
#[test]
fn mrc_refuses_nics_with_more_planes_than_an_ev_can_name() {
    let mut s = json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "nics": 4, "planes": 9, "link_rate": "100Gbps"},
        "transport": {"kind": "mrc"},
    });
    let e = error_of(s.clone());
    assert!(e.starts_with("topology: nic0 has 9 ports"), "{e}");
    s["topology"]["planes"] = json!(8);
    let scenario = fabricsim_core::Scenario::from_json(&s.to_string()).expect("valid");
    assert!(fabricsim_core::Simulation::check(&scenario, None).is_ok());
}

/// Sets `value` at the dotted `path` of `scenario`, creating mappings.
fn with(path: &str, value: Value) -> Value {
    let mut s = base();
    let mut node = &mut s;
    let parts: Vec<&str> = path.split('.').collect();
    for part in &parts[..parts.len() - 1] {
        node = match part.parse::<usize>() {
            Ok(i) => &mut node[i],
            Err(_) => {
                if node.get(*part).is_none() {
                    node[*part] = json!({});
                }
                &mut node[*part]
            }
        };
    }
    node[parts[parts.len() - 1]] = value;
    s
}

#[test]
fn quantities_past_what_a_scenario_may_hold_are_refused_not_clamped() {
    for (path, value, expect) in [
        ("topology.link_delay", "99999999999999999999s", "larger than the largest time"),
        ("topology.link_delay", "18446744.0737s", "larger than the largest time"),
        ("traffic.0.bytes", "18446744073709551615B", "larger than the largest size"),
        ("topology.link_rate", "2000Tbps", "larger than the largest rate"),
        ("topology.link_delay", "0.5ps", "whole number of picoseconds"),
        ("traffic.0.bytes", "1.5B", "whole number of bytes"),
    ] {
        let e = error_of(with(path, json!(value)));
        let field = path.replace(".0.", "[0].");
        assert!(e.starts_with(&field) && e.contains(expect) && e.contains(value), "{path}={value}: {e}");
    }
}

#[test]
fn physically_meaningless_values_are_refused_when_checked() {
    let transport = |kind: &'static str| {
        move |path: &str, value: Value| {
            let mut s = with(path, value);
            s["transport"]["kind"] = json!(kind);
            s
        }
    };
    let (roce, mrc) = (transport("rocev2"), transport("mrc"));
    for (scenario, field) in [
        (roce("transport.dcqcn.g", json!(1.5)), "transport.dcqcn.g"),
        (roce("transport.dcqcn.min_decrease_factor", json!(2.0)), "transport.dcqcn.min_decrease_factor"),
        (roce("transport.dcqcn.rate_increase_timer", json!("0ns")), "transport.dcqcn.rate_increase_timer"),
        (roce("transport.retry_count", json!(8)), "transport.retry_count"),
        (mrc("transport.probe_interval", json!("0ns")), "transport.probe_interval"),
        (mrc("transport.rto_low", json!("0ns")), "transport.rto_low"),
        (mrc("transport.rto_low", json!("1ps")), "transport.rto_low"),
        (mrc("transport.probe_interval", json!("999ns")), "transport.probe_interval"),
        (roce("transport.dcqcn.alpha_update", json!("500ns")), "transport.dcqcn.alpha_update"),
        (mrc("transport.reverse_probe_interval", json!("0ns")), "transport.reverse_probe_interval"),
        (mrc("transport.error_timeout", json!("0ns")), "transport.error_timeout"),
        (mrc("transport.window", json!("1KiB")), "transport.window"),
        (mrc("transport.evs", json!(100_000)), "transport.evs"),
        (mrc("transport.cc.target_delay", json!("0ns")), "transport.cc.target_delay"),
        (mrc("transport.cc.gamma", json!(-1.0)), "transport.cc.gamma"),
        (with("switch.buffer", json!("1KiB")), "switch.buffer"),
        (with("switch.pfc.xon_offset", json!("10MB")), "switch.pfc.xon_offset"),
        (with("switch.pfc.headroom", json!("100B")), "switch.pfc.headroom"),
        (with("switch.trimming", json!({"enabled": true, "size": "8KiB"})), "switch.trimming.size"),
        (with("switch.trimming", json!({"enabled": true, "threshold": "0B"})), "switch.trimming.threshold"),
        (with("limits.sim_time", json!("0ns")), "limits.sim_time"),
        (with("limits.events_per_instant", json!(0)), "limits.events_per_instant"),
    ] {
        let e = error_of(scenario);
        assert!(e.starts_with(field), "{field}: {e}");
    }
}

/// A number far from everyday magnitudes is quoted as the user could have
/// written it: 1e308 as a probability was quoted with all its 309 digits.
#[test]
fn huge_and_tiny_numbers_are_quoted_in_scientific_notation() {
    for (path, value, quoted) in [
        ("switch.ecn.pmax", json!(1e308), "1e308: a probability"),
        ("switch.egress_alpha", json!(-1e300), "-1e300: must be positive"),
        ("topology.link_delay", json!(1e200), "1e200 has no unit"),
        // (serde_json reads 1e-30 as 9.999999999999999e-31)
        ("switch.pfc.xoff_alpha", json!(-1e-30), "e-31: must be positive"),
        ("switch.ecn.pmax", json!(1.5), "1.5: a probability"),
    ] {
        let e = error_of(with(path, value));
        assert!(e.starts_with(path) && e.contains(quoted), "{e}");
    }
}

#[test]
fn a_qp_is_never_asked_to_number_more_packets_than_its_psns() {
    // 2^50 B at 4KiB per packet: 2^38 packets on one QP.
    let e = error_of(with("traffic", json!([{"kind": "flow", "src": 0, "dst": 2, "bytes": "1048576GiB"}])));
    assert!(e.starts_with("traffic") && e.contains("2^31 PSNs"), "{e}");
    // A job's connection carries every iteration.
    let mut s = base();
    s["traffic"] = json!([]);
    s["jobs"] = json!([{"name": "j", "ranks": 2, "iterations": 2, "phases": [
        {"name": "p", "collective": {"op": "send_recv", "bytes": "8192GiB", "slice": "1GiB"}}
    ]}]);
    let e = error_of(s);
    assert!(e.starts_with("jobs") && e.contains("2^31 PSNs"), "{e}");
}

#[test]
fn a_nic_reference_that_is_no_index_or_name_says_what_one_is() {
    for (value, expect) in [
        (json!(-1), "-1 is not a NIC index: NICs are numbered from 0"),
        (json!(4_294_967_296u64), "4294967296 is not a NIC index"),
        (json!(1.5), "a NIC index (0, 1, ...) or a NIC name"),
        (json!([0]), "a NIC index (0, 1, ...) or a NIC name"),
    ] {
        let mut s = base();
        s["traffic"] = json!([{"kind": "flow", "src": 0, "dst": value, "bytes": "1MB"}]);
        let e = error_of(s);
        assert!(e.starts_with("traffic[0].dst") && e.contains(expect), "{value}: {e}");
    }
}

#[test]
fn random_flaps_beyond_any_study_are_refused_not_expanded() {
    let mut s = base();
    s["faults"] = json!([{"kind": "random_flaps", "mtbf": "1ps", "duration": "1ps", "until": "1s"}]);
    let e = error_of(s);
    assert!(e.starts_with("faults[0].mtbf") && e.contains("more than 4000000 fault events"), "{e}");
}

#[test]
fn clustermapper_settings_outside_what_agents_do_are_refused_not_clamped() {
    for (setting, value, field) in [
        ("period", json!("2ps"), "clustermapper.period"),
        ("t1_probes", json!(256), "clustermapper.t1_probes"),
        ("window", json!(65), "clustermapper.window"),
        ("down_after", json!(0), "clustermapper.down_after"),
        ("lossy_after", json!(17), "clustermapper.lossy_after"),
    ] {
        let mut s = with("switch.forwarding", json!("srv6"));
        s["clustermapper"] = json!({ setting: value });
        if setting == "period" {
            s["clustermapper"]["timeout"] = json!("1ps");
        }
        let e = error_of(s);
        assert!(e.starts_with(field), "{setting}: {e}");
    }
}

#[test]
fn nics_with_no_path_between_them_and_fabrics_without_nics_are_refused() {
    let islands = json!({"kind": "explicit",
        "nodes": [{"name": "a", "kind": "nic"}, {"name": "b", "kind": "nic"},
                  {"name": "s1", "kind": "switch"}, {"name": "s2", "kind": "switch"}],
        "links": [{"a": "a", "b": "s1", "rate": "100Gbps"}, {"a": "b", "b": "s2", "rate": "100Gbps"}]});
    let mut s = base();
    s["topology"] = islands.clone();
    s["traffic"] = json!([{"kind": "flow", "src": "a", "dst": "b", "bytes": "1MB"}]);
    let e = error_of(s);
    assert!(e.starts_with("traffic") && e.contains("a and b have no path between them"), "{e}");
    let mut s = base();
    s["topology"] = islands;
    s["traffic"] = json!([]);
    s["jobs"] = json!([{"name": "j", "ranks": 2, "phases": [
        {"name": "p", "collective": {"op": "all_reduce", "bytes": "1MB"}}]}]);
    let e = error_of(s);
    assert!(e.starts_with("jobs[0]") && e.contains("no path between them"), "{e}");
    let mut s = base();
    s["topology"] = json!({"kind": "explicit", "nodes": [], "links": []});
    s["traffic"] = json!([]);
    assert!(error_of(s).starts_with("topology: it has no NICs"));
}

#[test]
fn an_error_quoting_a_line_break_stays_on_one_line() {
    let mut s = base();
    s["traffic"][0]["by\ntes"] = json!("1MB");
    let e = error_of(s);
    assert!(!e.contains('\n') && e.contains("by\\ntes"), "{e}");
    let e = error_of(with("topology.link_rate", json!("100G\nbps")));
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn a_fault_on_a_missing_nic_blames_the_nic_and_ranges_say_their_ends() {
    let mut s = base();
    s["faults"] = json!([{"kind": "ev_loss", "at": "0us", "nic": 99, "ev": 0, "rate": 0.5}]);
    let e = error_of(s);
    assert!(e.starts_with("faults[0].nic") && e.contains("8 NICs, 0 to 7"), "{e}");
    let mut s = base();
    s["faults"] = json!([{"kind": "nic_port_down", "at": "0us", "nic": 0, "port": 5}]);
    let e = error_of(s);
    assert!(e.starts_with("faults[0].port") && e.contains("1 ports, 0 to 0"), "{e}");
}

#[test]
fn a_list_where_a_mapping_belongs_is_refused_not_read_in_order() {
    for (path, value, field) in
        [("nic", json!(["1KiB"]), "nic"), ("limits", json!([]), "limits"), ("switch.pfc", json!([true]), "switch.pfc")]
    {
        let e = error_of(with(path, value));
        assert!(e.starts_with(field) && e.contains("a list, where a mapping of keys belongs"), "{path}: {e}");
    }
    let mut s = base();
    s["traffic"][0]["kind"] = json!("flow");
    s["traffic"][0]["ev_set"] = json!([[1, 2]]);
    assert!(error_of(s).starts_with("traffic[0].ev_set: a list"));
    let mut s = with("switch.forwarding", json!("srv6"));
    s["clustermapper"] = json!(["1ms"]);
    assert!(error_of(s).starts_with("clustermapper: a list"));
    let mut s = base();
    s["topology"] =
        json!({"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps", "link_delay": ["1us", "2us"]});
    assert!(
        Simulation::check(&Scenario::from_json(&s.to_string()).unwrap(), None).is_ok(),
        "a per-tier list stays a list"
    );
}

#[test]
fn adaptive_routing_needs_a_choice_of_paths_and_sane_bands() {
    // One switch: every NIC is one hop away, there is nothing to adapt.
    let mut s = base();
    s["topology"] = json!({"kind": "explicit",
        "nodes": [{"name": "a", "kind": "nic"}, {"name": "b", "kind": "nic"}, {"name": "s", "kind": "switch"}],
        "links": [{"a": "a", "b": "s", "rate": "100Gbps"}, {"a": "b", "b": "s", "rate": "100Gbps"}]});
    s["traffic"] = json!([{"kind": "flow", "src": "a", "dst": "b", "bytes": "1MB"}]);
    s["switch"] = json!({"forwarding": "adaptive"});
    let e = error_of(s);
    assert!(e.starts_with("switch.forwarding: adaptive") && e.contains("nothing to choose"), "{e}");
    for (adaptive, field, quoted) in [
        (json!({"bands": ["40KB", "20KB"]}), "switch.adaptive.bands", "20KB"),
        (json!({"bands": (1..=16).map(|k| format!("{k}KB")).collect::<Vec<_>>()}), "switch.adaptive.bands", "16"),
        (json!({"sample_interval": "0ns"}), "switch.adaptive.sample_interval", "0"),
    ] {
        let mut s = base();
        s["switch"] = json!({"forwarding": "adaptive", "adaptive": adaptive});
        let e = error_of(s);
        assert!(e.starts_with(field) && e.contains(quoted), "{e}");
    }
}

#[test]
fn spectrum_x_settings_are_checked() {
    // Plane load-balancing variants compare ways over planes: one-port NICs
    // have none.
    for variant in ["global_cc", "sw_lb", "esr"] {
        let mut s = base();
        s["transport"] = json!({"kind": "spx", "plane_lb": variant});
        let e = error_of(s);
        assert!(e.starts_with(&format!("transport.plane_lb: {variant}")) && e.contains("more than one port"), "{e}");
    }
    for (transport, field) in [
        (json!({"kind": "spx", "probe_interval": "0ns"}), "transport.probe_interval"),
        (json!({"kind": "spx", "failure_probes": 0}), "transport.failure_probes"),
        (json!({"kind": "spx", "failure_backoff": 0.5}), "transport.failure_backoff"),
        (
            json!({"kind": "spx", "failure_backoff": 2.0, "failure_probes": 4_000_000_000u32}),
            "transport.failure_probes",
        ),
        (
            json!({"kind": "spx", "failure_probes": 4_000_000_000u32, "probe_interval": "1ms"}),
            "transport.failure_probes",
        ),
        (json!({"kind": "spx", "cc": {"gamma": 1.5}}), "transport.cc.gamma"),
        (json!({"kind": "spx", "plane_lb": "per_path"}), "transport"),
    ] {
        let mut s = base();
        s["transport"] = transport;
        let e = error_of(s);
        assert!(e.starts_with(field), "{e}");
    }
}

#[test]
fn a_fault_at_or_after_the_duration_is_refused_traffic_after_it_keeps_idle_qps() {
    let mut s = with("duration", json!("1ms"));
    s["faults"] = json!([{"kind": "link_down", "at": "1ms", "port": "t0.p0.0:2"}]);
    assert_eq!(error_of(s), "faults[0].at: 1ms: not before duration 1ms, so it would never strike");
    let mut s = with("duration", json!("1ms"));
    s["faults"] = json!([{"kind": "link_down", "at": "999us", "port": "t0.p0.0:2"}]);
    s["traffic"][0]["start"] = json!("2ms");
    s["jobs"] = json!([{"name": "j", "ranks": 2, "start": "1s", "phases": [{"name": "p", "compute": "1us"}]}]);
    Scenario::from_json(&s.to_string()).unwrap();
}

#[test]
fn an_incast_without_senders_or_with_one_twice_is_refused() {
    for (senders, expected) in [
        (json!([]), "traffic[0].senders: []: an incast needs at least one sender"),
        (json!([1, 2, "nic1"]), "traffic[0].senders[2]: nic1: listed already, as traffic[0].senders[0]"),
    ] {
        let mut s = base();
        s["traffic"] = json!([{"kind": "incast", "receiver": 0, "senders": senders, "bytes": "1KB"}]);
        assert_eq!(error_of(s), expected);
    }
}

#[test]
fn jobs_and_phases_need_names_of_their_own() {
    let compute = |name: &str| json!({"name": name, "compute": "1us"});
    for (name, phases, expected) in [
        ("", json!([compute("p")]), "jobs[0].name: is empty: every job needs a name"),
        ("j", json!([compute("")]), "jobs[0].phases[0].name: is empty: every phase needs a name"),
        (
            "j",
            json!([compute("p"), compute("q"), compute("p")]),
            "jobs[0].phases[2].name: 'p' is already the name of jobs[0].phases[0]",
        ),
    ] {
        let e = error_of(with_job(json!({"name": name, "ranks": 2, "phases": phases})));
        assert_eq!(e, expected);
    }
}

#[test]
fn traffic_that_would_make_no_flow_or_a_nic_send_to_itself_is_refused() {
    let racks =
        |src: Value, dst: Value| json!({"kind": "racks_to_racks", "src_racks": src, "dst_racks": dst, "bytes": "1KB"});
    for (traffic, expected) in [
        (
            racks(json!([0, 1]), json!([2, 1])),
            "traffic[0].dst_racks[1]: 1: the same rack as src_racks[1]; its NICs would send to themselves",
        ),
        (racks(json!([]), json!([])), "traffic[0].src_racks: []: name at least one rack to send from"),
        (json!({"kind": "uniform_random", "flows": 0, "bytes": "1KB"}), "traffic[0].flows: 0: draw at least one flow"),
    ] {
        let mut s = base();
        s["traffic"] = json!([traffic]);
        assert_eq!(error_of(s), expected);
    }
}

#[test]
fn telemetry_that_would_record_nothing_is_refused() {
    for (telemetry, expected) in [
        (
            json!({"ports": ["t0.p0.0:1"]}),
            "telemetry.ports: 1 port(s) listed, but its series are sampled; set telemetry.sample_interval",
        ),
        (
            json!({"hosts": [0, 1]}),
            "telemetry.hosts: 2 NIC(s) listed, but its series are sampled; set telemetry.sample_interval",
        ),
        (
            json!({"pcap": {"ports": []}}),
            "telemetry.pcap.ports: []: it records at least a port; leave the section out to record none",
        ),
        (
            json!({"pcap": {"ports": ["t0.p0.0:1"], "max_packets": 0}}),
            "telemetry.pcap.max_packets: 0: it records at least a packet; leave the section out to record none",
        ),
        (
            json!({"histograms": {"ports": []}}),
            "telemetry.histograms.ports: []: it records at least a port; leave the section out to record none",
        ),
        (
            json!({"imbalance": {"groups": []}}),
            "telemetry.imbalance.groups: []: it records at least a group; leave the section out to record none",
        ),
    ] {
        let mut s = base();
        s["telemetry"] = telemetry;
        assert_eq!(error_of(s), expected);
    }
}

#[test]
fn a_telemetry_list_that_names_a_port_or_nic_twice_is_refused() {
    for (telemetry, expected) in [
        (
            json!({"sample_interval": "1us", "ports": ["t0.p0.0:1", "t0.p0.1:0", "t0.p0.0:1"]}),
            "telemetry.ports[2]: 't0.p0.0:1': listed already, as telemetry.ports[0]",
        ),
        (
            json!({"sample_interval": "1us", "hosts": [3, "nic3"]}),
            "telemetry.hosts[1]: nic3: listed already, as telemetry.hosts[0]",
        ),
        (
            json!({"histograms": {"ports": ["nic0:0", "nic0:0"]}}),
            "telemetry.histograms.ports[1]: 'nic0:0': listed already, as telemetry.histograms.ports[0]",
        ),
        (
            json!({"pcap": {"ports": ["nic0:0", "nic0:0"]}}),
            "telemetry.pcap.ports[1]: 'nic0:0': listed already, as telemetry.pcap.ports[0]",
        ),
    ] {
        let mut s = base();
        s["telemetry"] = telemetry.clone();
        assert_eq!(error_of(s.clone()), expected);
        if telemetry.get("sample_interval").is_some() {
            s["mode"] = json!("flow");
            let scenario = Scenario::from_json(&s.to_string()).unwrap();
            let e = fabricsim_core::FluidSimulation::new_within(scenario, &mut Setup::default())
                .err()
                .map(|e| e.to_string());
            assert_eq!(e.as_deref(), Some(expected), "the flow model");
        }
    }
}

#[test]
fn rates_no_device_runs_at_are_refused() {
    let explicit = json!({
        "kind": "explicit",
        "nodes": [{"name": "tor", "kind": "switch"}, {"name": "a", "kind": "nic"}, {"name": "b", "kind": "nic"}],
        "links": [{"a": "a", "b": "tor", "rate": "100Gbps"}, {"a": "b", "b": "tor", "rate": "100bps"}],
    });
    let link = "below 1Mbps, a tenth of the slowest Ethernet (10BASE-T); is a unit missing?";
    for (scenario, expected) in [
        (with("topology.link_rate", json!("1bps")), format!("topology.link_rate: 1bps: {link}")),
        (with("topology.link_rate", json!(["100Gbps", "999Kbps"])), format!("topology.link_rate[1]: 999Kbps: {link}")),
        (with("topology.native_port_rate", json!("1bps")), format!("topology.native_port_rate: 1bps: {link}")),
        (with("topology", explicit), format!("topology.links[1].rate: 100bps: {link}")),
        (with("intra_host.rate", json!("1bps")), format!("intra_host.rate: 1bps: {link}")),
        (
            with("traffic.0.rate", json!("1bps")),
            "traffic[0].rate: 1bps: below 1Kbps, the unit a NIC's rate limiter is set in; is a unit missing?".into(),
        ),
    ] {
        assert_eq!(error_of(scenario), expected);
    }
    // The slowest of each is a rate a device runs at.
    let mut slowest = with("topology.link_rate", json!("1Mbps"));
    slowest["traffic"][0]["rate"] = json!("1Kbps");
    slowest["intra_host"] = json!({"rate": "1Mbps"});
    Simulation::new(Scenario::from_json(&slowest.to_string()).unwrap()).unwrap();
}

#[test]
fn telemetry_sampled_too_seldom_for_the_run_or_twice_over_is_refused() {
    let telemetry = |t: Value| {
        let mut s = with("duration", json!("50us"));
        s["telemetry"] = t;
        s
    };
    for (scenario, expected) in [
        (
            telemetry(json!({"sample_interval": "1ms", "hosts": [0]})),
            "telemetry.sample_interval: 1ms: not shorter than duration 50us, so no tick would fall between its start \
             and end",
        ),
        (
            telemetry(json!({"sample_interval": "50us", "hosts": [0]})),
            "telemetry.sample_interval: 50us: not shorter than duration 50us, so no tick would fall between its \
             start and end",
        ),
        (
            telemetry(json!({"imbalance": {"groups": [{"tier": 0, "facing": "up"}], "load_interval": "51us"}})),
            "telemetry.imbalance.load_interval: 51us: longer than duration 50us, so it would never be sampled",
        ),
        (
            telemetry(json!({"imbalance": {"groups": [
                {"tier": 0, "facing": "up"}, {"tier": 1, "facing": "down"}, {"tier": 0, "facing": "up"},
            ]}})),
            "telemetry.imbalance.groups[2]: {tier: 0, facing: up}: listed already, as telemetry.imbalance.groups[0]",
        ),
    ] {
        assert_eq!(error_of(scenario), expected);
    }
    let sampled = telemetry(json!({"sample_interval": "49us", "hosts": [0]}));
    Simulation::new(Scenario::from_json(&sampled.to_string()).unwrap()).unwrap();
}

/// A run with nothing to send completed at once and reported a fabric
/// that carried nothing; its topology is still checked and reported.
#[test]
fn a_run_that_would_send_nothing_is_refused_but_its_topology_checks() {
    use fabricsim_core::Model;
    let mut idle = base();
    idle.as_object_mut().unwrap().remove("traffic");
    let scenario = Scenario::from_json(&idle.to_string()).unwrap();
    assert!(Simulation::check_within(&scenario, &mut Setup::default()).unwrap());
    let e = Model::build(scenario, &mut Setup::default()).err().map(|e| e.to_string());
    assert_eq!(e.as_deref(), Some("traffic: [], and no jobs: a run would send nothing; give it traffic or a job"));
    // A job of compute alone is a run of something.
    let computing = with_job(json!({"name": "j", "ranks": 2, "phases": [{"name": "c", "compute": "1us"}]}));
    Model::build(Scenario::from_json(&computing.to_string()).unwrap(), &mut Setup::default()).unwrap();
}

/// A link of 1 s ran to "completed" with every flow timed out: no link in
/// a data centre is longer than 200 km of fibre (1 ms).
#[test]
fn a_link_longer_than_any_fibre_in_a_data_centre_is_refused() {
    let explicit = json!({
        "kind": "explicit",
        "nodes": [{"name": "tor", "kind": "switch"}, {"name": "a", "kind": "nic"}, {"name": "b", "kind": "nic"}],
        "links": [{"a": "a", "b": "tor", "rate": "100Gbps"}, {"a": "b", "b": "tor", "rate": "100Gbps", "delay": "1s"}],
    });
    let far = "longer than 1ms, the delay of 200km of fibre; no data-centre link is that long";
    for (scenario, expected) in [
        (with("topology.link_delay", json!("1s")), format!("topology.link_delay: 1s: {far}")),
        (with("topology.link_delay", json!(["1us", "1001us"])), format!("topology.link_delay[1]: 1001us: {far}")),
        (with("topology", explicit), format!("topology.links[1].delay: 1s: {far}")),
    ] {
        assert_eq!(error_of(scenario), expected);
    }
    let metro = with("topology.link_delay", json!(["1us", "1ms"]));
    Simulation::new(Scenario::from_json(&metro.to_string()).unwrap()).unwrap();
}

#[test]
fn recording_that_cannot_fit_is_refused_when_checked_in_both_models() {
    // Until 2026-11-29 only the build weighed what recording takes (it
    // knows the run's ideal end): a sweep over `sample_interval` wrote its
    // points up to the one that could not fit. A check now weighs it over
    // the shortest run the scenario allows: its duration, else until its
    // last flow or job could end, their bytes leaving at their NICs' whole
    // rate.
    let limited = |extra: Value| {
        let mut s = base();
        s["limits"] = json!({"memory": "256MiB"});
        for (key, value) in extra.as_object().expect("an object") {
            s[key] = value.clone();
        }
        s
    };
    let sampled = json!({"duration": "1s", "telemetry": {"sample_interval": "1ns", "hosts": ["nic0"]}});
    let started_late = json!({
        "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "64KiB", "start": "1s"}],
        "telemetry": {"sample_interval": "1ns", "hosts": ["nic0"]},
    });
    // 10 GiB take 0.86 s at the NIC's 100 Gb/s at the least.
    let long_flow = json!({
        "traffic": [{"kind": "flow", "src": 0, "dst": 2, "bytes": "10GiB"}],
        "telemetry": {"sample_interval": "1ns", "hosts": ["nic0"]},
    });
    // Each NIC of an all-gather of 1 GiB over 8 NICs sends 7/8 GiB: 75 ms
    // at 100 Gb/s at the least, twice over.
    let long_job = json!({
        "traffic": [],
        "jobs": [{"name": "j", "ranks": 8, "iterations": 2,
            "phases": [{"name": "ag", "collective": {"op": "all_gather", "bytes": "1GiB"}}]}],
        "telemetry": {"sample_interval": "1ns", "hosts": ["nic0"]},
    });
    // Until 2026-12-01 a job's bound counted only its bytes: 100
    // all-reduces of 64 B over 8 NICs were weighed over nanoseconds. Each
    // is a ring of 14 dependent transfers, each taking at least a link's
    // 1 us: 1.4 ms at the least.
    let latency_bound_job = json!({
        "traffic": [],
        "jobs": [{"name": "j", "ranks": 8, "iterations": 100,
            "phases": [{"name": "ar", "collective": {"op": "all_reduce", "bytes": "64B"}}]}],
        "telemetry": {"sample_interval": "1ns", "hosts": ["nic0"]},
    });
    let captured = json!({"telemetry": {"pcap": {"ports": ["nic0:0"], "max_packets": 1_000_000_000_000u64}}});
    for (extra, part) in [
        (sampled, "time-series rows"),
        (started_late, "time-series rows"),
        (long_flow, "time-series rows"),
        (long_job, "time-series rows"),
        (latency_bound_job, "time-series rows"),
        (captured, "captured packets"),
    ] {
        let e = error_of(limited(extra.clone()));
        assert!(e.starts_with("scenario: needs about") && e.contains(part), "{e}");
        let mut flow = limited(extra);
        flow["mode"] = json!("flow");
        flow["telemetry"].as_object_mut().expect("telemetry").remove("pcap");
        if flow["telemetry"].as_object().is_some_and(|t| t.is_empty()) {
            continue; // the flow model captures no packets
        }
        let s = Scenario::from_json(&flow.to_string()).expect("valid");
        let checked = fabricsim_core::Model::check(&s, &mut Setup::default()).err().map(|e| e.to_string());
        assert!(checked.as_ref().is_some_and(|e| e.contains(part)), "{checked:?}");
    }
}

#[test]
fn a_reader_that_asks_for_nothing_is_refused() {
    // The packet model asked for no READ at depth 0 and stalled where the
    // flow model ran.
    let mut s = base();
    s["transport"] = json!({"kind": "rocev2", "read_depth": 0});
    assert_eq!(error_of(s), "transport.read_depth: 0: a reader asks for at least one READ");
}
