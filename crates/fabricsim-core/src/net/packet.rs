//! Packets as the simulator moves them: a compact record in a pool.
//!
//! A packet carries ids, not headers: addresses are node ids, the UDP source
//! port (the ECMP entropy) is a u16, sizes are the real header sizes of
//! RoCEv2 so that serialization and payload efficiency are right
//! (`headers`). Packets are recycled through a free list, so the steady
//! state allocates nothing.

use crate::topology::NodeId;

/// Priority classes of an egress port, highest first. Control packets
/// (ACK, NAK, CNP) and trimmed headers use the high class; data is
/// lossless when PFC is on.
pub const CLASS_CONTROL: usize = 0;
pub const CLASS_DATA: usize = 1;
pub const CLASSES: usize = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// An RDMA WRITE packet with payload.
    Data,
    /// An RDMA SEND packet with payload: no RETH; its message takes a RECV
    /// posted at the responder.
    Send,
    /// An RDMA READ response with payload: the data a READ request asked
    /// for, sent back unacknowledged.
    ReadResponse,
    /// Cumulative acknowledgement: `psn` is the next PSN expected.
    Ack,
    /// NAK "PSN sequence error": `psn` is the PSN expected.
    Nak,
    /// RNR NAK "receiver not ready": the SEND at `psn` found no RECV
    /// posted; the requester waits its RNR timer and sends it again.
    RnrNak,
    /// An RDMA READ request from the end that receives the data: the READ
    /// from `psn` on, every PSN before `ack` received.
    ReadRequest,
    /// Congestion notification packet (RoCEv2 BTH opcode 0x81).
    Cnp,
    /// MRC EV probe: tests the path of the EV named in `psn`.
    Probe,
    /// The answer to an EV probe, naming the probed EV in `psn`.
    ProbeReply,
    /// A Clustermapper probe, source-routed from a NIC port back to itself
    /// (`qp` holds the probe round, `psn` the probe's index << 8 | target).
    MapProbe,
    /// A ConWeave signal from a flow's destination ToR to its source ToR
    /// (`switch::conweave::Signal`, in `echo`, `psn` and `ack`), addressed
    /// from the flow's destination NIC to its source.
    Conweave,
}

impl PacketKind {
    /// A packet with payload in the data class: a write's, a SEND's or a
    /// READ response.
    pub fn carries_data(self) -> bool {
        matches!(self, PacketKind::Data | PacketKind::Send | PacketKind::ReadResponse)
    }
}

/// Flag bits of `Packet::flags`.
pub mod flag {
    /// ECN capable transport (IP ECN = ECT(0)).
    pub const ECT: u8 = 1;
    /// Congestion experienced (IP ECN = CE).
    pub const CE: u8 = 1 << 1;
    /// Cut to its headers by a switch that could not buffer it.
    pub const TRIMMED: u8 = 1 << 2;
    /// First packet of a message (carries the RETH).
    pub const FIRST: u8 = 1 << 3;
    /// Last packet of a message (AckReq set).
    pub const LAST: u8 = 1 << 4;
    /// A retransmission.
    pub const RETX: u8 = 1 << 5;
    /// On a SACK: the data packet it answers had arrived before, so the
    /// copy it answers was sent for nothing (a D-SACK, RFC 2883). Control
    /// packets carry no data flags, so it shares RETX's bit.
    pub const DUPLICATE: u8 = RETX;
    /// Carries the immediate data of a write with immediate (ImmDt).
    pub const IMM: u8 = 1 << 6;
    /// Carries its own RDMA address and length (RETH), as every MRC packet
    /// does so that it can be placed in any order (s2.1).
    pub const ADDRESSED: u8 = 1 << 7;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketId(pub u32);

#[derive(Clone, Copy, Debug)]
pub struct Packet {
    pub kind: PacketKind,
    pub class: u8,
    pub flags: u8,
    /// UDP source port: the entropy ECMP hashes on.
    pub entropy: u16,
    pub src: NodeId,
    pub dst: NodeId,
    /// The queue pair this packet belongs to (sender and receiver share it).
    pub qp: u32,
    pub psn: u32,
    /// Payload bytes (the MTU is at most 9000, so 16 bits suffice and a
    /// packet record stays 36 bytes).
    pub payload: u16,
    /// Bytes on the wire including preamble and inter-frame gap.
    pub wire: u16,
    /// Where the packet is: on a wire, the port that sent it (its arrival
    /// event names only the packet); in a switch's queue, the port it
    /// entered by, for PFC ingress accounting.
    pub port: u32,
    /// The sending NIC's ports that are up, one bit per port: MRC's port
    /// state bitmap, which SACKs carry to the other end (s3).
    pub ports_up: u8,
    /// An MRC SACK's (or a READ request's) cumulative acknowledgement:
    /// every PSN below it has arrived, so a lost SACK is made up for by the
    /// next one.
    pub ack: u32,
    /// An MRC SACK's or NACK's echo of the EV the data packet came on, so
    /// the sender knows which of its transmissions arrived.
    pub echo: u16,
}

impl Packet {
    /// A header-only control packet in the high class, `wire` bytes on the
    /// wire, with no flags, no port bitmap and no cumulative ack.
    pub fn control(kind: PacketKind, src: NodeId, dst: NodeId, qp: u32, psn: u32, entropy: u16, wire: u32) -> Packet {
        Packet {
            kind,
            class: CLASS_CONTROL as u8,
            flags: 0,
            entropy,
            src,
            dst,
            qp,
            psn,
            payload: 0,
            wire: wire as u16,
            port: NO_PORT,
            ports_up: 0,
            ack: 0,
            echo: 0,
        }
    }

