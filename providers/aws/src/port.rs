//! The narrow port: the handful of EC2 calls the provider makes, in our own types. The SDK
//! implementation is in [`crate::sdk`]; tests can fake at this seam.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};
use quartermaster_pricing::CapacityType;

/// What every port method returns.
pub type PortFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ApiError>> + Send + 'a>>;

pub use quartermaster_cloud::{ApiError, ApiErrorKind};

/// A `Name=…, Values=[…]` filter of a Describe call.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Filter {
    /// Filter name (`tag:Name`, `tag-key`, `instance-state-name`, `availability-zone`).
    pub name: String,
    /// Accepted values.
    pub values: Vec<String>,
}

impl Filter {
    /// A filter on `name` with `values`.
    pub fn new(
        name: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            name: name.into(),
            values: values.into_iter().map(Into::into).collect(),
        }
    }
}

/// An EC2 instance as DescribeInstances reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ec2Instance {
    /// `i-0abc…`.
    pub id: String,
    /// Instance type.
    pub instance_type: String,
    /// Availability zone.
    pub zone: String,
    /// Spot or on-demand.
    pub capacity_type: CapacityType,
    /// `pending`, `running`, `shutting-down`, `terminated`, `stopping`, `stopped`.
    pub state: String,
    /// When it was launched.
    pub launch_time: Option<DateTime<Utc>>,
    /// The image it runs.
    pub image_id: Option<String>,
    /// Its subnet.
    pub subnet_id: Option<String>,
    /// Its security groups.
    pub security_group_ids: Vec<String>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

/// One override of a fleet's launch template: an instance type in a subnet.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetOverride {
    /// Instance type.
    pub instance_type: String,
    /// Subnet to launch into.
    pub subnet_id: String,
    /// The subnet's zone.
    pub zone: String,
    /// Lower is tried first (on-demand `prioritized` and `capacity-optimized-prioritized`).
    pub priority: f64,
}

/// The overrides that use one launch template.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetTemplate {
    /// Launch template id.
    pub launch_template_id: String,
    /// Its overrides.
    pub overrides: Vec<FleetOverride>,
}

/// A `CreateFleet type=instant` for one instance.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetRequest {
    /// Idempotency token (at most 64 ASCII characters).
    pub client_token: String,
    /// Spot or on-demand.
    pub capacity_type: CapacityType,
    /// Launch templates with their overrides.
    pub templates: Vec<FleetTemplate>,
    /// Tags of the instances (and their volumes).
    pub tags: BTreeMap<String, String>,
    /// The EC2 launch context, if the NodeClass sets one.
    pub context: Option<String>,
    /// For a reserved launch: into a Capacity Block (`capacity-block` target capacity) or an
    /// ODCR (on-demand, reservations first).
    pub capacity_block: bool,
}

/// An instance a fleet launched.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetInstance {
    /// Instance id.
    pub id: String,
    /// Instance type.
    pub instance_type: Option<String>,
    /// The override's subnet.
    pub subnet_id: Option<String>,
    /// The override's zone, when the response names it.
    pub zone: Option<String>,
    /// Spot or on-demand, when the response says.
    pub capacity_type: Option<CapacityType>,
}

/// An error a fleet reported for one override, inside a successful response.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetError {
    /// EC2 error code.
    pub code: String,
    /// EC2's words.
    pub message: String,
    /// The override's instance type.
    pub instance_type: Option<String>,
    /// The override's subnet.
    pub subnet_id: Option<String>,
    /// The override's zone, when the response names it.
    pub zone: Option<String>,
}

/// A CreateFleet response: instances and errors, read together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetResult {
    /// Launched instances.
    pub instances: Vec<FleetInstance>,
    /// Per-override errors.
    pub errors: Vec<FleetError>,
}

/// What a launch template holds.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchTemplateSpec {
    /// Template name (unique per account and region).
    pub name: String,
    /// AMI.
    pub image_id: String,
    /// User data, base64.
    pub user_data: String,
    /// Instance profile name.
    pub instance_profile: Option<String>,
    /// Security group ids.
    pub security_group_ids: Vec<String>,
    /// IMDS: `required` for IMDSv2.
    pub http_tokens: String,
    /// IMDS hop limit.
    pub http_put_response_hop_limit: i32,
    /// IMDS endpoint `enabled` / `disabled`.
    pub http_endpoint: String,
    /// Block devices.
    pub block_devices: Vec<BlockDevice>,
    /// Detailed monitoring.
    pub monitoring: bool,
    /// Tags of the template itself.
    pub tags: BTreeMap<String, String>,
    /// The capacity reservation its instances launch into (reserved launches only).
    pub capacity_reservation: Option<ReservationTarget>,
}

/// A capacity reservation a launch targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationTarget {
    /// `cr-…`.
    pub id: String,
    /// A Capacity Block (market type `capacity-block`), not an ODCR.
    pub capacity_block: bool,
}

