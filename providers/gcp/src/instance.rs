//! What one insert sends, as a pure function of the NodeClaim, the offering and the
//! GCPNodeClass: machine type, guest accelerators, spot or flex-start scheduling, the
//! reservation affinity, labels, boot image.

use std::collections::BTreeMap;

use quartermaster_cloud::LaunchOffering;
use quartermaster_policies::GCPNodeClassSpec;
use quartermaster_pricing::flex_start::FLEX_START_MAX_RUN;
use quartermaster_pricing::{Accelerator as CatalogAccelerator, CapacityType};

use crate::errors::GcpError;
use crate::names::{image_label, instance_name, label_key, label_value, request_id};
use crate::port::{Accelerator, InsertSpec, ReservationAffinity};

/// Machine families whose GPUs come with the machine type (A2, A3, A4, G2, G4): they take no
/// `guestAccelerators`.
const BUILTIN_GPU_FAMILIES: &[&str] = &["a2-", "a3-", "a4-", "a4x-", "g2-", "g4-"];

/// Who and what an insert is for.
#[derive(Debug, Clone, Copy)]
pub struct InsertInputs<'a> {
    /// Cluster name (label `quartermaster-cluster`).
    pub cluster: &'a str,
    /// NodeClaim name.
    pub claim: &'a str,
    /// NodePool name.
    pub node_pool: &'a str,
    /// NodeClass name (for messages).
    pub node_class: &'a str,
    /// The GCPNodeClass.
    pub spec: &'a GCPNodeClassSpec,
    /// The GKE node pool instance template to start from, if any (the controller's setting;
    /// it carries the boot image and the `kube-env` metadata that joins the cluster).
    pub source_instance_template: Option<&'a str>,
    /// Labels of the request (`tags`), converted to label syntax.
    pub extra_labels: &'a BTreeMap<String, String>,
    /// The reservation a reserved offering launches into (the claim's).
    pub reservation: Option<ReservationTarget<'a>>,
}

/// The reservation a reserved launch consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservationTarget<'a> {
    /// Its name.
    pub name: &'a str,
    /// `specificReservationRequired`: only VMs naming it may consume it. Otherwise VMs consume
    /// it automatically and Compute Engine refuses to let one name it ("can not be targeted as
    /// specificReservationRequired is not set").
    pub specific_required: bool,
}

/// The `reservationAffinity` of a launch on `offering`:
/// * reserved: `SPECIFIC_RESERVATION` naming the reservation when only named VMs may consume
///   it; `ANY_RESERVATION` for one VMs consume automatically (it cannot be named);
/// * flex-start: `NO_RESERVATION` (flex-start VMs cannot consume reservations);
/// * anything else from a class that sets `reservationAffinity`: `NO_RESERVATION`, so an
///   on-demand node never takes a slot the engine counts as free (reservations are used only
///   by launches into them);
/// * anything else: none sent (GCE's default, or the instance template's).
pub fn reservation_affinity(
    spec: &GCPNodeClassSpec,
    offering: &LaunchOffering,
    reservation: Option<ReservationTarget<'_>>,
) -> Option<ReservationAffinity> {
    match (offering.capacity_type, reservation) {
        (CapacityType::Reserved, Some(r)) if r.specific_required => {
            Some(ReservationAffinity::specific(r.name))
        }
        (CapacityType::Reserved, _) => Some(ReservationAffinity::Any),
        (CapacityType::FlexStart, _) => Some(ReservationAffinity::NoReservation),
        _ if spec.reservation_affinity.is_some() => Some(ReservationAffinity::NoReservation),
        _ => None,
    }
}

/// The provisioning model an offering launches with, as the request id spells it.
fn provisioning(capacity_type: CapacityType) -> &'static str {
    match capacity_type {
        CapacityType::Spot => "spot",
        CapacityType::OnDemand => "standard",
        CapacityType::Reserved => "reserved",
        CapacityType::FlexStart => "flex-start",
    }
}

/// Whether `machine_type` carries its GPUs itself.
pub fn has_builtin_gpus(machine_type: &str) -> bool {
    BUILTIN_GPU_FAMILIES
        .iter()
        .any(|f| machine_type.starts_with(f))
}

