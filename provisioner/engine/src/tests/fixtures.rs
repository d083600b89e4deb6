//! A tiny world: one GPU instance type in two zones, spot and on-demand.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use quartermaster_cloud::{CloudError, Instance, InstanceState};
use quartermaster_policies::{NodePool, Operator, Requirement, Requirements};
use quartermaster_pricing::{
    Accelerator, Arch, CapacityType, Catalog, Cloud, InstanceType, Offering, Overhead,
};
use quartermaster_solver::resources::{CPU, MEMORY, PODS};
use quartermaster_solver::{
    NodePoolSpec, Pod, PodRef, PoolLimits, PoolUsage, ResourceTable, Resources,
};

use crate::{Action, Engine, EngineConfig, EngineSetup, Event, NodeView, PoolPolicy};

pub const GPU: usize = 4;

pub fn t(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap() + TimeDelta::seconds(seconds)
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

pub fn catalog() -> Catalog {
    Catalog::new(vec![InstanceType {
        cloud: Cloud::Aws,
        name: "g5.xlarge".into(),
        family: "g5".into(),
        vcpu: 4,
        memory_mib: 16 * 1024,
        arch: Arch::Amd64,
        accelerator: Some(Accelerator {
            manufacturer: "nvidia".into(),
            name: "a10g".into(),
            count: 1,
            memory_mib: 22888,
            resource: "nvidia.com/gpu".into(),
            fraction: None,
        }),
        local_nvme_gb: 0,
        network_gbps: 10.0,
        interconnect: None,
        efa_count: 0,
        max_pods: 58,
        overhead: Overhead {
            cpu_millis: 100,
            memory_mib: 512,
        },
        offerings: vec![
            offering("us-east-1a", CapacityType::Spot, 0.40),
            offering("us-east-1b", CapacityType::Spot, 0.45),
            offering("us-east-1a", CapacityType::OnDemand, 1.006),
            offering("us-east-1b", CapacityType::OnDemand, 1.006),
        ],
    }])
}

pub fn setup(consolidate_after: &str) -> EngineSetup {
    setup_with("WhenEmpty", consolidate_after)
}

pub fn setup_with(policy: &str, consolidate_after: &str) -> EngineSetup {
    let node_pool: NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "quartermaster.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"},
                "startupTaints": [{"key": "gpu-initializing", "effect": "NoSchedule"}]
            }},
            "disruption": {"consolidationPolicy": policy, "consolidateAfter": consolidate_after}
        }
    }))
    .expect("a valid NodePool");
    let mut requirements = Requirements::default();
    requirements.add(
        Requirement::new(
            "quartermaster.dev/capacity-type",
            Operator::In,
            ["spot", "on-demand"],
        )
        .expect("valid"),
    );
    let spec = NodePoolSpec {
        name: "gpu".into(),
        cloud: Cloud::Aws,
        weight: 0,
        requirements,
        labels: BTreeMap::new(),
        taints: Vec::new(),
        startup_taints: vec![quartermaster_solver::pod::Taint {
            key: "gpu-initializing".into(),
            value: String::new(),
            effect: quartermaster_solver::pod::TaintEffect::NoSchedule,
        }],
        limits: PoolLimits::default(),
        usage: PoolUsage::default(),
        node_class_present: true,
        node_shape: Default::default(),
        preferences: Default::default(),
    };
    EngineSetup {
        resources: ResourceTable::default(),
        pools: vec![PoolPolicy::new(spec, node_pool).expect("valid pool")],
        daemonsets: Vec::new(),
        catalog: catalog(),
    }
}

pub fn engine() -> Engine {
    Engine::new(setup("5m"), EngineConfig::default())
}

/// A CPU-only pod of `cpu_m` millicores and 1 GiB.
pub fn cpu_pod(name: &str, cpu_m: i64) -> Pod {
    let mut p = gpu_pod(name);
    p.requests.set(GPU, 0);
    p.requests.set(CPU, cpu_m);
    p.requests.set(MEMORY, 1 << 30);
    p
}

pub fn gpu_pod(name: &str) -> Pod {
    let mut r = Resources::ZERO;
    r.set(CPU, 2000);
    r.set(MEMORY, 8 << 30);
    r.set(PODS, 1);
    r.set(GPU, 1);
    Pod::new(PodRef::new("default", name), r)
}

/// The request of the first launch among `actions`.
pub fn first_launch_request(actions: &[Action]) -> &quartermaster_cloud::LaunchRequest {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Launch { request, .. } => Some(request),
            _ => None,
        })
        .expect("a launch")
}

/// The Launch actions in `actions`: (claim, instance type, zone, capacity type).
pub fn launches(actions: &[Action]) -> Vec<(String, String, String, CapacityType)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Launch { claim, request } => Some((
                claim.clone(),
                request.instance_type.clone(),
                request.zone.clone(),
                request.capacity_type,
            )),
            _ => None,
        })
        .collect()
}

pub fn binds(actions: &[Action]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Bind { pod, node } => Some((pod.name.clone(), node.clone())),
            _ => None,
        })
        .collect()
}

pub fn instance(
    claim: &str,
    id: &str,
    zone: &str,
    capacity_type: CapacityType,
    at: DateTime<Utc>,
) -> Instance {
    Instance {
        provider_id: format!("sim:///{zone}/{id}"),
        claim_name: claim.into(),
        instance_type: "g5.xlarge".into(),
        zone: zone.into(),
        capacity_type,
        price_per_hour: 0.4,
        state: InstanceState::Pending,
        launched_at: at,
        tags: BTreeMap::new(),
    }
}

pub fn ice(zone: &str, capacity_type: CapacityType) -> CloudError {
    CloudError::InsufficientCapacity {
        instance_type: "g5.xlarge".into(),
        zone: zone.into(),
        capacity_type,
        message: "InsufficientInstanceCapacity".into(),
    }
}

/// A node as the kubelet registers it: startup taint on, no GPU in allocatable yet.
pub fn registered_node(name: &str, zone: &str, gpus: i64, startup_taint: bool) -> NodeView {
    let mut allocatable = Resources::ZERO;
    allocatable.set(CPU, 3900);
    allocatable.set(MEMORY, 15 << 30);
    allocatable.set(PODS, 58);
    allocatable.set(GPU, gpus);
    NodeView {
        name: name.into(),
        labels: [("topology.kubernetes.io/zone".to_owned(), zone.to_owned())].into(),
        taints: if startup_taint {
            vec![quartermaster_solver::pod::Taint {
                key: "gpu-initializing".into(),
                value: String::new(),
                effect: quartermaster_solver::pod::TaintEffect::NoSchedule,
            }]
        } else {
            Vec::new()
        },
        allocatable,
        conditions: Vec::new(),
    }
}

/// Creates a pod at `at` and polls once the batch window has closed.
pub fn pending_then_poll(engine: &mut Engine, pods: &[&str], at: DateTime<Utc>) -> Vec<Action> {
    for p in pods {
        engine.handle(at, Event::PodPending(gpu_pod(p)));
    }
    assert!(engine.poll(at).is_empty(), "the batch is still open");
    let deadline = engine.next_deadline().expect("a batch deadline");
    engine.poll(deadline)
}
