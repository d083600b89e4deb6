//! Typed cloud errors: the engine branches on the variant, never on message text.

use std::time::Duration;

use quartermaster_pricing::CapacityType;

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
