//! ECMP next-hop selection by a hash of the 5-tuple.
//!
//! RoCEv2 fixes the protocol (UDP), the destination port (4791) and, per
//! QP, the addresses, so the UDP source port carries the entropy
//! (protocols.md s2.1). Each switch mixes in its own seed, as HPCC's ns-3
//! model seeds its hash with the switch id (protocols.md s6.1); giving every
//! switch the same seed reproduces hash polarization.

use crate::engine::Rng;
use crate::net::config::EcmpConfig;
use crate::net::PortId;

const ROCE_UDP_PORT: u64 = 4791;

/// Random stream of the switches' ECMP seeds.
const STREAM_ECMP: u64 = 0xEC39;

/// The hash seed of switch `node`: its own, or one for all switches when
/// `ecmp.same_seed` reproduces polarization.
pub fn switch_seed(ecmp: &EcmpConfig, seed: u64, node: u32) -> u64 {
    if ecmp.same_seed {
        Rng::stream(seed, &[STREAM_ECMP]).next_u64()
    } else {
        Rng::stream(seed, &[STREAM_ECMP, node as u64]).next_u64()
    }
}

/// A 32-bit hash of the flow's 5-tuple under `seed` (SplitMix64 finalizer:
/// every input bit affects every output bit).
pub fn ecmp_hash(src: u32, dst: u32, entropy: u16, seed: u64) -> u32 {
    let tuple = (src as u64) << 32 | dst as u64;
    let ports = (entropy as u64) << 16 | ROCE_UDP_PORT;
    let mut z = tuple ^ ports.rotate_left(40) ^ seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z ^ (z >> 32)) as u32
}

/// The next hop of `hops` (an ECMP group) a packet's 5-tuple hashes to at
/// a switch seeded `seed`; `None` when the group is empty.
#[inline]
pub fn ecmp_pick(hops: &[PortId], src: u32, dst: u32, entropy: u16, seed: u64) -> Option<PortId> {
    match hops.len() {
        0 => None,
        1 => Some(hops[0]),
        // Lemire's multiply-shift maps the hash onto the group without a division.
        n => Some(hops[((ecmp_hash(src, dst, entropy, seed) as u64 * n as u64) >> 32) as usize]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_entropy_evenly() {
        let mut bins = [0u32; 8];
        for sport in 0..8000u16 {
            bins[(ecmp_hash(3, 9, sport, 42) % 8) as usize] += 1;
        }
        assert!(bins.iter().all(|&b| (850..1150).contains(&b)), "{bins:?}");
    }

    #[test]
    fn seed_changes_the_choice() {
        let same = (0..64u16).filter(|&s| ecmp_hash(1, 2, s, 1) % 4 == ecmp_hash(1, 2, s, 2) % 4).count();
        assert!(same < 32);
    }
}