    pub fn payload(&self) -> u32 {
        self.payload as u32
    }

    pub fn wire(&self) -> u32 {
        self.wire as u32
    }

    pub fn has(&self, bit: u8) -> bool {
        self.flags & bit != 0
    }
}

pub const NO_PORT: u32 = u32::MAX;

/// uSIDs after a 32-bit locator block in a 128-bit address.
pub const USIDS: usize = 6;

// The record's size is what the pool's cache footprint is made of.
const _: () = assert!(std::mem::size_of::<Packet>() == 36);

/// A first-in first-out queue of packets, linked through the pool that
/// holds them: eight bytes in its owner and no allocation of its own, so
/// that a port's queues share a cache line with its serializing state and
/// finding the next packet to send is not a miss of its own.
#[derive(Clone, Copy, Debug)]
pub struct PacketQueue {
    head: u32,
    tail: u32,
}

/// No packet: the end of a `PacketQueue`.
const NO_PACKET: u32 = u32::MAX;

impl Default for PacketQueue {
    fn default() -> Self {
        PacketQueue { head: NO_PACKET, tail: NO_PACKET }
    }
}

impl PacketQueue {
    pub fn front(&self) -> Option<PacketId> {
        (self.head != NO_PACKET).then_some(PacketId(self.head))
    }

    pub fn is_empty(&self) -> bool {
        self.head == NO_PACKET
    }
}

/// The uSIDs of a packet's SRv6 outer destination address after its
/// locator block: each switch on the path shifts its own out (uN).
pub type Usids = [u16; USIDS];

/// A packet and its successor in the queue that holds it (`PacketQueue`),
/// side by side so that taking a packet off a queue is one miss, not two.
struct Slot {
    packet: Packet,
    next: u32,
}

/// Owns every packet in flight; ids stay valid until `free`. In a fabric
/// that forwards by SRv6, each packet also carries its outer destination
/// address's uSIDs, kept beside the packet record so that the records of
/// other fabrics stay 36 bytes.
#[derive(Default)]
pub struct PacketPool {
    slots: Vec<Slot>,
    /// The uSIDs of each slot's packet, when packets are source-routed.
    usids: Vec<Usids>,
    source_routed: bool,
    free: Vec<u32>,
    live: usize,
}

impl PacketPool {
    /// A pool whose packets carry SRv6 uSIDs.
    pub fn source_routed() -> PacketPool {
        PacketPool { source_routed: true, ..PacketPool::default() }
    }

    #[inline]
    pub fn alloc(&mut self, packet: Packet) -> PacketId {
        self.alloc_routed(packet, [0; USIDS])
    }

    /// Allocates a packet carrying `usids` (ignored unless source-routed;
    /// all zero for a packet with no path, which its first switch drops).
    #[inline(always)]
    pub fn alloc_routed(&mut self, packet: Packet, usids: Usids) -> PacketId {
        self.live += 1;
        if let Some(i) = self.free.pop() {
            self.slots[i as usize].packet = packet;
            if self.source_routed {
                self.usids[i as usize] = usids;
            }
            PacketId(i)
        } else {
            self.slots.push(Slot { packet, next: NO_PACKET });
            if self.source_routed {
                self.usids.push(usids);
            }
            PacketId(self.slots.len() as u32 - 1)
        }
    }

    /// The uSIDs packet `id` carries (all zero unless source-routed).
    pub fn usids(&self, id: PacketId) -> Usids {
        self.usids.get(id.0 as usize).copied().unwrap_or([0; USIDS])
    }

    /// The uSIDs of a packet of a source-routed pool, for a switch to shift.
    pub fn usids_mut(&mut self, id: PacketId) -> &mut Usids {
        &mut self.usids[id.0 as usize]
    }

    pub fn free(&mut self, id: PacketId) {
        self.live -= 1;
        self.free.push(id.0);
    }

    pub fn get(&self, id: PacketId) -> &Packet {
        &self.slots[id.0 as usize].packet
    }

    pub fn get_mut(&mut self, id: PacketId) -> &mut Packet {
        &mut self.slots[id.0 as usize].packet
    }

    /// Appends packet `id` to `queue`.
    #[inline]
    pub fn push_back(&mut self, queue: &mut PacketQueue, id: PacketId) {
        self.slots[id.0 as usize].next = NO_PACKET;
        match queue.tail {
            NO_PACKET => queue.head = id.0,
            tail => self.slots[tail as usize].next = id.0,
        }
        queue.tail = id.0;
    }

    /// Takes the packet at the front of `queue`.
    #[inline]
    pub fn pop_front(&mut self, queue: &mut PacketQueue) -> Option<PacketId> {
        let id = queue.front()?;
        queue.head = self.slots[id.0 as usize].next;
        if queue.head == NO_PACKET {
            queue.tail = NO_PACKET;
        }
        Some(id)
    }

    /// The packets of `queue`, front first.
    pub fn queued(&self, queue: PacketQueue) -> impl Iterator<Item = PacketId> + '_ {
        std::iter::successors(queue.front(), |id| {
            let next = self.slots[id.0 as usize].next;
            (next != NO_PACKET).then_some(PacketId(next))
        })
    }

    /// Packets currently allocated.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Slots ever allocated: the pool's high-water mark.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}
