//! Clustermapper (mrc-srv6-multiplane.txt s3): an agent on every node
//! source-routes probes from each NIC port to its T0 and back, and through
//! the T0 to one of its T1s and back, every period. Static SRv6 routing
//! makes each probe's path exact, so the results localize a fault: a failed
//! T0 probe blames the NIC-T0 link (or the T0, when every NIC under it
//! fails), a failed T1 probe whose T0 probe succeeded blames that T0-T1
//! link (or the T1, when every link into it fails).
//!
//! This module holds the configuration and the fault map; `sim` sends the
//! probes and feeds the map what came back.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{invalid, ScenarioError};
use crate::units::Time;

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClustermapperConfig {
    /// Probe round period. The paper's agents probe every link every
    /// millisecond.
    pub period: Time,
    /// A probe not back this long after it was sent has failed. Default
    /// 100us, many RTTs of a two-tier fabric.
    pub timeout: Time,
    /// T1s each NIC port probes per round, rotating over its T0's uplinks
    /// ("a subset of the T1 switches", s3). With several NICs under a T0,
    /// one each already covers every uplink within a few rounds.
    pub t1_probes: u32,
    /// Consecutive failed probes that make an element down.
    pub down_after: u32,
    /// Failed probes among the last `window` that make an element lossy.
    pub lossy_after: u32,
    /// Probes remembered per element (at most 64): a link that was lossy
    /// or down is healthy again once its failures have left the window.
    pub window: u32,
    /// Put links found down or lossy on MRC's denylist, and take them off
    /// once healthy (the policy the paper leaves to operators, s4).
    pub update_denylist: bool,
}

impl Default for ClustermapperConfig {
    fn default() -> Self {
        ClustermapperConfig {
            period: Time::from_us(1000),
            timeout: Time::from_us(100),
            t1_probes: 1,
            down_after: 3,
            lossy_after: 2,
            window: 16,
            update_denylist: false,
        }
    }
}

impl ClustermapperConfig {
    /// Refuses what the agents cannot do: rounds closer than a microsecond
    /// (a round trip through the fabric), more T1s per round than a probe's
    /// 8-bit target field names, thresholds outside the 64-probe history.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let field = |name: &str| format!("clustermapper.{name}");
        if self.period < Time::from_us(1) {
            return invalid(field("period"), format!("{}: rounds at least 1us apart", self.period));
        }
        // Named after the period is known good: with a period of 0 the
        // timeout was blamed.
        if self.timeout >= self.period || self.timeout.0 == 0 {
            return invalid(
                field("timeout"),
                format!(
                    "{}: a probe's timeout must be positive and shorter than the period ({})",
                    self.timeout, self.period
                ),
            );
        }
        if !(1..=255).contains(&self.t1_probes) {
            return invalid(field("t1_probes"), format!("{}: between 1 and 255", self.t1_probes));
        }
        if !(1..=64).contains(&self.window) {
            return invalid(field("window"), format!("{}: between 1 and 64 probes", self.window));
        }
        if !(1..=64).contains(&self.down_after) {
            return invalid(field("down_after"), format!("{}: between 1 and 64 probes", self.down_after));
        }
        if !(1..=self.window).contains(&self.lossy_after) {
            return invalid(
                field("lossy_after"),
                format!("{}: between 1 and window ({})", self.lossy_after, self.window),
            );
        }
        Ok(())
    }
}

/// What the map says about one element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    Healthy,
    Lossy,
    Down,
}

impl Health {
    pub fn name(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Lossy => "lossy",
            Health::Down => "down",
        }
    }
}

/// The recent probe results of one element, newest in bit 0.
#[derive(Clone, Copy, Debug, Default)]
pub struct History {
    failed: u64,
    seen: u32,
}

impl History {
    pub fn record(&mut self, ok: bool) {
        self.failed = self.failed << 1 | u64::from(!ok);
        self.seen = self.seen.saturating_add(1);
    }

    /// Probes recorded so far.
    pub fn seen(&self) -> u32 {
        self.seen
    }

    /// The element's health under `cfg`'s thresholds.
    pub fn health(&self, cfg: &ClustermapperConfig) -> Health {
        let window = cfg.window.clamp(1, 64);
        let mask = if window == 64 { u64::MAX } else { (1u64 << window) - 1 };
        let down = cfg.down_after.clamp(1, 64);
        let down_mask = if down == 64 { u64::MAX } else { (1u64 << down) - 1 };
        // No verdict before `down_after` probes: two early failures are the
        // start of "down" as much as a sign of loss.
        if self.seen < down {
            Health::Healthy
        } else if self.failed & down_mask == down_mask {
            Health::Down
        } else if (self.failed & mask).count_ones() >= cfg.lossy_after.max(1) {
            Health::Lossy
        } else {
            Health::Healthy
        }
    }

    /// Fraction of the remembered probes that failed.
    pub fn loss(&self, cfg: &ClustermapperConfig) -> f64 {
        let window = cfg.window.clamp(1, 64).min(self.seen.max(1));
        let mask = if window == 64 { u64::MAX } else { (1u64 << window) - 1 };
        (self.failed & mask).count_ones() as f64 / window as f64
    }
}

/// The health of a switch from the links that reach it: down when every
/// one of at least two is down (one dead link cannot tell a dead switch
/// from a dead cable), else healthy as far as its links say.
pub fn switch_health(links: impl Iterator<Item = Health>) -> Health {
    let (mut count, mut down) = (0, 0);
    for h in links {
        count += 1;
        down += usize::from(h == Health::Down);
    }
    if count >= 2 && down == count {
        Health::Down
    } else {
        Health::Healthy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_failures_mean_down_and_scattered_ones_lossy() {
        let cfg = ClustermapperConfig::default();
        let mut h = History::default();
        for _ in 0..10 {
            h.record(true);
        }
        assert_eq!(h.health(&cfg), Health::Healthy);
        h.record(false);
        assert_eq!(h.health(&cfg), Health::Healthy);
        h.record(true);
        h.record(false);
        assert_eq!(h.health(&cfg), Health::Lossy);
        h.record(false);
        h.record(false);
        assert_eq!(h.health(&cfg), Health::Down);
        for _ in 0..40 {
            h.record(true);
        }
        assert_eq!(h.health(&cfg), Health::Healthy);
    }

    #[test]
    fn a_switch_is_down_only_when_all_its_links_are() {
        use Health::*;
        assert_eq!(switch_health([Down, Down, Down].into_iter()), Down);
        assert_eq!(switch_health([Down, Healthy].into_iter()), Healthy);
        assert_eq!(switch_health([Down].into_iter()), Healthy);
    }
}
