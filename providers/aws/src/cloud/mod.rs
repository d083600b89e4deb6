//! [`AwsCloud`]: the [`CloudProvider`] over the EC2 port.

mod provider;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use quartermaster_cloud::price::catalog_price;
use quartermaster_cloud::{
    Clock, CloudError, CloudEvent, CloudFuture, CloudProvider, Instance, InstanceState,
    LaunchRequest, NodeClassSpec, NodeClasses, exhausted,
};
use quartermaster_policies::AWSNodeClassSpec;
use quartermaster_pricing::{Arch, CapacityType, Catalog, Cloud, InstanceType};

use crate::config::{AwsSettings, config_region, sdk_config};
use crate::errors::map_api_error;
use crate::fleet::{FleetInputs, FleetOutcome, plan, read};
use crate::interruption::{Notice, parse};
use crate::port::{ApiError, Ec2, Ec2Instance, Filter, Parameters, Queue};
use crate::resolve::{self, ResolveError};
use crate::sdk::SdkEc2;
use crate::sdk_sqs::SqsQueue;
use crate::sdk_ssm::SsmParameters;
use crate::template::{TAG_CLUSTER, launch_template};
use crate::userdata::ClusterInfo;

/// The tag naming the NodeClaim an instance was launched for.
pub const TAG_NODECLAIM: &str = "quartermaster.dev/nodeclaim";
/// The tag naming the NodePool.
pub const TAG_NODEPOOL: &str = "quartermaster.dev/nodepool";

/// Instance states that still hold (or will hold) a machine.
const LIVE_STATES: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];

/// The AWS cloud.
pub struct AwsCloud {
    ec2: Arc<dyn Ec2>,
    cluster: ClusterInfo,
    region: Option<String>,
    catalog: Catalog,
    clock: Arc<dyn Clock>,
    /// Launch template name -> id, for templates known to exist.
    templates: Mutex<BTreeMap<String, String>>,
    /// The interruption queue, when configured.
    queue: Option<Arc<dyn Queue>>,
    /// SSM parameters (AMI aliases and `ssmParameter` terms).
    parameters: Option<Arc<dyn Parameters>>,
    /// The cluster's Kubernetes version (`1.33`), for AMI aliases.
    kubernetes_version: Option<String>,
    /// AWSNodeClass specs by name, as last launched with or set, for drift.
    node_classes: NodeClasses<AWSNodeClassSpec>,
}

