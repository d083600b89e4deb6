//! What the Azure provider is configured with: the subscription and resource group, the ARM
//! endpoint (public Azure unless overridden: `--azure-endpoint` / `AZURE_ENDPOINT`), credentials
//! only from azure_identity's default chain (workload identity, environment, managed identity),
//! and short timeouts so a dead endpoint fails in seconds.

use std::time::Duration;

use crate::rate::RateLimitSettings;

/// Public Azure's Resource Manager.
pub const DEFAULT_ENDPOINT: &str = "https://management.azure.com";

/// Where credentials come from.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum CredentialSource {
    /// azure_identity's default chain. The controller always uses this.
    #[default]
    DefaultChain,
    /// A fixed bearer token, for local test servers only; never read from values files.
    StaticToken(String),
}

impl std::fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::DefaultChain => f.write_str("DefaultChain"),
            // Never print a credential, not even in debug output.
            Self::StaticToken(_) => f.write_str("StaticToken(..)"),
        }
    }
}

/// Timeouts and operation polling. No call is retried by the SDK: the engine decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// TCP/TLS connect timeout.
    pub connect_timeout: Duration,
    /// One request, from sending to the whole response read.
    pub request_timeout: Duration,
    /// How often a VM create operation is polled when ARM sends no `Retry-After`.
    pub poll_interval: Duration,
    /// Longest wait for a VM create operation, after which the launch fails as transient (the
    /// VM is found by name on the next attempt).
    pub operation_timeout: Duration,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(30),
            poll_interval: Duration::from_secs(5),
            operation_timeout: Duration::from_secs(600),
        }
    }
}

/// Everything the Azure provider is configured with.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AzureSettings {
    /// The cluster's name (the `quartermaster.dev/cluster` tag).
    pub cluster_name: String,
    /// The subscription VMs are created in.
    pub subscription_id: String,
    /// The resource group VMs are created in (AKS: the node resource group, `MC_…`).
    pub resource_group: String,
    /// The location (`eastus`); `None`: each NodeClass's.
    pub location: Option<String>,
    /// The Resource Manager endpoint; `None`: [`DEFAULT_ENDPOINT`].
    pub endpoint: Option<String>,
    /// Credentials.
    pub credentials: CredentialSource,
    /// Client-side rate limits.
    pub rate_limits: RateLimitSettings,
    /// Timeouts and polling.
    pub call_limits: CallLimits,
}

impl AzureSettings {
    /// The Resource Manager endpoint in use.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_deref().unwrap_or(DEFAULT_ENDPOINT)
    }
}
