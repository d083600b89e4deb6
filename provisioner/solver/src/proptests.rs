//! Property-based tests of the solver on random small snapshots over the embedded catalog:
//! 1-40 pods with random requests, node selectors drawn from the catalog's real label values,
//! tolerations, anti-affinity, gangs, a few existing nodes and NodePools with taints and
//! limits. Whatever the snapshot, `solve` must not panic and its plan must be valid:
//!
//! * every pending pod is placed exactly once (on a new or an existing node) or listed
//!   unschedulable, and nothing else is placed;
//! * a new node's offering is in the catalog at that price, available, allowed by its pool,
//!   and its pods (and those of every alternative offering) fit the type's allocatable and
//!   satisfy their node selectors and the pool's taints;
//! * pods placed on an existing node fit what is left of it and satisfy its labels and taints;
//! * required hostname anti-affinity and gangs (whole, in one zone, or not at all) hold;
//! * NodePool limits hold;
//! * `cost_per_hour` is the sum of the new nodes' prices and at least the lower bound;
//! * a pod no instance type holds is unschedulable, with a reason.
//!
//! 12 cases by default (CI); `PROPTEST_CASES=1000 cargo test -p quartermaster-solver proptests`
//! runs more.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, LazyLock};

use chrono::{DateTime, Utc};
use proptest::prelude::*;
use proptest::sample::Index;
use quartermaster_policies::{Operator, Requirement, Requirements};
use quartermaster_pricing::{Catalog, Cloud, InstanceType};

use crate::pod::{
    Gang, HOSTNAME, Pod, PodAffinityTerm, PodRef, Taint, TaintEffect, Toleration, tolerates_all,
};
use crate::resources::{CPU, MEMORY, PODS, ResourceTable, Resources};
use crate::snapshot::{ClusterSnapshot, ExistingNode, NodePoolSpec, PoolLimits, PoolUsage};
use crate::{NODEPOOL_LABEL, Plan, SolveOptions, Strategy as PackStrategy, to_resources};

/// 12 cases unless `PROPTEST_CASES` says otherwise (an explicit `cases` hides the variable from
/// proptest itself, so it is read here). A case is two solves of up to 40 pods over the whole
/// embedded catalog, about half a second in a debug build.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

const GPU: usize = 4;
const GPU_TAINT: &str = "nvidia.com/gpu";
const ZONE: &str = "topology.kubernetes.io/zone";
const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
const ARCH: &str = "kubernetes.io/arch";
const CAPACITY_TYPE: &str = "quartermaster.dev/capacity-type";
const CLOUD: &str = "quartermaster.dev/cloud";
const FAMILY: &str = "quartermaster.dev/instance-family";
const GPU_NAME: &str = "quartermaster.dev/instance-gpu-name";
const INSTANCE_CPU: &str = "quartermaster.dev/instance-cpu";
const APPS: [&str; 3] = ["web", "db", "batch"];

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

fn catalog() -> &'static Catalog {
    static CATALOG: LazyLock<Catalog> = LazyLock::new(Catalog::embedded);
    &CATALOG
}

/// The catalog's real values of the keys node selectors are drawn from (AWS and GCP).
fn label_values() -> &'static BTreeMap<&'static str, Vec<String>> {
    static VALUES: LazyLock<BTreeMap<&'static str, Vec<String>>> = LazyLock::new(|| {
        let mut sets: BTreeMap<&'static str, BTreeSet<String>> = BTreeMap::new();
        for it in catalog().instance_types() {
            if it.cloud == Cloud::Azure {
                continue;
            }
            for o in &it.offerings {
                let labels = it.offering_labels(o);
                for key in [
                    ZONE,
                    INSTANCE_TYPE,
                    ARCH,
                    CAPACITY_TYPE,
                    CLOUD,
                    FAMILY,
                    GPU_NAME,
                ] {
                    if let Some(v) = labels.get(key) {
                        sets.entry(key).or_default().insert(v.clone());
                    }
                }
            }
        }
        sets.into_iter()
            .map(|(k, v)| (k, v.into_iter().collect()))
            .collect()
    });
    &VALUES
}

