//! The page: escaping, bounded history and decisions, what a pass records, the routes.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use http_body_util::BodyExt;
use quartermaster_cloud::LaunchRequest;
use quartermaster_engine::{CommandKind, DeleteReason, DisruptionCommand};
use quartermaster_pricing::CapacityType;
use serde_json::Value;
use tower::ServiceExt;

use super::html::{chart, dollars};
use super::*;
use crate::tests::{Env, cluster_with_gpu_pool, pending_pod, t0};

fn at(seconds: i64) -> DateTime<Utc> {
    t0() + TimeDelta::seconds(seconds)
}

fn empty_status() -> Status {
    Status {
        at: at(0),
        cluster: "test".into(),
        leader: true,
        last_pass: None,
        fleet: Fleet {
            cost_per_hour: 0.0,
            cost_since_start: 0.0,
            idle_cost_per_hour: 0.0,
            nodes: 0,
            launching: 0,
            deleting: 0,
            groups: Vec::new(),
        },
        pending: Pending {
            pods: 0,
            waiting: 0,
            shown: Vec::new(),
        },
        decisions: Vec::new(),
        cost_history: Vec::new(),
    }
}

fn request(claim: &str) -> LaunchRequest {
    LaunchRequest {
        claim_name: claim.into(),
        node_pool: "gpu".into(),
        node_class: "default".into(),
        instance_type: "g5.xlarge".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::OnDemand,
        price_per_hour: 1.006,
        labels: BTreeMap::new(),
        tags: BTreeMap::new(),
        fallbacks: Vec::new(),
        node_class_spec: None,
    }
}

#[test]
fn page_escape_replaces_every_html_special_character() {
    assert_eq!(
        escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
        "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
    );
    assert_eq!(escape("plain text: 4 × A10G"), "plain text: 4 × A10G");
}

#[test]
fn page_escapes_pod_names_reasons_pools_and_the_cluster_name() {
    let mut s = empty_status();
    s.cluster = "<b>prod</b>".into();
    s.pending = Pending {
        pods: 1,
        waiting: 1,
        shown: vec![PendingPod {
            pod: "ml/<script>alert(1)</script>".into(),
            reason: Some("needs \"64\" GPUs & <more>".into()),
        }],
    };
    s.fleet.groups.push(FleetGroup {
        nodepool: "<img src=x onerror=alert(2)>".into(),
        instance_type: "g5.xlarge".into(),
        capacity_type: "on-demand".into(),
        accelerator: "A10G".into(),
        accelerator_count: 1,
        nodes: 1,
        cost_per_hour: 1.006,
    });
    s.fleet.nodes = 1;
    s.fleet.cost_per_hour = 1.006;
    s.decisions.push(RecordedDecision {
        at: at(0),
        decision: Decision::delete("<claim>", DeleteReason::Empty, None),
    });
    let html = render(&s);
    for hostile in ["<script>", "<img", "<b>prod", "<more>", "<claim>"] {
        assert!(!html.contains(hostile), "{hostile} unescaped in:\n{html}");
    }
    for escaped in [
        "ml/&lt;script&gt;alert(1)&lt;/script&gt;",
        "needs &quot;64&quot; GPUs &amp; &lt;more&gt;",
        "&lt;img src=x onerror=alert(2)&gt;",
        "&lt;b&gt;prod&lt;/b&gt;",
        "&lt;claim&gt;",
    ] {
        assert!(html.contains(escaped), "{escaped} missing from:\n{html}");
    }
    // No script and no external asset: the page carries everything it needs.
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("src=\"http"), "{html}");
    assert!(!html.contains("<link"), "{html}");
    assert!(html.contains("<meta http-equiv=\"refresh\" content=\"15\">"));
}

#[test]
fn page_cost_history_keeps_one_sample_a_minute_for_a_day() {
    let page = PageState::default();
    assert!(page.record_cost(at(0), 1.0));
    assert!(!page.record_cost(at(30), 2.0), "30 s later: too soon");
    assert!(page.record_cost(at(60), 3.0));
    assert_eq!(
        page.cost_history()
            .iter()
            .map(|s| s.cost_per_hour)
            .collect::<Vec<_>>(),
        vec![1.0, 3.0]
    );
    // Three days of passes every 20 seconds: a day of samples stays, the newest ones.
    for i in 0..(3 * 24 * 60 * 3) {
        page.record_cost(at(120 + i * 20), i as f64);
    }
    let history = page.cost_history();
    assert_eq!(history.len(), HISTORY_KEPT);
    assert!(
        history
            .windows(2)
            .all(|w| w[1].at - w[0].at == SAMPLE_EVERY),
        "one a minute"
    );
    assert_eq!(
        history.last().unwrap().at,
        at(120 + (3 * 24 * 60 * 3 - 3) * 20)
    );
}

