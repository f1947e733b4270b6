//! The scenario schema: one serde type tree, owned by the core, with unknown
//! fields rejected. Its JSON Schema is exported for editors and for
//! `fabricsim schema`; Python never re-declares it.

pub mod design;
mod shape;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::clustermapper::ClustermapperConfig;
use crate::error::{invalid, number, once_each, ScenarioError};
use crate::faults::FaultSpec;
use crate::metrics::{Facing, TelemetryConfig};
use crate::net::{Forwarding, SwitchConfig};
use crate::nic::{NicConfig, PathSelection};
use crate::tagged::nest;
use crate::topology::TopologySpec;
use crate::transport::TransportSpec;
use crate::units::{Bytes, Rate, Time};
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
    /// A design whose transport, NIC, forwarding and switch settings are
    /// laid under the scenario's own (docs/DESIGNS.md): `roce`, `mrc`,
    /// `spectrum-x`, `pro`, `hpn` or `shift`. A key the scenario sets
    /// itself wins.
    #[serde(default)]
    pub design: Option<design::Design>,
    /// Master seed: every random stream derives from it.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// `packet` (every packet through every queue) or `flow` (max-min fair
    /// rates over links, for whole clusters; docs/ARCHITECTURE.md lists what
    /// it leaves out). `fabricsim run --mode` overrides it.
    #[serde(default)]
    pub mode: crate::fluid::Mode,
    /// Threads the packet model runs on: 1, or 2 (the NICs and their
    /// switches on one, the switches above them on the other, in windows
    /// of the links' delay between them; docs/ARCHITECTURE.md says what it
    /// does not support yet). A run is byte-identical to itself for either
    /// value; the two can order simultaneous events differently. The flow
    /// model runs on one.
    #[serde(default = "one_thread")]
    pub threads: u8,
    /// What only the flow model reads.
    #[serde(default)]
    pub flow_mode: crate::fluid::FlowModeConfig,
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
    /// Bounds that end a run that cannot end by itself, and refuse one
    /// that would not fit in memory.
    #[serde(default)]
    pub limits: Limits,
    /// Runs this scenario once per point: of one field's values, a grid
    /// or zip of several fields, over seeds. Expanded by `fabricsim run`
    /// (the Python face), not by the core, which ignores it.
    #[serde(default)]
    pub sweep: Option<SweepSpec>,
    /// Scenario files only: a path, or a list of paths relative to this
    /// file, loaded first and merged under its keys (mappings key by key,
    /// anything else replaced). Expanded by the Python face, as `sweep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Include>,
}

/// `include`: one scenario file or several, in order.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Include {
    One(String),
    Several(Vec<String>),
}

/// Bounds on a run. Each is unset by default and then derived from the
/// scenario (docs/RELIABILITY.md gives the formulas and why).
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// A run without `duration` stops here, with `stop_reason: time_limit`,
    /// if its flows and jobs have not finished. Unset: 100 times the
    /// workload's ideal completion time, plus the last fault's time, plus
    /// twice the time the transport takes to give up on a QP, plus 10 ms.
    #[serde(default)]
    pub sim_time: Option<Time>,
    /// A run stops with `stop_reason: livelock` when this many events run
    /// at one simulated instant (time has stopped advancing). Unset:
    /// 1,000,000 plus 16 per port, QP, flow and collective transfer.
    #[serde(default)]
    pub events_per_instant: Option<u64>,
    /// A scenario whose estimated memory exceeds this is refused before it
    /// is built. Unset: the memory the machine has available, as the caller
    /// measures it.
    #[serde(default)]
    pub memory: Option<Bytes>,
}

/// A sweep's points: `parameter` with `values`, `grid`, `zip` (with
/// `grid`, the zipped tuples are the grid's last axis), and `seeds` as the
/// innermost axis; at most 10,000 points.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Dotted path of the field to vary, e.g. `jobs.0.phases.0.collective.bytes`.
    #[serde(default)]
    pub parameter: Option<String>,
    /// The values `parameter` takes, one point each.
    #[serde(default)]
    pub values: Option<Vec<serde_json::Value>>,
    /// Dotted paths and their values: every combination, the first field
    /// varying slowest.
    #[serde(default)]
    pub grid: Option<std::collections::BTreeMap<String, Vec<serde_json::Value>>>,
    /// Dotted paths and lists of one length, taken together.
    #[serde(default)]
    pub zip: Option<std::collections::BTreeMap<String, Vec<serde_json::Value>>>,
    /// Every point once per seed: a count (the scenario's seed and the ones
    /// after it) or a list of seeds.
    #[serde(default)]
    pub seeds: Option<SweepSeeds>,
}

