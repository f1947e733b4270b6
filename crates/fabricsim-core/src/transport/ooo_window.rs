//! PRO's loss detection at the responder (pro-deterministic-lb.txt s3.B,
//! Algorithm 2): with packets sprayed over paths whose queues are alike,
//! reordering is bounded, so a PSN still missing more than `wnd` PSNs
//! behind the highest one that arrived (the tail) is taken as lost and
//! NACKed, one NACK per check, each missing PSN once; everything within
//! the window is waited for. The window starts at the bandwidth-delay
//! product in packets and adapts (AIMD): a duplicate arrival (a NACK that
//! was premature) widens it by one, a timeout (the gap outlived the
//! retransmission timeout, so a loss sat inside the window) halves it.
//! The responder's timeout is its own: it is armed while a gap is open and
//! fires if the gap's head has not moved for a timeout.

use super::placement::Placement;

#[derive(Clone, Debug)]
pub struct OooWindow {
    /// The window, in packets.
    wnd: u32,
    /// Below it every missing PSN has been NACKed (QP.NACK + 1).
    cursor: u32,
}

impl OooWindow {
    pub fn new(initial: u32) -> OooWindow {
        OooWindow { wnd: initial.max(1), cursor: 0 }
    }

    #[cfg(test)]
    pub fn window(&self) -> u32 {
        self.wnd
    }

    /// PKT_REPEAT: a packet arrived twice.
    pub fn on_duplicate(&mut self) {
        self.wnd += 1;
    }

    /// QP_TIMEOUT: the gap outlived the timeout. Returns the PSN to NACK.
    pub fn on_timeout(&mut self, placement: &Placement) -> Option<u32> {
        self.wnd = (self.wnd / 2).max(1);
        self.check(placement)
    }

    /// CheckAndSendNACK: the next missing PSN not yet NACKed, if it is
    /// further than the window behind the tail.
    pub fn check(&mut self, placement: &Placement) -> Option<u32> {
        let tail = placement.tail();
        self.cursor = self.cursor.max(placement.cumulative());
        while self.cursor < tail && placement.arrived(self.cursor) {
            self.cursor += 1;
        }
        if self.cursor < tail && tail - self.cursor > self.wnd {
            self.cursor += 1;
            return Some(self.cursor - 1);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrive(p: &mut Placement, psns: impl IntoIterator<Item = u32>) {
        for psn in psns {
            p.on_data(psn, 1);
        }
    }

    #[test]
    fn a_psn_beyond_the_window_behind_the_tail_is_nacked_once_and_one_within_it_waits() {
        let mut p = Placement::default();
        p.expect(0, 100);
        let mut w = OooWindow::new(8);
        // PSN 0 lost; 1..=8 arrive: 0 is 9 behind the tail, one past the window.
        arrive(&mut p, 1..=7);
        assert_eq!(w.check(&p), None, "within the window: reordering, not loss");
        arrive(&mut p, [8, 9]);
        assert_eq!(w.check(&p), Some(0));
        arrive(&mut p, [10]);
        assert_eq!(w.check(&p), None, "PSN 0 is NACKed once");
    }

    #[test]
    fn the_window_halves_on_timeout_and_grows_on_repeated_arrivals() {
        let mut p = Placement::default();
        p.expect(0, 100);
        let mut w = OooWindow::new(16);
        arrive(&mut p, 1..=6);
        assert_eq!(w.check(&p), None);
        // A timeout: the window halves to 8, then 4 and PSN 0 (6 behind) is NACKed.
        assert_eq!(w.on_timeout(&p), None);
        assert_eq!(w.window(), 8);
        assert_eq!(w.on_timeout(&p), Some(0));
        assert_eq!(w.window(), 4);
        w.on_duplicate();
        w.on_duplicate();
        assert_eq!(w.window(), 6);
        assert_eq!(OooWindow::new(1).on_timeout(&p).map(|_| ()), Some(()), "never below one");
    }
}
