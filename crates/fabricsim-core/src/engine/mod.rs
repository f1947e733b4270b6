//! The discrete-event engine: a time-ordered event queue and seeded random
//! streams. Nothing here knows what an event means; `sim` defines them.

mod queue;
mod rng;

/// Asks the processor to bring `value` into cache without waiting for it.
/// The simulation is bound by cache misses on ports and packets; starting
/// the next event's loads early lets them overlap the current event.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint with no architectural effect; the pointer
    // comes from a live reference.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(value as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

pub use queue::EventQueue;
pub use rng::{stream_seed, Rng};
