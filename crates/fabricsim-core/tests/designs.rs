//! Designs as presets (`design:`): each lays its settings under the
//! scenario's, an explicit key wins, and `under` moves a scenario from one
//! design to another keeping what is common.

use fabricsim_core::scenario::design::{under, Design};
use fabricsim_core::transport::TransportSpec;
use fabricsim_core::{Scenario, Setup, Simulation};
use serde_json::{json, Value};

fn base() -> Value {
    json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "nics": 16, "nics_per_host": 2, "link_rate": "100Gbps"},
        "switch": {"buffer": "4MB"},
        "transport": {"kind": "rocev2", "retransmit_timeout": "200us"},
        "traffic": [{"kind": "permutation", "bytes": "64KB"}],
    })
}

fn parse(value: &Value) -> Scenario {
    Scenario::from_json(&value.to_string()).expect("valid")
}

#[test]
fn a_design_sets_what_it_implies_and_an_explicit_key_wins() {
    let mut mrc = base();
    mrc["design"] = json!("mrc");
    mrc.as_object_mut().unwrap().remove("transport");
    let s = parse(&mrc);
    assert!(matches!(s.transport, TransportSpec::Mrc(_)));
    assert!(!s.switch.pfc.enabled && s.switch.trimming.enabled);
    assert_eq!(serde_json::to_value(s.switch.forwarding).unwrap(), json!("srv6"));
    assert_eq!(s.switch.buffer.0, 4_000_000, "the scenario's own buffer stays");
    // The scenario's PFC setting wins over the design's.
    mrc["switch"]["pfc"] = json!({"enabled": true});
    assert!(parse(&mrc).switch.pfc.enabled);
    // Its transport of another kind replaces the design's whole.
    let mut roce_under_mrc = base();
    roce_under_mrc["design"] = json!("mrc");
    assert!(matches!(parse(&roce_under_mrc).transport, TransportSpec::Rocev2(_)));
}

#[test]
fn an_unknown_design_is_named_with_the_ones_there_are() {
    let mut s = base();
    s["design"] = json!("infiniband");
    let e = Scenario::from_json(&s.to_string()).unwrap_err().to_string();
    assert!(e.starts_with("design") && e.contains("infiniband") && e.contains("spectrum-x"), "{e}");
}

#[test]
fn under_another_design_a_scenario_keeps_its_common_ground() {
    let mut tuned = base();
    tuned["switch"]["pfc"] = json!({"enabled": false, "xoff_alpha": 0.5});
    tuned["nic"] = json!({"shift": {}, "mtu": "4096B"});
    let mrc = parse(&under(&tuned, Design::Mrc));
    assert!(matches!(mrc.transport, TransportSpec::Mrc(_)), "a RoCE transport does not carry over to MRC");
    assert_eq!(mrc.switch.buffer.0, 4_000_000);
    assert_eq!(mrc.switch.pfc.xoff_alpha, 0.5, "PFC's threshold is not a design's");
    assert!(mrc.nic.shift.is_none(), "SHIFT is a design's");
    let roce = parse(&under(&tuned, Design::Roce));
    let TransportSpec::Rocev2(c) = &roce.transport else { panic!("roce runs RoCEv2") };
    assert_eq!(c.retransmit_timeout.map(|t| t.0), Some(200_000_000), "a RoCE transport's timeout carries over");
    assert!(roce.switch.pfc.enabled, "the design's PFC, not the scenario's");
}

/// Every design runs one scenario whose topology suits them all: two
/// planes (NICs of two ports, which HPN bonds) and two NICs a host (SHIFT's
/// backup).
#[test]
fn every_design_runs_a_common_scenario() {
    let mut common = base();
    common["topology"]["planes"] = json!(2);
    for design in Design::ALL {
        let scenario = parse(&under(&common, design));
        let checked = Simulation::check_within(&scenario, &mut Setup::default());
        assert!(checked.unwrap_or_else(|e| panic!("{}: {e}", design.name())), "{}", design.name());
        let mut sim = Simulation::new(scenario).unwrap_or_else(|e| panic!("{}: {e}", design.name()));
        let out = sim.run(&mut |_| true);
        assert_eq!(out.summary["flows_completed"], json!(16), "{}", design.name());
    }
}
