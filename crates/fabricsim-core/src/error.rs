//! Errors the core reports to its caller.
//!
//! A scenario error always names the offending field by its dotted path and
//! quotes the value, because the person reading it is editing a YAML file
//! and needs to find the line.

use std::fmt;

use crate::units::{Rate, Time};

/// A scenario that cannot be simulated as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioError {
    /// Dotted path of the field, e.g. `topology.radix` or `traffic[0].dst`.
    pub field: String,
    /// What is wrong with the value, quoting it.
    pub message: String,
}

impl ScenarioError {
    /// The error on `field`; both are kept to one line, since they quote
    /// what the user wrote (a key or a value may hold a line break).
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> ScenarioError {
        ScenarioError { field: one_line(field.into()), message: one_line(message.into()) }
    }
}

/// `text` with whatever could break its line escaped: control characters
/// (`\n`, `\u{1b}`) and the Unicode line and paragraph separators.
fn one_line(text: String) -> String {
    let breaks = |c: char| c.is_control() || c == '\u{2028}' || c == '\u{2029}';
    if !text.chars().any(breaks) {
        return text;
    }
    text.chars().map(|c| if breaks(c) { c.escape_default().to_string() } else { c.to_string() }).collect()
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// `v` as a message quotes it: as written at everyday magnitudes, in
/// scientific notation beyond them (1e308 would print all its 309 digits).
pub fn number(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-4..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// Refuses an empty `name` of a `what` (a node, a job, a phase): outputs
/// and references name it.
pub fn named(field: impl Into<String>, name: &str, what: &str) -> Result<(), ScenarioError> {
    if name.is_empty() {
        return invalid(field, format!("is empty: every {what} needs a name"));
    }
    Ok(())
}

/// Refuses a list (`field`) that names one thing twice: `items` as
/// resolved, so that two spellings of one NIC or port are caught too;
/// `quote(i)` is item `i` as written.
pub fn once_each<T: Eq + std::hash::Hash>(
    field: &str,
    items: &[T],
    quote: impl Fn(usize) -> String,
) -> Result<(), ScenarioError> {
    let mut first = std::collections::HashMap::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        if let Some(k) = first.insert(item, i) {
            return invalid(format!("{field}[{i}]"), format!("{}: listed already, as {field}[{k}]", quote(i)));
        }
    }
    Ok(())
}

/// Refuses a link or port (`field`) slower than `Rate::SLOWEST_LINK`.
pub fn link_rate(field: impl Into<String>, rate: Rate) -> Result<(), ScenarioError> {
    if rate < Rate::SLOWEST_LINK {
        return invalid(
            field,
            format!(
                "{rate}: below {}, a tenth of the slowest Ethernet (10BASE-T); is a unit missing?",
                Rate::SLOWEST_LINK
            ),
        );
    }
    Ok(())
}

/// Refuses a link (`field`) whose propagation delay is longer than
/// `Time::LONGEST_LINK`.
pub fn link_delay(field: impl Into<String>, delay: Time) -> Result<(), ScenarioError> {
    if delay > Time::LONGEST_LINK {
        return invalid(
            field,
            format!(
                "{delay}: longer than {}, the delay of 200km of fibre; no data-centre link is that long",
                Time::LONGEST_LINK
            ),
        );
    }
    Ok(())
}

/// Shorthand for a `ScenarioError` result.
pub fn invalid<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, ScenarioError> {
    Err(ScenarioError::new(field, message))
}
