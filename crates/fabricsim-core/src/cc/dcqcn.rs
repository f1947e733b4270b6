//! DCQCN (Zhu et al., SIGCOMM 2015): the reaction point at the sender.
//!
//! The switch marks ECN (`net`), the receiver turns marks into CNPs at most
//! once per `cnp_interval` per QP (the notification point, in `transport`),
//! and this rate controller reacts: on a CNP it remembers the current rate
//! as the target, cuts the rate by alpha/2 and raises alpha; then a timer
//! and a byte counter drive fast recovery, additive increase and hyper
//! increase back towards line rate. The algorithm is the paper form with
//! both timer and byte counter (protocols.md s3.4).
//!
//! Alpha decays by (1-g) every `alpha_update` without a CNP; rather than
//! running that timer forever, the decay is applied in closed form when the
//! next CNP arrives.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::{Bytes, Rate, Time};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DcqcnConfig {
    pub enabled: bool,
    /// EWMA gain of alpha. Default 1/256 (DCQCN paper; HPCC and ConWeave
    /// configs, protocols.md s3.6).
    pub g: f64,
    /// Alpha decays once per this period without a CNP. Default 55us
    /// (DCQCN paper's K, htsim).
    pub alpha_update: Time,
    /// Rate-increase timer. Default 55us, htsim's DCQCN update period
    /// (protocols.md s3.4); NVIDIA firmware uses 300us (RPG_TIME_RESET) and
    /// production AI clusters tune it to 20-100us (protocols.md s3.6).
    pub rate_increase_timer: Time,
    /// Rate-increase byte counter. Default 10MB (htsim dcqcn.cpp).
    pub byte_counter: Bytes,
    /// Increase steps spent in fast recovery. Default 5 (DCQCN paper, htsim).
    pub fast_recovery_steps: u32,
    /// Additive increase step at 100 Gb/s, scaled with the line rate.
    /// Default 40Mbps (ConWeave: 10*bw/25 Mb/s).
    pub additive_increase: Rate,
    /// Hyper increase step at 100 Gb/s, scaled with the line rate. Default
    /// 100Mbps (ConWeave: 25*bw/25 Mb/s).
    pub hyper_increase: Rate,
    /// Lowest rate a QP is cut to. Default 100Mbps (HPCC, ConWeave).
    pub min_rate: Rate,
    /// One cut never takes the rate below this fraction of its value.
    /// Default 0.5, NVIDIA ConnectX firmware RPG_MIN_DEC_FAC 50; production
    /// AI clusters tune it to 0.8-0.98 (protocols.md s3.6). With alpha at
    /// most 1 the paper's cut is never deeper than half anyway.
    pub min_decrease_factor: f64,
    /// Set the target rate to the current rate on every cut. Off by default,
    /// as in NVIDIA ConnectX firmware (CLAMP_TGT_RATE 0,
    /// CLAMP_TGT_RATE_AFTER_TIME_INC 1) and HPCC's ns-3 model
    /// (ClampTargetRate 0): the target is only lowered to the current rate
    /// if the rate increased since the previous cut, so a burst of CNPs
    /// cannot drag the target down with it (protocols.md s3.5-s3.6).
    pub clamp_target_rate: bool,
    /// The receiver sends at most one CNP per QP per interval. Default 50us
    /// (DCQCN paper; htsim DCQCNSink). NVIDIA NICs default to 4us.
    pub cnp_interval: Time,
}

impl Default for DcqcnConfig {
    fn default() -> Self {
        DcqcnConfig {
            enabled: true,
            g: 1.0 / 256.0,
            alpha_update: Time::from_us(55),
            rate_increase_timer: Time::from_us(55),
            byte_counter: Bytes(10_000_000),
            fast_recovery_steps: 5,
            additive_increase: Rate(40_000_000),
            hyper_increase: Rate(100_000_000),
            min_rate: Rate(100_000_000),
            cnp_interval: Time::from_us(50),
            clamp_target_rate: false,
            min_decrease_factor: 0.5,
        }
    }
}

/// Reaction-point state of one QP.
#[derive(Clone, Debug)]
pub struct Dcqcn {
    line: f64,
    current: f64,
    target: f64,
    alpha: f64,
    alpha_stamp: Time,
    timer_steps: u32,
    byte_steps: u32,
    bytes_since_step: u64,
    /// An increase step ran since the last cut.
    increased_since_cut: bool,
    /// When the rate-increase timer next fires; `None` at line rate.
    next_increase: Option<Time>,
}

