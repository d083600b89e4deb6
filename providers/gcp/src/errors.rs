//! Compute Engine errors -> [`CloudError`]: a pure function of the reason or code, the HTTP
//! status and the offering the call was for, so every code is tested without a network.
//!
//! Compute Engine reports errors two ways: an HTTP error whose `error.errors[].reason` is a
//! camel-case reason (`rateLimitExceeded`, `quotaExceeded`, `notFound`), and a finished zone
//! operation whose `error.errors[].code` is an upper-case code (`ZONE_RESOURCE_POOL_EXHAUSTED`,
//! `QUOTA_EXCEEDED`). Both come here.

use std::time::Duration;

use quartermaster_cloud::{CloudError, LaunchOffering};

use crate::port::{ApiError, ApiErrorKind, Operation};

/// How long a throttled caller waits when Compute Engine sends no `Retry-After`.
pub const DEFAULT_THROTTLE_RETRY: Duration = Duration::from_secs(5);

/// Codes that mean "this offering has no capacity now".
const CAPACITY: &[&str] = &[
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "RESOURCE_POOL_EXHAUSTED",
    "STOCKOUT",
    "resourcePoolExhausted",
];

/// Words that mean "this offering has no capacity now" whatever the code: a launch into a
/// reservation without a free slot ("Reservation R does not have sufficient capacity for the
/// requested resources"), a zone without room ("Zone does not currently have sufficient
/// capacity for the requested resources"). The cluster-autoscaler's GCE provider reads the same
/// words.
const CAPACITY_WORDS: &[&str] = &["sufficient capacity for the requested resources"];

/// Codes of project or region quotas.
const QUOTA: &[&str] = &["QUOTA_EXCEEDED", "quotaExceeded", "limitExceeded"];

/// Codes of API throttling.
const THROTTLED: &[&str] = &[
    "rateLimitExceeded",
    "userRateLimitExceeded",
    "RATE_LIMIT_EXCEEDED",
    "RESOURCE_EXHAUSTED",
];

/// Codes of an instance (or operation) that does not exist.
const NOT_FOUND: &[&str] = &["notFound", "RESOURCE_NOT_FOUND", "NOT_FOUND"];

/// Codes of a request that can never succeed as it is.
const INVALID: &[&str] = &[
    "invalid",
    "INVALID_ARGUMENT",
    "INVALID_FIELD_VALUE",
    "badRequest",
    "required",
    "forbidden",
    "PERMISSION_DENIED",
    "accessNotConfigured",
    "UNSUPPORTED_OPERATION",
    "alreadyExists",
    "RESOURCE_ALREADY_EXISTS",
];

/// The [`CloudError`] for `code` (or, without one, the HTTP `status`) with `message`, for a
/// call about `offering` when it was about one. A capacity code without an offering is
/// transient.
pub fn map_code(
    code: Option<&str>,
    status: Option<u16>,
    message: &str,
    retry_after: Option<Duration>,
    offering: Option<&LaunchOffering>,
) -> CloudError {
    let message = message.to_owned();
    let is = |list: &[&str]| code.is_some_and(|c| list.contains(&c));
    if is(CAPACITY) || CAPACITY_WORDS.iter().any(|w| message.contains(w)) {
        return match offering {
            Some(o) => CloudError::InsufficientCapacity {
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type,
                message,
            },
            None => CloudError::Transient { message },
        };
    }
    if is(QUOTA) {
        return CloudError::QuotaExceeded { message };
    }
    if is(THROTTLED) || status == Some(429) {
        return CloudError::Throttled {
            retry_after: Some(retry_after.unwrap_or(DEFAULT_THROTTLE_RETRY)),
        };
    }
    if is(NOT_FOUND) || (code.is_none() && status == Some(404)) {
        return CloudError::NotFound {
            provider_id: String::new(),
        };
    }
    if is(INVALID) || (code.is_none() && matches!(status, Some(400 | 401 | 403 | 409))) {
        return CloudError::InvalidRequest { message };
    }
    CloudError::Transient { message }
}

/// The [`CloudError`] of a failed call about `offering`, when it was about one.
pub fn map_api_error(e: &ApiError, offering: Option<&LaunchOffering>) -> CloudError {
    match e.kind {
        ApiErrorKind::Service => map_code(
            e.code.as_deref(),
            e.status,
            &e.message,
            e.retry_after,
            offering,
        ),
        ApiErrorKind::Authentication => CloudError::InvalidRequest {
            message: format!("credentials: {}", e.message),
        },
        ApiErrorKind::Timeout | ApiErrorKind::Dispatch | ApiErrorKind::Response => {
            CloudError::Transient {
                message: e.message.clone(),
            }
        }
    }
}

