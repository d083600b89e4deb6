//! `explain`: every candidate offering with the first reason it is not the choice.

use quartermaster_policies::Operator;
use quartermaster_pricing::CapacityType;

use super::fixtures::*;
use crate::PodRef;
use crate::explain::{Explanation, Outcome, Rejection, Verdict, explain, top_reasons};
use crate::snapshot::{ClusterSnapshot, OfferingKey};

fn explained(s: &ClusterSnapshot, pod: &str) -> Explanation {
    explain(s, &catalog(), now(), &PodRef::new("default", pod)).expect("a pending pod")
}

fn verdicts<'a>(e: &'a Explanation, instance_type: &str) -> Vec<&'a Verdict> {
    e.candidates
        .iter()
        .filter(|c| c.instance_type == instance_type)
        .map(|c| &c.verdict)
        .collect()
}

#[test]
fn a_gpu_pod_sees_the_choice_the_dearer_gpu_types_and_why_cpu_types_cannot_hold_it() {
    let s = snapshot(
        vec![pod("infer", 2000, 8192, 1)],
        vec![on_demand_pool("gpu")],
    );
    let e = explained(&s, "infer");
    let Outcome::NewNode { instance_type, .. } = &e.outcome else {
        panic!("{:?}", e.outcome)
    };
    assert_eq!(instance_type, "g5.xlarge");
    assert_eq!(e.candidates[0].verdict, Verdict::Chosen);
    assert_eq!(e.candidates[0].instance_type, "g5.xlarge");
    // Same type in the other zones: as cheap, not chosen.
    assert!(
        verdicts(&e, "g5.12xlarge")
            .iter()
            .any(|v| matches!(v, Verdict::MoreExpensive { by_per_hour } if (*by_per_hour - (5.672 - 1.006)).abs() < 1e-9)),
        "{e:#?}"
    );
    // Spot offerings are excluded by the pool's requirement; CPU types have no GPU.
    let spot = e
        .candidates
        .iter()
        .find(|c| c.capacity_type == CapacityType::Spot)
        .unwrap();
    assert!(
        matches!(&spot.verdict, Verdict::Rejected(Rejection::PoolRequirement { detail }) if detail.contains("quartermaster.dev/capacity-type") && detail.contains("spot")),
        "{spot:?}"
    );
    assert!(
        verdicts(&e, "m6i.4xlarge").iter().any(|v| matches!(v,
            Verdict::Rejected(Rejection::Resources { resource, .. }) if resource == "nvidia.com/gpu")),
        "{e:#?}"
    );
    // Ordered: the choice, those that could hold it by price, then rejections.
    let first_rejected = e
        .candidates
        .iter()
        .position(|c| matches!(c.verdict, Verdict::Rejected(_)))
        .unwrap();
    assert!(
        e.candidates[first_rejected..]
            .iter()
            .all(|c| matches!(c.verdict, Verdict::Rejected(_)))
    );
}

