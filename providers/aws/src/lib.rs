//! Quartermaster's AWS cloud: a [`quartermaster_cloud::CloudProvider`] over EC2.
//!
//! A launch looks for an instance already tagged with its NodeClaim (so a retried or
//! restarted launch never creates a second one), resolves the AWSNodeClass (subnets, security
//! groups, AMIs), ensures a launch template per NodeClass and AMI (AL2023 `nodeadm` user data
//! that joins the cluster, IMDSv2 required), then runs `CreateFleet type=instant` over the
//! claim's ordered offerings, one fleet per run of one capacity type, falling through to the
//! next run when a run has no capacity. Instances and errors of a fleet are read together.
//!
//! Live prices ([`prices`], [`live_prices`]): on-demand from the Pricing API, spot from the
//! spot price history. `doctor` checks a first install ([`doctor::checks`]).
//!
//! Interruption notices come from the EventBridge -> SQS queue when one is configured.
//!
//! SDK types stop in `sdk/`, `sdk_sqs.rs`, `sdk_ssm.rs`, `sdk_pricing.rs`, `doctor.rs` and `config.rs`: the provider talks to the [`port::Ec2`] trait.

mod cloud;
mod config;
pub mod doctor;
pub mod drift;
pub mod errors;
pub mod fleet;
pub mod instance_types;
pub mod interruption;
pub mod port;
pub mod prices;
mod rate;
pub mod resolve;
mod sdk;
mod sdk_pricing;
mod sdk_sqs;
mod sdk_ssm;
pub mod spot_advisor;
pub mod template;
pub mod userdata;

pub use cloud::{AwsCloud, TAG_NODECLAIM, TAG_NODEPOOL, instance_id, provider_id};
pub use config::{AwsSettings, CallLimits, CredentialSource};
pub use errors::AwsError;
pub use rate::RateLimitSettings;
pub use sdk_pricing::{SdkPrices, catalog_types, live_prices};
pub use template::TAG_CLUSTER;
pub use userdata::ClusterInfo;