/// `sweep.seeds`: how many, or which.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SweepSeeds {
    Count(u32),
    List(Vec<u64>),
}

/// The scenario with its design's preset laid under it.
fn with_design(mut value: serde_json::Value) -> Result<serde_json::Value, ScenarioError> {
    let Some(named) = value.get("design").filter(|d| !d.is_null()) else { return Ok(value) };
    let design: design::Design = serde_json::from_value(named.clone()).map_err(|_| {
        let names: Vec<&str> = design::Design::ALL.iter().map(|d| d.name()).collect();
        ScenarioError::new("design", format!("{named} is not a design: one of {}", names.join(", ")))
    })?;
    design::lay_under(&mut value, &design.preset());
    Ok(value)
}

fn default_name() -> String {
    "scenario".into()
}

fn default_seed() -> u64 {
    1
}

fn one_thread() -> u8 {
    1
}

impl Scenario {
    /// Parses a scenario from JSON text, naming the field of the first error.
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        // Through a `Value` first: positions in JSON text that the Python
        // face generated would mean nothing to the user.
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ScenarioError::new("scenario", format!("not valid JSON: {e}")))?;
        shape::check(&value)?;
        let value = with_design(value)?;
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

    /// When a run of this scenario stops if nothing else ends it: its
    /// duration, else its time limit (`limits.sim_time`, or 100 ideal
    /// completions `ideal_end`, the last fault, twice the transport's
    /// give-up time and 10 ms). Both models stop there.
    pub fn run_end(&self, ideal_end: Time, last_fault: Time) -> Time {
        if let Some(duration) = self.duration {
            return duration;
        }
        let derived =
            ideal_end.times(100) + last_fault + self.transport.longest_give_up_time().times(2) + Time::from_ms(10);
        self.limits.sim_time.unwrap_or(derived.min(Time::HORIZON))
    }

    /// The scenario with every default filled in, as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a scenario serializes")
    }

    /// Refuses a run with nothing to send: no traffic, no job, no
    /// Clustermapper probing. It would complete at once, reporting a fabric
    /// that carried nothing. Only a run asks it (`Model::build`, and
    /// `resolve` for one): `fabricsim topo` reads such a file for its
    /// topology.
    pub fn check_sends_something(&self) -> Result<(), ScenarioError> {
        if self.traffic.is_empty() && self.jobs.is_empty() && self.clustermapper.is_none() {
            return invalid("traffic", "[], and no jobs: a run would send nothing; give it traffic or a job");
        }
        Ok(())
    }

    /// Checks the values serde cannot: ranges and relations between fields.
    fn validate(&self) -> Result<(), ScenarioError> {
        let sw = &self.switch;
        let positive = |field: &str, v: f64| {
            if v > 0.0 && v.is_finite() {
                Ok(())
            } else {
                Err(ScenarioError::new(field, format!("{}: must be positive", number(v))))
            }
        };
        positive("switch.egress_alpha", sw.egress_alpha)?;
        positive("switch.pfc.xoff_alpha", sw.pfc.xoff_alpha)?;
        if !(0.0..=1.0).contains(&sw.ecn.pmax) {
            return Err(ScenarioError::new(
                "switch.ecn.pmax",
                format!("{}: a probability in [0, 1]", number(sw.ecn.pmax)),
            ));
        }
        if sw.ecn.kmax.0 < sw.ecn.kmin.0 {
            return Err(ScenarioError::new(
                "switch.ecn.kmax",
                format!("{} is below kmin {}", sw.ecn.kmax, sw.ecn.kmin),
            ));
        }
        self.validate_adaptive()?;
        self.validate_drill()?;
        if self.nic.mtu.0 == 0 || self.nic.mtu.0 > 9000 {
            return Err(ScenarioError::new("nic.mtu", format!("{}: between 1B and 9000B", self.nic.mtu)));
        }
        if self.nic.batch == 0 {
            return Err(ScenarioError::new("nic.batch", "0: a QP sends at least one packet per turn"));
        }
        self.validate_transport()?;
        self.validate_buffers()?;
        self.validate_rates()?;
        if !(1..=2).contains(&self.threads) {
            return Err(ScenarioError::new("threads", format!("{}: 1 or 2", self.threads)));
        }
        if matches!(self.duration, Some(Time(0))) {
            return Err(ScenarioError::new("duration", "0ns: a run must last some time"));
        }
        self.validate_within_duration()?;
        if matches!(self.limits.sim_time, Some(Time(0))) {
            return Err(ScenarioError::new("limits.sim_time", "0ns: a run must be allowed some time"));
        }
        if self.limits.events_per_instant == Some(0) {
            return Err(ScenarioError::new("limits.events_per_instant", "0: every run has events"));
        }
        if matches!(self.telemetry.sample_interval, Some(Time(0))) {
            return Err(ScenarioError::new("telemetry.sample_interval", "0ns: must be positive"));
        }
        self.validate_relations()
    }

    /// Refuses rates no device runs at: a flow paced below what a NIC's
    /// rate limiter can be set to, a link between GPUs slower than any
    /// link (the fabric's links are checked with the topology).
    fn validate_rates(&self) -> Result<(), ScenarioError> {
        for (i, traffic) in self.traffic.iter().enumerate() {
            if let Some(rate) = traffic.rate().filter(|&r| r < Rate::SLOWEST_PACING) {
                return invalid(
                    format!("traffic[{i}].rate"),
                    format!(
                        "{rate}: below {}, the unit a NIC's rate limiter is set in; is a unit missing?",
                        Rate::SLOWEST_PACING
                    ),
                );
            }
        }
        crate::error::link_rate("intra_host.rate", self.intra_host.rate)
    }

    /// Refuses faults timed at or after `duration`: the run ends before
    /// they would strike. (Traffic and jobs may start later: their QPs
    /// exist from the start, idle, as shift/table1_idle_qps.yaml needs.)
    /// Likewise what is sampled too seldom to be sampled within it.
    fn validate_within_duration(&self) -> Result<(), ScenarioError> {
        let Some(end) = self.duration else { return Ok(()) };
        // Sampled at the start and, for the tail, at the end: with no tick
        // in between, the series is the run's average, said already.
        if let Some(interval) = self.telemetry.sample_interval.filter(|&t| t >= end) {
            return invalid(
                "telemetry.sample_interval",
                format!("{interval}: not shorter than duration {end}, so no tick would fall between its start and end"),
            );
        }
        if let Some(imbalance) = &self.telemetry.imbalance {
            for (name, t) in [("queue_interval", imbalance.queue_interval), ("load_interval", imbalance.load_interval)]
            {
                if t > end {
                    return invalid(
                        format!("telemetry.imbalance.{name}"),
                        format!("{t}: longer than duration {end}, so it would never be sampled"),
                    );
                }
            }
        }
        match self.faults.iter().position(|f| f.at() >= end) {
            Some(i) => invalid(
                format!("faults[{i}].at"),
                format!("{}: not before duration {end}, so it would never strike", self.faults[i].at()),
            ),
            None => Ok(()),
        }
    }

    /// Refuses adaptive-routing settings a switch could not sample or band.
    /// They are checked whatever the forwarding, so that a scenario that
    /// switches to `adaptive` later does not meet a new error.
    fn validate_adaptive(&self) -> Result<(), ScenarioError> {
        let ar = &self.switch.adaptive;
        if ar.sample_interval < Time::from_ns(1) {
            return invalid(
                "switch.adaptive.sample_interval",
                format!("{}: a switch samples its queues at most once a nanosecond (at least 1ns)", ar.sample_interval),
            );
        }
        if ar.bands.len() > MAX_AR_BANDS {
            return invalid(
                "switch.adaptive.bands",
                format!("{} edges: at most {MAX_AR_BANDS} (hardware grades a port in a few bits)", ar.bands.len()),
            );
        }
        if let Some(w) = ar.bands.windows(2).find(|w| w[1] <= w[0]) {
            return invalid("switch.adaptive.bands", format!("{} after {}: band edges must increase", w[1], w[0]));
        }
        Ok(())
    }

    /// Refuses DRILL and Tomahawk settings no switch has, whatever the
    /// forwarding (DRILL's sample count against the topology's groups is
    /// the build's check).
    fn validate_drill(&self) -> Result<(), ScenarioError> {
        let drill = &self.switch.drill;
        if drill.samples == 0 {
            return invalid("switch.drill.samples", "0: DRILL compares at least one sampled port");
        }
        let ar = &self.switch.tomahawk_ar;
        if ar.load_weight > 100 {
            return invalid("switch.tomahawk_ar.load_weight", format!("{}: a percentage, 0 to 100", ar.load_weight));
        }
        if ar.update_interval < Time::from_ns(1) {
            return invalid("switch.tomahawk_ar.update_interval", format!("{}: at least 1ns", ar.update_interval));
        }
        if ar.queue_max.0 < 8 {
            return invalid("switch.tomahawk_ar.queue_max", format!("{}: at least 8B, one per band", ar.queue_max));
        }
        if ar.ewma_exponent > 16 {
            return invalid("switch.tomahawk_ar.ewma_exponent", format!("{}: at most 16", ar.ewma_exponent));
        }
        if drill.memory > MAX_DRILL_MEMORY {
            return invalid(
                "switch.drill.memory",
                format!("{}: at most {MAX_DRILL_MEMORY} remembered ports (DRILL's m is a few registers)", drill.memory),
            );
        }
        Ok(())
    }

    /// Refuses transport parameters no NIC could run: zero timers (which
    /// would fire forever at one instant), gains outside their ranges,
    /// windows below one packet.
    fn validate_transport(&self) -> Result<(), ScenarioError> {
        let field = |name: &str| format!("transport.{name}");
        let mtu = self.nic.mtu.0;
        match &self.transport {
            TransportSpec::Rocev2(c) => {
                validate_rc(c.qps, c.ack_every, c.timeout_exponent, c.retry_count)?;
                if c.ooo_window && !c.direct_placement {
                    return invalid(
                        field("ooo_window"),
                        "true: PRO's window waits for reordered packets, which needs direct_placement: true",
                    );
                }
                if c.mprdma_bitmap.is_some() && !c.direct_placement {
                    return invalid(
                        field("mprdma_bitmap"),
                        "set: MP-RDMA's bitmap records reordered packets, which needs direct_placement: true",
                    );
                }
                if c.mprdma_bitmap.is_some() && c.ooo_window {
                    return invalid(
                        field("mprdma_bitmap"),
                        "set with ooo_window: true; a responder detects loss by one of them, not both",
                    );
                }
                if c.mprdma_bitmap == Some(0) {
                    return invalid(field("mprdma_bitmap"), "0: the bitmap holds at least one packet");
                }
                if c.ooo_window_initial == Some(0) {
                    return invalid(field("ooo_window_initial"), "0: the window holds at least one packet");
                }
                if let Some(t) = c.retransmit_timeout {
                    if c.timeout_exponent.is_some() {
                        return invalid(
                            field("retransmit_timeout"),
                            "set either retransmit_timeout or timeout_exponent, not both",
                        );
                    }
                    nic_timer(&field("retransmit_timeout"), t)?;
                }
                let d = &c.dcqcn;
                fraction(&field("dcqcn.g"), d.g)?;
                fraction(&field("dcqcn.min_decrease_factor"), d.min_decrease_factor)?;
                // (A zero cnp_interval is allowed: a CNP for every marked packet.)
                for (name, t) in [("alpha_update", d.alpha_update), ("rate_increase_timer", d.rate_increase_timer)] {
                    nic_timer(&field(&format!("dcqcn.{name}")), t)?;
                }
                at_least_one(&field("dcqcn.byte_counter"), d.byte_counter.0, "a rate step needs some bytes sent")?;
                at_least_one(&field("read_depth"), c.read_depth.into(), "a reader asks for at least one READ")?;
            }
            TransportSpec::Spx(c) => {
                validate_rc(c.qps, c.ack_every, c.timeout_exponent, c.retry_count)?;
                nic_timer(&field("probe_interval"), c.probe_interval)?;
                nic_timer(&field("loss_timeout"), c.loss_timeout)?;
                at_least_one(&field("esr_evs"), c.esr_evs.into(), "esr sprays over at least one EV per plane")?;
                // Distinct RoCEv2 source ports (0xC000 up) for 8 planes.
                if c.esr_evs > 2048 {
                    return invalid(field("esr_evs"), format!("{}: at most 2048 per plane", c.esr_evs));
                }
                at_least_one(&field("failure_probes"), c.failure_probes.into(), "a plane fails after a missed probe")?;
                if !(1.0..=16.0).contains(&c.failure_backoff) {
                    return invalid(
                        field("failure_backoff"),
                        format!("{}: must be in [1, 16]", number(c.failure_backoff)),
                    );
                }
                let silence = c.remote_failure_intervals() * c.probe_interval.0 as f64;
                if silence > Time::from_ms(60_000).0 as f64 {
                    return invalid(
                        field("failure_probes"),
                        format!(
                            "{} (backoff {}): a remote plane failure would be found only after more than 60s of \
                             silence",
                            c.failure_probes, c.failure_backoff
                        ),
                    );
                }
                let cc = &c.cc;
                nic_timer(&field("cc.increase_interval"), cc.increase_interval)?;
                fraction(&field("cc.gamma"), cc.gamma)?;
                fraction(&field("cc.max_decrease"), cc.max_decrease)?;
                fraction(&field("cc.additive_increase"), cc.additive_increase)?;
                fraction(&field("cc.min_rate"), cc.min_rate)?;
            }
            TransportSpec::Mrc(c) => {
                at_least_one(&field("qps"), c.qps.into(), "a connection needs at least one QP")?;
                at_least_one(&field("evs"), c.evs.into(), "a QP needs entropy values to spray on")?;
                at_least_one(&field("reverse_evs"), c.reverse_evs.into(), "control packets need an EV per plane")?;
                if c.reverse_evs > 8192 {
                    return invalid(field("reverse_evs"), format!("{}: at most 8192 per plane", c.reverse_evs));
                }
                // An EV names one of 2^13 paths in each of 8 planes.
                if c.evs as u64 + c.backup_evs as u64 > 8 * 8192 {
                    return invalid(
                        field("evs"),
                        format!(
                            "{} active and {} backup: at most 65536 in all (8 planes of 8192 paths)",
                            c.evs, c.backup_evs
                        ),
                    );
                }
                if let Some(paths) = c.paths_per_plane {
                    if !(1..=8192).contains(&paths) {
                        return invalid(field("paths_per_plane"), format!("{paths}: between 1 and 8192"));
                    }
                }
                at_least_one(&field("resurrect_after"), c.resurrect_after.into(), "a retired EV needs a probe back")?;
                for (name, t) in [
                    ("rto", c.rto),
                    ("rto_low", c.rto_low),
                    ("rto_min", c.rto_min),
                    ("probe_interval", c.probe_interval),
                    ("reverse_probe_interval", c.reverse_probe_interval),
                    ("error_timeout", c.error_timeout),
                ] {
                    nic_timer(&field(name), t)?;
                }
                positive_time(&field("reorder_window"), c.reorder_window)?;
                if let Some(window) = c.window {
                    if window.0 < mtu {
                        return invalid(
                            field("window"),
                            format!("{window}: at least one packet (nic.mtu {})", self.nic.mtu),
                        );
                    }
                }
                let cc = &c.cc;
                positive_time(&field("cc.target_delay"), cc.target_delay)?;
                positive_time(&field("cc.reference_rtt"), cc.reference_rtt)?;
                fraction(&field("cc.gamma"), cc.gamma)?;
                fraction(&field("cc.delay_gain"), cc.delay_gain)?;
                for (name, v) in [
                    ("fair_increase", cc.fair_increase),
                    ("eta", cc.eta),
                    ("quick_adapt_delays", cc.quick_adapt_delays),
                ] {
                    if !(v > 0.0 && v.is_finite()) {
                        return invalid(field(&format!("cc.{name}")), format!("{}: must be positive", number(v)));
                    }
                }
            }
        }
        Ok(())
    }

    /// Refuses buffers and thresholds that cannot hold or release one full
    /// data frame: a switch that refuses every packet, a pause that never
    /// resumes.
    fn validate_buffers(&self) -> Result<(), ScenarioError> {
        let sw = &self.switch;
        let srv6 = if sw.forwarding == Forwarding::Srv6 { crate::net::headers::SRV6_OUTER } else { 0 };
        let most = crate::transport::DataHeaders::most().bytes();
        let frame = u64::from(crate::net::headers::data_wire(self.nic.ip, self.nic.mtu.0 as u32, most) + srv6);
        if sw.buffer.0 < frame {
            return invalid(
                "switch.buffer",
                format!("{}: smaller than one full data frame ({frame}B at nic.mtu {})", sw.buffer, self.nic.mtu),
            );
        }
        if sw.pfc.enabled {
            let threshold = sw.pfc.xoff_alpha * sw.buffer.0 as f64;
            if sw.pfc.xon_offset.0 as f64 >= threshold {
                return invalid(
                    "switch.pfc.xon_offset",
                    format!(
                        "{}: not below the largest pause threshold (xoff_alpha x buffer = {threshold:.0}B), so a \
                         paused port would never resume",
                        sw.pfc.xon_offset
                    ),
                );
            }
            if let Some(headroom) = sw.pfc.headroom {
                if headroom.0 < frame {
                    return invalid(
                        "switch.pfc.headroom",
                        format!("{headroom}: smaller than one full data frame ({frame}B)"),
                    );
                }
            }
        }
        if sw.trimming.enabled && !(64..frame).contains(&sw.trimming.size.0) {
            return invalid(
                "switch.trimming.size",
                format!("{}: a trimmed packet keeps 64B to less than a full frame ({frame}B)", sw.trimming.size),
            );
        }
        if sw.trimming.enabled && sw.trim_threshold() == 0 {
            let why = if sw.trimming.threshold.is_some() { "" } else { " (unset, it is switch.ecn.kmax)" };
            return invalid(
                "switch.trimming.threshold",
                format!("0B{why}: every data packet would be trimmed and none delivered"),
            );
        }
        Ok(())
    }

    /// Checks the settings that only make sense with others: what needs SRv6,
    /// sampling, or a multipath transport.
    fn validate_relations(&self) -> Result<(), ScenarioError> {
        let srv6 = self.switch.forwarding == Forwarding::Srv6;
        let telemetry = &self.telemetry;
        // What is sampled needs a sampling period; unset, none is taken.
        if telemetry.sample_interval.is_none() {
            let listed = |n: usize, what: &str| format!("{n} {what} listed, but");
            for (set, field, what) in [
                (telemetry.ev_activity, "telemetry.ev_activity", "true:".to_string()),
                (!telemetry.ports.is_empty(), "telemetry.ports", listed(telemetry.ports.len(), "port(s)")),
                (!telemetry.hosts.is_empty(), "telemetry.hosts", listed(telemetry.hosts.len(), "NIC(s)")),
            ] {
                if set {
                    return invalid(field, format!("{what} its series are sampled; set telemetry.sample_interval"));
                }
            }
        }
        // A capture, histogram or imbalance record of nothing.
        let (pcap, histograms, imbalance) = (&telemetry.pcap, &telemetry.histograms, &telemetry.imbalance);
        for (empty, field, value, what) in [
            (pcap.as_ref().is_some_and(|p| p.ports.is_empty()), "telemetry.pcap.ports", "[]", "a port"),
            (pcap.as_ref().is_some_and(|p| p.max_packets == 0), "telemetry.pcap.max_packets", "0", "a packet"),
            (histograms.as_ref().is_some_and(|h| h.ports.is_empty()), "telemetry.histograms.ports", "[]", "a port"),
            (imbalance.as_ref().is_some_and(|i| i.groups.is_empty()), "telemetry.imbalance.groups", "[]", "a group"),
        ] {
            if empty {
                return invalid(
                    field,
                    format!("{value}: it records at least {what}; leave the section out to record none"),
                );
            }
        }
        if let Some(h) = &telemetry.histograms {
            if h.resolution < Time::from_ns(1) {
                return invalid("telemetry.histograms.resolution", format!("{}: at least 1ns", h.resolution));
            }
            if !(1..=1000).contains(&h.bands) {
                return invalid("telemetry.histograms.bands", format!("{}: 1 to 1000 bands", h.bands));
            }
        }
        if let Some(imbalance) = &telemetry.imbalance {
            for (name, t) in [("queue_interval", imbalance.queue_interval), ("load_interval", imbalance.load_interval)]
            {
                if t < Time::from_ns(1) {
                    return invalid(format!("telemetry.imbalance.{name}"), format!("{t}: at least 1ns"));
                }
            }
            let groups: Vec<_> = imbalance.groups.iter().map(|g| (g.tier, g.facing)).collect();
            once_each("telemetry.imbalance.groups", &groups, |i| {
                let (tier, facing) = groups[i];
                format!("{{tier: {tier}, facing: {}}}", if facing == Facing::Up { "up" } else { "down" })
            })?;
            // Two tiers' ups and downs for each of 8 tiers at most.
            if imbalance.groups.len() > 16 {
                return invalid(
                    "telemetry.imbalance.groups",
                    format!("{} groups: at most 16 (a tier and a direction each)", imbalance.groups.len()),
                );
            }
        }
        if let Some(pcap) = &telemetry.pcap {
            if pcap.snaplen.0 < 64 {
                return Err(ScenarioError::new(
                    "telemetry.pcap.snaplen",
                    format!("{}: keep at least 64B", pcap.snaplen),
                ));
            }
        }
        if self.nic.path_selection == PathSelection::Orchestrated && !matches!(self.transport, TransportSpec::Rocev2(_))
        {
            return invalid(
                "nic.path_selection",
                "orchestrated: this transport picks its packets' paths itself (EVs, planes); PRO's orchestration \
                 stamps paths on QPs of one path each (transport.kind: rocev2)",
            );
        }
        if self.nic.shift.is_some() && !matches!(self.transport, TransportSpec::Rocev2(_)) {
            return invalid(
                "nic.shift",
                "SHIFT wraps RoCE RC verbs (transport.kind: rocev2); MRC and Spectrum-X NICs fail over by themselves",
            );
        }
        if self.nic.path_selection == PathSelection::Orchestrated {
            if let Some(j) = self.jobs.iter().position(|j| j.checkpoint.is_some()) {
                return invalid(
                    format!("jobs[{j}].checkpoint"),
                    "a job that restarts opens new QPs, and PRO's orchestration (nic.path_selection: \
                     orchestrated) plans its path sets once for the QPs of the start",
                );
            }
        }
        if self.nic.path_selection == PathSelection::Disjoint
            && (self.switch.forwarding != Forwarding::Ecmp || !matches!(self.transport, TransportSpec::Rocev2(_)))
        {
            return invalid(
                "nic.path_selection",
                "disjoint: the host replays the switches' ECMP hash to pick each QP's one path (RePaC); it needs \
                 switch.forwarding: ecmp and transport.kind: rocev2",
            );
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
            Some(cfg) => cfg.validate(),
            None => Ok(()),
        }
    }
}

