//! The catalog's data model: clouds, capacity types, instance types and their offerings.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{PricingError, derived, labels, resources};

/// A cloud provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cloud {
    /// Amazon Web Services (`aws`).
    Aws,
    /// Google Cloud (`gcp`).
    Gcp,
    /// Microsoft Azure (`azure`).
    Azure,
}

impl Cloud {
    /// All clouds, in catalog order.
    pub const ALL: [Cloud; 3] = [Cloud::Aws, Cloud::Gcp, Cloud::Azure];

    /// The lower-case name used in files, labels and on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Gcp => "gcp",
            Cloud::Azure => "azure",
        }
    }
}

impl fmt::Display for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Cloud {
    type Err = PricingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Cloud::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| PricingError::UnknownCloud(s.to_string()))
    }
}

/// How capacity is bought.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityType {
    /// Pay-as-you-go (`on-demand`).
    OnDemand,
    /// Interruptible spare capacity (`spot`).
    Spot,
    /// Capacity reservations / committed capacity (`reserved`).
    Reserved,
    /// Queued, discounted capacity that runs for a bounded time (`flex-start`): GCP's
    /// Dynamic Workload Scheduler flex-start provisioning model. Waits for capacity (up to
    /// [`crate::flex_start::FLEX_START_MAX_WAIT`]) and runs at most
    /// [`crate::flex_start::FLEX_START_MAX_RUN`]; only pools that name it use it.
    FlexStart,
}

impl CapacityType {
    /// All capacity types.
    pub const ALL: [CapacityType; 4] = [
        CapacityType::OnDemand,
        CapacityType::Spot,
        CapacityType::Reserved,
        CapacityType::FlexStart,
    ];

    /// The kebab-case name used in files and labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            CapacityType::OnDemand => "on-demand",
            CapacityType::Spot => "spot",
            CapacityType::Reserved => "reserved",
            CapacityType::FlexStart => "flex-start",
        }
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CapacityType {
    type Err = PricingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CapacityType::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| PricingError::UnknownCapacityType(s.to_string()))
    }
}

/// CPU architecture, as in the `kubernetes.io/arch` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// x86-64 (`amd64`).
    Amd64,
    /// 64-bit ARM (`arm64`).
    Arm64,
}

impl Arch {
    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Arch {
    type Err = PricingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "amd64" => Ok(Arch::Amd64),
            "arm64" => Ok(Arch::Arm64),
            _ => Err(PricingError::UnknownArch(s.to_string())),
        }
    }
}

/// A high-speed node-to-node fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interconnect {
    /// AWS Elastic Fabric Adapter (`efa`); see [`InstanceType::efa_count`].
    Efa,
    /// InfiniBand (`infiniband`), e.g. Azure ND-series.
    Infiniband,
}

impl Interconnect {
    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Interconnect::Efa => "efa",
            Interconnect::Infiniband => "infiniband",
        }
    }
}

impl fmt::Display for Interconnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Interconnect {
    type Err = PricingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "efa" => Ok(Interconnect::Efa),
            "infiniband" => Ok(Interconnect::Infiniband),
            _ => Err(PricingError::UnknownInterconnect(s.to_string())),
        }
    }
}

/// The accelerators of an instance type.
///
/// A fractional vGPU slice (e.g. Azure `Standard_NV6ads_A10_v5`, one sixth of an A10) has
/// `count = 0` whole devices and `fraction = Some(..)`; it does not advertise the device-plugin
/// resource in [`InstanceType::capacity`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accelerator {
    /// Manufacturer label value: `nvidia`, `habana`, `aws`, ...
    pub manufacturer: String,
    /// Lower-case model label value: `h100`, `a100`, `a10g`, `l4`, `gaudi`, `trainium`, ...
    pub name: String,
    /// Number of whole devices; `0` for a fractional slice.
    pub count: u32,
    /// Memory per device in MiB (for a slice: the slice's memory); `0` if unknown.
    pub memory_mib: u64,
    /// Kubernetes extended-resource name: `nvidia.com/gpu`, `habana.ai/gaudi`,
    /// `aws.amazon.com/neuron`.
    pub resource: String,
    /// Share of one device for vGPU slices (`0 < fraction < 1`); `None` for whole devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
}