/// One requirement of a node selector term, resolved against [`label_values`] when built.
#[derive(Debug, Clone)]
struct GenRequirement {
    key: usize,
    op: usize,
    values: Vec<Index>,
    number: u32,
}

const SELECTOR_KEYS: [&str; 8] = [
    ZONE,
    INSTANCE_TYPE,
    ARCH,
    CAPACITY_TYPE,
    CLOUD,
    FAMILY,
    GPU_NAME,
    INSTANCE_CPU,
];

impl GenRequirement {
    fn build(&self) -> Requirement {
        let key = SELECTOR_KEYS[self.key];
        if key == INSTANCE_CPU {
            let op = [Operator::Gt, Operator::Lt, Operator::Gte, Operator::Lte][self.op % 4];
            return Requirement::new(key, op, [self.number.to_string()]).unwrap();
        }
        let known = &label_values()[key];
        let values: BTreeSet<String> = self.values.iter().map(|i| i.get(known).clone()).collect();
        let op = [
            Operator::In,
            Operator::In,
            Operator::NotIn,
            Operator::Exists,
            Operator::DoesNotExist,
        ][self.op % 5];
        let values: Vec<String> = match op {
            Operator::Exists | Operator::DoesNotExist => Vec::new(),
            _ => values.into_iter().collect(),
        };
        Requirement::new(key, op, values).unwrap()
    }
}

fn gen_requirement() -> impl Strategy<Value = GenRequirement> {
    (
        0..SELECTOR_KEYS.len(),
        0usize..20,
        proptest::collection::vec(any::<Index>(), 1..4),
        1u32..200,
    )
        .prop_map(|(key, op, values, number)| GenRequirement {
            key,
            op,
            values,
            number,
        })
}

#[derive(Debug, Clone)]
struct GenPod {
    cpu_millis: i64,
    memory_mib: i64,
    gpus: i64,
    app: usize,
    /// Required node terms (ORed), each a few requirements (ANDed).
    terms: Vec<Vec<GenRequirement>>,
    preferred: Vec<(i32, Vec<GenRequirement>)>,
    tolerates_gpu_taint: bool,
    /// Required anti-affinity to its own app on the hostname.
    anti_affinity: bool,
    /// Member of its app's gang.
    gang: bool,
}

fn gen_pod() -> impl Strategy<Value = GenPod> {
    let cpu = prop_oneof![
        6 => 50i64..4_000,
        3 => 4_000i64..64_000,
        1 => 64_000i64..400_000,
    ];
    let memory = prop_oneof![
        6 => 64i64..16_384,
        3 => 16_384i64..262_144,
        1 => 262_144i64..4_000_000,
    ];
    let gpus = prop_oneof![6 => Just(0i64), 3 => 1i64..=2, 1 => 3i64..=16];
    let term = || proptest::collection::vec(gen_requirement(), 1..3);
    (
        (cpu, memory, gpus, 0..APPS.len()),
        prop_oneof![
            3 => Just(Vec::new()),
            2 => proptest::collection::vec(term(), 1..3),
        ],
        proptest::collection::vec((1i32..=100, term()), 0..2),
        (
            any::<bool>(),
            proptest::bool::weighted(0.15),
            proptest::bool::weighted(0.1),
        ),
    )
        .prop_map(
            |((cpu_millis, memory_mib, gpus, app), terms, preferred, (tolerates, anti, gang))| {
                GenPod {
                    cpu_millis,
                    memory_mib,
                    gpus,
                    app,
                    terms,
                    preferred,
                    tolerates_gpu_taint: tolerates,
                    anti_affinity: anti,
                    gang,
                }
            },
        )
}

/// Existing node: a real offering of an AWS type, with a share of it already in use.
#[derive(Debug, Clone)]
struct GenNode {
    instance_type: Index,
    offering: Index,
    used_percent: i64,
    in_flight: bool,
    pool: Index,
    tainted: bool,
}

