//! ARM error codes -> [`CloudError`]: a pure function of the code, the message, the HTTP status
//! and the offering the call was for, so every code is tested without a network.

use std::time::Duration;

use quartermaster_cloud::{CloudError, LaunchOffering};

use crate::port::{ApiError, ApiErrorKind};

/// How long a throttled caller waits when ARM sends no `Retry-After`.
pub const DEFAULT_THROTTLE_RETRY: Duration = Duration::from_secs(5);

/// Codes that mean "this offering has no capacity now": the engine marks the offering
/// unavailable and tries the next one.
const CAPACITY: &[&str] = &[
    "SkuNotAvailable",
    "AllocationFailed",
    "ZonalAllocationFailed",
    "OverconstrainedAllocationRequest",
    "OverconstrainedZonalAllocationRequest",
    "AllocationFailedVMSeries",
];

/// Codes of account limits (`OperationNotAllowed` only when it speaks of a quota).
const QUOTA: &[&str] = &[
    "QuotaExceeded",
    "SpotQuotaExceeded",
    "LowPriorityQuotaExceeded",
];

/// Codes of throttling.
const THROTTLED: &[&str] = &["TooManyRequests", "SubscriptionRequestsThrottled"];

/// Codes of a missing resource.
const NOT_FOUND: &[&str] = &["ResourceNotFound", "NotFound"];

/// Codes of a request that can never succeed as it is (prefixes: `InvalidParameter` matches
/// `InvalidParameterValue`).
const INVALID_PREFIXES: &[&str] = &[
    "InvalidParameter",
    "InvalidRequest",
    "BadRequest",
    "PropertyChangeNotAllowed",
    "ResourceGroupNotFound",
    "SubscriptionNotFound",
    "AuthorizationFailed",
    "LinkedAuthorizationFailed",
    "InvalidAuthenticationToken",
    "AuthenticationFailed",
    "ImageNotFound",
    "PlatformImageNotFound",
    "GalleryImageNotFound",
    "InvalidResourceReference",
    "MissingSubscriptionRegistration",
    "OperationNotAllowed",
];

/// The [`CloudError`] for `code` with `message` (HTTP `status` when known), for a call about
/// `offering` (when it was about one offering). A capacity code without an offering is
/// transient.
pub fn map_code(
    code: &str,
    message: &str,
    status: Option<u16>,
    offering: Option<&LaunchOffering>,
    retry_after: Option<Duration>,
) -> CloudError {
    let words = format!("{code}: {message}");
    if CAPACITY.contains(&code) {
        return match offering {
            Some(o) => CloudError::InsufficientCapacity {
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type,
                message: words,
            },
            None => CloudError::Transient { message: words },
        };
    }
    if QUOTA.contains(&code)
        || (code == "OperationNotAllowed" && message.to_ascii_lowercase().contains("quota"))
    {
        return CloudError::QuotaExceeded { message: words };
    }
    if THROTTLED.contains(&code) || status == Some(429) {
        return CloudError::Throttled {
            retry_after: Some(retry_after.unwrap_or(DEFAULT_THROTTLE_RETRY)),
        };
    }
    if NOT_FOUND.contains(&code) {
        return CloudError::NotFound { provider_id: words };
    }
    if INVALID_PREFIXES.iter().any(|p| code.starts_with(p)) {
        return CloudError::InvalidRequest { message: words };
    }
    match status {
        Some(404) => CloudError::NotFound { provider_id: words },
        Some(s) if (400..500).contains(&s) => CloudError::InvalidRequest { message: words },
        _ => CloudError::Transient { message: words },
    }
}

