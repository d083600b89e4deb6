//! The controller's one error type.

/// Why a controller step failed. Transient API failures are retried with backoff by the caller;
/// nothing here is ever a reason to panic.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The Kubernetes API failed (network, 429, 5xx, conflict…).
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The client could not be configured (kubeconfig, in-cluster config).
    #[error("kubernetes client configuration: {0}")]
    ClientConfig(String),
    /// A flag or setting is invalid.
    #[error("invalid setting {name}: {reason}")]
    Setting {
        /// The flag.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// An object in the cluster cannot be used as it is.
    #[error("{object}: {reason}")]
    InvalidObject {
        /// `Kind/name`.
        object: String,
        /// What is wrong.
        reason: String,
    },
    /// The cloud provider failed.
    #[error("cloud provider: {0}")]
    Cloud(#[from] quartermaster_cloud::CloudError),
    /// This replica lost (or never held) the leader lease: it must not write.
    #[error("not the leader")]
    NotLeader,
    /// Serving HTTP failed.
    #[error("http server: {0}")]
    Http(String),
}
