//! Helpers shared by the whole-simulation tests.
#![allow(dead_code)]

use fabricsim_core::{Model, RunOutput, Scenario, Setup};
use serde_json::Value;

/// Runs `scenario` in the model its `mode` names (the packet model unless
/// it says `flow`), as the CLI does.
pub fn run(scenario: Value) -> RunOutput {
    let scenario = Scenario::from_json(&scenario.to_string()).expect("valid scenario");
    let mut setup = Setup::default();
    let mut model = Model::build(scenario, &mut setup).expect("buildable scenario").expect("not stopped");
    model.run(&mut |_| true)
}

pub fn column<'a>(table: &'a fabricsim_core::metrics::Table, name: &str) -> &'a fabricsim_core::metrics::Column {
    &table.columns.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no column {name}")).1
}

pub fn floats(table: &fabricsim_core::metrics::Table, name: &str) -> Vec<Option<f64>> {
    match column(table, name) {
        fabricsim_core::metrics::Column::Float(v) => v.clone(),
        _ => panic!("{name} is not a float column"),
    }
}

pub fn ints(table: &fabricsim_core::metrics::Table, name: &str) -> Vec<u64> {
    match column(table, name) {
        fabricsim_core::metrics::Column::Int(v) => v.clone(),
        _ => panic!("{name} is not an int column"),
    }
}

pub fn texts(table: &fabricsim_core::metrics::Table, name: &str) -> Vec<String> {
    match column(table, name) {
        fabricsim_core::metrics::Column::Text(v) => v.clone(),
        fabricsim_core::metrics::Column::Coded(c) => c.iter().map(str::to_string).collect(),
        _ => panic!("{name} is not a text column"),
    }
}

pub fn summary_u64(out: &RunOutput, key: &str) -> u64 {
    out.summary[key].as_u64().unwrap_or_else(|| panic!("summary has no integer {key}"))
}

pub fn summary_f64(out: &RunOutput, key: &str) -> f64 {
    out.summary[key].as_f64().unwrap_or_else(|| panic!("summary has no number {key}"))
}

/// Transmit rate samples of `port` as (time, bits per second).
pub fn tx_rate(out: &fabricsim_core::RunOutput, port: &str) -> Vec<(f64, f64)> {
    let (t, e, m, v) = (
        floats(&out.timeseries, "time_s"),
        texts(&out.timeseries, "entity"),
        texts(&out.timeseries, "metric"),
        floats(&out.timeseries, "value"),
    );
    (0..t.len()).filter(|&i| e[i] == port && m[i] == "tx_bps").map(|i| (t[i].unwrap(), v[i].unwrap())).collect()
}
