//! Go-style durations in scenario files (`"90s"`, `"5m"`, `"2h"`, `"1h30m"`), parsed by
//! `quartermaster-policies` as NodePool durations are, plus the day and week units for long runs
//! (`"7d"` = `"168h"`, `"1w"`). A bare `0` is zero. This file reads them from YAML and prints
//! them back; the parsing is the policies crate's.

use std::fmt;
use std::time::Duration;

use chrono::TimeDelta;
use quartermaster_policies::duration::parse_duration_with_days;
use serde::de::{self, Deserialize, Deserializer, Visitor};

/// A non-negative duration as written in a scenario file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

impl Dur {
    /// As a chrono delta (saturating; scenario durations are far below the limit).
    pub fn delta(self) -> TimeDelta {
        TimeDelta::from_std(self.0).unwrap_or(TimeDelta::MAX)
    }

    /// In seconds.
    pub fn secs_f64(self) -> f64 {
        self.0.as_secs_f64()
    }

    /// Whether it is zero.
    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

/// Parses `7d`, `1d12h` and every Go duration
/// ([`quartermaster_policies::duration::parse_duration_with_days`]).
pub fn parse(input: &str) -> Result<Dur, String> {
    parse_duration_with_days(input.trim())
        .map(Dur)
        .map_err(|e| format!("invalid duration {input:?}: {}", e.reason))
}

impl fmt::Display for Dur {
    /// `1h30m`, `45s`, `2d3h`: the shortest exact spelling in whole seconds (sub-second parts
    /// as milliseconds).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.0.as_secs();
        let millis = self.0.subsec_millis();
        if total == 0 && millis == 0 {
            return f.write_str("0s");
        }
        let (d, h, m, s) = (
            total / 86_400,
            total % 86_400 / 3600,
            total % 3600 / 60,
            total % 60,
        );
        let mut out = String::new();
        for (value, unit) in [(d, "d"), (h, "h"), (m, "m")] {
            if value > 0 {
                out.push_str(&format!("{value}{unit}"));
            }
        }
        if s > 0 || millis > 0 {
            if millis > 0 {
                out.push_str(&format!("{s}.{millis:03}s"));
            } else {
                out.push_str(&format!("{s}s"));
            }
        }
        f.write_str(&out)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DurVisitor)
    }
}

struct DurVisitor;

impl Visitor<'_> for DurVisitor {
    type Value = Dur;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as \"90s\", \"5m\", \"2h\" or \"7d\"")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Dur, E> {
        parse(s).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Dur, E> {
        if n == 0 {
            Ok(Dur(Duration::ZERO))
        } else {
            Err(E::custom(format!(
                "invalid duration {n}: missing unit (write e.g. \"{n}s\")"
            )))
        }
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Dur, E> {
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::custom(format!(
                "invalid duration {n}: negative durations are not allowed"
            ))),
        }
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Dur, E> {
        Err(E::custom(format!(
            "invalid duration {n}: missing unit (write e.g. \"{n}s\")"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations_and_days() {
        assert_eq!(parse("90s").unwrap(), Dur(Duration::from_secs(90)));
        assert_eq!(parse("1h30m").unwrap(), Dur(Duration::from_secs(5400)));
        assert_eq!(parse("7d").unwrap(), Dur(Duration::from_secs(7 * 86_400)));
        assert_eq!(
            parse("1d12h").unwrap(),
            Dur(Duration::from_secs(86_400 + 12 * 3600))
        );
        assert!(
            parse("-5m")
                .unwrap_err()
                .starts_with("invalid duration \"-5m\"")
        );
        assert!(
            parse("soon")
                .unwrap_err()
                .starts_with("invalid duration \"soon\"")
        );
    }

    #[test]
    fn displays_the_shortest_spelling() {
        for s in ["0s", "45s", "1h30m", "2d3h", "1.500s", "3d"] {
            assert_eq!(parse(s).unwrap().to_string(), s);
        }
    }
}
