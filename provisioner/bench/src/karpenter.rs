//! `karpenter-shape`: Karpenter's own scheduling benchmark, rebuilt for Quartermaster's solver.
//!
//! Mirrors `kubernetes-sigs/karpenter`:
//!
//! * `pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go` — `setupScheduler`
//!   (one NodePool, limits `cpu: 10000000`, `memory: 10000000Gi`, `fake.InstanceTypes(400)`)
//!   and `makeDiversePods(count)`: five groups of `count / 5` pods — generic, zonal topology
//!   spread (`maxSkew: 1`, `DoNotSchedule`), hostname topology spread (same), zonal pod
//!   **self**-affinity (the selector is the pod's own `my-affininity` label, spelt as upstream
//!   spells it), hostname anti-affinity among all `app: nginx` pods — then the remainder as
//!   generic pods. Every pod requests a CPU drawn from {100m, 250m, 500m, 1000m, 1500m} and a
//!   memory drawn from {100Mi, 256Mi, 512Mi, 1Gi, 2Gi, 4Gi}; labels `my-label` /
//!   `my-affininity` take a value drawn from `a`–`g`. Draws happen in upstream's order (labels,
//!   spread selector, CPU, memory) from a seed of 42, but with ChaCha8 rather than Go's
//!   `math/rand`, so the individual values differ while the distributions are the same.
//! * `pkg/cloudprovider/fake/instancetype.go` — `InstanceTypes(400)`: type `fake-it-{i}` has
//!   `i+1` vCPU, `2(i+1)` GiB, `10(i+1)` pods, kube-reserved overhead 100m / 10Mi, and the
//!   default offerings: spot in `test-zone-1`, `test-zone-2`, on-demand in `test-zone-1`–`3`,
//!   all at `PriceFromResources` = 0.1 × vCPU + 0.1 × memory bytes / 10⁹ dollars per hour.
//!
//! Karpenter's NodePool (`test.NodePool()`) sets no capacity-type requirement; ours allows
//! both `on-demand` and `spot` explicitly. The instance types are put on the AWS cloud only
//! because every type must belong to one; nothing AWS-specific is used.

use quartermaster_pricing::{Arch, CapacityType, Catalog, Cloud, InstanceType, Offering, Overhead};
use quartermaster_solver::pod::{HOSTNAME, ZONE};
use quartermaster_solver::resources::{CPU, MEMORY};
use quartermaster_solver::{ClusterSnapshot, Pod};

use crate::common::{
    GIB, MIB, affinity_term, capacity_types, label, node_pool, pod, requests, selector, spread,
};
use crate::rng::{Rng, pick, seeded};

/// Number of synthetic instance types (`fake.InstanceTypes(400)`).
pub const INSTANCE_TYPES: usize = 400;
/// Zones of the fake cloud.
pub const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];
/// The five pod groups of `makeDiversePods`, in upstream order.
pub const GROUPS: [&str; 5] = [
    "generic",
    "zonal-spread",
    "hostname-spread",
    "zonal-affinity",
    "hostname-anti-affinity",
];
/// Namespace of the generated pods.
pub const NAMESPACE: &str = "default";

const CPU_MILLIS: [i64; 5] = [100, 250, 500, 1000, 1500];
const MEMORY_MIB: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

/// `fake.InstanceTypes(400)` as a catalog.
pub fn catalog() -> Catalog {
    let as_of = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).expect("a valid date");
    let types = (0..INSTANCE_TYPES)
        .map(|i| {
            let n = i as u64 + 1;
            let memory_mib = n * 2 * 1024;
            // PriceFromResources: 0.1 per vCPU plus 0.1 per 10^9 bytes of memory.
            let price = 0.1 * n as f64 + 0.1 * (memory_mib * (1 << 20)) as f64 / 1e9;
            let offering = |zone: &str, capacity_type| Offering {
                region: "test-region".to_owned(),
                zone: zone.to_owned(),
                capacity_type,
                price_per_hour: price,
                available: true,
                price_source: "karpenter-fake".to_owned(),
                price_as_of: as_of,
                estimate: false,
            };
            InstanceType {
                cloud: Cloud::Aws,
                name: format!("fake-it-{i}"),
                family: "fake-it".to_owned(),
                vcpu: n as u32,
                memory_mib,
                arch: Arch::Amd64,
                accelerator: None,
                local_nvme_gb: 0,
                network_gbps: 0.0,
                interconnect: None,
                efa_count: 0,
                max_pods: (n * 10) as u32,
                overhead: Overhead {
                    cpu_millis: 100,
                    memory_mib: 10,
                },
                offerings: vec![
                    offering(ZONES[0], CapacityType::Spot),
                    offering(ZONES[1], CapacityType::Spot),
                    offering(ZONES[0], CapacityType::OnDemand),
                    offering(ZONES[1], CapacityType::OnDemand),
                    offering(ZONES[2], CapacityType::OnDemand),
                ],
            }
        })
        .collect();
    Catalog::new(types)
}

