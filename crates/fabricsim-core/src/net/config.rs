//! Parameters of switch queues, buffers, ECN, PFC and trimming, as the
//! scenario's `switch` section gives them. Defaults name their sources.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::{Bytes, Time};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SwitchConfig {
    /// Shared packet buffer per switch. Default 32MB, the HPCC simulation
    /// configuration (protocols.md s3.6); Tomahawk 5 and Spectrum-4 have
    /// about 160MB (s8.1).
    pub buffer: Bytes,
    /// Dynamic threshold of lossy egress queues (Choudhury-Hahne): a queue may
    /// grow while it holds less than alpha times the free shared buffer.
    /// Default 1, ConWeave's EgressAlpha (protocols.md s4.3).
    pub egress_alpha: f64,
    pub ecn: EcnConfig,
    pub pfc: PfcConfig,
    pub trimming: TrimConfig,
    /// How switches forward: `ecmp` over shortest paths, `srv6`: static
    /// micro-SID source routes chosen by the sender's entropy value
    /// (mrc-srv6-multiplane.txt s2.2), which failures never change, or
    /// `adaptive`: per packet, to one of the least-loaded shortest-path
    /// next hops (spectrum-x.txt s4.1), `drill`: per packet, to the
    /// shortest of a few sampled queues (DRILL, SIGCOMM 2017), or
    /// `letflow`: per flowlet, to a random next hop (LetFlow, NSDI 2017),
    /// `ar_tomahawk`: per packet, to the next hop of best load-and-queue
    /// quality (Broadcom Tomahawk's adaptive routing as PRO models it),
    /// `path_id`: where the PathID in the UDP source port's low 12 bits
    /// says (PRO, pro-deterministic-lb.txt s5), with adaptive routing (as
    /// `switch.adaptive` sets it) for ports that left their group after a
    /// failure, or `conweave`: per flow, source-routed by the source ToR and
    /// moved to another path when an RTT probe comes back late, with the
    /// destination ToR putting the flow back in order (ConWeave, SIGCOMM
    /// 2023).
    pub forwarding: Forwarding,
    /// ECMP hashing.
    pub ecmp: EcmpConfig,
    /// Adaptive routing, when `forwarding` is `adaptive`.
    pub adaptive: AdaptiveConfig,
    /// DRILL, when `forwarding` is `drill`.
    pub drill: DrillConfig,
    /// LetFlow, when `forwarding` is `letflow`.
    pub letflow: LetflowConfig,
    /// Tomahawk's adaptive routing, when `forwarding` is `ar_tomahawk`.
    pub tomahawk_ar: TomahawkArConfig,
    /// ConWeave, when `forwarding` is `conweave`.
    pub conweave: ConweaveConfig,
    /// Time from a link or switch failure (or recovery) until every switch
    /// forwards on the new routes: a BGP-like control plane. Until then
    /// packets routed to a dead link are lost. The control plane routes by
    /// the link's state when the delay is up: a flap shorter than this is
    /// never routed around, and each failure waits its own delay.
    pub reconvergence_delay: Time,
    /// Stacked dual-ToR (`topology.tor_stack`): how long after its stack
    /// link fails, or its primary's data plane does, a secondary ToR
    /// shuts itself down (and after the stack is whole again, resumes).
    /// Default 5s, the default vPC peer-keepalive timeout (Cisco Nexus
    /// 5000 NX-OS configuration guide: keepalives every 1s, timeout 5s).
    pub stack_failover_delay: Time,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            buffer: Bytes(32_000_000),
            egress_alpha: 1.0,
            ecn: EcnConfig::default(),
            pfc: PfcConfig::default(),
            trimming: TrimConfig::default(),
            forwarding: Forwarding::Ecmp,
            ecmp: EcmpConfig::default(),
            adaptive: AdaptiveConfig::default(),
            drill: DrillConfig::default(),
            letflow: LetflowConfig::default(),
            tomahawk_ar: TomahawkArConfig::default(),
            conweave: ConweaveConfig::default(),
            // BGP with BFD converges in tens of milliseconds in practice; a
            // scenario studying failures should set its own value.
            reconvergence_delay: Time::from_ms(1),
            stack_failover_delay: Time::from_ms(5000),
        }
    }
}

/// RED-style ECN marking at egress dequeue, as DCQCN's switch side (CP)
/// does (protocols.md s3.2).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EcnConfig {
    pub enabled: bool,
    /// Below this queue depth nothing is marked. Default 100KB, ConWeave's
    /// DCQCN setting for every link speed (protocols.md s3.6).
    pub kmin: Bytes,
    /// Above this depth every packet is marked. Default 400KB (ConWeave).
    pub kmax: Bytes,
    /// Marking probability at kmax. Default 0.2 (HPCC and ConWeave).
    pub pmax: f64,
    /// Mark on ports that face a NIC. MRC turns this off so that ECN only
    /// reports fabric congestion (mrc-srv6-multiplane.txt s2.1).
    pub last_hop: bool,
}