/// The Compute Engine accelerator type of a catalog GPU model (`t4` -> `nvidia-tesla-t4`).
pub fn accelerator_type(model: &str) -> String {
    match model {
        "t4" | "v100" | "p100" | "p4" | "k80" | "a100" => format!("nvidia-tesla-{model}"),
        other => format!("nvidia-{other}"),
    }
}

/// The `guestAccelerators` of `machine_type` with the catalog's accelerator: none for families
/// that carry their GPUs (A2/A3/G2), the catalog's GPUs for the rest (N1 + T4).
pub fn guest_accelerators(
    machine_type: &str,
    accelerator: Option<&CatalogAccelerator>,
) -> Vec<Accelerator> {
    if has_builtin_gpus(machine_type) {
        return Vec::new();
    }
    match accelerator {
        Some(a) if a.manufacturer == "nvidia" && a.count > 0 => vec![Accelerator {
            accelerator_type: accelerator_type(&a.name),
            count: i32::try_from(a.count).unwrap_or(i32::MAX),
        }],
        _ => Vec::new(),
    }
}

/// The labels of an instance: the NodeClass's, the request's, then ours (which win).
pub fn labels(inputs: &InsertInputs<'_>) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = inputs
        .spec
        .labels
        .iter()
        .chain(inputs.extra_labels.iter())
        .map(|(k, v)| (label_key(k), label_value(v)))
        .collect();
    labels.insert(crate::LABEL_CLUSTER.to_owned(), label_value(inputs.cluster));
    labels.insert(
        crate::LABEL_NODEPOOL.to_owned(),
        label_value(inputs.node_pool),
    );
    labels.insert(crate::LABEL_NODECLAIM.to_owned(), label_value(inputs.claim));
    labels
}

/// The boot image URL the GCPNodeClass names, if it names one.
pub fn source_image(spec: &GCPNodeClassSpec) -> Option<String> {
    let image = spec.image.as_ref()?;
    if let Some(link) = &image.self_link {
        return Some(link.clone());
    }
    image.family.as_ref().map(|family| {
        let project = image.project.as_deref().unwrap_or(&spec.project);
        format!("projects/{project}/global/images/family/{family}")
    })
}

