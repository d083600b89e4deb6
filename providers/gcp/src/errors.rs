//! The GCP crate's errors. [`GcpError`]: what can go wrong before any Compute Engine call
//! (settings, NodeClass content). Compute call failures are [`CloudError`]s, mapped by
//! [`TABLE`] (the shared [`ErrorTable`]), so every code is tested without a network.
//!
//! Compute Engine reports errors two ways: an HTTP error whose `error.errors[].reason` is a
//! camel-case reason (`rateLimitExceeded`, `quotaExceeded`, `notFound`), and a finished zone
//! operation whose `error.errors[].code` is an upper-case code (`ZONE_RESOURCE_POOL_EXHAUSTED`,
//! `QUOTA_EXCEEDED`). Both come here.

use std::time::Duration;

use quartermaster_cloud::{CloudError, ErrorTable, KindWords, LaunchOffering, StatusRules};

use crate::port::{ApiError, Operation};

/// A setup or NodeClass problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GcpError {
    /// The settings cannot work (a bad endpoint URL, a client that cannot be built).
    #[error("GCP settings: {0}")]
    Settings(String),
    /// The GCPNodeClass asks for something this provider cannot do.
    #[error("GCPNodeClass: {0}")]
    NodeClass(String),
    /// No usable credentials (the reason, never the credentials).
    #[error("GCP credentials: {0}")]
    Credentials(String),
    /// The Cloud Billing Catalog answered something that is not a SKU list.
    #[error("Cloud Billing Catalog: {0}")]
    Prices(String),
    /// A Cloud Billing call failed (its words, with the URL called).
    #[error("{0}")]
    Billing(String),
}

impl From<GcpError> for CloudError {
    fn from(e: GcpError) -> Self {
        CloudError::InvalidRequest {
            message: e.to_string(),
        }
    }
}

/// How long a throttled caller waits when Compute Engine sends no `Retry-After`.
pub const DEFAULT_THROTTLE_RETRY: Duration = Duration::from_secs(5);

/// Compute Engine's reasons and codes. Without a code, 429 is throttling, 404 not found and
/// 400, 401, 403 and 409 invalid; messages stand as the service wrote them.
pub const TABLE: ErrorTable = ErrorTable {
    capacity: &[
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "RESOURCE_POOL_EXHAUSTED",
        "STOCKOUT",
        "resourcePoolExhausted",
    ],
    // A launch into a reservation without a free slot ("Reservation R does not have
    // sufficient capacity for the requested resources"), a zone without room ("Zone does not
    // currently have sufficient capacity for the requested resources"), whatever the code. The
    // cluster-autoscaler's GCE provider reads the same words.
    capacity_words: &["sufficient capacity for the requested resources"],
    quota: &["QUOTA_EXCEEDED", "quotaExceeded", "limitExceeded"],
    quota_when_words: &[],
    throttled: &[
        "rateLimitExceeded",
        "userRateLimitExceeded",
        "RATE_LIMIT_EXCEEDED",
        "RESOURCE_EXHAUSTED",
    ],
    not_found: &["notFound", "RESOURCE_NOT_FOUND", "NOT_FOUND"],
    invalid: &[
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
    ],
    invalid_prefixes: &[],
    statuses: StatusRules {
        throttled: &[429..=429],
        throttled_with_code: true,
        not_found: &[404..=404],
        invalid: &[400..=401, 403..=403, 409..=409],
        with_code: false,
        invalid_says_status: false,
    },
    code_in_message: false,
    not_found_keeps_message: false,
    kind_words: KindWords {
        construction: "",
        credential: "credentials: ",
        timeout: "",
        dispatch: "",
    },
    default_retry: DEFAULT_THROTTLE_RETRY,
};

/// The [`CloudError`] of a failed call about `offering`, when it was about one.
pub fn map_api_error(e: &ApiError, offering: Option<&LaunchOffering>) -> CloudError {
    TABLE.map(e, offering)
}

/// The [`CloudError`] of a finished operation that carries errors, `None` when it succeeded.
/// With several errors, a capacity error wins (it is the one the engine can act on).
pub fn map_operation(op: &Operation, offering: Option<&LaunchOffering>) -> Option<CloudError> {
    let mapped: Vec<CloudError> = op
        .errors
        .iter()
        .map(|(code, message)| TABLE.map_code(Some(code), message, op.http_status, None, offering))
        .collect();
    mapped
        .iter()
        .find(|e| e.is_capacity())
        .or_else(|| mapped.first())
        .cloned()
}

#[cfg(test)]
mod tests {
    use quartermaster_cloud::api_error::{Row, check_rows};
    use quartermaster_pricing::CapacityType;

    use super::*;
    use crate::port::ApiErrorKind;

    fn offering() -> LaunchOffering {
        LaunchOffering {
            instance_type: "a2-highgpu-1g".into(),
            zone: "us-central1-a".into(),
            capacity_type: CapacityType::Spot,
            price_per_hour: 1.0,
        }
    }

    fn code(c: &str) -> CloudError {
        TABLE.map_code(Some(c), "words", None, None, Some(&offering()))
    }

    const fn row(code: Option<&'static str>, status: Option<u16>, want: &'static str) -> Row {
        Row {
            code,
            status,
            message: "words",
            want,
        }
    }

    /// Every code class, and the statuses read without a code, for a call about one offering.
    const ROWS: &[Row] = &[
        row(Some("ZONE_RESOURCE_POOL_EXHAUSTED"), None, "capacity"),
        row(
            Some("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"),
            None,
            "capacity",
        ),
        row(Some("QUOTA_EXCEEDED"), None, "quota"),
        row(Some("quotaExceeded"), None, "quota"),
        row(Some("rateLimitExceeded"), None, "throttled"),
        row(None, Some(429), "throttled"),
        row(Some("notFound"), None, "not_found"),
        row(None, Some(404), "not_found"),
        row(Some("invalid"), None, "invalid"),
        row(Some("INVALID_FIELD_VALUE"), None, "invalid"),
        row(None, Some(400), "invalid"),
        row(None, Some(500), "transient"),
        // A reservation without room is capacity whatever the code.
        Row {
            code: Some("SOME_NEW_CODE"),
            status: Some(400),
            message: "Reservation h100-block does not have sufficient capacity for the requested resources.",
            want: "capacity",
        },
    ];

    #[test]
    fn every_code_and_status_maps_to_its_kind() {
        check_rows(&TABLE, Some(&offering()), ROWS);
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
    fn capacity_without_an_offering_is_transient() {
        let e = TABLE.map_code(Some("ZONE_RESOURCE_POOL_EXHAUSTED"), "m", None, None, None);
        assert!(matches!(e, CloudError::Transient { .. }));
    }

    #[test]
    fn throttling_waits_the_servers_retry_after_or_the_default() {
        assert_eq!(
            code("rateLimitExceeded"),
            CloudError::Throttled {
                retry_after: Some(DEFAULT_THROTTLE_RETRY)
            }
        );
        let e = TABLE.map_code(
            None,
            "slow down",
            Some(429),
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
            kind: ApiErrorKind::Credential,
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
