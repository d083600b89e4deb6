//! Soft constraints have a price: Respect, Ignore and CostBounded, heaviest first, every
//! decision measured and reported.

use quartermaster_policies::Operator;

use super::fixtures::*;
use crate::pod::{PreferredNodeTerm, TopologySpread, WhenUnsatisfiable, ZONE};
use crate::{ClusterSnapshot, NodePoolSpec, Plan, PreferenceKind, PreferencePolicy, SolveOptions};

const TYPE: &str = "node.kubernetes.io/instance-type";
const CAPACITY: &str = "quartermaster.dev/capacity-type";

fn preferring(mut pods: Vec<crate::Pod>, terms: &[(i32, &str, &str)]) -> Vec<crate::Pod> {
    for pod in &mut pods {
        pod.owner = Some("Deployment/default/web".into());
        for &(weight, key, value) in terms {
            pod.preferred_node_terms.push(PreferredNodeTerm {
                weight,
                requirements: requirements(&[(key, Operator::In, &[value])]),
            });
        }
    }
    pods
}

fn with_policy(mut pool: NodePoolSpec, policy: PreferencePolicy, budget: f64) -> NodePoolSpec {
    pool.preferences.policy = policy;
    pool.preferences.budget = budget;
    pool
}

/// Spot and on-demand, every zone.
fn any_capacity(name: &str) -> NodePoolSpec {
    pool(name, Default::default())
}

