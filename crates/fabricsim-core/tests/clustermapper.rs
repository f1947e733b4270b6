//! Clustermapper (mrc-srv6-multiplane.txt s3): probes from every NIC port
//! to its T0 and back and through a T1 and back localize a failed link or
//! switch exactly, and its verdicts can feed MRC's denylist.

mod common;

use common::{floats, run, summary_u64, texts};
use serde_json::{json, Value};

fn scenario(faults: Value) -> Value {
    json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps"},
        "switch": {"pfc": {"enabled": false}, "trimming": {"enabled": true}, "forwarding": "srv6"},
        "transport": {"kind": "mrc"},
        "duration": "12ms",
        "clustermapper": {},
        "faults": faults,
    })
}

/// Verdicts as (time, element, kind, health).
fn verdicts(out: &fabricsim_core::RunOutput) -> Vec<(f64, String, String, String)> {
    let t = floats(&out.clustermapper, "time_s");
    let (e, k, h) =
        (texts(&out.clustermapper, "element"), texts(&out.clustermapper, "kind"), texts(&out.clustermapper, "health"));
    (0..t.len()).map(|i| (t[i].unwrap(), e[i].clone(), k[i].clone(), h[i].clone())).collect()
}

#[test]
fn a_healthy_fabric_gets_no_verdicts() {
    let out = run(scenario(json!([])));
    assert!(verdicts(&out).is_empty(), "{:?}", verdicts(&out));
    // 32 NICs, each probing its T0 and one T1 every millisecond, 0 to 12 ms.
    assert_eq!(summary_u64(&out, "clustermapper_probes"), 13 * 32 * 2);
}

#[test]
fn a_failed_t0_t1_link_is_named_and_its_recovery_seen() {
    let mut s = scenario(json!([
        {"kind": "link_flap", "at": "500us", "port": "t0.p0.2:5", "duration": "6ms"},
    ]));
    s["duration"] = json!("30ms");
    let out = run(s);
    let v = verdicts(&out);
    assert_eq!(v.iter().filter(|r| r.1 != "t0.p0.2:5").count(), 0, "{v:?}");
    let down = v.iter().find(|r| r.3 == "down").expect("down verdict");
    assert_eq!(down.2, "t0_t1_link");
    // Three consecutive failed probes of the link, a few rounds after 0.5 ms.
    assert!(down.0 > 2e-3 && down.0 < 6e-3, "{v:?}");
    // Healthy again once the failed probes have left the 16-probe window.
    let healthy = v.iter().find(|r| r.3 == "healthy").expect("healthy again");
    assert!(healthy.0 > 6.5e-3 && healthy.0 < 25e-3, "{v:?}");
}

#[test]
fn a_lossy_nic_link_and_a_dead_t0_are_told_apart() {
    let out = run(scenario(json!([
        {"kind": "loss_rate", "at": "0us", "port": "nic5:0", "rate": 0.3},
        {"kind": "switch_down", "at": "0us", "switch": "t0.p0.3"},
    ])));
    let v = verdicts(&out);
    let of = |element: &str| v.iter().filter(|r| r.1 == element).map(|r| r.3.clone()).collect::<Vec<_>>();
    assert!(of("nic5:0").iter().any(|h| h == "lossy" || h == "down"), "{v:?}");
    assert_eq!(of("t0.p0.3"), ["down"], "{v:?}");
    // Every NIC link under the dead T0 is down too, and no T1 is blamed.
    assert_eq!((12..16).filter(|n| of(&format!("nic{n}:0")) == ["down"]).count(), 4, "{v:?}");
    assert!(v.iter().all(|r| r.2 != "t1_switch" && r.2 != "t0_t1_link"), "{v:?}");
}

#[test]
fn verdicts_on_the_denylist_spare_mrc_the_losses() {
    // A link is dead from the start; traffic starts at 5 ms. With the
    // denylist fed by Clustermapper, MRC never sprays onto it.
    let traffic = json!([{"kind": "flow", "src": 0, "dst": 4, "bytes": "8MB", "start": "5ms"}]);
    let faults = json!([{"kind": "link_down", "at": "0us", "port": "t0.p0.0:4"}]);
    let mut s = scenario(faults);
    s["traffic"] = traffic;
    s["duration"] = Value::Null;
    let blind = run(s.clone());
    s["clustermapper"] = json!({"update_denylist": true});
    let mapped = run(s);
    assert_eq!(summary_u64(&mapped, "flows_completed"), 1);
    assert!(summary_u64(&blind, "retired_evs") > 0, "{}", blind.summary);
    assert_eq!(summary_u64(&mapped, "retired_evs"), 0, "{}", mapped.summary);
}
