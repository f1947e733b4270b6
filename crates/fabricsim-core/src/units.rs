//! Physical units: simulated time in integer picoseconds, rates in bits per
//! second, sizes in bytes.
//!
//! Scenarios write every quantity with an explicit unit (`"100Gbps"`,
//! `"1us"`, `"4KiB"`); a bare number or an unknown unit is an error, so a
//! scenario can never silently mean microseconds where it said milliseconds.
//! Quantities are read exactly (decimal text, integer arithmetic), must be
//! whole picoseconds and whole bytes, and are bounded well inside `u64` so
//! that no conversion clamps and no sum of a few of them can wrap: a time
//! past `Time::HORIZON`, a size past `Bytes::MAX` or a rate past `Rate::MAX`
//! is refused when the scenario is read.

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
    /// Later than anything can happen: time arithmetic saturates here.
    pub const MAX: Time = Time(u64::MAX);
    /// The longest propagation delay a link may have, 1 ms: 200 km of
    /// fibre at 5 ns/m, past the reach of the metro interconnects (up to
    /// about 100 km) that join the buildings of one training cluster. A
    /// longer one is a unit slip, and outlasts the transports' timers: a
    /// link of 1 s ran to "completed" with every flow timed out.
    pub const LONGEST_LINK: Time = Time::from_ms(1);
    /// The longest time a scenario may write, 2^62 ps (about 53 days):
    /// a quarter of the clock's range, so sums of a few such times stay
    /// exact, and further sums saturate at `MAX`, past every run's end.
    pub const HORIZON: Time = Time(1 << 62);

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
    /// `s` seconds, saturating at `MAX` (a negative or NaN `s` is zero).
    pub fn from_secs_f64(s: f64) -> Time {
        Time((s * PS_PER_S as f64).round() as u64)
    }
    pub fn saturating_sub(self, other: Time) -> Time {
        Time(self.0.saturating_sub(other.0))
    }
    /// `self × n`, saturating at `MAX` like every sum of times.
    pub fn times(self, n: u64) -> Time {
        Time(self.0.saturating_mul(n))
    }
}

// Sums of times saturate at `MAX`: a time that far out is past the end of
// every run (runs end by `HORIZON`), so it means "never" and nothing wraps.
impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Time {
    fn add_assign(&mut self, rhs: Time) {
        *self = *self + rhs;
    }
}

impl Sub for Time {
    type Output = Time;
    /// A difference of times; the earlier one first is a bug in the caller.
    fn sub(self, rhs: Time) -> Time {
        Time(self.0.checked_sub(rhs.0).expect("time difference with the later time first"))
    }
}

impl Rate {
    /// The fastest rate a scenario may write, 2^50 b/s (about 1.1 Pb/s).
    pub const MAX: Rate = Rate(1 << 50);
    /// The slowest link or port a scenario may have, 1 Mb/s: a tenth of
    /// the slowest Ethernet (10BASE-T). Slower is a unit slip (`100bps`
    /// for `100Gbps`), a link that takes 72 ms to send one 9000 B frame.
    pub const SLOWEST_LINK: Rate = Rate(1_000_000);
    /// The slowest a NIC paces a flow, 1 kb/s: the unit its per-QP rate
    /// limiter is set in (`ibv_modify_qp_rate_limit` takes kb/s).
    pub const SLOWEST_PACING: Rate = Rate(1_000);

