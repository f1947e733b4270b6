//! How a scenario names a NIC: by its index among the topology's NICs or by
//! its name. Low in the layers so that telemetry, faults and workloads can
//! all name NICs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{NodeId, Topology};
use crate::error::{invalid, ScenarioError};

/// A NIC named by its index (`12`) or its name (`"nic12"`).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum NicRef {
    Index(u32),
    Name(String),
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
                        format!("there is no NIC {i}: the topology has {} NICs (0..{})", nics.len(), nics.len()),
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