/// The [`CloudError`] of a finished operation that carries errors, `None` when it succeeded.
/// With several errors, a capacity error wins (it is the one the engine can act on).
pub fn map_operation(op: &Operation, offering: Option<&LaunchOffering>) -> Option<CloudError> {
    let mapped: Vec<CloudError> = op
        .errors
        .iter()
        .map(|(code, message)| map_code(Some(code), op.http_status, message, None, offering))
        .collect();
    mapped
        .iter()
        .find(|e| e.is_capacity())
        .or_else(|| mapped.first())
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use quartermaster_pricing::CapacityType;

    fn offering() -> LaunchOffering {
        LaunchOffering {
            instance_type: "a2-highgpu-1g".into(),
            zone: "us-central1-a".into(),
            capacity_type: CapacityType::Spot,
            price_per_hour: 1.0,
        }
    }

    fn code(c: &str) -> CloudError {
        map_code(Some(c), None, "words", None, Some(&offering()))
    }

    #[test]
    fn zone_resource_pool_exhausted_is_capacity_of_the_offering() {
        assert_eq!(
            code("ZONE_RESOURCE_POOL_EXHAUSTED"),
            CloudError::InsufficientCapacity {
                instance_type: "a2-highgpu-1g".into(),
                zone: "us-central1-a".into(),
                capacity_type: CapacityType::Spot,
                message: "words".into(),
            }
        );
    }

    #[test]
    fn zone_resource_pool_exhausted_with_details_is_capacity() {
        assert!(code("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS").is_capacity());
    }

    #[test]
    fn a_reservation_without_room_is_capacity_whatever_the_code() {
        let e = map_code(
            Some("SOME_NEW_CODE"),
            Some(400),
            "Reservation h100-block does not have sufficient capacity for the requested resources.",
            None,
            Some(&offering()),
        );
        assert!(e.is_capacity(), "{e:?}");
    }

    #[test]
    fn capacity_without_an_offering_is_transient() {
        let e = map_code(Some("ZONE_RESOURCE_POOL_EXHAUSTED"), None, "m", None, None);
        assert!(matches!(e, CloudError::Transient { .. }));
    }

    #[test]
    fn quota_exceeded_is_quota() {
        assert!(matches!(
            code("QUOTA_EXCEEDED"),
            CloudError::QuotaExceeded { .. }
        ));
        assert!(matches!(
            code("quotaExceeded"),
            CloudError::QuotaExceeded { .. }
        ));
    }

    #[test]
    fn rate_limit_exceeded_is_throttled_with_a_default_delay() {
        assert_eq!(
            code("rateLimitExceeded"),
            CloudError::Throttled {
                retry_after: Some(DEFAULT_THROTTLE_RETRY)
            }
        );
    }

    #[test]
    fn http_429_is_throttled_and_keeps_retry_after() {
        let e = map_code(
            None,
            Some(429),
            "slow down",
            Some(Duration::from_secs(7)),
            None,
        );
        assert_eq!(
            e,
            CloudError::Throttled {
                retry_after: Some(Duration::from_secs(7))
            }
        );
    }

    #[test]
    fn not_found_and_404_are_not_found() {
        assert!(matches!(code("notFound"), CloudError::NotFound { .. }));
        assert!(matches!(
            map_code(None, Some(404), "gone", None, None),
            CloudError::NotFound { .. }
        ));
    }

    #[test]
    fn invalid_and_4xx_are_invalid_requests() {
        assert!(matches!(code("invalid"), CloudError::InvalidRequest { .. }));
        assert!(matches!(
            code("INVALID_FIELD_VALUE"),
            CloudError::InvalidRequest { .. }
        ));
        assert!(matches!(
            map_code(None, Some(400), "bad", None, None),
            CloudError::InvalidRequest { .. }
        ));
    }

    #[test]
    fn a_500_is_transient() {
        assert!(matches!(
            map_code(None, Some(500), "oops", None, None),
            CloudError::Transient { .. }
        ));
    }

    #[test]
    fn a_dead_endpoint_is_transient_and_credentials_are_invalid() {
        let dead = ApiError {
            kind: ApiErrorKind::Dispatch,
            code: None,
            message: "connection refused".into(),
            status: None,
            retry_after: None,
        };
        assert!(map_api_error(&dead, None).is_retryable());
        let auth = ApiError {
            kind: ApiErrorKind::Authentication,
            ..dead
        };
        assert!(matches!(
            map_api_error(&auth, None),
            CloudError::InvalidRequest { .. }
        ));
    }

    #[test]
    fn an_operation_error_prefers_capacity() {
        let op = Operation {
            name: "op".into(),
            done: true,
            errors: vec![
                ("SOMETHING".into(), "x".into()),
                ("ZONE_RESOURCE_POOL_EXHAUSTED".into(), "no a2 in a".into()),
            ],
            http_status: Some(503),
        };
        assert!(map_operation(&op, Some(&offering())).unwrap().is_capacity());
        let ok = Operation {
            errors: vec![],
            ..op
        };
        assert_eq!(map_operation(&ok, None), None);
    }
}
