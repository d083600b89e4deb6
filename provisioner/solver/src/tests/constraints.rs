//! Each scheduling constraint places or rejects pods exactly.

use quartermaster_policies::{Operator, Requirements};

use super::fixtures::*;
use crate::pod::{
    HOSTNAME, HostPort, PodAffinityTerm, PreferredNodeTerm, TopologySpread, WhenUnsatisfiable, ZONE,
};

fn app_selector(app: &str) -> Requirements {
    requirements(&[("app", Operator::In, &[app])])
}

#[test]
fn resources_too_large_for_any_type_are_rejected_with_the_largest_size() {
    let plan = solve(&snapshot(
        pods("big", 1, 4000, 8192, 16),
        vec![on_demand_pool("gpu")],
    ));
    assert!(plan.new_nodes.is_empty());
    assert_eq!(
        plan.unschedulable[0].reason,
        "requests 16 nvidia.com/gpu; the largest compatible instance type has 8"
    );
}

#[test]
fn kube_reserved_overhead_counts() {
    // 4 vCPU g5.xlarge keeps 100m for the system: a 4000m pod needs the next size.
    let plan = solve(&snapshot(
        pods("full", 1, 4000, 8192, 1),
        vec![on_demand_pool("gpu")],
    ));
    assert_eq!(types(&plan), ["g5.12xlarge"]);
}

#[test]
fn untolerated_taints_are_named() {
    let mut p = on_demand_pool("infra");
    p.taints.push(taint("dedicated", "infra"));
    let plan = solve(&snapshot(pods("web", 1, 500, 512, 0), vec![p.clone()]));
    assert_eq!(
        plan.unschedulable[0].reason,
        "no NodePool tolerates taint dedicated=infra:NoSchedule"
    );
    let mut tolerant = pods("web", 1, 500, 512, 0);
    tolerant[0].tolerations.push(toleration("dedicated"));
    assert_eq!(placed(&solve(&snapshot(tolerant, vec![p]))), 1);
}

#[test]
fn startup_taints_are_ignored_for_fit() {
    let mut p = on_demand_pool("gpu");
    p.startup_taints
        .push(taint("node.quartermaster.dev/initializing", ""));
    assert_eq!(
        placed(&solve(&snapshot(pods("web", 1, 500, 512, 0), vec![p]))),
        1
    );
}

#[test]
fn node_selector_restricts_instance_types() {
    let mut p = pods("web", 1, 500, 512, 0);
    p[0].node_terms = vec![requirements(&[(
        "node.kubernetes.io/instance-type",
        Operator::In,
        &["m6i.4xlarge"],
    )])];
    let plan = solve(&snapshot(p, vec![on_demand_pool("cpu")]));
    assert_eq!(types(&plan), ["m6i.4xlarge"]);
}

#[test]
fn required_node_affinity_terms_are_ored() {
    let mut p = pods("web", 1, 500, 512, 0);
    p[0].node_terms = vec![
        requirements(&[(
            "node.kubernetes.io/instance-type",
            Operator::In,
            &["does-not-exist"],
        )]),
        requirements(&[(
            "node.kubernetes.io/instance-type",
            Operator::In,
            &["m6i.xlarge"],
        )]),
    ];
    assert_eq!(
        types(&solve(&snapshot(p, vec![on_demand_pool("cpu")]))),
        ["m6i.xlarge"]
    );
}

#[test]
fn gt_lt_requirements_select_by_number() {
    let mut p = pods("web", 1, 500, 512, 0);
    p[0].node_terms = vec![requirements(&[(
        "quartermaster.dev/instance-cpu",
        Operator::Gt,
        &["4"],
    )])];
    assert_eq!(
        types(&solve(&snapshot(p, vec![on_demand_pool("cpu")]))),
        ["m6i.4xlarge"]
    );
}

#[test]
fn impossible_selector_is_explained() {
    let mut p = pods("web", 1, 500, 512, 0);
    p[0].node_terms = vec![requirements(&[(
        "quartermaster.dev/instance-gpu-name",
        Operator::In,
        &["h200"],
    )])];
    let plan = solve(&snapshot(p, vec![on_demand_pool("cpu")]));
    assert!(
        plan.unschedulable[0]
            .reason
            .contains("node selector / affinity"),
        "{}",
        plan.unschedulable[0].reason
    );
}

