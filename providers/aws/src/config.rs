//! Building the SDK client: region and endpoint from settings or the SDK's standard chain
//! (`AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_EC2`), credentials only from the
//! default chain (IRSA / EKS Pod Identity, environment, profile, IMDS), explicit retries and
//! timeouts so a dead endpoint fails in seconds.

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_ec2::config::{Credentials, Region};
use aws_smithy_http_client::tls;

use crate::rate::RateLimitSettings;
use crate::userdata::ClusterInfo;

/// Where credentials come from.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum CredentialSource {
    /// The SDK's default chain. The controller always uses this.
    #[default]
    DefaultChain,
    /// Fixed keys, for emulators (moto) in tests only; never read from values files.
    Static {
        /// Access key id.
        access_key_id: String,
        /// Secret access key.
        secret_access_key: String,
    },
}

impl std::fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::DefaultChain => f.write_str("DefaultChain"),
            // Never print a credential, not even in debug output.
            Self::Static { .. } => f.write_str("Static(..)"),
        }
    }
}

/// How long calls may take, and how often a failed Describe or Terminate is retried by the
/// SDK (CreateFleet is never retried by the SDK: the engine decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// TCP/TLS connect timeout.
    pub connect_timeout: Duration,
    /// One attempt, from sending to the whole response read.
    pub attempt_timeout: Duration,
    /// All attempts together.
    pub operation_timeout: Duration,
    /// Attempts per call (1 = no retry).
    pub max_attempts: u32,
    /// First retry delay (the SDK adds jitter and doubles it).
    pub initial_backoff: Duration,
    /// Longest retry delay.
    pub max_backoff: Duration,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(3),
            attempt_timeout: Duration::from_secs(20),
            operation_timeout: Duration::from_secs(45),
            max_attempts: 3,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// Everything the AWS provider is configured with.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AwsSettings {
    /// The cluster nodes join (name, endpoint, CA, service CIDR).
    pub cluster: ClusterInfo,
    /// The region; `None`: the SDK's chain (`AWS_REGION`, profile, IMDS).
    pub region: Option<String>,
    /// The EC2 endpoint; `None`: the SDK's (`AWS_ENDPOINT_URL_EC2`, `AWS_ENDPOINT_URL`, AWS).
    pub endpoint_url: Option<String>,
    /// Credentials.
    pub credentials: CredentialSource,
    /// Client-side rate limits.
    pub rate_limits: RateLimitSettings,
    /// Timeouts and retries.
    pub call_limits: CallLimits,
    /// The SQS queue EventBridge sends EC2's interruption notices to (Karpenter's
    /// `INTERRUPTION_QUEUE`); `None`: no interruption events.
    pub interruption_queue: Option<String>,
    /// The cluster's Kubernetes version (`1.33`), for `al2023@…` AMI aliases.
    pub kubernetes_version: Option<String>,
}

/// The SDK configuration for `settings` (shared by the EC2 and SQS clients).
pub(crate) async fn sdk_config(settings: &AwsSettings) -> aws_config::SdkConfig {
    let limits = settings.call_limits;
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(limits.max_attempts.max(1))
                .with_initial_backoff(limits.initial_backoff)
                .with_max_backoff(limits.max_backoff),
        )
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(limits.connect_timeout)
                .operation_attempt_timeout(limits.attempt_timeout)
                .operation_timeout(limits.operation_timeout)
                .build(),
        );
    if let Some(region) = &settings.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(url) = &settings.endpoint_url {
        loader = loader.endpoint_url(url.clone());
    }
    if let CredentialSource::Static {
        access_key_id,
        secret_access_key,
    } = &settings.credentials
    {
        loader = loader.credentials_provider(Credentials::new(
            access_key_id.clone(),
            secret_access_key.clone(),
            None,
            None,
            "quartermaster-static",
        ));
    }
    loader.load().await
}

/// The region the SDK settled on (settings, environment, profile), if any.
pub(crate) fn config_region(config: &aws_config::SdkConfig) -> Option<String> {
    config.region().map(|r| r.to_string())
}
