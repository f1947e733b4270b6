//! Entropy values (EVs): the UDP source port a multipath transport varies
//! to steer packets onto paths (mrc-srv6-multiplane.txt s2.1, s2.3). An EV
//! names its plane in its low 3 bits, the plane number SRv6 copies into the
//! uSIDs, and the path choice within the plane in the bits above. This is
//! the one place that convention is written down.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Bits of an EV that name its plane.
const PLANE_BITS: u32 = 3;
const PLANE_MASK: u16 = (1 << PLANE_BITS) - 1;

/// Most planes an EV can name.
pub const MAX_PLANES: usize = 1 << PLANE_BITS;

/// An entropy value, carried as the packet's UDP source port. Scenarios
/// write it as the plain integer, and the scenario schema shows it as one
/// (inline, with no description of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
#[schemars(inline, description = "")]
#[repr(transparent)]
pub struct Ev(pub u16);

impl Ev {
    /// The EV of `plane` that takes path choice `choice` (wrapping past the
    /// 13 bits a choice has).
    #[inline(always)]
    pub fn new(plane: usize, choice: u32) -> Ev {
        Ev(((choice as u16) << PLANE_BITS) | (plane as u16 & PLANE_MASK))
    }

    /// The plane (NIC port) this EV is sent on.
    #[inline(always)]
    pub fn plane(self) -> usize {
        (self.0 & PLANE_MASK) as usize
    }

    /// Which of the plane's paths this EV takes: SRv6 picks the T0 uplink,
    /// then the T1 uplink, from it.
    #[inline(always)]
    pub fn choice(self) -> usize {
        (self.0 >> PLANE_BITS) as usize
    }
}

/// The paths of one plane between two NICs as an EV's path choice names
/// them (`Ev::choice`): choice mod `uplinks` is the source T0's uplink,
/// choice mod `paths` the whole path. 1 and 1 under one T0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathSpace {
    pub uplinks: u32,
    /// A multiple of `uplinks`: each uplink's T1 offers `paths / uplinks`
    /// ways on (its own uplinks, in a 3-tier Clos).
    pub paths: u32,
}

impl std::fmt::Display for Ev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ev_keeps_its_plane_in_the_low_bits_and_its_choice_above() {
        let ev = Ev::new(5, 9);
        assert_eq!((ev.plane(), ev.choice(), ev.0), (5, 9, 9 << 3 | 5));
        assert_eq!(Ev(0xFFFF).plane(), 7);
        assert_eq!(Ev::new(2, 1 << 13).choice(), 0, "a choice wraps at 13 bits");
    }
}
