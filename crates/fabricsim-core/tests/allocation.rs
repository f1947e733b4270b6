//! The steady state of a run allocates nothing per packet: packets come from
//! a pool, queues and the event queue keep their capacity.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use fabricsim_core::units::Time;
use fabricsim_core::{Scenario, Simulation};
use serde_json::json;

struct Counting;
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steady_state_allocates_nothing_per_packet() {
    let scenario = json!({
        "topology": {"kind": "clos", "tiers": 3, "radix": 8, "link_rate": "100Gbps"},
        "traffic": [{"kind": "permutation", "bytes": "4MB"}],
    });
    let mut sim = Simulation::new(Scenario::from_json(&scenario.to_string()).unwrap()).unwrap();
    // Warm up (300 us): queues, the pool and the event buckets reach their
    // sizes while DCQCN settles.
    assert_eq!(sim.run_until(Time::from_us(300), &mut |_| true), None);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let events_before = sim.events_executed();
    assert_eq!(sim.run_until(Time::from_us(600), &mut |_| true), None);
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let events = sim.events_executed() - events_before;
    assert!(events > 100_000, "the window must be busy: {events} events");
    // Occasional growth of a queue to a new maximum is fine; one allocation
    // per thousand events is not.
    assert!(allocations * 1000 < events, "{allocations} allocations in {events} events");
}
