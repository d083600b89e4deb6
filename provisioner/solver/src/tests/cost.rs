//! Cost choices: shapes, capacity types, pool weights, existing room, the lower bound.

use quartermaster_policies::Operator;
use quartermaster_pricing::CapacityType;

use super::fixtures::*;
use crate::snapshot::ExistingNode;

#[test]
fn two_one_gpu_pods_buy_two_small_nodes_not_one_big_one() {
    // aws/karpenter-provider-aws#5379: greedy packing puts both on a 4-GPU g5.12xlarge.
    let s = snapshot(pods("infer", 2, 2000, 8192, 1), vec![on_demand_pool("gpu")]);
    let plan = solve(&s);
    assert_eq!(types(&plan), ["g5.xlarge", "g5.xlarge"]);
    assert!((plan.cost_per_hour - 2.012).abs() < 1e-9);
    let greedy = solve_greedy(&s);
    assert_eq!(types(&greedy), ["g5.12xlarge"]);
    assert!(plan.cost_per_hour < greedy.cost_per_hour);
}

#[test]
fn many_one_gpu_pods_still_take_the_cheapest_per_gpu_shape() {
    let s = snapshot(pods("infer", 9, 2000, 8192, 1), vec![on_demand_pool("gpu")]);
    let plan = solve(&s);
    assert_eq!(plan.new_nodes.len(), 9);
    assert!(plan.unschedulable.is_empty());
    assert!(
        (plan.lower_bound_per_hour - plan.cost_per_hour).abs() < 1e-6
            || plan.lower_bound_per_hour <= plan.cost_per_hour
    );
}

#[test]
fn cpu_pods_never_buy_gpu_nodes_when_cpu_nodes_are_cheaper() {
    let s = snapshot(pods("web", 6, 1000, 2048, 0), vec![on_demand_pool("any")]);
    let plan = solve(&s);
    assert!(
        plan.new_nodes
            .iter()
            .all(|n| n.offering.instance_type.starts_with("m6i")),
        "{:?}",
        types(&plan)
    );
}

#[test]
fn spot_is_taken_when_allowed_and_cheaper() {
    let s = snapshot(
        pods("infer", 1, 2000, 8192, 1),
        vec![pool("gpu", Default::default())],
    );
    let plan = solve(&s);
    assert_eq!(plan.new_nodes[0].offering.capacity_type, CapacityType::Spot);
    assert!((plan.cost_per_hour - 0.45).abs() < 1e-9);
    // On-demand falls in the alternatives for the launcher to fall back to.
    assert!(
        plan.new_nodes[0]
            .alternatives
            .iter()
            .any(|a| a.capacity_type == CapacityType::OnDemand)
    );
}

#[test]
fn on_demand_only_pool_never_buys_spot() {
    let s = snapshot(pods("infer", 3, 2000, 8192, 1), vec![on_demand_pool("gpu")]);
    let plan = solve(&s);
    assert!(
        plan.new_nodes
            .iter()
            .all(|n| n.offering.capacity_type == CapacityType::OnDemand)
    );
    assert!(
        plan.new_nodes
            .iter()
            .flat_map(|n| &n.alternatives)
            .all(|a| a.capacity_type == CapacityType::OnDemand)
    );
}

#[test]
fn higher_weight_pool_wins_even_when_pricier() {
    let mut heavy = pool(
        "on-demand",
        requirements(&[(
            "quartermaster.dev/capacity-type",
            Operator::In,
            &["on-demand"],
        )]),
    );
    heavy.weight = 50;
    let light = pool(
        "spot",
        requirements(&[("quartermaster.dev/capacity-type", Operator::In, &["spot"])]),
    );
    let plan = solve(&snapshot(pods("web", 2, 1000, 1024, 0), vec![light, heavy]));
    assert!(plan.new_nodes.iter().all(|n| n.node_pool == "on-demand"));
}

#[test]
fn equal_weight_pools_compare_on_price() {
    let a = on_demand_pool("on-demand");
    let b = pool(
        "spot",
        requirements(&[("quartermaster.dev/capacity-type", Operator::In, &["spot"])]),
    );
    let plan = solve(&snapshot(pods("web", 2, 1000, 1024, 0), vec![a, b]));
    assert!(plan.new_nodes.iter().all(|n| n.node_pool == "spot"));
}

