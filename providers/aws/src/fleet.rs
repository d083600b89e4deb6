//! CreateFleet requests from a launch's ordered offerings, and their responses read: pure
//! functions, tested without EC2.
//!
//! The offerings are cut into runs of one capacity type (a fleet buys one capacity type);
//! each run is one `CreateFleet type=instant` with one override per (instance type, subnet of
//! the zone), its priority the offering's rank. A run whose overrides all fail for capacity
//! falls through to the next run within the same launch.

use std::collections::BTreeMap;

use quartermaster_cloud::{CloudError, LaunchOffering};
use quartermaster_pricing::CapacityType;
use sha2::{Digest, Sha256};

use crate::errors::TABLE;
use crate::port::{FleetInstance, FleetOverride, FleetRequest, FleetResult, FleetTemplate, Subnet};

/// One CreateFleet to try, with the offerings behind its overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetAttempt {
    /// The request.
    pub request: FleetRequest,
    /// The offering of each override, in override order (templates flattened).
    pub offerings: Vec<LaunchOffering>,
}

/// Offerings that cannot be tried, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    /// The offering.
    pub offering: LaunchOffering,
    /// Why (no subnet in its zone, no AMI for its architecture).
    pub reason: String,
}

/// What a planned launch looks like.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FleetPlan {
    /// Fleets to try, in order.
    pub attempts: Vec<FleetAttempt>,
    /// Offerings left out.
    pub skipped: Vec<Skipped>,
}

/// Everything a fleet needs besides the offerings.
#[derive(Debug, Clone)]
pub struct FleetInputs<'a> {
    /// The cluster's name (in the client token).
    pub cluster: &'a str,
    /// The NodeClaim (in the client token).
    pub claim: &'a str,
    /// The subnet serving each zone.
    pub subnets: &'a BTreeMap<String, Subnet>,
    /// The launch template id for each image key (`x86_64/standard`, `arm64/nvidia`, …).
    pub templates: &'a BTreeMap<String, String>,
    /// Tags of the instance.
    pub tags: &'a BTreeMap<String, String>,
    /// The EC2 launch context.
    pub context: Option<&'a str>,
    /// A reserved launch goes into a Capacity Block (else an ODCR).
    pub capacity_block: bool,
}

/// The fleets for `offerings` (in order); `architecture` names an instance type's EC2
/// architecture.
pub fn plan(
    inputs: &FleetInputs<'_>,
    offerings: &[LaunchOffering],
    architecture: impl Fn(&str) -> String,
) -> FleetPlan {
    let mut out = FleetPlan::default();
    let mut runs: Vec<(CapacityType, Vec<(usize, &LaunchOffering)>)> = Vec::new();
    for (rank, o) in offerings.iter().enumerate() {
        match runs.last_mut() {
            Some((ct, run)) if *ct == o.capacity_type => run.push((rank, o)),
            _ => runs.push((o.capacity_type, vec![(rank, o)])),
        }
    }
    for (capacity_type, run) in runs {
        // Template id -> its overrides (ordered by template id for a stable request).
        let mut by_template: BTreeMap<&str, Vec<(FleetOverride, LaunchOffering)>> = BTreeMap::new();
        for (rank, o) in run {
            let Some(subnet) = inputs.subnets.get(&o.zone) else {
                out.skipped.push(Skipped {
                    offering: o.clone(),
                    reason: format!("no subnet of the AWSNodeClass in {}", o.zone),
                });
                continue;
            };
            let arch = architecture(&o.instance_type);
            let Some(template) = inputs.templates.get(&arch) else {
                out.skipped.push(Skipped {
                    offering: o.clone(),
                    reason: format!(
                        "no AMI of the AWSNodeClass for {arch} ({})",
                        o.instance_type
                    ),
                });
                continue;
            };
            by_template.entry(template.as_str()).or_default().push((
                FleetOverride {
                    instance_type: o.instance_type.clone(),
                    subnet_id: subnet.id.clone(),
                    zone: o.zone.clone(),
                    priority: rank as f64,
                },
                o.clone(),
            ));
        }
        if by_template.is_empty() {
            continue;
        }
        let mut templates = Vec::new();
        let mut tried = Vec::new();
        for (id, overrides) in by_template {
            let (overrides, offerings): (Vec<_>, Vec<_>) = overrides.into_iter().unzip();
            tried.extend(offerings);
            templates.push(FleetTemplate {
                launch_template_id: id.to_owned(),
                overrides,
            });
        }
        let request = FleetRequest {
            client_token: client_token(inputs.cluster, inputs.claim, capacity_type, &templates),
            capacity_type,
            templates,
            tags: inputs.tags.clone(),
            context: inputs.context.map(str::to_owned),
            capacity_block: inputs.capacity_block && capacity_type == CapacityType::Reserved,
        };
        out.attempts.push(FleetAttempt {
            request,
            offerings: tried,
        });
    }
    out
}

