//! Between the clock's `chrono` times and the API's `Time` / `MicroTime` (`jiff` timestamps).

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;

/// The API timestamp of `t`; times outside the API's range clamp to its ends.
fn timestamp(t: DateTime<Utc>) -> Timestamp {
    Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32).unwrap_or(
        if t.timestamp() < 0 {
            Timestamp::MIN
        } else {
            Timestamp::MAX
        },
    )
}

/// `t` as an API `Time` (second precision on the wire).
pub(crate) fn to_time(t: DateTime<Utc>) -> Time {
    Time(timestamp(t))
}

/// `t` as an API `MicroTime`.
pub(crate) fn to_micro_time(t: DateTime<Utc>) -> MicroTime {
    MicroTime(timestamp(t))
}

/// An API timestamp as a `chrono` time.
pub(crate) fn from_timestamp(t: &Timestamp) -> DateTime<Utc> {
    DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32)
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// An API `Time` as a `chrono` time.
pub(crate) fn from_time(t: &Time) -> DateTime<Utc> {
    from_timestamp(&t.0)
}

/// RFC 3339 text of `t`, as kept in annotations.
pub(crate) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// Parses RFC 3339 text from an annotation.
pub(crate) fn parse_rfc3339(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}
