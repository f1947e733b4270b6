//! The RDMA writes (and SENDs) a requester has posted and not yet had
//! acknowledged, each cut into MTU-sized packets numbered by PSN: what
//! every transport's sender needs to know about a packet (its payload,
//! whether it starts or ends its message, whether it carries the
//! immediate, whether it is a SEND) before it sends it.

use std::collections::VecDeque;

use super::{DataPacket, Verb, Warm};
use crate::engine::prefetch;

/// One posted write: PSNs `[first, end)`.
#[derive(Clone, Copy, Debug)]
struct Write {
    first: u32,
    end: u32,
    mtu: u32,
    last_payload: u32,
    verb: Verb,
}

#[derive(Clone, Debug, Default)]
pub struct PostedWrites {
    writes: VecDeque<Write>,
    end: u32,
}

impl PostedWrites {
    /// Posts a message of `bytes`, at least one packet, cut at `mtu`;
    /// returns its first PSN and packet count.
    pub fn post(&mut self, bytes: u64, mtu: u32, verb: Verb) -> (u32, u32) {
        let packets = bytes.div_ceil(mtu as u64).max(1) as u32;
        let last_payload = (bytes - (packets as u64 - 1) * mtu as u64) as u32;
        let first = self.end;
        self.end += packets;
        self.writes.push_back(Write { first, end: self.end, mtu, last_payload, verb });
        (first, packets)
    }

    /// One past the last PSN posted.
    pub fn end(&self) -> u32 {
        self.end
    }

    /// `Transport::warm`'s stages for looking up a posted packet (`packet`).
    pub fn warm(&self, stage: Warm) {
        match stage {
            Warm::Own => prefetch(&self.writes),
            Warm::Reached => {
                if let Some(oldest) = self.writes.front() {
                    prefetch(oldest);
                }
            }
        }
    }

    fn write_of(&self, psn: u32) -> Option<&Write> {
        self.writes.iter().find(|w| w.first <= psn && psn < w.end)
    }

    /// Packet `psn` of a posted write, as a first transmission.
    pub fn packet(&self, psn: u32) -> Option<DataPacket> {
        let w = self.write_of(psn)?;
        let last = psn + 1 == w.end;
        Some(DataPacket {
            psn,
            payload: if last { w.last_payload } else { w.mtu },
            first: psn == w.first,
            last,
            retransmission: false,
            addressed: false,
            verb: w.verb,
        })
    }

    /// One past the last PSN of the message `psn` belongs to.
    pub fn message_end(&self, psn: u32) -> Option<u32> {
        self.write_of(psn).map(|w| w.end)
    }

    /// Length of the write `psn` belongs to (the RETH's DMA length).
    pub fn write_bytes(&self, psn: u32) -> u64 {
        self.write_of(psn).map_or(0, |w| (w.end - w.first - 1) as u64 * w.mtu as u64 + w.last_payload as u64)
    }

    /// Messages posted and not wholly acknowledged.
    pub fn unacknowledged(&self) -> usize {
        self.writes.len()
    }

    /// Forgets the writes wholly below `psn`: all acknowledged.
    pub fn forget_below(&mut self, psn: u32) {
        while self.writes.front().is_some_and(|w| w.end <= psn) {
            self.writes.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_cut_at_the_mtu_and_numbered_on() {
        let mut w = PostedWrites::default();
        assert_eq!(w.post(2500, 1000, Verb::WriteImm), (0, 3));
        assert_eq!(w.post(1, 1000, Verb::Send), (3, 1));
        let p: Vec<DataPacket> = (0..4).map(|psn| w.packet(psn).unwrap()).collect();
        assert_eq!(p.iter().map(|p| p.payload).collect::<Vec<_>>(), [1000, 1000, 500, 1]);
        assert_eq!(p.iter().map(|p| (p.first, p.last, p.headers().imm)).collect::<Vec<_>>()[2], (false, true, true));
        assert!(p[3].first && p[3].last && p[3].verb == Verb::Send && p[3].headers().bytes() == 0);
        assert!(p[0].headers().reth && p[0].verb == Verb::WriteImm);
        assert_eq!((w.write_bytes(1), w.write_bytes(3), w.end()), (2500, 1, 4));
        w.forget_below(3);
        assert_eq!(w.packet(1), None);
    }
}
