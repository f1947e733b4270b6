//! A sender window shaped like UET's NSCC (network-signal congestion
//! control), as UEC-htsim implements it (protocols.md s5.5). The MRC paper
//! does not publish MRC's congestion control, only that it handles incast
//! with trimming; NSCC is the published controller of the same family
//! (sprayed packets, ECN as a path signal, trimming) and stands in for it.
//!
//! Feedback per acknowledged packet: its queueing delay (RTT minus the
//! smallest RTT seen) against a target, and its ECN echo.
//! - no ECN, delay under target: proportional increase plus fair increase;
//! - no ECN, delay over target: fair increase only;
//! - ECN, delay over target: multiplicative decrease, at most once per RTT;
//! - ECN, delay under target: no change (a congested path, not a congested
//!   receiver: the load balancer moves off it).
//!
//! A trimmed packet (NACK) takes its bytes off the window and, like a
//! delay above four targets, triggers quick adapt: at most once per window
//! of time, the window drops to what was acknowledged in the last one.
//! Increases are batched and applied every adjust period. The constants are
//! NSCC's, scaled from its 100 Gb/s, 12us reference network.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Time;

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NsccConfig {
    /// Target queueing delay. Default 6us (NSCC).
    pub target_delay: Time,
    /// Reference RTT the constants are scaled by. Default 12us (NSCC).
    pub reference_rtt: Time,
    /// Multiplicative-decrease gain. Default 0.8 (NSCC's gamma).
    pub gamma: f64,
    /// Fair increase per RTT in MTUs at the reference BDP. Default 5.
    pub fair_increase: f64,
    /// Additive increase per adjust period in MTUs at the reference BDP.
    /// Default 0.15 (NSCC's eta).
    pub eta: f64,
    /// Period at which batched increases are applied. Default 12us.
    pub adjust_period: Time,
    /// Quick adapt triggers above this many target delays. Default 4.
    pub quick_adapt_delays: f64,
    /// EWMA gain of the average delay. Default 0.0125.
    pub delay_gain: f64,
}

impl Default for NsccConfig {
    fn default() -> Self {
        NsccConfig {
            target_delay: Time::from_us(6),
            reference_rtt: Time::from_us(12),
            gamma: 0.8,
            fair_increase: 5.0,
            eta: 0.15,
            adjust_period: Time::from_us(12),
            quick_adapt_delays: 4.0,
            delay_gain: 0.0125,
        }
    }
}

/// NSCC's state for one sender.
#[derive(Clone, Debug)]
pub struct Nscc {
    cfg: NsccConfig,
    mtu: f64,
    window: f64,
    max_window: f64,
    /// Scaling of the constants: this BDP over the reference BDP.
    scale: f64,
    base_rtt: Option<Time>,
    avg_delay: f64,
    pending_increase: f64,
    acked_since_adjust: f64,
    last_adjust: Time,
    last_decrease: Time,
    /// Quick adapt: start of the current observation window and bytes
    /// acknowledged in it; no feedback acted on before `ignore_until`.
    qa_start: Time,
    qa_acked: f64,
    qa_pending: bool,
    ignore_until: Time,
}

impl Nscc {
    /// `max_window` is 1.5 BDP of the sender's rate at the reference RTT
    /// (NSCC's maxwnd), where the window starts.
    pub fn new(cfg: &NsccConfig, mtu: u32, max_window: u64) -> Nscc {
        let reference_bdp = 100e9 / 8.0 * cfg.reference_rtt.as_secs_f64();
        Nscc {
            mtu: mtu as f64,
            window: max_window as f64,
            max_window: max_window as f64,
            scale: (max_window as f64 / 1.5 / reference_bdp).max(1e-3),
            base_rtt: None,
            avg_delay: 0.0,
            pending_increase: 0.0,
            acked_since_adjust: 0.0,
            last_adjust: Time::ZERO,
            last_decrease: Time::ZERO,
            qa_start: Time::ZERO,
            qa_acked: 0.0,
            qa_pending: false,
            ignore_until: Time::ZERO,
            cfg: cfg.clone(),
        }
    }

    pub fn window(&self) -> f64 {
        self.window
    }

    fn target(&self) -> f64 {
        self.cfg.target_delay.as_secs_f64()
    }

