//! Node label keys that instance types and offerings carry.
//!
//! The first five are the well-known Kubernetes labels; the rest live under the
//! `quartermaster.dev/` prefix. [`crate::InstanceType::labels`] returns the static ones;
//! [`crate::InstanceType::offering_labels`] adds [`REGION`], [`ZONE`] and [`CAPACITY_TYPE`].
//!
//! Accelerator labels (`instance-gpu-*`) are set for every accelerator, including
//! Habana Gaudi and AWS Trainium/Inferentia (whose manufacturer is `habana` / `aws`), and are
//! absent on CPU-only types.

/// The label domain of Quartermaster's own labels.
pub const DOMAIN: &str = "quartermaster.dev";

/// Instance-type name, e.g. `p5.48xlarge`.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Region, e.g. `us-east-1` (per offering).
pub const REGION: &str = "topology.kubernetes.io/region";
/// Zone, e.g. `us-east-1a` (per offering).
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// CPU architecture: `amd64` or `arm64`.
pub const ARCH: &str = "kubernetes.io/arch";
/// Operating system; always [`OS_LINUX`] in this catalog.
pub const OS: &str = "kubernetes.io/os";
/// The only value of [`OS`] used by the catalog.
pub const OS_LINUX: &str = "linux";

/// Cloud: `aws`, `gcp` or `azure`.
pub const CLOUD: &str = "quartermaster.dev/cloud";
/// Capacity type of the offering: `on-demand`, `spot` or `reserved` (per offering).
pub const CAPACITY_TYPE: &str = "quartermaster.dev/capacity-type";
/// Instance family, e.g. `p5`, `a2`, `NDasrA100v4`-style family names as the cloud uses them.
pub const INSTANCE_FAMILY: &str = "quartermaster.dev/instance-family";
/// Number of vCPUs, as a decimal integer.
pub const INSTANCE_CPU: &str = "quartermaster.dev/instance-cpu";
/// Memory in MiB, as a decimal integer.
pub const INSTANCE_MEMORY: &str = "quartermaster.dev/instance-memory";
/// Accelerator manufacturer: `nvidia`, `habana`, `aws`, ...
pub const INSTANCE_GPU_MANUFACTURER: &str = "quartermaster.dev/instance-gpu-manufacturer";
/// Accelerator name as a lower-case label value: `h100`, `a100`, `l4`, `gaudi`, `trainium`, ...
pub const INSTANCE_GPU_NAME: &str = "quartermaster.dev/instance-gpu-name";
/// Number of whole accelerator devices (`0` for a fractional vGPU slice).
pub const INSTANCE_GPU_COUNT: &str = "quartermaster.dev/instance-gpu-count";
/// Memory per device in MiB (for a fractional slice: the slice's memory). Absent when unknown.
pub const INSTANCE_GPU_MEMORY: &str = "quartermaster.dev/instance-gpu-memory";
/// Fraction of one device for vGPU slices, e.g. `0.1667`. Absent for whole devices.
pub const INSTANCE_GPU_FRACTION: &str = "quartermaster.dev/instance-gpu-fraction";
/// Network bandwidth in Mbps, as a decimal integer (`network_gbps × 1000`, rounded).
/// Absent when the catalog does not know the bandwidth (`network_gbps = 0`).
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "quartermaster.dev/instance-network-bandwidth";
/// High-speed interconnect: `efa` or `infiniband`. Absent when there is none.
pub const INSTANCE_INTERCONNECT: &str = "quartermaster.dev/instance-interconnect";
/// Local NVMe / instance-store capacity in GB, as a decimal integer. Absent when zero.
pub const INSTANCE_LOCAL_NVME: &str = "quartermaster.dev/instance-local-nvme";

/// Category: the letters of the family before its generation (`p` for `p4d`, `a` for `a2`).
/// AWS and GCP only.
pub const INSTANCE_CATEGORY: &str = "quartermaster.dev/instance-category";
/// Generation: the digits after the category (`4` for `p4d`). AWS and GCP only.
pub const INSTANCE_GENERATION: &str = "quartermaster.dev/instance-generation";
/// Size: the part of an AWS type name after the dot (`24xlarge`). AWS only.
pub const INSTANCE_SIZE: &str = "quartermaster.dev/instance-size";
/// Hypervisor: `nitro` or `xen`. AWS only.
pub const INSTANCE_HYPERVISOR: &str = "quartermaster.dev/instance-hypervisor";
/// NVIDIA GPU product as GPU Feature Discovery names it (`NVIDIA-A10G`). Whole NVIDIA GPUs only.
pub const INSTANCE_GPU_PRODUCT: &str = "quartermaster.dev/instance-gpu-product";
/// NVIDIA GPU architecture as GPU Feature Discovery names it (`ampere`, `hopper`).
pub const INSTANCE_GPU_FAMILY: &str = "quartermaster.dev/instance-gpu-family";

/// Every label key this crate may set, static and per-offering.
pub const ALL: &[&str] = &[
    INSTANCE_TYPE,
    REGION,
    ZONE,
    ARCH,
    OS,
    CLOUD,
    CAPACITY_TYPE,
    INSTANCE_FAMILY,
    INSTANCE_CPU,
    INSTANCE_MEMORY,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_NAME,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MEMORY,
    INSTANCE_GPU_FRACTION,
    INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_INTERCONNECT,
    INSTANCE_LOCAL_NVME,
    INSTANCE_CATEGORY,
    INSTANCE_GENERATION,
    INSTANCE_SIZE,
    INSTANCE_HYPERVISOR,
    INSTANCE_GPU_PRODUCT,
    INSTANCE_GPU_FAMILY,
];

/// Label keys that [`crate::InstanceType::offering_labels`] adds to the static labels.
pub const PER_OFFERING: &[&str] = &[REGION, ZONE, CAPACITY_TYPE];