#[test]
fn existing_room_is_used_first_and_costs_nothing() {
    let mut s = snapshot(pods("web", 3, 1000, 1024, 0), vec![on_demand_pool("cpu")]);
    s.nodes.push(ExistingNode {
        name: "node-1".into(),
        in_flight: false,
        node_pool: Some("cpu".into()),
        labels: std::sync::Arc::new(
            [(
                "topology.kubernetes.io/zone".to_owned(),
                "us-east-1a".to_owned(),
            )]
            .into(),
        ),
        taints: Vec::new(),
        allocatable: node_resources(2500, 8192, 0),
        pods: vec![pod("running", 400, 512, 0).into()],
    });
    let plan = solve(&s);
    assert_eq!(plan.existing.len(), 1);
    assert_eq!(
        plan.existing[0].pods.len(),
        2,
        "2100m free holds two 1000m pods"
    );
    assert_eq!(plan.new_nodes.len(), 1);
    assert_eq!(placed(&plan), 3);
}

#[test]
fn pods_nominated_to_an_in_flight_claim_are_not_provisioned_twice() {
    // The claim's room is already partly taken by the pods nominated to it; a new pending pod
    // that fits the rest goes there too, and nothing new is bought.
    let mut s = snapshot(pods("infer", 1, 2000, 4096, 1), vec![on_demand_pool("gpu")]);
    s.nodes.push(ExistingNode {
        name: "claim-abc".into(),
        in_flight: true,
        node_pool: Some("gpu".into()),
        labels: std::sync::Arc::new(
            [(
                "topology.kubernetes.io/zone".to_owned(),
                "us-east-1a".to_owned(),
            )]
            .into(),
        ),
        taints: Vec::new(),
        allocatable: node_resources(47000, 190_000, 4),
        pods: pods("nominated", 3, 2000, 4096, 1)
            .into_iter()
            .map(Into::into)
            .collect(),
    });
    let plan = solve(&s);
    assert!(plan.new_nodes.is_empty());
    assert_eq!(plan.existing[0].node, "claim-abc");
    assert!(plan.existing[0].in_flight);
    assert_eq!(plan.cost_per_hour, 0.0);
}

#[test]
fn unavailable_offerings_are_skipped() {
    let mut s = snapshot(pods("infer", 1, 2000, 8192, 1), vec![on_demand_pool("gpu")]);
    for zone in ZONES {
        s.unavailable.insert(crate::OfferingKey {
            cloud: quartermaster_pricing::Cloud::Aws,
            instance_type: "g5.xlarge".into(),
            zone: zone.into(),
            capacity_type: CapacityType::OnDemand,
        });
    }
    let plan = solve(&s);
    assert_eq!(types(&plan), ["g5.12xlarge"]);
}

#[test]
fn alternatives_hold_the_same_pods_and_are_ordered_by_price() {
    let plan = solve(&snapshot(
        pods("infer", 1, 2000, 8192, 1),
        vec![on_demand_pool("gpu")],
    ));
    let node = &plan.new_nodes[0];
    assert!(!node.alternatives.is_empty());
    let prices: Vec<f64> = node.alternatives.iter().map(|a| a.price_per_hour).collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]));
    assert!(prices[0] >= node.offering.price_per_hour);
    assert!(
        node.alternatives
            .iter()
            .all(|a| a.instance_type.starts_with("g5"))
    );
}

/// A claim's fallbacks stop at what another NodePool of the same weight would charge for the
/// same pods: past that, its pods are better solved again (the cheap offering's capacity is
/// marked unavailable by then) than launched on a dear type of the first pool.
/// A pool of the fixture's defaults that may buy only `types`.
fn only(name: &str, types: &[&str]) -> crate::NodePoolSpec {
    pool(
        name,
        requirements(&[("node.kubernetes.io/instance-type", Operator::In, types)]),
    )
}

#[test]
fn fallbacks_stop_at_the_price_of_another_pool_of_the_same_weight() {
    let small = only("small", &["g5.xlarge", "g5.48xlarge"]);
    let quad = only("quad", &["g5.12xlarge"]);
    let plan = solve(&snapshot(
        pods("infer", 1, 2000, 8192, 1),
        vec![small.clone(), quad.clone()],
    ));
    let node = &plan.new_nodes[0];
    assert_eq!(
        (
            node.node_pool.as_str(),
            node.offering.instance_type.as_str()
        ),
        ("small", "g5.xlarge")
    );
    let fallbacks: Vec<(&str, f64)> = node
        .alternatives
        .iter()
        .map(|a| (a.instance_type.as_str(), a.price_per_hour))
        .collect();
    // g5.xlarge spot in the other zones ($0.45) and on-demand ($1.006) are below quad's
    // g5.12xlarge spot ($2.30); g5.48xlarge ($16.288) is not.
    assert_eq!(
        fallbacks,
        [
            ("g5.xlarge", 0.45),
            ("g5.xlarge", 0.45),
            ("g5.xlarge", 1.006),
            ("g5.xlarge", 1.006),
            ("g5.xlarge", 1.006)
        ]
    );

    // A pool that cannot take the node (its node limit reached) sets no ceiling; nor does one
    // of another weight.
    let mut full = quad.clone();
    full.limits.nodes = Some(0);
    let mut heavier = small.clone();
    heavier.weight = 10;
    for pools in [vec![small, full], vec![heavier, quad]] {
        let plan = solve(&snapshot(pods("infer", 1, 2000, 8192, 1), pools));
        assert!(
            plan.new_nodes[0]
                .alternatives
                .iter()
                .any(|a| a.instance_type == "g5.48xlarge"),
            "{:?}",
            plan.new_nodes[0].alternatives
        );
    }
}

