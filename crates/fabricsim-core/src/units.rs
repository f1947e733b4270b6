//! Physical units: simulated time in integer picoseconds, rates in bits per
//! second, sizes in bytes.
//!
//! Scenarios write every quantity with an explicit unit (`"100Gbps"`,
//! `"1us"`, `"4KiB"`); a bare number or an unknown unit is an error, so a
//! scenario can never silently mean microseconds where it said milliseconds.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// Simulated time in picoseconds. At 800 Gb/s one byte lasts 10 ps, so
/// integer picoseconds keep serialization exact at every rate we model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

/// A link or sending rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

/// A size in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

pub const PS_PER_NS: u64 = 1_000;
pub const PS_PER_US: u64 = 1_000_000;
pub const PS_PER_MS: u64 = 1_000_000_000;
pub const PS_PER_S: u64 = 1_000_000_000_000;

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);

    pub const fn from_ns(ns: u64) -> Time {
        Time(ns * PS_PER_NS)
    }
    pub const fn from_us(us: u64) -> Time {
        Time(us * PS_PER_US)
    }
    pub const fn from_ms(ms: u64) -> Time {
        Time(ms * PS_PER_MS)
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / PS_PER_S as f64
    }
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / PS_PER_US as f64
    }
    pub fn from_secs_f64(s: f64) -> Time {
        Time((s * PS_PER_S as f64).round() as u64)
    }
    pub fn saturating_sub(self, other: Time) -> Time {
        Time(self.0.saturating_sub(other.0))
    }
}

impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        Time(self.0 + rhs.0)
    }
}

impl AddAssign for Time {
    fn add_assign(&mut self, rhs: Time) {
        self.0 += rhs.0;
    }
}

impl Sub for Time {
    type Output = Time;
    fn sub(self, rhs: Time) -> Time {
        Time(self.0 - rhs.0)
    }
}

impl Rate {
    pub const fn from_gbps(g: u64) -> Rate {
        Rate(g * 1_000_000_000)
    }
    pub fn as_gbps_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Time to serialize `bytes` at this rate, rounded up to a whole
    /// picosecond so that back-to-back packets never overlap.
    pub fn tx_time(self, bytes: u64) -> Time {
        let bits = bytes as u128 * 8 * PS_PER_S as u128;
        Time(bits.div_ceil(self.0 as u128) as u64)
    }
    /// Bytes that this rate moves in `t`.
    pub fn bytes_in(self, t: Time) -> f64 {
        self.0 as f64 * t.as_secs_f64() / 8.0
    }
    pub fn scale(self, factor: f64) -> Rate {
        Rate((self.0 as f64 * factor).round() as u64)
    }
}

impl Bytes {
    pub const fn kib(k: u64) -> Bytes {
        Bytes(k * 1024)
    }
}

/// Why a quantity could not be parsed; the caller adds the field name.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitError(pub String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn split_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(text.len());
    let (num, unit) = text.split_at(end);
    let num: f64 = num.replace('_', "").parse().ok()?;
    Some((num, unit.trim()))
}

fn parse_with(text: &str, kind: &str, units: &[(&str, f64)], examples: &str) -> Result<f64, UnitError> {
    let Some((value, unit)) = split_number(text) else {
        return Err(UnitError(format!("'{text}' is not a {kind}: expected a number with a unit, e.g. {examples}")));
    };
    if unit.is_empty() {
        return Err(UnitError(format!("'{text}' has no unit: write the {kind} with a unit, e.g. {examples}")));
    }
    let Some(&(_, scale)) = units.iter().find(|(name, _)| *name == unit) else {
        return Err(UnitError(format!("'{text}' has an unknown {kind} unit '{unit}': use one of {}", names(units))));
    };
    if !value.is_finite() || value < 0.0 {
        return Err(UnitError(format!("'{text}' must be a non-negative {kind}")));
    }
    Ok(value * scale)
}

fn names(units: &[(&str, f64)]) -> String {
    units.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

const TIME_UNITS: &[(&str, f64)] = &[("ps", 1.0), ("ns", 1e3), ("us", 1e6), ("µs", 1e6), ("ms", 1e9), ("s", 1e12)];
const RATE_UNITS: &[(&str, f64)] = &[
    ("bps", 1.0),
    ("Kbps", 1e3),
    ("Mbps", 1e6),
    ("Gbps", 1e9),
    ("Tbps", 1e12),
    ("Gb/s", 1e9),
    ("Mb/s", 1e6),
    ("Tb/s", 1e12),
];
const SIZE_UNITS: &[(&str, f64)] =
    &[("B", 1.0), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("KiB", 1024.0), ("MiB", 1048576.0), ("GiB", 1073741824.0)];

impl std::str::FromStr for Time {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Time, UnitError> {
        parse_with(s, "time", TIME_UNITS, "\"1us\", \"500ns\", \"10ms\"").map(|ps| Time(ps.round() as u64))
    }
}

impl std::str::FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Rate, UnitError> {
        let bps = parse_with(s, "rate", RATE_UNITS, "\"100Gbps\", \"400Gbps\"")?;
        if bps < 1.0 {
            return Err(UnitError(format!("'{s}' must be a positive rate")));
        }
        Ok(Rate(bps.round() as u64))
    }
}

