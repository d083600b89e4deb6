//! The crate's error type.

use thiserror::Error;

/// A Kubernetes quantity (`"100m"`, `"4Gi"`) that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid quantity {input:?}: {reason}")]
pub struct QuantityError {
    /// The text that was parsed.
    pub input: String,
    /// Why it was rejected.
    pub reason: String,
}

impl QuantityError {
    pub(crate) fn new(input: &str, reason: impl Into<String>) -> Self {
        Self {
            input: input.to_owned(),
            reason: reason.into(),
        }
    }
}

/// A Go-style duration (`"30s"`, `"1h30m"`) that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct DurationError {
    /// The text that was parsed.
    pub input: String,
    /// Why it was rejected.
    pub reason: String,
}

impl DurationError {
    pub(crate) fn new(input: &str, reason: impl Into<String>) -> Self {
        Self {
            input: input.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Every error this crate returns.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyError {
    /// A node selector operator that is not one of the supported ones.
    #[error(
        "unknown operator {operator:?}: expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte"
    )]
    UnknownOperator {
        /// The operator as written.
        operator: String,
    },
    /// A requirement whose values do not fit its operator.
    #[error("requirement on key {key:?}: {reason}")]
    InvalidRequirement {
        /// The label key of the requirement.
        key: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A quantity that could not be parsed.
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    /// A duration that could not be parsed.
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// A `spec.limits` entry that is not a valid limit.
    #[error("limit {resource:?}: {reason}")]
    InvalidLimit {
        /// The resource name (`cpu`, `maxHourlyCost`, ...).
        resource: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A disruption budget that is malformed.
    #[error("disruption budget: {reason}")]
    InvalidBudget {
        /// Why it was rejected.
        reason: String,
    },
    /// A cron schedule that could not be parsed.
    #[error("invalid cron schedule {schedule:?}: {reason}")]
    InvalidSchedule {
        /// The schedule as written.
        schedule: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A preference budget that is not a percentage.
    #[error("spec.preferenceBudget: {reason}")]
    InvalidPreferenceBudget {
        /// Why it was rejected.
        reason: String,
    },
    /// A CEL device selector that does not compile (the API server's words where it has them).
    #[error("{field}: Invalid value: {expression:?}: {message}")]
    InvalidSelector {
        /// Where it was written (`spec.devices.requests[0].exactly.selectors[0].cel.expression`).
        field: String,
        /// The expression.
        expression: String,
        /// Why it was rejected.
        message: String,
    },
    /// A device a ResourceSlice publishes that cannot be read.
    #[error("device {device:?}: {field}: {reason}")]
    InvalidDevice {
        /// The device's name.
        device: String,
        /// The field (`attributes[gpu.nvidia.com/productName]`).
        field: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A ResourceClaim (or template) that cannot be allocated as written.
    #[error("{field}: {reason}")]
    InvalidClaim {
        /// Where (`spec.devices.requests[0].exactly.deviceClassName`).
        field: String,
        /// Why it was rejected.
        reason: String,
    },
}
