//! The narrow port: the handful of Compute Engine calls the provider makes, in our own types.
//! The SDK implementation is in `sdk.rs`; tests can fake at this seam.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

/// What every port method returns.
pub type PortFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ApiError>> + Send + 'a>>;

pub use quartermaster_cloud::{ApiError, ApiErrorKind};

/// A Compute Engine instance as `instances.get` / `list` report it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GceInstance {
    /// Instance name.
    pub name: String,
    /// Zone name (`us-central1-a`), from the zone URL.
    pub zone: String,
    /// Machine type name (`a2-highgpu-1g`), from the machine type URL.
    pub machine_type: String,
    /// `PROVISIONING`, `STAGING`, `RUNNING`, `STOPPING`, `TERMINATED`, ...
    pub status: String,
    /// Whether `scheduling.provisioningModel` is `SPOT`.
    pub spot: bool,
    /// Whether `scheduling.provisioningModel` is `FLEX_START`.
    pub flex_start: bool,
    /// Its `reservationAffinity`, when it has one.
    pub reservation_affinity: Option<ReservationAffinity>,
    /// RFC 3339 creation time.
    pub creation_timestamp: Option<String>,
    /// RFC 3339 time of the last stop (a preempted spot instance has one).
    pub last_stop_timestamp: Option<String>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// Which reservations an instance may consume (`reservationAffinity`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReservationAffinity {
    /// `ANY_RESERVATION`: a matching reservation that VMs consume automatically, else none.
    Any,
    /// `NO_RESERVATION`.
    NoReservation,
    /// `SPECIFIC_RESERVATION`: only the reservations whose `key` is one of `values`.
    Specific {
        /// `compute.googleapis.com/reservation-name`.
        key: String,
        /// Reservation names.
        values: Vec<String>,
    },
    /// Any other type Compute Engine reports (`SPECIFIC_THEN_ANY_RESERVATION`, ...).
    Other(String),
}

impl ReservationAffinity {
    /// `SPECIFIC_RESERVATION` naming `reservation` by name.
    pub fn specific(reservation: &str) -> Self {
        Self::Specific {
            key: quartermaster_policies::nodeclass::gcp::RESERVATION_NAME_KEY.to_owned(),
            values: vec![reservation.to_owned()],
        }
    }

    /// The reservation a `SPECIFIC_RESERVATION` affinity names by name (the first, when it
    /// names several).
    pub fn named_reservation(&self) -> Option<&str> {
        use quartermaster_policies::nodeclass::gcp::{
            RESERVATION_NAME_KEY, RESERVATION_NAME_KEY_SHORT,
        };
        match self {
            Self::Specific { key, values }
                if key == RESERVATION_NAME_KEY || key == RESERVATION_NAME_KEY_SHORT =>
            {
                values
                    .first()
                    .map(|v| v.rsplit('/').next().unwrap_or(v.as_str()))
            }
            _ => None,
        }
    }
}

/// A zonal reservation as `reservations.aggregatedList` reports it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GceReservation {
    /// Its name (unique in its zone).
    pub name: String,
    /// Zone name, from the zone URL (or the aggregated list's key).
    pub zone: String,
    /// `specificReservation.instanceProperties.machineType` (a name); `None` for a reservation
    /// of another shape (an aggregate reservation, or one that does not say).
    pub machine_type: Option<String>,
    /// `specificReservation.count`: instances it holds.
    pub count: i64,
    /// `specificReservation.inUseCount`: instances consuming it now (anyone's).
    pub in_use_count: i64,
    /// `specificReservationRequired`: only VMs that name it may consume it.
    pub specific_reservation_required: bool,
    /// `CREATING`, `READY`, `UPDATING`, `DELETING` (empty when not reported).
    pub status: String,
}

/// One guest accelerator of an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accelerator {
    /// Accelerator type name (`nvidia-tesla-t4`).
    pub accelerator_type: String,
    /// How many.
    pub count: i32,
}

/// What `instances.insert` sends, in our terms.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InsertSpec {
    /// Project.
    pub project: String,
    /// Zone.
    pub zone: String,
    /// Instance name (deterministic per NodeClaim).
    pub name: String,
    /// Machine type name.
    pub machine_type: String,
    /// Guest accelerators (N1 + T4 and the like; A2/A3/G2 carry theirs in the machine type).
    pub accelerators: Vec<Accelerator>,
    /// Spot (`provisioningModel=SPOT`, `instanceTerminationAction=DELETE`).
    pub spot: bool,
    /// Flex-start (`provisioningModel=FLEX_START`, `instanceTerminationAction=DELETE`, no
    /// automatic restart), run for at most `max_run_duration_seconds`.
    pub flex_start: bool,
    /// `scheduling.maxRunDuration`, seconds.
    pub max_run_duration_seconds: Option<i64>,
    /// `reservationAffinity` (`None`: not sent, GCE's default or the template's applies).
    pub reservation_affinity: Option<ReservationAffinity>,
    /// `onHostMaintenance=TERMINATE` (GPUs cannot live-migrate).
    pub terminate_on_host_maintenance: bool,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// A GKE node pool's instance template that provides the boot image and the metadata that
    /// joins the cluster (`sourceInstanceTemplate`).
    pub source_instance_template: Option<String>,
    /// The boot image (a family or image URL), when no template gives it.
    pub source_image: Option<String>,
    /// Boot disk size, GiB.
    pub disk_size_gib: Option<i64>,
    /// Boot disk type (`pd-balanced`).
    pub disk_type: Option<String>,
    /// Metadata items.
    pub metadata: BTreeMap<String, String>,
    /// VPC network.
    pub network: Option<String>,
    /// Subnetwork.
    pub subnetwork: Option<String>,
    /// Service account email.
    pub service_account: Option<String>,
    /// Network tags.
    pub network_tags: Vec<String>,
    /// Idempotency key of this insert.
    pub request_id: String,
}

/// A zone operation, as far as we read it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Operation {
    /// Operation name.
    pub name: String,
    /// Whether it is `DONE`.
    pub done: bool,
    /// The errors a finished operation carries (code, message).
    pub errors: Vec<(String, String)>,
    /// `httpErrorStatusCode` of a failed operation.
    pub http_status: Option<u16>,
}

/// The Compute Engine calls the provider makes.
pub trait Compute: Send + Sync {
    /// `instances.insert`: the operation it started.
    fn insert(&self, spec: InsertSpec) -> PortFuture<'_, Operation>;
    /// `instances.get`.
    fn get(&self, project: String, zone: String, name: String) -> PortFuture<'_, GceInstance>;
    /// `instances.aggregatedList` with a filter (`labels.k = "v"`), every page and zone.
    fn list(&self, project: String, filter: String) -> PortFuture<'_, Vec<GceInstance>>;
    /// `instances.delete`: the operation it started.
    fn delete(&self, project: String, zone: String, name: String) -> PortFuture<'_, Operation>;
    /// `instances.reset` (a hard reboot in place): the operation it started.
    fn reset(&self, project: String, zone: String, name: String) -> PortFuture<'_, Operation>;
    /// `reservations.aggregatedList`: the project's reservations, every page and zone.
    fn reservations(&self, project: String) -> PortFuture<'_, Vec<GceReservation>>;
    /// `zones.get`: the zone's status (`UP`, `DOWN`).
    fn get_zone(&self, project: String, zone: String) -> PortFuture<'_, String>;
    /// `zoneOperations.get`.
    fn get_operation(
        &self,
        project: String,
        zone: String,
        name: String,
    ) -> PortFuture<'_, Operation>;
}
