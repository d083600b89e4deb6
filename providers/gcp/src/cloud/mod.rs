//! [`GcpCloud`]: the [`CloudProvider`] over the Compute Engine port.

mod provider;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use quartermaster_cloud::price::offering_price;
use quartermaster_cloud::{
    Clock, CloudError, CloudEvent, CloudFuture, CloudProvider, Instance, InstanceState,
    LaunchOffering, LaunchRequest, NodeClassSpec, NodeClasses, exhausted,
};
use quartermaster_policies::GCPNodeClassSpec;
use quartermaster_pricing::reservation::{LABEL_RESERVATION_ID, TAG_SPECIFIC_RESERVATION_REQUIRED};
use quartermaster_pricing::{
    CapacityType, Catalog, Cloud, InstanceType, Reservation, ReservationKind,
};

use crate::config::{GcpSettings, OperationWait};
use crate::errors::GcpError;
use crate::errors::{map_api_error, map_operation};
use crate::instance::{InsertInputs, ReservationTarget, insert_spec, source_image};
use crate::names::{image_label, label_value};
use crate::port::{Compute, GceInstance, GceReservation, Operation};
use crate::sdk::SdkCompute;

/// The label naming the cluster an instance belongs to.
pub const LABEL_CLUSTER: &str = "quartermaster-cluster";
/// The label naming the NodePool.
pub const LABEL_NODEPOOL: &str = "quartermaster-nodepool";
/// The label naming the NodeClaim an instance was launched for.
pub const LABEL_NODECLAIM: &str = "quartermaster-nodeclaim";
/// The label naming the GCPNodeClass an instance was launched from.
pub const LABEL_NODECLASS: &str = "quartermaster-nodeclass";
/// The label with a hash of the boot image (or template) an instance was started from.
pub const LABEL_IMAGE: &str = "quartermaster-image";
/// The label naming the reservation an instance was launched into (a reserved launch into a
/// reservation VMs consume automatically carries no name in its `reservationAffinity`).
pub const LABEL_RESERVATION: &str = "quartermaster-reservation";

/// How long a preempted spot instance has between the notice and its end (GCE: 30 s).
const PREEMPTION_NOTICE_SECONDS: i64 = 30;

/// The GCP cloud.
pub struct GcpCloud {
    compute: Arc<dyn Compute>,
    cluster: String,
    project: Option<String>,
    source_instance_template: Option<String>,
    operation_wait: OperationWait,
    catalog: Catalog,
    clock: Arc<dyn Clock>,
    /// The latest spec of each GCPNodeClass a launch used, for drift.
    node_classes: NodeClasses<GCPNodeClassSpec>,
    /// Instances whose preemption was already reported.
    preempted: Mutex<BTreeSet<String>>,
    /// Whether each reservation last listed, by (zone, name), may be consumed only by VMs that
    /// name it (`specificReservationRequired`): how a launch into it asks for it.
    specific_required: Mutex<BTreeMap<(String, String), bool>>,
}

