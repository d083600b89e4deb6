//! The narrow port: the handful of Azure Resource Manager calls the provider makes, in our own
//! types. The SDK implementation is in [`crate::sdk`]; tests can fake at this seam, and the
//! official `azure_resourcemanager_compute` can replace `azure_mgmt_compute` behind it.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// What every port method returns.
pub type PortFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ApiError>> + Send + 'a>>;

pub use quartermaster_cloud::{ApiError, ApiErrorKind};

/// A virtual machine as ARM reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Vm {
    /// The ARM id (`/subscriptions/…/virtualMachines/NAME`).
    pub id: String,
    /// The VM name.
    pub name: String,
    /// The VM size (`Standard_NC24ads_A100_v4`).
    pub size: String,
    /// The location (`eastus`).
    pub location: String,
    /// The zone number (`1`), when the VM is zonal.
    pub zone: Option<String>,
    /// `Spot` or `Regular`.
    pub priority: Option<String>,
    /// `Creating`, `Succeeded`, `Failed`, `Deleting`, `Updating`.
    pub provisioning_state: Option<String>,
    /// When ARM created it.
    pub time_created: Option<DateTime<Utc>>,
    /// The ARM id of the capacity reservation group it was created in
    /// (`properties.capacityReservation.capacityReservationGroup.id`), when it was.
    pub capacity_reservation_group: Option<String>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

/// What a VM PUT asks for. Its `Debug` leaves the custom data out (it holds the node's
/// bootstrap credentials).
#[derive(Clone, PartialEq)]
pub struct VmSpec {
    /// The VM name (also the computer name).
    pub name: String,
    /// Location.
    pub location: String,
    /// Size.
    pub size: String,
    /// The zone number, when zonal.
    pub zone: Option<String>,
    /// Spot (`priority=Spot`, `evictionPolicy=Delete`, `maxPrice=-1`) or regular.
    pub spot: bool,
    /// The subnet's ARM id.
    pub subnet_id: String,
    /// The image.
    pub image: ImageRef,
    /// OS disk size, GB.
    pub os_disk_size_gb: Option<i32>,
    /// Custom data, base64.
    pub custom_data: Option<String>,
    /// The admin user's SSH public key.
    pub ssh_public_key: Option<String>,
    /// User-assigned managed identities (ARM ids).
    pub identities: Vec<String>,
    /// The capacity reservation group (ARM id) the VM is created in, so it uses the group's
    /// reserved capacity of its size and zone (`properties.capacityReservation`).
    pub capacity_reservation_group: Option<String>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

impl std::fmt::Debug for VmSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmSpec")
            .field("name", &self.name)
            .field("location", &self.location)
            .field("size", &self.size)
            .field("zone", &self.zone)
            .field("spot", &self.spot)
            .field("subnet_id", &self.subnet_id)
            .field("image", &self.image)
            .field("os_disk_size_gb", &self.os_disk_size_gb)
            .field("custom_data", &self.custom_data.as_ref().map(|_| ".."))
            .field("identities", &self.identities)
            .field(
                "capacity_reservation_group",
                &self.capacity_reservation_group,
            )
            .field("tags", &self.tags)
            .finish_non_exhaustive()
    }
}

/// An image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageRef {
    /// An image or gallery image version by ARM id.
    Id(String),
    /// A marketplace image.
    Marketplace {
        /// Publisher.
        publisher: String,
        /// Offer.
        offer: String,
        /// SKU.
        sku: String,
        /// Version (`latest`).
        version: String,
    },
}

/// An accepted VM PUT: the VM as ARM returned it and where to follow the operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// The VM as the PUT's response described it.
    pub vm: Vm,
    /// The `Azure-AsyncOperation` (else `Location`) URL, when the operation is asynchronous.
    pub operation_url: Option<String>,
    /// How long ARM asks us to wait before polling.
    pub retry_after: Option<Duration>,
}

/// An accepted asynchronous action (a VM restart): where to follow its operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The `Azure-AsyncOperation` (else `Location`) URL; `None` when ARM finished it at once.
    pub operation_url: Option<String>,
    /// How long ARM asks us to wait before polling.
    pub retry_after: Option<Duration>,
}

