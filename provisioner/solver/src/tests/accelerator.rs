//! Accelerator nodes for pods that request no accelerator: bought only as often as the pods'
//! constraints force, and always with the reason.

use quartermaster_policies::Operator;
use quartermaster_pricing::{CapacityType, Catalog};

use super::fixtures::*;
use crate::pod::{HOSTNAME, TopologySpread, WhenUnsatisfiable, ZONE};

/// The fixture catalog plus a fourth zone where only `g5.xlarge` is offered.
fn catalog_with_a_gpu_only_zone() -> Catalog {
    let mut types = catalog().instance_types().to_vec();
    for t in &mut types {
        if t.name == "g5.xlarge" {
            let mut extra = t.offerings[0].clone();
            extra.zone = "us-east-1d".into();
            extra.capacity_type = CapacityType::OnDemand;
            t.offerings.push(extra);
        }
    }
    Catalog::new(types)
}

fn spread(key: &str, skew: u32) -> TopologySpread {
    TopologySpread {
        topology_key: key.into(),
        max_skew: skew,
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        min_domains: None,
        selector: requirements(&[("app", Operator::In, &["web"])]),
    }
}

#[test]
fn cpu_pods_forced_into_a_gpu_only_zone_buy_no_more_gpu_nodes_than_forced_and_say_why() {
    // Karpenter's spread-hostname-zone.yaml, scaled down: 26 one-CPU pods, at most 2 per node,
    // zones within 5 of each other. With four zones the GPU-only one must hold at least
    // ⌈(26 − 3·5) / 4⌉ = 3 pods: two g5.xlarge nodes, not more.
    let mut pending = pods("web", 26, 1000, 256, 0);
    for p in &mut pending {
        p.topology_spread = vec![spread(HOSTNAME, 2), spread(ZONE, 5)];
    }
    let s = snapshot(pending, vec![on_demand_pool("default")]);
    let plan = crate::solve(&s, &catalog_with_a_gpu_only_zone(), now());
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(placed(&plan), 26);
    let gpu: Vec<_> = plan
        .new_nodes
        .iter()
        .filter(|n| n.offering.instance_type == "g5.xlarge")
        .collect();
    assert_eq!(gpu.len(), 2, "{:#?}", types(&plan));
    assert!(gpu.iter().all(|n| n.offering.zone == "us-east-1d"));
    for n in &gpu {
        let note = n
            .accelerator_note
            .as_deref()
            .expect("a note on the GPU node");
        assert!(
            note.contains(
                "zone us-east-1d: NodePool default offers these pods only accelerator types there"
            ),
            "{note}"
        );
        assert!(
            note.contains("maxSkew 5 over 4 zones) forces at least 3 of the 26 pods"),
            "{note}"
        );
    }
    assert!(
        plan.new_nodes
            .iter()
            .filter(|n| n.offering.instance_type != "g5.xlarge")
            .all(|n| n.accelerator_note.is_none())
    );
    let summary: Vec<_> = plan
        .notes
        .iter()
        .filter(|n| n.contains("for pods that request no accelerator"))
        .collect();
    assert_eq!(summary.len(), 1, "{:?}", plan.notes);
    assert!(summary[0].starts_with("NodePool default: 2 × g5.xlarge in us-east-1d"));
}

#[test]
fn gpu_pods_on_gpu_nodes_carry_no_note() {
    let s = snapshot(pods("infer", 3, 2000, 8192, 1), vec![on_demand_pool("gpu")]);
    let plan = solve(&s);
    assert!(!plan.new_nodes.is_empty());
    assert!(plan.new_nodes.iter().all(|n| n.accelerator_note.is_none()));
    assert!(
        !plan
            .notes
            .iter()
            .any(|n| n.contains("request no accelerator"))
    );
}

#[test]
fn zone_spread_keeps_the_cheap_zones_balanced_without_half_empty_nodes() {
    // Hostname maxSkew 2 and zone maxSkew 1 over three zones: 12 pods fit 6 nodes of 2, and a
    // node a zone rule stopped at one pod gets its second once the other zones catch up.
    let mut pending = pods("web", 12, 500, 256, 0);
    for p in &mut pending {
        p.topology_spread = vec![spread(HOSTNAME, 2), spread(ZONE, 1)];
    }
    let plan = solve(&snapshot(pending, vec![on_demand_pool("cpu")]));
    assert_eq!(pods_per_node(&plan), [2, 2, 2, 2, 2, 2]);
    assert_eq!(
        pods_per_zone(&plan).into_values().collect::<Vec<_>>(),
        [4, 4, 4]
    );
}
