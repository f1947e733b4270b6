//! A list where the schema wants a mapping of keys is refused before serde
//! reads it: serde fills a struct from a sequence field by field, in order,
//! so `nic: ["1KiB"]` would silently set the MTU and `limits: []` drop every
//! limit. The scenario's own JSON Schema says where mappings belong.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::Scenario;
use crate::error::{invalid, ScenarioError};

/// The scenario schema as JSON, built once.
fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::to_value(schemars::schema_for!(Scenario)).expect("the schema serializes"))
}

/// Refuses the first list in `value` that stands where a mapping belongs.
pub(super) fn check(value: &Value) -> Result<(), ScenarioError> {
    let schema = schema();
    let defs = schema.get("$defs").and_then(Value::as_object).cloned().unwrap_or_default();
    walk(value, schema, &defs, "scenario")
}

fn walk(value: &Value, schema: &Value, defs: &Map<String, Value>, path: &str) -> Result<(), ScenarioError> {
    let schema = resolve(schema, defs);
    match value {
        Value::Array(items) => {
            if schema.get("properties").is_some() {
                return invalid(path, "a list, where a mapping of keys belongs");
            }
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    walk(v, item, defs, &format!("{path}[{i}]"))?;
                }
            }
        }
        Value::Object(map) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, v) in map {
                    if let Some(sub) = properties.get(key) {
                        let at = if path == "scenario" { key.clone() } else { format!("{path}.{key}") };
                        walk(v, sub, defs, &at)?;
                    }
                }
            }
            if let Some(variant) = tagged_variant(schema, map.get("kind"), defs) {
                walk(value, variant, defs, path)?;
            }
        }
        _ => {}
    }
    if let Some(inner) = only_alternative(schema) {
        walk(value, inner, defs, path)?;
    }
    Ok(())
}

/// Follows `$ref`s to the schema they name.
fn resolve<'a>(mut schema: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    while let Some(name) = schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
        match defs.get(name) {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema
}

/// The variant of a `kind`-tagged enum (`oneOf` of objects) that `kind` names.
fn tagged_variant<'a>(schema: &'a Value, kind: Option<&Value>, defs: &'a Map<String, Value>) -> Option<&'a Value> {
    let kind = kind?.as_str()?;
    schema
        .get("oneOf")?
        .as_array()?
        .iter()
        .map(|v| resolve(v, defs))
        .find(|variant| variant.pointer("/properties/kind/const").and_then(Value::as_str) == Some(kind))
}

/// The one alternative of an optional value (`anyOf: [T, null]`); none
/// when several non-null shapes are allowed (a value or a list of them).
fn only_alternative(schema: &Value) -> Option<&Value> {
    let options = schema.get("anyOf")?.as_array()?;
    let mut real = options.iter().filter(|o| o.get("type").and_then(Value::as_str) != Some("null"));
    let first = real.next()?;
    real.next().is_none().then_some(first)
}
