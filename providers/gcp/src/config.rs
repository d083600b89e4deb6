//! How the GCP cloud is configured: endpoint, project, credentials, timeouts, rate limits.

use std::time::Duration;

use crate::rate::RateLimitSettings;

/// How long and how often a launch polls its zone operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationWait {
    /// Pause between polls.
    pub poll_interval: Duration,
    /// Polls before the launch gives up on the operation (it is then transient; the retried
    /// launch finds the instance by its label if the insert went through).
    pub max_polls: u32,
}

impl Default for OperationWait {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(2),
            max_polls: 90,
        }
    }
}

/// Settings of [`crate::GcpCloud::connect`].
#[derive(Debug, Clone, PartialEq)]
pub struct GcpSettings {
    /// The cluster's name (label `quartermaster-cluster`).
    pub cluster: String,
    /// The Compute Engine endpoint (`https://compute.googleapis.com` when `None`): an emulator
    /// or a private endpoint.
    pub endpoint: Option<String>,
    /// The project listed for garbage collection and used when a NodeClass gives none.
    pub project: Option<String>,
    /// Anonymous credentials (local endpoints); otherwise Application Default Credentials
    /// (GKE Workload Identity, `GOOGLE_APPLICATION_CREDENTIALS`).
    pub anonymous: bool,
    /// The SDK's own retries: off by default, the engine retries with its backoff.
    pub sdk_retries: bool,
    /// Timeout of one HTTP attempt.
    pub attempt_timeout: Duration,
    /// A GKE node pool's instance template (`projects/P/global/instanceTemplates/T`) to
    /// start instances from: it carries the boot image and the metadata that joins the cluster.
    pub source_instance_template: Option<String>,
    /// Zone operation polling.
    pub operation_wait: OperationWait,
    /// Client-side rate limits.
    pub rate_limits: RateLimitSettings,
}

impl GcpSettings {
    /// Settings for `cluster` with defaults: the public endpoint, default credentials, no SDK
    /// retries, 20 s attempts.
    pub fn new(cluster: impl Into<String>) -> Self {
        Self {
            cluster: cluster.into(),
            endpoint: None,
            project: None,
            anonymous: false,
            sdk_retries: false,
            attempt_timeout: Duration::from_secs(20),
            source_instance_template: None,
            operation_wait: OperationWait::default(),
            rate_limits: RateLimitSettings::default(),
        }
    }
}
