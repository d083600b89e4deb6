//! The crate's one error type.

use thiserror::Error;

/// Why a set of objects could not be turned into a snapshot. Every variant names the object
/// (`Kind/namespace/name`, or `Kind/name` for cluster-scoped kinds) and, where there is one, the
/// field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClusterError {
    /// An object without a usable `kind` or `metadata.name`.
    #[error("object {index}: {reason}")]
    Unidentified {
        /// Position of the object in the input (1-based).
        index: usize,
        /// What is missing.
        reason: String,
    },
    /// A field that is malformed or out of range.
    #[error("{object}: {field}: {reason}")]
    Invalid {
        /// `Kind/namespace/name` or `Kind/name`.
        object: String,
        /// Field path, e.g. `spec.template.spec.containers[0].resources.requests.cpu`.
        field: String,
        /// Why it was rejected.
        reason: String,
    },
    /// More distinct resource names than the solver's resource vectors hold.
    #[error(
        "{object}: {field}: resource {resource:?} does not fit: a snapshot holds at most {max} distinct resources"
    )]
    TooManyResources {
        /// The object that requests it.
        object: String,
        /// Field path of the request.
        field: String,
        /// The resource name that found no slot.
        resource: String,
        /// The capacity of the resource table.
        max: usize,
    },
}

impl ClusterError {
    /// An [`ClusterError::Invalid`] from its parts.
    pub(crate) fn invalid(
        object: &str,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self::Invalid {
            object: object.to_owned(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}