fn priced(snapshot: &ClusterSnapshot) -> Plan {
    crate::solve_with(
        snapshot,
        &catalog(),
        now(),
        &SolveOptions {
            price_preferences: true,
            ..SolveOptions::default()
        },
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn cost_bounded_drops_a_preference_dearer_than_its_budget_and_says_what_it_costs() {
    // A 500m pod preferring an m6i.4xlarge ($0.768) over the m6i.large it needs ($0.096).
    let pending = preferring(pods("web", 1, 500, 512, 0), &[(10, TYPE, "m6i.4xlarge")]);
    let plan = priced(&snapshot(pending, vec![on_demand_pool("cpu")]));
    assert_eq!(types(&plan), ["m6i.large"]);
    let [d] = plan.preferences.as_slice() else {
        panic!("{:?}", plan.preferences)
    };
    assert_eq!(d.pod_group, "Deployment/default/web");
    assert_eq!(d.kind, PreferenceKind::NodeAffinity);
    assert_eq!(
        d.detail,
        "node.kubernetes.io/instance-type In [m6i.4xlarge]"
    );
    assert_eq!(d.policy, PreferencePolicy::CostBounded);
    assert!(!d.honoured);
    assert!(close(d.cost_per_hour.unwrap(), 0.768 - 0.096), "{d:?}");
    assert_eq!(d.pods, 1);
}

#[test]
fn cost_bounded_keeps_a_preference_within_its_budget() {
    // On-demand instead of spot for a g5.xlarge: $1.006 against $0.45, +124%.
    let pending = preferring(
        pods("gpu", 1, 1000, 2048, 1),
        &[(50, CAPACITY, "on-demand")],
    );
    let tight = priced(&snapshot(
        pending.clone(),
        vec![with_policy(
            any_capacity("gpu"),
            PreferencePolicy::CostBounded,
            0.10,
        )],
    ));
    assert_eq!(
        tight.new_nodes[0].offering.capacity_type.to_string(),
        "spot"
    );
    assert!(!tight.preferences[0].honoured);
    let loose = priced(&snapshot(
        pending,
        vec![with_policy(
            any_capacity("gpu"),
            PreferencePolicy::CostBounded,
            1.50,
        )],
    ));
    assert_eq!(
        loose.new_nodes[0].offering.capacity_type.to_string(),
        "on-demand"
    );
    let d = &loose.preferences[0];
    assert!(d.honoured);
    assert!(close(d.cost_per_hour.unwrap(), 1.006 - 0.45), "{d:?}");
    assert!(close(loose.cost_per_hour, 1.006));
}

#[test]
fn a_free_preference_is_honoured_and_costs_nothing() {
    // Spot is the cheaper choice anyway.
    let pending = preferring(pods("gpu", 2, 1000, 2048, 1), &[(50, CAPACITY, "spot")]);
    let plan = priced(&snapshot(pending, vec![any_capacity("gpu")]));
    let d = &plan.preferences[0];
    assert!(d.honoured);
    assert_eq!(d.cost_per_hour, Some(0.0));
    assert_eq!(d.pods, 2);
}

#[test]
fn respect_honours_at_any_price_and_ignore_drops_even_free_preferences() {
    let pending = preferring(pods("web", 1, 500, 512, 0), &[(10, TYPE, "m6i.4xlarge")]);
    let respect = priced(&snapshot(
        pending.clone(),
        vec![with_policy(
            on_demand_pool("cpu"),
            PreferencePolicy::Respect,
            0.10,
        )],
    ));
    assert_eq!(types(&respect), ["m6i.4xlarge"]);
    assert!(respect.preferences[0].honoured);
    assert!(close(
        respect.preferences[0].cost_per_hour.unwrap(),
        0.768 - 0.096
    ));

    let free = preferring(pods("web", 1, 500, 512, 0), &[(10, TYPE, "m6i.large")]);
    let mut ignored = snapshot(free, vec![on_demand_pool("cpu")]);
    ignored.override_preference_policy(Some(PreferencePolicy::Ignore));
    let plan = priced(&ignored);
    assert_eq!(types(&plan), ["m6i.large"]);
    let d = &plan.preferences[0];
    assert_eq!(d.policy, PreferencePolicy::Ignore);
    assert!(!d.honoured);
    assert_eq!(d.cost_per_hour, Some(0.0));
}

#[test]
fn the_heaviest_preferences_are_honoured_first() {
    // Alone, m6i.xlarge spot costs $0.08 and m6i.large on-demand $0.096, each within a 150%
    // budget over m6i.large spot ($0.04); together (m6i.xlarge on-demand, $0.192) they are not.
    let budget = |pool| with_policy(pool, PreferencePolicy::CostBounded, 1.50);
    let heavy_type = preferring(
        pods("web", 1, 500, 512, 0),
        &[(80, TYPE, "m6i.xlarge"), (20, CAPACITY, "on-demand")],
    );
    let plan = priced(&snapshot(heavy_type, vec![budget(any_capacity("cpu"))]));
    let by_kind = |plan: &Plan, detail: &str| {
        plan.preferences
            .iter()
            .find(|d| d.detail.contains(detail))
            .cloned()
            .unwrap()
    };
    assert!(by_kind(&plan, "m6i.xlarge").honoured);
    assert!(!by_kind(&plan, "on-demand").honoured);
    assert!(close(plan.cost_per_hour, 0.08), "{}", plan.cost_per_hour);
    // What the dropped one would have added to the plan as it is.
    assert!(close(
        by_kind(&plan, "on-demand").cost_per_hour.unwrap(),
        0.192 - 0.08
    ));

    let heavy_capacity = preferring(
        pods("web", 1, 500, 512, 0),
        &[(20, TYPE, "m6i.xlarge"), (80, CAPACITY, "on-demand")],
    );
    let plan = priced(&snapshot(heavy_capacity, vec![budget(any_capacity("cpu"))]));
    assert!(!by_kind(&plan, "m6i.xlarge").honoured);
    assert!(by_kind(&plan, "on-demand").honoured);
    assert!(close(plan.cost_per_hour, 0.096));
    assert_eq!(plan.preferences[0].weight, 80, "heaviest first");
}

#[test]
fn the_lower_bound_is_for_the_constraints_applied() {
    let pending = preferring(pods("web", 1, 500, 512, 0), &[(10, TYPE, "m6i.4xlarge")]);
    let respect = priced(&snapshot(
        pending.clone(),
        vec![with_policy(
            on_demand_pool("cpu"),
            PreferencePolicy::Respect,
            0.10,
        )],
    ));
    let bounded = priced(&snapshot(pending, vec![on_demand_pool("cpu")]));
    // Honoured, the preference is in the bound (only an m6i.4xlarge may hold the pod)...
    assert!(respect.lower_bound_per_hour > 0.096 + 1e-9);
    assert!(respect.lower_bound_per_hour <= respect.cost_per_hour + 1e-9);
    // ... dropped, it is not.
    assert!(bounded.lower_bound_per_hour <= 0.096 + 1e-9);
    assert!(bounded.gap() < 1e-9);
}

#[test]
fn the_pool_that_would_host_the_pods_sets_their_policy() {
    // Two pools may host the pods: the heavier one's policy (Respect) governs them.
    let pending = preferring(pods("web", 1, 500, 512, 0), &[(10, TYPE, "m6i.4xlarge")]);
    let mut heavy = with_policy(on_demand_pool("heavy"), PreferencePolicy::Respect, 0.10);
    heavy.weight = 50;
    let light = with_policy(on_demand_pool("light"), PreferencePolicy::Ignore, 0.10);
    let plan = priced(&snapshot(
        pending.clone(),
        vec![light.clone(), heavy.clone()],
    ));
    assert_eq!(plan.preferences[0].policy, PreferencePolicy::Respect);
    assert_eq!(types(&plan), ["m6i.4xlarge"]);
    // A pool whose taint the pods do not tolerate does not govern them.
    heavy.taints.push(taint("dedicated", "batch"));
    let plan = priced(&snapshot(pending, vec![light, heavy]));
    assert_eq!(plan.preferences[0].policy, PreferencePolicy::Ignore);
    assert_eq!(types(&plan), ["m6i.large"]);
}

#[test]
fn a_schedule_anyway_spread_is_a_preference_of_weight_100() {
    let mut pending = pods("web", 3, 1500, 512, 0);
    for pod in &mut pending {
        pod.owner = Some("Deployment/default/web".into());
        pod.topology_spread.push(TopologySpread {
            topology_key: ZONE.into(),
            max_skew: 1,
            when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
            min_domains: None,
            selector: requirements(&[("app", Operator::In, &["web"])]),
        });
    }
    let plan = priced(&snapshot(pending, vec![on_demand_pool("cpu")]));
    let [d] = plan.preferences.as_slice() else {
        panic!("{:?}", plan.preferences)
    };
    assert_eq!(d.kind, PreferenceKind::TopologySpread);
    assert_eq!(d.weight, crate::SPREAD_WEIGHT);
    assert_eq!(
        d.detail,
        "maxSkew 1 over topology.kubernetes.io/zone of pods with app In [web]"
    );
    assert_eq!(d.pods, 3);
    // One m6i.large a pod, in three zones or in one: honoured for free.
    assert!(d.honoured);
    assert_eq!(d.cost_per_hour, Some(0.0));
    assert_eq!(pods_per_zone(&plan).len(), 3);
}

#[test]
fn many_preferences_are_weighed_in_a_bounded_number_of_batches() {
    // Twenty workloads, each preferring the dear m6i.4xlarge: the twelfth and later are
    // decided together.
    let mut pending = Vec::new();
    for w in 0..20 {
        let mut p = preferring(
            pods(&format!("w{w:02}"), 1, 500, 512, 0),
            &[(10, TYPE, "m6i.4xlarge")],
        );
        p[0].owner = Some(format!("Deployment/default/w{w:02}"));
        pending.extend(p);
    }
    let plan = priced(&snapshot(pending, vec![on_demand_pool("cpu")]));
    assert_eq!(plan.preferences.len(), 20);
    assert!(plan.preferences.iter().all(|d| !d.honoured));
    let batched = plan
        .preferences
        .iter()
        .filter(|d| d.decided_with > 0)
        .count();
    assert_eq!(batched, 9);
    // Every figure is a measured difference, shared evenly within the batch.
    let total: f64 = plan
        .preferences
        .iter()
        .filter_map(|d| d.cost_per_hour)
        .sum();
    assert!(total > 0.0);
}

#[test]
fn the_engine_gets_the_same_decision_without_the_prices() {
    let pending = preferring(pods("web", 1, 500, 512, 0), &[(10, TYPE, "m6i.large")]);
    let s = snapshot(pending, vec![on_demand_pool("cpu")]);
    let engine = crate::solve_with(
        &s,
        &catalog(),
        now(),
        &SolveOptions {
            skip_lower_bound: true,
            ..SolveOptions::default()
        },
    );
    let plan = priced(&s);
    assert_eq!(types(&engine), types(&plan));
    assert_eq!(engine.preferences[0].honoured, plan.preferences[0].honoured);
    // All-in within budget is decided without measuring each preference.
    assert_eq!(engine.preferences[0].cost_per_hour, None);
    assert_eq!(plan.preferences[0].cost_per_hour, Some(0.0));
}
