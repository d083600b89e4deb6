//! Drift of a running instance from its AWSNodeClass, as Karpenter names it: the AMI the
//! `amiSelectorTerms` resolve to now is not the one it runs (`AMIDrift`: an alias or SSM
//! parameter moved to a newer image, an AMI was deprecated away), its security groups are not
//! the ones `securityGroupSelectorTerms` select (`SecurityGroupDrift`), or its subnet is no
//! longer among those `subnetSelectorTerms` select (`SubnetDrift`).
//!
//! [`compare`] decides from facts alone; [`resolve_wanted`] asks EC2 (and SSM) for what the
//! NodeClass selects now.

use std::collections::{BTreeMap, BTreeSet};

use quartermaster_policies::AWSNodeClassSpec;

use crate::port::{Ec2, Parameters};
use crate::resolve::{self, ResolveError};

/// Tag naming the AWSNodeClass an instance was launched from.
pub const TAG_NODECLASS: &str = "quartermaster.dev/nodeclass";

/// What an instance runs on, as EC2 describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceFacts {
    /// The AMI it was launched from.
    pub image_id: Option<String>,
    /// Its subnet.
    pub subnet_id: Option<String>,
    /// Its security groups (empty: unknown).
    pub security_group_ids: BTreeSet<String>,
}

/// What the NodeClass selects now, for the instance's kind of node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    /// The AMI for the instance's `ARCH/VARIANT` (`None`: the terms select none for it).
    pub image_id: Option<String>,
    /// Every subnet the terms select.
    pub subnet_ids: BTreeSet<String>,
    /// Every security group the terms select.
    pub security_group_ids: BTreeSet<String>,
}

/// Why an instance drifted (Karpenter's reasons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// It runs another AMI than the NodeClass resolves to now.
    Ami {
        /// What it runs.
        running: String,
        /// What the NodeClass resolves to (`None`: no AMI at all any more).
        wanted: Option<String>,
    },
    /// Its security groups are not the selected ones.
    SecurityGroup {
        /// What it has.
        running: BTreeSet<String>,
        /// What the NodeClass selects.
        wanted: BTreeSet<String>,
    },
    /// Its subnet is no longer selected.
    Subnet {
        /// Its subnet.
        running: String,
    },
}

impl Drift {
    /// Karpenter's name of the reason (`AMIDrift`, `SecurityGroupDrift`, `SubnetDrift`).
    pub const fn reason(&self) -> &'static str {
        match self {
            Self::Ami { .. } => "AMIDrift",
            Self::SecurityGroup { .. } => "SecurityGroupDrift",
            Self::Subnet { .. } => "SubnetDrift",
        }
    }
}

fn join(ids: &BTreeSet<String>) -> String {
    if ids.is_empty() {
        "none".to_owned()
    } else {
        ids.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ami { running, wanted } => write!(
                f,
                "AMIDrift: the instance runs {running}; amiSelectorTerms now select {}",
                wanted.as_deref().unwrap_or("no AMI for its kind of node")
            ),
            Self::SecurityGroup { running, wanted } => write!(
                f,
                "SecurityGroupDrift: the instance has security groups {}; securityGroupSelectorTerms now select {}",
                join(running),
                join(wanted)
            ),
            Self::Subnet { running } => write!(
                f,
                "SubnetDrift: the instance's subnet {running} is not selected by subnetSelectorTerms any more"
            ),
        }
    }
}

/// The first drift of `instance` from `wanted`, AMI first. Facts EC2 did not report (no image
/// id, no subnet, no security groups) never count as drift.
pub fn compare(instance: &InstanceFacts, wanted: &Wanted) -> Option<Drift> {
    if let Some(running) = &instance.image_id
        && wanted.image_id.as_ref() != Some(running)
    {
        return Some(Drift::Ami {
            running: running.clone(),
            wanted: wanted.image_id.clone(),
        });
    }
    if !instance.security_group_ids.is_empty()
        && instance.security_group_ids != wanted.security_group_ids
    {
        return Some(Drift::SecurityGroup {
            running: instance.security_group_ids.clone(),
            wanted: wanted.security_group_ids.clone(),
        });
    }
    if let Some(running) = &instance.subnet_id
        && !wanted.subnet_ids.contains(running)
    {
        return Some(Drift::Subnet {
            running: running.clone(),
        });
    }
    None
}

/// What `spec` selects now for an instance whose kind of node is `image_key` (`ARCH/VARIANT`).
pub async fn resolve_wanted(
    ec2: &dyn Ec2,
    parameters: &dyn Parameters,
    spec: &AWSNodeClassSpec,
    image_key: &str,
    kubernetes_version: Option<&str>,
) -> Result<Wanted, ResolveError> {
    let subnet_ids = resolve::subnets(ec2, &spec.subnet_selector_terms)
        .await?
        .into_iter()
        .map(|s| s.id)
        .collect();
    let security_group_ids = resolve::security_groups(ec2, &spec.security_group_selector_terms)
        .await?
        .into_iter()
        .map(|g| g.id)
        .collect();
    let needed = BTreeSet::from([image_key.to_owned()]);
    let images: BTreeMap<String, crate::port::Image> =
        resolve::amis(ec2, parameters, spec, &needed, kubernetes_version).await?;
    Ok(Wanted {
        image_id: images.get(image_key).map(|i| i.id.clone()),
        subnet_ids,
        security_group_ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    fn facts() -> InstanceFacts {
        InstanceFacts {
            image_id: Some("ami-1".into()),
            subnet_id: Some("subnet-a".into()),
            security_group_ids: set(&["sg-1"]),
        }
    }

    fn wanted() -> Wanted {
        Wanted {
            image_id: Some("ami-1".into()),
            subnet_ids: set(&["subnet-a", "subnet-b"]),
            security_group_ids: set(&["sg-1"]),
        }
    }

    #[test]
    fn an_instance_on_what_the_node_class_selects_has_not_drifted() {
        assert_eq!(compare(&facts(), &wanted()), None);
        // What EC2 did not report is not drift.
        assert_eq!(compare(&InstanceFacts::default(), &wanted()), None);
    }

    #[test]
    fn a_moved_ami_a_changed_security_group_and_a_dropped_subnet_are_drift() {
        let moved = Wanted {
            image_id: Some("ami-2".into()),
            ..wanted()
        };
        let d = compare(&facts(), &moved).expect("drifted");
        assert_eq!(d.reason(), "AMIDrift");
        assert!(d.to_string().contains("ami-1") && d.to_string().contains("ami-2"));

        let groups = Wanted {
            security_group_ids: set(&["sg-1", "sg-2"]),
            ..wanted()
        };
        assert_eq!(
            compare(&facts(), &groups).map(|d| d.reason()),
            Some("SecurityGroupDrift")
        );

        let subnets = Wanted {
            subnet_ids: set(&["subnet-b"]),
            ..wanted()
        };
        let d = compare(&facts(), &subnets).expect("drifted");
        assert_eq!(d.reason(), "SubnetDrift");
        assert!(d.to_string().contains("subnet-a"));

        let none = Wanted {
            image_id: None,
            ..wanted()
        };
        assert_eq!(
            compare(&facts(), &none).map(|d| d.reason()),
            Some("AMIDrift")
        );
    }
}