/// The insert of `inputs.claim` on `offering`.
pub fn insert_spec(
    inputs: &InsertInputs<'_>,
    offering: &LaunchOffering,
    accelerator: Option<&CatalogAccelerator>,
) -> Result<InsertSpec, GcpError> {
    let spec = inputs.spec;
    if spec.project.is_empty() {
        return Err(GcpError::NodeClass(format!(
            "{}: spec.project is empty",
            inputs.node_class
        )));
    }
    let image = source_image(spec);
    let template = spec
        .source_instance_template
        .as_deref()
        .or(inputs.source_instance_template);
    if template.is_none() && image.is_none() {
        return Err(GcpError::NodeClass(format!(
            "{}: no boot image (spec.image) and no instance template to take one from",
            inputs.node_class
        )));
    }
    let accelerators = guest_accelerators(&offering.instance_type, accelerator);
    let gpu = has_builtin_gpus(&offering.instance_type) || !accelerators.is_empty();
    let spot = offering.capacity_type == CapacityType::Spot;
    let flex_start = offering.capacity_type == CapacityType::FlexStart;
    let reservation = inputs
        .reservation
        .filter(|_| offering.capacity_type == CapacityType::Reserved);
    if offering.capacity_type == CapacityType::Reserved && reservation.is_none() {
        return Err(GcpError::NodeClass(format!(
            "NodeClaim {}: a reserved launch names no reservation (label {})",
            inputs.claim,
            quartermaster_pricing::reservation::LABEL_RESERVATION_ID
        )));
    }
    Ok(InsertSpec {
        project: spec.project.clone(),
        zone: offering.zone.clone(),
        name: instance_name(inputs.claim),
        machine_type: offering.instance_type.clone(),
        accelerators,
        spot,
        flex_start,
        max_run_duration_seconds: flex_start.then(|| FLEX_START_MAX_RUN.num_seconds()),
        reservation_affinity: reservation_affinity(spec, offering, reservation),
        terminate_on_host_maintenance: gpu || spot || flex_start,
        labels: {
            let mut labels = labels(inputs);
            if let Some(boot) = image.as_deref().or(template) {
                labels.insert(crate::LABEL_IMAGE.to_owned(), image_label(boot));
            }
            if let Some(r) = reservation {
                labels.insert(crate::LABEL_RESERVATION.to_owned(), label_value(r.name));
            }
            labels
        },
        source_instance_template: template.map(str::to_owned),
        source_image: image,
        disk_size_gib: spec.disk.as_ref().and_then(|d| d.size_gib),
        disk_type: spec.disk.as_ref().and_then(|d| d.disk_type.clone()),
        metadata: spec.metadata.clone(),
        network: spec.network.clone(),
        subnetwork: spec.subnetwork.clone(),
        service_account: spec.service_account.clone(),
        network_tags: spec.tags.clone(),
        request_id: request_id(
            inputs.claim,
            &offering.instance_type,
            &offering.zone,
            provisioning(offering.capacity_type),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quartermaster_policies::nodeclass::gcp::GcpImage;

    fn spec() -> GCPNodeClassSpec {
        GCPNodeClassSpec {
            project: "proj".into(),
            region: "us-central1".into(),
            zones: vec![],
            image: Some(GcpImage {
                family: Some("cos-stable".into()),
                project: Some("cos-cloud".into()),
                self_link: None,
            }),
            network: None,
            subnetwork: None,
            service_account: None,
            labels: BTreeMap::from([("team".into(), "ML".into())]),
            tags: vec![],
            disk: None,
            source_instance_template: None,
            metadata: BTreeMap::new(),
            reservation_affinity: None,
        }
    }

    fn offering(t: &str, capacity_type: CapacityType) -> LaunchOffering {
        LaunchOffering {
            instance_type: t.into(),
            zone: "us-central1-a".into(),
            capacity_type,
            price_per_hour: 1.0,
        }
    }

    fn t4() -> CatalogAccelerator {
        CatalogAccelerator {
            manufacturer: "nvidia".into(),
            name: "t4".into(),
            count: 1,
            memory_mib: 16384,
            resource: "nvidia.com/gpu".into(),
            fraction: None,
        }
    }

    fn inputs<'a>(
        spec: &'a GCPNodeClassSpec,
        extra: &'a BTreeMap<String, String>,
    ) -> InsertInputs<'a> {
        InsertInputs {
            cluster: "prod",
            claim: "gpu-abc",
            node_pool: "gpu",
            node_class: "default",
            spec,
            source_instance_template: None,
            extra_labels: extra,
            reservation: None,
        }
    }

    #[test]
    fn a2_carries_its_gpus_and_spot_is_deleted_on_preemption() {
        let s = spec();
        let extra = BTreeMap::new();
        let i = insert_spec(
            &inputs(&s, &extra),
            &offering("a2-highgpu-1g", CapacityType::Spot),
            None,
        )
        .unwrap();
        assert!(i.accelerators.is_empty());
        assert!(i.spot && i.terminate_on_host_maintenance);
        assert_eq!(i.name, "qm-gpu-abc");
        assert_eq!(
            i.source_image.as_deref(),
            Some("projects/cos-cloud/global/images/family/cos-stable")
        );
        assert_eq!(i.labels["quartermaster-nodeclaim"], "gpu-abc");
        assert_eq!(i.labels["quartermaster-cluster"], "prod");
        assert_eq!(i.labels["team"], "ml");
    }

    #[test]
    fn n1_with_a_t4_gets_guest_accelerators_and_terminates_on_maintenance() {
        let s = spec();
        let extra = BTreeMap::new();
        let i = insert_spec(
            &inputs(&s, &extra),
            &offering("n1-standard-8", CapacityType::OnDemand),
            Some(&t4()),
        )
        .unwrap();
        assert_eq!(
            i.accelerators,
            vec![Accelerator {
                accelerator_type: "nvidia-tesla-t4".into(),
                count: 1
            }]
        );
        assert!(!i.spot && i.terminate_on_host_maintenance);
    }

    #[test]
    fn a_cpu_type_on_demand_may_live_migrate() {
        let s = spec();
        let extra = BTreeMap::new();
        let i = insert_spec(
            &inputs(&s, &extra),
            &offering("n2-standard-8", CapacityType::OnDemand),
            None,
        )
        .unwrap();
        assert!(i.accelerators.is_empty() && !i.terminate_on_host_maintenance);
    }

    #[test]
    fn no_image_and_no_template_is_a_clear_error() {
        let mut s = spec();
        s.image = None;
        let extra = BTreeMap::new();
        let e = insert_spec(
            &inputs(&s, &extra),
            &offering("n2-standard-8", CapacityType::OnDemand),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no boot image"), "{e}");
        let mut with_template = inputs(&s, &extra);
        with_template.source_instance_template =
            Some("projects/proj/global/instanceTemplates/gke-pool");
        let i = insert_spec(
            &with_template,
            &offering("n2-standard-8", CapacityType::OnDemand),
            None,
        )
        .unwrap();
        assert!(i.source_instance_template.is_some() && i.source_image.is_none());
    }

    #[test]
    fn a_reserved_launch_names_a_reservation_only_named_vms_may_use() {
        let s = spec();
        let extra = BTreeMap::new();
        let mut into = inputs(&s, &extra);
        into.reservation = Some(ReservationTarget {
            name: "h100-block",
            specific_required: true,
        });
        let i = insert_spec(
            &into,
            &offering("a3-highgpu-8g", CapacityType::Reserved),
            None,
        )
        .unwrap();
        assert_eq!(
            i.reservation_affinity,
            Some(ReservationAffinity::Specific {
                key: "compute.googleapis.com/reservation-name".into(),
                values: vec!["h100-block".into()],
            })
        );
        assert_eq!(i.labels["quartermaster-reservation"], "h100-block");
        assert!(!i.spot && !i.flex_start && i.max_run_duration_seconds.is_none());
        // One VMs consume automatically cannot be named: the launch asks for any.
        into.reservation = Some(ReservationTarget {
            name: "h100-open",
            specific_required: false,
        });
        let i = insert_spec(
            &into,
            &offering("a3-highgpu-8g", CapacityType::Reserved),
            None,
        )
        .unwrap();
        assert_eq!(i.reservation_affinity, Some(ReservationAffinity::Any));
        // Without a reservation, a reserved launch is refused.
        into.reservation = None;
        let e = insert_spec(
            &into,
            &offering("a3-highgpu-8g", CapacityType::Reserved),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("names no reservation"), "{e}");
    }

    #[test]
    fn flex_start_runs_seven_days_and_never_consumes_a_reservation() {
        let s = spec();
        let extra = BTreeMap::new();
        let i = insert_spec(
            &inputs(&s, &extra),
            &offering("a3-highgpu-8g", CapacityType::FlexStart),
            None,
        )
        .unwrap();
        assert!(i.flex_start && !i.spot && i.terminate_on_host_maintenance);
        assert_eq!(i.max_run_duration_seconds, Some(7 * 24 * 3600));
        assert_eq!(
            i.reservation_affinity,
            Some(ReservationAffinity::NoReservation)
        );
        assert!(!i.labels.contains_key("quartermaster-reservation"));
        let on_demand = insert_spec(
            &inputs(&s, &extra),
            &offering("a3-highgpu-8g", CapacityType::OnDemand),
            None,
        )
        .unwrap();
        assert_ne!(i.request_id, on_demand.request_id);
    }

    #[test]
    fn other_launches_take_no_reservation_only_when_the_class_sets_an_affinity() {
        use quartermaster_policies::nodeclass::gcp::{
            ConsumeReservationType, GcpReservationAffinity,
        };
        let mut s = spec();
        let extra = BTreeMap::new();
        let on_demand = offering("a2-highgpu-1g", CapacityType::OnDemand);
        // A class that never mentions reservations: GCE's default, as before.
        let i = insert_spec(&inputs(&s, &extra), &on_demand, None).unwrap();
        assert_eq!(i.reservation_affinity, None);
        for kind in [
            ConsumeReservationType::AnyReservation,
            ConsumeReservationType::NoReservation,
        ] {
            s.reservation_affinity = Some(GcpReservationAffinity {
                consume_reservation_type: kind,
                key: None,
                values: vec![],
            });
            for o in [
                on_demand.clone(),
                offering("a2-highgpu-1g", CapacityType::Spot),
            ] {
                let i = insert_spec(&inputs(&s, &extra), &o, None).unwrap();
                assert_eq!(
                    i.reservation_affinity,
                    Some(ReservationAffinity::NoReservation),
                    "{kind:?} {o:?}"
                );
            }
        }
    }
}