impl Default for EcnConfig {
    fn default() -> Self {
        EcnConfig { enabled: true, kmin: Bytes(100_000), kmax: Bytes(400_000), pmax: 0.2, last_hop: true }
    }
}

/// Priority flow control (IEEE 802.1Qbb) on the data class.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PfcConfig {
    pub enabled: bool,
    /// Dynamic XOFF threshold: pause an ingress port's data class when the
    /// bytes it holds exceed alpha times the free shared buffer. Default
    /// 1/16, ConWeave's Broadcom-like IngressAlpha (protocols.md s4.3).
    pub xoff_alpha: f64,
    /// Resume when the held bytes fall this far below the XOFF threshold.
    /// Default 3KB, HPCC's resume offset (protocols.md s4.3).
    pub xon_offset: Bytes,
    /// Headroom per ingress port for bytes in flight after a pause: unset
    /// means 2 x rate x propagation delay + 2 MTU, ConWeave's formula
    /// (protocols.md s4.2). Overflowing it drops the packet.
    pub headroom: Option<Bytes>,
}

impl Default for PfcConfig {
    fn default() -> Self {
        PfcConfig { enabled: true, xoff_alpha: 1.0 / 16.0, xon_offset: Bytes(3_000), headroom: None }
    }
}

/// Packet trimming: a data packet that cannot be buffered, or that finds
/// its egress queue at the trimming threshold, is cut to its headers and
/// sent in the high-priority class instead of being dropped (SAI
/// packet-trimming proposal, protocols.md s5.2; NDP and UET switches trim
/// to keep data queues short, s5.3).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TrimConfig {
    pub enabled: bool,
    /// Frame size after trimming. Default 128B, SAI_SWITCH_ATTR_PACKET_TRIM_SIZE.
    pub size: Bytes,
    /// Bytes an egress data queue may hold before arriving data packets are
    /// trimmed. Unset means the ECN `kmax` (400KB by default): trimming
    /// takes over where ECN's marking range ends, as in UEC's htsim, whose
    /// ECN thresholds lie inside its trimming queue (protocols.md s5.3).
    /// The buffer's dynamic threshold still trims (or drops) below it.
    pub threshold: Option<Bytes>,
}

impl Default for TrimConfig {
    fn default() -> Self {
        TrimConfig { enabled: false, size: Bytes(128), threshold: None }
    }
}

impl SwitchConfig {
    /// The egress queue depth from which data packets are trimmed.
    pub fn trim_threshold(&self) -> u64 {
        self.trimming.threshold.unwrap_or(self.ecn.kmax).0
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Forwarding {
    #[default]
    Ecmp,
    Srv6,
    Adaptive,
    Drill,
    Letflow,
    PathId,
    ArTomahawk,
    Conweave,
}

impl Forwarding {
    /// Whether the switches keep a lone flow's packets on one path: by hash
    /// (ECMP), by its source route (SRv6), or per flowlet or flow (LetFlow,
    /// ConWeave), which a flow alone on an idle fabric never leaves. The
    /// others choose per packet.
    pub fn keeps_a_lone_flow_on_one_path(self) -> bool {
        matches!(self, Forwarding::Ecmp | Forwarding::Srv6 | Forwarding::Letflow | Forwarding::Conweave)
    }
}

/// ConWeave (Song et al., SIGCOMM 2023), as its authors' ns-3 model runs it
/// (conweave-ns3, conweave-routing.cc; protocols.md s6.5). Defaults are the
/// model's leaf-spine settings (run.py); its 3-tier lossless settings are
/// `voq_flush_extra` 64us, `voq_default_wait` 600us, `tx_expiry` 1ms.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ConweaveConfig {
    /// Added to the base RTT between two ToRs to make the deadline of an
    /// RTT probe's reply; a late reply means the path is congested and the
    /// flow moves. Default 4us.
    pub reply_deadline_extra: Time,
    /// How long a path stays out of the choice after the destination ToR
    /// reports an ECN mark on it. Default 16us.
    pub path_pause: Time,
    /// A flow idle this long starts a new epoch, free to take a new path
    /// whatever the state of its reordering. Default 300us.
    pub tx_expiry: Time,
    /// Slack added to the destination ToR's estimate of when the old path's
    /// last packet arrives, before it releases held packets anyway.
    /// Default 16us.
    pub voq_flush_extra: Time,
    /// How long the destination ToR holds packets of a new path when it has
    /// seen nothing of the old one to estimate from. Default 200us.
    pub voq_default_wait: Time,
}

impl Default for ConweaveConfig {
    fn default() -> Self {
        ConweaveConfig {
            reply_deadline_extra: Time::from_us(4),
            path_pause: Time::from_us(16),
            tx_expiry: Time::from_us(300),
            voq_flush_extra: Time::from_us(16),
            voq_default_wait: Time::from_us(200),
        }
    }
}

/// Broadcom Tomahawk's per-packet adaptive routing (`forwarding:
/// ar_tomahawk`): every next hop graded by its transmit load and queue
/// depth, refreshed once per update interval, the best grade chosen.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TomahawkArConfig {
    /// How often a port's quality is refreshed. Default 1us, as PRO's
    /// evaluation models Tomahawk 4 (pro-deterministic-lb.txt s6).
    pub update_interval: Time,
    /// Percent of the quality that comes from transmit load, the rest from
    /// queued bytes. Default 50: Broadcom-based switches weigh the two
    /// equally by default (Juniper's DLB documentation, protocols.md s6.3;
    /// OpenBCM's TH2 driver defaults to load only, 100).
    pub load_weight: u8,
    /// Queued bytes at which the queue metric reaches its worst of 8 equal
    /// bands. Default 400KB, the ECN `kmax` default.
    pub queue_max: Bytes,
    /// The load EWMA's gain per update is 2^-exponent. Default 2 (OpenBCM's
    /// examples use 2-3).
    pub ewma_exponent: u8,
}