fn gen_node() -> impl Strategy<Value = GenNode> {
    (
        any::<Index>(),
        any::<Index>(),
        0i64..=100,
        any::<bool>(),
        any::<Index>(),
        proptest::bool::weighted(0.2),
    )
        .prop_map(
            |(instance_type, offering, used_percent, in_flight, pool, tainted)| GenNode {
                instance_type,
                offering,
                used_percent,
                in_flight,
                pool,
                tainted,
            },
        )
}

#[derive(Debug, Clone)]
struct GenSnapshot {
    pods: Vec<GenPod>,
    nodes: Vec<GenNode>,
    /// Which of [`pool_templates`] the snapshot has (at least one).
    pools: BTreeSet<usize>,
    /// Offerings marked unavailable: (type, offering) indices.
    unavailable: Vec<(Index, Index)>,
    /// Offering limits: a type's offerings of one capacity type (the type's offering index
    /// picks it), at most `max` new nodes.
    limits: Vec<((Index, Index), u32)>,
    /// Adds a pod no instance type holds.
    giant: bool,
}

fn gen_snapshot() -> impl Strategy<Value = GenSnapshot> {
    (
        proptest::collection::vec(gen_pod(), 1..=40),
        proptest::collection::vec(gen_node(), 0..=3),
        proptest::collection::btree_set(0..POOLS, 1..=3),
        proptest::collection::vec((any::<Index>(), any::<Index>()), 0..4),
        proptest::collection::vec(((any::<Index>(), any::<Index>()), 0u32..3), 0..3),
        proptest::bool::weighted(0.25),
    )
        .prop_map(
            |(pods, nodes, pools, unavailable, limits, giant)| GenSnapshot {
                pods,
                nodes,
                pools,
                unavailable,
                limits,
                giant,
            },
        )
}

const POOLS: usize = 5;

fn requirements(list: &[(&str, Operator, &[&str])]) -> Requirements {
    list.iter()
        .map(|(k, op, v)| Requirement::new(*k, *op, v.iter().copied()).unwrap())
        .collect()
}

fn pool(name: &str, cloud: Cloud, requirements: Requirements) -> NodePoolSpec {
    NodePoolSpec {
        name: name.into(),
        cloud,
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
    }
}

/// On-demand AWS; spot-or-on-demand AWS of higher weight; a tainted AWS GPU pool with the
/// overshoot guard; GCP; a limited AWS pool with a template label.
fn pool_templates(i: usize) -> NodePoolSpec {
    match i {
        0 => pool(
            "on-demand",
            Cloud::Aws,
            requirements(&[(CAPACITY_TYPE, Operator::In, &["on-demand"])]),
        ),
        1 => {
            let mut p = pool(
                "spot",
                Cloud::Aws,
                requirements(&[(CAPACITY_TYPE, Operator::In, &["spot", "on-demand"])]),
            );
            p.weight = 10;
            p
        }
        2 => {
            let mut p = pool(
                "gpu",
                Cloud::Aws,
                requirements(&[(GPU_NAME, Operator::Exists, &[])]),
            );
            p.taints.push(Taint {
                key: GPU_TAINT.into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            });
            p.limits.max_gpu_overshoot = Some(1);
            p
        }
        3 => pool("gcp", Cloud::Gcp, Requirements::new()),
        _ => {
            let mut p = pool(
                "limited",
                Cloud::Aws,
                requirements(&[(ARCH, Operator::In, &["amd64"])]),
            );
            p.labels.insert("team".into(), "ml".into());
            p.limits.nodes = Some(3);
            p.limits.max_hourly_cost = Some(12.0);
            p.limits.resources.set(CPU, 96_000);
            p.usage.nodes = 1;
            p.usage.hourly_cost = 2.5;
            p.usage.resources.set(CPU, 8_000);
            p
        }
    }
}

