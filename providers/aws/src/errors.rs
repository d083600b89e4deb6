//! EC2 error codes -> [`CloudError`]: a pure function of the code, the message and the offering
//! the call was for, so every code is tested without a network.

use std::time::Duration;

use quartermaster_cloud::{CloudError, LaunchOffering};

use crate::port::{ApiError, ApiErrorKind};

/// How long a throttled caller waits when EC2 sends no `Retry-After` (it usually sends none).
pub const DEFAULT_THROTTLE_RETRY: Duration = Duration::from_secs(5);

/// Codes that mean "this offering has no capacity now": the engine marks the offering
/// unavailable and tries the next one.
const CAPACITY: &[&str] = &[
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientFreeAddressesInSubnet",
    "UnfulfillableCapacity",
    "MaxSpotInstanceCountExceeded",
    "SpotMaxPriceTooLow",
    "Unsupported",
    "ReservationCapacityExceeded",
];

/// Codes of account limits.
const QUOTA: &[&str] = &[
    "VcpuLimitExceeded",
    "InstanceLimitExceeded",
    "MaxFleetCountExceeded",
    "ResourceLimitExceeded",
    "LaunchTemplateLimitExceeded",
];

/// Codes of throttling.
const THROTTLED: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "SlowDown",
];

/// Codes of a request that can never succeed as it is (prefixes: `InvalidParameter` matches
/// `InvalidParameterValue` and `InvalidParameterCombination`).
const INVALID_PREFIXES: &[&str] = &[
    "InvalidParameter",
    "InvalidLaunchTemplate",
    "InvalidAMIID",
    "InvalidSubnetID",
    "InvalidGroup",
    "InvalidSecurityGroupID",
    "InvalidKeyPair",
    "InvalidBlockDeviceMapping",
    "InvalidUserData",
    "InvalidIamInstanceProfile",
    "InvalidFleetConfiguration",
    "InvalidInput",
    "MissingParameter",
    "UnauthorizedOperation",
    "AuthFailure",
    "OptInRequired",
    "Blocked",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
    "ValidationError",
];

/// Codes of an instance that does not exist.
const NOT_FOUND: &[&str] = &["InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"];

