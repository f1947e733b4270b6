//! A fast hasher for maps keyed by the simulator's own small ids. The
//! standard library's SipHash resists collision flooding by untrusted keys,
//! which ids the simulator makes up do not need; this is the multiply-rotate
//! hash rustc uses internally (FxHash), a few instructions per word.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` hashed by `FastHasher`.
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_differ_in_any_field_hash_apart() {
        let mut map: FastMap<(u32, u32, u64), u32> = FastMap::default();
        for a in 0..50 {
            for b in 0..50 {
                map.insert((a, b, (a * b) as u64), a * 100 + b);
            }
        }
        assert_eq!(map.len(), 2500);
        assert_eq!(map[&(7, 9, 63)], 709);
    }
}
