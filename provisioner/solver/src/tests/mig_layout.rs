//! MIG pools that name no `migConfig`: the solver chooses each node's instance type and layout
//! to cover the pending mix of slice requests at the least cost, and the node's claim carries
//! the layout for `nvidia.com/mig.config`.

use quartermaster_policies::Operator;
use quartermaster_pricing::Catalog;
use quartermaster_pricing::sharing::GpuSharing;

use super::fixtures::*;
use crate::pod::{Pod, PodRef};
use crate::resources::ResourceTable;
use crate::snapshot::ClusterSnapshot;
use crate::{INSTANCE_TYPE_LABEL, Plan};

/// `n` pods asking one `nvidia.com/mig-<profile>` slice each.
fn slice_pods(table: &mut ResourceTable, prefix: &str, n: usize, profile: &str) -> Vec<Pod> {
    let slot = table
        .slot_or_insert(&format!("nvidia.com/mig-{profile}"))
        .expect("a spare slot");
    (0..n)
        .map(|i| {
            let mut r = resources(500, 2048, 0);
            r.set(slot, 1);
            Pod::new(PodRef::new("default", format!("{prefix}-{i}")), r)
        })
        .collect()
}

/// p4d.24xlarge (8 × A100-40GB) on demand, layout left to the solver.
fn mig_snapshot(mix: &[(usize, &str)]) -> ClusterSnapshot {
    let mut table = ResourceTable::default();
    let mut pending = Vec::new();
    for (i, (n, profile)) in mix.iter().enumerate() {
        pending.extend(slice_pods(&mut table, &format!("p{i}"), *n, profile));
    }
    let mut p = pool(
        "mig",
        requirements(&[
            (INSTANCE_TYPE_LABEL, Operator::In, &["p4d.24xlarge"]),
            (
                "quartermaster.dev/capacity-type",
                Operator::In,
                &["on-demand"],
            ),
        ]),
    );
    p.node_shape.gpu_sharing = Some(GpuSharing::MigAuto);
    ClusterSnapshot {
        resources: table,
        pending,
        node_pools: vec![p],
        ..ClusterSnapshot::default()
    }
}

fn layouts(plan: &Plan) -> Vec<String> {
    let mut l: Vec<String> = plan
        .new_nodes
        .iter()
        .map(|n| {
            let values: Vec<String> = n
                .requirements
                .get("nvidia.com/mig.config")
                .and_then(|r| r.values())
                .map(|v| v.iter().cloned().collect())
                .unwrap_or_default();
            values.join(",")
        })
        .collect();
    l.sort();
    l
}

#[test]
fn a_mix_of_1g_and_3g_slices_from_zero_takes_one_balanced_node() {
    // all-balanced on 8 × A100-40GB: 16 × 1g.5gb, 8 × 2g.10gb, 8 × 3g.20gb — the whole mix on
    // one node, where named layouts would need two (all-1g.5gb and all-3g.20gb).
    let s = mig_snapshot(&[(16, "1g.5gb"), (8, "3g.20gb")]);
    let plan = crate::solve(&s, &Catalog::embedded(), now());
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.new_nodes.len(), 1, "{:?}", layouts(&plan));
    assert_eq!(layouts(&plan), ["all-balanced"]);
    assert_eq!(plan.new_nodes[0].mig_config(), Some("all-balanced"));
    assert_eq!(plan.new_nodes[0].pods.len(), 24);
}

#[test]
fn one_profile_from_zero_takes_its_own_layout_and_the_right_node_count() {
    // all-1g.5gb: 56 slices per node; 60 pods need two nodes, and no alternative of a claim
    // changes its layout.
    let s = mig_snapshot(&[(60, "1g.5gb")]);
    let plan = crate::solve(&s, &Catalog::embedded(), now());
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.new_nodes.len(), 2, "{:?}", layouts(&plan));
    assert!(
        layouts(&plan)
            .iter()
            .all(|l| l == "all-1g.5gb" || l == "all-balanced")
    );
    assert!(layouts(&plan).iter().any(|l| l == "all-1g.5gb"));
    // Eight 3g slices: all-3g.20gb holds 16, one node.
    let s = mig_snapshot(&[(8, "3g.20gb")]);
    let plan = crate::solve(&s, &Catalog::embedded(), now());
    assert_eq!(plan.new_nodes.len(), 1);
    assert_eq!(plan.new_nodes[0].pods.len(), 8);
}
