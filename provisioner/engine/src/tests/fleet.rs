//! A CPU world for disruption tests: instance types of several sizes (and one GPU type), a
//! fleet built directly from NodeClaims found in the cluster, pods bound to them.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use quartermaster_policies::{NodePool, Requirements};
use quartermaster_pricing::{
    Accelerator, Arch, CapacityType, Catalog, Cloud, InstanceType, Offering, Overhead,
};
use quartermaster_solver::resources::{CPU, MEMORY, PODS};
use quartermaster_solver::{
    NodePoolSpec, OfferingChoice, Pod, PodRef, PoolLimits, PoolUsage, ResourceTable, Resources,
};

use super::fixtures::{GPU, t};
use crate::{
    Action, DisruptionCommand, Engine, EngineConfig, EngineSetup, Event, FoundClaim, NodeView,
    PoolPolicy,
};

/// (name, vCPU, on-demand $/h, spot $/h, GPUs)
pub const TYPES: [(&str, u32, f64, f64, u32); 5] = [
    ("c.large", 2, 0.10, 0.04, 0),
    ("c.xlarge", 4, 0.20, 0.08, 0),
    ("c.2xlarge", 8, 0.40, 0.16, 0),
    ("c.4xlarge", 16, 0.80, 0.32, 0),
    ("g.xlarge", 4, 1.00, 0.50, 1),
];

fn offering(capacity_type: CapacityType, price: f64) -> Offering {
    Offering {
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity_type,
        price_per_hour: price,
        available: true,
        price_source: "test".into(),
        price_as_of: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
        estimate: false,
    }
}

/// The catalog, with each price multiplied by `factor(name)`.
pub fn catalog_priced(factor: impl Fn(&str) -> f64) -> Catalog {
    Catalog::new(
        TYPES
            .iter()
            .map(|(name, vcpu, od, spot, gpus)| InstanceType {
                cloud: Cloud::Aws,
                name: (*name).into(),
                family: name.split('.').next().unwrap_or_default().into(),
                vcpu: *vcpu,
                memory_mib: u64::from(*vcpu) * 4096,
                arch: Arch::Amd64,
                accelerator: (*gpus > 0).then(|| Accelerator {
                    manufacturer: "nvidia".into(),
                    name: "a10g".into(),
                    count: *gpus,
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
                    cpu_millis: 0,
                    memory_mib: 0,
                },
                offerings: vec![
                    offering(CapacityType::Spot, spot * factor(name)),
                    offering(CapacityType::OnDemand, od * factor(name)),
                ],
            })
            .collect(),
    )
}

/// A `WhenEmptyOrUnderutilized` pool "cpu" (consolidateAfter 1m) with extra `disruption`
/// and template fields, buying `capacity` ("on-demand", "spot" or "spot,on-demand").
pub fn pool(
    capacity: &str,
    disruption: serde_json::Value,
    template: serde_json::Value,
) -> PoolPolicy {
    pool_annotated(capacity, disruption, template, serde_json::json!({}))
}

/// The same with NodePool annotations.
pub fn pool_annotated(
    capacity: &str,
    disruption: serde_json::Value,
    template: serde_json::Value,
    annotations: serde_json::Value,
) -> PoolPolicy {
    let mut d = serde_json::json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"});
    if let (Some(d), Some(extra)) = (d.as_object_mut(), disruption.as_object()) {
        d.extend(extra.clone());
    }
    let mut tspec = serde_json::json!({
        "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"}
    });
    if let (Some(ts), Some(extra)) = (tspec.as_object_mut(), template.as_object()) {
        ts.extend(extra.clone());
    }
    let node_pool: NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "quartermaster.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "cpu", "annotations": annotations},
        "spec": {"template": {"spec": tspec}, "disruption": d}
    }))
    .expect("a valid NodePool");
    let mut requirements = Requirements::default();
    requirements.add(
        quartermaster_policies::Requirement::new(
            "quartermaster.dev/capacity-type",
            quartermaster_policies::Operator::In,
            capacity.split(','),
        )
        .expect("valid"),
    );
    let spec = NodePoolSpec {
        name: "cpu".into(),
        cloud: Cloud::Aws,
        weight: 0,
        requirements,
        labels: BTreeMap::new(),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        limits: PoolLimits::default(),
        usage: PoolUsage::default(),
        node_class_present: true,
        node_shape: Default::default(),
        preferences: Default::default(),
    };
    PoolPolicy::new(spec, node_pool).expect("valid pool")
}

/// An engine on the CPU catalog with one pool.
pub fn engine_with(pool: PoolPolicy, config: EngineConfig) -> Engine {
    Engine::new(
        EngineSetup {
            resources: ResourceTable::default(),
            pools: vec![pool],
            daemonsets: Vec::new(),
            catalog: catalog_priced(|_| 1.0),
        },
        config,
    )
}

/// A pod of `cpu_m` millicores, 1 GiB, `gpus` GPUs.
pub fn pod(name: &str, cpu_m: i64, gpus: i64) -> Pod {
    let mut r = Resources::ZERO;
    r.set(CPU, cpu_m);
    r.set(MEMORY, 1 << 30);
    r.set(PODS, 1);
    r.set(GPU, gpus);
    Pod::new(PodRef::new("default", name), r)
}