/// The settings of an RDMA reliable connection (`rocev2`, `spx`) that the
/// IBTA bounds.
fn validate_rc(qps: u32, ack_every: u32, timeout_exponent: Option<u8>, retry_count: u32) -> Result<(), ScenarioError> {
    at_least_one("transport.qps", qps.into(), "a connection needs at least one QP")?;
    at_least_one("transport.ack_every", ack_every.into(), "acknowledge at least every packet")?;
    if let Some(exponent) = timeout_exponent.filter(|&e| e > 31) {
        return invalid("transport.timeout_exponent", format!("{exponent}: at most 31 (IBTA 5-bit field)"));
    }
    if retry_count > 7 {
        return invalid("transport.retry_count", format!("{retry_count}: at most 7 (IBTA 3-bit field)"));
    }
    Ok(())
}

/// Most ports DRILL remembers per decision: the paper's m is 1 to a few.
const MAX_DRILL_MEMORY: u32 = 16;

/// Most band edges of adaptive routing: 16 bands, a 4-bit port grade.
const MAX_AR_BANDS: usize = 15;

fn at_least_one(field: &str, value: u64, why: &str) -> Result<(), ScenarioError> {
    if value == 0 {
        return invalid(field, format!("0: {why}"));
    }
    Ok(())
}

/// A time that must not be zero.
fn positive_time(field: &str, t: Time) -> Result<(), ScenarioError> {
    if t == Time::ZERO {
        return invalid(field, "0ns: must be positive");
    }
    Ok(())
}

/// A NIC's timer fires at most once a microsecond: IBTA's shortest ACK
/// timeout is 4.096us and DCQCN's timers are set in microseconds. Shorter
/// would not model a NIC, and a picosecond timer re-armed forever makes a
/// run of billions of events (a zero one, an endless loop at one instant).
fn nic_timer(field: &str, t: Time) -> Result<(), ScenarioError> {
    if t < Time::from_us(1) {
        return invalid(field, format!("{t}: a NIC timer fires at most once a microsecond (at least 1us)"));
    }
    Ok(())
}

/// A gain or factor in (0, 1].
fn fraction(field: &str, v: f64) -> Result<(), ScenarioError> {
    if !(v > 0.0 && v <= 1.0) {
        return invalid(field, format!("{}: must be in (0, 1]", number(v)));
    }
    Ok(())
}

/// JSON Schema of scenarios.
pub fn json_schema() -> String {
    serde_json::to_string_pretty(&schemars::schema_for!(Scenario)).expect("schema serializes")
}
