//! Bandwidth histograms of ports at microsecond resolution (spectrum-x.txt
//! s5.2-s5.3, Fig 7a): time is cut into bins of `resolution`, each bin's
//! transmit bandwidth is counted in one of `bins` equal bands from zero to
//! line rate. A port whose every band but the top and the bottom is empty
//! sends at line rate or not at all, the bimodal pattern of healthy
//! collective participants beside a straggler. A packet's bytes are spread
//! over the time bins its serialization spans.

use super::{Column, Table};
use crate::units::{Rate, Time};

pub struct BandwidthHistograms {
    resolution: Time,
    bands: usize,
    /// Per port, the index of its histogram.
    of_port: Vec<Option<u32>>,
    ports: Vec<PortHistogram>,
}

struct PortHistogram {
    name: String,
    line: Rate,
    /// The time bin being filled and the bits sent in it so far.
    bin: u64,
    bits: f64,
    counts: Vec<u64>,
}

impl BandwidthHistograms {
    /// Histograms of `ports` (by port id, with their names and line
    /// rates) among `all_ports`.
    pub fn new(resolution: Time, bands: u32, all_ports: usize, ports: Vec<(usize, String, Rate)>) -> Self {
        let mut of_port = vec![None; all_ports];
        let ports = ports
            .into_iter()
            .enumerate()
            .map(|(i, (port, name, line))| {
                of_port[port] = Some(i as u32);
                PortHistogram { name, line, bin: 0, bits: 0.0, counts: vec![0; bands as usize] }
            })
            .collect();
        BandwidthHistograms { resolution, bands: bands as usize, of_port, ports }
    }

    /// Port `port` sent `wire` bytes serialized from `start` to `done`.
    #[inline]
    pub fn sent(&mut self, port: usize, start: Time, done: Time, wire: u64) {
        if let Some(h) = self.of_port[port] {
            self.add(h as usize, start, done, wire);
        }
    }

    fn add(&mut self, h: usize, start: Time, done: Time, wire: u64) {
        let width = self.resolution.0;
        let span = (done.0 - start.0).max(1) as f64;
        let mut from = start.0;
        while from < done.0 || from == start.0 {
            let bin = from / width;
            let to = done.0.min((bin + 1) * width);
            let share = (to.max(from + 1) - from) as f64 / span;
            self.close_until(h, bin);
            self.ports[h].bits += wire as f64 * 8.0 * share.min(1.0);
            if to >= done.0 {
                break;
            }
            from = to;
        }
    }

    /// Counts every time bin of histogram `h` before `bin` (idle ones at
    /// zero bandwidth) and starts filling `bin`.
    fn close_until(&mut self, h: usize, bin: u64) {
        let (bands, seconds) = (self.bands, self.resolution.as_secs_f64());
        let p = &mut self.ports[h];
        if bin <= p.bin {
            return;
        }
        let band = ((p.bits / seconds / p.line.0 as f64 * bands as f64) as usize).min(bands - 1);
        p.counts[band] += 1;
        p.counts[0] += bin - p.bin - 1;
        p.bin = bin;
        p.bits = 0.0;
    }

    /// The table at the end of a run at `end`: one row per port and band.
    pub fn table(mut self, end: Time) -> Table {
        let last = end.0.div_ceil(self.resolution.0.max(1));
        for h in 0..self.ports.len() {
            self.close_until(h, last.max(self.ports[h].bin + 1));
        }
        let mut t = Table::default();
        let (mut port, mut band, mut low, mut high, mut count, mut fraction) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for p in &self.ports {
            let total: u64 = p.counts.iter().sum();
            for (k, &c) in p.counts.iter().enumerate() {
                let step = p.line.as_gbps_f64() / self.bands as f64;
                port.push(p.name.clone());
                band.push(k as u64);
                low.push(Some(step * k as f64));
                high.push(Some(step * (k + 1) as f64));
                count.push(c);
                fraction.push(Some(if total > 0 { c as f64 / total as f64 } else { 0.0 }));
            }
        }
        t.push("port", Column::Text(port));
        t.push("band", Column::Int(band));
        t.push("low_gbps", Column::Float(low));
        t.push("high_gbps", Column::Float(high));
        t.push("intervals", Column::Int(count));
        t.push("fraction", Column::Float(fraction));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_at_line_rate_or_idle_fills_only_the_top_and_bottom_bands() {
        let line = Rate::from_gbps(100);
        let mut h = BandwidthHistograms::new(Time::from_us(1), 10, 1, vec![(0, "p".into(), line)]);
        // Back to back for 3us (1250B takes 100ns at 100G), then idle 2us.
        let mut t = 0;
        while t < 3_000_000 {
            h.sent(0, Time(t), Time(t + 100_000), 1250);
            t += 100_000;
        }
        let table = h.table(Time::from_us(5));
        let Column::Int(counts) = &table.columns[4].1 else { panic!() };
        assert_eq!(counts, &[2, 0, 0, 0, 0, 0, 0, 0, 0, 3]);
    }

    #[test]
    fn a_packet_across_a_bin_edge_is_split_between_the_two() {
        let line = Rate::from_gbps(100);
        let mut h = BandwidthHistograms::new(Time::from_us(1), 4, 1, vec![(0, "p".into(), line)]);
        // 12500B over 0.5-1.5us: 6250B in each bin, half of line rate each.
        h.sent(0, Time::from_ns(500), Time::from_ns(1500), 12_500);
        let table = h.table(Time::from_us(2));
        let Column::Int(counts) = &table.columns[4].1 else { panic!() };
        assert_eq!(counts, &[0, 0, 2, 0]);
    }
}
