//! Small builders for solver tests: a synthetic catalog, pools and pods.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use quartermaster_policies::{Operator, Requirement, Requirements};
use quartermaster_pricing::{
    Accelerator, Arch, CapacityType, Catalog, Cloud, InstanceType, Offering, Overhead,
};

use crate::pod::{Pod, PodRef, Taint, TaintEffect, Toleration};
use crate::resources::{CPU, MEMORY, PODS, Resources};
use crate::snapshot::{ClusterSnapshot, NodePoolSpec, PoolLimits, PoolUsage};
use crate::{Plan, SolveOptions, Strategy};

pub const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
pub const GPU: usize = 4;

pub fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

fn offering(zone: &str, capacity_type: CapacityType, price: f64) -> Offering {
    Offering {
        region: "us-east-1".into(),
        zone: zone.into(),
        capacity_type,
        price_per_hour: price,
        available: true,
        price_source: "test".into(),
        price_as_of: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
        estimate: false,
    }
}

/// An AWS instance type with on-demand offerings in `zones` and optional spot at `spot`.
pub fn instance(
    name: &str,
    vcpu: u32,
    mem_gib: u64,
    gpus: u32,
    price: f64,
    spot: Option<f64>,
) -> InstanceType {
    let mut offerings: Vec<Offering> = ZONES
        .iter()
        .map(|z| offering(z, CapacityType::OnDemand, price))
        .collect();
    if let Some(spot) = spot {
        offerings.extend(ZONES.iter().map(|z| offering(z, CapacityType::Spot, spot)));
    }
    InstanceType {
        cloud: Cloud::Aws,
        name: name.into(),
        family: name.split('.').next().unwrap_or(name).into(),
        vcpu,
        memory_mib: mem_gib * 1024,
        arch: Arch::Amd64,
        accelerator: (gpus > 0).then(|| Accelerator {
            manufacturer: "nvidia".into(),
            name: "a10g".into(),
            count: gpus,
            memory_mib: 22888,
            resource: "nvidia.com/gpu".into(),
            fraction: None,
        }),
        local_nvme_gb: 0,
        network_gbps: 10.0,
        interconnect: None,
        efa_count: 0,
        max_pods: 110,
        overhead: Overhead {
            cpu_millis: 100,
            memory_mib: 512,
        },
        offerings,
    }
}

/// g5-like GPU types and m6i-like CPU types with made-up but realistic prices.
pub fn catalog() -> Catalog {
    Catalog::new(vec![
        instance("g5.xlarge", 4, 16, 1, 1.006, Some(0.45)),
        instance("g5.12xlarge", 48, 192, 4, 5.672, Some(2.3)),
        instance("g5.48xlarge", 192, 768, 8, 16.288, None),
        instance("m6i.large", 2, 8, 0, 0.096, Some(0.04)),
        instance("m6i.xlarge", 4, 16, 0, 0.192, Some(0.08)),
        instance("m6i.4xlarge", 16, 64, 0, 0.768, Some(0.3)),
    ])
}

pub fn requirement(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values.iter().copied()).expect("valid requirement")
}

pub fn requirements(list: &[(&str, Operator, &[&str])]) -> Requirements {
    let mut r = Requirements::default();
    for (k, op, v) in list {
        r.add(requirement(k, *op, v));
    }
    r
}

/// A pool allowing on-demand only unless `requirements` say otherwise.
pub fn pool(name: &str, reqs: Requirements) -> NodePoolSpec {
    NodePoolSpec {
        name: name.into(),
        cloud: Cloud::Aws,
        weight: 0,
        requirements: reqs,
        labels: BTreeMap::new(),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        limits: PoolLimits::default(),
        usage: PoolUsage::default(),
        node_class_present: true,
        node_shape: Default::default(),
        preferences: Default::default(),
    }
}

/// An on-demand pool limited to `zones`.
pub fn zonal_pool(name: &str, zones: &[&str]) -> NodePoolSpec {
    pool(
        name,
        requirements(&[
            ("topology.kubernetes.io/zone", Operator::In, zones),
            (
                "quartermaster.dev/capacity-type",
                Operator::In,
                &["on-demand"],
            ),
        ]),
    )
}

pub fn on_demand_pool(name: &str) -> NodePoolSpec {
    pool(
        name,
        requirements(&[(
            "quartermaster.dev/capacity-type",
            Operator::In,
            &["on-demand"],
        )]),
    )
}

pub fn resources(cpu_m: i64, mem_mi: i64, gpus: i64) -> Resources {
    let mut r = Resources::ZERO;
    r.set(CPU, cpu_m);
    r.set(MEMORY, mem_mi << 20);
    r.set(PODS, 1);
    r.set(GPU, gpus);
    r
}

/// Allocatable of a node: like [`resources`] with room for 110 pods.
pub fn node_resources(cpu_m: i64, mem_mi: i64, gpus: i64) -> Resources {
    let mut r = resources(cpu_m, mem_mi, gpus);
    r.set(PODS, 110);
    r
}

pub fn pod(name: &str, cpu_m: i64, mem_mi: i64, gpus: i64) -> Pod {
    let mut p = Pod::new(PodRef::new("default", name), resources(cpu_m, mem_mi, gpus));
    p.labels.insert(
        "app".into(),
        name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-')
            .into(),
    );
    p
}

/// `n` identical pods named `prefix-0…`, labelled `app=prefix`.
pub fn pods(prefix: &str, n: usize, cpu_m: i64, mem_mi: i64, gpus: i64) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = pod(&format!("{prefix}-{i}"), cpu_m, mem_mi, gpus);
            p.labels.insert("app".into(), prefix.into());
            p
        })
        .collect()
}

pub fn taint(key: &str, value: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.into(),
        effect: TaintEffect::NoSchedule,
    }
}

pub fn toleration(key: &str) -> Toleration {
    Toleration {
        key: key.into(),
        exists: true,
        value: String::new(),
        effect: None,
    }
}

pub fn snapshot(pending: Vec<Pod>, pools: Vec<NodePoolSpec>) -> ClusterSnapshot {
    ClusterSnapshot {
        pending,
        node_pools: pools,
        ..ClusterSnapshot::default()
    }
}

pub fn solve(snapshot: &ClusterSnapshot) -> Plan {
    crate::solve(snapshot, &catalog(), now())
}

pub fn solve_greedy(snapshot: &ClusterSnapshot) -> Plan {
    crate::solve_with(
        snapshot,
        &catalog(),
        now(),
        &SolveOptions {
            strategy: Strategy::KarpenterGreedy,
            ..SolveOptions::default()
        },
    )
}

/// Instance types bought, sorted.
pub fn types(plan: &Plan) -> Vec<String> {
    let mut t: Vec<String> = plan
        .new_nodes
        .iter()
        .map(|n| n.offering.instance_type.clone())
        .collect();
    t.sort();
    t
}

/// Pods per new node, sorted descending.
pub fn pods_per_node(plan: &Plan) -> Vec<usize> {
    let mut n: Vec<usize> = plan.new_nodes.iter().map(|n| n.pods.len()).collect();
    n.sort_by(|a, b| b.cmp(a));
    n
}

/// Number of pods per zone over the new nodes.
pub fn pods_per_zone(plan: &Plan) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for n in &plan.new_nodes {
        *m.entry(n.offering.zone.clone()).or_default() += n.pods.len();
    }
    m
}

pub fn placed(plan: &Plan) -> usize {
    plan.new_nodes.iter().map(|n| n.pods.len()).sum::<usize>()
        + plan.existing.iter().map(|e| e.pods.len()).sum::<usize>()
}
