//! `consolidation`: one disruption pass of the engine over a fragmented CPU fleet.
//!
//! The pods (web / API / worker sizes, as in [`crate::mixed`]) are placed on on-demand
//! `m6i.2xlarge` nodes filled to a random 20–50% of their CPU (a fleet left behind by a
//! scale-down), adopted by a fresh engine as NodeClaims found in the cluster, and one
//! consolidation pass is timed: the engine's bounded N→M search, solver calls included. The
//! pool's budget allows every node (the search bounds itself, `max_move_nodes`).
//!
//! Its `bench -o json` row reads: `nodes` the fleet's node count before the pass,
//! `solve_seconds` the pass, `cost_per_hour` the fleet's cost once the pass's commands complete,
//! `baseline_cost_per_hour` the cost before, `lower_bound_per_hour` the solver's bound for the
//! same pods from scratch, `baseline_nodes` the nodes before and `unschedulable` the pods the
//! pass left without a place (0).

use std::time::Instant;

use chrono::TimeDelta;
use quartermaster_engine::{
    Action, Engine, EngineConfig, EngineSetup, Event, FoundClaim, NodeView, PoolPolicy,
};
use quartermaster_policies::NodePool;
use quartermaster_pricing::{CapacityType, Catalog, Cloud, labels};
use quartermaster_solver::resources::CPU;
use quartermaster_solver::{ClusterSnapshot, OfferingChoice, ResourceTable, to_resources};
use rand::RngExt;

use crate::common::{MIB, capacity_types, is_in, linux_amd64, node_pool, pod, requests};
use crate::passes::{Fleet, converge};
use crate::rng::{pick, seeded};
use crate::{BenchResult, now, proc_status_mib, reset_peak_rss};

/// The scenario's name.
pub const NAME: &str = "consolidation";
/// The instance type every node of the fragmented fleet has.
pub const NODE_TYPE: &str = "m6i.2xlarge";
/// The zone it runs in.
pub const ZONE: &str = "us-east-1a";

const CPU_MILLIS: [i64; 5] = [250, 500, 750, 1000, 2000];
const MEMORY_MIB: [i64; 4] = [512, 1024, 2048, 4096];

/// The pods (pending in the snapshot; [`run`] places them) and the pool: on-demand `m6i` and
/// `c6i` in one zone.
pub fn snapshot(pods: usize) -> ClusterSnapshot {
    let pool = node_pool(
        "general",
        Cloud::Aws,
        {
            let mut r = vec![
                is_in(labels::INSTANCE_FAMILY, &["m6i", "c6i"]),
                is_in(labels::ZONE, &[ZONE]),
                capacity_types(false),
            ];
            r.extend(linux_amd64());
            r
        },
        Default::default(),
        Vec::new(),
    );
    let mut rng = seeded();
    let pending = (0..pods)
        .map(|i| {
            let app = i / 10;
            pod(
                "apps",
                format!("app-{app}-{i}"),
                Some(format!("Deployment/apps/app-{app}")),
                requests(
                    pick(&mut rng, &CPU_MILLIS),
                    pick(&mut rng, &MEMORY_MIB) * MIB,
                ),
            )
        })
        .collect();
    ClusterSnapshot {
        resources: ResourceTable::default(),
        pending,
        nodes: Vec::new(),
        node_pools: vec![pool],
        daemonsets: Vec::new(),
        unavailable: Default::default(),
        offering_limits: Vec::new(),
    }
}

/// The NodePool object behind the pool: consolidate underutilized nodes after a minute, every
/// node may be disrupted at once.
fn node_pool_object() -> NodePool {
    let v = serde_json::json!({
        "apiVersion": "quartermaster.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "general"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"},
                "expireAfter": "Never"
            }},
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "1m",
                "budgets": [{"nodes": "100%"}]
            }
        }
    });
    serde_json::from_value(v).expect("the consolidation bench NodePool is valid")
}