#[test]
fn page_decisions_keep_the_last_hundred_newest_first() {
    let page = PageState::default();
    for i in 0..250 {
        page.record_decision(at(i), Decision::launch(&request(&format!("gpu-{i}"))));
    }
    let decisions = page.decisions();
    assert_eq!(decisions.len(), DECISIONS_KEPT);
    assert_eq!(decisions[0].decision.nodeclaims, vec!["gpu-249"]);
    assert_eq!(decisions[99].decision.nodeclaims, vec!["gpu-150"]);
}

#[test]
fn page_pending_list_is_capped_and_counts_every_pod() {
    let page = PageState::default();
    let shown: Vec<PendingPod> = (0..500)
        .map(|i| PendingPod {
            pod: format!("ml/p-{i}"),
            reason: None,
        })
        .collect();
    page.record_pending(at(0), 10_000, shown);
    let r = page.snapshot();
    assert_eq!(r.shown.len(), PENDING_SHOWN);
    assert_eq!(r.waiting, 10_000);
    let mut s = empty_status();
    s.pending = Pending {
        pods: 10_000,
        waiting: r.waiting,
        shown: r.shown,
    };
    let html = render(&s);
    assert!(
        html.contains("The first 200 of 10000 pods the engine waits to place"),
        "{html}"
    );
    assert!(html.contains("not solved yet (in the batch window)"));
}

#[test]
fn page_decisions_say_what_why_and_what_they_save() {
    let launch = Decision::launch(&request("gpu-t1"));
    assert_eq!(launch.kind, DecisionKind::Launch);
    assert_eq!(launch.summary, "g5.xlarge on-demand in us-east-1a");
    assert_eq!(launch.price_per_hour, Some(1.006));
    let disrupt = Decision::disrupt(&DisruptionCommand {
        kind: CommandKind::MultiDelete,
        reason: DeleteReason::Underutilized,
        claims: vec!["a".into(), "b".into()],
        nodes: vec!["a".into(), "b".into()],
        replacements: vec![],
        pods: 3,
        saving_per_hour: 2.5,
    });
    assert_eq!(disrupt.reason.as_deref(), Some("underutilized"));
    assert_eq!(disrupt.saving_per_hour, Some(2.5));
    assert!(
        disrupt
            .summary
            .contains("2 node(s) -> 0 replacement(s), 3 pod(s) moved"),
        "{}",
        disrupt.summary
    );
    let json = serde_json::to_value(RecordedDecision {
        at: at(0),
        decision: disrupt.clone(),
    })
    .unwrap();
    assert_eq!(json["kind"], "disrupt");
    assert_eq!(json["saving_per_hour"], 2.5);
    assert_eq!(json["nodeclaims"], serde_json::json!(["a", "b"]));
    assert!(json["at"].is_string());

    let mut s = empty_status();
    s.decisions = vec![
        RecordedDecision {
            at: at(1),
            decision: disrupt,
        },
        RecordedDecision {
            at: at(0),
            decision: launch,
        },
    ];
    let html = render(&s);
    assert!(html.contains("kind-disrupt"), "{html}");
    assert!(
        html.contains("<span class=\"saving\">$2.50</span>"),
        "{html}"
    );
    assert!(html.contains("$1.01"), "{html}");
    assert!(html.contains("underutilized"), "{html}");
}