#[test]
fn preferred_node_affinity_is_honoured_then_relaxed() {
    let mut p = pods("web", 1, 500, 512, 0);
    p[0].preferred_node_terms = vec![PreferredNodeTerm {
        weight: 10,
        requirements: requirements(&[(
            "node.kubernetes.io/instance-type",
            Operator::In,
            &["m6i.4xlarge"],
        )]),
    }];
    // Respected at any price (the default, CostBounded, drops this one: see
    // tests/preferences.rs).
    let mut respect = on_demand_pool("cpu");
    respect.preferences.policy = crate::PreferencePolicy::Respect;
    let plan = solve(&snapshot(p.clone(), vec![respect.clone()]));
    assert_eq!(types(&plan), ["m6i.4xlarge"]);
    assert!(plan.relaxations.is_empty());

    p[0].preferred_node_terms[0].requirements =
        requirements(&[("node.kubernetes.io/instance-type", Operator::In, &["nope"])]);
    let plan = solve(&snapshot(p, vec![respect]));
    assert_eq!(placed(&plan), 1);
    assert_eq!(plan.relaxations.len(), 1);
    assert!(
        plan.relaxations[0]
            .relaxed
            .contains("preferred node affinity (weight 10)")
    );
}

#[test]
fn zone_requirement_of_pool_is_honoured() {
    let p = zonal_pool("one-zone", &["us-east-1b"]);
    let plan = solve(&snapshot(pods("web", 3, 500, 512, 0), vec![p]));
    assert!(
        plan.new_nodes
            .iter()
            .all(|n| n.offering.zone == "us-east-1b")
    );
    assert!(
        plan.new_nodes
            .iter()
            .flat_map(|n| &n.alternatives)
            .all(|a| a.zone == "us-east-1b")
    );
}

fn spread(key: &str, app: &str, skew: u32, when: WhenUnsatisfiable) -> TopologySpread {
    TopologySpread {
        topology_key: key.into(),
        max_skew: skew,
        when_unsatisfiable: when,
        min_domains: None,
        selector: app_selector(app),
    }
}

#[test]
fn zonal_topology_spread_balances_zones() {
    let mut p = pods("web", 6, 500, 512, 0);
    for pod in &mut p {
        pod.topology_spread
            .push(spread(ZONE, "web", 1, WhenUnsatisfiable::DoNotSchedule));
    }
    let plan = solve(&snapshot(p, vec![on_demand_pool("cpu")]));
    let per_zone: Vec<usize> = pods_per_zone(&plan).into_values().collect();
    assert_eq!(per_zone, [2, 2, 2]);
}

#[test]
fn zonal_spread_over_a_restricted_pool_rejects_the_excess() {
    let p = pool(
        "two-zones",
        requirements(&[
            (
                "topology.kubernetes.io/zone",
                Operator::In,
                &["us-east-1a", "us-east-1b"],
            ),
            (
                "quartermaster.dev/capacity-type",
                Operator::In,
                &["on-demand"],
            ),
        ]),
    );
    let mut pending = pods("web", 4, 500, 512, 0);
    for pod in &mut pending {
        pod.topology_spread
            .push(spread(ZONE, "web", 1, WhenUnsatisfiable::DoNotSchedule));
    }
    let plan = solve(&snapshot(pending, vec![p]));
    assert_eq!(placed(&plan), 4, "two eligible zones, 2 + 2 is balanced");
    assert_eq!(
        pods_per_zone(&plan).into_values().collect::<Vec<_>>(),
        [2, 2]
    );
}

#[test]
fn hostname_spread_puts_max_skew_pods_per_node() {
    let mut p = pods("web", 4, 500, 512, 0);
    for pod in &mut p {
        pod.topology_spread
            .push(spread(HOSTNAME, "web", 2, WhenUnsatisfiable::DoNotSchedule));
    }
    let plan = solve(&snapshot(p, vec![on_demand_pool("cpu")]));
    assert_eq!(pods_per_node(&plan), [2, 2]);
}

#[test]
fn min_domains_counts_missing_domains_as_empty() {
    // Only one zone is eligible but minDomains is 3: the global minimum is 0, so with maxSkew 1
    // a single pod can be placed and the second cannot.
    let p = zonal_pool("one-zone", &["us-east-1a"]);
    let mut pending = pods("web", 2, 500, 512, 0);
    for pod in &mut pending {
        let mut s = spread(ZONE, "web", 1, WhenUnsatisfiable::DoNotSchedule);
        s.min_domains = Some(3);
        pod.topology_spread.push(s);
    }
    let plan = solve(&snapshot(pending, vec![p]));
    assert_eq!(placed(&plan), 1);
    assert!(
        plan.unschedulable[0].reason.contains("topology spread"),
        "{}",
        plan.unschedulable[0].reason
    );
}