/// Where an asynchronous operation is.
#[derive(Debug, Clone, PartialEq)]
pub enum OperationStatus {
    /// Still running.
    InProgress {
        /// How long ARM asks us to wait before polling again.
        retry_after: Option<Duration>,
    },
    /// Done.
    Succeeded,
    /// Failed (or canceled) with this error (`AllocationFailed` …).
    Failed(ApiError),
}

/// One resource SKU (a VM size in a location) as the Resource SKUs API lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sku {
    /// The size (`Standard_NC24ads_A100_v4`).
    pub name: String,
    /// The family (`standardNCADSA100v4Family`), what quotas count.
    pub family: Option<String>,
    /// The location.
    pub location: String,
    /// Zones it is offered in.
    pub zones: Vec<String>,
    /// Capabilities (`vCPUs`, `MemoryGB`, `GPUs`, …).
    pub capabilities: BTreeMap<String, String>,
    /// Why it cannot be used, when it cannot (`NotAvailableForSubscription`).
    pub restrictions: Vec<String>,
}

/// One compute quota of a location (`standardNCADSA100v4Family` vCPUs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// The quota's name (a SKU family, `cores`, `lowPriorityCores`).
    pub name: String,
    /// In use.
    pub current: i64,
    /// The limit.
    pub limit: i64,
}

/// One capacity reservation (a size in a zone, reserved in a capacity reservation group) as ARM
/// reports it, with what its group's instance view says of its use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityReservation {
    /// Its ARM id (`/subscriptions/…/capacityReservationGroups/GROUP/capacityReservations/NAME`).
    pub id: String,
    /// Its name.
    pub name: String,
    /// The ARM id of its capacity reservation group.
    pub group_id: String,
    /// The location (`eastus`).
    pub location: String,
    /// The zone number (`1`), when it is zonal.
    pub zone: Option<String>,
    /// The VM size it reserves (`sku.name`).
    pub size: String,
    /// How many VMs it reserves (`sku.capacity`).
    pub capacity: u32,
    /// How many it holds now and bills for (`instanceView.utilizationInfo.currentCapacity`), when
    /// the group's instance view says.
    pub current_capacity: Option<u32>,
    /// VMs allocated against it (`instanceView.utilizationInfo.virtualMachinesAllocated`), when
    /// the group's instance view names it.
    pub allocated: Option<u32>,
    /// VMs associated with it (`properties.virtualMachinesAssociated`: allocated or not; a
    /// deallocated VM stays associated).
    pub associated: u32,
    /// `Creating`, `Succeeded`, `Updating`, `Deleting`, `Failed`.
    pub provisioning_state: Option<String>,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

/// The ARM calls the provider makes, in one subscription and resource group.
pub trait Arm: Send + Sync {
    /// GET one VM; `None` when it does not exist.
    fn get_vm(&self, name: String) -> PortFuture<'_, Option<Vm>>;
    /// PUT a VM (`.send()` only: the operation is followed with [`Arm::operation`]).
    fn put_vm(&self, spec: VmSpec) -> PortFuture<'_, Accepted>;
    /// GET an operation URL.
    fn operation(&self, url: String) -> PortFuture<'_, OperationStatus>;
    /// DELETE a VM (the operation is not followed; `Ok` when it is already gone).
    fn delete_vm(&self, name: String) -> PortFuture<'_, ()>;
    /// Every VM of the resource group (every page).
    fn list_vms(&self) -> PortFuture<'_, Vec<Vm>>;
    /// The resource SKUs of the subscription in `location` (virtual machines only).
    fn resource_skus(&self, location: String) -> PortFuture<'_, Vec<Sku>>;
    /// The compute quotas of the subscription in `location` (doctor).
    fn usages(&self, location: String) -> PortFuture<'_, Vec<Usage>>;
    /// Whether the resource group exists (doctor).
    fn resource_group_exists(&self) -> PortFuture<'_, bool>;
    /// Every capacity reservation of every capacity reservation group of the subscription (in
    /// any resource group; every page), with what each group's instance view says of its use.
    fn capacity_reservations(&self) -> PortFuture<'_, Vec<CapacityReservation>>;
    /// POST a VM's restart (the operation is followed with [`Arm::operation`]); a VM that does
    /// not exist is a 404 error.
    fn restart_vm(&self, name: String) -> PortFuture<'_, Started>;
}
