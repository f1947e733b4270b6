//! The discrete-event engine: a time-ordered event queue, seeded random
//! streams and a fast hasher for maps keyed by ids. Nothing here knows what
//! an event means; `sim` defines them.

mod fast_hash;
mod queue;
mod rng;

/// Asks the processor to bring `value` into cache without waiting for it:
/// all of it when it is at most a line (it may straddle two: a packet's
/// 40-byte slot does half the time), else its first line. The simulation
/// is bound by cache misses on ports and packets; starting the next
/// event's loads early lets them overlap the current event.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    prefetch_at(value, 0);
    let size = std::mem::size_of::<T>();
    if size > 1 && size <= 64 {
        // The line of its last byte: its first line again, usually, which
        // costs a hit.
        prefetch_at(value, size - 1);
    }
}

/// Like `prefetch`, for cache lines `lines` (64 bytes each) of a value
/// larger than one.
#[inline(always)]
pub fn prefetch_lines<T>(value: &T, lines: std::ops::Range<usize>) {
    for line in lines {
        prefetch_at(value, 64 * line);
    }
}

/// Starts loading the line `offset` bytes into `value`.
#[inline(always)]
fn prefetch_at<T>(value: &T, offset: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint with no architectural effect, even for
    // an address past the value; the pointer is never dereferenced.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T as *const i8).wrapping_add(offset));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (value, offset);
}

pub use fast_hash::{FastHasher, FastMap};
pub use queue::EventQueue;
pub use rng::{stream_seed, Rng};