    /// A packet of `bytes` sent at `sent` was acknowledged at `now`, its
    /// ECN echo `ecn`.
    pub fn on_ack(&mut self, bytes: u32, sent: Time, now: Time, ecn: bool) {
        let rtt = now.saturating_sub(sent);
        let base = *self.base_rtt.get_or_insert(rtt);
        let base = if rtt < base {
            self.base_rtt = Some(rtt);
            rtt
        } else {
            base
        };
        let delay = rtt.saturating_sub(base).as_secs_f64();
        self.avg_delay += self.cfg.delay_gain * (delay - self.avg_delay);
        let acked = bytes as f64;
        self.qa_acked += acked;
        if self.quick_adapt(now, base, false) || sent < self.ignore_until {
            return;
        }
        let target = self.target();
        let fair = self.cfg.fair_increase * self.scale * self.mtu * acked;
        match (ecn, delay >= target) {
            (false, true) => self.pending_increase += fair,
            (false, false) => {
                // NSCC's alpha: 4 a b MSS / target, with b = target / RTT_ref.
                let b = target / self.cfg.reference_rtt.as_secs_f64();
                let alpha = 4.0 * self.scale * b * self.mtu / target;
                self.pending_increase += alpha * (target - delay) * acked + fair;
            }
            (true, true) => {
                if now.saturating_sub(self.last_decrease) > base && self.avg_delay > 0.0 {
                    let cut = (1.0 - self.cfg.gamma * (self.avg_delay - target).max(0.0) / self.avg_delay).max(0.5);
                    self.window = (self.window * cut).max(self.mtu);
                    self.last_decrease = now;
                }
            }
            (true, false) => {}
        }
        self.acked_since_adjust += acked;
        let adjust_bytes = 16000.0 * target / self.cfg.reference_rtt.as_secs_f64();
        if self.acked_since_adjust > adjust_bytes || now.saturating_sub(self.last_adjust) > self.cfg.adjust_period {
            let periods = (now.saturating_sub(self.last_adjust).as_secs_f64()
                / self.cfg.adjust_period.as_secs_f64().max(1e-12))
            .floor()
            .min(16.0);
            self.window += (self.pending_increase / self.window).min(adjust_bytes)
                + periods * self.cfg.eta * self.scale * self.mtu;
            self.window = self.window.clamp(self.mtu, self.max_window);
            self.pending_increase = 0.0;
            self.acked_since_adjust = 0.0;
            self.last_adjust = now;
        }
    }

    /// A packet of `bytes` was lost, not trimmed: take it off the window.
    /// In a trimming fabric congestion trims rather than drops, so a loss
    /// mostly means a failed path (mrc-srv6-multiplane.txt s2.1), which the
    /// transport routes around; it still costs the bytes that did not
    /// arrive, but not the quick adapt a trim triggers, which after a path
    /// dies (few bytes acknowledged in the period) would cut the window to
    /// a packet while the transport is already moving off the path.
    pub fn on_loss(&mut self, bytes: u32) {
        self.window = (self.window - bytes as f64).max(self.mtu);
    }

    /// A packet of `bytes` was trimmed (a NACK): congestion made visible.
    /// Take it off the window and adapt (protocols.md s5.5).
    pub fn on_trim(&mut self, bytes: u32, now: Time) {
        self.window = (self.window - bytes as f64).max(self.mtu);
        let base = self.base_rtt.unwrap_or(self.cfg.reference_rtt);
        self.quick_adapt(now, base, true);
    }

    /// Once per base RTT plus target: on a loss, or when the average delay
    /// is far above target, drop the window to what the last such period
    /// delivered and ignore feedback on what is already in flight.
    fn quick_adapt(&mut self, now: Time, base: Time, loss: bool) -> bool {
        self.qa_pending |= loss || self.avg_delay > self.cfg.quick_adapt_delays * self.target();
        let period = base + self.cfg.target_delay;
        if now.saturating_sub(self.qa_start) < period {
            return false;
        }
        let fired = self.qa_pending;
        if fired {
            self.window = self.qa_acked.clamp(self.mtu, self.max_window).min(self.window);
            self.ignore_until = now;
            self.avg_delay = 0.0;
        }
        self.qa_pending = false;
        self.qa_start = now;
        self.qa_acked = 0.0;
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nscc() -> Nscc {
        // 100 Gb/s at 12us: 150 KB BDP, max window 225 KB.
        Nscc::new(&NsccConfig::default(), 4096, 225_000)
    }

    fn us(t: u64) -> Time {
        Time::from_us(t)
    }

    #[test]
    fn low_delay_without_ecn_keeps_the_window_open() {
        let mut cc = nscc();
        for k in 0..1000 {
            cc.on_ack(4096, us(k), us(k) + us(10), false);
        }
        assert_eq!(cc.window(), 225_000.0);
    }

    #[test]
    fn ecn_with_high_delay_cuts_and_ecn_with_low_delay_does_not() {
        let mut cc = nscc();
        cc.on_ack(4096, us(0), us(10), false);
        for k in 1..200 {
            cc.on_ack(4096, us(k), us(k) + us(10), true);
        }
        assert_eq!(cc.window(), 225_000.0, "a marked but fast path is the load balancer's business");
        for k in 200..260 {
            cc.on_ack(4096, us(k), us(k) + us(30), true);
        }
        assert!(cc.window() < 225_000.0 * 0.9, "{}", cc.window());
    }

    #[test]
    fn trims_shrink_the_window_to_what_was_delivered() {
        let mut cc = nscc();
        cc.on_ack(4096, us(0), us(10), false);
        for k in 0..5 {
            cc.on_ack(4096, us(10 + k), us(20 + k), false);
        }
        cc.on_trim(4096, us(40));
        assert!(cc.window() <= 6.0 * 4096.0, "{}", cc.window());
        assert!(cc.window() >= 4096.0);
    }
}
