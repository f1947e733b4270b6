//! The probe the model reports to as it runs: data packets per QP and EV,
//! EV state changes, and the frames of captured ports. Each record is kept
//! only when telemetry asks for it; the model calls the same methods either
//! way and never looks at what is kept.

use std::collections::BTreeMap;

use crate::ids::QpId;
use crate::metrics::{BandwidthHistograms, Table};
use crate::net::capture::{Capture, Hop};
use crate::net::{Packet, PortId};
use crate::topology::NodeId;
use crate::transport::EvChange;
use crate::units::Time;

/// Data packets sent and dropped per (sprayed QP, EV) since the last sample.
#[derive(Default)]
pub(super) struct EvActivity {
    pub(super) sent: BTreeMap<(QpId, u16), u64>,
    pub(super) dropped: BTreeMap<(QpId, u16), u64>,
}

#[derive(Default)]
pub(super) struct Recorder {
    ev_activity: Option<EvActivity>,
    ev_log: Option<Vec<(Time, QpId, EvChange)>>,
    /// The pcap being written and, per port, whether it is captured.
    capture: Option<(Capture, Vec<bool>)>,
    /// Each QP's number at its requester and at its responder, for the
    /// capture's BTH (empty without one): each NIC numbers its QPs from 2
    /// up as it creates them, as a NIC's QPs are numbered and exchanged
    /// when a connection is set up (0 and 1 are InfiniBand's management
    /// QPs).
    qp_numbers: Vec<[u32; 2]>,
    /// The number each NIC gives its next QP (empty without a capture).
    next_qp_number: Vec<u32>,
    histograms: Option<BandwidthHistograms>,
}

impl Recorder {
    pub(super) fn new(
        ev_activity: bool,
        ev_log: bool,
        capture: Option<(Capture, Vec<bool>)>,
        (qp_numbers, next_qp_number): (Vec<[u32; 2]>, Vec<u32>),
        histograms: Option<BandwidthHistograms>,
    ) -> Recorder {
        Recorder {
            ev_activity: ev_activity.then(Default::default),
            ev_log: ev_log.then(Vec::new),
            capture,
            qp_numbers,
            next_qp_number,
            histograms,
        }
    }

    /// Numbers a QP opened during the run (`q`, the next id) at its two NICs.
    pub(super) fn number_qp(&mut self, q: QpId, src: NodeId, dst: NodeId) {
        if self.next_qp_number.is_empty() {
            return;
        }
        let mut take = |n: NodeId| {
            let number = self.next_qp_number[n.0 as usize];
            self.next_qp_number[n.0 as usize] += 1;
            number
        };
        let numbers = [take(src), take(dst)];
        debug_assert_eq!(self.qp_numbers.len(), q.0 as usize);
        self.qp_numbers.push(numbers);
    }

    /// Port `port` serializes `wire` bytes from `start` to `done`.
    #[inline]
    pub(super) fn sent(&mut self, port: PortId, start: Time, done: Time, wire: u64) {
        if let Some(h) = self.histograms.as_mut() {
            h.sent(port.0 as usize, start, done, wire);
        }
    }

    /// The bandwidth histograms at the end of a run at `end` (empty when
    /// none were asked for).
    pub(super) fn take_histograms(&mut self, end: Time) -> Table {
        self.histograms.take().map_or_else(Table::default, |h| h.table(end))
    }

    /// QP `q`'s number at its responder (`to_responder`) or its requester.
    pub(super) fn qp_number(&self, q: QpId, to_responder: bool) -> u32 {
        self.qp_numbers[q.0 as usize][usize::from(to_responder)]
    }

    /// Whether EV state changes are logged.
    pub(super) fn logs_evs(&self) -> bool {
        self.ev_log.is_some()
    }

    /// A sprayed QP sent a data packet on `ev`.
    #[inline]
    pub(super) fn data_sent(&mut self, qp: QpId, ev: u16) {
        if let Some(activity) = self.ev_activity.as_mut() {
            *activity.sent.entry((qp, ev)).or_default() += 1;
        }
    }

    /// Whether data packets are counted per EV (so the caller need look up
    /// nothing otherwise).
    #[inline]
    pub(super) fn counts_per_ev(&self) -> bool {
        self.ev_activity.is_some()
    }

    /// The fabric dropped a data packet a sprayed QP sent on `ev`.
    pub(super) fn data_dropped(&mut self, qp: QpId, ev: u16) {
        if let Some(activity) = self.ev_activity.as_mut() {
            *activity.dropped.entry((qp, ev)).or_default() += 1;
        }
    }

    pub(super) fn ev_changed(&mut self, now: Time, qp: QpId, change: EvChange) {
        if let Some(log) = self.ev_log.as_mut() {
            log.push((now, qp, change));
        }
    }

    #[inline]
    pub(super) fn captures(&self, port: PortId) -> bool {
        self.capture.as_ref().is_some_and(|(_, on)| on[port.0 as usize])
    }

    /// Writes the frame of a packet starting to leave a captured port.
    pub(super) fn capture(&mut self, now: Time, packet: &Packet, hop: &Hop) {
        if let Some((capture, _)) = self.capture.as_mut() {
            capture.record(now, packet, hop);
        }
    }

    /// The counts since the last sample, leaving them at zero.
    pub(super) fn take_ev_activity(&mut self) -> Option<EvActivity> {
        self.ev_activity.as_mut().map(std::mem::take)
    }

    pub(super) fn take_ev_log(&mut self) -> Option<Vec<(Time, QpId, EvChange)>> {
        self.ev_log.take()
    }

    pub(super) fn take_capture(&mut self) -> Option<Capture> {
        self.capture.take().map(|(capture, _)| capture)
    }
}
