//! Runs a scenario given as a JSON file and prints its summary: a way to
//! profile the core without Python.
use std::time::Instant;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let path = std::env::args().nth(1).expect("usage: run_json SCENARIO.json");
    let text = std::fs::read_to_string(&path).expect("readable scenario");
    let scenario = fabricsim_core::Scenario::from_json(&text).unwrap_or_else(|e| panic!("{e}"));
    let start = Instant::now();
    let mut setup = fabricsim_core::Setup::default();
    let built = fabricsim_core::Model::build(scenario, &mut setup).unwrap_or_else(|e| panic!("{e}"));
    let out = built.expect("not stopped").run(&mut |_| true);
    let wall = start.elapsed().as_secs_f64();
    let hops = out.summary["packet_hops"].as_f64().unwrap_or(0.0);
    let events = out.summary["events"].as_f64().unwrap_or(0.0);
    println!("{}", out.summary);
    println!("wall {wall:.3}s  events/s {:.0}  packet-hops/s {:.0}", events / wall, hops / wall);
}