#[test]
fn taints_node_selectors_limits_and_unavailable_offerings_are_named() {
    let mut tainted = on_demand_pool("gpu");
    tainted.taints.push(taint("nvidia.com/gpu", ""));
    let s = snapshot(vec![pod("infer", 2000, 8192, 1)], vec![tainted]);
    let e = explained(&s, "infer");
    assert!(matches!(e.outcome, Outcome::Unschedulable { .. }));
    assert_eq!(
        top_reasons(&e, 1),
        format!(
            "{} × taint nvidia.com/gpu:NoSchedule not tolerated",
            e.candidates
                .iter()
                .filter(|c| c.capacity_type == CapacityType::OnDemand)
                .count()
        )
    );

    let mut selective = pod("infer", 2000, 8192, 1);
    selective.node_terms.push(requirements(&[(
        "node.kubernetes.io/instance-type",
        Operator::In,
        &["g5.48xlarge"],
    )]));
    let s = snapshot(vec![selective], vec![on_demand_pool("gpu")]);
    let e = explained(&s, "infer");
    assert!(
        verdicts(&e, "g5.xlarge").iter().all(|v| matches!(v,
            Verdict::Rejected(Rejection::NodeSelector { detail }) if detail.contains("node.kubernetes.io/instance-type=g5.xlarge"))
            || matches!(v, Verdict::Rejected(Rejection::PoolRequirement { .. }))),
        "{e:#?}"
    );

    let mut limited = on_demand_pool("gpu");
    limited.limits.max_hourly_cost = Some(2.0);
    let mut s = snapshot(vec![pod("infer", 2000, 8192, 1)], vec![limited]);
    s.unavailable.insert(OfferingKey {
        cloud: quartermaster_pricing::Cloud::Aws,
        instance_type: "g5.xlarge".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::OnDemand,
    });
    let e = explained(&s, "infer");
    let a = e
        .candidates
        .iter()
        .find(|c| {
            c.instance_type == "g5.xlarge"
                && c.zone == "us-east-1a"
                && c.capacity_type == CapacityType::OnDemand
        })
        .unwrap();
    assert!(
        matches!(&a.verdict, Verdict::Rejected(Rejection::Unavailable { .. })),
        "{a:?}"
    );
    assert!(
        verdicts(&e, "g5.12xlarge").iter().any(|v| matches!(v,
            Verdict::Rejected(Rejection::Limit { detail }) if detail.starts_with("maxHourlyCost $2.00"))),
        "{e:#?}"
    );
    assert_eq!(e.candidates[0].verdict, Verdict::Chosen);
    assert_ne!(e.candidates[0].zone, "us-east-1a");
}

#[test]
fn a_pod_that_is_not_pending_has_no_explanation() {
    let s = snapshot(
        vec![pod("infer", 2000, 8192, 1)],
        vec![on_demand_pool("gpu")],
    );
    assert!(explain(&s, &catalog(), now(), &PodRef::new("default", "nope")).is_none());
}

#[test]
fn an_empty_pool_names_the_requirements_that_empty_it() {
    // g5.48xlarge has no spot offering: each requirement alone rules out what the other allows.
    let p = pool(
        "big-spot",
        requirements(&[
            (
                "node.kubernetes.io/instance-type",
                Operator::In,
                &["g5.48xlarge"],
            ),
            ("quartermaster.dev/capacity-type", Operator::In, &["spot"]),
        ]),
    );
    let reason = crate::explain::empty_pool_reason(&p, &catalog());
    assert!(
        reason.contains("quartermaster.dev/capacity-type In [spot] rules out all 3 offering(s)"),
        "{reason}"
    );
    let plan = solve(&snapshot(vec![pod("a", 100, 128, 0)], vec![p]));
    assert!(
        plan.notes.iter().any(|n| n.starts_with(
            "NodePool big-spot: no instance type in the catalog satisfies its requirements: "
        )),
        "{:?}",
        plan.notes
    );
}

#[test]
fn a_pool_whose_gpu_sharing_fits_none_of_its_types_says_so() {
    let mut p = on_demand_pool("mig");
    p.node_shape.gpu_sharing = Some(quartermaster_pricing::sharing::GpuSharing::Mig {
        config: "all-1g.10gb".into(),
    });
    let reason = crate::explain::empty_pool_reason(&p, &catalog());
    assert!(
        reason.starts_with("its gpuSharing applies to none of the 6 instance type(s) its requirements allow (g5.xlarge: a10g (22888 MiB) has no MIG"),
        "{reason}"
    );
}

#[test]
fn a_misspelt_selector_key_gets_a_suggestion_in_the_reason() {
    let mut p = pod("infer", 2000, 8192, 1);
    p.node_terms.push(requirements(&[(
        "karpenter.k8s.aws/instance-gpu_name",
        Operator::In,
        &["a10g"],
    )]));
    let plan = solve(&snapshot(vec![p], vec![on_demand_pool("gpu")]));
    let reason = &plan.unschedulable[0].reason;
    assert!(
        reason.ends_with(
            "; karpenter.k8s.aws/instance-gpu_name: did you mean \"karpenter.k8s.aws/instance-gpu-name\"?"
        ),
        "{reason}"
    );
}
