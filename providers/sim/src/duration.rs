//! Go-style durations (`"90s"`, `"5m"`, `"2h"`, `"1h30m"`) in scenario files, parsed by
//! [`quartermaster_policies::duration::parse_duration`] as NodePool durations are. A bare `0`
//! is accepted too, as Go accepts `"0"`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use quartermaster_policies::duration::parse_duration;
use serde::de::{self, Deserialize, Deserializer, Visitor};

/// A duration as written in a file.
pub(crate) struct GoDuration(pub(crate) Duration);

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(GoDurationVisitor)
    }
}

struct GoDurationVisitor;

impl Visitor<'_> for GoDurationVisitor {
    type Value = GoDuration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as \"90s\", \"5m\" or \"2h\"")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<GoDuration, E> {
        parse_duration(s).map(GoDuration).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<GoDuration, E> {
        if n == 0 {
            Ok(GoDuration(Duration::ZERO))
        } else {
            Err(E::custom(format!(
                "invalid duration {n}: missing unit (write e.g. \"{n}s\")"
            )))
        }
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<GoDuration, E> {
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::custom(format!(
                "invalid duration {n}: negative durations are not allowed"
            ))),
        }
    }
}

/// `#[serde(deserialize_with = "duration::required")]`.
pub(crate) fn required<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    GoDuration::deserialize(d).map(|g| g.0)
}

/// `#[serde(deserialize_with = "duration::optional")]` (use with `#[serde(default)]`).
pub(crate) fn optional<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    Option::<GoDuration>::deserialize(d).map(|o| o.map(|g| g.0))
}

/// `#[serde(deserialize_with = "duration::map")]`: a map of names to durations.
pub(crate) fn map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Duration>, D::Error> {
    BTreeMap::<String, GoDuration>::deserialize(d)
        .map(|m| m.into_iter().map(|(k, v)| (k, v.0)).collect())
}
