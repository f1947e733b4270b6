//! Deserializing `kind`-tagged enums so that errors keep their field path.
//!
//! serde's internally tagged enums buffer their input and deserialize the
//! variant from that buffer, which loses the path of any error inside the
//! variant (`topology` instead of `topology.link_rate`). These enums instead
//! read `kind` themselves and deserialize the variant's struct with a path
//! tracker; an error inside carries its relative path as `@path: message`,
//! which the enclosing level (and finally `Scenario::from_json`) joins to
//! its own path.

use serde::de::{DeserializeOwned, Error};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// Joins a relative error path into a message: `@outer.inner: message`.
pub fn nest(outer: &str, message: &str) -> String {
    let outer = if outer == "." { "" } else { outer };
    let (inner, text) = match message.strip_prefix('@').and_then(|m| m.split_once(": ")) {
        Some((inner, text)) => (inner, text),
        None => ("", message),
    };
    let joined = match (outer.is_empty(), inner.is_empty()) {
        (true, _) => inner.to_string(),
        (false, true) => outer.to_string(),
        (false, false) if inner.starts_with('[') => format!("{outer}{inner}"),
        (false, false) => format!("{outer}.{inner}"),
    };
    if joined.is_empty() {
        text.to_string()
    } else {
        format!("@{joined}: {text}")
    }
}

/// Splits `{kind: k, ...}` into `k` (one of `kinds`) and the other fields.
pub fn split_kind<'de, D: Deserializer<'de>>(d: D, kinds: &[&str]) -> Result<(String, Value), D::Error> {
    let mut map = Map::deserialize(d)?;
    let expected = kinds.join(", ");
    let kind = match map.remove("kind") {
        Some(Value::String(k)) if kinds.contains(&k.as_str()) => k,
        Some(Value::String(k)) => {
            return Err(D::Error::custom(format!("@kind: unknown kind '{k}': use one of {expected}")))
        }
        Some(other) => return Err(D::Error::custom(format!("@kind: {other} is not a kind: use one of {expected}"))),
        None => return Err(D::Error::custom(format!("missing field `kind`: one of {expected}"))),
    };
    Ok((kind, Value::Object(map)))
}

/// Deserializes a variant's fields, keeping the path of an error.
pub fn variant<'de, D: Deserializer<'de>, T: DeserializeOwned>(fields: Value) -> Result<T, D::Error> {
    serde_path_to_error::deserialize(fields)
        .map_err(|e| D::Error::custom(nest(&e.path().to_string(), &e.inner().to_string())))
}

/// Implements `Deserialize` for an enum whose variants each hold one struct,
/// selected by the `kind` field, and `kind()`, the kind a value was written as.
#[macro_export]
macro_rules! kind_tagged {
    ($enum:ident { $($kind:literal => $variant:ident),+ $(,)? }) => {
        impl $enum {
            /// Its `kind`, as a scenario writes it.
            pub fn kind(&self) -> &'static str {
                match self {
                    $($enum::$variant(_) => $kind,)+
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $enum {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let (kind, fields) = $crate::tagged::split_kind(d, &[$($kind),+])?;
                match kind.as_str() {
                    $($kind => $crate::tagged::variant::<D, _>(fields).map($enum::$variant),)+
                    _ => unreachable!("split_kind checked the kind"),
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::nest;

    #[test]
    fn paths_join() {
        assert_eq!(nest("topology", "@link_rate: bad"), "@topology.link_rate: bad");
        assert_eq!(nest("traffic[0]", "@senders[2]: bad"), "@traffic[0].senders[2]: bad");
        assert_eq!(nest("faults", "@[1].port: bad"), "@faults[1].port: bad");
        assert_eq!(nest(".", "bad"), "bad");
        assert_eq!(nest("topology", "bad"), "@topology: bad");
    }
}