/// The idempotency token of a fleet: the same claim asking for the same overrides gets the
/// same token (so a retried call returns the first call's instance), anything else another.
pub fn client_token(
    cluster: &str,
    claim: &str,
    capacity_type: CapacityType,
    templates: &[FleetTemplate],
) -> String {
    let mut h = Sha256::new();
    h.update(format!("{cluster}\n{claim}\n{capacity_type}\n"));
    for t in templates {
        h.update(&t.launch_template_id);
        for o in &t.overrides {
            h.update(format!("\n{}@{}", o.instance_type, o.subnet_id));
        }
        h.update("\n");
    }
    let digest = h.finalize();
    let hex: String = digest[..20].iter().map(|b| format!("{b:02x}")).collect();
    format!("qm-{hex}")
}

/// What one fleet did.
#[derive(Debug, Clone, PartialEq)]
pub enum FleetOutcome {
    /// An instance, and the offering it runs on.
    Launched {
        /// The instance.
        instance: FleetInstance,
        /// Its offering.
        offering: LaunchOffering,
        /// More instances than asked for (terminate them).
        extra: Vec<String>,
    },
    /// No instance: the errors, one per failed override (or one for the whole fleet).
    Failed(Vec<CloudError>),
}

/// Reads a fleet's instances and errors together: an instant fleet reports capacity errors
/// inside a successful response, and can return an instance and errors at once.
pub fn read(attempt: &FleetAttempt, result: &FleetResult) -> FleetOutcome {
    let zone_of_subnet = |subnet: &str| {
        attempt
            .request
            .templates
            .iter()
            .flat_map(|t| &t.overrides)
            .find(|o| o.subnet_id == subnet)
            .map(|o| o.zone.clone())
    };
    let find = |instance_type: Option<&str>, subnet: Option<&str>, zone: Option<&str>| {
        let zone = zone
            .map(str::to_owned)
            .or_else(|| subnet.and_then(zone_of_subnet));
        attempt
            .offerings
            .iter()
            .find(|o| {
                instance_type.is_none_or(|t| t == o.instance_type)
                    && zone.as_deref().is_none_or(|z| z == o.zone)
            })
            .cloned()
    };
    if let Some((first, rest)) = result.instances.split_first() {
        let offering = find(
            first.instance_type.as_deref(),
            first.subnet_id.as_deref(),
            first.zone.as_deref(),
        )
        .unwrap_or_else(|| attempt.offerings[0].clone());
        return FleetOutcome::Launched {
            instance: first.clone(),
            offering,
            extra: rest.iter().map(|i| i.id.clone()).collect(),
        };
    }
    if result.errors.is_empty() {
        return FleetOutcome::Failed(vec![CloudError::Transient {
            message: "CreateFleet returned neither an instance nor an error".into(),
        }]);
    }
    FleetOutcome::Failed(
        result
            .errors
            .iter()
            .map(|e| {
                let offering = find(
                    e.instance_type.as_deref(),
                    e.subnet_id.as_deref(),
                    e.zone.as_deref(),
                );
                // An error naming no offering we asked for is about the whole fleet.
                let offering = offering.or_else(|| attempt.offerings.last().cloned());
                TABLE.map_code(Some(&e.code), &e.message, None, None, offering.as_ref())
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::FleetError;

    fn offering(t: &str, zone: &str, ct: CapacityType) -> LaunchOffering {
        LaunchOffering {
            instance_type: t.into(),
            zone: zone.into(),
            capacity_type: ct,
            price_per_hour: 1.0,
        }
    }

    fn subnets() -> BTreeMap<String, Subnet> {
        ["us-east-1a", "us-east-1b"]
            .into_iter()
            .map(|z| {
                (
                    z.to_owned(),
                    Subnet {
                        id: format!("subnet-{}", &z[8..]),
                        zone: z.to_owned(),
                        available_ips: 100,
                    },
                )
            })
            .collect()
    }

    fn templates() -> BTreeMap<String, String> {
        BTreeMap::from([("x86_64".to_owned(), "lt-x86".to_owned())])
    }

    fn plan_of(offerings: &[LaunchOffering]) -> FleetPlan {
        let subnets = subnets();
        let templates = templates();
        let tags = BTreeMap::new();
        let inputs = FleetInputs {
            cluster: "prod",
            claim: "gpu-abc12",
            subnets: &subnets,
            templates: &templates,
            tags: &tags,
            context: None,
            capacity_block: false,
        };
        plan(&inputs, offerings, |t| {
            if t.starts_with("g5g") {
                "arm64"
            } else {
                "x86_64"
            }
            .to_owned()
        })
    }

    const SPOT: CapacityType = CapacityType::Spot;
    const OD: CapacityType = CapacityType::OnDemand;

    #[test]
    fn runs_of_one_capacity_type_become_one_fleet_each_in_order() {
        let p = plan_of(&[
            offering("g5.xlarge", "us-east-1a", SPOT),
            offering("g5.xlarge", "us-east-1b", SPOT),
            offering("g5.xlarge", "us-east-1a", OD),
        ]);
        assert_eq!(p.attempts.len(), 2);
        let spot = &p.attempts[0].request;
        assert_eq!(spot.capacity_type, SPOT);
        let o = &spot.templates[0].overrides;
        assert_eq!(o.len(), 2);
        assert_eq!((o[0].subnet_id.as_str(), o[0].priority), ("subnet-1a", 0.0));
        assert_eq!((o[1].subnet_id.as_str(), o[1].priority), ("subnet-1b", 1.0));
        assert_eq!(p.attempts[1].request.capacity_type, OD);
        assert_ne!(spot.client_token, p.attempts[1].request.client_token);
        assert!(spot.client_token.len() <= 64);
    }

    #[test]
    fn offerings_without_a_subnet_or_an_ami_are_skipped_with_the_reason() {
        let p = plan_of(&[
            offering("g5.xlarge", "us-east-1c", OD),
            offering("g5g.xlarge", "us-east-1a", OD),
        ]);
        assert!(p.attempts.is_empty());
        assert!(p.skipped[0].reason.contains("no subnet"));
        assert!(p.skipped[1].reason.contains("no AMI"));
    }

    #[test]
    fn the_same_request_gets_the_same_token() {
        let o = [offering("g5.xlarge", "us-east-1a", OD)];
        assert_eq!(
            plan_of(&o).attempts[0].request.client_token,
            plan_of(&o).attempts[0].request.client_token
        );
    }

    #[test]
    fn an_instance_and_errors_together_is_a_launch_on_the_instances_offering() {
        let p = plan_of(&[
            offering("g5.xlarge", "us-east-1a", SPOT),
            offering("g5.2xlarge", "us-east-1b", SPOT),
        ]);
        let result = FleetResult {
            instances: vec![FleetInstance {
                id: "i-1".into(),
                instance_type: Some("g5.2xlarge".into()),
                subnet_id: Some("subnet-1b".into()),
                zone: None,
                capacity_type: Some(SPOT),
            }],
            errors: vec![FleetError {
                code: "InsufficientInstanceCapacity".into(),
                message: "none".into(),
                instance_type: Some("g5.xlarge".into()),
                subnet_id: Some("subnet-1a".into()),
                zone: None,
            }],
        };
        match read(&p.attempts[0], &result) {
            FleetOutcome::Launched {
                offering, extra, ..
            } => {
                assert_eq!(offering.instance_type, "g5.2xlarge");
                assert_eq!(offering.zone, "us-east-1b");
                assert!(extra.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_alone_name_their_offerings() {
        let p = plan_of(&[
            offering("g5.xlarge", "us-east-1a", SPOT),
            offering("g5.xlarge", "us-east-1b", SPOT),
        ]);
        let result = FleetResult {
            instances: vec![],
            errors: vec![FleetError {
                code: "InsufficientInstanceCapacity".into(),
                message: "none".into(),
                instance_type: Some("g5.xlarge".into()),
                subnet_id: Some("subnet-1b".into()),
                zone: None,
            }],
        };
        match read(&p.attempts[0], &result) {
            FleetOutcome::Failed(errors) => match &errors[0] {
                CloudError::InsufficientCapacity { zone, .. } => assert_eq!(zone, "us-east-1b"),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }
}