/// Adopts an initialized claim `name` of `instance_type` (node `name` too) created at `at`,
/// with `template_hash`, and binds `pods` to it.
pub fn node_with(
    e: &mut Engine,
    name: &str,
    instance_type: &str,
    capacity_type: CapacityType,
    pods: Vec<Pod>,
    at: DateTime<Utc>,
    template_hash: Option<&str>,
) {
    let catalog = catalog_priced(|_| 1.0);
    let it = catalog.get(Cloud::Aws, instance_type).expect("known type");
    let price = it
        .offerings
        .iter()
        .find(|o| o.capacity_type == capacity_type)
        .expect("offering")
        .price_per_hour;
    let mut allocatable = Resources::ZERO;
    allocatable.set(CPU, i64::from(it.vcpu) * 1000);
    allocatable.set(MEMORY, (it.memory_mib as i64) << 20);
    allocatable.set(PODS, 58);
    allocatable.set(GPU, i64::from(it.accelerator_count()));
    e.handle(
        at,
        Event::ClaimFound(FoundClaim {
            name: name.into(),
            node_pool: "cpu".into(),
            offering: OfferingChoice {
                instance_type: instance_type.into(),
                zone: "us-east-1a".into(),
                capacity_type,
                price_per_hour: price,
            },
            created_at: at,
            provider_id: Some(format!("sim:///us-east-1a/{name}")),
            launched_at: Some(at),
            node: Some(NodeView {
                name: name.into(),
                labels: [(
                    "topology.kubernetes.io/zone".to_owned(),
                    "us-east-1a".to_owned(),
                )]
                .into(),
                taints: Vec::new(),
                allocatable,
                conditions: Vec::new(),
            }),
            registered_at: Some(at),
            initialized_at: Some(at),
            deleting: false,
            template_hash: template_hash.map(str::to_owned),
            gang: None,
        }),
    );
    for p in pods {
        e.handle(
            at,
            Event::PodBound {
                pod: p,
                node: name.into(),
            },
        );
    }
}

/// Polls at every deadline from `from` up to `until` (seconds), reporting deletes as done,
/// returning every action.
pub fn run(e: &mut Engine, from: i64, until: i64) -> Vec<Action> {
    let mut all = Vec::new();
    let mut now = from;
    loop {
        // As drivers do: poll again at the same instant while the engine has things to do.
        for _ in 0..100 {
            let actions = e.poll(t(now));
            if actions.is_empty() {
                break;
            }
            // Deletes finish at once.
            for a in &actions {
                if let Action::Delete { claim, .. } = a {
                    e.handle(
                        t(now),
                        Event::Deleted {
                            claim: claim.clone(),
                        },
                    );
                }
            }
            all.extend(actions);
        }
        match e.next_deadline() {
            Some(d) if d <= t(until) => now = (d - t(0)).num_seconds().max(now + 1),
            _ => return all,
        }
    }
}

/// The disruption commands among `actions`.
pub fn commands(actions: &[Action]) -> Vec<DisruptionCommand> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Disrupt(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// Claims deleted among `actions`, with the reason.
pub fn deleted(actions: &[Action]) -> Vec<(String, crate::DeleteReason)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete { claim, reason, .. } => Some((claim.clone(), *reason)),
            _ => None,
        })
        .collect()
}

/// Reports every launch in `actions` as an initialized node at `at` (node named after the
/// claim) and returns the claims.
pub fn bring_up(e: &mut Engine, actions: &[Action], at: DateTime<Utc>) -> Vec<String> {
    let catalog = catalog_priced(|_| 1.0);
    let mut names = Vec::new();
    for a in actions {
        let Action::Launch { claim, request } = a else {
            continue;
        };
        e.handle(
            at,
            Event::Launched {
                claim: claim.clone(),
                instance: quartermaster_cloud::Instance {
                    provider_id: format!("sim:///{}/{claim}", request.zone),
                    claim_name: claim.clone(),
                    instance_type: request.instance_type.clone(),
                    zone: request.zone.clone(),
                    capacity_type: request.capacity_type,
                    price_per_hour: request.price_per_hour,
                    state: quartermaster_cloud::InstanceState::Pending,
                    launched_at: at,
                    tags: BTreeMap::new(),
                },
            },
        );
        let it = catalog
            .get(Cloud::Aws, &request.instance_type)
            .expect("known type");
        let mut allocatable = Resources::ZERO;
        allocatable.set(CPU, i64::from(it.vcpu) * 1000);
        allocatable.set(MEMORY, (it.memory_mib as i64) << 20);
        allocatable.set(PODS, 58);
        allocatable.set(GPU, i64::from(it.accelerator_count()));
        e.handle(
            at,
            Event::NodeRegistered {
                claim: claim.clone(),
                node: NodeView {
                    name: claim.clone(),
                    labels: request.labels.clone(),
                    taints: Vec::new(),
                    allocatable,
                    conditions: Vec::new(),
                },
            },
        );
        names.push(claim.clone());
    }
    names
}
