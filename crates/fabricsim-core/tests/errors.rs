//! Bad scenarios are refused with a message that names the field and quotes
//! the value.

use fabricsim_core::{Scenario, Simulation};
use serde_json::{json, Value};

fn error_of(scenario: Value) -> String {
    match Scenario::from_json(&scenario.to_string()) {
        Err(e) => e.to_string(),
        Ok(s) => match Simulation::new(s) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted: {scenario}"),
        },
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
}

#[test]
fn a_fabric_too_large_for_packets_is_refused_not_allocated() {
    let mut s = base();
    s["topology"] = json!({"kind": "clos", "tiers": 3, "radix": 64, "link_rate": "800Gbps"});
    let e = error_of(s);
    assert!(e.starts_with("topology:") && e.contains("65536 NICs"), "{e}");
}