#[test]
fn nodes_past_an_offering_limit_go_to_another_pool_of_the_same_weight_when_it_is_cheaper() {
    // g5.xlarge (every zone, spot and on-demand) may have two new nodes. The other three
    // one-GPU pods would fall back to g5.48xlarge in their own pool; the pool `quad` of the same
    // weight sells g5.12xlarge spot for $2.30, and they go there (the engine's claims do the
    // same through `elsewhere`'s ceiling). A pool of another weight is never used instead.
    let small = only("small", &["g5.xlarge", "g5.48xlarge"]);
    let quad = only("quad", &["g5.12xlarge"]);
    let limited = |pools: Vec<crate::NodePoolSpec>| {
        let mut s = snapshot(pods("infer", 5, 2000, 8192, 1), pools);
        s.offering_limits.push(crate::OfferingLimit {
            offerings: ZONES
                .iter()
                .flat_map(|zone| {
                    [CapacityType::Spot, CapacityType::OnDemand].map(|capacity_type| {
                        crate::OfferingKey {
                            cloud: quartermaster_pricing::Cloud::Aws,
                            instance_type: "g5.xlarge".into(),
                            zone: (*zone).into(),
                            capacity_type,
                        }
                    })
                })
                .collect(),
            max: 2,
        });
        solve(&s)
    };
    let nodes = |plan: &crate::Plan| {
        let mut v: Vec<(String, String)> = plan
            .new_nodes
            .iter()
            .map(|n| (n.node_pool.clone(), n.offering.instance_type.clone()))
            .collect();
        v.sort();
        v
    };
    let plan = limited(vec![small.clone(), quad.clone()]);
    assert_eq!(placed(&plan), 5);
    let pair = |p: &str, t: &str| (p.to_owned(), t.to_owned());
    assert_eq!(
        nodes(&plan),
        [
            pair("quad", "g5.12xlarge"),
            pair("quad", "g5.12xlarge"),
            pair("quad", "g5.12xlarge"),
            pair("small", "g5.xlarge"),
            pair("small", "g5.xlarge"),
        ],
        "{plan:#?}"
    );
    assert!(plan.lower_bound_per_hour <= plan.cost_per_hour + 1e-9);

    let mut heavier = small;
    heavier.weight = 10;
    let plan = limited(vec![heavier, quad]);
    assert!(
        plan.new_nodes
            .iter()
            .all(|n| n.node_pool == "small" && n.offering.instance_type != "g5.12xlarge"),
        "{plan:#?}"
    );
}

#[test]
fn lower_bound_never_exceeds_cost() {
    let mut all = pods("infer", 5, 2000, 8192, 1);
    all.extend(pods("web", 20, 500, 1024, 0));
    all.extend(pods("train", 2, 16000, 65536, 4));
    let plan = solve(&snapshot(all, vec![on_demand_pool("any")]));
    assert!(plan.lower_bound_per_hour <= plan.cost_per_hour + 1e-9);
    assert!(plan.lower_bound_per_hour >= 0.0);
    assert_eq!(placed(&plan), 27);
}

#[test]
fn skipping_the_lower_bound_changes_nothing_but_the_bound() {
    let mut all = pods("infer", 5, 2000, 8192, 1);
    all.extend(pods("web", 20, 500, 1024, 0));
    let s = snapshot(all, vec![on_demand_pool("any")]);
    let with = solve(&s);
    let without = crate::solve_with(
        &s,
        &catalog(),
        now(),
        &crate::SolveOptions {
            skip_lower_bound: true,
            ..Default::default()
        },
    );
    assert!(with.lower_bound_per_hour > 0.0);
    assert_eq!(without.lower_bound_per_hour, 0.0);
    assert_eq!(without.cost_per_hour, with.cost_per_hour);
    assert_eq!(without.new_nodes.len(), with.new_nodes.len());
}