fn aws_types() -> Vec<&'static InstanceType> {
    catalog()
        .instance_types()
        .iter()
        .filter(|it| it.cloud == Cloud::Aws && !it.offerings.is_empty())
        .collect()
}

fn scale(r: &Resources, percent: i64) -> Resources {
    let mut out = Resources::ZERO;
    for slot in [CPU, MEMORY, GPU] {
        out.set(slot, r.get(slot) / 100 * percent);
    }
    out.set(PODS, 1);
    out
}

fn build(g: &GenSnapshot) -> ClusterSnapshot {
    let table = ResourceTable::default();
    let gpu_toleration = Toleration {
        key: GPU_TAINT.into(),
        exists: true,
        value: String::new(),
        effect: None,
    };
    let mut pending = Vec::new();
    for (i, gp) in g.pods.iter().enumerate() {
        let mut requests = Resources::ZERO;
        requests.set(CPU, gp.cpu_millis);
        requests.set(MEMORY, gp.memory_mib << 20);
        requests.set(PODS, 1);
        requests.set(GPU, gp.gpus);
        let app = APPS[gp.app];
        let mut pod = Pod::new(PodRef::new("default", format!("{app}-{i}")), requests);
        pod.labels.insert("app".into(), app.into());
        pod.node_terms = gp
            .terms
            .iter()
            .map(|t| t.iter().map(GenRequirement::build).collect())
            .collect();
        pod.preferred_node_terms = gp
            .preferred
            .iter()
            .map(|(weight, t)| crate::pod::PreferredNodeTerm {
                weight: *weight,
                requirements: t.iter().map(GenRequirement::build).collect(),
            })
            .collect();
        if gp.tolerates_gpu_taint {
            pod.tolerations.push(gpu_toleration.clone());
        }
        if gp.anti_affinity {
            pod.anti_affinity.push(PodAffinityTerm {
                topology_key: HOSTNAME.into(),
                selector: requirements(&[("app", Operator::In, &[app])]),
                namespaces: Vec::new(),
                preferred_weight: None,
            });
        }
        pending.push(pod);
    }
    if g.giant {
        let mut giant = Resources::ZERO;
        giant.set(CPU, 10_000_000);
        giant.set(MEMORY, 1 << 50);
        giant.set(PODS, 1);
        pending.push(Pod::new(PodRef::new("default", "giant"), giant));
    }
    // Gangs: every gang member of an app, with minMember = their number.
    for app in APPS {
        let members: Vec<usize> = g
            .pods
            .iter()
            .enumerate()
            .filter(|(_, p)| p.gang && APPS[p.app] == app)
            .map(|(i, _)| i)
            .collect();
        for &i in &members {
            pending[i].gang = Some(Gang {
                name: format!("default/{app}"),
                min_member: members.len() as u32,
            });
        }
    }
    let node_pools: Vec<NodePoolSpec> = g.pools.iter().map(|&i| pool_templates(i)).collect();
    let types = aws_types();
    let mut nodes = Vec::new();
    for (n, gn) in g.nodes.iter().enumerate() {
        let it = *gn.instance_type.get(&types);
        let o = gn.offering.get(&it.offerings);
        let pool = gn.pool.get(&node_pools);
        let mut labels = it.offering_labels(o);
        labels.insert(NODEPOOL_LABEL.into(), pool.name.clone());
        labels.insert(HOSTNAME.into(), format!("node-{n}"));
        let allocatable = to_resources(&table, &it.allocatable());
        let mut running = Pod::new(
            PodRef::new("default", format!("running-{n}")),
            scale(&allocatable, gn.used_percent),
        );
        running
            .labels
            .insert("app".into(), APPS[n % APPS.len()].into());
        nodes.push(ExistingNode {
            name: format!("node-{n}"),
            in_flight: gn.in_flight,
            node_pool: Some(pool.name.clone()),
            labels: Arc::new(labels),
            taints: if gn.tainted {
                vec![Taint {
                    key: GPU_TAINT.into(),
                    value: String::new(),
                    effect: TaintEffect::NoSchedule,
                }]
            } else {
                Vec::new()
            },
            allocatable,
            pods: vec![Arc::new(running)],
        });
    }
    let all_types: Vec<&InstanceType> = catalog()
        .instance_types()
        .iter()
        .filter(|it| !it.offerings.is_empty())
        .collect();
    let unavailable = g
        .unavailable
        .iter()
        .map(|(t, o)| {
            let it = t.get(&all_types);
            let o = o.get(&it.offerings);
            crate::OfferingKey {
                cloud: it.cloud,
                instance_type: it.name.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type,
            }
        })
        .collect();
    let offering_limits = g
        .limits
        .iter()
        .map(|((t, o), max)| {
            let it = t.get(&all_types);
            let capacity_type = o.get(&it.offerings).capacity_type;
            crate::OfferingLimit {
                offerings: it
                    .offerings
                    .iter()
                    .filter(|o| o.capacity_type == capacity_type)
                    .map(|o| crate::OfferingKey {
                        cloud: it.cloud,
                        instance_type: it.name.clone(),
                        zone: o.zone.clone(),
                        capacity_type,
                    })
                    .collect(),
                max: *max,
            }
        })
        .collect();
    ClusterSnapshot {
        resources: table,
        pending,
        nodes,
        node_pools,
        daemonsets: Vec::new(),
        unavailable,
        offering_limits,
    }
}