#[test]
fn schedule_anyway_spread_is_relaxed_and_reported() {
    let p = zonal_pool("one-zone", &["us-east-1a"]);
    let mut pending = pods("web", 2, 500, 512, 0);
    for pod in &mut pending {
        let mut s = spread(ZONE, "web", 1, WhenUnsatisfiable::ScheduleAnyway);
        s.min_domains = Some(3);
        pod.topology_spread.push(s);
    }
    let plan = solve(&snapshot(pending, vec![p]));
    assert_eq!(placed(&plan), 2);
    assert_eq!(plan.relaxations.len(), 1);
    assert!(
        plan.relaxations[0]
            .relaxed
            .contains("topology spread on topology.kubernetes.io/zone")
    );
}

fn term(key: &str, app: &str, weight: Option<i32>) -> PodAffinityTerm {
    PodAffinityTerm {
        topology_key: key.into(),
        selector: app_selector(app),
        namespaces: Vec::new(),
        preferred_weight: weight,
    }
}

#[test]
fn hostname_anti_affinity_gives_each_pod_its_own_node() {
    let mut p = pods("db", 3, 500, 512, 0);
    for pod in &mut p {
        pod.anti_affinity.push(term(HOSTNAME, "db", None));
    }
    let plan = solve(&snapshot(p, vec![on_demand_pool("cpu")]));
    assert_eq!(pods_per_node(&plan), [1, 1, 1]);
}

#[test]
fn anti_affinity_is_symmetric() {
    // `web` has no rule of its own, but `db` repels it: they never share a node.
    let mut db = pods("db", 1, 500, 512, 0);
    db[0].anti_affinity.push(term(HOSTNAME, "web", None));
    let mut all = db;
    all.extend(pods("web", 1, 500, 512, 0));
    let plan = solve(&snapshot(all, vec![on_demand_pool("cpu")]));
    assert_eq!(pods_per_node(&plan), [1, 1]);
}

#[test]
fn zonal_anti_affinity_allows_one_pod_per_zone() {
    let mut p = pods("quorum", 4, 500, 512, 0);
    for pod in &mut p {
        pod.anti_affinity.push(term(ZONE, "quorum", None));
    }
    let plan = solve(&snapshot(p, vec![on_demand_pool("cpu")]));
    assert_eq!(placed(&plan), 3);
    assert_eq!(plan.unschedulable.len(), 1);
    assert!(
        plan.unschedulable[0].reason.contains("anti-affinity"),
        "{}",
        plan.unschedulable[0].reason
    );
}

#[test]
fn preferred_anti_affinity_is_relaxed_when_it_blocks() {
    let p = zonal_pool("one-zone", &["us-east-1a"]);
    let mut pending = pods("cache", 2, 500, 512, 0);
    for pod in &mut pending {
        pod.anti_affinity.push(term(ZONE, "cache", Some(40)));
    }
    let plan = solve(&snapshot(pending, vec![p]));
    assert_eq!(placed(&plan), 2);
    assert!(
        plan.relaxations
            .iter()
            .any(|r| r.relaxed.contains("preferred pod anti-affinity"))
    );
}

#[test]
fn zonal_pod_affinity_keeps_pods_in_one_zone() {
    let mut p = pods("etl", 12, 3000, 4096, 0);
    for pod in &mut p {
        pod.affinity.push(term(ZONE, "etl", None));
    }
    let plan = solve(&snapshot(p, vec![on_demand_pool("cpu")]));
    assert_eq!(pods_per_zone(&plan).len(), 1);
    assert_eq!(placed(&plan), 12);
}

#[test]
fn hostname_pod_affinity_co_locates() {
    let mut web = pods("web", 1, 500, 512, 0);
    let mut sidecar = pods("sidecar", 2, 200, 256, 0);
    for pod in &mut sidecar {
        pod.affinity.push(term(HOSTNAME, "web", None));
    }
    web.append(&mut sidecar);
    let plan = solve(&snapshot(web, vec![on_demand_pool("cpu")]));
    assert_eq!(pods_per_node(&plan), [3]);
}

#[test]
fn pod_affinity_to_absent_pods_is_unschedulable() {
    let mut p = pods("orphan", 1, 500, 512, 0);
    p[0].affinity.push(term(HOSTNAME, "nobody", None));
    let plan = solve(&snapshot(p, vec![on_demand_pool("cpu")]));
    assert_eq!(plan.unschedulable.len(), 1);
    assert!(plan.unschedulable[0].reason.contains("pod affinity"));
}

