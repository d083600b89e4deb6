//! The NodePool guards on a new node beyond holding its pods: `maxGpuOvershoot` (never an
//! 8-GPU node for a 1-GPU pod unless it is no dearer per GPU) and `minValues` (enough distinct
//! values among the offerings a NodeClaim may launch as).

use quartermaster_policies::{Operator, Requirements};
use quartermaster_pricing::Catalog;

use super::fixtures::*;
use crate::PodRef;
use crate::explain::{Outcome, Rejection, Verdict, explain};
use crate::snapshot::NodePoolSpec;
use crate::{INSTANCE_TYPE_LABEL, Plan};

fn guarded(name: &str, types: &[&str], max: Option<u32>) -> NodePoolSpec {
    let mut p = pool(
        name,
        requirements(&[
            (INSTANCE_TYPE_LABEL, Operator::In, types),
            (
                "quartermaster.dev/capacity-type",
                Operator::In,
                &["on-demand"],
            ),
        ]),
    );
    p.limits.max_gpu_overshoot = max;
    p
}

fn claim_types(plan: &Plan, node: usize) -> Vec<String> {
    plan.new_nodes[node]
        .requirements
        .get(INSTANCE_TYPE_LABEL)
        .and_then(|r| r.values())
        .map(|v| v.iter().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn an_eight_gpu_node_is_not_bought_for_one_gpu_pod_when_the_guard_is_set() {
    // aws/karpenter-provider-aws#7038: only the 8-GPU type is allowed.
    let pending = vec![pod("infer", 2000, 8192, 1)];
    let free = solve(&snapshot(
        pending.clone(),
        vec![guarded("gpu", &["g5.48xlarge"], None)],
    ));
    assert_eq!(types(&free), ["g5.48xlarge"]);
    let plan = solve(&snapshot(
        pending,
        vec![guarded("gpu", &["g5.48xlarge"], Some(2))],
    ));
    assert!(plan.new_nodes.is_empty(), "{:?}", types(&plan));
    assert_eq!(plan.unschedulable.len(), 1);
    assert!(
        plan.unschedulable[0]
            .reason
            .contains("overshoot: 8 GPUs for 1 requested, maxGpuOvershoot 2"),
        "{:?}",
        plan.unschedulable
    );
}

#[test]
fn enough_pods_to_fill_the_big_node_within_the_bound_buy_it() {
    // Six 1-GPU pods on an 8-GPU node leave 2 idle: within maxGpuOvershoot 2.
    let plan = solve(&snapshot(
        pods("train", 6, 2000, 8192, 1),
        vec![guarded("gpu", &["g5.48xlarge"], Some(2))],
    ));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(types(&plan), ["g5.48xlarge"]);
    // Five leave 3 idle: none is bought.
    let plan = solve(&snapshot(
        pods("train", 5, 2000, 8192, 1),
        vec![guarded("gpu", &["g5.48xlarge"], Some(2))],
    ));
    assert_eq!(plan.unschedulable.len(), 5, "{:?}", types(&plan));
}

#[test]
fn the_fallback_offerings_keep_within_the_guard() {
    // A 1-GPU pod gets g5.xlarge either way; without the guard its fallbacks include the
    // 4- and 8-GPU sizes (a capacity error would buy one), with maxGpuOvershoot 2 they do not.
    let all = ["g5.xlarge", "g5.12xlarge", "g5.48xlarge"];
    let pending = vec![pod("infer", 2000, 8192, 1)];
    let free = solve(&snapshot(pending.clone(), vec![guarded("gpu", &all, None)]));
    assert_eq!(types(&free), ["g5.xlarge"]);
    assert!(
        free.new_nodes[0]
            .alternatives
            .iter()
            .any(|a| a.instance_type == "g5.48xlarge")
    );
    let plan = solve(&snapshot(pending, vec![guarded("gpu", &all, Some(2))]));
    assert_eq!(types(&plan), ["g5.xlarge"]);
    assert!(
        plan.new_nodes[0]
            .alternatives
            .iter()
            .all(|a| a.instance_type == "g5.xlarge"),
        "{:?}",
        plan.new_nodes[0].alternatives
    );
    assert_eq!(claim_types(&plan, 0), ["g5.xlarge"]);
}

#[test]
fn a_bigger_node_no_dearer_per_gpu_is_allowed_past_the_bound() {
    // An 8-GPU type at $7.20/h is $0.90 per GPU, under g5.xlarge's $1.006: it stays a fallback.
    let mut types_ = catalog().instance_types().to_vec();
    types_.push(instance("g5.cheap8", 192, 768, 8, 7.2, None));
    let catalog = Catalog::new(types_);
    let s = snapshot(
        vec![pod("infer", 2000, 8192, 1)],
        vec![guarded("gpu", &["g5.xlarge", "g5.cheap8"], Some(2))],
    );
    let plan = crate::solve(&s, &catalog, now());
    assert_eq!(plan.new_nodes.len(), 1);
    assert_eq!(plan.new_nodes[0].offering.instance_type, "g5.xlarge");
    assert!(
        plan.new_nodes[0]
            .alternatives
            .iter()
            .any(|a| a.instance_type == "g5.cheap8"),
        "{:?}",
        plan.new_nodes[0].alternatives
    );
}

#[test]
fn cpu_pods_on_gpu_nodes_count_as_overshoot_too() {
    // A guarded pool that allows GPU types only does not put a CPU pod on an idle GPU.
    let plan = solve(&snapshot(
        vec![pod("web", 1000, 1024, 0)],
        vec![guarded("gpu", &["g5.xlarge", "g5.12xlarge"], Some(0))],
    ));
    assert!(plan.new_nodes.is_empty());
    assert!(
        plan.unschedulable[0]
            .reason
            .contains("overshoot: 1 GPUs for 0 requested, maxGpuOvershoot 0"),
        "{:?}",
        plan.unschedulable
    );
}

#[test]
fn explain_names_the_overshoot_of_each_oversized_candidate() {
    let s = snapshot(
        vec![pod("infer", 2000, 8192, 1)],
        vec![guarded(
            "gpu",
            &["g5.xlarge", "g5.12xlarge", "g5.48xlarge"],
            Some(2),
        )],
    );
    let e = explain(&s, &catalog(), now(), &PodRef::new("default", "infer")).expect("pending");
    assert!(
        matches!(&e.outcome, Outcome::NewNode { instance_type, .. } if instance_type == "g5.xlarge")
    );
    let big: Vec<&Verdict> = e
        .candidates
        .iter()
        .filter(|c| c.instance_type == "g5.48xlarge")
        .map(|c| &c.verdict)
        .collect();
    assert!(!big.is_empty());
    for v in big {
        assert_eq!(
            v,
            &Verdict::Rejected(Rejection::Overshoot {
                gpus: 8,
                requested: 1,
                max: 2
            })
        );
        assert_eq!(
            v.to_string(),
            "overshoot: 8 GPUs for 1 requested, maxGpuOvershoot 2"
        );
    }
}

fn min_values_pool(key: &str, n: u32) -> NodePoolSpec {
    let mut reqs = Requirements::default();
    reqs.add(requirement(key, Operator::Exists, &[]).with_min_values(Some(n)));
    reqs.add(requirement(
        "quartermaster.dev/capacity-type",
        Operator::In,
        &["on-demand"],
    ));
    pool("flex", reqs)
}

#[test]
fn min_values_keeps_enough_instance_types_on_the_claim() {
    // A small CPU pod fits all six types; its claim names at least five of them (the cheapest
    // dozen offerings alone span fewer).
    let plan = solve(&snapshot(
        vec![pod("web", 500, 512, 0)],
        vec![min_values_pool(INSTANCE_TYPE_LABEL, 5)],
    ));
    assert_eq!(plan.new_nodes.len(), 1);
    assert_eq!(plan.new_nodes[0].offering.instance_type, "m6i.large");
    let claim = claim_types(&plan, 0);
    assert!(claim.len() >= 5, "{claim:?}");
    let mut fallback: Vec<&str> = plan.new_nodes[0]
        .alternatives
        .iter()
        .map(|a| a.instance_type.as_str())
        .collect();
    fallback.sort();
    fallback.dedup();
    assert!(fallback.len() >= 4, "{fallback:?}");
}

#[test]
fn too_few_values_that_hold_the_pods_buy_nothing_and_say_so() {
    // A GPU pod fits the three g5 sizes only: minValues 4 cannot be kept.
    let s = snapshot(
        vec![pod("infer", 2000, 8192, 1)],
        vec![min_values_pool(INSTANCE_TYPE_LABEL, 4)],
    );
    let plan = solve(&s);
    assert!(plan.new_nodes.is_empty(), "{:?}", types(&plan));
    assert!(
        plan.unschedulable[0].reason.contains(
            "minValues: NodePool flex requires 4 distinct node.kubernetes.io/instance-type values, only 3 can hold the pods"
        ),
        "{:?}",
        plan.unschedulable
    );
    let e = explain(&s, &catalog(), now(), &PodRef::new("default", "infer")).expect("pending");
    let g5: Vec<String> = e
        .candidates
        .iter()
        .filter(|c| {
            c.instance_type == "g5.xlarge"
                && c.capacity_type == quartermaster_pricing::CapacityType::OnDemand
        })
        .map(|c| c.verdict.to_string())
        .collect();
    assert!(
        !g5.is_empty()
            && g5
                .iter()
                .all(|v| v.starts_with("minValues: NodePool flex requires 4")),
        "{g5:?}"
    );
    // minValues 3 is kept: all three sizes are on the claim.
    let plan = solve(&snapshot(
        vec![pod("infer", 2000, 8192, 1)],
        vec![min_values_pool(INSTANCE_TYPE_LABEL, 3)],
    ));
    assert_eq!(types(&plan), ["g5.xlarge"]);
    assert_eq!(
        claim_types(&plan, 0),
        ["g5.12xlarge", "g5.48xlarge", "g5.xlarge"]
    );
}