impl std::fmt::Debug for GcpCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcpCloud")
            .field("cluster", &self.cluster)
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl GcpCloud {
    /// The GCP cloud through the SDK, configured by `settings`.
    pub async fn connect(
        settings: GcpSettings,
        catalog: Catalog,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GcpError> {
        let compute = Arc::new(SdkCompute::connect(&settings).await?);
        Ok(Self::with_port(compute, &settings, catalog, clock))
    }

    /// The GCP cloud over any implementation of the port (tests fake it).
    pub fn with_port(
        compute: Arc<dyn Compute>,
        settings: &GcpSettings,
        catalog: Catalog,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            compute,
            cluster: settings.cluster.clone(),
            project: settings.project.clone(),
            source_instance_template: settings.source_instance_template.clone(),
            operation_wait: settings.operation_wait,
            catalog,
            clock,
            node_classes: NodeClasses::default(),
            preempted: Mutex::new(BTreeSet::new()),
            specific_required: Mutex::new(BTreeMap::new()),
        }
    }

    /// The port, for `doctor`'s probes.
    pub fn port(&self) -> &Arc<dyn Compute> {
        &self.compute
    }

    /// Records the current spec of GCPNodeClass `name` (the controller calls this when the
    /// NodeClass changes; launches record it too), so `is_drifted` compares against it.
    pub fn set_node_class(&self, name: &str, spec: GCPNodeClassSpec) {
        self.node_classes.set(label_value(name), spec);
    }

    fn node_class(&self, label: &str) -> Option<GCPNodeClassSpec> {
        self.node_classes.get(label)
    }

    /// The project garbage collection lists.
    fn list_project(&self) -> Result<String, CloudError> {
        self.project
            .clone()
            .ok_or_else(|| CloudError::InvalidRequest {
                message: "no GCP project configured (--gcp-project / GCP_PROJECT)".to_owned(),
            })
    }

    fn cluster_filter(&self) -> String {
        format!(
            "labels.{LABEL_CLUSTER} = \"{}\"",
            label_value(&self.cluster)
        )
    }

    /// The catalog's price of `instance_type` in `zone` (or any zone) as `capacity_type`: 0
    /// when it has none (reserved capacity, paid whether used or not). A catalog without
    /// flex-start offerings prices flex-start by [`quartermaster_pricing::flex_start`]'s
    /// estimate from on-demand.
    fn price(&self, instance_type: &str, zone: &str, capacity_type: CapacityType) -> f64 {
        let Some(t) = self.catalog.get(Cloud::Gcp, instance_type) else {
            return 0.0;
        };
        let of = |capacity_type: CapacityType| offering_price(t, zone, capacity_type);
        match of(capacity_type) {
            Some(p) => p,
            None if capacity_type == CapacityType::FlexStart => {
                let fraction = quartermaster_pricing::flex_start::price_fraction(t).unwrap_or(1.0);
                of(CapacityType::OnDemand).map_or(0.0, |p| p * fraction)
            }
            None => 0.0,
        }
    }

    fn instance(&self, project: &str, i: &GceInstance) -> Instance {
        let capacity_type = capacity_type(i);
        Instance {
            provider_id: provider_id(project, &i.zone, &i.name),
            claim_name: i.labels.get(LABEL_NODECLAIM).cloned().unwrap_or_default(),
            instance_type: i.machine_type.clone(),
            zone: i.zone.clone(),
            capacity_type,
            price_per_hour: self.price(&i.machine_type, &i.zone, capacity_type),
            state: state(&i.status),
            launched_at: i
                .creation_timestamp
                .as_deref()
                .and_then(parse_time)
                .unwrap_or_else(|| self.clock.now()),
            tags: i.labels.clone(),
        }
    }

    /// The instance already launched for `claim` in `project`, if any (not a stopped one).
    async fn existing(
        &self,
        project: &str,
        claim: &str,
    ) -> Result<Option<GceInstance>, CloudError> {
        let filter = format!(
            "({}) AND (labels.{LABEL_NODECLAIM} = \"{}\")",
            self.cluster_filter(),
            label_value(claim)
        );
        let found = self
            .compute
            .list(project.to_owned(), filter)
            .await
            .map_err(|e| map_api_error(&e, None))?;
        Ok(found.into_iter().find(|i| i.status != "TERMINATED"))
    }

    /// Polls the zone operation `op` until it is done; its error, if it carries one.
    async fn wait(
        &self,
        project: &str,
        zone: &str,
        mut op: Operation,
        offering: Option<&LaunchOffering>,
    ) -> Result<(), CloudError> {
        let mut polls = 0;
        while !op.done {
            if polls >= self.operation_wait.max_polls {
                return Err(CloudError::Transient {
                    message: format!("operation {} in {zone} is not done yet", op.name),
                });
            }
            polls += 1;
            tokio::time::sleep(self.operation_wait.poll_interval).await;
            op = self
                .compute
                .get_operation(project.to_owned(), zone.to_owned(), op.name.clone())
                .await
                .map_err(|e| map_api_error(&e, offering))?;
        }
        match map_operation(&op, offering) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The project's reservations as Compute Engine reports them, remembering for each whether
    /// only VMs that name it may consume it.
    async fn list_reservations(&self, project: &str) -> Result<Vec<GceReservation>, CloudError> {
        let found = self
            .compute
            .reservations(project.to_owned())
            .await
            .map_err(|e| map_api_error(&e, None))?;
        let mut known = self
            .specific_required
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for r in &found {
            known.insert(
                (r.zone.clone(), r.name.clone()),
                r.specific_reservation_required,
            );
        }
        Ok(found)
    }

    /// The reservation a reserved launch into `zone` consumes: the one its NodeClaim names, and
    /// whether it must be named (read from the last listing, or listed now).
    async fn reservation_target(
        &self,
        project: &str,
        request: &LaunchRequest,
    ) -> Result<Option<(String, bool)>, CloudError> {
        if request.capacity_type != CapacityType::Reserved {
            return Ok(None);
        }
        let Some(name) = request.labels.get(LABEL_RESERVATION_ID) else {
            return Err(CloudError::InvalidRequest {
                message: format!(
                    "NodeClaim {}: a reserved launch names no reservation (label {LABEL_RESERVATION_ID})",
                    request.claim_name
                ),
            });
        };
        let key = (request.zone.clone(), name.clone());
        let known = |s: &Self| {
            s.specific_required
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                .copied()
        };
        let specific = match known(self) {
            Some(s) => s,
            None => {
                self.list_reservations(project).await?;
                known(self).ok_or_else(|| CloudError::InsufficientCapacity {
                    instance_type: request.instance_type.clone(),
                    zone: request.zone.clone(),
                    capacity_type: CapacityType::Reserved,
                    message: format!(
                        "reservation {name} is not in zone {} of project {project}",
                        request.zone
                    ),
                })?
            }
        };
        Ok(Some((name.clone(), specific)))
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, CloudError> {
        let spec = match &request.node_class_spec {
            Some(NodeClassSpec::Gcp(spec)) => spec.as_ref(),
            Some(_) => {
                return Err(CloudError::InvalidRequest {
                    message: format!(
                        "NodeClass {} is not a GCPNodeClass; the GCP cloud cannot launch it",
                        request.node_class
                    ),
                });
            }
            None => {
                return Err(CloudError::InvalidRequest {
                    message: format!("GCPNodeClass {} was not found", request.node_class),
                });
            }
        };
        self.set_node_class(&request.node_class, spec.clone());
        let mut spec = spec.clone();
        if spec.project.is_empty() {
            spec.project = self.project.clone().unwrap_or_default();
        }
        let project = spec.project.clone();
        // A retried or restarted launch finds the instance it already has: never a second one.
        if project.is_empty() {
            return Err(GcpError::NodeClass(format!(
                "{}: spec.project is empty and no --gcp-project is set",
                request.node_class
            ))
            .into());
        }
        if let Some(i) = self.existing(&project, &request.claim_name).await? {
            tracing::info!(nodeclaim = %request.claim_name, instance = %i.name, "instance already launched");
            return Ok(self.instance(&project, &i));
        }
        let reservation = self.reservation_target(&project, request).await?;
        let mut extra = request.tags.clone();
        extra.insert(LABEL_NODECLASS.to_owned(), request.node_class.clone());
        let inputs = InsertInputs {
            cluster: &self.cluster,
            claim: &request.claim_name,
            node_pool: &request.node_pool,
            node_class: &request.node_class,
            spec: &spec,
            source_instance_template: self.source_instance_template.as_deref(),
            extra_labels: &extra,
            reservation: reservation
                .as_ref()
                .map(|(name, specific_required)| ReservationTarget {
                    name,
                    specific_required: *specific_required,
                }),
        };
        let offerings = request.offerings();
        let secrets = NodeClassSpec::Gcp(Box::new(spec.clone())).secrets();
        let mut failures: Vec<CloudError> = Vec::new();
        for offering in &offerings {
            let accelerator = self
                .catalog
                .get(Cloud::Gcp, &offering.instance_type)
                .and_then(|t| t.accelerator.as_ref());
            let insert = insert_spec(&inputs, offering, accelerator)?;
            let labels = insert.labels.clone();
            let name = insert.name.clone();
            let launched = match self.compute.insert(insert).await {
                Ok(op) => {
                    self.wait(&project, &offering.zone, op, Some(offering))
                        .await
                }
                Err(e) if e.code.as_deref() == Some("alreadyExists") || e.status == Some(409) => {
                    // Our deterministic name exists in this zone: the insert of an earlier try.
                    match self
                        .compute
                        .get(project.clone(), offering.zone.clone(), name.clone())
                        .await
                    {
                        Ok(i) if i.labels.get(LABEL_NODECLAIM) == labels.get(LABEL_NODECLAIM) => {
                            return Ok(self.instance(&project, &i));
                        }
                        _ => Err(map_api_error(&e, Some(offering))),
                    }
                }
                Err(e) => Err(map_api_error(&e, Some(offering))),
            };
            match launched {
                Ok(()) => {
                    return Ok(Instance {
                        provider_id: provider_id(&project, &offering.zone, &name),
                        claim_name: request.claim_name.clone(),
                        instance_type: offering.instance_type.clone(),
                        zone: offering.zone.clone(),
                        capacity_type: offering.capacity_type,
                        price_per_hour: offering.price_per_hour,
                        state: InstanceState::Pending,
                        launched_at: self.clock.now(),
                        tags: labels,
                    });
                }
                // Capacity and quota fall through to the next offering; anything else ends
                // the launch as it is.
                Err(
                    e
                    @ (CloudError::InsufficientCapacity { .. } | CloudError::QuotaExceeded { .. }),
                ) => {
                    let shown = e.clone().scrubbed(&secrets);
                    tracing::info!(nodeclaim = %request.claim_name, instance_type = %offering.instance_type, zone = %offering.zone, error = %shown, "offering unavailable, trying the next");
                    failures.push(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(exhausted(&offerings, &failures))
    }

    async fn get_one(&self, provider_id: &str) -> Result<(String, GceInstance), CloudError> {
        let (project, zone, name) = parsed_provider_id(provider_id)?;
        let i = self
            .compute
            .get(project.to_owned(), zone.to_owned(), name.to_owned())
            .await
            .map_err(|e| map_api_error(&e, None).not_found_as(provider_id))?;
        Ok((project.to_owned(), i))
    }

    /// Interruption events for spot instances that are being (or were) preempted, each once.
    fn preemptions(&self, instances: &[GceInstance], now: DateTime<Utc>) -> Vec<CloudEvent> {
        let project = self.project.clone().unwrap_or_default();
        let mut seen = self.preempted.lock().unwrap_or_else(|e| e.into_inner());
        let mut events = Vec::new();
        for i in instances {
            let stopping = matches!(i.status.as_str(), "STOPPING" | "TERMINATED");
            if !(i.spot && (stopping || i.last_stop_timestamp.is_some())) {
                continue;
            }
            let id = provider_id(&project, &i.zone, &i.name);
            if !seen.insert(id.clone()) {
                continue;
            }
            let terminates_at = i
                .last_stop_timestamp
                .as_deref()
                .and_then(parse_time)
                .unwrap_or(now)
                + ChronoDuration::seconds(PREEMPTION_NOTICE_SECONDS);
            events.push(if i.status == "TERMINATED" {
                CloudEvent::Terminated { provider_id: id }
            } else {
                CloudEvent::Interruption {
                    provider_id: id,
                    terminates_at,
                }
            });
        }
        events
    }
}

/// `gce://PROJECT/ZONE/NAME`, as the GCP cloud controller manager writes a Node's providerID.
pub fn provider_id(project: &str, zone: &str, name: &str) -> String {
    format!("gce://{project}/{zone}/{name}")
}

/// The project, zone and instance name of a provider id.
pub fn parse_provider_id(provider_id: &str) -> Option<(&str, &str, &str)> {
    let rest = provider_id.strip_prefix("gce://")?;
    let mut parts = rest.split('/');
    let (project, zone, name) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || project.is_empty() || zone.is_empty() || name.is_empty() {
        return None;
    }
    Some((project, zone, name))
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The capacity type of an instance as read back: flex-start and spot by its provisioning
/// model; reserved when its `reservationAffinity` names a reservation, or it was launched into
/// one (label [`LABEL_RESERVATION`]); on-demand otherwise.
fn capacity_type(i: &GceInstance) -> CapacityType {
    if i.flex_start {
        CapacityType::FlexStart
    } else if i.spot {
        CapacityType::Spot
    } else if i
        .reservation_affinity
        .as_ref()
        .is_some_and(|a| a.named_reservation().is_some())
        || i.labels.contains_key(LABEL_RESERVATION)
    {
        CapacityType::Reserved
    } else {
        CapacityType::OnDemand
    }
}

/// Statuses of a reservation that takes launches (`UPDATING`: being resized; empty: not
/// reported).
const USABLE_RESERVATION_STATUSES: &[&str] = &["READY", "UPDATING", ""];

/// A reservation as every cloud reports it, priced `on_demand` per instance-hour; `None` for one
/// that takes no launches (being created or deleted) or holds no single machine type (an
/// aggregate reservation).
///
/// Its id is its name (unique in its zone; two zones may hold reservations of the same name,
/// which Quartermaster cannot tell apart). A reservation is kept until it is deleted and VMs
/// consuming it outlive it, so it has no start or end (`deleteAtTime` is not read: nothing is
/// reclaimed at it). GCE reservations have no labels: its only tag is
/// [`TAG_SPECIFIC_RESERVATION_REQUIRED`] when only VMs that name it may consume it.
pub fn reservation(r: &GceReservation, on_demand: f64) -> Option<Reservation> {
    if !USABLE_RESERVATION_STATUSES.contains(&r.status.as_str()) || r.name.is_empty() {
        return None;
    }
    let instance_type = r.machine_type.clone()?;
    let count = u32::try_from(r.count.max(0)).unwrap_or(u32::MAX);
    let in_use = u32::try_from(r.in_use_count.max(0)).unwrap_or(u32::MAX);
    let mut tags = BTreeMap::new();
    if r.specific_reservation_required {
        tags.insert(
            TAG_SPECIFIC_RESERVATION_REQUIRED.to_owned(),
            "true".to_owned(),
        );
    }
    Some(Reservation {
        id: r.name.clone(),
        cloud: Cloud::Gcp,
        instance_type,
        zone: r.zone.clone(),
        count,
        available: Some(count.saturating_sub(in_use)),
        kind: ReservationKind::Default,
        price_per_hour: on_demand,
        start: None,
        end: None,
        tags,
    })
}

fn state(status: &str) -> InstanceState {
    match status {
        // PENDING: a flex-start VM waiting for Dynamic Workload Scheduler capacity.
        "PENDING" | "PROVISIONING" | "STAGING" => InstanceState::Pending,
        "RUNNING" => InstanceState::Running,
        "TERMINATED" => InstanceState::Terminated,
        _ => InstanceState::ShuttingDown,
    }
}

/// Why `instance` no longer matches `spec`: its boot image (or template) label differs.
pub fn drift_reason(instance: &Instance, spec: &GCPNodeClassSpec) -> Option<String> {
    let wanted = source_image(spec).or_else(|| spec.source_instance_template.clone())?;
    let have = instance.tags.get(LABEL_IMAGE)?;
    (*have != image_label(&wanted))
        .then(|| format!("the GCPNodeClass's boot image changed (now {wanted})"))
}

/// `(project, zone, name)` of a `gce://PROJECT/ZONE/NAME` provider id, or why not.
fn parsed_provider_id(provider_id: &str) -> Result<(&str, &str, &str), CloudError> {
    parse_provider_id(provider_id).ok_or_else(|| CloudError::InvalidRequest {
        message: format!("{provider_id:?} is not a GCP provider id (gce://PROJECT/ZONE/NAME)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_round_trip() {
        let p = provider_id("proj", "us-central1-a", "qm-x");
        assert_eq!(p, "gce://proj/us-central1-a/qm-x");
        assert_eq!(
            parse_provider_id(&p),
            Some(("proj", "us-central1-a", "qm-x"))
        );
        assert_eq!(parse_provider_id("aws:///us-east-1a/i-1"), None);
        assert_eq!(parse_provider_id("gce://proj/zone"), None);
        assert_eq!(parse_provider_id("gce://proj/zone/a/b"), None);
    }

    #[test]
    fn statuses_map_to_states() {
        assert_eq!(state("STAGING"), InstanceState::Pending);
        assert_eq!(state("RUNNING"), InstanceState::Running);
        assert_eq!(state("STOPPING"), InstanceState::ShuttingDown);
        assert_eq!(state("TERMINATED"), InstanceState::Terminated);
    }

    #[test]
    fn a_ready_reservation_is_reported_with_its_free_slots_and_whether_it_must_be_named() {
        let r = GceReservation {
            name: "h100-block".into(),
            zone: "us-central1-a".into(),
            machine_type: Some("a3-highgpu-8g".into()),
            count: 4,
            in_use_count: 1,
            specific_reservation_required: true,
            status: "READY".into(),
        };
        let got = reservation(&r, 88.49).unwrap();
        assert_eq!(got.id, "h100-block");
        assert_eq!(got.cloud, Cloud::Gcp);
        assert_eq!((got.count, got.available), (4, Some(3)));
        assert_eq!(got.kind, ReservationKind::Default);
        assert_eq!(got.price_per_hour, 88.49);
        assert_eq!((got.start, got.end), (None, None));
        assert_eq!(got.tags[TAG_SPECIFIC_RESERVATION_REQUIRED], "true");
        // Consumed automatically: no tag. Over-consumed (GCE counts others' VMs): none free.
        let open = GceReservation {
            specific_reservation_required: false,
            in_use_count: 9,
            ..r.clone()
        };
        let got = reservation(&open, 0.0).unwrap();
        assert!(got.tags.is_empty());
        assert_eq!(got.available, Some(0));
        // Being created or deleted, or of no single machine type: not offered.
        for status in ["CREATING", "DELETING"] {
            let r = GceReservation {
                status: status.into(),
                ..r.clone()
            };
            assert_eq!(reservation(&r, 0.0), None);
        }
        let aggregate = GceReservation {
            machine_type: None,
            ..r.clone()
        };
        assert_eq!(reservation(&aggregate, 0.0), None);
    }

    #[test]
    fn capacity_types_read_back_from_provisioning_model_and_reservation_affinity() {
        use crate::port::ReservationAffinity;
        let plain = GceInstance::default();
        assert_eq!(capacity_type(&plain), CapacityType::OnDemand);
        let flex = GceInstance {
            flex_start: true,
            reservation_affinity: Some(ReservationAffinity::NoReservation),
            ..GceInstance::default()
        };
        assert_eq!(capacity_type(&flex), CapacityType::FlexStart);
        let spot = GceInstance {
            spot: true,
            ..GceInstance::default()
        };
        assert_eq!(capacity_type(&spot), CapacityType::Spot);
        let named = GceInstance {
            reservation_affinity: Some(ReservationAffinity::specific("h100-block")),
            ..GceInstance::default()
        };
        assert_eq!(capacity_type(&named), CapacityType::Reserved);
        let any = GceInstance {
            reservation_affinity: Some(ReservationAffinity::Any),
            ..GceInstance::default()
        };
        assert_eq!(capacity_type(&any), CapacityType::OnDemand);
        let launched_into_one = GceInstance {
            reservation_affinity: Some(ReservationAffinity::Any),
            labels: BTreeMap::from([(LABEL_RESERVATION.to_owned(), "h100-open".to_owned())]),
            ..GceInstance::default()
        };
        assert_eq!(capacity_type(&launched_into_one), CapacityType::Reserved);
        assert_eq!(state("PENDING"), InstanceState::Pending);
    }
}
