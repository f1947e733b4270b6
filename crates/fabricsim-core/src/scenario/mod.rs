//! The scenario schema: one serde type tree, owned by the core, with unknown
//! fields rejected. Its JSON Schema is exported for editors and for
//! `fabricsim schema`; Python never re-declares it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::clustermapper::ClustermapperConfig;
use crate::error::ScenarioError;
use crate::faults::FaultSpec;
use crate::metrics::TelemetryConfig;
use crate::net::{Forwarding, SwitchConfig};
use crate::nic::NicConfig;
use crate::tagged::nest;
use crate::topology::TopologySpec;
use crate::transport::TransportSpec;
use crate::units::Time;
use crate::workload::job::{IntraHostConfig, JobSpec};
use crate::workload::TrafficSpec;

/// A complete simulation: topology, switch and NIC parameters, transport,
/// traffic, faults and what to record.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A short name; the default output directory is named after it.
    #[serde(default = "default_name")]
    pub name: String,
    /// Master seed: every random stream derives from it.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Stop at this simulated time; unset runs until every flow completes.
    #[serde(default)]
    pub duration: Option<Time>,
    pub topology: TopologySpec,
    #[serde(default)]
    pub switch: SwitchConfig,
    #[serde(default)]
    pub nic: NicConfig,
    #[serde(default)]
    pub transport: TransportSpec,
    #[serde(default)]
    pub traffic: Vec<TrafficSpec>,
    /// Jobs of collectives and compute phases, placed on the GPUs' NICs.
    #[serde(default)]
    pub jobs: Vec<JobSpec>,
    /// The link between GPUs of one host, used by transfers between ranks on
    /// the same host.
    #[serde(default)]
    pub intra_host: IntraHostConfig,
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// Clustermapper agents on every node, probing the fabric (needs SRv6).
    #[serde(default)]
    pub clustermapper: Option<ClustermapperConfig>,
    /// Runs this scenario once per value of one field. Expanded by
    /// `fabricsim run` (the Python face), not by the core, which ignores it.
    #[serde(default)]
    pub sweep: Option<SweepSpec>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Dotted path of the field to vary, e.g. `jobs.0.phases.0.collective.bytes`.
    pub parameter: String,
    /// The values it takes, one run each.
    pub values: Vec<serde_json::Value>,
}

fn default_name() -> String {
    "scenario".into()
}

fn default_seed() -> u64 {
    1
}

