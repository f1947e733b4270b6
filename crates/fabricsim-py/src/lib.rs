//! `fabricsim._core`: the Python binding of fabricsim-core.
//!
//! Scenarios cross the boundary once, as JSON text; results come back as
//! a JSON document of the summary and a buffer per table column
//! (`tables.rs`), which Python turns into frames. The core
//! runs with the GIL released; every few thousand events it reports
//! progress, and the binding takes the GIL about five times a second to
//! forward it and to notice Ctrl-C, which stops the run and returns what
//! was measured, marked incomplete. A panic in the core becomes
//! `SimulationError`; an invalid scenario becomes `ScenarioError`.

mod machine;
mod tables;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use fabricsim_core::scenario::design::Design;
use fabricsim_core::{scenario, Model, Scenario, ScenarioError as CoreScenarioError, Setup};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

create_exception!(_core, ScenarioError, PyValueError, "The scenario cannot be simulated as written.");
create_exception!(_core, SimulationError, PyRuntimeError, "The simulator failed internally.");

/// The allocator of the core's memory (Python's own stays with Python's).
/// A run is bound by cache and TLB misses over its ports, packets and queue
/// pairs; with mimalloc the MRC bench runs 25-35% faster than with glibc's
/// malloc at 1,024 hosts and 15% at 8,192 (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PROGRESS_PERIOD: Duration = Duration::from_millis(200);

fn scenario_error(e: CoreScenarioError) -> PyErr {
    ScenarioError::new_err(e.to_string())
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

thread_local! {
    /// Where the last panic on this thread happened, kept by the quiet hook.
    static PANIC_AT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Replaces Rust's default panic report (a message and a backtrace hint on
/// stderr) with one that only remembers where: the panic reaches the user
/// once, as `SimulationError`, and stderr stays the caller's.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!(" (at {}:{})", l.file(), l.line())).unwrap_or_default();
        PANIC_AT.with(|p| *p.borrow_mut() = at);
    }));
}

/// Runs `f` and turns a panic into `SimulationError`.
fn guarded<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let at = PANIC_AT.with(|a| std::mem::take(&mut *a.borrow_mut()));
        Err(SimulationError::new_err(format!("internal error: {}{at}", panic_message(p))))
    })
}

fn json_loads(py: Python<'_>, text: &str) -> PyResult<Py<PyAny>> {
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

/// Either model, run to its end.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// JSON Schema of scenarios.
#[pyfunction]
fn schema() -> String {
    scenario::json_schema()
}

/// Bytes of memory this machine has available now, if known.
#[pyfunction]
fn available_memory() -> Option<u64> {
    machine::available_memory()
}

/// Validates a scenario, and that it fits in `available_memory` bytes
/// (unset: what the machine has available now), and returns it with every
/// default filled in. With `to_run` false, one that sends nothing passes,
/// for its topology alone (`fabricsim topo`).
/// Ctrl-C is honoured while it plans.
#[pyfunction]
#[pyo3(signature = (scenario_json, available_memory = None, to_run = true))]
fn resolve(py: Python<'_>, scenario_json: &str, available_memory: Option<u64>, to_run: bool) -> PyResult<String> {
    py.detach(|| {
        guarded(|| {
            let scenario = Scenario::from_json(scenario_json).map_err(scenario_error)?;
            if to_run {
                scenario.check_sends_something().map_err(scenario_error)?;
            }
            // Planning catches what the schema cannot: topology, hosts, ports, memory.
            let available_memory = available_memory.or_else(machine::available_memory);
            let mut keep_going = || Python::attach(|py| py.check_signals()).is_ok();
            let mut setup = Setup { available_memory, keep_going: Some(&mut keep_going) };
            if !Model::check(&scenario, &mut setup).map_err(scenario_error)? {
                return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted while checking"));
            }
            Ok(scenario.to_json())
        })
    })
}

/// The designs a scenario can name (`design:`), in the order compared.
#[pyfunction]
fn designs() -> Vec<&'static str> {
    Design::ALL.iter().map(|d| d.name()).collect()
}