fn sum<'a>(requests: impl Iterator<Item = &'a Resources>) -> Resources {
    requests.fold(Resources::ZERO, |a, r| a + *r)
}

/// Checks every property of the module doc on one plan.
fn check_plan(s: &ClusterSnapshot, plan: &Plan, what: &str) -> Result<(), TestCaseError> {
    let cat = catalog();
    let pods: BTreeMap<&PodRef, &Pod> = s.pending.iter().map(|p| (&p.id, p)).collect();

    // Every pending pod exactly once; nothing else.
    let mut seen: BTreeMap<&PodRef, usize> = BTreeMap::new();
    let placed_new = plan.new_nodes.iter().flat_map(|n| &n.pods);
    let placed_existing = plan.existing.iter().flat_map(|e| &e.pods);
    let unschedulable = plan.unschedulable.iter().map(|u| &u.pod);
    for id in placed_new.chain(placed_existing).chain(unschedulable) {
        prop_assert!(pods.contains_key(id), "{what}: {id} is not pending");
        *seen.entry(id).or_default() += 1;
    }
    for id in pods.keys() {
        prop_assert_eq!(
            seen.get(id).copied(),
            Some(1),
            "{}: {} placed {:?} times",
            what,
            id,
            seen.get(id)
        );
    }
    for r in &plan.relaxations {
        prop_assert!(
            pods.contains_key(&r.pod),
            "{what}: relaxed {} is not pending",
            r.pod
        );
    }

    // Where each placed pod went: (node key, zone).
    let mut node_of: BTreeMap<&PodRef, (String, Option<String>)> = BTreeMap::new();

    // New nodes.
    let mut cost = 0.0;
    let mut per_pool: BTreeMap<&str, (u64, f64, Resources)> = BTreeMap::new();
    for (n, node) in plan.new_nodes.iter().enumerate() {
        let pool = s.node_pools.iter().find(|p| p.name == node.node_pool);
        prop_assert!(pool.is_some(), "{what}: unknown pool {}", node.node_pool);
        let pool = pool.unwrap();
        prop_assert_eq!(node.cloud, pool.cloud);
        prop_assert!(!node.pods.is_empty(), "{what}: new node {n} holds no pod");
        let requests = sum(node.pods.iter().map(|id| &pods[id].requests));
        prop_assert_eq!(node.requests, requests, "{}: new node {} requests", what, n);
        cost += node.offering.price_per_hour;
        for (k, choice) in std::iter::once(&node.offering)
            .chain(&node.alternatives)
            .enumerate()
        {
            let it = cat.get(pool.cloud, &choice.instance_type);
            prop_assert!(
                it.is_some(),
                "{what}: {} not in the catalog",
                choice.instance_type
            );
            let it = it.unwrap();
            let o = it
                .offerings
                .iter()
                .find(|o| o.zone == choice.zone && o.capacity_type == choice.capacity_type);
            prop_assert!(o.is_some(), "{what}: no offering {choice:?}");
            let o = o.unwrap();
            prop_assert!(o.available, "{what}: {choice:?} is not available");
            prop_assert_eq!(o.price_per_hour, choice.price_per_hour);
            prop_assert!(
                !s.unavailable.contains(&crate::OfferingKey {
                    cloud: it.cloud,
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                }),
                "{what}: {choice:?} is marked unavailable"
            );
            let mut labels = it.offering_labels(o);
            labels.extend(pool.labels.clone());
            labels.insert(NODEPOOL_LABEL.into(), pool.name.clone());
            prop_assert!(
                pool.requirements.matches(&labels),
                "{what}: {choice:?} is outside pool {}",
                pool.name
            );
            let allocatable = to_resources(&s.resources, &pool.node_shape.allocatable(it).unwrap());
            prop_assert!(
                requests.fits_in(&allocatable),
                "{what}: new node {n} (offering {k}, {}) holds {requests:?} > {allocatable:?}",
                it.name
            );
            for id in &node.pods {
                let pod = pods[id];
                prop_assert!(
                    pod.node_terms.is_empty() || pod.node_terms.iter().any(|t| t.matches(&labels)),
                    "{what}: {id} on {choice:?} breaks its node selector"
                );
                prop_assert!(
                    tolerates_all(&pod.tolerations, &pool.taints).is_ok(),
                    "{what}: {id} does not tolerate pool {}",
                    pool.name
                );
            }
            if k == 0 {
                let usage = per_pool
                    .entry(&pool.name)
                    .or_insert((0, 0.0, Resources::ZERO));
                usage.0 += 1;
                usage.1 += o.price_per_hour;
                usage.2 += to_resources(&s.resources, &pool.node_shape.capacity(it).unwrap());
            }
        }
        for id in &node.pods {
            node_of.insert(id, (format!("new-{n}"), Some(node.offering.zone.clone())));
        }
    }
    let tolerance = 1e-9 * cost.max(1.0);
    prop_assert!(
        (plan.cost_per_hour - cost).abs() <= tolerance,
        "{what}: cost {} != {}",
        plan.cost_per_hour,
        cost
    );
    prop_assert!(plan.lower_bound_per_hour.is_finite() && plan.lower_bound_per_hour >= 0.0);
    prop_assert!(
        plan.cost_per_hour >= plan.lower_bound_per_hour - 1e-6,
        "{what}: cost {} below the bound {}",
        plan.cost_per_hour,
        plan.lower_bound_per_hour
    );

    // Pool limits.
    for pool in &s.node_pools {
        let Some((nodes, dollars, capacity)) = per_pool.get(pool.name.as_str()) else {
            continue;
        };
        if let Some(max) = pool.limits.nodes {
            prop_assert!(
                pool.usage.nodes + nodes <= max,
                "{what}: pool {} over its node limit",
                pool.name
            );
        }
        if let Some(max) = pool.limits.max_hourly_cost {
            prop_assert!(
                pool.usage.hourly_cost + dollars <= max + 1e-6,
                "{what}: pool {} over maxHourlyCost",
                pool.name
            );
        }
        let used = pool.usage.resources + *capacity;
        prop_assert!(
            used.fits_in(&pool.limits.resources),
            "{what}: pool {} over its resource limits",
            pool.name
        );
    }

    // Existing nodes.
    let mut placements = BTreeSet::new();
    for e in &plan.existing {
        prop_assert!(
            placements.insert(e.node.as_str()),
            "{what}: {} listed twice",
            e.node
        );
        let node = s.nodes.iter().find(|n| n.name == e.node);
        prop_assert!(node.is_some(), "{what}: unknown node {}", e.node);
        let node = node.unwrap();
        prop_assert_eq!(e.in_flight, node.in_flight);
        let used = sum(node.pods.iter().map(|p| &p.requests))
            + sum(e.pods.iter().map(|id| &pods[id].requests));
        prop_assert!(
            used.fits_in(&node.allocatable),
            "{what}: {} over-committed: {used:?} > {:?}",
            e.node,
            node.allocatable
        );
        for id in &e.pods {
            let pod = pods[id];
            prop_assert!(
                pod.node_terms.is_empty()
                    || pod.node_terms.iter().any(|t| t.matches(&*node.labels)),
                "{what}: {id} on {} breaks its node selector",
                e.node
            );
            prop_assert!(
                tolerates_all(&pod.tolerations, &node.taints).is_ok(),
                "{what}: {id} on tainted {}",
                e.node
            );
            node_of.insert(id, (e.node.clone(), node.labels.get(ZONE).cloned()));
        }
    }

    // Required hostname anti-affinity to the pod's own app.
    for (id, (node, _)) in &node_of {
        let pod = pods[id];
        if pod.anti_affinity.is_empty() {
            continue;
        }
        let app = &pod.labels["app"];
        let mut neighbours: Vec<&BTreeMap<String, String>> = node_of
            .iter()
            .filter(|(other, (n, _))| *other != id && n == node)
            .map(|(other, _)| &pods[other].labels)
            .collect();
        if let Some(existing) = s.nodes.iter().find(|n| &n.name == node) {
            neighbours.extend(existing.pods.iter().map(|p| &p.labels));
        }
        prop_assert!(
            neighbours.iter().all(|l| l.get("app") != Some(app)),
            "{what}: {id} shares {node} with another {app} pod"
        );
    }

    // Gangs: whole, in one zone, or not at all.
    let mut gangs: BTreeMap<&str, Vec<&PodRef>> = BTreeMap::new();
    for pod in &s.pending {
        if let Some(g) = &pod.gang {
            gangs.entry(&g.name).or_default().push(&pod.id);
        }
    }
    for (gang, members) in gangs {
        let placed: Vec<_> = members.iter().filter_map(|id| node_of.get(id)).collect();
        prop_assert!(
            placed.is_empty() || placed.len() == members.len(),
            "{what}: gang {gang}: {} of {} placed",
            placed.len(),
            members.len()
        );
        let zones: BTreeSet<_> = placed.iter().filter_map(|(_, z)| z.as_ref()).collect();
        prop_assert!(
            zones.len() <= 1,
            "{what}: gang {gang} spans zones {zones:?}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_snapshots_give_valid_plans(g in gen_snapshot()) {
        let s = build(&g);
        let plan = crate::solve(&s, catalog(), now());
        check_plan(&s, &plan, "cost-optimal")?;
        if g.giant {
            let giant = plan.unschedulable.iter().find(|u| u.pod.name == "giant");
            prop_assert!(giant.is_some_and(|u| !u.reason.is_empty()), "{:?}", plan.unschedulable);
        }
        let greedy = crate::solve_with(
            &s,
            catalog(),
            now(),
            &SolveOptions {
                strategy: PackStrategy::KarpenterGreedy,
                skip_lower_bound: true,
                ..Default::default()
            },
        );
        check_plan(&s, &greedy, "greedy")?;
    }
}

#[test]
fn the_generator_draws_real_label_values() {
    let values = label_values();
    for key in [
        ZONE,
        INSTANCE_TYPE,
        ARCH,
        CAPACITY_TYPE,
        CLOUD,
        FAMILY,
        GPU_NAME,
    ] {
        assert!(!values[key].is_empty(), "{key}");
    }
    assert!(values[ZONE].iter().any(|z| z.starts_with("us-east-1")));
    assert!(values[CAPACITY_TYPE].contains(&"spot".to_owned()));
    assert!(!aws_types().is_empty());
}
