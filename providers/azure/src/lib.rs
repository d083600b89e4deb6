//! Quartermaster's Azure cloud: a [`quartermaster_cloud::CloudProvider`] over Azure Resource
//! Manager compute, through `azure_mgmt_compute` (API 2024-07-01) and `azure_identity`.
//!
//! A launch looks for a VM already tagged with its NodeClaim (so a retried or restarted launch
//! never creates a second one), then PUTs one VM per offering in the claim's order under a name
//! derived from the claim and the offering's position, follows the operation itself (the SDK's
//! long-running-operation future re-sends the PUT), and falls through to the next offering when
//! the finished operation reports no capacity (`AllocationFailed`, `SkuNotAvailable` …) or a
//! quota. Spot VMs are `priority=Spot`, `evictionPolicy=Delete`, `maxPrice=-1`. The custom data
//! that joins the VM to the cluster comes from the Secret the AzureNodeClass names, read through
//! [`BootstrapData`] (the controller's Kubernetes client; this crate stays kube-free).
//!
//! Reserved capacity is Azure's capacity reservation groups: `reservations` lists the
//! subscription's groups and each group's capacity reservations (one per VM size and zone),
//! with their use from the group's instance view; a reserved launch creates its VM in the group
//! of the reservation its NodeClaim names, and VMs in a group report capacity type reserved.
//! `reboot` is `virtualMachines/restart`, its operation followed like a create's.
//!
//! Prices come from the Retail Prices API ([`prices`]). SDK types stop in `sdk/`: the
//! provider talks to the [`port::Arm`] trait, so the official `azure_resourcemanager_compute`
//! can replace the frozen `azure_mgmt_compute` there alone.

mod cloud;
mod config;
mod credentials;
pub mod doctor;
pub mod errors;
pub mod names;
pub mod port;
pub mod prices;
mod rate;
mod sdk;

pub use cloud::{
    AzureCloud, BootstrapData, TAG_CLUSTER, TAG_IMAGE, TAG_NODECLAIM, TAG_NODECLASS, TAG_NODEPOOL,
};
pub use config::{AzureSettings, CallLimits, CredentialSource, DEFAULT_ENDPOINT};
pub use credentials::{Identity, credential_source, identity, probe_token, process_identity};
pub use errors::AzureError;
pub use rate::RateLimitSettings;
pub use sdk::{operation_of, sku_of, vm_body, vm_of};
