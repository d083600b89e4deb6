//! Gang PodGroups against the mocked API server: the pending pods of a Volcano PodGroup are
//! bought for together, as `plan -f` plans them, with the RBAC the chart grants.

use serde_json::json;

use super::*;

/// A pool of 8-GPU machines (on-demand), tolerated by [`pending_pod`]'s pods.
fn eight_gpu_pool(api: &FakeApi) {
    api.insert(
        QM,
        "nodepools",
        json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
            "metadata": {"name": "gpu8"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p4d.24xlarge", "g5.48xlarge"]},
                    {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
            }}}}),
    );
}

/// The GPU cluster with Volcano PodGroup `ml/train` (minMember 4) and `members` of its pods
/// pending, each asking for a whole 8-GPU node.
fn cluster_with_volcano_gang(members: usize) -> FakeApi {
    let api = cluster_with_gpu_pool(&[]);
    eight_gpu_pool(&api);
    api.insert(
        "scheduling.volcano.sh",
        "podgroups",
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"minMember": 4, "queue": "default"}}),
    );
    for i in 0..members {
        add_member(&api, i);
    }
    api
}

fn add_member(api: &FakeApi, i: usize) {
    let mut pod = pending_pod(&format!("train-worker-{i}"), 8);
    pod["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "train"});
    api.insert("", "pods", pod);
}

fn label(claim: &Value, key: &str) -> String {
    claim["metadata"]["labels"][key]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(start_paused = true)]
async fn a_volcano_pod_group_gets_all_its_nodes_in_one_zone_as_a_gang() {
    let mut env = Env::new(cluster_with_volcano_gang(4));
    env.passes(0, 3).await;

    let claims = env.api.list(QM, "nodeclaims");
    assert_eq!(
        claims.len(),
        4,
        "one 8-GPU node per member: {:#?}",
        env.api
            .log()
            .iter()
            .map(|r| format!("{} {}", r.short(), r.body))
            .collect::<Vec<_>>()
    );
    let zones: std::collections::BTreeSet<String> = claims
        .iter()
        .map(|c| label(c, "topology.kubernetes.io/zone"))
        .collect();
    assert_eq!(zones.len(), 1, "a gang is bought in one zone: {zones:?}");
    for c in &claims {
        assert_eq!(
            label(c, quartermaster_engine::GANG_LABEL),
            "ml.train",
            "every claim names its gang: {c:#}"
        );
    }

    assert_rbac_allows_every_call(&env.api);
}

#[tokio::test(start_paused = true)]
async fn a_volcano_pod_group_short_of_min_member_buys_nothing_until_its_members_wait() {
    // Three of the four members: the PodGroup's minMember, not the pods seen, sizes the gang.
    let mut env = Env::new(cluster_with_volcano_gang(3));
    env.passes(0, 3).await;
    assert!(
        env.api.list(QM, "nodeclaims").is_empty(),
        "no node for a gang that cannot run whole"
    );

    add_member(&env.api, 3);
    env.passes(4, 7).await;
    assert_eq!(env.api.list(QM, "nodeclaims").len(), 4);
}
