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
    /// The secrets of its NodeClass (user data, metadata values), for scrubbing errors that
    /// may quote the request; none without a NodeClass spec.
    pub fn secrets(&self) -> crate::Secrets {
        self.node_class_spec
            .as_ref()
            .map(NodeClassSpec::secrets)
            .unwrap_or_default()
    }

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

/// A NodeClass's spec, by kind. Its `Debug` shows `userData` and GCP metadata values as
/// `<redacted>` (see [`NodeClassSpec::secrets`]), so a launch request printed for debugging
/// carries no bootstrap secret.
#[derive(Clone, PartialEq)]
pub enum NodeClassSpec {
    /// `AWSNodeClass` (or a converted Karpenter `EC2NodeClass`).
    Aws(Box<AWSNodeClassSpec>),
    /// `GCPNodeClass`.
    Gcp(Box<GCPNodeClassSpec>),
    /// `AzureNodeClass`.
    Azure(Box<AzureNodeClassSpec>),
}

impl std::fmt::Debug for NodeClassSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = || Some(crate::REDACTED.to_owned());
        match self {
            Self::Aws(spec) => {
                let mut spec = spec.as_ref().clone();
                if spec.user_data.is_some() {
                    spec.user_data = redacted();
                }
                f.debug_tuple("Aws").field(&spec).finish()
            }
            Self::Gcp(spec) => {
                let mut spec = spec.as_ref().clone();
                for value in spec.metadata.values_mut() {
                    *value = crate::REDACTED.to_owned();
                }
                f.debug_tuple("Gcp").field(&spec).finish()
            }
            Self::Azure(spec) => f.debug_tuple("Azure").field(spec).finish(),
        }
    }
}

impl NodeClassSpec {
    /// The values of this NodeClass that may hold secrets and must never be printed: AWS
    /// `userData` (bootstrap scripts, tokens), GCP `metadata` values (`kube-env` holds the
    /// kubelet's bootstrap credentials, `startup-script`). Azure's bootstrap custom data lives
    /// in a Secret, not in the spec; the Azure provider adds it where it reads it.
    pub fn secrets(&self) -> crate::Secrets {
        let mut secrets = crate::Secrets::new();
        match self {
            Self::Aws(spec) => {
                if let Some(user_data) = &spec.user_data {
                    secrets.add(user_data);
                }
            }
            Self::Gcp(spec) => {
                for value in spec.metadata.values() {
                    secrets.add(value);
                }
            }
            Self::Azure(_) => {}
        }
        secrets
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CloudError;

    const CANARY: &str = "CANARY-SECRET-1b2c3d4e";

    fn aws() -> NodeClassSpec {
        NodeClassSpec::Aws(Box::new(
            serde_json::from_value(serde_json::json!({
                "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
                "userData": format!("#!/bin/bash\nexport TOKEN={CANARY}\n"),
            }))
            .expect("an AWSNodeClass spec"),
        ))
    }

    fn gcp() -> NodeClassSpec {
        NodeClassSpec::Gcp(Box::new(
            serde_json::from_value(serde_json::json!({
                "project": "p", "region": "us-central1", "zones": ["us-central1-a"],
                "metadata": {"kube-env": format!("TOKEN: {CANARY}")},
            }))
            .expect("a GCPNodeClass spec"),
        ))
    }

    #[test]
    fn node_class_debug_never_shows_user_data_or_metadata_values() {
        for spec in [aws(), gcp()] {
            let printed = format!("{spec:?}");
            assert!(!printed.contains(CANARY), "{printed}");
            assert!(printed.contains(crate::REDACTED), "{printed}");
            let request = LaunchRequest {
                claim_name: "c".into(),
                node_pool: "p".into(),
                node_class: "n".into(),
                instance_type: "t".into(),
                zone: "z".into(),
                capacity_type: CapacityType::Spot,
                price_per_hour: 1.0,
                labels: BTreeMap::new(),
                tags: BTreeMap::new(),
                fallbacks: Vec::new(),
                node_class_spec: Some(spec.clone()),
            };
            assert!(!format!("{request:?}").contains(CANARY));
            assert!(!format!("{request:#?}").contains(CANARY));
        }
    }

    #[test]
    fn a_launch_error_that_echoes_the_node_class_is_scrubbed() {
        for spec in [aws(), gcp()] {
            let secrets = spec.secrets();
            let errors = [
                CloudError::InvalidRequest {
                    message: format!("Invalid value for field 'metadata': 'TOKEN: {CANARY}'"),
                },
                CloudError::Transient {
                    message: format!("user data export TOKEN={CANARY} rejected"),
                },
                CloudError::QuotaExceeded {
                    message: format!("quota; request was TOKEN: {CANARY}"),
                },
                CloudError::InsufficientCapacity {
                    instance_type: "t".into(),
                    zone: "z".into(),
                    capacity_type: CapacityType::Spot,
                    message: format!("none for export TOKEN={CANARY}"),
                },
            ];
            for e in errors {
                let scrubbed = e.scrubbed(&secrets);
                assert!(!scrubbed.to_string().contains(CANARY), "{scrubbed}");
                assert!(!format!("{scrubbed:?}").contains(CANARY), "{scrubbed:?}");
            }
        }
        let gone = CloudError::NotFound {
            provider_id: "aws:///z/i-1".into(),
        };
        assert_eq!(gone.clone().scrubbed(&aws().secrets()), gone);
    }
}
