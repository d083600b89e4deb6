//! `KwokKubelet` against a mocked API server, its time moved by a `ManualClock`.

use std::pin::pin;
use std::sync::Arc;

use http::{Request, Response};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::client::Body;
use serde_json::{Value, json};

use super::fixtures::{
    at, clock, cpu_request, dyn_clock, gpu_request, kwok_node, node, pod, pod_obj, t0, with_status,
};
use super::mock::{Exchange, expect, finish, read, response, serve, status};
use crate::KwokKubelet;

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

/// The first pass over a node: its Lease is looked up, missing, and created.
fn first_lease(node_name: &str, uid: &str, renew: &'static str) -> [Exchange; 2] {
    let (name, uid) = (node_name.to_owned(), uid.to_owned());
    [
        expect("GET", format!("{LEASES}/{node_name}")).not_found(),
        expect("POST", LEASES)
            .body(move |b| {
                assert_eq!(b["metadata"]["name"], name.as_str());
                assert_eq!(b["spec"]["holderIdentity"], name.as_str());
                assert_eq!(b["spec"]["leaseDurationSeconds"], 40);
                assert_eq!(b["spec"]["renewTime"], renew);
                assert_eq!(
                    b["metadata"]["ownerReferences"],
                    json!([{ "apiVersion": "v1", "kind": "Node", "name": name, "uid": uid }])
                );
            })
            .echo(),
    ]
}

/// A renewal of a Lease kept from the last pass.
fn renewal(node_name: &str, renew: &'static str) -> Exchange {
    expect("PUT", format!("{LEASES}/{node_name}"))
        .body(move |b| {
            assert_eq!(b["spec"]["renewTime"], renew);
            assert_eq!(b["metadata"]["resourceVersion"], "1", "the kept copy");
        })
        .echo()
}

fn cpu_node() -> Arc<Node> {
    node(with_status(kwok_node(&cpu_request(), t0()), t0()))
}