/// One EBS block device of a launch template.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockDevice {
    /// `/dev/xvda`.
    pub device_name: String,
    /// Size in GiB.
    pub volume_size_gib: Option<i32>,
    /// `gp3`, …
    pub volume_type: Option<String>,
    /// Provisioned IOPS.
    pub iops: Option<i32>,
    /// Throughput MiB/s.
    pub throughput: Option<i32>,
    /// Encrypted.
    pub encrypted: Option<bool>,
    /// Deleted with the instance.
    pub delete_on_termination: Option<bool>,
    /// KMS key.
    pub kms_key_id: Option<String>,
    /// Source snapshot.
    pub snapshot_id: Option<String>,
}

/// A subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    /// `subnet-…`.
    pub id: String,
    /// Its availability zone.
    pub zone: String,
    /// Free addresses.
    pub available_ips: i64,
}

/// A security group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityGroup {
    /// `sg-…`.
    pub id: String,
    /// Its name.
    pub name: String,
}

/// An AMI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// `ami-…`.
    pub id: String,
    /// Its name.
    pub name: String,
    /// `x86_64` or `arm64`.
    pub architecture: String,
    /// ISO 8601 creation date (sorts as a string).
    pub creation_date: String,
}

/// What DescribeInstanceTypes says about one type.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceTypeInfo {
    /// Name.
    pub name: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// `x86_64`, `arm64`.
    pub architectures: Vec<String>,
    /// GPUs: (manufacturer, name, count, memory MiB per device).
    pub gpus: Vec<(String, String, u32, u64)>,
    /// EFA interfaces supported.
    pub efa_count: u32,
}

/// The EC2 calls the provider makes.
pub trait Ec2: Send + Sync {
    /// DescribeInstances with filters (every page).
    fn describe_instances(&self, filters: Vec<Filter>) -> PortFuture<'_, Vec<Ec2Instance>>;
    /// DescribeInstances of ids.
    fn describe_instances_by_id(&self, ids: Vec<String>) -> PortFuture<'_, Vec<Ec2Instance>>;
    /// TerminateInstances.
    fn terminate_instances(&self, ids: Vec<String>) -> PortFuture<'_, ()>;
    /// RebootInstances (node repair's reboot: the instance keeps its id, disks and
    /// reservation).
    fn reboot_instances(&self, ids: Vec<String>) -> PortFuture<'_, ()>;
    /// DescribeCapacityReservations: the account's active and scheduled reservations.
    fn describe_capacity_reservations(
        &self,
    ) -> PortFuture<'_, Vec<quartermaster_pricing::Reservation>>;
    /// CreateFleet `type=instant`.
    fn create_fleet(&self, request: FleetRequest) -> PortFuture<'_, FleetResult>;
    /// The id of the launch template named `name`, if it exists.
    fn find_launch_template(&self, name: String) -> PortFuture<'_, Option<String>>;
    /// CreateLaunchTemplate; returns its id.
    fn create_launch_template(&self, spec: LaunchTemplateSpec) -> PortFuture<'_, String>;
    /// DescribeSubnets by ids or filters.
    fn describe_subnets(
        &self,
        ids: Vec<String>,
        filters: Vec<Filter>,
    ) -> PortFuture<'_, Vec<Subnet>>;
    /// DescribeSecurityGroups by ids or filters.
    fn describe_security_groups(
        &self,
        ids: Vec<String>,
        filters: Vec<Filter>,
    ) -> PortFuture<'_, Vec<SecurityGroup>>;
    /// DescribeImages by ids, owners or filters.
    fn describe_images(
        &self,
        ids: Vec<String>,
        owners: Vec<String>,
        filters: Vec<Filter>,
    ) -> PortFuture<'_, Vec<Image>>;
    /// DescribeInstanceTypes (every page).
    fn describe_instance_types(&self) -> PortFuture<'_, Vec<InstanceTypeInfo>>;
    /// DescribeInstanceTypeOfferings by availability zone: (type, zone) pairs.
    fn describe_instance_type_offerings(&self) -> PortFuture<'_, Vec<(String, String)>>;
}

/// A message of the interruption queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    /// The receipt handle (to delete it).
    pub receipt: String,
    /// The body (an EventBridge event as JSON).
    pub body: String,
}

/// The SQS calls of the interruption queue.
pub trait Queue: Send + Sync {
    /// Up to ten messages, without waiting for more.
    fn receive(&self) -> PortFuture<'_, Vec<QueueMessage>>;
    /// Deletes handled messages.
    fn delete(&self, receipts: Vec<String>) -> PortFuture<'_, ()>;
}

/// SSM parameters (AMI ids: the EKS-optimized AMIs' public parameters, `ssmParameter` terms).
pub trait Parameters: Send + Sync {
    /// The value of the parameter `name`, `None` when it does not exist.
    fn get_parameter(&self, name: String) -> PortFuture<'_, Option<String>>;
}
