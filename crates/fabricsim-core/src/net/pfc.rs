//! Priority flow control (IEEE 802.1Qbb) at a switch's ingress port: the
//! bytes buffered from it per class, XOFF when they cross the dynamic
//! threshold, XON when they fall below it by `xon_offset`, and the headroom
//! that absorbs what is still on the wire after an XOFF (protocols.md s4).
//! Each function returns the verdict; the switch sends the frame.

use super::Port;

impl Port {
    /// A lossless packet of `wire` bytes arrives while this ingress has
    /// paused its peer: it lands in the headroom. False when that overflows
    /// `limit`, and the packet is dropped.
    pub fn absorb_in_headroom(&mut self, class: usize, wire: u64, limit: u64) -> bool {
        if !self.xoff_sent[class] {
            return true;
        }
        if self.headroom_used[class] + wire > limit {
            return false;
        }
        self.headroom_used[class] += wire;
        true
    }

    /// `wire` bytes of a lossless class that entered by this port are
    /// buffered. True when they just crossed `xoff_threshold`: pause the
    /// peer.
    pub fn buffered_from(&mut self, class: usize, wire: u64, xoff_threshold: u64) -> bool {
        self.ingress_bytes[class] += wire;
        if !self.xoff_sent[class] && self.ingress_bytes[class] > xoff_threshold {
            self.xoff_sent[class] = true;
            return true;
        }
        false
    }

    /// `wire` bytes of a lossless class that entered by this port left the
    /// buffer. True when a paused class fell below XON: resume the peer.
    pub fn released_from(&mut self, class: usize, wire: u64, xoff_threshold: u64, xon_offset: u64) -> bool {
        self.ingress_bytes[class] -= wire;
        if self.xoff_sent[class] && self.ingress_bytes[class] + xon_offset <= xoff_threshold {
            self.xoff_sent[class] = false;
            self.headroom_used[class] = 0;
            return true;
        }
        false
    }
}
