//! End to end at scale, for figures: the README's 10,000-pod mix of bare pods (CPU 45% × 0.5
//! CPU, 27% × 1, 18% × 2; GPU 6% × 1 GPU, 2% × 2, 1.5% × 4, 0.5% × 8) scaled to
//! `QUARTERMASTER_E2E_SCALE` pods, created at once in the test namespace. It waits until every
//! pod is bound (timeout proportional to the count), prints the time to all bound, nodes, cost
//! per hour, the controller's CPU seconds and peak RSS, and the p99 of the batch window and of
//! the time from a launch decision to its NodeClaim on the API server (from `/metrics`), and
//! the p50 and p99 of a pass and the controller's CPU over 30 s at rest; then deletes the pods
//! and waits until the nodes are gone.
//!
//! Runs only when both `QUARTERMASTER_E2E_KUBECONFIG` and `QUARTERMASTER_E2E_SCALE=<pods>` are
//! set (says it was skipped otherwise); `QUARTERMASTER_E2E_BINARY=target/release/quartermaster`
//! for figures worth quoting. The controller's pid is printed (and written to
//! `$TMPDIR/quartermaster-e2e-scale.pid`) so that a profiler can attach to it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use quartermaster_policies::NodePool;
use serde_json::{Value, json};

use super::e2e::{
    Controller, KWOK_2S, NAMESPACE, apply, claims_and_nodes, client, on_cluster, setup, usage,
};

/// The mix per 10,000 pods: (CPU millicores, GPUs, pods).
const MIX: [(u32, u32, usize); 7] = [
    (500, 0, 4500),
    (1000, 0, 2700),
    (2000, 0, 1800),
    (1000, 1, 600),
    (1000, 2, 200),
    (1000, 4, 150),
    (1000, 8, 50),
];
/// The label every pod of this test carries (what an interrupted run left is found by it).
const LABEL: &str = "quartermaster-e2e/scale";
/// Pod creations in flight at once.
const CREATE_CONCURRENCY: usize = 32;
/// How long the controller's passes are watched once every pod is bound.
const AT_REST: Duration = Duration::from_secs(30);

#[test]
fn the_ten_thousand_pod_mix_binds_and_the_controller_stays_light() {
    let Some(pods) = std::env::var("QUARTERMASTER_E2E_SCALE")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
    else {
        println!(
            "skipped: QUARTERMASTER_E2E_SCALE=<pods> is not set (see README.md, End-to-end tests)"
        );
        return;
    };
    on_cluster(|kubeconfig| scale_run(kubeconfig, pods));
}

/// The mix scaled to `total` pods: (CPU millicores, GPUs, pods) with the counts summing to
/// `total` (the remainder of the rounding goes to the first entry).
fn mix(total: usize) -> Vec<(u32, u32, usize)> {
    let mut out: Vec<(u32, u32, usize)> = MIX
        .iter()
        .map(|&(cpu, gpus, n)| (cpu, gpus, n * total / 10_000))
        .collect();
    let sum: usize = out.iter().map(|m| m.2).sum();
    out[0].2 += total - sum;
    out
}

fn pod(name: &str, millicpu: u32, gpus: u32) -> Pod {
    let mut requests = json!({"cpu": format!("{millicpu}m"), "memory": "1Gi"});
    let mut resources = json!({"requests": requests.clone()});
    let mut tolerations = json!([]);
    if gpus > 0 {
        requests["nvidia.com/gpu"] = json!(gpus.to_string());
        resources = json!({"requests": requests, "limits": {"nvidia.com/gpu": gpus.to_string()}});
        tolerations =
            json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    }
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {LABEL: "true"}},
        "spec": {"terminationGracePeriodSeconds": 0, "tolerations": tolerations,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                "resources": resources}]}}))
    .expect("a pod")
}

/// The buckets of a Prometheus histogram in `/metrics` text: (upper bound, cumulative count),
/// `+Inf` last.
fn buckets(metrics: &str, name: &str) -> Vec<(f64, u64)> {
    let prefix = format!("{name}_bucket{{le=\"");
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (le, count) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, count.split_whitespace().next()?.parse().ok()?))
        })
        .collect()
}

/// The `q` quantile of `buckets` (the upper bound of the bucket it falls in; `+Inf` when beyond
/// the last), with the count; `None` when empty.
fn quantile_of(buckets: &[(f64, u64)], q: f64) -> Option<(f64, u64)> {
    let total = buckets.last()?.1;
    if total == 0 {
        return None;
    }
    let rank = (q * total as f64).ceil() as u64;
    buckets
        .iter()
        .find(|(_, c)| *c >= rank)
        .map(|(le, _)| (*le, total))
}