fn conditions(status: &Value) -> Vec<(String, String)> {
    status["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_bound_pending_pod_is_reported_running_once() {
    let [get, post] = first_lease("cpu-xyz89", "uid-cpu-xyz89", "2026-01-01T00:00:01.000000Z");
    let (client, server) = serve(vec![
        get,
        post,
        expect("PATCH", "/api/v1/namespaces/team-a/pods/web-1/status")
            .body(|b| {
                let s = &b["status"];
                assert_eq!(s["phase"], "Running");
                assert_eq!(s["startTime"], "2026-01-01T00:00:01Z");
                let ip = s["podIP"].as_str().unwrap();
                assert!(
                    ip.starts_with("198.18.") || ip.starts_with("198.19."),
                    "{ip}"
                );
                assert_eq!(s["podIPs"], json!([{ "ip": ip }]));
                assert_eq!(
                    conditions(s),
                    [
                        ("PodReadyToStartContainers", "True"),
                        ("Initialized", "True"),
                        ("ContainersReady", "True"),
                        ("Ready", "True")
                    ]
                    .map(|(a, b)| (a.to_owned(), b.to_owned()))
                );
                let c = &s["containerStatuses"][0];
                assert_eq!(c["name"], "main");
                assert_eq!(c["image"], "busybox:1.36");
                assert_eq!(c["ready"], true);
                assert_eq!(c["restartCount"], 0);
                assert_eq!(c["state"]["running"]["startedAt"], "2026-01-01T00:00:01Z");
            })
            .echo(),
    ]);
    let clock = clock();
    clock.set(at(1));
    let mut kubelet = KwokKubelet::new(client, dyn_clock(&clock));
    let nodes = [
        cpu_node(),
        node(json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": "real-node" } })),
    ];
    let pods = [
        pod_obj(pod("web-1", "cpu-xyz89")),
        pod_obj(pod("elsewhere", "real-node")),
        pod_obj(pod("unbound", "")),
    ];
    kubelet.sync(&nodes, &pods).await;
    // The watch has not shown the change yet: nothing is sent twice.
    kubelet.sync(&nodes, &pods).await;
    drop(kubelet);
    finish(server).await;
}

#[tokio::test]
async fn a_deleted_pod_on_a_kwok_node_has_its_deletion_completed() {
    let [get, post] = first_lease("cpu-xyz89", "uid-cpu-xyz89", "2026-01-01T00:00:01.000000Z");
    let (client, server) = serve(vec![
        get,
        post,
        expect("DELETE", "/api/v1/namespaces/team-a/pods/web-2")
            .body(|b| {
                assert_eq!(b["gracePeriodSeconds"], 0);
                assert_eq!(b["preconditions"]["uid"], "uid-web-2");
            })
            .respond(200, status(200, "Success")),
    ]);
    let clock = clock();
    clock.set(at(1));
    let mut kubelet = KwokKubelet::new(client, dyn_clock(&clock));
    let mut p = pod("web-2", "cpu-xyz89");
    p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:01Z");
    p["status"]["phase"] = json!("Running");
    kubelet.sync(&[cpu_node()], &[pod_obj(p)]).await;
    drop(kubelet);
    finish(server).await;
}

#[tokio::test]
async fn a_run_for_pod_succeeds_when_its_time_is_up() {
    let [get, post] = first_lease("cpu-xyz89", "uid-cpu-xyz89", "2026-01-01T00:00:10.000000Z");
    let (client, server) = serve(vec![
        get,
        post,
        renewal("cpu-xyz89", "2026-01-01T00:00:20.000000Z"),
        expect("PATCH", "/api/v1/namespaces/team-a/pods/train-0/status")
            .body(|b| {
                let s = &b["status"];
                assert_eq!(s["phase"], "Succeeded");
                assert_eq!(
                    conditions(s),
                    [
                        ("PodReadyToStartContainers", "False"),
                        ("ContainersReady", "False"),
                        ("Ready", "False")
                    ]
                    .map(|(a, b)| (a.to_owned(), b.to_owned()))
                );
                let t = &s["containerStatuses"][0]["state"]["terminated"];
                assert_eq!(t["exitCode"], 0);
                assert_eq!(t["reason"], "Completed");
                assert_eq!(t["startedAt"], "2026-01-01T00:00:00Z");
                assert_eq!(t["finishedAt"], "2026-01-01T00:00:20Z");
            })
            .echo(),
    ]);
    let clock = clock();
    let mut kubelet = KwokKubelet::new(client, dyn_clock(&clock));
    let mut p = pod("train-0", "cpu-xyz89");
    p["metadata"]["annotations"] = json!({ "kwok.quartermaster.dev/run-for": "20s" });
    p["status"] = json!({ "phase": "Running", "startTime": "2026-01-01T00:00:00Z" });
    let mut bad = pod("train-1", "cpu-xyz89");
    bad["metadata"]["annotations"] = json!({ "kwok.quartermaster.dev/run-for": "soon" });
    bad["status"] = json!({ "phase": "Running", "startTime": "2026-01-01T00:00:00Z" });
    let pods = [pod_obj(p), pod_obj(bad)];
    clock.set(at(10));
    kubelet.sync(&[cpu_node()], &pods).await; // not yet
    clock.set(at(20));
    kubelet.sync(&[cpu_node()], &pods).await; // done; the bad annotation is only logged
    drop(kubelet);
    finish(server).await;
}

#[tokio::test]
async fn gpus_appear_after_the_device_plugin_delay_and_leases_and_heartbeats_stay_fresh() {
    let [get, post] = first_lease("gpu-abc12", "uid-gpu-abc12", "2026-01-01T00:00:01.000000Z");
    let (client, server) = serve(vec![
        get,
        post,
        expect("PATCH", "/api/v1/nodes/gpu-abc12/status")
            .body(|b| {
                let s = &b["status"];
                assert_eq!(s["capacity"]["nvidia.com/gpu"], "1");
                assert_eq!(s["allocatable"]["nvidia.com/gpu"], "1");
                assert_eq!(s["capacity"]["cpu"], "4");
                let ready = &s["conditions"][0];
                assert_eq!(
                    (&ready["type"], &ready["status"]),
                    (&json!("Ready"), &json!("True"))
                );
                assert_eq!(ready["lastHeartbeatTime"], "2026-01-01T00:00:05Z");
                assert_eq!(ready["lastTransitionTime"], "2026-01-01T00:00:00Z", "kept");
            })
            .echo(),
        renewal("gpu-abc12", "2026-01-01T00:00:11.000000Z"),
        renewal("gpu-abc12", "2026-01-01T00:00:35.000000Z"),
        expect("PATCH", "/api/v1/nodes/gpu-abc12/status")
            .body(|b| {
                let ready = &b["status"]["conditions"][0];
                assert_eq!(ready["lastHeartbeatTime"], "2026-01-01T00:00:35Z");
            })
            .echo(),
    ]);
    let clock = clock();
    let mut kubelet = KwokKubelet::new(client, dyn_clock(&clock));
    // As created at t0: Ready, without the GPU; the device plugin reports at t0 + 5 s.
    let nodes = [node(with_status(kwok_node(&gpu_request(), t0()), t0()))];
    for (secs, _what) in [
        (1, "lease created; status current"),
        (5, "the GPU appears"),
        (
            6,
            "sent a moment ago: not again, though the watch still shows no GPU",
        ),
        (11, "lease renewed"),
        (35, "lease renewed and heartbeat"),
    ] {
        clock.set(at(secs));
        kubelet.sync(&nodes, &[]).await;
    }
    drop(kubelet);
    finish(server).await;
}

#[tokio::test]
async fn api_errors_are_retried_on_a_later_pass() {
    let [get, post] = first_lease("cpu-xyz89", "uid-cpu-xyz89", "2026-01-01T00:00:01.000000Z");
    let (client, server) = serve(vec![
        expect("GET", format!("{LEASES}/cpu-xyz89")).respond(500, status(500, "InternalError")),
        expect("PATCH", "/api/v1/namespaces/team-a/pods/web-1/status")
            .respond(429, status(429, "TooManyRequests")),
        // One second later: the lease is retried at once, the pod after a pause.
        get,
        post,
        renewal("cpu-xyz89", "2026-01-01T00:00:11.000000Z"),
        expect("PATCH", "/api/v1/namespaces/team-a/pods/web-1/status").echo(),
    ]);
    let clock = clock();
    let mut kubelet = KwokKubelet::new(client, dyn_clock(&clock));
    let pods = [pod_obj(pod("web-1", "cpu-xyz89"))];
    for secs in [0, 1, 11] {
        clock.set(at(secs));
        kubelet.sync(&[cpu_node()], &pods).await;
    }
    drop(kubelet);
    finish(server).await;
}

#[tokio::test]
async fn the_run_loop_watches_nodes_and_pods_and_stops_on_shutdown() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let (pod_started, started) = tokio::sync::oneshot::channel::<Value>();
    let server = tokio::spawn(async move {
        let mut handle = pin!(handle);
        let mut pod_started = Some(pod_started);
        let mut open_watches = Vec::new();
        let list = |kind: &str, items: Vec<Value>| json!({ "apiVersion": "v1", "kind": kind, "metadata": { "resourceVersion": "10" }, "items": items });
        while let Some((request, send)) = handle.next_request().await {
            let seen = read(request).await;
            let reply = match (seen.method.as_str(), seen.path.as_str()) {
                (_, "/api/v1/nodes" | "/api/v1/pods") if seen.query.contains("watch=true") => {
                    open_watches.push(send); // never answered: no changes
                    continue;
                }
                ("GET", "/api/v1/nodes") => {
                    assert!(
                        seen.query
                            .contains("labelSelector=quartermaster.dev%2Fkwok%3Dtrue")
                    );
                    list(
                        "NodeList",
                        vec![with_status(kwok_node(&cpu_request(), t0()), t0())],
                    )
                }
                ("GET", "/api/v1/pods") => {
                    assert!(seen.query.contains("fieldSelector=spec.nodeName%21%3D"));
                    list("PodList", vec![pod("web-1", "cpu-xyz89")])
                }
                ("GET", _) => {
                    send.send_response(response(404, &status(404, "NotFound")));
                    continue;
                }
                ("PATCH", "/api/v1/namespaces/team-a/pods/web-1/status") => {
                    if let Some(tx) = pod_started.take() {
                        let _ = tx.send(seen.body.clone());
                    }
                    seen.body
                }
                _ => seen.body,
            };
            send.send_response(response(200, &reply));
        }
    });
    let client = kube::Client::new(service, "default");
    let clock = clock();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let kubelet = tokio::spawn(KwokKubelet::new(client, dyn_clock(&clock)).run(async {
        let _ = stopped.await;
    }));
    let body = tokio::time::timeout(std::time::Duration::from_secs(60), started)
        .await
        .expect("the pod was started")
        .expect("reported");
    assert_eq!(body["status"]["phase"], "Running");
    stop.send(()).expect("the loop is running");
    tokio::time::timeout(std::time::Duration::from_secs(60), kubelet)
        .await
        .expect("the loop stopped")
        .expect("no panic");
    finish(server).await;
}

#[test]
fn pod_steps_follow_the_pods_state() {
    use crate::kubelet::pods::{PodStep, next_step};
    let step = |v: Value, secs| next_step(&serde_json::from_value::<Pod>(v).unwrap(), at(secs));
    assert_eq!(step(pod("a", "n"), 0), Ok(Some(PodStep::Start)));
    let mut running = pod("a", "n");
    running["status"] = json!({ "phase": "Running", "startTime": "2026-01-01T00:00:00Z" });
    assert_eq!(step(running.clone(), 600), Ok(None), "no run-for: runs on");
    running["metadata"]["annotations"] = json!({ "kwok.quartermaster.dev/run-for": "1m30s" });
    assert_eq!(step(running.clone(), 89), Ok(None));
    assert_eq!(step(running.clone(), 90), Ok(Some(PodStep::Finish(t0()))));
    running["metadata"]["annotations"] = json!({ "kwok.quartermaster.dev/run-for": "-5s" });
    assert!(step(running.clone(), 90).unwrap_err().contains("run-for"));
    let mut done = pod("a", "n");
    done["status"]["phase"] = json!("Succeeded");
    assert_eq!(step(done.clone(), 0), Ok(None));
    done["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert_eq!(step(done, 0), Ok(Some(PodStep::Delete)));
}

#[test]
fn sidecars_keep_running_and_init_containers_complete() {
    let mut p = pod("a", "n");
    p["spec"]["initContainers"] = json!([
        { "name": "setup", "image": "busybox" },
        { "name": "proxy", "image": "envoy", "restartPolicy": "Always" },
    ]);
    p["spec"]["hostNetwork"] = json!(true);
    let p: Pod = serde_json::from_value(p).unwrap();
    let s = serde_json::to_value(crate::kubelet::pods::running_status(&p, t0())).unwrap();
    assert!(s["initContainerStatuses"][0]["state"]["terminated"].is_object());
    assert!(s["initContainerStatuses"][1]["state"]["running"].is_object());
    assert!(
        s.get("podIP").is_none(),
        "host-network pods have the node's IP, which is made up"
    );
}

#[test]
fn fake_pod_ips_are_stable_and_in_the_benchmarking_range() {
    let ip = |name: &str| {
        crate::kubelet::pods::fake_pod_ip(&serde_json::from_value(pod(name, "n")).unwrap())
    };
    assert_eq!(ip("a"), ip("a"));
    assert_ne!(ip("a"), ip("b"));
    for name in ["a", "b", "c", "web-1", "train-0"] {
        let addr: std::net::Ipv4Addr = ip(name).parse().unwrap();
        let [a, b, _, _] = addr.octets();
        assert!(a == 198 && (b == 18 || b == 19), "{addr}");
    }
}

#[tokio::test]
async fn a_burst_of_pod_starts_is_spread_over_passes_after_the_leases() {
    // 300 pods bound at once: the first pass renews the Lease first and starts 256 of them,
    // the second the other 44; a long burst never holds a node's heartbeat back.
    let names: Vec<String> = (0..300).map(|i| format!("p{i:03}")).collect();
    let [get, post] = first_lease("cpu-xyz89", "uid-cpu-xyz89", "2026-01-01T00:00:01.000000Z");
    let mut script = vec![get, post];
    for name in &names {
        script.push(
            expect(
                "PATCH",
                format!("/api/v1/namespaces/team-a/pods/{name}/status"),
            )
            .body(|b| assert_eq!(b["status"]["phase"], "Running"))
            .echo(),
        );
    }
    let (client, server) = serve(script);
    let clock = clock();
    clock.set(at(1));
    let mut kubelet = KwokKubelet::new(client, dyn_clock(&clock));
    let nodes = [cpu_node()];
    let pods: Vec<_> = names.iter().map(|n| pod_obj(pod(n, "cpu-xyz89"))).collect();
    kubelet.sync(&nodes, &pods).await;
    assert_eq!(kubelet.pods_seen(), 256, "one pass's worth");
    kubelet.sync(&nodes, &pods).await;
    assert_eq!(kubelet.pods_seen(), 300);
    drop(kubelet);
    finish(server).await;
}

#[test]
fn large_fleets_renew_their_leases_less_often_but_within_half_the_lease() {
    use crate::{LEASE_RENEW_INTERVAL, MAX_LEASE_RENEW_INTERVAL, lease_renew_interval};
    assert_eq!(lease_renew_interval(0), LEASE_RENEW_INTERVAL);
    assert_eq!(lease_renew_interval(800), LEASE_RENEW_INTERVAL);
    // 1,500 nodes: 15 s, 100 renewals a second.
    assert_eq!(lease_renew_interval(1_500).as_secs(), 15);
    assert_eq!(lease_renew_interval(10_000), MAX_LEASE_RENEW_INTERVAL);
    assert_eq!(MAX_LEASE_RENEW_INTERVAL.as_secs() * 2, 40, "half the Lease");
}