/// The [`CloudError`] for a failed call.
pub fn map_api_error(error: &ApiError, offering: Option<&LaunchOffering>) -> CloudError {
    match (&error.kind, &error.code) {
        (ApiErrorKind::Service, Some(code)) => map_code(
            code,
            &error.message,
            error.status,
            offering,
            error.retry_after,
        ),
        (ApiErrorKind::Service, None) => match error.status {
            Some(429) => CloudError::Throttled {
                retry_after: Some(error.retry_after.unwrap_or(DEFAULT_THROTTLE_RETRY)),
            },
            Some(404) => CloudError::NotFound {
                provider_id: error.message.clone(),
            },
            Some(s) if (400..500).contains(&s) => CloudError::InvalidRequest {
                message: format!("HTTP {s}: {}", error.message),
            },
            _ => CloudError::Transient {
                message: error.message.clone(),
            },
        },
        (ApiErrorKind::Credential, _) => CloudError::InvalidRequest {
            message: format!("no Azure credential: {}", error.message),
        },
        (ApiErrorKind::Dispatch, _) => CloudError::Transient {
            message: format!(
                "Azure Resource Manager could not be reached: {}",
                error.message
            ),
        },
        (ApiErrorKind::Response, _) => CloudError::Transient {
            message: error.message.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use quartermaster_pricing::CapacityType;

    use super::*;

    fn offering() -> LaunchOffering {
        LaunchOffering {
            instance_type: "Standard_NC24ads_A100_v4".into(),
            zone: "eastus-1".into(),
            capacity_type: CapacityType::Spot,
            price_per_hour: 3.67,
        }
    }

    fn map(code: &str) -> CloudError {
        map_code(code, "words", Some(409), Some(&offering()), None)
    }

    fn assert_capacity(code: &str) {
        match map(code) {
            CloudError::InsufficientCapacity {
                instance_type,
                zone,
                capacity_type,
                message,
            } => {
                assert_eq!(instance_type, "Standard_NC24ads_A100_v4");
                assert_eq!(zone, "eastus-1");
                assert_eq!(capacity_type, CapacityType::Spot);
                assert_eq!(message, format!("{code}: words"));
            }
            other => panic!("{code} mapped to {other:?}"),
        }
    }

    #[test]
    fn sku_not_available_is_capacity_of_the_offering() {
        assert_capacity("SkuNotAvailable");
    }

    #[test]
    fn allocation_failed_is_capacity() {
        assert_capacity("AllocationFailed");
    }

    #[test]
    fn zonal_allocation_failed_is_capacity() {
        assert_capacity("ZonalAllocationFailed");
    }

    #[test]
    fn overconstrained_allocation_request_is_capacity() {
        assert_capacity("OverconstrainedAllocationRequest");
        assert_capacity("OverconstrainedZonalAllocationRequest");
    }

    #[test]
    fn capacity_without_an_offering_is_transient() {
        assert!(matches!(
            map_code("AllocationFailed", "x", None, None, None),
            CloudError::Transient { .. }
        ));
    }

    #[test]
    fn operation_not_allowed_for_a_quota_is_quota() {
        let e = map_code(
            "OperationNotAllowed",
            "Operation could not be completed as it results in exceeding approved standardNCADSA100v4Family Cores quota.",
            Some(409),
            Some(&offering()),
            None,
        );
        assert!(matches!(e, CloudError::QuotaExceeded { .. }), "{e:?}");
    }

    #[test]
    fn operation_not_allowed_otherwise_is_invalid() {
        assert!(matches!(
            map("OperationNotAllowed"),
            CloudError::InvalidRequest { .. }
        ));
    }

    #[test]
    fn spot_quota_codes_are_quota() {
        assert!(matches!(
            map("SpotQuotaExceeded"),
            CloudError::QuotaExceeded { .. }
        ));
        assert!(matches!(
            map("QuotaExceeded"),
            CloudError::QuotaExceeded { .. }
        ));
    }

    #[test]
    fn status_429_is_throttled_with_the_servers_retry_after() {
        let e = ApiError {
            kind: ApiErrorKind::Service,
            code: Some("TooManyRequests".into()),
            message: "slow down".into(),
            status: Some(429),
            retry_after: Some(Duration::from_secs(7)),
        };
        assert_eq!(
            map_api_error(&e, None),
            CloudError::Throttled {
                retry_after: Some(Duration::from_secs(7))
            }
        );
        let bare = ApiError {
            code: None,
            retry_after: None,
            ..e
        };
        assert_eq!(
            map_api_error(&bare, None),
            CloudError::Throttled {
                retry_after: Some(DEFAULT_THROTTLE_RETRY)
            }
        );
    }

    #[test]
    fn subscription_requests_throttled_is_throttled() {
        assert!(matches!(
            map("SubscriptionRequestsThrottled"),
            CloudError::Throttled { .. }
        ));
    }

    #[test]
    fn status_404_is_not_found() {
        assert!(matches!(
            map_code("ResourceNotFound", "gone", Some(404), None, None),
            CloudError::NotFound { .. }
        ));
        let e = ApiError {
            kind: ApiErrorKind::Service,
            code: None,
            message: "gone".into(),
            status: Some(404),
            retry_after: None,
        };
        assert!(matches!(
            map_api_error(&e, None),
            CloudError::NotFound { .. }
        ));
    }

    #[test]
    fn invalid_parameter_is_invalid_request() {
        for code in [
            "InvalidParameter",
            "InvalidParameterValue",
            "AuthorizationFailed",
            "ResourceGroupNotFound",
            "ImageNotFound",
        ] {
            assert!(
                matches!(map(code), CloudError::InvalidRequest { .. }),
                "{code}"
            );
        }
    }

    #[test]
    fn status_5xx_is_transient() {
        assert!(matches!(
            map_code("InternalServerError", "oops", Some(500), None, None),
            CloudError::Transient { .. }
        ));
        let e = ApiError {
            kind: ApiErrorKind::Service,
            code: None,
            message: "bad gateway".into(),
            status: Some(502),
            retry_after: None,
        };
        assert!(matches!(
            map_api_error(&e, None),
            CloudError::Transient { .. }
        ));
    }

    #[test]
    fn unreachable_is_transient_and_no_credential_is_invalid() {
        let e = ApiError::other(ApiErrorKind::Dispatch, "connection refused");
        assert!(matches!(
            map_api_error(&e, None),
            CloudError::Transient { .. }
        ));
        let c = ApiError::other(ApiErrorKind::Credential, "no environment credential");
        assert!(matches!(
            map_api_error(&c, None),
            CloudError::InvalidRequest { .. }
        ));
    }
}
