//! The improvement phase: cheaper than construction alone, and never at the price of a rule.

use std::collections::BTreeMap;

use quartermaster_policies::{Operator, Requirements};
use quartermaster_pricing::Catalog;
use rand::SeedableRng as _;

use super::fixtures::*;
use crate::pod::{HOSTNAME, Pod, PodAffinityTerm, TopologySpread, WhenUnsatisfiable, ZONE};
use crate::{Plan, SolveOptions, Strategy};

/// Karpenter's fake catalog in small: `lin.N` has N vCPU and 2N GiB at a price linear in N, so
/// only how well the nodes are filled decides the cost.
fn linear_catalog() -> Catalog {
    Catalog::new(
        (1..=32)
            .map(|n| {
                instance(
                    &format!("lin.{n}"),
                    n,
                    2 * u64::from(n),
                    0,
                    0.3 * f64::from(n),
                    None,
                )
            })
            .collect(),
    )
}

fn selector(key: &str, value: &str) -> Requirements {
    requirements(&[(key, Operator::In, &[value])])
}

/// Four groups like Karpenter's benchmark: generic, zonal spread (a selector only its own pods
/// match), hostname spread (maxSkew 1), hostname anti-affinity among all of them.
fn karpenter_like(n: usize, seed: u64) -> Vec<Pod> {
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(seed);
    let mut pick = |choices: &[i64]| {
        use rand::RngExt as _;
        choices[rng.random_range(0..choices.len())]
    };
    (0..n)
        .map(|i| {
            let cpu = pick(&[100, 250, 500, 1000, 1500]);
            let mem = pick(&[100, 256, 512, 1024, 2048, 4096]);
            let value = ["a", "b", "c"][pick(&[0, 1, 2]) as usize];
            let mut p = pod(&format!("p{i}"), cpu, mem, 0);
            p.labels.clear();
            match i % 4 {
                0 => {
                    p.labels.insert("my-label".into(), value.into());
                }
                1 => {
                    p.labels.insert("zonal".into(), "yes".into());
                    p.topology_spread.push(TopologySpread {
                        topology_key: ZONE.into(),
                        max_skew: 1,
                        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                        min_domains: None,
                        selector: selector("zonal", "yes"),
                    });
                }
                2 => {
                    p.labels.insert("my-label".into(), value.into());
                    p.topology_spread.push(TopologySpread {
                        topology_key: HOSTNAME.into(),
                        max_skew: 1,
                        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                        min_domains: None,
                        selector: selector("my-label", value),
                    });
                }
                _ => {
                    p.labels.insert("app".into(), "nginx".into());
                    p.anti_affinity.push(PodAffinityTerm {
                        topology_key: HOSTNAME.into(),
                        selector: selector("app", "nginx"),
                        namespaces: Vec::new(),
                        preferred_weight: None,
                    });
                }
            }
            p
        })
        .collect()
}

fn solve_on(s: &crate::ClusterSnapshot, catalog: &Catalog, strategy: Strategy) -> Plan {
    crate::solve_with(
        s,
        catalog,
        now(),
        &SolveOptions {
            strategy,
            ..SolveOptions::default()
        },
    )
}

/// Checks every rule of [`karpenter_like`] pods on the plan's nodes.
fn assert_rules_hold(s: &crate::ClusterSnapshot, plan: &Plan) {
    let by_name: BTreeMap<String, &Pod> = s.pending.iter().map(|p| (p.id.to_string(), p)).collect();
    let mut zonal: BTreeMap<&str, i64> = BTreeMap::new();
    for node in &plan.new_nodes {
        let pods: Vec<&Pod> = node.pods.iter().map(|r| by_name[&r.to_string()]).collect();
        let nginx = pods.iter().filter(|p| !p.anti_affinity.is_empty()).count();
        assert!(nginx <= 1, "{} anti-affine pods share a node", nginx);
        for holder in pods.iter().filter(|p| !p.topology_spread.is_empty()) {
            let rule = &holder.topology_spread[0];
            if rule.topology_key == HOSTNAME {
                let members = pods
                    .iter()
                    .filter(|p| rule.selector.matches(&p.labels))
                    .count();
                let holders = pods
                    .iter()
                    .filter(|p| p.topology_spread.first().is_some_and(|r| r == rule))
                    .count();
                assert!(
                    holders <= 1,
                    "hostname maxSkew 1: {holders} holders on one node"
                );
                assert!(members >= 1);
            } else {
                *zonal.entry(node.offering.zone.as_str()).or_default() += 1;
            }
        }
        let requests = pods
            .iter()
            .fold(crate::Resources::ZERO, |a, p| a + p.requests);
        assert_eq!(requests, node.requests);
    }
    let counts: Vec<i64> = ZONES
        .iter()
        .map(|z| zonal.get(z).copied().unwrap_or(0))
        .collect();
    let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(hi - lo <= 1, "zonal maxSkew 1: {counts:?}");
}