impl Dcqcn {
    pub fn new(line: Rate) -> Dcqcn {
        let line = line.0 as f64;
        Dcqcn {
            line,
            current: line,
            target: line,
            alpha: 1.0,
            alpha_stamp: Time::ZERO,
            timer_steps: 0,
            byte_steps: 0,
            bytes_since_step: 0,
            increased_since_cut: false,
            next_increase: None,
        }
    }

    pub fn rate(&self) -> Rate {
        Rate(self.current as u64)
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    pub fn next_increase(&self) -> Option<Time> {
        self.next_increase
    }

    /// A CNP arrived: cut the rate. Returns when the increase timer fires.
    pub fn on_cnp(&mut self, cfg: &DcqcnConfig, now: Time) -> Time {
        let idle_periods = (now - self.alpha_stamp).0 / cfg.alpha_update.0.max(1);
        self.alpha *= (1.0 - cfg.g).powi(idle_periods.min(i32::MAX as u64) as i32);
        if cfg.clamp_target_rate || self.increased_since_cut {
            self.target = self.current;
        }
        self.increased_since_cut = false;
        let factor = (1.0 - self.alpha / 2.0).max(cfg.min_decrease_factor);
        self.current = (self.current * factor).max(cfg.min_rate.0 as f64);
        self.alpha = (1.0 - cfg.g) * self.alpha + cfg.g;
        self.alpha_stamp = now;
        self.timer_steps = 0;
        self.byte_steps = 0;
        self.bytes_since_step = 0;
        let next = now + cfg.rate_increase_timer;
        self.next_increase = Some(next);
        next
    }

    /// The increase timer fired at `now`. Returns the next firing, if any.
    pub fn on_timer(&mut self, cfg: &DcqcnConfig, now: Time) -> Option<Time> {
        if self.next_increase != Some(now) {
            return self.next_increase.filter(|&t| t > now);
        }
        self.timer_steps += 1;
        self.increase(cfg);
        self.next_increase = (self.current < self.line).then(|| now + cfg.rate_increase_timer);
        self.next_increase
    }

    /// Bytes were sent: advance the byte counter.
    pub fn on_sent(&mut self, cfg: &DcqcnConfig, bytes: u64) {
        if self.next_increase.is_none() {
            return;
        }
        self.bytes_since_step += bytes;
        if self.bytes_since_step >= cfg.byte_counter.0 {
            self.bytes_since_step -= cfg.byte_counter.0;
            self.byte_steps += 1;
            self.increase(cfg);
            if self.current >= self.line {
                self.next_increase = None;
            }
        }
    }

    fn increase(&mut self, cfg: &DcqcnConfig) {
        self.increased_since_cut = true;
        let f = cfg.fast_recovery_steps;
        let scale = self.line / 100e9;
        let (lo, hi) = (self.timer_steps.min(self.byte_steps), self.timer_steps.max(self.byte_steps));
        if hi < f {
            // Fast recovery: halve the distance to the target.
        } else if lo > f {
            self.target += (lo - f) as f64 * cfg.hyper_increase.0 as f64 * scale;
        } else {
            self.target += cfg.additive_increase.0 as f64 * scale;
        }
        self.target = self.target.min(self.line);
        self.current = ((self.target + self.current) / 2.0).min(self.line);
        // Within a thousandth of line rate is line rate: stop the timer.
        if self.line - self.current < self.line * 1e-3 {
            self.current = self.line;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cnp_cuts_by_half_alpha_and_timer_recovers() {
        let cfg = DcqcnConfig::default();
        let mut cc = Dcqcn::new(Rate::from_gbps(100));
        let t = cc.on_cnp(&cfg, Time::ZERO);
        // alpha starts at 1: the first cut halves the rate.
        assert_eq!(cc.rate(), Rate::from_gbps(50));
        let mut now = t;
        for _ in 0..5 {
            now = cc.on_timer(&cfg, now).unwrap();
        }
        // Five fast-recovery steps close 31/32 of the gap to the target.
        let r = cc.rate().as_gbps_f64();
        assert!((r - (100.0 - 50.0 / 32.0)).abs() < 0.01, "{r}");
    }

    #[test]
    fn alpha_decays_while_no_cnp_arrives() {
        let cfg = DcqcnConfig::default();
        let mut cc = Dcqcn::new(Rate::from_gbps(100));
        cc.on_cnp(&cfg, Time::ZERO);
        let a1 = cc.alpha();
        cc.on_cnp(&cfg, Time::from_us(55 * 100));
        // 100 periods of decay then one increase step.
        let expected = (1.0 - cfg.g) * a1 * (1.0 - cfg.g).powi(100) + cfg.g;
        assert!((cc.alpha() - expected).abs() < 1e-12);
    }
}