#[test]
fn host_ports_conflict_on_one_node() {
    let mut p = pods("exporter", 2, 100, 128, 0);
    for pod in &mut p {
        pod.host_ports.push(HostPort {
            port: 9100,
            protocol: "TCP".into(),
            host_ip: "0.0.0.0".into(),
        });
    }
    let plan = solve(&snapshot(p, vec![on_demand_pool("cpu")]));
    assert_eq!(pods_per_node(&plan), [1, 1]);
}

#[test]
fn daemonset_overhead_reduces_room_on_every_node() {
    // m6i.large: 2 vCPU - 100m reserved = 1900m. A 1000m DaemonSet leaves 900m: a 800m pod
    // per node fits one, not two.
    let p = pool(
        "small",
        requirements(&[
            (
                "node.kubernetes.io/instance-type",
                Operator::In,
                &["m6i.large"],
            ),
            (
                "quartermaster.dev/capacity-type",
                Operator::In,
                &["on-demand"],
            ),
        ]),
    );
    let mut s = snapshot(pods("web", 2, 800, 256, 0), vec![p.clone()]);
    assert_eq!(pods_per_node(&solve(&s)), [2]);
    s.daemonsets.push(pod("agent", 1000, 256, 0));
    assert_eq!(pods_per_node(&solve(&s)), [1, 1]);
}

#[test]
fn pool_limits_stop_provisioning_with_a_reason() {
    let mut p = on_demand_pool("gpu");
    p.limits.resources.set(GPU, 2);
    let plan = solve(&snapshot(pods("infer", 3, 2000, 8192, 1), vec![p]));
    assert_eq!(placed(&plan), 2);
    assert_eq!(
        plan.unschedulable[0].reason,
        "NodePool gpu: limit nvidia.com/gpu=2 reached"
    );
}

#[test]
fn max_hourly_cost_is_a_ceiling() {
    let mut p = on_demand_pool("gpu");
    p.limits.max_hourly_cost = Some(2.5);
    let plan = solve(&snapshot(pods("infer", 3, 2000, 8192, 1), vec![p]));
    assert!(plan.cost_per_hour <= 2.5);
    assert_eq!(placed(&plan), 2);
    assert!(plan.unschedulable[0].reason.contains("maxHourlyCost"));
}

#[test]
fn right_sizing_keeps_to_the_pool_limits() {
    // Found by the property tests: after packing, each node is re-picked as the cheapest type
    // that holds its pods, and that re-pick ignored the limits. Here it merged both pods onto
    // one g6.24xlarge (96 vCPU), taking the pool to 104 of its 96 CPUs.
    let mut p = pool(
        "limited",
        requirements(&[("kubernetes.io/arch", Operator::In, &["amd64"])]),
    );
    p.limits.resources.set(crate::resources::CPU, 96_000);
    p.usage.resources.set(crate::resources::CPU, 8_000);
    let s = snapshot(
        vec![pod("a", 50, 130_080, 0), pod("b", 50, 63_600, 2)],
        vec![p],
    );
    let catalog = quartermaster_pricing::Catalog::embedded();
    let plan = crate::solve(&s, &catalog, now());
    assert_eq!(placed(&plan), 2, "{plan:#?}");
    let cpu = |name: &str| {
        i64::from(
            catalog
                .get(quartermaster_pricing::Cloud::Aws, name)
                .unwrap()
                .vcpu,
        ) * 1000
    };
    let used: i64 = plan
        .new_nodes
        .iter()
        .map(|n| cpu(&n.offering.instance_type))
        .sum();
    assert!(8_000 + used <= 96_000, "{} CPUs bought", used / 1000);
    // Each fallback offering keeps to the limits in place of its node too.
    for n in &plan.new_nodes {
        for alt in &n.alternatives {
            let swapped = used - cpu(&n.offering.instance_type) + cpu(&alt.instance_type);
            assert!(8_000 + swapped <= 96_000, "fallback {}", alt.instance_type);
        }
    }
}

#[test]
fn tiers_fall_back_to_lower_weight_when_the_heavier_pool_is_full() {
    let mut heavy = on_demand_pool("reserved-like");
    heavy.weight = 90;
    heavy.limits.nodes = Some(1);
    let light = on_demand_pool("overflow");
    let plan = solve(&snapshot(
        pods("infer", 2, 2000, 8192, 1),
        vec![heavy, light],
    ));
    let mut pools: Vec<&str> = plan
        .new_nodes
        .iter()
        .map(|n| n.node_pool.as_str())
        .collect();
    pools.sort();
    assert_eq!(pools, ["overflow", "reserved-like"]);
}
