//! A pass at rest skips observing and syncing statuses (see `driver/rest.rs`), and never at the
//! cost of a change: a new pod, a status changed behind the controller's back and a delete
//! waiting to be sent again are each acted on as if every pass were in full.

use serde_json::json;

use super::scenarios::{claims, one_pod_running};
use super::*;

/// One GPU pod running on its node, statuses written and shown: a cluster at rest at 12 s.
async fn at_rest() -> (Env, String) {
    one_pod_running(12).await
}

#[tokio::test(start_paused = true)]
async fn passes_at_rest_skip_observing_and_status_syncs_and_see_the_next_change_at_once() {
    let (mut env, name) = at_rest().await;
    let skipped = env.driver.skipped_at_rest();
    env.passes(13, 17).await;
    assert_eq!(
        env.driver.skipped_at_rest() - skipped,
        10,
        "five passes at rest skip five observes and five status syncs"
    );

    // A new pod: the very next pass knows it.
    env.api.insert("", "pods", pending_pod("llm-1", 1));
    env.pass_at(18).await;
    let engine = env.driver.engine().expect("an engine");
    let id = quartermaster_solver::PodRef::new("ml", "llm-1");
    assert!(
        engine.waiting().any(|(p, _)| *p == id) || engine.placement(&id).is_some(),
        "the pass after the pod appeared did not tell the engine"
    );

    // A status changed behind the controller's back is written back by the next pass.
    env.passes(19, 40).await;
    env.api.clear_log();
    env.api.modify(
        QM,
        "nodeclaims",
        &name,
        json!({"status": {"conditions": [], "instanceType": "wrong"}}),
    );
    env.pass_at(41).await;
    assert!(
        env.api
            .log()
            .iter()
            .any(|r| r.resource == "nodeclaims/status" && r.name.as_deref() == Some(name.as_str())),
        "the status was not written back: {:?}",
        env.api.log().iter().map(|r| r.short()).collect::<Vec<_>>()
    );
}

#[tokio::test(start_paused = true)]
async fn a_delete_that_failed_is_sent_again_while_nothing_else_changes() {
    let (mut env, name) = at_rest().await;
    // The workload finishes; the empty node goes after consolidateAfter (30 s). The first two
    // deletes of its NodeClaim fail: the first is sent again by the next pass (it was never
    // recorded as sent), the second after the resend interval, with nothing else changing.
    env.api.modify(
        "",
        "pods",
        "ml/llm-0",
        json!({"status": {"phase": "Succeeded"}}),
    );
    for _ in 0..2 {
        env.api
            .fail_next("DELETE", "nodeclaims", 500, "InternalError");
    }
    let deletes = |env: &Env| {
        env.api
            .log()
            .iter()
            .filter(|r| r.method == "DELETE" && r.resource == "nodeclaims")
            .count()
    };
    // The second at which each delete was sent.
    let mut sent_at: Vec<i64> = Vec::new();
    for second in 13..=100 {
        env.pass_at(second).await;
        while sent_at.len() < deletes(&env) {
            sent_at.push(second);
        }
        if sent_at.len() >= 3 {
            break;
        }
    }
    assert!(sent_at.len() >= 3, "deletes sent at {sent_at:?}");
    assert!(
        sent_at[2] - sent_at[1] <= 11,
        "sent again {} s after the second failed (every 10 s expected): {sent_at:?}",
        sent_at[2] - sent_at[1]
    );
    env.passes(101, 110).await;
    assert!(
        claims(&env.api)
            .iter()
            .all(|c| c["metadata"]["name"] != name.as_str()),
        "the NodeClaim is still there"
    );
}

#[tokio::test(start_paused = true)]
async fn the_nodeclaim_of_a_deleted_node_is_deleted_again_each_pass_until_it_shows() {
    let (mut env, name) = at_rest().await;
    // Someone deletes the Node (its finalizer holds it); deleting its NodeClaim fails twice.
    env.api.modify(
        "",
        "nodes",
        &name,
        json!({"metadata": {"deletionTimestamp": "2027-01-15T08:00:00Z"}}),
    );
    for _ in 0..2 {
        env.api
            .fail_next("DELETE", "nodeclaims", 500, "InternalError");
    }
    env.api.clear_log();
    env.passes(13, 15).await;
    let deletes = env
        .api
        .log()
        .iter()
        .filter(|r| r.method == "DELETE" && r.resource == "nodeclaims")
        .count();
    assert!(
        deletes >= 3,
        "{deletes} deletes of the NodeClaim in three passes (one a pass expected)"
    );
}
