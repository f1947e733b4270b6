//! Designs as presets (`design:` in a scenario): the transport, NIC,
//! forwarding and switch settings that make each published system, laid
//! under what the scenario sets itself, so that one scenario runs under
//! every design (`fabricsim compare`) and an explicit key still wins.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A published design, or the RoCEv2 baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// RoCEv2 over ECMP on a lossless fabric: PFC, DCQCN on ECN marks,
    /// go-back-N.
    Roce,
    /// MRC (mrc-srv6-multiplane.txt): packet spraying over EVs on every
    /// plane, static SRv6 paths, a lossy fabric that trims.
    Mrc,
    /// Spectrum-X (spectrum-x.txt): adaptive routing per packet in the
    /// switches, the NIC's plane load balancer with per-plane congestion
    /// control, lossless.
    SpectrumX,
    /// PRO (pro-deterministic-lb.txt): orchestrated round robin of PathIDs
    /// forwarded by PathID, out-of-order placement with its AIMD window.
    Pro,
    /// HPN (alibaba-hpn.txt): a NIC's two ports bonded by LACP to two ToRs,
    /// connections on disjoint paths (RePaC).
    Hpn,
    /// SHIFT (shift-rdma-failover.txt): RoCEv2 that fails over to a backup
    /// NIC of the host and back.
    Shift,
}

impl Design {
    pub const ALL: [Design; 6] =
        [Design::Roce, Design::Mrc, Design::SpectrumX, Design::Pro, Design::Hpn, Design::Shift];

    pub fn name(self) -> &'static str {
        match self {
            Design::Roce => "roce",
            Design::Mrc => "mrc",
            Design::SpectrumX => "spectrum-x",
            Design::Pro => "pro",
            Design::Hpn => "hpn",
            Design::Shift => "shift",
        }
    }

    /// The settings the design implies (docs/DESIGNS.md has them as a table,
    /// with where each comes from).
    pub fn preset(self) -> Value {
        match self {
            Design::Roce => json!({
                "switch": {"forwarding": "ecmp", "pfc": {"enabled": true}, "ecn": {"enabled": true},
                           "trimming": {"enabled": false}},
                "transport": {"kind": "rocev2"},
            }),
            Design::Mrc => json!({
                "switch": {"forwarding": "srv6", "pfc": {"enabled": false}, "trimming": {"enabled": true},
                           "ecn": {"last_hop": false}},
                "transport": {"kind": "mrc"},
            }),
            Design::SpectrumX => json!({
                "switch": {"forwarding": "adaptive", "pfc": {"enabled": true}, "trimming": {"enabled": false}},
                "transport": {"kind": "spx"},
            }),
            Design::Pro => json!({
                "switch": {"forwarding": "path_id", "pfc": {"enabled": true}, "trimming": {"enabled": false}},
                "nic": {"path_selection": "orchestrated"},
                // Its NIC resends a tail loss after 80us (s6.A).
                "transport": {"kind": "rocev2", "direct_placement": true, "ooo_window": true,
                              "retransmit_timeout": "80us"},
            }),
            Design::Hpn => json!({
                "switch": {"forwarding": "ecmp", "pfc": {"enabled": true}, "trimming": {"enabled": false}},
                "nic": {"port_failover": "lacp", "path_selection": "disjoint"},
                "transport": {"kind": "rocev2"},
            }),
            Design::Shift => json!({
                "switch": {"forwarding": "ecmp", "pfc": {"enabled": true}, "trimming": {"enabled": false}},
                "nic": {"shift": {}},
                "transport": {"kind": "rocev2"},
            }),
        }
    }
}

/// Lays `preset` under `scenario`: every key the scenario sets wins, objects
/// are merged key by key. A transport of another kind than the preset's
/// replaces it whole (its other keys would not fit).
pub fn lay_under(scenario: &mut Value, preset: &Value) {
    let (Value::Object(mine), Value::Object(theirs)) = (scenario, preset) else { return };
    for (key, default) in theirs {
        match mine.get_mut(key) {
            None => {
                mine.insert(key.clone(), default.clone());
            }
            Some(set) if key == "transport" && set.get("kind").is_some_and(|k| Some(k) != default.get("kind")) => {}
            Some(set) => lay_under(set, default),
        }
    }
}

/// `scenario` under `design` instead of whatever it chose: the settings any
/// design sets are taken out (a transport of another kind whole), and
/// `design` is named. What is left (topology, workload, faults, buffers,
/// a RoCE transport's timeouts under another RoCE design) stays.
pub fn under(scenario: &Value, design: Design) -> Value {
    let mut out = scenario.clone();
    let Value::Object(map) = &mut out else { return out };
    for other in Design::ALL {
        take_out(map, &other.preset(), design);
    }
    map.insert("design".into(), json!(design.name()));
    out
}

/// Removes from `map` each leaf `preset` sets; a transport whole, unless it
/// is of `design`'s kind.
fn take_out(map: &mut serde_json::Map<String, Value>, preset: &Value, design: Design) {
    let Value::Object(theirs) = preset else { return };
    for (key, default) in theirs {
        if key == "transport" {
            let kind = design.preset()["transport"]["kind"].clone();
            if map.get(key).and_then(|t| t.get("kind")).is_some_and(|k| *k != kind) {
                map.remove(key);
            }
            continue;
        }
        match (map.get_mut(key), default) {
            (Some(Value::Object(inner)), Value::Object(_)) if !default.as_object().is_some_and(|d| d.is_empty()) => {
                take_out(inner, default, design);
            }
            (Some(_), _) => {
                map.remove(key);
            }
            (None, _) => {}
        }
    }
}