    pub const fn from_gbps(g: u64) -> Rate {
        Rate(g * 1_000_000_000)
    }
    pub fn as_gbps_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Time to serialize `bytes` at this rate, rounded up to a whole
    /// picosecond so that back-to-back packets never overlap; `Time::MAX`
    /// past the clock's range.
    pub fn tx_time(self, bytes: u64) -> Time {
        let bits = bytes as u128 * 8 * PS_PER_S as u128;
        Time(u64::try_from(bits.div_ceil(self.0 as u128)).unwrap_or(u64::MAX))
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
    /// The largest size a scenario may write, 2^50 B (1 PiB): sums of a
    /// thousand of them still fit in a `u64`; larger sums are checked.
    pub const MAX: Bytes = Bytes(1 << 50);

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

/// A decimal number with its unit, read exactly: `value = digits / 10^scale`
/// (a negative scale multiplies).
struct Decimal<'a> {
    digits: u128,
    scale: i32,
    unit: &'a str,
}

/// Splits `"1_500.25 ns"` or `"2.5e9bps"` into an exact decimal and its
/// unit. At most 30 significant digits are read (more cannot be meant);
/// trailing zeros of a fraction do not count. An exponent has at most four
/// digits: no quantity a scenario holds needs more. No unit starts with
/// `e` or `E`, so an exponent cannot be taken for one.
fn split_number(text: &str) -> Option<Decimal<'_>> {
    let text = text.trim();
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(text.len());
    let (number, rest) = text.split_at(end);
    let (exponent, unit) = split_exponent(rest)?;
    let number = number.replace('_', "");
    let (whole, fraction) = number.split_once('.').unwrap_or((&number, ""));
    let fraction = fraction.trim_end_matches('0');
    if (whole.is_empty() && fraction.is_empty() && !number.contains('0')) || fraction.contains('.') {
        return None;
    }
    let significant = whole.trim_start_matches('0').len() + fraction.len();
    if significant > 30 {
        return Some(Decimal { digits: u128::MAX, scale: 0, unit: unit.trim() });
    }
    let digits = format!("{whole}{fraction}").parse::<u128>().unwrap_or(0);
    Some(Decimal { digits, scale: fraction.len() as i32 - exponent, unit: unit.trim() })
}

/// The exponent at the start of `rest` (0 if there is none) and what
/// follows it; None for an `e` with no digits or with more than four.
fn split_exponent(rest: &str) -> Option<(i32, &str)> {
    let Some(after) = rest.strip_prefix(['e', 'E']) else { return Some((0, rest)) };
    let sign_len = usize::from(after.starts_with(['+', '-']));
    let digits = after[sign_len..].find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len() - sign_len);
    if digits == 0 || digits > 4 {
        return None;
    }
    let (exponent, unit) = after.split_at(sign_len + digits);
    Some((exponent.parse().ok()?, unit))
}

