//! Spectrum-X congestion control (spectrum-x.txt s4.2, Fig 3), one context
//! per plane of a connection (s4.3). Switches mark ECN only where load
//! balancing is exhausted (every next hop of the packet's group is queued
//! past the marking threshold: `switch.adaptive.mark_on_exhaustion`), the
//! sender reacts only to those marks, and the round-trip time its RTT
//! probes measure sizes the reaction. The paper publishes no constants; the
//! rule below is the delay-scaled multiplicative decrease of the Swift /
//! NSCC family with NSCC's published gains (protocols.md s5.5), and a
//! recovery toward line rate in the manner of DCQCN's fast recovery
//! (protocols.md s3.4), quick because the paper's CC favours completion
//! time over steady-state fairness.
//!
//! On a CNP, at most once per base round trip, when the queueing delay q
//! (the RTT over the base RTT) is over `target_qdelay` (NSCC's rule, gate
//! and gains: a mark with q under target is left to load balancing):
//!   rate <- rate * max(1 - gamma * (q - target_qdelay) / q, 1 - max_decrease)
//! where the RTT is the latest probe's, or the age of the probe still out if
//! that is longer: a probe stuck behind a queue already says the RTT is at
//! least that long, and waiting for it would delay the cut by the queue.
//! Every `increase_interval` without a CNP:
//!   rate <- (rate + line) / 2    while the queueing delay is under target,
//!   rate <- rate + additive_increase * line   otherwise
//! (the queueing delay again counting the age of a probe still out).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::{Rate, Time};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SpxCcConfig {
    pub enabled: bool,
    /// Gain of the delay-scaled decrease. Default 0.8, NSCC's gamma
    /// (protocols.md s5.5).
    pub gamma: f64,
    /// One decrease never cuts more than this fraction. Default 0.5, NSCC's
    /// and Swift's floor of one multiplicative decrease.
    pub max_decrease: f64,
    /// Queueing delay (RTT over the base RTT) under which a mark cuts
    /// nothing and the rate recovers quickly. Default 6us, NSCC's target
    /// queueing delay (protocols.md s5.5).
    pub target_qdelay: Time,
    /// Period of recovery steps without a CNP. Default 10us: a few round
    /// trips of a two-tier fabric, the scale the paper gives CC ("RTT
    /// timescales", s3.2).
    pub increase_interval: Time,
    /// Additive step, as a fraction of line rate, while queueing delay is
    /// over target. Default 0.05.
    pub additive_increase: f64,
    /// Lowest rate, as a fraction of line rate. Default 0.001 (100Mb/s at
    /// 100G, DCQCN's minimum in HPCC and ConWeave).
    pub min_rate: f64,
}

impl Default for SpxCcConfig {
    fn default() -> Self {
        SpxCcConfig {
            enabled: true,
            gamma: 0.8,
            max_decrease: 0.5,
            target_qdelay: Time::from_us(6),
            increase_interval: Time::from_us(10),
            additive_increase: 0.05,
            min_rate: 0.001,
        }
    }
}

/// One congestion-control context: a rate allowance and what the RTT
/// probes last measured.
#[derive(Clone, Debug)]
pub struct SpxCc {
    line: Rate,
    rate: Rate,
    /// Lowest and latest RTT measured.
    base_rtt: Option<Time>,
    rtt: Option<Time>,
    last_decrease: Option<Time>,
    /// A CNP arrived since the last recovery step.
    marked: bool,
}

impl SpxCc {
    pub fn new(line: Rate) -> SpxCc {
        SpxCc { line, rate: line, base_rtt: None, rtt: None, last_decrease: None, marked: false }
    }

