//! Cloud-specific NodeClasses: how to launch a node on AWS, GCP or Azure.

pub mod aws;
pub mod azure;
pub mod gcp;

pub use aws::{AWSNodeClass, AWSNodeClassSpec, AWSNodeClassStatus};
pub use azure::{AzureNodeClass, AzureNodeClassSpec, AzureNodeClassStatus};
pub use gcp::{GCPNodeClass, GCPNodeClassSpec, GCPNodeClassStatus};

/// Kind of [`AWSNodeClass`].
pub const KIND_AWS: &str = "AWSNodeClass";
/// Kind of [`GCPNodeClass`].
pub const KIND_GCP: &str = "GCPNodeClass";
/// Kind of [`AzureNodeClass`].
pub const KIND_AZURE: &str = "AzureNodeClass";
/// The NodeClass kinds a `nodeClassRef` in group `quartermaster.dev` may name.
pub const NODE_CLASS_KINDS: [&str; 3] = [KIND_AWS, KIND_GCP, KIND_AZURE];
