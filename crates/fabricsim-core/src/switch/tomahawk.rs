//! Broadcom Tomahawk's adaptive routing (dynamic load balancing) in its
//! per-packet mode, as PRO's evaluation models it (pro-deterministic-lb.txt
//! s6: "according to the quality of egress port, i.e., link load and queue
//! length updated every 1us"). Each port's quality is refreshed once per
//! `update_interval`: its transmit load, an exponentially weighted moving
//! average of the bytes it sent (OpenBCM's TH2 driver: EWMA of egress
//! bytes, exponents 2-3 in its examples), and its queued bytes, each cut
//! into 8 equal bands (3 bits), mixed by `load_weight` percent
//! (protocols.md s6.3). A packet goes to a next hop of the best quality,
//! at random among equals. A port whose link is down is never chosen.

use crate::engine::Rng;
use crate::net::{Port, PortId, TomahawkArConfig};
use crate::units::Time;

/// Bands of each metric (3 bits).
const BANDS: u64 = 8;

#[derive(Clone, Copy, Default)]
struct Quality {
    /// The update period it was computed in (`u64::MAX`: never).
    period: u64,
    /// When the load was last sampled, and the port's sent bytes then.
    sampled_at: Time,
    sent: u64,
    /// The load's moving average, as a fraction of line rate.
    load: f64,
    /// 0 (best) to 7.
    band: u8,
}

pub struct TomahawkAr {
    interval: u64,
    load_weight: u64,
    queue_band: u64,
    /// The EWMA's gain per update: 2^-exponent.
    gain: f64,
    qualities: Vec<Quality>,
    rng: Rng,
    best: Vec<PortId>,
}

impl TomahawkAr {
    pub fn new(cfg: &TomahawkArConfig, ports: usize, seed: u64) -> TomahawkAr {
        TomahawkAr {
            interval: cfg.update_interval.0.max(1),
            load_weight: u64::from(cfg.load_weight.min(100)),
            queue_band: (cfg.queue_max.0 / BANDS).max(1),
            gain: 0.5f64.powi(i32::from(cfg.ewma_exponent)),
            qualities: vec![Quality { period: u64::MAX, ..Quality::default() }; ports],
            rng: Rng::stream(seed, &[0x7A4A_0C4E]),
            best: Vec::new(),
        }
    }

    /// The next hop among `hops` for a packet at `now`; None when all are down.
    pub fn pick(&mut self, hops: &[PortId], ports: &[Port], now: Time) -> Option<PortId> {
        let period = now.0 / self.interval;
        let mut lowest = u8::MAX;
        self.best.clear();
        for &hop in hops {
            let port = &ports[hop.0 as usize];
            if !port.up {
                continue;
            }
            let q = &mut self.qualities[hop.0 as usize];
            if q.period != period {
                let elapsed = now.saturating_sub(q.sampled_at);
                let sent = port.counters.tx_bytes;
                if q.period != u64::MAX && elapsed > Time::ZERO {
                    let utilization = (sent - q.sent) as f64 * 8.0 / (port.rate.0 as f64 * elapsed.as_secs_f64());
                    // One EWMA step per update interval elapsed.
                    let steps = (elapsed.0 / self.interval).max(1);
                    let keep = (1.0 - self.gain).powi(steps.min(i32::MAX as u64) as i32);
                    q.load = q.load * keep + utilization.min(1.0) * (1.0 - keep);
                }
                q.period = period;
                q.sampled_at = now;
                q.sent = sent;
                let load_band = ((q.load * BANDS as f64) as u64).min(BANDS - 1);
                let queue_band = (port.total_queue_bytes() / self.queue_band).min(BANDS - 1);
                q.band = ((load_band * self.load_weight + queue_band * (100 - self.load_weight)) / 100) as u8;
            }
            if q.band < lowest {
                lowest = q.band;
                self.best.clear();
            }
            if q.band == lowest {
                self.best.push(hop);
            }
        }
        match self.best.len() {
            0 => None,
            1 => Some(self.best[0]),
            n => Some(self.best[self.rng.below(n as u64) as usize]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::CLASS_DATA;
    use crate::topology::NodeId;
    use crate::units::Rate;

    fn ports(n: usize) -> Vec<Port> {
        (0..n).map(|i| Port::new(NodeId(0), i as u16, Rate::from_gbps(100), Time::ZERO, false, false)).collect()
    }

    fn ar(load_weight: u8) -> TomahawkAr {
        let cfg = TomahawkArConfig { load_weight, ..TomahawkArConfig::default() };
        TomahawkAr::new(&cfg, 4, 1)
    }

    #[test]
    fn a_loaded_port_loses_to_an_idle_one_after_an_update() {
        let hops = [PortId(0), PortId(1)];
        let mut p = ports(2);
        let mut ar = ar(100);
        ar.pick(&hops, &p, Time::ZERO);
        // Port 0 sends at line rate for 10us (125 KB at 100G); port 1 idles.
        p[0].counters.tx_bytes = 125_000;
        let picks: Vec<PortId> = (0..20).map(|_| ar.pick(&hops, &p, Time::from_us(10)).unwrap()).collect();
        assert!(picks.iter().all(|&x| x == PortId(1)), "{picks:?}");
    }

    #[test]
    fn queue_depth_counts_by_its_weight_and_is_read_once_per_update() {
        let hops = [PortId(0), PortId(1)];
        let mut p = ports(2);
        p[0].queue_bytes[CLASS_DATA] = 300_000;
        let mut queue_only = ar(0);
        assert_eq!(queue_only.pick(&hops, &p, Time::ZERO), Some(PortId(1)));
        // Within the same 1us update the stale quality stands.
        p[0].queue_bytes[CLASS_DATA] = 0;
        p[1].queue_bytes[CLASS_DATA] = 300_000;
        assert_eq!(queue_only.pick(&hops, &p, Time::from_ns(500)), Some(PortId(1)));
        assert_eq!(queue_only.pick(&hops, &p, Time::from_us(1)), Some(PortId(0)));
        // Load only: the queues do not matter, both ports idle: either.
        let mut load_only = ar(100);
        let mut seen = [0; 2];
        for k in 0..200 {
            seen[load_only.pick(&hops, &p, Time::from_us(k)).unwrap().0 as usize] += 1;
        }
        assert!(seen[0] > 50 && seen[1] > 50, "{seen:?}");
    }

    #[test]
    fn a_down_port_is_never_chosen() {
        let hops = [PortId(0), PortId(1)];
        let mut p = ports(2);
        p[1].counters.tx_bytes = 10_000_000;
        p[0].up = false;
        let mut ar = ar(50);
        assert!((0..50).all(|k| ar.pick(&hops, &p, Time::from_us(k)) == Some(PortId(1))));
        p[1].up = false;
        assert_eq!(ar.pick(&hops, &p, Time::from_us(60)), None);
    }
}