impl Default for TomahawkArConfig {
    fn default() -> Self {
        TomahawkArConfig {
            update_interval: Time::from_us(1),
            load_weight: 50,
            queue_max: Bytes(400_000),
            ewma_exponent: 2,
        }
    }
}

/// DRILL (Ghorbani et al., SIGCOMM 2017), a switch's per-packet micro load
/// balancing: each packet goes to the least occupied of `samples` next hops
/// drawn at random and the `memory` best of the switch's last choice among
/// the same next hops.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DrillConfig {
    /// Ports sampled at random per packet (DRILL's d). Default 2, the
    /// paper's DRILL(2,1) and ConWeave's ns-3 model (pro-deterministic-lb.txt
    /// s6 runs it so). At most the widest group of next hops.
    pub samples: u32,
    /// Best ports remembered from the last decision (DRILL's m). Default 1.
    pub memory: u32,
}

impl Default for DrillConfig {
    fn default() -> Self {
        DrillConfig { samples: 2, memory: 1 }
    }
}

/// LetFlow (Vanini et al., NSDI 2017): flowlet switching, each new flowlet
/// of a flow on a next hop drawn at random.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LetflowConfig {
    /// A packet that follows its flow's previous one by more than this
    /// starts a new flowlet. Default 100us, ConWeave's ns-3 LetFlow model
    /// for RDMA (conweave-ns3, letflow-routing.cc), which PRO's evaluation
    /// uses (pro-deterministic-lb.txt s6).
    pub flowlet_timeout: Time,
}

impl Default for LetflowConfig {
    fn default() -> Self {
        LetflowConfig { flowlet_timeout: Time::from_us(100) }
    }
}

/// Per-packet adaptive routing, a quantized join-shortest-queue
/// (spectrum-x.txt s4.1): each packet goes to one of the next hops of its
/// destination's ECMP group whose sampled queue depth falls in the lowest
/// band, chosen at random among them. A port that is down is never chosen,
/// at once (s4.4.2: O(100ns), no control plane).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AdaptiveConfig {
    /// How often a switch samples its egress queue depths; packets are
    /// routed on the last sample. Default 100ns, the sampling period of
    /// csg-htsim's adaptive-routing model (protocols.md s6.3); the paper
    /// says "sub-microsecond", and its Fig 1b shows queues growing fivefold
    /// once the delay reaches 1us.
    pub sample_interval: Time,
    /// Queue-depth band edges, increasing: a port's score is the number of
    /// edges its sampled depth reaches. Default 20KB, 40KB, 80KB: csg-htsim's
    /// four bands (below 5%, 10%, 20% of the queue, and above) of a 400KB
    /// queue, the ECN `kmax` default. Empty: every port scores alike, and
    /// the switch sprays packets at random.
    pub bands: Vec<Bytes>,
    /// Weighted adaptive routing (s4.4.2, Fig 5): with a link down
    /// somewhere, the control plane gives each next hop a weight, the
    /// capacity left from it to the destination (a max-flow over the
    /// working links, split over parallel links and capped at the link's
    /// rate). A port's depth is scaled by the largest weight over its own
    /// before it is banded, and ties are broken in proportion to weight.
    /// The weights arrive with the routes, `reconvergence_delay` after the
    /// failure, as the paper's BGP control plane distributes them.
    pub weighted: bool,
    /// Mark ECN only where load balancing is exhausted (spectrum-x.txt
    /// s4.2, Fig 3): a data packet is marked, on the RED curve of
    /// `switch.ecn`, by the sampled depth of the shallowest next hop of its
    /// group as it is routed, not by its own queue as it leaves. Toward a
    /// NIC the group is one port, so endpoint congestion marks as before.
    /// Default on.
    pub mark_on_exhaustion: bool,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            sample_interval: Time::from_ns(100),
            bands: vec![Bytes(20_000), Bytes(40_000), Bytes(80_000)],
            weighted: true,
            mark_on_exhaustion: true,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EcmpConfig {
    /// Give every switch the same hash seed. Cascaded hashing with one seed
    /// reproduces hash polarization (alibaba-hpn.txt s2.2); by default each
    /// switch has its own seed, as HPCC's ns-3 model seeds it with the switch
    /// id (protocols.md s6.1).
    pub same_seed: bool,
}