#[test]
fn time_sliced_gpus_hold_as_many_pods_as_replicas() {
    // Four 1-GPU pods on a pool that time-slices each GPU four ways: one g5.xlarge, not four
    // (kubernetes-sigs/karpenter#729).
    let mut shared = on_demand_pool("shared");
    shared.node_shape.gpu_sharing = Some(quartermaster_pricing::sharing::GpuSharing::TimeSlicing {
        replicas: 4,
        rename_by_default: false,
    });
    let plan = solve(&snapshot(pods("infer", 4, 500, 1024, 1), vec![shared]));
    assert_eq!(types(&plan), ["g5.xlarge"], "{plan:#?}");
    let plain = solve(&snapshot(
        pods("infer", 4, 500, 1024, 1),
        vec![on_demand_pool("plain")],
    ));
    assert_eq!(
        plain.new_nodes.iter().map(|n| n.pods.len()).sum::<usize>(),
        4
    );
    assert!(plain.cost_per_hour > plan.cost_per_hour);
}

#[test]
fn a_nodeclass_root_volume_decides_ephemeral_storage() {
    // 120 GiB of ephemeral storage: more than the default root volume gives; the reason says
    // which NodeClass field to raise, and a pool whose NodeClass sets a 200 GiB root fits it.
    let mut p = pod("vllm", 2000, 8192, 1);
    p.requests
        .set(crate::resources::EPHEMERAL_STORAGE, 120 << 30);
    let plan = solve(&snapshot(vec![p.clone()], vec![on_demand_pool("gpu")]));
    assert_eq!(plan.unschedulable.len(), 1, "{plan:#?}");
    assert!(
        plan.unschedulable[0]
            .reason
            .contains("GCPNodeClass disk.sizeGiB"),
        "{}",
        plan.unschedulable[0].reason
    );
    let mut big = on_demand_pool("gpu");
    big.node_shape.ephemeral_storage = Some(crate::EphemeralStorage {
        root_volume_bytes: Some(200 << 30),
        local_nvme: false,
    });
    let plan = solve(&snapshot(vec![p], vec![big]));
    assert!(plan.unschedulable.is_empty(), "{plan:#?}");
    assert_eq!(types(&plan), ["g5.xlarge"]);
}

#[test]
fn a_node_overlay_gives_matching_types_the_capacity_it_declares() {
    // Karpenter's GPU time-slicing blueprint: one-GPU types advertise 4 GPUs.
    let mut p = on_demand_pool("slices");
    p.node_shape.overlays.push(crate::CapacityOverlay {
        name: "gpu-slices-1gpu".into(),
        weight: 10,
        requirements: requirements(&[(
            "karpenter.k8s.aws/instance-gpu-count",
            Operator::In,
            &["1"],
        )]),
        capacity: [("nvidia.com/gpu".to_owned(), 4)].into(),
    });
    let plan = solve(&snapshot(pods("infer", 4, 500, 1024, 1), vec![p]));
    assert_eq!(types(&plan), ["g5.xlarge"], "{plan:#?}");
}

/// Five one-GPU pods on a pool that allows spot, with g5.xlarge spot (the cheapest) limited to
/// `max` new nodes across its zones.
fn limited_spot(max: Option<u32>) -> crate::Plan {
    let mut s = snapshot(
        pods("infer", 5, 2000, 8192, 1),
        vec![pool(
            "gpu",
            requirements(&[(
                "quartermaster.dev/capacity-type",
                Operator::In,
                &["spot", "on-demand"],
            )]),
        )],
    );
    if let Some(max) = max {
        s.offering_limits.push(crate::OfferingLimit {
            offerings: ZONES
                .iter()
                .map(|zone| crate::OfferingKey {
                    cloud: quartermaster_pricing::Cloud::Aws,
                    instance_type: "g5.xlarge".into(),
                    zone: (*zone).into(),
                    capacity_type: CapacityType::Spot,
                })
                .collect(),
            max,
        });
    }
    solve(&s)
}

#[test]
fn an_offering_limit_holds_in_the_plan_and_in_the_bound() {
    let free = limited_spot(None);
    assert_eq!(types(&free), ["g5.xlarge"; 5]);
    assert!(
        (free.lower_bound_per_hour - 5.0 * 0.45).abs() < 1e-6,
        "{free:?}"
    );

    let plan = limited_spot(Some(2));
    assert_eq!(placed(&plan), 5);
    let spot_small = plan
        .new_nodes
        .iter()
        .filter(|n| {
            n.offering.instance_type == "g5.xlarge"
                && n.offering.capacity_type == CapacityType::Spot
        })
        .count();
    assert_eq!(spot_small, 2, "{plan:?}");
    // Two pods at most at $0.45; the other three at least at the cheapest GPU price left,
    // g5.12xlarge spot's $2.30 / 4.
    let bound = 2.0 * 0.45 + 3.0 * 2.3 / 4.0;
    assert!(
        plan.lower_bound_per_hour >= bound - 1e-6,
        "bound {} < {bound}",
        plan.lower_bound_per_hour
    );
    assert!(plan.lower_bound_per_hour <= plan.cost_per_hour + 1e-9);
}