/// The `q` quantile of a Prometheus histogram in `/metrics` text (see [`quantile_of`]).
fn quantile(metrics: &str, name: &str, q: f64) -> Option<(f64, u64)> {
    quantile_of(&buckets(metrics, name), q)
}

/// The `q` quantile of what a histogram recorded between two `/metrics` texts.
fn quantile_between(before: &str, after: &str, name: &str, q: f64) -> Option<(f64, u64)> {
    let before = buckets(before, name);
    let since: Vec<(f64, u64)> = buckets(after, name)
        .into_iter()
        .map(|(le, n)| {
            let was = before.iter().find(|(l, _)| *l == le).map_or(0, |b| b.1);
            (le, n.saturating_sub(was))
        })
        .collect();
    quantile_of(&since, q)
}

/// Pods of this test not yet bound to a node (any node: only the controller's exist).
async fn unbound(pods: &Api<Pod>) -> Result<usize, String> {
    pods.list(
        &ListParams::default()
            .labels(&format!("{LABEL}=true"))
            .fields("spec.nodeName="),
    )
    .await
    .map(|l| l.items.len())
    .map_err(|e| e.to_string())
}

async fn count(pods: &Api<Pod>) -> usize {
    pods.list(&ListParams::default().labels(&format!("{LABEL}=true")))
        .await
        .map(|l| l.items.len())
        .unwrap_or(usize::MAX)
}