#[test]
fn the_improved_plan_is_cheaper_than_greedy_and_keeps_every_rule() {
    let catalog = linear_catalog();
    for seed in [1, 2, 3] {
        let s = snapshot(karpenter_like(400, seed), vec![on_demand_pool("default")]);
        let plan = solve_on(&s, &catalog, Strategy::CostOptimal);
        let greedy = solve_on(&s, &catalog, Strategy::KarpenterGreedy);
        assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
        assert_eq!(placed(&plan), 400);
        assert_rules_hold(&s, &plan);
        assert!(
            plan.cost_per_hour < greedy.cost_per_hour * 0.9,
            "seed {seed}: {} vs greedy {}",
            plan.cost_per_hour,
            greedy.cost_per_hour
        );
        assert!(plan.lower_bound_per_hour <= plan.cost_per_hour + 1e-9);
        // Every node is the cheapest type that holds its pods.
        for node in &plan.new_nodes {
            let cheapest = catalog
                .instance_types()
                .iter()
                .filter(|t| {
                    let room = crate::to_resources(&s.resources, &t.allocatable());
                    node.requests.fits_in(&room)
                })
                .map(|t| t.offerings[0].price_per_hour)
                .fold(f64::INFINITY, f64::min);
            assert!((node.offering.price_per_hour - cheapest).abs() < 1e-9);
        }
    }
}

#[test]
fn the_improvement_is_deterministic() {
    let catalog = linear_catalog();
    let s = snapshot(karpenter_like(300, 7), vec![on_demand_pool("default")]);
    let first = solve_on(&s, &catalog, Strategy::CostOptimal);
    let second = solve_on(&s, &catalog, Strategy::CostOptimal);
    assert_eq!(first, second);
}

#[test]
fn search_effort_trades_work_for_cost_and_keeps_every_rule() {
    let catalog = linear_catalog();
    let s = snapshot(karpenter_like(400, 5), vec![on_demand_pool("default")]);
    let at = |effort: Option<u32>| {
        crate::solve_with(
            &s,
            &catalog,
            now(),
            &SolveOptions {
                search_effort: effort,
                ..SolveOptions::default()
            },
        )
    };
    let default = at(None);
    assert_eq!(at(Some(100)), default, "100% is the default");
    let first = at(Some(0));
    let more = at(Some(400));
    for plan in [&first, &more] {
        assert_eq!(placed(plan), 400);
        assert_rules_hold(&s, plan);
    }
    // Effort 0 keeps the construction's plan; the default improves on it, and more never
    // gives a dearer plan than the default on this input.
    assert!(
        default.cost_per_hour < first.cost_per_hour,
        "{} vs construction {}",
        default.cost_per_hour,
        first.cost_per_hour
    );
    assert!(more.cost_per_hour <= default.cost_per_hour + 1e-9);
}

#[test]
fn a_node_limit_is_never_passed_by_a_node_that_grows() {
    // The pool may hold 8 vCPU in all: whatever the improvement moves, the plan stays within.
    let catalog = linear_catalog();
    let mut pool = on_demand_pool("small");
    pool.limits.resources.set(crate::resources::CPU, 8000);
    let s = snapshot(pods("web", 10, 500, 512, 0), vec![pool]);
    let plan = solve_on(&s, &catalog, Strategy::CostOptimal);
    let vcpus: u32 = plan
        .new_nodes
        .iter()
        .map(|n| {
            catalog
                .instance_types()
                .iter()
                .find(|t| t.name == n.offering.instance_type)
                .unwrap()
                .vcpu
        })
        .sum();
    assert!(vcpus <= 8, "{vcpus} vCPU bought under an 8-CPU limit");
    assert_eq!(placed(&plan) + plan.unschedulable.len(), 10);
}

#[test]
fn the_bound_counts_a_node_per_anti_affine_pod_and_max_skew_pods_per_node() {
    // Five small pods that repel each other need five nodes: the cheapest type five times.
    let mut anti = pods("db", 5, 100, 128, 0);
    for p in &mut anti {
        p.anti_affinity.push(PodAffinityTerm {
            topology_key: HOSTNAME.into(),
            selector: selector("app", "db"),
            namespaces: Vec::new(),
            preferred_weight: None,
        });
    }
    let plan = solve(&snapshot(anti, vec![on_demand_pool("cpu")]));
    assert_eq!(plan.new_nodes.len(), 5);
    assert!(
        (plan.lower_bound_per_hour - 5.0 * 0.096).abs() < 1e-6,
        "{}",
        plan.lower_bound_per_hour
    );

    // Six under hostname maxSkew 2: three nodes at least.
    let mut spread = pods("web", 6, 100, 128, 0);
    for p in &mut spread {
        p.topology_spread.push(TopologySpread {
            topology_key: HOSTNAME.into(),
            max_skew: 2,
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            min_domains: None,
            selector: selector("app", "web"),
        });
    }
    let plan = solve(&snapshot(spread, vec![on_demand_pool("cpu")]));
    assert_eq!(plan.new_nodes.len(), 3);
    assert!(
        (plan.lower_bound_per_hour - 3.0 * 0.096).abs() < 1e-6,
        "{}",
        plan.lower_bound_per_hour
    );
}

#[test]
fn rebalancing_keeps_every_rule_where_construction_leaves_nodes_tilted() {
    // At this size construction leaves nodes full in memory beside nodes full in CPU, and the
    // rebalance move trades twin pods between them (zonal-spread pods across zones too).
    let catalog = linear_catalog();
    for seed in [11, 12] {
        let s = snapshot(karpenter_like(3000, seed), vec![on_demand_pool("default")]);
        let plan = solve_on(&s, &catalog, Strategy::CostOptimal);
        assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
        assert_eq!(placed(&plan), 3000);
        assert_rules_hold(&s, &plan);
        assert!(plan.lower_bound_per_hour <= plan.cost_per_hour + 1e-9);
    }
}
