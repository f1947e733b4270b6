//! Result tables as named columns, ready for a data-frame library.

use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Column {
    Int(Vec<u64>),
    Float(Vec<Option<f64>>),
    Text(Vec<String>),
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Table {
    pub columns: Vec<(String, Column)>,
}

impl Table {
    pub fn push(&mut self, name: &str, column: Column) {
        self.columns.push((name.to_string(), column));
    }

    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        for (name, col) in &self.columns {
            map.insert(name.clone(), serde_json::to_value(col).expect("columns serialize"));
        }
        Value::Object(map)
    }

    /// Column types (`int`, `float`, `str`), so that an empty table still
    /// has typed columns.
    pub fn dtypes(&self) -> Value {
        let mut map = Map::new();
        for (name, col) in &self.columns {
            let dtype = match col {
                Column::Int(_) => "int",
                Column::Float(_) => "float",
                Column::Text(_) => "str",
            };
            map.insert(name.clone(), Value::from(dtype));
        }
        Value::Object(map)
    }
}

/// Everything a run returns.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// False when the run was stopped before its end (Ctrl-C).
    pub complete: bool,
    pub summary: Value,
    pub flows: Table,
    pub ports: Table,
    pub timeseries: Table,
}

impl RunOutput {
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "complete": self.complete,
            "summary": self.summary,
            "tables": {
                "flows": self.flows.to_json(),
                "ports": self.ports.to_json(),
                "timeseries": self.timeseries.to_json(),
            },
            "dtypes": {
                "flows": self.flows.dtypes(),
                "ports": self.ports.dtypes(),
                "timeseries": self.timeseries.dtypes(),
            }
        })
    }
}

/// The `q`-quantile (0..=1) of `values` by the nearest-rank method.
pub fn percentile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}