/// Builds the fragmented fleet in an engine, times one pass, and reports it.
pub fn run(scenario: &crate::Scenario) -> BenchResult {
    let snapshot = &scenario.snapshot;
    let catalog: &Catalog = &scenario.catalog;
    let at = now();
    let spec = snapshot.node_pools[0].clone();
    let policy = PoolPolicy::new(spec, node_pool_object()).expect("a valid pool");
    let mut engine = Engine::new(
        EngineSetup {
            resources: snapshot.resources.clone(),
            pools: vec![policy],
            daemonsets: snapshot.daemonsets.clone(),
            catalog: catalog.clone(),
        },
        // New claims must not take the fleet's names (`general-00000`, …).
        EngineConfig {
            claim_name_tag: "r".to_owned(),
            ..EngineConfig::default()
        },
    );
    let it = catalog
        .get(Cloud::Aws, NODE_TYPE)
        .expect("the embedded catalog has m6i.2xlarge");
    let price = it
        .offerings
        .iter()
        .find(|o| o.zone == ZONE && o.capacity_type == CapacityType::OnDemand)
        .map_or(0.0, |o| o.price_per_hour);
    let allocatable = to_resources(&snapshot.resources, &it.allocatable());
    let cpu = allocatable.get(CPU);
    // Fill nodes to a random 20-50% of their CPU, in pod order.
    let mut rng = seeded();
    let mut nodes: Vec<Vec<usize>> = Vec::new();
    let (mut used, mut target) = (0i64, 0i64);
    for (i, p) in snapshot.pending.iter().enumerate() {
        let need = p.requests.get(CPU);
        if nodes.is_empty() || used + need > target {
            nodes.push(Vec::new());
            used = 0;
            target = cpu * rng.random_range(20..=50) / 100;
        }
        used += need;
        nodes.last_mut().expect("a node").push(i);
    }
    for (n, pods) in nodes.iter().enumerate() {
        let name = format!("general-{n:05}");
        let node = NodeView {
            name: name.clone(),
            labels: [(labels::ZONE.to_owned(), ZONE.to_owned())].into(),
            taints: Vec::new(),
            allocatable,
            conditions: Vec::new(),
        };
        let created = at - TimeDelta::hours(2);
        engine.handle(
            created,
            Event::ClaimFound(FoundClaim {
                name: name.clone(),
                node_pool: "general".into(),
                offering: OfferingChoice {
                    instance_type: NODE_TYPE.into(),
                    zone: ZONE.into(),
                    capacity_type: CapacityType::OnDemand,
                    price_per_hour: price,
                },
                created_at: created,
                provider_id: Some(format!("bench:///{ZONE}/{name}")),
                launched_at: Some(created),
                node: Some(node),
                registered_at: Some(created),
                initialized_at: Some(created),
                deleting: false,
                template_hash: None,
                gang: None,
            }),
        );
        for &i in pods {
            engine.handle(
                created,
                Event::PodBound {
                    pod: snapshot.pending[i].clone(),
                    node: name.clone(),
                },
            );
        }
    }
    let before = price * nodes.len() as f64;

    let peak_rss_reset = reset_peak_rss();
    let rss_at_start_mib = proc_status_mib("VmRSS:").unwrap_or(f64::NAN);
    let started = Instant::now();
    let actions = engine.poll(at);
    let took = started.elapsed().as_secs_f64();
    let peak_rss_mib = proc_status_mib("VmHWM:").unwrap_or(f64::NAN);

    let mut fleet = Fleet {
        pods: snapshot
            .pending
            .iter()
            .map(|p| (p.id.clone(), p.clone()))
            .collect(),
        on: nodes
            .iter()
            .enumerate()
            .flat_map(|(n, pods)| {
                pods.iter()
                    .map(move |&i| (snapshot.pending[i].id.clone(), format!("general-{n:05}")))
            })
            .collect(),
        catalog: catalog.clone(),
        resources: snapshot.resources.clone(),
    };
    let passes = converge(&mut engine, &mut fleet, at, (actions.clone(), took));

    let saving: f64 = actions
        .iter()
        .map(|a| match a {
            Action::Disrupt(c) => c.saving_per_hour,
            _ => 0.0,
        })
        .sum();
    let after = before - saving;
    let scratch = quartermaster_solver::solve(snapshot, catalog, at);
    let pods = snapshot.pending.len();
    BenchResult {
        scenario: scenario.name.clone(),
        pods,
        instance_types: crate::admitted_instance_types(snapshot, catalog),
        solve_seconds: took,
        pods_per_second: if took > 0.0 {
            pods as f64 / took
        } else {
            f64::INFINITY
        },
        nodes: nodes.len(),
        cost_per_hour: after,
        lower_bound_per_hour: scratch.lower_bound_per_hour,
        gap: if scratch.lower_bound_per_hour > 0.0 {
            (after - scratch.lower_bound_per_hour) / scratch.lower_bound_per_hour
        } else {
            0.0
        },
        baseline_cost_per_hour: before,
        baseline_nodes: nodes.len(),
        unschedulable: engine.waiting().count(),
        baseline_unschedulable: 0,
        saving_vs_baseline: if before > 0.0 { saving / before } else { 0.0 },
        peak_rss_mib,
        rss_at_start_mib,
        peak_rss_reset,
        repetitions: 1,
        baseline_solve_seconds: 0.0,
        passes: Some(passes),
        search_effort: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pass_over_a_fragmented_fleet_saves_money_and_places_every_pod() {
        let s = crate::build(NAME, 600).expect("builds");
        let r = run(&s);
        assert!(r.nodes > 20, "{r:?}");
        assert!(r.cost_per_hour < r.baseline_cost_per_hour, "{r:?}");
        assert!(r.cost_per_hour >= r.lower_bound_per_hour - 1e-6, "{r:?}");
        assert_eq!(r.unschedulable, 0, "{r:?}");
        // Deterministic: the same pass again.
        let again = run(&s);
        assert_eq!(again.cost_per_hour, r.cost_per_hour);
        assert_eq!(again.nodes, r.nodes);
    }

    #[test]
    fn passes_go_on_until_one_finds_nothing_and_never_raise_the_cost() {
        let s = crate::build(NAME, 600).expect("builds");
        let r = run(&s);
        let passes = r.passes.expect("consolidation reports its passes");
        assert!(passes.len() >= 2, "{passes:?}");
        assert!(
            passes[0].cost_per_hour <= r.baseline_cost_per_hour,
            "{passes:?}"
        );
        for w in passes.windows(2) {
            assert!(
                w[1].cost_per_hour <= w[0].cost_per_hour + 1e-9,
                "{passes:?}"
            );
        }
        let last = passes.last().expect("a pass");
        assert!(
            last.commands == 0 || passes.len() == crate::passes::MAX_PASSES,
            "{passes:?}"
        );
        assert!(
            last.cost_per_hour >= r.lower_bound_per_hour - 1e-6,
            "{passes:?}"
        );
        assert_eq!(
            r.unschedulable, 0,
            "every pod still has a place: {passes:?}"
        );
    }
}

#[cfg(test)]
mod measure {
    /// Prints the row of a pass at the default size (about 2,000 nodes); a measurement, not a
    /// check: `cargo test --release -p quartermaster-bench consolidation -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, run in a release build"]
    fn print_one_pass_at_the_default_size() {
        for pods in crate::default_sizes(super::NAME) {
            let s = crate::build(super::NAME, pods).expect("builds");
            let r = super::run(&s);
            println!("{}", serde_json::to_string_pretty(&r).expect("serialises"));
        }
    }
}