/// The scenario (JSON) under `design` instead of whatever it chose: the
/// settings any design sets taken out, `design` named.
#[pyfunction]
fn under_design(scenario_json: &str, design: &str) -> PyResult<String> {
    let value: serde_json::Value = serde_json::from_str(scenario_json)
        .map_err(|e| scenario_error(CoreScenarioError::new("scenario", format!("not valid JSON: {e}"))))?;
    let design: Design = serde_json::from_value(serde_json::Value::from(design)).map_err(|_| {
        let names: Vec<&str> = Design::ALL.iter().map(|d| d.name()).collect();
        scenario_error(CoreScenarioError::new(
            "design",
            format!("'{design}' is not a design: one of {}", names.join(", ")),
        ))
    })?;
    Ok(fabricsim_core::scenario::design::under(&value, design).to_string())
}

/// The topology calculator's counts, as JSON.
#[pyfunction]
fn topology_report(scenario_json: &str) -> PyResult<String> {
    guarded(|| {
        let scenario = Scenario::from_json(scenario_json).map_err(scenario_error)?;
        let topo = scenario.topology.build_within(machine::available_memory()).map_err(scenario_error)?;
        Ok(serde_json::to_string(&topo.report()).expect("a report serializes"))
    })
}

/// Runs a scenario, refusing it when it would not fit in
/// `available_memory` bytes (unset: what the machine has available); see the module docs for progress and Ctrl-C,
/// which is honoured while the scenario is built too.
#[pyfunction]
#[pyo3(signature = (scenario_json, progress = None, available_memory = None))]
fn run(
    py: Python<'_>,
    scenario_json: &str,
    progress: Option<Py<PyAny>>,
    available_memory: Option<u64>,
) -> PyResult<Py<PyAny>> {
    let scenario = guarded(|| Scenario::from_json(scenario_json).map_err(scenario_error))?;
    let resolved = scenario.to_json();
    let mut callback_error: Option<PyErr> = None;
    let output = py.detach(|| {
        guarded(|| {
            let mut interrupted = false;
            let mut keep_going = || {
                interrupted = Python::attach(|py| py.check_signals()).is_err();
                !interrupted
            };
            let available_memory = available_memory.or_else(machine::available_memory);
            let mut setup = Setup { available_memory, keep_going: Some(&mut keep_going) };
            let interrupted_building =
                || Err(pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted while building"));
            let Some(mut sim) = Model::build(scenario, &mut setup).map_err(scenario_error)? else {
                return interrupted_building();
            };
            let mut last = Instant::now();
            let mut hook = |p: fabricsim_core::Progress| -> bool {
                if last.elapsed() < PROGRESS_PERIOD {
                    return true;
                }
                last = Instant::now();
                Python::attach(|py| {
                    if let Err(e) = py.check_signals() {
                        // Ctrl-C: stop, keep what was measured.
                        if !e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                            callback_error = Some(e);
                        }
                        return false;
                    }
                    if let Some(cb) = &progress {
                        if let Err(e) = cb.call1(py, (p.fraction,)) {
                            // Ctrl-C may land inside the callback: same as above.
                            if !e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                                callback_error = Some(e);
                            }
                            return false;
                        }
                    }
                    true
                })
            };
            // The simulation is dropped here, before Python's copy is made.
            Ok(sim.run(&mut hook))
        })
    })?;
    if let Some(e) = callback_error {
        return Err(e);
    }
    let dtypes: serde_json::Map<String, serde_json::Value> =
        output.tables().iter().map(|(name, table)| (name.to_string(), table.dtypes())).collect();
    let head = serde_json::json!({"complete": output.complete, "summary": output.summary, "dtypes": dtypes});
    let result = json_loads(py, &head.to_string())?;
    let result = result.bind(py);
    result.set_item("tables", guarded(|| tables::to_py(py, &output.tables()))?)?;
    result.set_item("resolved", resolved)?;
    if let Some(bytes) = &output.pcap {
        result.set_item("pcap", pyo3::types::PyBytes::new(py, bytes))?;
    }
    Ok(result.clone().unbind())
}

/// Panics inside the core's guard, so tests can check that a panic reaches
/// Python as `SimulationError` and not as a crash.
#[pyfunction]
fn _panic_for_tests(message: &str) -> PyResult<()> {
    guarded(|| panic!("{message}"))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    quiet_panics();
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_function(wrap_pyfunction!(available_memory, m)?)?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(topology_report, m)?)?;
    m.add_function(wrap_pyfunction!(designs, m)?)?;
    m.add_function(wrap_pyfunction!(under_design, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    Ok(())
}