    /// The rate allowance.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    pub fn at_line_rate(&self) -> bool {
        self.rate >= self.line
    }

    /// An RTT probe came back after `rtt`.
    pub fn on_rtt(&mut self, rtt: Time) {
        self.rtt = Some(rtt);
        self.base_rtt = Some(self.base_rtt.map_or(rtt, |b| b.min(rtt)));
    }

    /// The round trip as known at `now`: the latest probe's, or the age of
    /// the probe still out (sent at `probe_sent`) if that is longer.
    fn rtt_at(&self, now: Time, probe_sent: Option<Time>) -> Time {
        let waiting = probe_sent.map_or(Time::ZERO, |t| now - t);
        self.rtt.unwrap_or(Time::ZERO).max(waiting)
    }

    fn queueing(&self, rtt: Time) -> Time {
        Time(rtt.0.saturating_sub(self.base_rtt.unwrap_or(rtt).0))
    }

    /// A CNP for this context arrived at `now`; the probe still out, if
    /// any, left at `probe_sent`. Returns true if it cut the rate.
    pub fn on_cnp(&mut self, cfg: &SpxCcConfig, now: Time, probe_sent: Option<Time>) -> bool {
        self.marked = true;
        // At most one cut per base round trip, as NSCC (protocols.md s5.5).
        let base = self.base_rtt.unwrap_or(Time::ZERO);
        if self.last_decrease.is_some_and(|t| now < t + base) {
            return false;
        }
        let rtt = self.rtt_at(now, probe_sent);
        // NSCC's quadrants: a mark with the queueing delay under target is
        // congestion the load balancing can still absorb; over it, the cut
        // is in proportion to the excess.
        let queueing = self.queueing(rtt);
        if queueing < cfg.target_qdelay {
            return false;
        }
        let cut = cfg.gamma * (queueing.0 - cfg.target_qdelay.0) as f64 / queueing.0 as f64;
        let factor = (1.0 - cut).max(1.0 - cfg.max_decrease);
        self.rate = self.rate.scale(factor).max(self.line.scale(cfg.min_rate));
        self.last_decrease = Some(now);
        true
    }

    /// A recovery step, every `increase_interval`, at `now` with the probe
    /// still out sent at `probe_sent`; returns whether more are needed (the
    /// rate is still below line rate).
    pub fn on_increase_timer(&mut self, cfg: &SpxCcConfig, now: Time, probe_sent: Option<Time>) -> bool {
        if std::mem::take(&mut self.marked) {
            return !self.at_line_rate();
        }
        let rtt = self.rtt_at(now, probe_sent);
        self.rate = if self.queueing(rtt) < cfg.target_qdelay {
            Rate((self.rate.0 + self.line.0) / 2 + 1)
        } else {
            Rate(self.rate.0 + self.line.scale(cfg.additive_increase).0)
        }
        .min(self.line);
        !self.at_line_rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cnp_cuts_in_proportion_to_the_queueing_over_target_once_per_round_trip() {
        let cfg = SpxCcConfig::default();
        let mut cc = SpxCc::new(Rate::from_gbps(400));
        cc.on_rtt(Time::from_us(4));
        // 4us of queueing, under the 6us target: the mark is left to load
        // balancing.
        cc.on_rtt(Time::from_us(8));
        assert!(!cc.on_cnp(&cfg, Time::from_us(100), None));
        assert_eq!(cc.rate(), Rate::from_gbps(400));
        // 12us of queueing: 1 - 0.8 x (12 - 6) / 12 = 0.6.
        cc.on_rtt(Time::from_us(16));
        assert!(cc.on_cnp(&cfg, Time::from_us(100), None));
        assert_eq!(cc.rate(), Rate::from_gbps(240));
        assert!(!cc.on_cnp(&cfg, Time::from_us(103), None), "within one base RTT of the last cut");
        // A probe out for 60us says the RTT is at least that, and the cut is
        // at most half.
        assert!(cc.on_cnp(&cfg, Time::from_us(200), Some(Time::from_us(140))));
        assert_eq!(cc.rate(), Rate::from_gbps(120));
    }

    #[test]
    fn the_rate_recovers_quickly_once_the_queue_is_gone() {
        let cfg = SpxCcConfig::default();
        let mut cc = SpxCc::new(Rate::from_gbps(400));
        cc.on_rtt(Time::from_us(4));
        cc.on_rtt(Time::from_us(24));
        cc.on_cnp(&cfg, Time::ZERO, None);
        let cut = cc.rate();
        let t = Time::from_us(50);
        assert!(cc.on_increase_timer(&cfg, t, None), "the step right after a mark waits");
        assert_eq!(cc.rate(), cut);
        // Queueing over target: additive steps of 5% of line rate.
        assert!(cc.on_increase_timer(&cfg, t, None));
        assert_eq!(cc.rate().0, cut.0 + 20_000_000_000);
        cc.on_rtt(Time::from_us(5));
        // A probe out for 30us still says the queue is there.
        let before = cc.rate();
        cc.on_increase_timer(&cfg, t, Some(Time::from_us(20)));
        assert_eq!(cc.rate().0, before.0 + 20_000_000_000);
        let mut steps = 0;
        while cc.on_increase_timer(&cfg, t, None) {
            steps += 1;
        }
        assert!(steps < 40 && cc.at_line_rate(), "{steps}");
    }
}
