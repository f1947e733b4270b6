//! The NIC below its transports: its parameters, the record it keeps of
//! each QP (`qp`), and which QP sends next on each port (`scheduler`).

mod orchestrator;
mod qp;
pub(crate) mod repac;
mod scheduler;

pub(crate) use orchestrator::Orchestrator;
pub(crate) use qp::Qp;
pub(crate) use scheduler::{Pick, PortScheduler};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::net::IpVersion;
use crate::units::{Bytes, Time};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NicConfig {
    /// RDMA payload per packet (path MTU). Default 4096B, the largest RoCE
    /// MTU, used by AI fabrics (protocols.md s2.4).
    pub mtu: Bytes,
    /// IP version of the RoCEv2 encapsulation (sets the header size).
    pub ip: IpVersion,
    /// Packets a QP sends per scheduling turn.
    pub batch: u32,
    /// How long after one of its ports goes down the NIC stops sending on
    /// it. Zero remaps at once; CX-8 MRC takes a noticeable time to remap
    /// every QP's EVs, a glitch in throughput (mrc-srv6-multiplane.txt s3).
    pub remap_delay: Time,
    /// Who picks a data packet's path: `transport` (the UDP source port the
    /// transport gives it: one per RoCE QP, an EV under MRC), or
    /// `orchestrated`: PRO's orchestrated round robin writes a PathID into
    /// its low 12 bits (pro-deterministic-lb.txt s3.A), for switches that
    /// forward by it (`switch.forwarding: path_id`; under hashing it is
    /// per-packet spraying); or `disjoint`: HPN's collective library
    /// replays every switch's ECMP hash (RePaC) and gives each QP of a
    /// connection a UDP source port whose path shares no link with the
    /// connection's other QPs (alibaba-hpn.txt s6.1, Appendix B), trying
    /// up to 1024 source ports per QP; where fewer disjoint paths exist
    /// than QPs, the rest take the least-shared ones and the run warns.
    pub path_selection: PathSelection,
    /// What the orchestration coordinates, for PRO's ablations (Fig 11).
    pub orchestration: OrchestrationConfig,
    /// What the NIC does with its QPs that do not spray when one of its
    /// ports goes down (once `remap_delay` has passed): `none`, they stay
    /// on it and lose what they send until it returns; or `lacp`, the NIC's
    /// ports are one active-active bond, as a dual-ToR NIC's two ports are
    /// (alibaba-hpn.txt s4.2: one IP and MAC, LACP toward two independent
    /// ToRs): each QP sends on its own port while that is up, else on one
    /// of the bond's ports that are, chosen by its UDP source port, and
    /// returns when its port does. Both ends of a QP follow it: the
    /// responder's acknowledgements leave by a port that is up. Default
    /// `none`.
    pub port_failover: PortFailover,
    /// How a message is put on the QPs of its connection (or of a job's
    /// channel): `stripe`, split evenly over all of them (QP scaling), or
    /// `least_loaded`, whole on the QP with the fewest bytes posted and not
    /// yet completed, as HPN's collective library does over its
    /// disjoint-path connections (alibaba-hpn.txt s6.1, Appendix B,
    /// Algorithm 2; a message counts as completed when its last byte is
    /// placed at the responder). Default `stripe`.
    pub message_split: MessageSplit,
    /// Whether the NIC learns that the direction it sends on failed from
    /// the far end's remote-fault signal (IEEE 802.3 clause 46 link fault
    /// signalling), as it learns at once of a failure of the direction it
    /// receives on. False models the firmware bug of alibaba-hpn.txt s10:
    /// the NIC keeps sending into a dead direction, until LACP (with
    /// `port_failover: lacp`) takes the port out of the bond
    /// `lacp_timeout` later, or for good without it. Default true.
    pub link_fault_signaling: bool,
    /// How long LACP takes to take a silently failed port out of the bond:
    /// default 3s, LACP's short timeout (IEEE 802.1AX: three missed
    /// LACPDUs at the fast rate of one per second).
    pub lacp_timeout: Time,
    /// SHIFT (shift-rdma-failover.txt): every RoCE QP gets a backup QP
    /// between backup NICs of the same two hosts; when the default QP
    /// fails, its outstanding messages move to the backup, and they move
    /// back once a probe finds the default path working. Default: off.
    pub shift: Option<ShiftConfig>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ShiftConfig {
    /// A QP's backup NIC at each end: the host's NIC this many rails on
    /// (modulo the host's NICs). Default 1.
    pub backup_rail_offset: u32,
    /// The host's steps of a fallback, from the error completion: polling
    /// the completions, finding the outstanding work requests, rewinding
    /// them and resetting the default QP (s4.2.2). Then a WRITE_WITH_IMM
    /// on the backup QP notifies the receiver, and once it completes the
    /// work requests are reposted: the measured fallback time
    /// (`summary.shift.fallback_time_mean_s`) adds that trip. Default
    /// 2.3 ms, the paper's measured mean (s5.1.1), which the trip (a few
    /// microseconds) barely moves: fitted to that number, so s5.1.1's
    /// figure is not a result here.
    pub fallback_time: Time,
    /// How often the default path is probed, by an empty write, while
    /// traffic is on the backup (s4.2.3). The paper gives no interval;
    /// default 10 ms.
    pub probe_interval: Time,
    /// How long after the run starts the backup QPs are ready: the shadow
    /// control verbs run in the background and do not hold traffic back,
    /// but a fallback cannot finish before they have (s4.1). Default
    /// 35 ms, the paper's measured time (s5.1.2: mostly ibv_open_device and
    /// the KV transfer).
    pub setup_time: Time,
}

impl Default for ShiftConfig {
    fn default() -> Self {
        ShiftConfig {
            backup_rail_offset: 1,
            fallback_time: Time::from_us(2300),
            probe_interval: Time::from_ms(10),
            setup_time: Time::from_ms(35),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageSplit {
    #[default]
    Stripe,
    LeastLoaded,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PortFailover {
    #[default]
    None,
    Lacp,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OrchestrationConfig {
    /// One path set per destination ToR, walked by each QP with its span
    /// (true), or one round robin per NIC port over every packet, whatever
    /// its QP and destination (false: Fig 11a's "RR without
    /// destination-aware", the QP-unaware NIC-level round robin of Fig 3).
    pub destination_aware: bool,
    /// QPs staggered by the shared counter and a span of the active QPs
    /// (true), or each QP stepping by one from the same start, in lockstep
    /// with the others (Fig 11b's "RR without inter-QP orchestration").
    pub inter_qp: bool,
}

impl Default for OrchestrationConfig {
    fn default() -> Self {
        OrchestrationConfig { destination_aware: true, inter_qp: true }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PathSelection {
    #[default]
    Transport,
    Orchestrated,
    Disjoint,
}

impl Default for NicConfig {
    fn default() -> Self {
        NicConfig {
            mtu: Bytes(4096),
            ip: IpVersion::Ipv6,
            batch: 1,
            remap_delay: Time::ZERO,
            path_selection: PathSelection::Transport,
            orchestration: OrchestrationConfig::default(),
            port_failover: PortFailover::None,
            message_split: MessageSplit::Stripe,
            link_fault_signaling: true,
            lacp_timeout: Time::from_ms(3000),
            shift: None,
        }
    }
}