#[test]
fn page_chart_draws_the_history_as_steps_until_now() {
    assert!(chart(&[], at(0)).contains("No sample yet"));
    let samples: Vec<CostSample> = [(0, 2.0), (600, 8.0), (1200, 5.0)]
        .into_iter()
        .map(|(t, c)| CostSample {
            at: at(t),
            cost_per_hour: c,
        })
        .collect();
    let svg = chart(&samples, at(1800));
    assert!(svg.starts_with("<svg class=\"chart\""), "{svg}");
    assert!(svg.contains("<path class=\"line\" d=\"M"), "{svg}");
    // Three samples: two steps (H then V each), then held until now.
    let line = svg
        .split("<path class=\"line\" d=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    assert_eq!(line.matches(" V").count(), 2, "{line}");
    assert_eq!(line.matches(" H").count(), 3, "{line}");
    // The axis tops at a round number above the highest cost, labelled in dollars.
    assert!(svg.contains(">$10</text>"), "{svg}");
    assert!(svg.contains(">$0</text>"), "{svg}");
    assert!(svg.contains("highest $8.00"), "{svg}");
    assert_eq!(dollars(0.0963), "$0.096");
    assert_eq!(dollars(734.27), "$734.27");
}

/// A cluster with one 1-GPU pod (a node is bought) and one 64-GPU pod (no type has that many).
async fn env_with_fleet_and_a_pod_that_fits_nowhere() -> Env {
    let api = cluster_with_gpu_pool(&[("small", 1)]);
    api.insert("", "pods", pending_pod("huge", 64));
    let mut env = Env::new(api);
    env.passes(0, 3).await;
    env
}

#[tokio::test(start_paused = true)]
async fn page_record_pass_shows_the_engines_reason_the_fleet_and_the_cost() {
    let env = env_with_fleet_and_a_pod_that_fits_nowhere().await;
    record_pass(&env.driver, at(3));
    let s = status(&env.ctx, at(3));
    assert_eq!(s.pending.waiting, 1, "{:#?}", s.pending);
    let huge = &s.pending.shown[0];
    assert_eq!(huge.pod, "ml/huge");
    let reason = huge.reason.as_deref().expect("the solver's reason");
    assert!(reason.contains("requests 64 nvidia.com/gpu"), "{reason}");
    // The fleet: the node bought for ml/small, with /cost's figures.
    assert_eq!(s.fleet.nodes, 1, "{:#?}", s.fleet);
    let g = &s.fleet.groups[0];
    assert_eq!(
        (
            g.nodepool.as_str(),
            g.instance_type.as_str(),
            g.capacity_type.as_str()
        ),
        ("gpu", "g5.xlarge", "on-demand")
    );
    assert_eq!(g.accelerator_count, 1);
    let (nodes, pods) = usage(
        &env.ctx.stores.node_claims.state(),
        &env.ctx.stores.pods.state(),
        &env.ctx.catalog,
    );
    let cost = fleet_cost(&nodes, &pods, at(3));
    assert!(cost.cost_per_hour > 0.0);
    assert_eq!(s.fleet.cost_per_hour, cost.cost_per_hour);
    assert_eq!(g.cost_per_hour, cost.cost_per_hour);
    // The driver's own passes sampled the cost (at most one sample a minute): a pass 30 s
    // later adds none, one a minute after the first sample adds one, with the fleet's figure.
    let sampled = s.cost_history.len();
    assert!(sampled >= 1, "{:?}", s.cost_history);
    record_pass(&env.driver, at(30));
    assert_eq!(env.ctx.page.cost_history().len(), sampled);
    record_pass(&env.driver, at(63));
    let history = env.ctx.page.cost_history();
    assert_eq!(history.len(), sampled + 1);
    assert_eq!(history.last().unwrap().cost_per_hour, cost.cost_per_hour);

    let html = render(&s);
    assert!(html.contains("ml/huge"), "{html}");
    assert!(html.contains(&escape(reason)), "{html}");
    assert!(html.contains(&dollars(cost.cost_per_hour)), "{html}");
}

#[tokio::test(start_paused = true)]
async fn page_routes_serve_the_page_and_its_json_on_the_metrics_router() {
    let env = env_with_fleet_and_a_pod_that_fits_nowhere().await;
    record_pass(&env.driver, at(3));
    record_decision(&env.ctx, at(3), Decision::launch(&request("gpu-t9")));
    let router = crate::http::metrics_router(env.ctx.clone());

    let get = |path: &'static str| {
        let router = router.clone();
        async move {
            let response = router
                .oneshot(
                    axum::http::Request::get(path)
                        .body(axum::body::Body::empty())
                        .unwrap(),
                )
                .await
                .unwrap();
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, headers, String::from_utf8(body.to_vec()).unwrap())
        }
    };
    let (code, headers, html) = get("/").await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert!(
        headers["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("default-src 'none'"),
    );
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(
        html.contains("ml/huge") && html.contains("gpu-t9"),
        "{html}"
    );

    let (code, _, json) = get("/status.json").await;
    assert_eq!(code, 200);
    let json: Value = serde_json::from_str(&json).unwrap();
    let (_, _, cost) = get("/cost").await;
    let cost: Value = serde_json::from_str(&cost).unwrap();
    assert_eq!(json["fleet"]["cost_per_hour"], cost["cost_per_hour"]);
    assert_eq!(json["fleet"]["cost_since_start"], cost["cost_since_start"]);
    assert_eq!(json["pending"]["shown"][0]["pod"], "ml/huge");
    assert_eq!(json["decisions"][0]["kind"], "launch");
    assert_eq!(json["decisions"][0]["nodeclaims"][0], "gpu-t9");
    assert_eq!(json["cluster"], "test");
    assert_eq!(json["leader"], true);
    assert_eq!(json["cost_history"].as_array().unwrap().len(), 1);
    let back: Status = serde_json::from_value(json).expect("the JSON reads back as a Status");
    assert_eq!(back.pending.shown.len(), 1);
}