impl Accelerator {
    /// True for a vGPU slice that is only part of one device.
    pub fn is_fractional(&self) -> bool {
        self.fraction.is_some()
    }
}

/// Resources held back from pods: kube-reserved + system-reserved + the memory hard-eviction
/// threshold. See [`crate::overhead`] for the per-cloud formulas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overhead {
    /// CPU in millicores.
    pub cpu_millis: u64,
    /// Memory in MiB.
    pub memory_mib: u64,
}

/// One way to buy an instance type: a zone and a capacity type, with its price.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offering {
    /// Region, e.g. `us-east-1`.
    pub region: String,
    /// Zone, e.g. `us-east-1a`, `us-central1-a`, `eastus-1`.
    pub zone: String,
    /// How the capacity is bought.
    pub capacity_type: CapacityType,
    /// Price in USD per hour (Linux).
    pub price_per_hour: f64,
    /// Whether the offering can currently be launched.
    pub available: bool,
    /// Source key of the price (see the header of the data file it came from).
    pub price_source: String,
    /// The date the price is known to hold.
    pub price_as_of: chrono::NaiveDate,
    /// True when the price is an estimate derived by a stated rule rather than read from a
    /// price list.
    pub estimate: bool,
}

impl Offering {
    /// Its own labels: region, zone and capacity type.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (labels::REGION.to_owned(), self.region.clone()),
            (labels::ZONE.to_owned(), self.zone.clone()),
            (
                labels::CAPACITY_TYPE.to_owned(),
                self.capacity_type.as_str().to_owned(),
            ),
        ])
    }
}

/// An instance type (machine type, VM size) with its specs and offerings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceType {
    /// The cloud that sells it.
    pub cloud: Cloud,
    /// The cloud's name for it, e.g. `p5.48xlarge`, `a2-highgpu-8g`, `Standard_D4s_v5`.
    pub name: String,
    /// Family, e.g. `p5`, `a2`, `NDasrA100v4`.
    pub family: String,
    /// Number of vCPUs.
    pub vcpu: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// CPU architecture.
    pub arch: Arch,
    /// Accelerators, if any.
    pub accelerator: Option<Accelerator>,
    /// Local NVMe / instance-store capacity in GB (0 if none or not known).
    pub local_nvme_gb: u64,
    /// Network bandwidth in Gbps (0 if not known).
    pub network_gbps: f64,
    /// High-speed fabric, if any.
    pub interconnect: Option<Interconnect>,
    /// Number of EFA interfaces (AWS); 0 elsewhere.
    pub efa_count: u32,
    /// Maximum pods per node.
    pub max_pods: u32,
    /// CPU and memory held back from pods.
    pub overhead: Overhead,
    /// Where and how it can be bought.
    pub offerings: Vec<Offering>,
}

impl InstanceType {
    /// The same type with other offerings (cloning everything but the offerings).
    pub fn with_offerings(&self, offerings: Vec<Offering>) -> InstanceType {
        InstanceType {
            cloud: self.cloud,
            name: self.name.clone(),
            family: self.family.clone(),
            vcpu: self.vcpu,
            memory_mib: self.memory_mib,
            arch: self.arch,
            accelerator: self.accelerator.clone(),
            local_nvme_gb: self.local_nvme_gb,
            network_gbps: self.network_gbps,
            interconnect: self.interconnect,
            efa_count: self.efa_count,
            max_pods: self.max_pods,
            overhead: self.overhead,
            offerings,
        }
    }

