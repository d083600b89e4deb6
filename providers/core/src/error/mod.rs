//! Typed cloud errors: the engine branches on the variant, never on message text.

use std::time::Duration;

use quartermaster_pricing::CapacityType;

use crate::LaunchOffering;

pub mod api;

/// Why a cloud call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CloudError {
    /// The offering has no capacity now (AWS InsufficientInstanceCapacity, GCP
    /// ZONE_RESOURCE_POOL_EXHAUSTED, Azure AllocationFailed / SkuNotAvailable…). The engine
    /// marks the offering unavailable for a while and tries the next one.
    #[error("insufficient capacity for {instance_type} ({capacity_type}) in {zone}: {message}")]
    InsufficientCapacity {
        /// Instance type.
        instance_type: String,
        /// Zone.
        zone: String,
        /// Capacity type.
        capacity_type: CapacityType,
        /// The cloud's words.
        message: String,
    },
    /// An account quota or limit (vCPU limit, GPU quota) stops the launch.
    #[error("quota exceeded: {message}")]
    QuotaExceeded {
        /// The cloud's words.
        message: String,
    },
    /// The API throttled the call; retry after the given delay.
    #[error("throttled by the cloud API{}", retry_after.map(|d| format!(" (retry after {}s)", d.as_secs())).unwrap_or_default())]
    Throttled {
        /// How long to wait, when the cloud says.
        retry_after: Option<Duration>,
    },
    /// No such instance (already terminated, or never launched).
    #[error("instance {provider_id} not found")]
    NotFound {
        /// The provider id asked for.
        provider_id: String,
    },
    /// The request can never succeed as it is (bad NodeClass, unknown instance type).
    #[error("invalid launch request: {message}")]
    InvalidRequest {
        /// What is wrong.
        message: String,
    },
    /// Any other failure; retried with backoff.
    #[error("cloud API error: {message}")]
    Transient {
        /// The cloud's words.
        message: String,
    },
}

impl CloudError {
    /// Whether retrying the same call later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Throttled { .. } | Self::Transient { .. })
    }

    /// Whether the offering itself is out of capacity (fall back to another offering).
    pub fn is_capacity(&self) -> bool {
        matches!(self, Self::InsufficientCapacity { .. })
    }

    /// The same error, a not-found naming `provider_id` (the instance the caller asked for,
    /// whatever the cloud's words named).
    pub fn not_found_as(self, provider_id: &str) -> CloudError {
        match self {
            Self::NotFound { .. } => Self::NotFound {
                provider_id: provider_id.to_owned(),
            },
            other => other,
        }
    }

    /// The same error with every one of `secrets` scrubbed from its message: a cloud that
    /// rejects a launch may quote the request (user data, metadata) in its words, and those
    /// words become a log line, an Event and a NodeClaim condition.
    pub fn scrubbed(self, secrets: &crate::Secrets) -> CloudError {
        if secrets.is_empty() {
            return self;
        }
        match self {
            Self::InsufficientCapacity {
                instance_type,
                zone,
                capacity_type,
                message,
            } => Self::InsufficientCapacity {
                instance_type,
                zone,
                capacity_type,
                message: secrets.scrub(&message),
            },
            Self::QuotaExceeded { message } => Self::QuotaExceeded {
                message: secrets.scrub(&message),
            },
            Self::InvalidRequest { message } => Self::InvalidRequest {
                message: secrets.scrub(&message),
            },
            Self::Transient { message } => Self::Transient {
                message: secrets.scrub(&message),
            },
            other @ (Self::Throttled { .. } | Self::NotFound { .. }) => other,
        }
    }
}

/// The error of a launch when every offering failed: capacity naming the last offering (so the
/// engine knows every offering of the request was tried), or quota when only quotas stopped
/// it; a launch without offerings is an invalid request. `failures` are the offerings' errors
/// in the order they came, joined into the message.
pub fn exhausted(offerings: &[LaunchOffering], failures: &[CloudError]) -> CloudError {
    let words: Vec<String> = failures.iter().map(ToString::to_string).collect();
    let message = if words.is_empty() {
        "no offering could be tried".to_owned()
    } else {
        words.join("; ")
    };
    if !failures.is_empty()
        && failures
            .iter()
            .all(|e| matches!(e, CloudError::QuotaExceeded { .. }))
    {
        return CloudError::QuotaExceeded { message };
    }
    match offerings.last() {
        Some(last) => CloudError::InsufficientCapacity {
            instance_type: last.instance_type.clone(),
            zone: last.zone.clone(),
            capacity_type: last.capacity_type,
            message,
        },
        None => CloudError::InvalidRequest { message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(t: &str) -> LaunchOffering {
        LaunchOffering {
            instance_type: t.into(),
            zone: "zone-a".into(),
            capacity_type: CapacityType::Spot,
            price_per_hour: 1.0,
        }
    }

    #[test]
    fn not_found_as_names_the_instance_asked_for_and_leaves_other_errors() {
        let gone = CloudError::NotFound {
            provider_id: "InvalidInstanceID.NotFound: words".into(),
        };
        assert_eq!(
            gone.not_found_as("aws:///z/i-1"),
            CloudError::NotFound {
                provider_id: "aws:///z/i-1".into()
            }
        );
        let quota = CloudError::QuotaExceeded {
            message: "q".into(),
        };
        assert_eq!(quota.clone().not_found_as("aws:///z/i-1"), quota);
    }

    #[test]
    fn exhausted_is_quota_when_only_quotas_stopped_it_else_capacity_of_the_last_offering() {
        let quota = CloudError::QuotaExceeded {
            message: "VcpuLimitExceeded".into(),
        };
        let capacity = CloudError::InsufficientCapacity {
            instance_type: "a".into(),
            zone: "zone-a".into(),
            capacity_type: CapacityType::Spot,
            message: "none".into(),
        };
        let offerings = [o("a"), o("b")];
        let cases: &[(&[CloudError], &str)] = &[
            (std::slice::from_ref(&quota), "quota"),
            (&[quota.clone(), quota.clone()], "quota"),
            (&[capacity.clone(), quota.clone()], "capacity b"),
            (&[], "capacity b"),
        ];
        for (failures, want) in cases {
            let got = match exhausted(&offerings, failures) {
                CloudError::QuotaExceeded { .. } => "quota".to_owned(),
                CloudError::InsufficientCapacity { instance_type, .. } => {
                    format!("capacity {instance_type}")
                }
                other => format!("{other:?}"),
            };
            assert_eq!(got, *want, "{failures:?}");
        }
        assert_eq!(
            exhausted(&offerings, &[capacity.clone(), quota])
                .to_string()
                .matches("; ")
                .count(),
            1
        );
        assert!(matches!(
            exhausted(&[], &[capacity]),
            CloudError::InvalidRequest { .. }
        ));
    }
}
