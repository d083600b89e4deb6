//! Flex-start capacity (GCP's Dynamic Workload Scheduler) is opt-in: only a NodePool whose
//! requirements name capacity type `flex-start` with `In` (`quartermaster.dev/capacity-type`, or
//! an alias such as `karpenter.sh/capacity-type`, resolved when the pool is parsed) is offered
//! flex-start offerings. A pool without a capacity-type requirement allows every capacity type,
//! yet a flex-start node waits in a queue before it exists and runs at most seven days
//! ([`quartermaster_pricing::flex_start`]): nobody gets that without asking for it.
//!
//! Every pod a pool may hold may use its flex-start offerings (the pool's owner opted in for
//! them); the pods of a GKE `queued-provisioning.gke.io` ProvisioningRequest also prefer them.
//!
//! The catalog carries flex-start offerings only when some pool opts in ([`catalog_for`]):
//! nothing is paid for them otherwise.

use quartermaster_pricing::labels::CAPACITY_TYPE;
use quartermaster_pricing::{CapacityType, Catalog};

use crate::snapshot::NodePoolSpec;

/// Whether `pool` opts in to flex-start capacity: a requirement on the capacity type whose
/// operator is `In` and whose values include `flex-start`.
pub fn opts_in(pool: &NodePoolSpec) -> bool {
    pool.requirements
        .get(CAPACITY_TYPE)
        .and_then(|r| r.values())
        .is_some_and(|v| v.contains(CapacityType::FlexStart.as_str()))
}

/// Whether any of `pools` opts in.
pub fn any_opts_in<'a>(pools: impl IntoIterator<Item = &'a NodePoolSpec>) -> bool {
    pools.into_iter().any(opts_in)
}

/// `catalog` with its estimated flex-start offerings
/// ([`Catalog::with_flex_start_offerings`]) when any of `pools` opts in; `catalog` itself,
/// untouched, otherwise.
pub fn catalog_for<'a>(
    catalog: Catalog,
    pools: impl IntoIterator<Item = &'a NodePoolSpec>,
) -> Catalog {
    if any_opts_in(pools) {
        catalog.with_flex_start_offerings()
    } else {
        catalog
    }
}

#[cfg(test)]
mod tests {
    use quartermaster_policies::Operator;

    use super::*;
    use crate::tests::fixtures::{pool, requirements};

    #[test]
    fn only_in_naming_flex_start_opts_in() {
        let with = |op: Operator, values: &[&str]| {
            pool(
                "p",
                requirements(&[("quartermaster.dev/capacity-type", op, values)]),
            )
        };
        assert!(opts_in(&with(Operator::In, &["on-demand", "flex-start"])));
        assert!(!opts_in(&with(Operator::In, &["on-demand", "spot"])));
        assert!(!opts_in(&with(Operator::NotIn, &["spot"])));
        assert!(!opts_in(&pool("p", requirements(&[]))));
        // Karpenter's key is read as ours.
        let karpenter = pool(
            "k",
            requirements(&[("karpenter.sh/capacity-type", Operator::In, &["flex-start"])]),
        );
        assert!(opts_in(&karpenter));
    }

    #[test]
    fn the_catalog_gains_flex_start_offerings_only_for_a_pool_that_opts_in() {
        let has_flex = |c: &Catalog| {
            c.instance_types().iter().any(|t| {
                t.offerings
                    .iter()
                    .any(|o| o.capacity_type == CapacityType::FlexStart)
            })
        };
        let plain = pool("p", requirements(&[]));
        let catalog = catalog_for(Catalog::embedded(), [&plain]);
        assert!(!has_flex(&catalog));
        let flex = pool(
            "f",
            requirements(&[(
                "quartermaster.dev/capacity-type",
                Operator::In,
                &["flex-start"],
            )]),
        );
        assert!(has_flex(&catalog_for(catalog, [&plain, &flex])));
    }

    /// A GCP pool limited to a2-highgpu-1g, with `capacity_types` when given.
    fn a2_pool(name: &str, capacity_types: Option<&[&str]>) -> NodePoolSpec {
        let mut list: Vec<(&str, Operator, &[&str])> = vec![(
            "node.kubernetes.io/instance-type",
            Operator::In,
            &["a2-highgpu-1g"],
        )];
        if let Some(types) = capacity_types {
            list.push(("quartermaster.dev/capacity-type", Operator::In, types));
        }
        let mut p = pool(name, requirements(&list));
        p.cloud = quartermaster_pricing::Cloud::Gcp;
        p
    }

