//! A switch's shared packet buffer with dynamic thresholds
//! (Choudhury and Hahne, 1998): a queue may use the shared pool while it
//! holds less than alpha times what is still free, so one congested port
//! cannot starve the others. PFC's XOFF threshold is the same rule applied
//! to the bytes held per ingress port (protocols.md s4.3).

use super::config::EcnConfig;

/// Outcome of asking the buffer to take a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Accept,
    Reject,
}

#[derive(Clone, Debug)]
pub struct SharedBuffer {
    pub size: u64,
    pub used: u64,
}

impl SharedBuffer {
    pub fn new(size: u64) -> SharedBuffer {
        SharedBuffer { size, used: 0 }
    }

    pub fn free(&self) -> u64 {
        self.size - self.used
    }

    /// Lossy egress admission: the queue stays under its dynamic threshold.
    pub fn admit_lossy(&self, queue_bytes: u64, wire: u64, alpha: f64) -> Admission {
        let fits = self.used + wire <= self.size && (queue_bytes + wire) as f64 <= alpha * self.free() as f64;
        if fits {
            Admission::Accept
        } else {
            Admission::Reject
        }
    }

    /// Lossless admission: only the physical size limits it; PFC keeps the
    /// occupancy in check upstream.
    pub fn admit_lossless(&self, wire: u64) -> Admission {
        if self.used + wire <= self.size {
            Admission::Accept
        } else {
            Admission::Reject
        }
    }

    /// Bytes an ingress port's class may hold before it is paused.
    pub fn xoff_threshold(&self, alpha: f64) -> u64 {
        (alpha * self.free() as f64) as u64
    }

    pub fn take(&mut self, wire: u64) {
        self.used += wire;
    }

    pub fn release(&mut self, wire: u64) {
        self.used -= wire;
    }
}

/// Probability that a packet leaving a queue of `queue_bytes` is marked CE:
/// zero below Kmin, rising linearly to Pmax at Kmax, one above Kmax
/// (DCQCN's RED profile, protocols.md s3.2).
pub fn ecn_mark_probability(queue_bytes: u64, ecn: &EcnConfig) -> f64 {
    let (kmin, kmax) = (ecn.kmin.0, ecn.kmax.0);
    if queue_bytes <= kmin {
        0.0
    } else if queue_bytes > kmax {
        1.0
    } else {
        ecn.pmax * (queue_bytes - kmin) as f64 / (kmax - kmin).max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Bytes;

    #[test]
    fn dynamic_threshold_shrinks_as_the_buffer_fills() {
        let mut b = SharedBuffer::new(1000);
        assert_eq!(b.admit_lossy(400, 100, 1.0), Admission::Accept);
        b.take(600);
        assert_eq!(b.admit_lossy(400, 100, 1.0), Admission::Reject);
        assert_eq!(b.xoff_threshold(0.5), 200);
    }

    #[test]
    fn red_profile() {
        let ecn = EcnConfig { kmin: Bytes(100), kmax: Bytes(300), pmax: 0.2, ..Default::default() };
        assert_eq!(ecn_mark_probability(50, &ecn), 0.0);
        assert!((ecn_mark_probability(200, &ecn) - 0.1).abs() < 1e-12);
        assert_eq!(ecn_mark_probability(301, &ecn), 1.0);
    }
}
