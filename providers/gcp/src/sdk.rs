//! The [`Compute`] port over `google-cloud-compute-v1`. SDK types stop here.

use std::collections::BTreeMap;
use std::time::Duration;

use google_cloud_compute_v1::client::{Instances, Reservations, ZoneOperations, Zones};
use google_cloud_compute_v1::model;
use google_cloud_compute_v1::model::reservation_affinity::ConsumeReservationType;
use google_cloud_compute_v1::model::scheduling::{
    InstanceTerminationAction, OnHostMaintenance, ProvisioningModel,
};
use google_cloud_gax::error::Error as SdkError;
use google_cloud_gax::error::rpc::StatusDetails;

use crate::config::GcpSettings;
use crate::errors::GcpError;
use crate::port::{
    ApiError, ApiErrorKind, Compute, GceInstance, GceReservation, InsertSpec, Operation,
    PortFuture, ReservationAffinity,
};
use crate::rate::RateLimits;

/// The port over the SDK's clients.
#[derive(Debug, Clone)]
pub struct SdkCompute {
    instances: Instances,
    operations: ZoneOperations,
    reservations: Reservations,
    zones: Zones,
    limits: RateLimits,
}

impl SdkCompute {
    /// Clients configured by `settings`: endpoint, credentials (anonymous or the default chain),
    /// retries (off unless asked), attempt timeout.
    pub async fn connect(settings: &GcpSettings) -> Result<Self, GcpError> {
        // The SDK is built without its aws-lc provider: TLS uses ring, as kube does here. A
        // provider installed earlier (by kube or a test) is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Every client gets the same endpoint, credentials, retry policy and attempt timeout.
        macro_rules! client {
            ($client:ty, $what:literal) => {{
                let mut b = <$client>::builder().with_attempt_timeout(settings.attempt_timeout);
                if let Some(e) = &settings.endpoint {
                    b = b.with_endpoint(e.clone());
                }
                if settings.anonymous {
                    b = b.with_credentials(
                        google_cloud_auth::credentials::anonymous::Builder::new().build(),
                    );
                }
                if !settings.sdk_retries {
                    b = b.with_retry_policy(google_cloud_gax::retry_policy::NeverRetry);
                }
                b.build()
                    .await
                    .map_err(|e| GcpError::Settings(format!("{} client: {e}", $what)))?
            }};
        }
        let instances = client!(Instances, "Compute Engine instances");
        let operations = client!(ZoneOperations, "zone operations");
        let zones = client!(Zones, "zones");
        let reservations = client!(Reservations, "reservations");
        Ok(Self {
            instances,
            operations,
            reservations,
            zones,
            limits: settings.rate_limits.limits(),
        })
    }
}

/// The last path segment of a URL (`.../zones/us-central1-a` -> `us-central1-a`).
fn last_segment(url: &str) -> String {
    url.rsplit('/').next().unwrap_or(url).to_owned()
}

fn api_error(e: SdkError) -> ApiError {
    let retry_after = e
        .http_headers()
        .and_then(|h| h.get("retry-after"))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let status = e.http_status_code();
    if let Some(s) = e.status() {
        let reason = s.details.iter().find_map(|d| match d {
            StatusDetails::ErrorInfo(info) if !info.reason.is_empty() => Some(info.reason.clone()),
            _ => None,
        });
        return ApiError {
            kind: ApiErrorKind::Service,
            code: reason,
            message: s.message.clone(),
            status,
            retry_after,
        };
    }
    let kind = if e.is_timeout() {
        ApiErrorKind::Timeout
    } else if e.is_authentication() {
        ApiErrorKind::Credential
    } else if e.is_serialization() || e.is_deserialization() {
        ApiErrorKind::Response
    } else if status.is_some() {
        ApiErrorKind::Service
    } else {
        ApiErrorKind::Dispatch
    };
    let message = match e.http_payload() {
        Some(p) if !p.is_empty() => format!("{e}: {}", String::from_utf8_lossy(p)),
        _ => e.to_string(),
    };
    ApiError {
        kind,
        code: None,
        message,
        status,
        retry_after,
    }
}

