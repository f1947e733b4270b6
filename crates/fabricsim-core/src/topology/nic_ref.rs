//! How a scenario names a NIC: by its index among the topology's NICs or by
//! its name. Low in the layers so that telemetry, faults and workloads can
//! all name NICs.

use std::fmt;

use schemars::JsonSchema;
use serde::{de, Deserialize, Deserializer, Serialize};

use super::{NodeId, Topology};
use crate::error::{invalid, ScenarioError};

/// A NIC named by its index (`12`) or its name (`"nic12"`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum NicRef {
    Index(u32),
    Name(String),
}

// By hand rather than untagged, so that a wrong value says what a NIC
// reference is instead of "did not match any variant".
impl<'de> Deserialize<'de> for NicRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NicRef, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = NicRef;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a NIC index (0, 1, ...) or a NIC name (\"nic12\")")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<NicRef, E> {
                u32::try_from(v).map(NicRef::Index).map_err(|_| E::custom(format!("{v} is not a NIC index")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<NicRef, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("{v} is not a NIC index: NICs are numbered from 0"))),
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NicRef, E> {
                Ok(NicRef::Name(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl NicRef {
    /// The NIC this names among `nics` (the topology's NICs in index
    /// order), or an error on `field`.
    pub fn resolve(&self, topo: &Topology, nics: &[NodeId], field: &str) -> Result<NodeId, ScenarioError> {
        match self {
            NicRef::Index(i) => nics.get(*i as usize).copied().map_or_else(
                || {
                    invalid(
                        field,
                        format!(
                            "there is no NIC {i}: the topology has {} NICs, 0 to {}",
                            nics.len(),
                            nics.len().saturating_sub(1)
                        ),
                    )
                },
                Ok,
            ),
            NicRef::Name(name) => match topo.find(name) {
                Some(id) if topo.is_nic(id) => Ok(id),
                Some(_) => invalid(field, format!("'{name}' is a switch, not a NIC")),
                None => invalid(field, format!("there is no NIC named '{name}'")),
            },
        }
    }
}