    /// The static labels of the type (no region, zone or capacity type).
    ///
    /// `quartermaster.dev/instance-network-bandwidth` is in Mbps and is omitted when the
    /// bandwidth is unknown; accelerator labels are omitted on CPU-only types.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut l = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            l.insert(k.to_string(), v);
        };
        put(labels::INSTANCE_TYPE, self.name.clone());
        put(labels::ARCH, self.arch.to_string());
        put(labels::OS, labels::OS_LINUX.to_string());
        put(labels::CLOUD, self.cloud.to_string());
        put(labels::INSTANCE_FAMILY, self.family.clone());
        put(labels::INSTANCE_CPU, self.vcpu.to_string());
        put(labels::INSTANCE_MEMORY, self.memory_mib.to_string());
        if self.network_gbps > 0.0 {
            put(
                labels::INSTANCE_NETWORK_BANDWIDTH,
                self.network_mbps().to_string(),
            );
        }
        if let Some(i) = self.interconnect {
            put(labels::INSTANCE_INTERCONNECT, i.to_string());
        }
        if self.local_nvme_gb > 0 {
            put(labels::INSTANCE_LOCAL_NVME, self.local_nvme_gb.to_string());
        }
        if let Some((category, generation)) = derived::category_and_generation(self) {
            put(labels::INSTANCE_CATEGORY, category);
            put(labels::INSTANCE_GENERATION, generation);
        }
        if let Some(size) = derived::size(self) {
            put(labels::INSTANCE_SIZE, size);
        }
        if let Some(h) = derived::hypervisor(self) {
            put(labels::INSTANCE_HYPERVISOR, h.to_owned());
        }
        if let Some((product, family)) = derived::nvidia_product_and_family(self) {
            put(labels::INSTANCE_GPU_PRODUCT, product);
            if let Some(f) = family {
                put(labels::INSTANCE_GPU_FAMILY, f.to_owned());
            }
        }
        if let Some(a) = &self.accelerator {
            put(labels::INSTANCE_GPU_MANUFACTURER, a.manufacturer.clone());
            put(labels::INSTANCE_GPU_NAME, a.name.clone());
            put(labels::INSTANCE_GPU_COUNT, a.count.to_string());
            if a.memory_mib > 0 {
                put(labels::INSTANCE_GPU_MEMORY, a.memory_mib.to_string());
            }
            if let Some(f) = a.fraction {
                put(labels::INSTANCE_GPU_FRACTION, format!("{f}"));
            }
        }
        l
    }

    /// The static labels plus the offering's region, zone and capacity type.
    pub fn offering_labels(&self, o: &Offering) -> BTreeMap<String, String> {
        let mut l = self.labels();
        l.extend(o.labels());
        l
    }

    /// Network bandwidth in Mbps, rounded to an integer.
    pub fn network_mbps(&self) -> u64 {
        // Bandwidths are small positive numbers; the cast cannot overflow or lose sign.
        (self.network_gbps * 1000.0).round().max(0.0) as u64
    }

    /// Whole accelerator devices advertised to Kubernetes (0 for CPU-only and fractional types).
    pub fn accelerator_count(&self) -> u32 {
        self.accelerator.as_ref().map_or(0, |a| a.count)
    }

    /// Node capacity by resource name:
    ///
    /// * `cpu` in millicores, `memory` in bytes, `pods`;
    /// * `ephemeral-storage` in bytes: the local NVMe (assuming it is set up as the node's
    ///   ephemeral storage, as Karpenter's `instanceStorePolicy: RAID0` does) when the type has
    ///   any, otherwise the cloud's default root volume
    ///   ([`resources::default_root_volume_bytes`]);
    /// * the accelerator's resource (e.g. `nvidia.com/gpu`) with the whole-device count —
    ///   absent for fractional slices;
    /// * `vpc.amazonaws.com/efa` with [`InstanceType::efa_count`], if non-zero.
    pub fn capacity(&self) -> BTreeMap<String, u64> {
        let mut c = BTreeMap::new();
        c.insert(resources::CPU.to_string(), u64::from(self.vcpu) * 1000);
        c.insert(
            resources::MEMORY.to_string(),
            self.memory_mib * resources::MIB,
        );
        c.insert(resources::PODS.to_string(), u64::from(self.max_pods));
        let ephemeral = if self.local_nvme_gb > 0 {
            self.local_nvme_gb * resources::GB
        } else {
            resources::default_root_volume_bytes(self.cloud)
        };
        c.insert(resources::EPHEMERAL_STORAGE.to_string(), ephemeral);
        if let Some(a) = &self.accelerator
            && a.count > 0
            && !a.is_fractional()
        {
            c.insert(a.resource.clone(), u64::from(a.count));
        }
        if self.efa_count > 0 {
            c.insert(resources::AWS_EFA.to_string(), u64::from(self.efa_count));
        }
        c
    }

    /// Capacity minus [`InstanceType::overhead`] (CPU and memory), and minus the kubelet's
    /// default `nodefs.available<10%` hard-eviction threshold on ephemeral storage. Other
    /// resources are unchanged.
    pub fn allocatable(&self) -> BTreeMap<String, u64> {
        self.allocatable_from(self.capacity())
    }

    /// [`InstanceType::allocatable`] of a node whose capacity differs from the type's own (a
    /// larger root volume, shared GPUs): the same reservations taken from `capacity`.
    pub fn allocatable_from(&self, capacity: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        let mut a = capacity;
        if let Some(cpu) = a.get_mut(resources::CPU) {
            *cpu = cpu.saturating_sub(self.overhead.cpu_millis);
        }
        if let Some(mem) = a.get_mut(resources::MEMORY) {
            *mem = mem.saturating_sub(self.overhead.memory_mib * resources::MIB);
        }
        if let Some(eph) = a.get_mut(resources::EPHEMERAL_STORAGE) {
            *eph -= (*eph * resources::NODEFS_EVICTION_PERCENT).div_ceil(100);
        }
        a
    }

    /// The cheapest available offering, optionally restricted to one capacity type.
    /// Ties keep the first offering in catalog order.
    pub fn cheapest_offering(&self, capacity_type: Option<CapacityType>) -> Option<&Offering> {
        self.offerings
            .iter()
            .filter(|o| o.available)
            .filter(|o| capacity_type.is_none_or(|ct| o.capacity_type == ct))
            .fold(None, |best: Option<&Offering>, o| match best {
                Some(b) if b.price_per_hour.total_cmp(&o.price_per_hour).is_le() => Some(b),
                _ => Some(o),
            })
    }

    /// Offerings in one zone, any capacity type.
    pub fn offerings_in_zone<'a>(&'a self, zone: &'a str) -> impl Iterator<Item = &'a Offering> {
        self.offerings.iter().filter(move |o| o.zone == zone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_round_trip_through_strings() {
        for c in Cloud::ALL {
            assert_eq!(c.to_string().parse::<Cloud>().unwrap(), c);
        }
        for c in CapacityType::ALL {
            assert_eq!(c.to_string().parse::<CapacityType>().unwrap(), c);
        }
        assert_eq!(
            "on-demand".parse::<CapacityType>(),
            Ok(CapacityType::OnDemand)
        );
        assert_eq!("arm64".parse::<Arch>(), Ok(Arch::Arm64));
        assert_eq!(
            "infiniband".parse::<Interconnect>(),
            Ok(Interconnect::Infiniband)
        );
        assert_eq!(
            "oracle".parse::<Cloud>(),
            Err(PricingError::UnknownCloud("oracle".into()))
        );
        assert!("preemptible".parse::<CapacityType>().is_err());
        assert_eq!(
            serde_json::to_string(&CapacityType::OnDemand).unwrap(),
            "\"on-demand\""
        );
        assert_eq!(serde_json::to_string(&Cloud::Azure).unwrap(), "\"azure\"");
    }
}