/// `i`, whose zone is `zone` when the answer leaves it out (the zone asked for, or the
/// aggregated list's key): without one its provider id could never be parsed again, so it could
/// never be deleted.
fn instance_in(zone: &str, mut i: model::Instance) -> GceInstance {
    if i.zone.as_deref().is_none_or(str::is_empty) {
        i.zone = Some(last_segment(zone));
    }
    instance(i)
}

fn instance(i: model::Instance) -> GceInstance {
    let spot = i
        .scheduling
        .as_ref()
        .and_then(|s| s.provisioning_model.as_ref())
        .is_some_and(|m| *m == ProvisioningModel::Spot)
        || i.scheduling.as_ref().and_then(|s| s.preemptible) == Some(true);
    let flex_start = i
        .scheduling
        .as_ref()
        .and_then(|s| s.provisioning_model.as_ref())
        .is_some_and(|m| *m == ProvisioningModel::FlexStart);
    GceInstance {
        name: i.name.unwrap_or_default(),
        zone: i.zone.as_deref().map(last_segment).unwrap_or_default(),
        machine_type: i
            .machine_type
            .as_deref()
            .map(last_segment)
            .unwrap_or_default(),
        status: i
            .status
            .as_ref()
            .and_then(|s| s.name())
            .unwrap_or("UNKNOWN")
            .to_owned(),
        spot,
        flex_start,
        reservation_affinity: i.reservation_affinity.map(affinity_from),
        creation_timestamp: i.creation_timestamp,
        last_stop_timestamp: i.last_stop_timestamp,
        labels: i.labels.into_iter().collect(),
    }
}

