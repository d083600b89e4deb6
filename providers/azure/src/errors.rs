//! The Azure crate's errors. [`AzureError`]: what can go wrong before any ARM call (settings,
//! the NodeClass, the bootstrap data). ARM call failures are [`CloudError`]s, mapped from ARM's
//! error codes by [`TABLE`] (the shared [`ErrorTable`]), so every code is tested without a
//! network.

use std::time::Duration;

use quartermaster_cloud::{CloudError, ErrorTable, KindWords, LaunchOffering, StatusRules};

use crate::port::ApiError;

/// A setup or NodeClass problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AzureError {
    /// The settings cannot work (a bad endpoint URL, no credential source).
    #[error("Azure settings: {0}")]
    Settings(String),
    /// The AzureNodeClass asks for something this provider cannot do.
    #[error("AzureNodeClass: {0}")]
    NodeClass(String),
    /// The bootstrap custom data could not be read.
    #[error("bootstrap data: {0}")]
    Bootstrap(String),
    /// The Retail Prices API failed or answered something unreadable.
    #[error("Azure Retail Prices API: {0}")]
    Prices(String),
}

impl From<AzureError> for CloudError {
    fn from(e: AzureError) -> Self {
        match e {
            AzureError::Prices(message) => CloudError::Transient { message },
            other => CloudError::InvalidRequest {
                message: other.to_string(),
            },
        }
    }
}

/// How long a throttled caller waits when ARM sends no `Retry-After`.
pub const DEFAULT_THROTTLE_RETRY: Duration = Duration::from_secs(5);

/// ARM's error codes. Where no code decides, 429 is throttling, 404 not found and any other
/// 4xx invalid, with a code or without.
pub const TABLE: ErrorTable = ErrorTable {
    capacity: &[
        "SkuNotAvailable",
        "AllocationFailed",
        "ZonalAllocationFailed",
        "OverconstrainedAllocationRequest",
        "OverconstrainedZonalAllocationRequest",
        "AllocationFailedVMSeries",
    ],
    capacity_words: &[],
    quota: &[
        "QuotaExceeded",
        "SpotQuotaExceeded",
        "LowPriorityQuotaExceeded",
    ],
    // `OperationNotAllowed` is a quota only when it speaks of one.
    quota_when_words: &[("OperationNotAllowed", "quota")],
    throttled: &["TooManyRequests", "SubscriptionRequestsThrottled"],
    not_found: &["ResourceNotFound", "NotFound"],
    invalid: &[],
    invalid_prefixes: &[
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
    ],
    statuses: StatusRules {
        throttled: &[429..=429],
        throttled_with_code: true,
        not_found: &[404..=404],
        invalid: &[400..=499],
        with_code: true,
        invalid_says_status: true,
    },
    code_in_message: true,
    not_found_keeps_message: true,
    kind_words: KindWords {
        construction: "",
        credential: "no Azure credential: ",
        timeout: "",
        dispatch: "Azure Resource Manager could not be reached: ",
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
            instance_type: "Standard_NC24ads_A100_v4".into(),
            zone: "eastus-1".into(),
            capacity_type: CapacityType::Spot,
            price_per_hour: 3.67,
        }
    }

    fn map(code: &str) -> CloudError {
        TABLE.map_code(Some(code), "words", Some(409), None, Some(&offering()))
    }

    const fn row(code: Option<&'static str>, status: Option<u16>, want: &'static str) -> Row {
        Row {
            code,
            status,
            message: "words",
            want,
        }
    }

    /// Every code class (as ARM answers them, with a 409), and the statuses, for a call about
    /// one offering.
    const ROWS: &[Row] = &[
        row(Some("SkuNotAvailable"), Some(409), "capacity"),
        row(Some("AllocationFailed"), Some(409), "capacity"),
        row(Some("ZonalAllocationFailed"), Some(409), "capacity"),
        row(
            Some("OverconstrainedAllocationRequest"),
            Some(409),
            "capacity",
        ),
        row(
            Some("OverconstrainedZonalAllocationRequest"),
            Some(409),
            "capacity",
        ),
        row(Some("SpotQuotaExceeded"), Some(409), "quota"),
        row(Some("QuotaExceeded"), Some(409), "quota"),
        row(Some("OperationNotAllowed"), Some(409), "invalid"),
        row(
            Some("SubscriptionRequestsThrottled"),
            Some(409),
            "throttled",
        ),
        row(Some("TooManyRequests"), Some(429), "throttled"),
        row(None, Some(429), "throttled"),
        row(Some("ResourceNotFound"), Some(404), "not_found"),
        row(None, Some(404), "not_found"),
        row(Some("InvalidParameter"), Some(409), "invalid"),
        row(Some("InvalidParameterValue"), Some(409), "invalid"),
        row(Some("AuthorizationFailed"), Some(409), "invalid"),
        row(Some("ResourceGroupNotFound"), Some(409), "invalid"),
        row(Some("ImageNotFound"), Some(409), "invalid"),
        row(Some("InternalServerError"), Some(500), "transient"),
        row(None, Some(502), "transient"),
        // OperationNotAllowed is a quota when it speaks of one.
        Row {
            code: Some("OperationNotAllowed"),
            status: Some(409),
            message: "Operation could not be completed as it results in exceeding approved standardNCADSA100v4Family Cores quota.",
            want: "quota",
        },
    ];

    #[test]
    fn every_code_and_status_maps_to_its_kind() {
        check_rows(&TABLE, Some(&offering()), ROWS);
    }

    #[test]
    fn capacity_names_the_offering_and_says_the_code() {
        for code in ["SkuNotAvailable", "AllocationFailed"] {
            assert_eq!(
                map(code),
                CloudError::InsufficientCapacity {
                    instance_type: "Standard_NC24ads_A100_v4".into(),
                    zone: "eastus-1".into(),
                    capacity_type: CapacityType::Spot,
                    message: format!("{code}: words"),
                }
            );
        }
    }

    #[test]
    fn capacity_without_an_offering_is_transient() {
        assert!(matches!(
            TABLE.map_code(Some("AllocationFailed"), "x", None, None, None),
            CloudError::Transient { .. }
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
    fn a_4xx_without_a_code_says_its_status() {
        let e = ApiError {
            kind: ApiErrorKind::Service,
            code: None,
            message: "no".into(),
            status: Some(403),
            retry_after: None,
        };
        assert_eq!(
            map_api_error(&e, None),
            CloudError::InvalidRequest {
                message: "HTTP 403: no".into()
            }
        );
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