/// The [`CloudError`] for `code` with `message`, for a call about `offering` (when it was about
/// one offering). A capacity code without an offering is transient.
pub fn map_code(
    code: &str,
    message: &str,
    offering: Option<&LaunchOffering>,
    retry_after: Option<Duration>,
) -> CloudError {
    let message = format!("{code}: {message}");
    if CAPACITY.contains(&code) {
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
    if QUOTA.contains(&code) {
        return CloudError::QuotaExceeded { message };
    }
    if THROTTLED.contains(&code) {
        return CloudError::Throttled {
            retry_after: Some(retry_after.unwrap_or(DEFAULT_THROTTLE_RETRY)),
        };
    }
    if NOT_FOUND.contains(&code) {
        return CloudError::NotFound {
            provider_id: message,
        };
    }
    if INVALID_PREFIXES.iter().any(|p| code.starts_with(p)) {
        return CloudError::InvalidRequest { message };
    }
    CloudError::Transient { message }
}

/// The [`CloudError`] for a failed call.
pub fn map_api_error(error: &ApiError, offering: Option<&LaunchOffering>) -> CloudError {
    match (&error.kind, &error.code) {
        (ApiErrorKind::Service, Some(code)) => {
            map_code(code, &error.message, offering, error.retry_after)
        }
        (ApiErrorKind::Service, None) if error.status == Some(429) || error.status == Some(503) => {
            CloudError::Throttled {
                retry_after: Some(error.retry_after.unwrap_or(DEFAULT_THROTTLE_RETRY)),
            }
        }
        (ApiErrorKind::Construction, _) => CloudError::InvalidRequest {
            message: format!("the EC2 request could not be built: {}", error.message),
        },
        (ApiErrorKind::Timeout, _) => CloudError::Transient {
            message: format!("EC2 did not answer in time: {}", error.message),
        },
        (ApiErrorKind::Dispatch, _) => CloudError::Transient {
            message: format!("EC2 could not be reached: {}", error.message),
        },
        _ => CloudError::Transient {
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
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            price_per_hour: 40.0,
        }
    }

    fn map(code: &str) -> CloudError {
        map_code(code, "words", Some(&offering()), None)
    }

    fn assert_capacity(code: &str) {
        match map(code) {
            CloudError::InsufficientCapacity {
                instance_type,
                zone,
                capacity_type,
                message,
            } => {
                assert_eq!(instance_type, "p5.48xlarge");
                assert_eq!(zone, "us-east-1a");
                assert_eq!(capacity_type, CapacityType::Spot);
                assert_eq!(message, format!("{code}: words"));
            }
            other => panic!("{code} mapped to {other:?}"),
        }
    }

    #[test]
    fn insufficient_instance_capacity_is_capacity_of_the_offering() {
        assert_capacity("InsufficientInstanceCapacity");
    }

    #[test]
    fn unfulfillable_capacity_is_capacity() {
        assert_capacity("UnfulfillableCapacity");
    }

    #[test]
    fn max_spot_instance_count_exceeded_is_capacity_of_the_spot_offering() {
        assert_capacity("MaxSpotInstanceCountExceeded");
    }

    #[test]
    fn spot_max_price_too_low_is_capacity() {
        assert_capacity("SpotMaxPriceTooLow");
    }

    #[test]
    fn insufficient_host_and_reserved_capacity_and_free_addresses_are_capacity() {
        assert_capacity("InsufficientHostCapacity");
        assert_capacity("InsufficientReservedInstanceCapacity");
        assert_capacity("InsufficientFreeAddressesInSubnet");
        assert_capacity("InsufficientCapacity");
    }

    #[test]
    fn unsupported_type_in_zone_is_capacity() {
        assert_capacity("Unsupported");
    }

    #[test]
    fn capacity_without_an_offering_is_transient() {
        assert!(matches!(
            map_code("InsufficientInstanceCapacity", "x", None, None),
            CloudError::Transient { .. }
        ));
    }

    #[test]
    fn vcpu_limit_exceeded_is_quota() {
        assert!(matches!(
            map("VcpuLimitExceeded"),
            CloudError::QuotaExceeded { message } if message.contains("VcpuLimitExceeded")
        ));
    }

    #[test]
    fn instance_limit_and_fleet_count_are_quota() {
        assert!(matches!(
            map("InstanceLimitExceeded"),
            CloudError::QuotaExceeded { .. }
        ));
        assert!(matches!(
            map("MaxFleetCountExceeded"),
            CloudError::QuotaExceeded { .. }
        ));
    }

    #[test]
    fn request_limit_exceeded_is_throttled_with_the_default_delay() {
        assert_eq!(
            map("RequestLimitExceeded"),
            CloudError::Throttled {
                retry_after: Some(DEFAULT_THROTTLE_RETRY)
            }
        );
    }

    #[test]
    fn throttling_keeps_the_servers_retry_after() {
        assert_eq!(
            map_code(
                "Throttling",
                "slow down",
                None,
                Some(Duration::from_secs(7))
            ),
            CloudError::Throttled {
                retry_after: Some(Duration::from_secs(7))
            }
        );
        assert!(matches!(
            map("ThrottlingException"),
            CloudError::Throttled { .. }
        ));
    }

    #[test]
    fn invalid_parameter_codes_are_invalid_requests() {
        for code in [
            "InvalidParameter",
            "InvalidParameterValue",
            "InvalidParameterCombination",
            "InvalidLaunchTemplateId.NotFound",
            "InvalidAMIID.NotFound",
            "InvalidSubnetID.NotFound",
            "InvalidGroup.NotFound",
            "UnauthorizedOperation",
            "AuthFailure",
        ] {
            assert!(
                matches!(map(code), CloudError::InvalidRequest { .. }),
                "{code}"
            );
        }
    }

    #[test]
    fn unknown_instance_is_not_found() {
        assert!(matches!(
            map("InvalidInstanceID.NotFound"),
            CloudError::NotFound { .. }
        ));
    }

    #[test]
    fn internal_errors_and_unknown_codes_are_transient() {
        assert!(matches!(map("InternalError"), CloudError::Transient { .. }));
        assert!(matches!(
            map("ServiceUnavailable"),
            CloudError::Transient { .. }
        ));
        assert!(matches!(map("SomethingNew"), CloudError::Transient { .. }));
    }

    #[test]
    fn a_503_without_a_code_is_throttled_and_timeouts_are_transient() {
        let e = ApiError {
            kind: ApiErrorKind::Service,
            code: None,
            message: "slow".into(),
            status: Some(503),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(
            map_api_error(&e, None),
            CloudError::Throttled {
                retry_after: Some(Duration::from_secs(2))
            }
        );
        let t = ApiError {
            kind: ApiErrorKind::Timeout,
            ..e
        };
        assert!(matches!(
            map_api_error(&t, None),
            CloudError::Transient { .. }
        ));
    }
}