fn operation(op: model::Operation) -> Operation {
    let errors = op
        .error
        .map(|e| {
            e.errors
                .into_iter()
                .map(|x| (x.code.unwrap_or_default(), x.message.unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    Operation {
        name: op.name.unwrap_or_default(),
        done: op.status.as_ref().and_then(|s| s.name()) == Some("DONE"),
        errors,
        http_status: op
            .http_error_status_code
            .and_then(|c| u16::try_from(c).ok()),
    }
}

/// A `reservationAffinity` as we read it.
fn affinity_from(a: model::ReservationAffinity) -> ReservationAffinity {
    match a.consume_reservation_type {
        Some(ConsumeReservationType::AnyReservation) | None => ReservationAffinity::Any,
        Some(ConsumeReservationType::NoReservation) => ReservationAffinity::NoReservation,
        Some(ConsumeReservationType::SpecificReservation) => ReservationAffinity::Specific {
            key: a.key.unwrap_or_default(),
            values: a.values,
        },
        Some(other) => ReservationAffinity::Other(other.name().unwrap_or("UNKNOWN").to_owned()),
    }
}

/// A `reservationAffinity` as we send it.
fn affinity_to(a: &ReservationAffinity) -> model::ReservationAffinity {
    let t = model::ReservationAffinity::new();
    match a {
        ReservationAffinity::Any => {
            t.set_consume_reservation_type(ConsumeReservationType::AnyReservation)
        }
        ReservationAffinity::NoReservation => {
            t.set_consume_reservation_type(ConsumeReservationType::NoReservation)
        }
        ReservationAffinity::Specific { key, values } => t
            .set_consume_reservation_type(ConsumeReservationType::SpecificReservation)
            .set_key(key.clone())
            .set_values(values.clone()),
        ReservationAffinity::Other(name) => {
            t.set_consume_reservation_type(ConsumeReservationType::from(name.as_str()))
        }
    }
}

/// A reservation as we read it; `zone` is the aggregated list's key, for when it leaves the
/// reservation's zone out.
fn reservation_in(zone: &str, r: model::Reservation) -> GceReservation {
    let specific = r.specific_reservation.unwrap_or_default();
    GceReservation {
        name: r.name.unwrap_or_default(),
        zone: r
            .zone
            .as_deref()
            .filter(|z| !z.is_empty())
            .map_or_else(|| last_segment(zone), last_segment),
        machine_type: specific
            .instance_properties
            .and_then(|p| p.machine_type)
            .filter(|m| !m.is_empty())
            .map(|m| last_segment(&m)),
        count: specific.count.unwrap_or(0),
        in_use_count: specific.in_use_count.unwrap_or(0),
        specific_reservation_required: r.specific_reservation_required.unwrap_or(false),
        status: r
            .status
            .as_ref()
            .and_then(|s| s.name())
            .unwrap_or_default()
            .to_owned(),
    }
}

fn body(spec: &InsertSpec) -> model::Instance {
    let zone = &spec.zone;
    let mut scheduling = model::Scheduling::new();
    if spec.spot {
        scheduling = scheduling
            .set_provisioning_model(ProvisioningModel::Spot)
            .set_instance_termination_action(InstanceTerminationAction::Delete)
            .set_automatic_restart(false);
    }
    if spec.flex_start {
        scheduling = scheduling
            .set_provisioning_model(ProvisioningModel::FlexStart)
            .set_instance_termination_action(InstanceTerminationAction::Delete)
            .set_automatic_restart(false);
    }
    if let Some(seconds) = spec.max_run_duration_seconds {
        scheduling = scheduling.set_max_run_duration(model::Duration::new().set_seconds(seconds));
    }
    if spec.terminate_on_host_maintenance {
        scheduling = scheduling.set_on_host_maintenance(OnHostMaintenance::Terminate);
    }
    let mut i = model::Instance::new()
        .set_name(spec.name.clone())
        .set_machine_type(format!("zones/{zone}/machineTypes/{}", spec.machine_type))
        .set_labels(spec.labels.clone())
        .set_scheduling(scheduling)
        .set_guest_accelerators(spec.accelerators.iter().map(|a| {
            model::AcceleratorConfig::new()
                .set_accelerator_type(format!(
                    "projects/{}/zones/{zone}/acceleratorTypes/{}",
                    spec.project, a.accelerator_type
                ))
                .set_accelerator_count(a.count)
        }));
    if let Some(image) = &spec.source_image {
        let mut params = model::AttachedDiskInitializeParams::new()
            .set_source_image(image.clone())
            .set_labels(spec.labels.clone());
        if let Some(size) = spec.disk_size_gib {
            params = params.set_disk_size_gb(size);
        }
        if let Some(t) = &spec.disk_type {
            params = params.set_disk_type(format!("zones/{zone}/diskTypes/{t}"));
        }
        i = i.set_disks([model::AttachedDisk::new()
            .set_boot(true)
            .set_auto_delete(true)
            .set_initialize_params(params)]);
    }
    if !spec.metadata.is_empty() {
        i = i.set_metadata(
            model::Metadata::new().set_items(spec.metadata.iter().map(|(k, v)| {
                model::metadata::Items::new()
                    .set_key(k.clone())
                    .set_value(v.clone())
            })),
        );
    }
    if spec.network.is_some() || spec.subnetwork.is_some() {
        let mut nic = model::NetworkInterface::new();
        if let Some(n) = &spec.network {
            nic = nic.set_network(n.clone());
        }
        if let Some(s) = &spec.subnetwork {
            nic = nic.set_subnetwork(s.clone());
        }
        i = i.set_network_interfaces([nic]);
    }
    if let Some(sa) = &spec.service_account {
        i = i.set_service_accounts([model::ServiceAccount::new()
            .set_email(sa.clone())
            .set_scopes(["https://www.googleapis.com/auth/cloud-platform"])]);
    }
    if !spec.network_tags.is_empty() {
        i = i.set_tags(model::Tags::new().set_items(spec.network_tags.clone()));
    }
    if let Some(a) = &spec.reservation_affinity {
        i = i.set_reservation_affinity(affinity_to(a));
    }
    i
}

impl Compute for SdkCompute {
    fn insert(&self, spec: InsertSpec) -> PortFuture<'_, Operation> {
        Box::pin(async move {
            self.limits.write().await;
            let op = self
                .instances
                .insert()
                .set_project(spec.project.clone())
                .set_zone(spec.zone.clone())
                .set_request_id(spec.request_id.clone())
                .set_or_clear_source_instance_template(spec.source_instance_template.clone())
                .set_body(body(&spec))
                .send()
                .await
                .map_err(api_error)?;
            Ok(operation(op))
        })
    }

    fn get(&self, project: String, zone: String, name: String) -> PortFuture<'_, GceInstance> {
        Box::pin(async move {
            self.limits.read().await;
            let i = self
                .instances
                .get()
                .set_project(project)
                .set_zone(zone.clone())
                .set_instance(name)
                .send()
                .await
                .map_err(api_error)?;
            Ok(instance_in(&zone, i))
        })
    }

    fn list(&self, project: String, filter: String) -> PortFuture<'_, Vec<GceInstance>> {
        Box::pin(async move {
            let mut out = Vec::new();
            let mut token: Option<String> = None;
            loop {
                self.limits.read().await;
                let page = self
                    .instances
                    .aggregated_list()
                    .set_project(project.clone())
                    .set_filter(filter.clone())
                    .set_or_clear_page_token(token.clone())
                    .send()
                    .await
                    .map_err(api_error)?;
                let zones: BTreeMap<_, _> = page.items.into_iter().collect();
                for (key, scoped) in zones {
                    out.extend(scoped.instances.into_iter().map(|i| instance_in(&key, i)));
                }
                match page.next_page_token.filter(|t| !t.is_empty()) {
                    Some(t) => token = Some(t),
                    None => break,
                }
            }
            Ok(out)
        })
    }

    fn delete(&self, project: String, zone: String, name: String) -> PortFuture<'_, Operation> {
        Box::pin(async move {
            self.limits.write().await;
            let op = self
                .instances
                .delete()
                .set_project(project)
                .set_zone(zone)
                .set_instance(name)
                .send()
                .await
                .map_err(api_error)?;
            Ok(operation(op))
        })
    }

    fn reset(&self, project: String, zone: String, name: String) -> PortFuture<'_, Operation> {
        Box::pin(async move {
            self.limits.write().await;
            let op = self
                .instances
                .reset()
                .set_project(project)
                .set_zone(zone)
                .set_instance(name)
                .send()
                .await
                .map_err(api_error)?;
            Ok(operation(op))
        })
    }

    fn reservations(&self, project: String) -> PortFuture<'_, Vec<GceReservation>> {
        Box::pin(async move {
            let mut out = Vec::new();
            let mut token: Option<String> = None;
            loop {
                self.limits.read().await;
                let page = self
                    .reservations
                    .aggregated_list()
                    .set_project(project.clone())
                    .set_or_clear_page_token(token.clone())
                    .send()
                    .await
                    .map_err(api_error)?;
                let zones: BTreeMap<_, _> = page.items.into_iter().collect();
                for (key, scoped) in zones {
                    out.extend(
                        scoped
                            .reservations
                            .into_iter()
                            .map(|r| reservation_in(&key, r)),
                    );
                }
                match page.next_page_token.filter(|t| !t.is_empty()) {
                    Some(t) => token = Some(t),
                    None => break,
                }
            }
            Ok(out)
        })
    }

    fn get_zone(&self, project: String, zone: String) -> PortFuture<'_, String> {
        Box::pin(async move {
            self.limits.read().await;
            let z = self
                .zones
                .get()
                .set_project(project)
                .set_zone(zone)
                .send()
                .await
                .map_err(api_error)?;
            Ok(z.status
                .as_ref()
                .and_then(|s| s.name())
                .unwrap_or("UNKNOWN")
                .to_owned())
        })
    }

    fn get_operation(
        &self,
        project: String,
        zone: String,
        name: String,
    ) -> PortFuture<'_, Operation> {
        Box::pin(async move {
            self.limits.read().await;
            let op = self
                .operations
                .get()
                .set_project(project)
                .set_zone(zone)
                .set_operation(name)
                .send()
                .await
                .map_err(api_error)?;
            Ok(operation(op))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_become_names() {
        assert_eq!(
            last_segment("https://x/projects/p/zones/us-central1-a"),
            "us-central1-a"
        );
        assert_eq!(last_segment("a2-highgpu-1g"), "a2-highgpu-1g");
    }

    #[test]
    fn a_spot_gpu_body_has_spot_scheduling_and_accelerators() {
        let spec = InsertSpec {
            project: "p".into(),
            zone: "us-central1-a".into(),
            name: "qm-x".into(),
            machine_type: "n1-standard-8".into(),
            accelerators: vec![crate::port::Accelerator {
                accelerator_type: "nvidia-tesla-t4".into(),
                count: 1,
            }],
            spot: true,
            terminate_on_host_maintenance: true,
            source_image: Some("projects/cos-cloud/global/images/family/cos-stable".into()),
            ..InsertSpec::default()
        };
        let json = serde_json::to_value(body(&spec)).unwrap();
        assert_eq!(json["scheduling"]["provisioningModel"], "SPOT");
        assert_eq!(json["scheduling"]["instanceTerminationAction"], "DELETE");
        assert_eq!(json["scheduling"]["onHostMaintenance"], "TERMINATE");
        assert_eq!(
            json["machineType"],
            "zones/us-central1-a/machineTypes/n1-standard-8"
        );
        assert_eq!(
            json["guestAccelerators"][0]["acceleratorType"],
            "projects/p/zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4"
        );
        assert_eq!(json["disks"][0]["boot"], true);
    }

    #[test]
    fn a_flex_start_body_has_compute_engines_field_names() {
        let spec = InsertSpec {
            project: "p".into(),
            zone: "us-central1-a".into(),
            name: "qm-x".into(),
            machine_type: "a3-highgpu-8g".into(),
            flex_start: true,
            max_run_duration_seconds: Some(604_800),
            terminate_on_host_maintenance: true,
            reservation_affinity: Some(ReservationAffinity::NoReservation),
            ..InsertSpec::default()
        };
        let json = serde_json::to_value(body(&spec)).unwrap();
        let s = &json["scheduling"];
        assert_eq!(s["provisioningModel"], "FLEX_START");
        assert_eq!(s["maxRunDuration"]["seconds"], "604800");
        assert_eq!(s["instanceTerminationAction"], "DELETE");
        assert_eq!(s["onHostMaintenance"], "TERMINATE");
        assert_eq!(s["automaticRestart"], false);
        assert_eq!(
            json["reservationAffinity"]["consumeReservationType"],
            "NO_RESERVATION"
        );
        // And they read back.
        let back: model::Instance = serde_json::from_value(json).unwrap();
        let i = instance(back);
        assert!(i.flex_start && !i.spot);
        assert_eq!(
            i.reservation_affinity,
            Some(ReservationAffinity::NoReservation)
        );
    }

    #[test]
    fn a_reserved_body_names_its_reservation() {
        let spec = InsertSpec {
            zone: "us-central1-a".into(),
            machine_type: "a3-highgpu-8g".into(),
            reservation_affinity: Some(ReservationAffinity::specific("h100-block")),
            ..InsertSpec::default()
        };
        let json = serde_json::to_value(body(&spec)).unwrap();
        assert_eq!(
            json["reservationAffinity"],
            serde_json::json!({
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": ["h100-block"],
            })
        );
        assert!(json["scheduling"].get("provisioningModel").is_none());
    }
}