impl std::fmt::Debug for AwsCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCloud")
            .field("cluster", &self.cluster.name)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl AwsCloud {
    /// The AWS cloud through the SDK, configured by `settings` (credentials from the default
    /// chain unless the settings say otherwise).
    pub async fn connect(settings: AwsSettings, catalog: Catalog, clock: Arc<dyn Clock>) -> Self {
        let config = sdk_config(&settings).await;
        let region = config_region(&config);
        let limits = settings.rate_limits.limits();
        let limits_for_ssm = limits.clone();
        let ec2 = Arc::new(SdkEc2::new(
            aws_sdk_ec2::Client::new(&config),
            limits.clone(),
        ));
        let queue = settings.interruption_queue.map(|name| {
            Arc::new(SqsQueue::new(
                aws_sdk_sqs::Client::new(&config),
                name,
                limits,
            )) as Arc<dyn Queue>
        });
        let parameters = Arc::new(SsmParameters::new(
            aws_sdk_ssm::Client::new(&config),
            limits_for_ssm,
        )) as Arc<dyn Parameters>;
        Self::with_port(ec2, settings.cluster, region, catalog, clock)
            .with_queue(queue)
            .with_parameters(Some(parameters), settings.kubernetes_version)
    }

    /// The same cloud resolving AMI aliases and `ssmParameter` terms through `parameters`
    /// for the cluster's `kubernetes_version` (`1.33`).
    pub fn with_parameters(
        mut self,
        parameters: Option<Arc<dyn Parameters>>,
        kubernetes_version: Option<String>,
    ) -> Self {
        self.parameters = parameters;
        self.kubernetes_version = kubernetes_version;
        self
    }

    /// The same cloud reading interruption notices from `queue`.
    pub fn with_queue(mut self, queue: Option<Arc<dyn Queue>>) -> Self {
        self.queue = queue;
        self
    }

    /// The AWS cloud over any implementation of the port (tests fake it).
    pub fn with_port(
        ec2: Arc<dyn Ec2>,
        cluster: ClusterInfo,
        region: Option<String>,
        catalog: Catalog,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            ec2,
            cluster,
            region,
            catalog,
            clock,
            templates: Mutex::new(BTreeMap::new()),
            queue: None,
            parameters: None,
            kubernetes_version: None,
            node_classes: NodeClasses::default(),
        }
    }

    /// Records the current spec of AWSNodeClass `name` (launches record it too), so
    /// `is_drifted` compares instances launched from it against what it selects now.
    pub fn set_node_class(&self, name: &str, spec: AWSNodeClassSpec) {
        self.node_classes.set(name.to_owned(), spec);
    }

    fn node_class(&self, name: &str) -> Option<AWSNodeClassSpec> {
        self.node_classes.get(name)
    }

    /// The region the client uses, if known.
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref()
    }

    fn cluster_filter(&self) -> Filter {
        Filter::new(format!("tag:{TAG_CLUSTER}"), [self.cluster.name.clone()])
    }

    fn live_filter() -> Filter {
        Filter::new("instance-state-name", LIVE_STATES)
    }

    fn price(&self, instance_type: &str, zone: &str, capacity_type: CapacityType) -> f64 {
        catalog_price(
            &self.catalog,
            Cloud::Aws,
            instance_type,
            zone,
            capacity_type,
        )
    }

    fn instance(&self, i: &Ec2Instance) -> Instance {
        Instance {
            provider_id: provider_id(&i.zone, &i.id),
            claim_name: i.tags.get(TAG_NODECLAIM).cloned().unwrap_or_default(),
            instance_type: i.instance_type.clone(),
            zone: i.zone.clone(),
            capacity_type: i.capacity_type,
            price_per_hour: self.price(&i.instance_type, &i.zone, i.capacity_type),
            state: state(&i.state),
            launched_at: i.launch_time.unwrap_or_else(|| self.clock.now()),
            tags: i.tags.clone(),
        }
    }

    /// The kind of AMI an instance type needs, `ARCH/VARIANT`: the EC2 architecture and the
    /// EKS-optimized AMI variant of its accelerators (the catalog's; `x86_64/standard` when the
    /// catalog does not know the type).
    fn image_key(&self, instance_type: &str) -> String {
        let it = self.catalog.get(Cloud::Aws, instance_type);
        let arch = match it.map(|t| t.arch) {
            Some(Arch::Arm64) => "arm64",
            _ => "x86_64",
        };
        let variant = match it
            .and_then(|t| t.accelerator.as_ref())
            .map(|a| a.manufacturer.as_str())
        {
            Some("nvidia") => "nvidia",
            Some("aws") => "neuron",
            _ => "standard",
        };
        format!("{arch}/{variant}")
    }

    /// The id of the launch template `spec` describes, creating it when missing.
    async fn ensure_template(
        &self,
        spec: crate::port::LaunchTemplateSpec,
    ) -> Result<String, ApiError> {
        if let Some(id) = self.known_template(&spec.name) {
            return Ok(id);
        }
        let id = match self.ec2.find_launch_template(spec.name.clone()).await? {
            Some(id) => id,
            None => {
                let name = spec.name.clone();
                match self.ec2.create_launch_template(spec).await {
                    Ok(id) => id,
                    // Created by a concurrent launch since we looked.
                    Err(e)
                        if e.code
                            .as_deref()
                            .is_some_and(|c| c.contains("AlreadyExists")) =>
                    {
                        self.ec2
                            .find_launch_template(name.clone())
                            .await?
                            .ok_or(e)?
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        Ok(id)
    }

    fn known_template(&self, name: &str) -> Option<String> {
        self.templates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    fn remember_template(&self, name: String, id: String) {
        self.templates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, id);
    }

    /// The live instance already launched for `claim`, if any.
    async fn existing(&self, claim: &str) -> Result<Option<Ec2Instance>, CloudError> {
        let found = self
            .ec2
            .describe_instances(vec![
                self.cluster_filter(),
                Filter::new(format!("tag:{TAG_NODECLAIM}"), [claim.to_owned()]),
                Self::live_filter(),
            ])
            .await
            .map_err(|e| map_api_error(&e, None))?;
        Ok(found.into_iter().find(|i| i.state != "shutting-down"))
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, CloudError> {
        let spec = match &request.node_class_spec {
            Some(NodeClassSpec::Aws(spec)) => spec,
            Some(_) => {
                return Err(CloudError::InvalidRequest {
                    message: format!(
                        "NodeClass {} is not an AWSNodeClass; the AWS cloud cannot launch it",
                        request.node_class
                    ),
                });
            }
            None => {
                return Err(CloudError::InvalidRequest {
                    message: format!("AWSNodeClass {} was not found", request.node_class),
                });
            }
        };
        self.set_node_class(&request.node_class, spec.as_ref().clone());
        // A retried or restarted launch finds the instance it already has: never a second one.
        if let Some(i) = self.existing(&request.claim_name).await? {
            tracing::info!(nodeclaim = %request.claim_name, instance = %i.id, "instance already launched");
            return Ok(self.instance(&i));
        }
        let offerings = request.offerings();
        let needed: BTreeSet<String> = offerings
            .iter()
            .map(|o| self.image_key(&o.instance_type))
            .collect();
        // A reserved launch targets the reservation its NodeClaim names.
        let reservation = (request.capacity_type == CapacityType::Reserved)
            .then(|| {
                let labels = &request.labels;
                let id = labels.get(quartermaster_pricing::reservation::LABEL_RESERVATION_ID)?;
                let block = labels
                    .get(quartermaster_pricing::reservation::LABEL_RESERVATION_TYPE)
                    .is_some_and(|t| t == "capacity-block");
                Some(crate::port::ReservationTarget {
                    id: id.clone(),
                    capacity_block: block,
                })
            })
            .flatten();
        if request.capacity_type == CapacityType::Reserved && reservation.is_none() {
            return Err(CloudError::InvalidRequest {
                message: format!(
                    "NodeClaim {}: a reserved launch names no capacity reservation (label {})",
                    request.claim_name,
                    quartermaster_pricing::reservation::LABEL_RESERVATION_ID
                ),
            });
        }
        let capacity_block = reservation.as_ref().is_some_and(|r| r.capacity_block);
        let (subnets, templates) = self
            .resolve(&request.node_class, spec, &needed, reservation)
            .await?;
        let tags = self.instance_tags(request, spec);
        let inputs = FleetInputs {
            cluster: &self.cluster.name,
            claim: &request.claim_name,
            subnets: &subnets,
            templates: &templates,
            tags: &tags,
            context: spec.context.as_deref(),
            capacity_block,
        };
        let fleet_plan = plan(&inputs, &offerings, |t| self.image_key(t));
        if fleet_plan.attempts.is_empty() {
            let reasons: Vec<String> = fleet_plan
                .skipped
                .iter()
                .map(|s| {
                    format!(
                        "{} ({}): {}",
                        s.offering.instance_type, s.offering.zone, s.reason
                    )
                })
                .collect();
            return Err(CloudError::InvalidRequest {
                message: format!(
                    "AWSNodeClass {} can launch none of the offerings: {}",
                    request.node_class,
                    reasons.join("; ")
                ),
            });
        }
        let mut failures: Vec<CloudError> = Vec::new();
        for attempt in &fleet_plan.attempts {
            let outcome = match self.ec2.create_fleet(attempt.request.clone()).await {
                Ok(result) => read(attempt, &result),
                Err(e) => {
                    // A whole-fleet error: about every override of the fleet.
                    let last = attempt.offerings.last();
                    FleetOutcome::Failed(vec![map_api_error(&e, last)])
                }
            };
            match outcome {
                FleetOutcome::Launched {
                    instance,
                    offering,
                    extra,
                } => {
                    if !extra.is_empty() {
                        tracing::warn!(nodeclaim = %request.claim_name, extra = ?extra, "the fleet launched more than one instance; terminating the others");
                        if let Err(e) = self.ec2.terminate_instances(extra).await {
                            tracing::warn!(error = %e.message, "could not terminate extra fleet instances");
                        }
                    }
                    // A reserved launch is reserved capacity, whatever market the fleet names.
                    let capacity_type = match offering.capacity_type {
                        CapacityType::Reserved => CapacityType::Reserved,
                        asked => instance.capacity_type.unwrap_or(asked),
                    };
                    return Ok(Instance {
                        provider_id: provider_id(&offering.zone, &instance.id),
                        claim_name: request.claim_name.clone(),
                        instance_type: offering.instance_type.clone(),
                        zone: offering.zone.clone(),
                        capacity_type,
                        price_per_hour: offering.price_per_hour,
                        state: InstanceState::Pending,
                        launched_at: self.clock.now(),
                        tags,
                    });
                }
                FleetOutcome::Failed(errors) => {
                    // Capacity and quota errors fall through to the next run of offerings;
                    // anything else ends the launch as it is.
                    if let Some(e) = errors.iter().find(|e| {
                        !matches!(
                            e,
                            CloudError::InsufficientCapacity { .. }
                                | CloudError::QuotaExceeded { .. }
                        )
                    }) {
                        return Err(e.clone());
                    }
                    failures.extend(errors);
                }
            }
        }
        Err(exhausted(&offerings, &failures))
    }

    /// Subnets per zone and launch template ids per image key (`ARCH/VARIANT`, the `needed`
    /// ones) for a NodeClass.
    async fn resolve(
        &self,
        class_name: &str,
        spec: &AWSNodeClassSpec,
        needed: &BTreeSet<String>,
        reservation: Option<crate::port::ReservationTarget>,
    ) -> Result<
        (
            BTreeMap<String, crate::port::Subnet>,
            BTreeMap<String, String>,
        ),
        CloudError,
    > {
        let fail = |e: ResolveError| match e {
            ResolveError::NodeClass(e) => CloudError::from(e),
            ResolveError::Api(e) => map_api_error(&e, None),
        };
        let ec2 = self.ec2.as_ref();
        let subnets = resolve::subnets(ec2, &spec.subnet_selector_terms)
            .await
            .map_err(fail)?;
        if subnets.is_empty() {
            return Err(CloudError::InvalidRequest {
                message: format!("AWSNodeClass {class_name}: subnetSelectorTerms select no subnet"),
            });
        }
        let groups = resolve::security_groups(ec2, &spec.security_group_selector_terms)
            .await
            .map_err(fail)?;
        if groups.is_empty() {
            return Err(CloudError::InvalidRequest {
                message: format!(
                    "AWSNodeClass {class_name}: securityGroupSelectorTerms select no security group"
                ),
            });
        }
        let no_parameters = NoParameters;
        let parameters: &dyn Parameters = match &self.parameters {
            Some(p) => p.as_ref(),
            None => &no_parameters,
        };
        let images = resolve::amis(
            ec2,
            parameters,
            spec,
            needed,
            self.kubernetes_version.as_deref(),
        )
        .await
        .map_err(fail)?;
        if images.is_empty() {
            return Err(CloudError::InvalidRequest {
                message: format!(
                    "AWSNodeClass {class_name}: amiSelectorTerms select no AMI for {}",
                    needed.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        }
        let group_ids: Vec<String> = groups.into_iter().map(|g| g.id).collect();
        let mut templates = BTreeMap::new();
        let mut by_image: BTreeMap<String, String> = BTreeMap::new();
        for (key, image) in images {
            let id = match by_image.get(&image.id) {
                Some(id) => id.clone(),
                None => {
                    let template = launch_template(
                        &self.cluster,
                        class_name,
                        spec,
                        &image.id,
                        group_ids.clone(),
                        reservation.clone(),
                    )?;
                    let name = template.name.clone();
                    let id = self
                        .ensure_template(template)
                        .await
                        .map_err(|e| map_api_error(&e, None))?;
                    self.remember_template(name, id.clone());
                    by_image.insert(image.id.clone(), id.clone());
                    id
                }
            };
            templates.insert(key, id);
        }
        Ok((resolve::subnet_per_zone(&subnets), templates))
    }

    fn instance_tags(
        &self,
        request: &LaunchRequest,
        spec: &AWSNodeClassSpec,
    ) -> BTreeMap<String, String> {
        let mut tags = spec.tags.clone();
        tags.extend(request.tags.clone());
        tags.insert(TAG_CLUSTER.to_owned(), self.cluster.name.clone());
        tags.insert(
            format!("kubernetes.io/cluster/{}", self.cluster.name),
            "owned".to_owned(),
        );
        tags.insert(TAG_NODEPOOL.to_owned(), request.node_pool.clone());
        tags.insert(TAG_NODECLAIM.to_owned(), request.claim_name.clone());
        tags.insert(
            crate::drift::TAG_NODECLASS.to_owned(),
            request.node_class.clone(),
        );
        tags.insert("Name".to_owned(), request.claim_name.clone());
        tags
    }

    async fn describe_one(&self, provider_id: &str) -> Result<Ec2Instance, CloudError> {
        let not_found = || CloudError::NotFound {
            provider_id: provider_id.to_owned(),
        };
        let id = instance_id(provider_id).ok_or_else(|| CloudError::InvalidRequest {
            message: format!("{provider_id:?} is not an AWS provider id (aws:///ZONE/i-…)"),
        })?;
        let found = match self.ec2.describe_instances_by_id(vec![id.to_owned()]).await {
            Ok(found) => found,
            Err(e) => {
                return Err(match map_api_error(&e, None) {
                    CloudError::NotFound { .. } => not_found(),
                    other => other,
                });
            }
        };
        found
            .into_iter()
            .find(|i| i.id == id && i.state != "terminated")
            .ok_or_else(not_found)
    }
}

impl AwsCloud {
    /// The queue's messages as events; handled messages (and ones that say nothing to act on)
    /// are deleted, the rest come back after the queue's visibility timeout.
    async fn interruption_events(&self, queue: &dyn Queue) -> Result<Vec<CloudEvent>, CloudError> {
        let messages = queue.receive().await.map_err(|e| map_api_error(&e, None))?;
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.clock.now();
        let notices: Vec<(String, Notice)> = messages
            .into_iter()
            .map(|m| (m.receipt, parse(&m.body, now)))
            .collect();
        let mut ids: Vec<String> = notices
            .iter()
            .flat_map(|(_, n)| match n {
                Notice::Interruption { instance_ids, .. } | Notice::Stopped { instance_ids } => {
                    instance_ids.clone()
                }
                Notice::Ignored(_) => Vec::new(),
            })
            .collect();
        ids.sort();
        ids.dedup();
        let zones = self.zones_of(ids).await?;
        let mut events = Vec::new();
        for (_, notice) in &notices {
            match notice {
                Notice::Interruption { instance_ids, at } => {
                    events.extend(instance_ids.iter().filter_map(|id| {
                        Some(CloudEvent::Interruption {
                            provider_id: provider_id(zones.get(id)?, id),
                            terminates_at: *at,
                        })
                    }));
                }
                Notice::Stopped { instance_ids } => {
                    events.extend(instance_ids.iter().filter_map(|id| {
                        Some(CloudEvent::Terminated {
                            provider_id: provider_id(zones.get(id)?, id),
                        })
                    }));
                }
                Notice::Ignored(why) => {
                    tracing::debug!(why = %why, "interruption queue message ignored");
                }
            }
        }
        let receipts = notices.into_iter().map(|(r, _)| r).collect();
        if let Err(e) = queue.delete(receipts).await {
            tracing::warn!(error = %e.message, "could not delete handled interruption messages");
        }
        Ok(events)
    }

    /// The zone of each instance of ours among `ids` (others, and unknown ids, are left out).
    async fn zones_of(&self, ids: Vec<String>) -> Result<BTreeMap<String, String>, CloudError> {
        if ids.is_empty() {
            return Ok(BTreeMap::new());
        }
        let found = match self.ec2.describe_instances_by_id(ids.clone()).await {
            Ok(found) => found,
            Err(e) => match map_api_error(&e, None) {
                // One unknown id fails the whole call: ask one by one.
                CloudError::NotFound { .. } => {
                    let mut found = Vec::new();
                    for id in ids {
                        if let Ok(mut one) = self.ec2.describe_instances_by_id(vec![id]).await {
                            found.append(&mut one);
                        }
                    }
                    found
                }
                other => return Err(other),
            },
        };
        Ok(found
            .into_iter()
            .filter(|i| i.tags.get(TAG_CLUSTER) == Some(&self.cluster.name))
            .map(|i| (i.id, i.zone))
            .collect())
    }
}

/// No SSM: `ssmParameter` and alias terms find nothing.
struct NoParameters;

impl Parameters for NoParameters {
    fn get_parameter(&self, _name: String) -> crate::port::PortFuture<'_, Option<String>> {
        Box::pin(async { Ok(None) })
    }
}

/// `aws:///ZONE/ID`, as the AWS cloud controller manager writes a Node's providerID.
pub fn provider_id(zone: &str, id: &str) -> String {
    format!("aws:///{zone}/{id}")
}

/// The instance id of a provider id.
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix("aws://")?;
    let id = rest.rsplit('/').next()?;
    id.starts_with("i-").then_some(id)
}

fn state(s: &str) -> InstanceState {
    match s {
        "pending" => InstanceState::Pending,
        "running" => InstanceState::Running,
        "terminated" => InstanceState::Terminated,
        _ => InstanceState::ShuttingDown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_round_trip() {
        let p = provider_id("us-east-1a", "i-0abc");
        assert_eq!(p, "aws:///us-east-1a/i-0abc");
        assert_eq!(instance_id(&p), Some("i-0abc"));
        assert_eq!(instance_id("gce://p/z/n"), None);
        assert_eq!(instance_id("aws:///us-east-1a/vol-1"), None);
    }
}
