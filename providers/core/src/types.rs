//! Values that cross the cloud seam.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quartermaster_policies::{AWSNodeClassSpec, AzureNodeClassSpec, GCPNodeClassSpec};
use quartermaster_pricing::CapacityType;

/// Everything a provider needs to launch one node for a NodeClaim.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchRequest {
    /// NodeClaim name; also the idempotency token (AWS ClientToken, GCP requestId).
    pub claim_name: String,
    /// NodePool that owns the claim.
    pub node_pool: String,
    /// NodeClass name (`nodeClassRef.name`), resolved by the provider.
    pub node_class: String,
    /// Instance type to launch.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
    /// The price the plan assumed, dollars per hour.
    pub price_per_hour: f64,
    /// Labels the node must carry.
    pub labels: BTreeMap<String, String>,
    /// Tags for the cloud resource (owner, cluster, pool, claim).
    pub tags: BTreeMap<String, String>,
    /// The offerings to try after the primary one, in order, within the same launch. A
    /// provider that can try several offerings in one call (AWS `CreateFleet`) tries them when
    /// the primary has no capacity, and its [`CloudError::InsufficientCapacity`] then names the
    /// last offering it tried: every offering up to that one failed. Providers that launch one
    /// offering at a time ignore them (the engine falls back).
    ///
    /// [`CloudError::InsufficientCapacity`]: crate::CloudError::InsufficientCapacity
    pub fallbacks: Vec<LaunchOffering>,
    /// The NodeClass `node_class` names, resolved by the driver (`None` when the driver has no
    /// NodeClass objects: simulations, kwok).
    pub node_class_spec: Option<NodeClassSpec>,
}

impl LaunchRequest {
    /// The primary offering.
    pub fn primary(&self) -> LaunchOffering {
        LaunchOffering {
            instance_type: self.instance_type.clone(),
            zone: self.zone.clone(),
            capacity_type: self.capacity_type,
            price_per_hour: self.price_per_hour,
        }
    }

    /// The primary offering, then the fallbacks, in the order they are tried.
    pub fn offerings(&self) -> Vec<LaunchOffering> {
        std::iter::once(self.primary())
            .chain(self.fallbacks.iter().cloned())
            .collect()
    }
}

/// One (instance type, zone, capacity type) a launch may use, with the price the plan assumed.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchOffering {
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
    /// Dollars per hour.
    pub price_per_hour: f64,
}

impl LaunchOffering {
    /// Whether `instance` runs on this offering.
    pub fn matches(&self, instance: &Instance) -> bool {
        self.instance_type == instance.instance_type
            && self.zone == instance.zone
            && self.capacity_type == instance.capacity_type
    }
}

/// A NodeClass's spec, by kind.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeClassSpec {
    /// `AWSNodeClass` (or a converted Karpenter `EC2NodeClass`).
    Aws(Box<AWSNodeClassSpec>),
    /// `GCPNodeClass`.
    Gcp(Box<GCPNodeClassSpec>),
    /// `AzureNodeClass`.
    Azure(Box<AzureNodeClassSpec>),
}

/// Where an instance is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InstanceState {
    /// Requested, not yet running.
    Pending,
    /// Running.
    Running,
    /// Being terminated.
    ShuttingDown,
    /// Gone.
    Terminated,
}

/// An instance as the cloud reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// `aws:///us-east-1a/i-0abc…`, `gce://project/zone/name`, `azure:///subscriptions/…`, `sim:///zone/id`.
    pub provider_id: String,
    /// The NodeClaim it was launched for.
    pub claim_name: String,
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
    /// Dollars per hour it is billed at.
    pub price_per_hour: f64,
    /// State.
    pub state: InstanceState,
    /// When the cloud accepted the launch.
    pub launched_at: DateTime<Utc>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

/// Something the cloud announces on its own.
#[derive(Debug, Clone, PartialEq)]
pub enum CloudEvent {
    /// A spot / preemptible instance will be reclaimed (AWS: 2 min notice, GCP and Azure: 30 s).
    Interruption {
        /// The instance.
        provider_id: String,
        /// When it will be gone.
        terminates_at: DateTime<Utc>,
    },
    /// An instance is gone (reclaimed, or deleted outside Quartermaster).
    Terminated {
        /// The instance.
        provider_id: String,
    },
}