/// The snapshot: one NodePool and `makeDiversePods(pods)`.
pub fn snapshot(pods: usize) -> ClusterSnapshot {
    let mut pool = node_pool(
        "default",
        Cloud::Aws,
        vec![capacity_types(true)],
        Default::default(),
        Vec::new(),
    );
    // setupScheduler's limits: cpu 10000000, memory 10000000Gi.
    pool.limits.resources.set(CPU, 10_000_000 * 1000);
    pool.limits.resources.set(MEMORY, 10_000_000 * GIB);

    let mut rng = seeded();
    let per_group = pods / GROUPS.len();
    let mut pending = Vec::with_capacity(pods);
    for (g, group) in GROUPS.iter().enumerate() {
        for i in 0..per_group {
            pending.push(make_pod(&mut rng, g, format!("{group}-{i}")));
        }
    }
    // "fill out due to count being not evenly divisible with generic pods"
    for i in per_group..per_group + (pods - pending.len()) {
        pending.push(make_pod(&mut rng, 0, format!("{}-{i}", GROUPS[0])));
    }
    ClusterSnapshot {
        pending,
        node_pools: vec![pool],
        ..ClusterSnapshot::default()
    }
}

fn random_cpu(rng: &mut Rng) -> i64 {
    pick(rng, &CPU_MILLIS)
}

fn random_memory(rng: &mut Rng) -> i64 {
    pick(rng, &MEMORY_MIB) * MIB
}

fn random_value(rng: &mut Rng) -> &'static str {
    pick(rng, &LABEL_VALUES)
}

/// One pod of group `g` (index into [`GROUPS`]), drawing in upstream's order.
fn make_pod(rng: &mut Rng, g: usize, name: String) -> Pod {
    match g {
        // makeGenericPods
        0 => {
            let labels = label("my-label", random_value(rng));
            let mut p = pod(
                NAMESPACE,
                name,
                None,
                requests(random_cpu(rng), random_memory(rng)),
            );
            p.labels = labels;
            p
        }
        // makeTopologySpreadPods(zone | hostname)
        1 | 2 => {
            let labels = label("my-label", random_value(rng));
            let spread_selector = label("my-label", random_value(rng));
            let mut p = pod(
                NAMESPACE,
                name,
                None,
                requests(random_cpu(rng), random_memory(rng)),
            );
            p.labels = labels;
            p.topology_spread = vec![spread(
                if g == 1 { ZONE } else { HOSTNAME },
                1,
                selector(&spread_selector),
            )];
            p
        }
        // makePodAffinityPods(zone): self-affinity.
        3 => {
            let labels = label("my-affininity", random_value(rng));
            let mut p = pod(
                NAMESPACE,
                name,
                None,
                requests(random_cpu(rng), random_memory(rng)),
            );
            p.affinity = vec![affinity_term(ZONE, selector(&labels))];
            p.labels = labels;
            p
        }
        // makePodAntiAffinityPods(hostname): all app=nginx pods repel each other.
        _ => {
            let labels = label("app", "nginx");
            let mut p = pod(
                NAMESPACE,
                name,
                None,
                requests(random_cpu(rng), random_memory(rng)),
            );
            p.anti_affinity = vec![affinity_term(HOSTNAME, selector(&labels))];
            p.labels = labels;
            p
        }
    }
}
