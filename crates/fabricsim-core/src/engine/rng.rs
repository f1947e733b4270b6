//! Seeded random streams, one per entity.
//!
//! Every entity that draws random numbers (a link's loss process, a switch's
//! ECMP seed, a traffic generator) gets its own stream derived from the
//! master seed and a stable stream key, so adding an entity does not change
//! the draws of the others. The generator is xoshiro256** seeded through
//! SplitMix64, as its authors recommend (Blackman and Vigna, 2018).

/// Derives the seed of the stream named by `key` from the master `seed`.
pub fn stream_seed(seed: u64, key: &[u64]) -> u64 {
    let mut state = splitmix64(seed ^ 0x5EED_F00D_CAFE_D00D);
    for &k in key {
        state = splitmix64(state ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }
    state
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A stream for the entity named by `key` under master `seed`.
    pub fn stream(seed: u64, key: &[u64]) -> Rng {
        let mut x = stream_seed(seed, key);
        let mut s = [0; 4];
        for slot in &mut s {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            *slot = splitmix64(x);
        }
        Rng { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, n), without modulo bias (Lemire's method).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }

    /// Exponentially distributed with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_independent_and_reproducible() {
        let a1: Vec<u64> = (0..4).map(|_| 0).scan(Rng::stream(7, &[1]), |r, _| Some(r.next_u64())).collect();
        let a2: Vec<u64> = (0..4).map(|_| 0).scan(Rng::stream(7, &[1]), |r, _| Some(r.next_u64())).collect();
        let b: Vec<u64> = (0..4).map(|_| 0).scan(Rng::stream(7, &[2]), |r, _| Some(r.next_u64())).collect();
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
    }

    #[test]
    fn below_is_roughly_uniform() {
        let mut r = Rng::stream(1, &[]);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[r.below(4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
    }
}