impl Scenario {
    /// Parses a scenario from JSON text, naming the field of the first error.
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        // Through a `Value` first: positions in JSON text that the Python
        // face generated would mean nothing to the user.
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ScenarioError::new("scenario", format!("not valid JSON: {e}")))?;
        let scenario: Scenario = serde_path_to_error::deserialize(value).map_err(|e| {
            let message = nest(&e.path().to_string(), &e.inner().to_string());
            match message.strip_prefix('@').and_then(|m| m.split_once(": ")) {
                Some((field, text)) => ScenarioError::new(field, text),
                None => ScenarioError::new("scenario", message),
            }
        })?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// The scenario with every default filled in, as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a scenario serializes")
    }

    /// Checks the values serde cannot: ranges and relations between fields.
    fn validate(&self) -> Result<(), ScenarioError> {
        let sw = &self.switch;
        let positive = |field: &str, v: f64| {
            if v > 0.0 && v.is_finite() {
                Ok(())
            } else {
                Err(ScenarioError::new(field, format!("{v}: must be positive")))
            }
        };
        positive("switch.egress_alpha", sw.egress_alpha)?;
        positive("switch.pfc.xoff_alpha", sw.pfc.xoff_alpha)?;
        if !(0.0..=1.0).contains(&sw.ecn.pmax) {
            return Err(ScenarioError::new("switch.ecn.pmax", format!("{}: a probability in [0, 1]", sw.ecn.pmax)));
        }
        if sw.ecn.kmax.0 < sw.ecn.kmin.0 {
            return Err(ScenarioError::new(
                "switch.ecn.kmax",
                format!("{} is below kmin {}", sw.ecn.kmax, sw.ecn.kmin),
            ));
        }
        if sw.buffer.0 == 0 {
            return Err(ScenarioError::new("switch.buffer", "0B: a switch needs a buffer"));
        }
        if self.nic.mtu.0 == 0 || self.nic.mtu.0 > 9000 {
            return Err(ScenarioError::new("nic.mtu", format!("{}: between 1B and 9000B", self.nic.mtu)));
        }
        if self.nic.batch == 0 {
            return Err(ScenarioError::new("nic.batch", "0: a QP sends at least one packet per turn"));
        }
        match &self.transport {
            TransportSpec::Rocev2(c) => {
                if c.qps == 0 {
                    return Err(ScenarioError::new("transport.qps", "0: a connection needs at least one QP"));
                }
                if c.ack_every == 0 {
                    return Err(ScenarioError::new("transport.ack_every", "0: acknowledge at least every packet"));
                }
                if c.timeout_exponent > 31 {
                    return Err(ScenarioError::new("transport.timeout_exponent", "at most 31 (IBTA 5-bit field)"));
                }
                positive("transport.dcqcn.g", c.dcqcn.g)?;
            }
            TransportSpec::Mrc(c) => {
                if c.qps == 0 {
                    return Err(ScenarioError::new("transport.qps", "0: a connection needs at least one QP"));
                }
                if c.evs == 0 {
                    return Err(ScenarioError::new("transport.evs", "0: a QP needs entropy values to spray on"));
                }
                if c.rto.0 == 0 {
                    return Err(ScenarioError::new("transport.rto", "0ns: the timer must be positive"));
                }
            }
        }
        if matches!(self.duration, Some(Time(0))) {
            return Err(ScenarioError::new("duration", "0ns: a run must last some time"));
        }
        if matches!(self.telemetry.sample_interval, Some(Time(0))) {
            return Err(ScenarioError::new("telemetry.sample_interval", "0ns: must be positive"));
        }
        self.validate_relations()
    }

    /// Checks the settings that only make sense with others: what needs SRv6,
    /// sampling, or a multipath transport.
    fn validate_relations(&self) -> Result<(), ScenarioError> {
        let srv6 = self.switch.forwarding == Forwarding::Srv6;
        let telemetry = &self.telemetry;
        if telemetry.ev_activity && telemetry.sample_interval.is_none() {
            return Err(ScenarioError::new(
                "telemetry.ev_activity",
                "true: per-EV counts are sampled; set telemetry.sample_interval",
            ));
        }
        if let Some(pcap) = &telemetry.pcap {
            if pcap.snaplen.0 < 64 {
                return Err(ScenarioError::new(
                    "telemetry.pcap.snaplen",
                    format!("{}: keep at least 64B", pcap.snaplen),
                ));
            }
        }
        if !self.transport.denylist().is_empty() && !srv6 {
            return Err(ScenarioError::new(
                "transport.denylist",
                "a denylist names links, and only SRv6 tells which EVs cross them: set switch.forwarding: srv6",
            ));
        }
        let pinned = self.traffic.iter().any(|t| matches!(t, TrafficSpec::Flow(f) if f.ev_set.is_some()));
        if pinned && !self.transport.sprays() {
            return Err(ScenarioError::new("traffic", "a flow's ev_set pins MRC EVs: set transport.kind: mrc"));
        }
        match &self.clustermapper {
            Some(_) if !srv6 => Err(ScenarioError::new(
                "clustermapper",
                "its probes are source-routed to a switch and back: set switch.forwarding: srv6",
            )),
            Some(cfg) if cfg.timeout >= cfg.period || cfg.timeout.0 == 0 => Err(ScenarioError::new(
                "clustermapper.timeout",
                format!(
                    "{}: a probe's timeout must be positive and shorter than the period ({})",
                    cfg.timeout, cfg.period
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// JSON Schema of scenarios.
pub fn json_schema() -> String {
    serde_json::to_string_pretty(&schemars::schema_for!(Scenario)).expect("schema serializes")
}