/// Deletes this test's pods (at once: no kubelet waits for them) and waits until they, every
/// NodeClaim and every kwok Node are gone; returns how long that took. A collection delete of
/// 10,000 pods can fail part way (`SendRequest` on a busy API server): it is sent again while
/// pods are left.
async fn clean(client: &Client, pods: &Api<Pod>, ctl: &Controller, timeout: Duration) -> Duration {
    let delete = || async {
        if let Err(e) = pods
            .delete_collection(
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..DeleteParams::default()
                },
                &ListParams::default().labels(&format!("{LABEL}=true")),
            )
            .await
        {
            println!("scale: deleting the pods: {e} (sent again)");
        }
    };
    let start = Instant::now();
    delete().await;
    let mut deleted_at = Instant::now();
    loop {
        let left = count(pods).await;
        let (c, n) = claims_and_nodes(client).await;
        if left == 0 && c.is_empty() && n.is_empty() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < timeout,
            "after {timeout:?}: {left} pods, {} NodeClaims, {} Nodes left\ncontroller log:\n{}",
            c.len(),
            n.len(),
            tail(ctl, 40)
        );
        if left > 0 && deleted_at.elapsed() > Duration::from_secs(20) {
            delete().await;
            deleted_at = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

fn tail(ctl: &Controller, lines: usize) -> String {
    let log = ctl.log();
    let mut last: Vec<&str> = log.lines().rev().take(lines).collect();
    last.reverse();
    last.join("\n")
}

async fn scale_run(kubeconfig: PathBuf, total: usize) {
    let client = client(&kubeconfig).await;
    setup(&client).await;
    let pools: Api<NodePool> = Api::all(client.clone());
    // WhenEmpty: bare pods have no controller to bring them back, so consolidation that
    // evicts them (WhenEmptyOrUnderutilized) would lose pods rather than move them.
    let disruption = json!({"consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "30s", "budgets": [{"nodes": "100%"}]});
    apply(&pools, "e2e-gpu", json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
        "metadata": {"name": "e2e-gpu"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "e2e"},
            "requirements": [
                {"key": "quartermaster.dev/instance-family", "operator": "In", "values": ["g5", "g6", "p4d", "p5"]},
                {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}],
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}},
            "disruption": disruption.clone()}})).await;
    apply(&pools, "e2e-cpu", json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
        "metadata": {"name": "e2e-cpu"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "e2e"},
            "requirements": [
                {"key": "quartermaster.dev/instance-gpu-count", "operator": "DoesNotExist"},
                {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}]}},
            "disruption": disruption}})).await;
    let ctl = Controller::start_for(&kubeconfig, "scale", KWOK_2S);
    let pid = ctl.child.id();
    println!(
        "scale: controller pid {pid}, log {}",
        ctl.log_path().display()
    );
    let _ = std::fs::write(
        std::env::temp_dir().join("quartermaster-e2e-scale.pid"),
        pid.to_string(),
    );
    // Proportional to the count: Karpenter's 10,000 took 216 s here; leave room for a busy box.
    let timeout = Duration::from_secs(120) + Duration::from_millis(100) * total as u32;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    clean(&client, &pods, &ctl, timeout).await;
    let (cpu_idle, _) = usage(pid);

    let started = Instant::now();
    let mut tasks: tokio::task::JoinSet<Result<(), kube::Error>> = tokio::task::JoinSet::new();
    let mut index = 0;
    for (millicpu, gpus, n) in mix(total) {
        for _ in 0..n {
            while tasks.len() >= CREATE_CONCURRENCY {
                if let Some(r) = tasks.join_next().await {
                    r.expect("a creation task").expect("a pod is created");
                }
            }
            let name = format!("scale-{index:05}-c{millicpu}-g{gpus}");
            let body = pod(&name, millicpu, gpus);
            let api = pods.clone();
            tasks.spawn(async move { api.create(&PostParams::default(), &body).await.map(drop) });
            index += 1;
        }
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("a creation task").expect("a pod is created");
    }
    let created = started.elapsed();
    println!("scale: {total} pods created in {created:.1?}");

    let mut bound_after = None;
    let mut last = usize::MAX;
    let mut last_report = Instant::now();
    while started.elapsed() < timeout {
        match unbound(&pods).await {
            Ok(0) => {
                let now = count(&pods).await;
                assert!(now >= total, "{} of {total} pods were deleted", total - now);
                if now == total {
                    bound_after = Some(started.elapsed());
                    break;
                }
            }
            Ok(n) => last = n,
            Err(e) => println!("scale: listing pods: {e}"),
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            let (cpu, rss) = usage(pid);
            println!(
                "scale: {:.0?}: {last} unbound; controller {:.1} CPU s, peak RSS {rss:.0} MiB",
                started.elapsed(),
                cpu - cpu_idle
            );
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (cpu, rss) = usage(pid);
    let (claims, nodes) = claims_and_nodes(&client).await;
    let cost: Value = serde_json::from_str(&ctl.get("/cost")).unwrap_or_default();
    let metrics = ctl.get("/metrics");
    let p99 = |name: &str| {
        quantile(&metrics, name, 0.99)
            .map_or("none".to_string(), |(le, n)| format!("<= {le} s (of {n})"))
    };
    println!(
        "scale: {total} pods: all bound after {bound_after:.1?} (created in {created:.1?}); {} NodeClaims, {} Nodes, ${:.2}/h; controller {:.1} CPU s ({:.1} before the pods), peak RSS {rss:.0} MiB; p99 batch window {}, p99 decision to NodeClaim {}",
        claims.len(),
        nodes.len(),
        cost["cost_per_hour"].as_f64().unwrap_or_default(),
        cpu,
        cpu_idle,
        p99("quartermaster_batch_window_seconds"),
        p99("quartermaster_nodeclaim_create_seconds"),
    );
    // At rest: every pod bound, nothing created; only heartbeats and the kwok kubelet move.
    let (cpu_before, _) = usage(pid);
    tokio::time::sleep(AT_REST).await;
    let (cpu_after, _) = usage(pid);
    let rest = ctl.get("/metrics");
    let pass = |q: f64| {
        quantile_between(
            &metrics,
            &rest,
            "quartermaster_reconcile_duration_seconds",
            q,
        )
        .map_or("none".to_string(), |(le, n)| format!("<= {le} s (of {n})"))
    };
    println!(
        "scale: at rest for {AT_REST:?}: passes p50 {}, p99 {}; controller {:.1} CPU s",
        pass(0.5),
        pass(0.99),
        cpu_after - cpu_before
    );
    assert!(
        bound_after.is_some(),
        "not every pod bound within {timeout:?}: {last} unbound\ncontroller log:\n{}",
        tail(&ctl, 60)
    );
    let cleaned_in = clean(&client, &pods, &ctl, timeout).await;
    let (cpu_end, _) = usage(pid);
    println!("scale: cleaned up in {cleaned_in:.1?}; controller {cpu_end:.1} CPU s in all");
    ctl.kill_and_clean();
}

#[test]
fn the_mix_scales_to_the_count_asked_for() {
    for total in [1, 200, 2000, 10_000, 12_345] {
        let m = mix(total);
        assert_eq!(m.iter().map(|x| x.2).sum::<usize>(), total);
    }
    let m = mix(2000);
    assert_eq!(m[0].2, 900);
    assert_eq!(m[6].2, 10);
    let metrics = "x_bucket{le=\"0.5\"} 90\nx_bucket{le=\"1.0\"} 99\nx_bucket{le=\"2.0\"} 100\nx_bucket{le=\"+Inf\"} 100\n";
    assert_eq!(quantile(metrics, "x", 0.99), Some((1.0, 100)));
    assert_eq!(quantile(metrics, "x", 0.5), Some((0.5, 100)));
    assert_eq!(quantile(metrics, "y", 0.99), None);
}
