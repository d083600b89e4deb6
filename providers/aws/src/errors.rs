//! The AWS crate's errors. [`AwsError`]: what can go wrong before any EC2 call (settings,
//! user data, NodeClass content). EC2 call failures are [`CloudError`]s, mapped from EC2's error
//! codes by [`TABLE`] (the shared [`ErrorTable`]), so every code is tested without a network.

use std::time::Duration;

use quartermaster_cloud::{CloudError, ErrorTable, KindWords, LaunchOffering, StatusRules};

use crate::port::ApiError;

/// A setup or NodeClass problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AwsError {
    /// The settings cannot work (a missing cluster endpoint, a bad endpoint URL).
    #[error("AWS settings: {0}")]
    Settings(String),
    /// The user data cannot be built (the NodeClass's `userData` is not valid MIME).
    #[error("user data: {0}")]
    UserData(String),
    /// The AWSNodeClass asks for something this provider cannot do (yet).
    #[error("AWSNodeClass: {0}")]
    NodeClass(String),
    /// The Spot Instance Advisor data is not in the shape it is published in.
    #[error("Spot Advisor data: {0}")]
    SpotAdvisor(String),
}

impl From<AwsError> for CloudError {
    fn from(e: AwsError) -> Self {
        CloudError::InvalidRequest {
            message: e.to_string(),
        }
    }
}

/// How long a throttled caller waits when EC2 sends no `Retry-After` (it usually sends none).
pub const DEFAULT_THROTTLE_RETRY: Duration = Duration::from_secs(5);

/// EC2's error codes. A status decides only without a code: 429 and 503 are throttling.
pub const TABLE: ErrorTable = ErrorTable {
    capacity: &[
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
    ],
    capacity_words: &[],
    quota: &[
        "VcpuLimitExceeded",
        "InstanceLimitExceeded",
        "MaxFleetCountExceeded",
        "ResourceLimitExceeded",
        "LaunchTemplateLimitExceeded",
    ],
    quota_when_words: &[],
    throttled: &[
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "SlowDown",
    ],
    not_found: &["InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"],
    invalid: &[],
    invalid_prefixes: &[
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
    ],
    statuses: StatusRules {
        throttled: &[429..=429, 503..=503],
        throttled_with_code: false,
        not_found: &[],
        invalid: &[],
        with_code: false,
        invalid_says_status: false,
    },
    code_in_message: true,
    not_found_keeps_message: true,
    kind_words: KindWords {
        construction: "the EC2 request could not be built: ",
        credential: "no AWS credentials: ",
        timeout: "EC2 did not answer in time: ",
        dispatch: "EC2 could not be reached: ",
    },
    default_retry: DEFAULT_THROTTLE_RETRY,
};

/// The [`CloudError`] for a failed call about `offering`, when it was about one.
pub fn map_api_error(error: &ApiError, offering: Option<&LaunchOffering>) -> CloudError {
    TABLE.map(error, offering)
}

#[cfg(test)]
mod tests {
    use quartermaster_cloud::api_error::{Row, check_rows};
    use quartermaster_pricing::CapacityType;

    use super::*;
    use crate::port::ApiErrorKind;

    fn offering() -> LaunchOffering {
        LaunchOffering {
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            price_per_hour: 40.0,
        }
    }

    fn map(code: &str) -> CloudError {
        TABLE.map_code(Some(code), "words", None, None, Some(&offering()))
    }

    const fn row(code: &'static str, want: &'static str) -> Row {
        Row {
            code: Some(code),
            status: None,
            message: "words",
            want,
        }
    }

    /// Every code class, for a call about one offering.
    const ROWS: &[Row] = &[
        row("InsufficientInstanceCapacity", "capacity"),
        row("InsufficientCapacity", "capacity"),
        row("InsufficientHostCapacity", "capacity"),
        row("InsufficientReservedInstanceCapacity", "capacity"),
        row("InsufficientFreeAddressesInSubnet", "capacity"),
        row("UnfulfillableCapacity", "capacity"),
        row("MaxSpotInstanceCountExceeded", "capacity"),
        row("SpotMaxPriceTooLow", "capacity"),
        row("Unsupported", "capacity"),
        row("VcpuLimitExceeded", "quota"),
        row("InstanceLimitExceeded", "quota"),
        row("MaxFleetCountExceeded", "quota"),
        row("RequestLimitExceeded", "throttled"),
        row("Throttling", "throttled"),
        row("ThrottlingException", "throttled"),
        row("InvalidParameter", "invalid"),
        row("InvalidParameterValue", "invalid"),
        row("InvalidParameterCombination", "invalid"),
        row("InvalidLaunchTemplateId.NotFound", "invalid"),
        row("InvalidAMIID.NotFound", "invalid"),
        row("InvalidSubnetID.NotFound", "invalid"),
        row("InvalidGroup.NotFound", "invalid"),
        row("UnauthorizedOperation", "invalid"),
        row("AuthFailure", "invalid"),
        row("InvalidInstanceID.NotFound", "not_found"),
        row("InternalError", "transient"),
        row("ServiceUnavailable", "transient"),
        row("SomethingNew", "transient"),
        // A status decides only without a code.
        Row {
            code: Some("SomethingNew"),
            status: Some(503),
            message: "words",
            want: "transient",
        },
        Row {
            code: None,
            status: Some(503),
            message: "slow",
            want: "throttled",
        },
        Row {
            code: None,
            status: Some(400),
            message: "bad",
            want: "transient",
        },
    ];

    #[test]
    fn every_code_maps_to_its_kind() {
        check_rows(&TABLE, Some(&offering()), ROWS);
    }

    #[test]
    fn capacity_names_the_offering_and_says_the_code() {
        for code in ["InsufficientInstanceCapacity", "SpotMaxPriceTooLow"] {
            assert_eq!(
                map(code),
                CloudError::InsufficientCapacity {
                    instance_type: "p5.48xlarge".into(),
                    zone: "us-east-1a".into(),
                    capacity_type: CapacityType::Spot,
                    message: format!("{code}: words"),
                }
            );
        }
    }

    #[test]
    fn capacity_without_an_offering_is_transient() {
        assert!(matches!(
            TABLE.map_code(Some("InsufficientInstanceCapacity"), "x", None, None, None),
            CloudError::Transient { .. }
        ));
    }

    #[test]
    fn quota_says_its_code() {
        assert!(matches!(
            map("VcpuLimitExceeded"),
            CloudError::QuotaExceeded { message } if message.contains("VcpuLimitExceeded")
        ));
    }

    #[test]
    fn throttling_waits_the_servers_retry_after_or_the_default() {
        assert_eq!(
            map("RequestLimitExceeded"),
            CloudError::Throttled {
                retry_after: Some(DEFAULT_THROTTLE_RETRY)
            }
        );
        assert_eq!(
            TABLE.map_code(
                Some("Throttling"),
                "slow down",
                None,
                Some(Duration::from_secs(7)),
                None
            ),
            CloudError::Throttled {
                retry_after: Some(Duration::from_secs(7))
            }
        );
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
        assert_eq!(
            map_api_error(&t, None),
            CloudError::Transient {
                message: "EC2 did not answer in time: slow".into()
            }
        );
    }
}
