//! Kubernetes resource names used in [`crate::InstanceType::capacity`] and
//! [`crate::InstanceType::allocatable`], and the per-cloud defaults behind them.

/// CPU, in millicores.
pub const CPU: &str = "cpu";
/// Memory, in bytes.
pub const MEMORY: &str = "memory";
/// Maximum number of pods.
pub const PODS: &str = "pods";
/// Ephemeral storage, in bytes.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// NVIDIA GPUs (device plugin resource).
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
/// Habana Gaudi accelerators.
pub const HABANA_GAUDI: &str = "habana.ai/gaudi";
/// AWS Neuron devices (Trainium, Inferentia).
pub const AWS_NEURON: &str = "aws.amazon.com/neuron";
/// AWS Elastic Fabric Adapter interfaces.
pub const AWS_EFA: &str = "vpc.amazonaws.com/efa";

/// Bytes in one MiB.
pub const MIB: u64 = 1024 * 1024;
/// Bytes in one GiB.
pub const GIB: u64 = 1024 * MIB;
/// Bytes in one (decimal) GB, the unit clouds use for local disks.
pub const GB: u64 = 1_000_000_000;

/// Size of the root volume assumed for `ephemeral-storage` when an instance type has no local
/// NVMe, in bytes:
///
/// * AWS: 20 GiB, the root volume Karpenter's EC2NodeClass gives AL2023 nodes by default;
/// * GCP: 100 GB, GKE's default node boot-disk size;
/// * Azure: 128 GiB, AKS's default OS-disk size.
pub const fn default_root_volume_bytes(cloud: crate::Cloud) -> u64 {
    match cloud {
        crate::Cloud::Aws => 20 * GIB,
        crate::Cloud::Gcp => 100 * GB,
        crate::Cloud::Azure => 128 * GIB,
    }
}

/// Share of ephemeral storage kept free by the kubelet's default hard-eviction threshold
/// `nodefs.available<10%`, in percent. It is subtracted from allocatable ephemeral storage.
pub const NODEFS_EVICTION_PERCENT: u64 = 10;