/// How a quantity's value in base units must come out.
enum Whole {
    /// Exactly (times in picoseconds, sizes in bytes).
    Exact(&'static str),
    /// Rounded to the nearest (rates in bits per second).
    Rounded,
}

fn parse_with(
    text: &str,
    kind: &str,
    units: &[(&str, u64)],
    examples: &str,
    max: (u64, &str),
    whole: Whole,
) -> Result<u64, UnitError> {
    if text.trim_start().starts_with('-') {
        return Err(UnitError(format!("'{text}' must be a non-negative {kind}")));
    }
    let Some(Decimal { digits, scale, unit }) = split_number(text) else {
        return Err(UnitError(format!("'{text}' is not a {kind}: expected a number with a unit, e.g. {examples}")));
    };
    if unit.is_empty() {
        return Err(UnitError(format!("'{text}' has no unit: write the {kind} with a unit, e.g. {examples}")));
    }
    let Some(&(_, per_unit)) = units.iter().find(|(name, _)| *name == unit) else {
        return Err(UnitError(format!("'{text}' has an unknown {kind} unit '{unit}': use one of {}", names(units))));
    };
    let too_large = || UnitError(format!("'{text}' is larger than the largest {kind} a scenario may hold, {}", max.1));
    let not_whole =
        |base: &str| UnitError(format!("'{text}' is not a whole number of {base}, the finest the simulator models"));
    // digits × per_unit / 10^scale, exactly, while 10^|scale| fits a u128.
    let mut numerator = digits.checked_mul(per_unit as u128).ok_or_else(too_large)?;
    if numerator == 0 {
        return Ok(0);
    }
    if scale < 0 {
        let multiplier = 10u128.checked_pow(scale.unsigned_abs()).ok_or_else(too_large)?;
        numerator = numerator.checked_mul(multiplier).ok_or_else(too_large)?;
    }
    let Some(denominator) = 10u128.checked_pow(scale.max(0) as u32) else {
        // Below one base unit: rounds to zero, and is never whole.
        return match whole {
            Whole::Exact(base) => Err(not_whole(base)),
            Whole::Rounded => Ok(0),
        };
    };
    let (value, rest) = (numerator / denominator, numerator % denominator);
    let value = match whole {
        Whole::Exact(_) if rest == 0 => value,
        Whole::Exact(base) => return Err(not_whole(base)),
        // Below one base unit stays zero: a rate of 0.5bps is no 1bps link.
        Whole::Rounded if value == 0 => 0,
        Whole::Rounded => value + u128::from(2 * rest >= denominator),
    };
    if value > max.0 as u128 {
        return Err(too_large());
    }
    Ok(value as u64)
}

fn names(units: &[(&str, u64)]) -> String {
    units.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

const TIME_UNITS: &[(&str, u64)] =
    &[("ps", 1), ("ns", PS_PER_NS), ("us", PS_PER_US), ("µs", PS_PER_US), ("ms", PS_PER_MS), ("s", PS_PER_S)];
const RATE_UNITS: &[(&str, u64)] = &[
    ("bps", 1),
    ("Kbps", 1_000),
    ("Mbps", 1_000_000),
    ("Gbps", 1_000_000_000),
    ("Tbps", 1_000_000_000_000),
    ("Gb/s", 1_000_000_000),
    ("Mb/s", 1_000_000),
    ("Tb/s", 1_000_000_000_000),
];
const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
];

impl std::str::FromStr for Time {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Time, UnitError> {
        let max = (Time::HORIZON.0, "4611686.018427387904s (2^62 ps, about 53 days)");
        parse_with(s, "time", TIME_UNITS, "\"1us\", \"500ns\", \"10ms\"", max, Whole::Exact("picoseconds")).map(Time)
    }
}

impl std::str::FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Rate, UnitError> {
        let max = (Rate::MAX.0, "1125899906842624bps (2^50 b/s)");
        let bps = parse_with(s, "rate", RATE_UNITS, "\"100Gbps\", \"400Gbps\"", max, Whole::Rounded)?;
        if bps == 0 {
            return Err(UnitError(format!("'{s}' must be a positive rate, at least 1bps")));
        }
        Ok(Rate(bps))
    }
}

