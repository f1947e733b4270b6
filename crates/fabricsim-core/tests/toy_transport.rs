//! A transport is one file: this one sends every packet of a QP on the
//! QP's one path, in order, with no acknowledgement and no retransmission,
//! and the responder counts what arrives. It implements `Transport` and
//! nothing else; the simulation runs it through `QpTransport::Custom`, the
//! dispatch arm for transports from outside the crate (a built-in one would
//! be this file under `src/transport/` plus its own arm in `QpTransport`).

mod common;

use std::collections::VecDeque;

use common::{ints, summary_u64};
use fabricsim_core::net::{flag, Packet, PacketKind};
use fabricsim_core::transport::{Action, DataPacket, End, Outgoing, QpSetup, QpStats, Timer, Transport, Verb};
use fabricsim_core::units::Time;
use fabricsim_core::{RunOutput, Scenario, Simulation};
use serde_json::json;

/// Both ends of a QP that trusts the fabric.
struct FixedPath {
    mtu: u32,
    entropy: u16,
    /// Payload bytes of each posted packet, by PSN.
    payloads: Vec<u32>,
    /// One past the last PSN of each posted message, oldest first.
    message_ends: VecDeque<u32>,
    /// Each message's length, by its first PSN.
    message_bytes: Vec<(u32, u64)>,
    next_psn: u32,
    /// In-order packets the responder has taken.
    received: u32,
}

impl FixedPath {
    fn new(setup: &QpSetup) -> FixedPath {
        FixedPath {
            mtu: setup.mtu,
            entropy: setup.entropy,
            payloads: Vec::new(),
            message_ends: VecDeque::new(),
            message_bytes: Vec::new(),
            next_psn: 0,
            received: 0,
        }
    }
}

impl Transport for FixedPath {
    fn post(&mut self, bytes: u64, _verb: Verb, _now: Time, _out: &mut Vec<Action>) {
        let first = self.payloads.len() as u32;
        let packets = bytes.div_ceil(self.mtu as u64).max(1);
        for k in 0..packets {
            self.payloads.push((bytes - k * self.mtu as u64).min(self.mtu as u64) as u32);
        }
        self.message_ends.push_back(self.payloads.len() as u32);
        self.message_bytes.push((first, bytes));
    }

    fn has_data(&self) -> bool {
        (self.next_psn as usize) < self.payloads.len()
    }

    fn sprays(&self) -> bool {
        false
    }

    fn next_packet(&mut self, _port: usize, now: Time, _out: &mut Vec<Action>) -> Option<Outgoing> {
        let psn = self.next_psn;
        let payload = *self.payloads.get(psn as usize)?;
        self.next_psn += 1;
        let first = self.message_bytes.iter().any(|&(f, _)| f == psn);
        let last = self.message_ends.contains(&(psn + 1));
        let data = DataPacket { psn, payload, first, last, retransmission: false, addressed: false, verb: Verb::Write };
        Some(Outgoing { data, entropy: self.entropy, not_before: now })
    }

    fn on_packet(&mut self, end: End, _port: usize, packet: &Packet, _now: Time, out: &mut Vec<Action>) {
        if end != End::Responder || packet.kind != PacketKind::Data || packet.has(flag::TRIMMED) {
            return;
        }
        // Anything out of order is lost for good: nothing is resent.
        if packet.psn != self.received {
            out.push(Action::Received { delivered: 0, discarded: packet.payload(), messages: 0 });
            return;
        }
        self.received += 1;
        let mut messages = 0;
        while self.message_ends.front().is_some_and(|&end| end <= self.received) {
            self.message_ends.pop_front();
            messages += 1;
        }
        out.push(Action::Received { delivered: packet.payload(), discarded: 0, messages });
    }

    fn on_timer(&mut self, _timer: Timer, _now: Time, _out: &mut Vec<Action>) {}

    fn message_bytes(&self, psn: u32) -> u64 {
        self.message_bytes.iter().rev().find(|&&(first, _)| first <= psn).map_or(0, |&(_, bytes)| bytes)
    }

    fn stats(&self) -> QpStats {
        QpStats::default()
    }
}

fn run_fixed_path(loss: f64) -> RunOutput {
    let mut scenario = json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps", "link_delay": "1us"},
        "traffic": [
            {"kind": "flow", "src": 0, "dst": 2, "bytes": "200KB"},
            {"kind": "flow", "src": 1, "dst": 3, "bytes": "100KB", "start": "5us"},
        ],
    });
    if loss > 0.0 {
        scenario["faults"] = json!([{"kind": "loss_rate", "at": "0us", "port": "nic0:0", "rate": loss}]);
        scenario["duration"] = json!("1ms");
    }
    let scenario = Scenario::from_json(&scenario.to_string()).expect("valid scenario");
    let mut sim = Simulation::with_transport(scenario, Box::new(|setup| Box::new(FixedPath::new(setup))))
        .expect("buildable scenario");
    sim.run(&mut |_| true)
}

#[test]
fn a_transport_from_one_file_carries_flows_without_acknowledgements() {
    let out = run_fixed_path(0.0);
    assert_eq!(summary_u64(&out, "flows_completed"), 2, "{}", out.summary);
    assert_eq!(summary_u64(&out, "retransmitted_packets"), 0);
    // Only data crosses the fabric: 50 + 25 packets of 4 KB, three hops each
    // within a pod (NIC, ToR, spine, ToR): no ACK, no CNP.
    let data_packets = 200_000u64.div_ceil(4096) + 100_000u64.div_ceil(4096);
    assert_eq!(summary_u64(&out, "packet_hops"), data_packets * 4, "{}", out.summary);
    assert_eq!(ints(&out.flows, "retransmitted_packets"), [0, 0]);
}

#[test]
fn without_retransmission_a_lossy_nic_never_completes_its_flow() {
    let out = run_fixed_path(0.05);
    // The flow from the lossy NIC loses packets and nothing resends them;
    // the other flow is untouched.
    assert_eq!(summary_u64(&out, "flows_completed"), 1, "{}", out.summary);
    assert!(summary_u64(&out, "data_drops") > 0);
}
