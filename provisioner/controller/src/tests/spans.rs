//! One NodeClaim followed through the JSON log from decision to deletion: the launch's lines
//! (the decision in the pass, and the launch task's own) carry a `launch` span naming the claim
//! and the pods it is for; the termination's lines a `terminate` span naming the claim, with a
//! `drain` span naming the node and the pods it drains.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt as _;

use super::{Env, QM, cluster_with_gpu_pool};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    /// Every JSON line written so far.
    fn lines(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }
}

/// The lines whose message is `message`.
fn lines_saying<'a>(lines: &'a [Value], message: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["message"] == message).collect()
}

/// The span named `name` in a line's span list.
fn span<'a>(line: &'a Value, name: &str) -> Option<&'a Value> {
    line["spans"].as_array()?.iter().find(|s| s["name"] == name)
}

#[tokio::test(start_paused = true)]
async fn a_nodeclaims_lines_carry_its_name_from_the_launch_decision_to_its_termination() {
    let log = Buffer::default();
    let sink = log.clone();
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .flatten_event(true)
                .with_writer(move || sink.clone()),
        )
        .with(tracing_subscriber::filter::LevelFilter::DEBUG);
    let _guard = tracing::subscriber::set_default(subscriber);

    let mut env = Env::new(cluster_with_gpu_pool(&[("llm-0", 1)]));
    env.passes(0, 3).await;
    let claims = env.api.list(QM, "nodeclaims");
    assert_eq!(claims.len(), 1, "one pod, one claim");
    let claim = claims[0]["metadata"]["name"]
        .as_str()
        .expect("a named claim")
        .to_owned();

    // The decision, in the pass that made it.
    let lines = log.lines();
    let decided = lines_saying(&lines, "launch decided");
    assert_eq!(decided.len(), 1, "one launch decided: {decided:#?}");
    let launch = span(decided[0], "launch").expect("the decision is in the launch's span");
    assert_eq!(launch["nodeclaim"], claim.as_str(), "{launch}");
    assert_eq!(launch["pods"], "ml/llm-0", "{launch}");
    assert_eq!(launch["nodepool"], "gpu", "{launch}");
    assert!(
        span(decided[0], "pass").is_some(),
        "decided in a pass: {}",
        decided[0]
    );
    // The launch task, spawned: its lines carry the same span.
    let finished = lines_saying(&lines, "launch finished");
    assert_eq!(finished.len(), 1, "{finished:#?}");
    assert_eq!(finished[0]["span"]["name"], "launch", "{}", finished[0]);
    assert_eq!(finished[0]["span"]["nodeclaim"], claim.as_str());
    assert_eq!(finished[0]["span"]["pods"], "ml/llm-0");
    // The solve that decided it names the claim and the pod it binds there.
    let solved = lines_saying(&lines, "solved");
    assert!(
        solved.iter().any(|l| {
            span(l, "solve").is_some_and(|s| {
                s["nodeclaims"].as_str().is_some_and(|c| c.contains(&claim))
                    && s["pods"].as_str().is_some_and(|p| p.contains("ml/llm-0"))
            })
        }),
        "a solve line names the claim and the pod: {solved:#?}"
    );

    // The pod runs on the node; a user deletes the NodeClaim.
    env.api.modify(
        "",
        "pods",
        "ml/llm-0",
        json!({"spec": {"nodeName": claim}, "status": {"phase": "Running", "conditions": []}}),
    );
    env.passes(4, 5).await;
    env.api.modify(
        QM,
        "nodeclaims",
        &claim,
        json!({"metadata": {"deletionTimestamp": "2027-01-15T09:00:00Z"}}),
    );
    env.passes(6, 7).await;
    let lines = log.lines();
    let terminating: Vec<&Value> = lines
        .iter()
        .filter(|l| span(l, "terminate").is_some_and(|s| s["nodeclaim"] == claim.as_str()))
        .collect();
    assert!(
        !terminating.is_empty(),
        "termination lines carry the claim's name"
    );
    assert!(
        terminating.iter().any(|l| span(l, "drain")
            .is_some_and(|d| { d["node"] == claim.as_str() && d["pods"] == "ml/llm-0" })),
        "the drain names the node and the pod it evicts: {terminating:#?}"
    );
}