impl std::str::FromStr for Bytes {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Bytes, UnitError> {
        parse_with(s, "size", SIZE_UNITS, "\"4KiB\", \"2MB\", \"4096B\"").map(|b| Bytes(b.round() as u64))
    }
}

/// Writes `value` in the largest unit that divides it exactly, so that a
/// resolved scenario prints the numbers its author wrote.
fn show(f: &mut fmt::Formatter<'_>, value: u64, units: &[(&str, u64)]) -> fmt::Result {
    let (name, scale) = units.iter().find(|(_, scale)| value.is_multiple_of(*scale)).expect("the last unit is 1");
    write!(f, "{}{name}", value / scale)
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0ns");
        }
        show(f, self.0, &[("s", PS_PER_S), ("ms", PS_PER_MS), ("us", PS_PER_US), ("ns", PS_PER_NS), ("ps", 1)])
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        show(
            f,
            self.0,
            &[("Tbps", 1_000_000_000_000), ("Gbps", 1_000_000_000), ("Mbps", 1_000_000), ("Kbps", 1_000), ("bps", 1)],
        )
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0B");
        }
        show(f, self.0, &[("GiB", 1 << 30), ("MiB", 1 << 20), ("MB", 1_000_000), ("KiB", 1024), ("KB", 1000), ("B", 1)])
    }
}

macro_rules! unit_serde {
    ($ty:ty, $name:literal, $pattern:literal, $desc:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl de::Visitor<'_> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($desc)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse().map_err(|e: UnitError| E::custom(e))
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        Err(E::custom(format!("{v} has no unit: write it as a string with a unit ({})", $desc)))
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        Err(E::custom(format!("{v} has no unit: write it as a string with a unit ({})", $desc)))
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        Err(E::custom(format!("{v} has no unit: write it as a string with a unit ({})", $desc)))
                    }
                }
                d.deserialize_any(V)
            }
        }
        impl JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({ "type": "string", "pattern": $pattern, "description": $desc })
            }
        }
    };
}

unit_serde!(Time, "Time", "^[0-9._]+\\s*(ps|ns|us|µs|ms|s)$", "a time such as \"1us\", \"500ns\" or \"10ms\"");
unit_serde!(
    Rate,
    "Rate",
    "^[0-9._]+\\s*(bps|Kbps|Mbps|Gbps|Tbps|Mb/s|Gb/s|Tb/s)$",
    "a rate such as \"100Gbps\" or \"400Gbps\""
);
unit_serde!(Bytes, "Bytes", "^[0-9._]+\\s*(B|KB|MB|GB|KiB|MiB|GiB)$", "a size such as \"4KiB\", \"2MB\" or \"4096B\"");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!("1us".parse::<Time>().unwrap(), Time(1_000_000));
        assert_eq!("1.5ns".parse::<Time>().unwrap(), Time(1_500));
        assert_eq!("100Gbps".parse::<Rate>().unwrap(), Rate(100_000_000_000));
        assert_eq!("4KiB".parse::<Bytes>().unwrap(), Bytes(4096));
        assert_eq!("2MB".parse::<Bytes>().unwrap(), Bytes(2_000_000));
    }

    #[test]
    fn rejects_missing_or_wrong_units() {
        assert!("100".parse::<Rate>().unwrap_err().0.contains("no unit"));
        assert!("100G".parse::<Rate>().unwrap_err().0.contains("unknown rate unit 'G'"));
        assert!("0Gbps".parse::<Rate>().is_err());
        assert!("fast".parse::<Time>().is_err());
    }

    #[test]
    fn serialization_time_is_exact_at_800g() {
        assert_eq!(Rate::from_gbps(800).tx_time(1), Time(10));
        assert_eq!(Rate::from_gbps(100).tx_time(4198), Time(335_840));
    }

    #[test]
    fn display_round_trips() {
        for s in ["1us", "500ns", "100Gbps", "4KiB", "2MB"] {
            let t: Result<Time, _> = s.parse();
            let r: Result<Rate, _> = s.parse();
            let b: Result<Bytes, _> = s.parse();
            let shown = t.map(|x| x.to_string()).or(r.map(|x| x.to_string())).or(b.map(|x| x.to_string()));
            assert_eq!(shown.unwrap(), s);
        }
    }
}