    /// One one-GPU pod planned in `pool` on the embedded catalog with flex-start offerings.
    fn plan_in(pool: NodePoolSpec) -> crate::Plan {
        let catalog = Catalog::embedded().with_flex_start_offerings();
        let snapshot = crate::tests::fixtures::snapshot(
            vec![crate::tests::fixtures::pod("train", 8000, 32 * 1024, 1)],
            vec![pool],
        );
        crate::solve(&snapshot, &catalog, crate::tests::fixtures::now())
    }

    fn a2_price(capacity_type: CapacityType, zone: &str) -> f64 {
        let catalog = Catalog::embedded().with_flex_start_offerings();
        let a2 = catalog
            .get(quartermaster_pricing::Cloud::Gcp, "a2-highgpu-1g")
            .expect("a2-highgpu-1g in the embedded catalog");
        a2.offerings
            .iter()
            .find(|o| o.capacity_type == capacity_type && o.zone == zone)
            .expect("offering")
            .price_per_hour
    }

    #[test]
    fn a_pool_without_opt_in_never_gets_flex_start_even_when_the_catalog_has_it() {
        // No capacity-type requirement (any, spot included), and on-demand only.
        for types in [None, Some(&["on-demand", "reserved"][..])] {
            let plan = plan_in(a2_pool("plain", types));
            assert_eq!(plan.new_nodes.len(), 1, "{plan:?}");
            let node = &plan.new_nodes[0];
            assert_ne!(node.offering.capacity_type, CapacityType::FlexStart);
            assert!(
                node.alternatives
                    .iter()
                    .all(|a| a.capacity_type != CapacityType::FlexStart),
                "{node:?}"
            );
            // Explain says why, instead of calling them cheaper.
            let catalog = Catalog::embedded().with_flex_start_offerings();
            let snapshot = crate::tests::fixtures::snapshot(
                vec![crate::tests::fixtures::pod("train", 8000, 32 * 1024, 1)],
                vec![a2_pool("plain", types)],
            );
            let explanation = crate::explain::explain(
                &snapshot,
                &catalog,
                crate::tests::fixtures::now(),
                &snapshot.pending[0].id,
            )
            .expect("the pod is pending");
            let flex: Vec<_> = explanation
                .candidates
                .iter()
                .filter(|c| c.capacity_type == CapacityType::FlexStart)
                .collect();
            assert!(!flex.is_empty());
            assert!(flex.iter().all(|c| matches!(
                &c.verdict,
                crate::explain::Verdict::Rejected(crate::explain::Rejection::PoolRequirement { detail })
                    if detail.contains("opt-in")
            )));
            // The bound does not see them either: without spot, it is above every
            // flex-start price.
            if types.is_some() {
                let flex = a2_price(CapacityType::FlexStart, &node.offering.zone);
                assert!(plan.lower_bound_per_hour > flex + 1e-9, "{plan:?}");
            }
        }
    }

    #[test]
    fn a_pool_that_opts_in_gets_the_cheaper_flex_start_offering_and_the_bound_agrees() {
        let plan = plan_in(a2_pool("flex", Some(&["on-demand", "flex-start"])));
        assert_eq!(plan.new_nodes.len(), 1, "{plan:?}");
        let node = &plan.new_nodes[0];
        assert_eq!(node.offering.capacity_type, CapacityType::FlexStart);
        let on_demand = a2_price(CapacityType::OnDemand, &node.offering.zone);
        assert!(
            (node.offering.price_per_hour - 0.5 * on_demand).abs() < 1e-9,
            "{node:?}"
        );
        assert!((plan.cost_per_hour - node.offering.price_per_hour).abs() < 1e-9);
        // On-demand stays an alternative (a flex-start request may not be fulfilled).
        assert!(
            node.alternatives
                .iter()
                .any(|a| a.capacity_type == CapacityType::OnDemand),
            "{node:?}"
        );
        assert!(plan.lower_bound_per_hour <= plan.cost_per_hour + 1e-9);
        assert!(
            plan.lower_bound_per_hour >= 0.99 * plan.cost_per_hour,
            "the bound prices the same flex-start offering: {plan:?}"
        );
    }
}
