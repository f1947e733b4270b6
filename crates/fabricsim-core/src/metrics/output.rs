//! Result tables as named columns, ready for a data-frame library.

use std::collections::HashMap;

use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    Int(Vec<u64>),
    Float(Vec<Option<f64>>),
    Text(Vec<String>),
    /// Text as a code per row into its distinct values: a time series
    /// names the same few ports and metrics in millions of rows.
    Coded(Coded),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::Int(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Text(v) => v.len(),
            Column::Coded(c) => c.codes.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// As JSON every text column is a list of strings.
impl Serialize for Column {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Column::Int(v) => v.serialize(serializer),
            Column::Float(v) => v.serialize(serializer),
            Column::Text(v) => v.serialize(serializer),
            Column::Coded(c) => {
                let mut seq = serializer.serialize_seq(Some(c.codes.len()))?;
                for text in c.iter() {
                    seq.serialize_element(text)?;
                }
                seq.end()
            }
        }
    }
}

/// Distinct strings, and a row's code into them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Coded {
    pub words: Vec<String>,
    pub codes: Vec<u32>,
    index: HashMap<String, u32>,
}

impl Coded {
    pub fn push(&mut self, text: &str) {
        let code = match self.index.get(text) {
            Some(&code) => code,
            None => {
                let code = self.words.len() as u32;
                self.words.push(text.to_string());
                self.index.insert(text.to_string(), code);
                code
            }
        };
        self.codes.push(code);
    }

    /// The rows' strings, in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.codes.iter().map(|&c| self.words[c as usize].as_str())
    }
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
                Column::Text(_) | Column::Coded(_) => "str",
            };
            map.insert(name.clone(), Value::from(dtype));
        }
        Value::Object(map)
    }
}

/// Time series in long format (time, entity, metric, value), as the
/// timeseries table holds them.
#[derive(Clone, Debug, Default)]
pub struct Series {
    time: Vec<Option<f64>>,
    entity: Coded,
    metric: Coded,
    value: Vec<Option<f64>>,
}

impl Series {
    pub fn push(&mut self, time_s: f64, entity: &str, metric: &str, value: f64) {
        self.time.push(Some(time_s));
        self.entity.push(entity);
        self.metric.push(metric);
        self.value.push(Some(value));
    }

    pub fn len(&self) -> usize {
        self.time.len()
    }

    pub fn is_empty(&self) -> bool {
        self.time.is_empty()
    }

    pub fn into_table(self) -> Table {
        let mut table = Table::default();
        table.push("time_s", Column::Float(self.time));
        table.push("entity", Column::Coded(self.entity));
        table.push("metric", Column::Coded(self.metric));
        table.push("value", Column::Float(self.value));
        table
    }
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// Every flow and job finished (or failed, as its QPs reported).
    Completed,
    /// The scenario's `duration` was reached.
    Duration,
    /// Nothing was left to happen, yet flows or jobs had not finished.
    Stalled,
    /// `limits.sim_time` passed before the flows and jobs finished.
    TimeLimit,
    /// `limits.events_per_instant` events ran without time advancing.
    Livelock,
    /// What it recorded outgrew the memory the run was allowed.
    MemoryLimit,
    /// The caller stopped it (Ctrl-C).
    Interrupted,
}

impl StopReason {
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::Duration => "duration",
            StopReason::Stalled => "stalled",
            StopReason::TimeLimit => "time_limit",
            StopReason::Livelock => "livelock",
            StopReason::MemoryLimit => "memory_limit",
            StopReason::Interrupted => "interrupted",
        }
    }

    /// Whether the run ended as the scenario meant it to: its results are
    /// whole.
    pub fn is_complete(self) -> bool {
        matches!(self, StopReason::Completed | StopReason::Duration)
    }
}

/// Everything a run returns.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// Why it ended; the results are whole only when it completed or ran
    /// its duration.
    pub stop: StopReason,
    /// `stop.is_complete()`.
    pub complete: bool,
    pub summary: Value,
    pub flows: Table,
    pub ports: Table,
    pub timeseries: Table,
    /// One row per collective run (job, iteration, phase, group).
    pub collectives: Table,
    /// One row per job iteration.
    pub steps: Table,
    /// One row per collective transfer, when telemetry asks for them.
    pub transfers: Table,
    /// One row per MRC EV state change, when telemetry asks for them.
    pub ev_log: Table,
    /// Clustermapper's verdicts, when the scenario runs it.
    pub clustermapper: Table,
    /// Bandwidth histograms of ports, when telemetry asks for them.
    pub histograms: Table,
    /// Queue and load imbalance per port group, when telemetry asks.
    pub imbalance: Table,
    /// A pcap file of the captured ports, when telemetry asks for one.
    pub pcap: Option<Vec<u8>>,
}

impl RunOutput {
    /// The tables by name, in output order.
    pub fn tables(&self) -> [(&'static str, &Table); 10] {
        [
            ("flows", &self.flows),
            ("ports", &self.ports),
            ("timeseries", &self.timeseries),
            ("collectives", &self.collectives),
            ("steps", &self.steps),
            ("transfers", &self.transfers),
            ("ev_log", &self.ev_log),
            ("clustermapper", &self.clustermapper),
            ("histograms", &self.histograms),
            ("imbalance", &self.imbalance),
        ]
    }

    pub fn to_json(&self) -> Value {
        let mut tables = Map::new();
        let mut dtypes = Map::new();
        for (name, table) in self.tables() {
            tables.insert(name.to_string(), table.to_json());
            dtypes.insert(name.to_string(), table.dtypes());
        }
        serde_json::json!({
            "complete": self.complete,
            "summary": self.summary,
            "tables": tables,
            "dtypes": dtypes,
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
