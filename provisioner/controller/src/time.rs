//! Conversions between the engine's time (`chrono`) and Kubernetes timestamps (`jiff`).

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// A Kubernetes timestamp as the engine's time.
pub fn from_kube(t: &Time) -> DateTime<Utc> {
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

/// The engine's time as a Kubernetes timestamp (whole seconds, as the API server keeps them).
pub fn to_kube(t: DateTime<Utc>) -> Time {
    Time(Timestamp::from_second(t.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_round_trip() {
        let t = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        assert_eq!(from_kube(&to_kube(t)), t);
    }
}