impl std::str::FromStr for Bytes {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Bytes, UnitError> {
        let max = (Bytes::MAX.0, "1048576GiB (2^50 B)");
        parse_with(s, "size", SIZE_UNITS, "\"4KiB\", \"2MB\", \"4096B\"", max, Whole::Exact("bytes")).map(Bytes)
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
                        let v = crate::error::number(v);
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

unit_serde!(
    Time,
    "Time",
    "^[0-9._]+([eE][+-]?[0-9]{1,4})?\\s*(ps|ns|us|µs|ms|s)$",
    "a time such as \"1us\", \"500ns\" or \"10ms\""
);
unit_serde!(
    Rate,
    "Rate",
    "^[0-9._]+([eE][+-]?[0-9]{1,4})?\\s*(bps|Kbps|Mbps|Gbps|Tbps|Mb/s|Gb/s|Tb/s)$",
    "a rate such as \"100Gbps\" or \"400Gbps\""
);
unit_serde!(
    Bytes,
    "Bytes",
    "^[0-9._]+([eE][+-]?[0-9]{1,4})?\\s*(B|KB|MB|GB|KiB|MiB|GiB)$",
    "a size such as \"4KiB\", \"2MB\" or \"4096B\""
);

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
    fn reads_decimals_exactly_and_refuses_what_cannot_be_held() {
        assert!("18446744.073709551615s".parse::<Time>().unwrap_err().0.contains("larger than"));
        assert!("99999999999999999999s".parse::<Time>().unwrap_err().0.contains("larger than"));
        assert_eq!("4611686.018427387904s".parse::<Time>().unwrap(), Time::HORIZON);
        assert!("4611686.018427387905s".parse::<Time>().is_err());
        assert!("9007199254740993B".parse::<Bytes>().unwrap_err().0.contains("larger than"));
        assert_eq!("1125899906842623B".parse::<Bytes>().unwrap(), Bytes((1 << 50) - 1));
        assert_eq!("0.1ns".parse::<Time>().unwrap(), Time(100));
        assert!("0.5ps".parse::<Time>().unwrap_err().0.contains("whole number of picoseconds"));
        assert!("1.5B".parse::<Bytes>().unwrap_err().0.contains("whole number of bytes"));
        assert_eq!("1.0000000000000000000000000000000000000s".parse::<Time>().unwrap(), Time(PS_PER_S));
        assert_eq!("2.5bps".parse::<Rate>().unwrap(), Rate(3));
        assert!("0.4bps".parse::<Rate>().is_err());
        assert!("-1us".parse::<Time>().unwrap_err().0.contains("non-negative"));
        assert!("1.2.3us".parse::<Time>().is_err());
        assert!(".us".parse::<Time>().is_err());
        assert_eq!("0us".parse::<Time>().unwrap(), Time::ZERO);
        assert_eq!(".5us".parse::<Time>().unwrap(), Time(500_000));
    }

    #[test]
    fn a_rate_below_one_bit_per_second_is_refused_whatever_its_rounding() {
        for text in ["0.1bps", "0.5bps", "0.9999bps", "0bps", "1e-30Gbps"] {
            let e = text.parse::<Rate>().unwrap_err().0;
            assert!(e.contains("at least 1bps"), "{text}: {e}");
        }
        assert_eq!("1.4bps".parse::<Rate>().unwrap(), Rate(1));
        assert_eq!("1.5bps".parse::<Rate>().unwrap(), Rate(2));
    }

    #[test]
    fn reads_exponents_exactly() {
        assert_eq!("2.5e9bps".parse::<Rate>().unwrap(), Rate(2_500_000_000));
        assert_eq!("4E2Gbps".parse::<Rate>().unwrap(), Rate::from_gbps(400));
        assert_eq!("1e-6s".parse::<Time>().unwrap(), Time::from_us(1));
        assert_eq!("1.5e+3 ns".parse::<Time>().unwrap(), Time::from_us(1) + Time(500_000));
        assert_eq!("2e6B".parse::<Bytes>().unwrap(), Bytes(2_000_000));
        assert_eq!("0e9999s".parse::<Time>().unwrap(), Time::ZERO);
        assert!("1e-13s".parse::<Time>().unwrap_err().0.contains("whole number of picoseconds"));
        assert!("1e-9999s".parse::<Time>().unwrap_err().0.contains("whole number of picoseconds"));
        assert!("1e-40Gbps".parse::<Rate>().is_err(), "rounds to no rate at all");
        assert!("1e30Gbps".parse::<Rate>().unwrap_err().0.contains("larger than"));
        assert!("1e9999B".parse::<Bytes>().unwrap_err().0.contains("larger than"));
        assert!("1e99999B".parse::<Bytes>().unwrap_err().0.contains("not a size"));
        assert!("1eGbps".parse::<Rate>().unwrap_err().0.contains("not a rate"));
        assert!("1e+bps".parse::<Rate>().unwrap_err().0.contains("not a rate"));
        assert!("1e3".parse::<Bytes>().unwrap_err().0.contains("no unit"));
    }

    #[test]
    fn time_sums_saturate_instead_of_wrapping() {
        assert_eq!(Time::HORIZON + Time::HORIZON + Time::HORIZON + Time::HORIZON, Time::MAX);
        assert_eq!(Time::HORIZON.times(5), Time::MAX);
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
