//! Node overhead (kube-reserved + system-reserved + hard-eviction threshold) per cloud.
//!
//! Each managed Kubernetes service documents how much CPU and memory it holds back from a node
//! before pods can use it. [`compute`] applies the formula of the instance type's cloud:
//!
//! * **AWS (EKS / Karpenter, AL2023):**
//!   CPU: 6% of the first core, 1% of the second, 0.5% of cores 3–4, 0.25% of every core
//!   above 4. Memory: `11 MiB × max_pods + 255 MiB` kube-reserved, plus the 100 MiB
//!   `memory.available` hard-eviction threshold. (Karpenter additionally assumes a ~7.5%
//!   hypervisor memory overhead when it predicts capacity; that is not modelled here — the
//!   catalog's capacity is the nominal memory of the type.)
//! * **GCP (GKE):**
//!   CPU: the same tiers as above. Memory: 255 MiB on machines with less than 1 GiB;
//!   otherwise 25% of the first 4 GiB, 20% of the next 4 GiB (to 8 GiB), 10% of the next
//!   8 GiB (to 16 GiB), 6% of the next 112 GiB (to 128 GiB) and 2% above 128 GiB; plus the
//!   100 MiB hard-eviction threshold.
//! * **Azure (AKS, Kubernetes 1.29+):**
//!   CPU: AKS's table of 60, 100, 140, 180, 260, 420, 740 millicores for 1, 2, 4, 8, 16, 32,
//!   64 cores, interpolated linearly between those points and extended at 10 millicores per
//!   core above 64. Memory: `min(20 MiB × max_pods + 50 MiB, 25% of memory)` kube-reserved,
//!   plus the 100 MiB hard-eviction threshold.
//!
//! None of the three services reserves anything under `system-reserved` by default, so the
//! figures above are the whole overhead.

use crate::{Cloud, Overhead};

/// Hard-eviction threshold `memory.available<100Mi`, used by EKS, GKE and AKS.
pub const EVICTION_MEMORY_MIB: u64 = 100;

/// Computes the overhead of a node of `cloud` with the given size and pod density.
pub fn compute(cloud: Cloud, vcpu: u32, memory_mib: u64, max_pods: u32) -> Overhead {
    match cloud {
        Cloud::Aws => Overhead {
            cpu_millis: tiered_cpu_millis(vcpu),
            memory_mib: 11 * u64::from(max_pods) + 255 + EVICTION_MEMORY_MIB,
        },
        Cloud::Gcp => Overhead {
            cpu_millis: tiered_cpu_millis(vcpu),
            memory_mib: gke_memory_mib(memory_mib) + EVICTION_MEMORY_MIB,
        },
        Cloud::Azure => Overhead {
            cpu_millis: aks_cpu_millis(vcpu),
            memory_mib: (20 * u64::from(max_pods) + 50).min(memory_mib / 4) + EVICTION_MEMORY_MIB,
        },
    }
}

/// 6% of the first core, 1% of the second, 0.5% of cores 3–4, 0.25% above 4 (EKS and GKE).
pub fn tiered_cpu_millis(vcpu: u32) -> u64 {
    let cores = u64::from(vcpu);
    // Work in hundredths of a millicore so that 0.25% of a core (2.5 m) stays exact.
    let mut centi = 0;
    centi += cores.min(1) * 6_000;
    centi += cores.clamp(1, 2).saturating_sub(1) * 1_000;
    centi += cores.clamp(2, 4).saturating_sub(2) * 500;
    centi += cores.saturating_sub(4) * 250;
    centi / 100
}

/// GKE's memory reservation tiers (without the eviction threshold), in MiB.
pub fn gke_memory_mib(memory_mib: u64) -> u64 {
    const GIB: u64 = 1024;
    if memory_mib < GIB {
        return 255;
    }
    let tier = |from: u64, to: u64| memory_mib.clamp(from, to) - from;
    let reserved = tier(0, 4 * GIB) * 25
        + tier(4 * GIB, 8 * GIB) * 20
        + tier(8 * GIB, 16 * GIB) * 10
        + tier(16 * GIB, 128 * GIB) * 6
        + memory_mib.saturating_sub(128 * GIB) * 2;
    reserved / 100
}

/// AKS's CPU reservation table, interpolated (see the module documentation).
pub fn aks_cpu_millis(vcpu: u32) -> u64 {
    const POINTS: [(u64, u64); 7] = [
        (1, 60),
        (2, 100),
        (4, 140),
        (8, 180),
        (16, 260),
        (32, 420),
        (64, 740),
    ];
    let cores = u64::from(vcpu.max(1));
    if cores >= 64 {
        return 740 + (cores - 64) * 10;
    }
    for pair in POINTS.windows(2) {
        let ((c0, m0), (c1, m1)) = (pair[0], pair[1]);
        if cores <= c1 {
            return m0 + (m1 - m0) * (cores - c0) / (c1 - c0);
        }
    }
    740
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eks_cpu_tiers_match_karpenter() {
        // Karpenter's published allocatable CPU: 1930m, 3920m, 15890m, 191450m.
        assert_eq!(tiered_cpu_millis(1), 60);
        assert_eq!(tiered_cpu_millis(2), 70);
        assert_eq!(tiered_cpu_millis(4), 80);
        assert_eq!(tiered_cpu_millis(16), 110);
        assert_eq!(tiered_cpu_millis(192), 550);
    }

    #[test]
    fn eks_memory_uses_max_pods() {
        let o = compute(Cloud::Aws, 2, 8192, 29);
        assert_eq!(o.memory_mib, 11 * 29 + 255 + 100);
        assert_eq!(o.cpu_millis, 70);
    }

    #[test]
    fn gke_memory_tiers() {
        assert_eq!(gke_memory_mib(512), 255);
        // 4 GiB: 25% of 4096 = 1024.
        assert_eq!(gke_memory_mib(4096), 1024);
        // 16 GiB: 1024 + 819.2 + 819.2 = 2662.4 -> 2662.
        assert_eq!(gke_memory_mib(16 * 1024), 2662);
        // 32 GiB: 2662.4 + 6% of 16 GiB (983.04) = 3645.44 -> 3645.
        assert_eq!(gke_memory_mib(32 * 1024), 3645);
    }

    #[test]
    fn aks_cpu_table_and_interpolation() {
        assert_eq!(aks_cpu_millis(1), 60);
        assert_eq!(aks_cpu_millis(2), 100);
        assert_eq!(aks_cpu_millis(4), 140);
        assert_eq!(aks_cpu_millis(6), 160);
        assert_eq!(aks_cpu_millis(16), 260);
        assert_eq!(aks_cpu_millis(64), 740);
        assert_eq!(aks_cpu_millis(96), 1060);
    }

    #[test]
    fn aks_memory_is_capped_at_a_quarter() {
        // 250 pods -> 5050 MiB, but a 16 GiB node caps at 4096 MiB.
        assert_eq!(compute(Cloud::Azure, 4, 16384, 250).memory_mib, 4096 + 100);
        assert_eq!(
            compute(Cloud::Azure, 32, 131072, 250).memory_mib,
            5050 + 100
        );
    }
}
