//! The controller's page (`/` on the metrics port) in a real headless browser, Debian's
//! Chromium (installed by the test when missing, see `tools::chromium`).
//!
//! A controller context over stores filled by hand (NodeClaims launched hours ago, a running
//! pod, a pod that asks for 64 GPUs), a real `Driver` pass so the engine gives its reason for
//! the pod it cannot place, a cost history and two decisions; the metrics router served on
//! 127.0.0.1. Chromium loads the page: its DOM shows the fleet's cost per hour exactly as `/cost`
//! serves it, the nodes `/cost` lists, the pending pod with the engine's reason, the decisions
//! and the SVG chart. A screenshot goes to `target/quartermaster-page.png` for people to look at.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::{Clock, ManualClock};
use quartermaster_controller::context::{Context, Providers};
use quartermaster_controller::driver::Driver;
use quartermaster_controller::http::{metrics_router, serve};
use quartermaster_controller::leader::Leadership;
use quartermaster_controller::metrics::Metrics;
use quartermaster_controller::page::{self, Decision, DecisionKind};
use quartermaster_controller::stores::{Stores, Writers};
use quartermaster_controller::writes::Writer;
use quartermaster_pricing::{CapacityType, Catalog, Cloud};
use quartermaster_tests::tools::{chromium, target_dir};
use serde_json::{Value, json};

/// How long one Chromium run may take.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).expect("a valid time")
}

fn kube_time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The zone and price of the catalog's first AWS offering of `instance_type` and `capacity`.
fn offering(catalog: &Catalog, instance_type: &str, capacity: CapacityType) -> (String, f64) {
    catalog
        .get(Cloud::Aws, instance_type)
        .and_then(|t| t.offerings.iter().find(|o| o.capacity_type == capacity))
        .map(|o| (o.zone.clone(), o.price_per_hour))
        .unwrap_or_else(|| panic!("the catalog offers {instance_type} {capacity}"))
}

/// An AWS GPU instance type the catalog sells as spot (the cheapest such offering's).
fn spot_gpu_type(catalog: &Catalog) -> String {
    catalog
        .for_cloud(Cloud::Aws)
        .filter(|t| t.accelerator.is_some())
        .flat_map(|t| {
            t.offerings
                .iter()
                .filter(|o| o.capacity_type == CapacityType::Spot)
                .map(move |o| (o.price_per_hour, t.name.clone()))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
        .expect("the catalog sells a GPU type as spot")
}

/// A NodeClaim of pool `gpu` launched `hours` ago on `instance_type`.
fn launched_claim(
    catalog: &Catalog,
    name: &str,
    instance_type: &str,
    capacity: CapacityType,
    hours: i64,
) -> Value {
    let (zone, price) = offering(catalog, instance_type, capacity);
    let since = kube_time(now() - TimeDelta::hours(hours));
    json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "creationTimestamp": since,
            "finalizers": ["quartermaster.dev/termination"],
            "labels": {"quartermaster.dev/nodepool": "gpu",
                "node.kubernetes.io/instance-type": instance_type,
                "topology.kubernetes.io/zone": zone,
                "quartermaster.dev/capacity-type": capacity.to_string()}},
        "spec": {"nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"}},
        "status": {"providerID": format!("kwok://{name}"), "nodeName": name,
            "instanceType": instance_type, "zone": zone, "capacityType": capacity.to_string(),
            "pricePerHour": price,
            "conditions": [{"type": "Launched", "status": "True", "reason": "Launched",
                "message": "", "lastTransitionTime": since}]}})
}

fn gpu_pod(name: &str, gpus: u32, node: Option<&str>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml",
            "creationTimestamp": kube_time(now() - TimeDelta::minutes(5))},
        "spec": {
            "containers": [{"name": "main", "image": "vllm",
                "resources": {"requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": gpus.to_string()},
                              "limits": {"nvidia.com/gpu": gpus.to_string()}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        },
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/3 nodes are available"}]}});
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
        pod["status"] = json!({"phase": "Running",
            "startTime": kube_time(now() - TimeDelta::hours(1))});
    }
    pod
}

fn typed<K: serde::de::DeserializeOwned>(values: Vec<Value>) -> Vec<K> {
    values
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("a valid object"))
        .collect()
}

/// A leading controller's context over stores holding a small GPU fleet and a pod no
/// instance type can hold, on a manual clock at [`now`].
fn context() -> (Arc<Context>, Writers) {
    let catalog = Catalog::embedded();
    let mut writers = Writers::default();
    let stores = Stores::from_writers(&writers);
    Writers::replace(
        &mut writers.aws_node_classes,
        typed(vec![
            json!({"apiVersion": "quartermaster.dev/v1", "kind": "AWSNodeClass",
            "metadata": {"name": "default"},
            "spec": {"region": "us-east-1", "amiFamily": "AL2023",
                "role": "KarpenterNodeRole", "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}}),
        ]),
    );
    Writers::replace(
        &mut writers.node_pools,
        typed(vec![
            json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
            "metadata": {"name": "gpu"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In",
                     "values": ["g5.xlarge", "g5.2xlarge", "g5.12xlarge", spot_gpu_type(&catalog)]}
                ],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
            }}}}),
        ]),
    );
    Writers::replace(
        &mut writers.node_claims,
        typed(vec![
            launched_claim(&catalog, "gpu-a1", "g5.xlarge", CapacityType::OnDemand, 3),
            launched_claim(&catalog, "gpu-a2", "g5.xlarge", CapacityType::OnDemand, 2),
            launched_claim(
                &catalog,
                "gpu-b1",
                &spot_gpu_type(&catalog),
                CapacityType::Spot,
                1,
            ),
        ]),
    );
    Writers::replace(
        &mut writers.pods,
        typed(vec![
            gpu_pod("serving-0", 1, Some("gpu-a1")),
            gpu_pod("train-huge", 64, None),
        ]),
    );
    // Nothing is ever sent to this address: the test's writes fail where they are tried.
    let client = kube::Client::try_from(kube::Config::new(
        "http://127.0.0.1:9".parse().expect("a URI"),
    ))
    .expect("a client");
    let leadership = Leadership::always();
    let ctx = Arc::new(Context {
        stores,
        writer: Writer::new(
            quartermaster_controller::client::LoopClients::shared(client),
            leadership.subscribe(),
            Some("page-test".into()),
        ),
        providers: Providers::new(),
        catalog,
        clock: Arc::new(ManualClock::new(now())) as Arc<dyn Clock>,
        metrics: Arc::new(Metrics::new()),
        cluster_name: "page-test".into(),
        region: None,
        preference_policy: None,
        nominate_pods: Default::default(),
        leadership,
        page: Default::default(),
        headroom: Default::default(),
    });
    (ctx, writers)
}

/// `GET path` over HTTP/1.0 (the server closes the connection after its whole body).
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connecting {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a read timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("writing the request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{path}: no header end in {response}"));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{path}: no status in {head}"));
    (code, body.to_owned())
}

/// Runs Chromium headless with `args`; its standard output, or why it failed.
fn run_chromium(chromium: &Path, profile: &Path, args: &[String]) -> Result<String, String> {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", chromium.display()))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > CHROMIUM_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "chromium {} did not finish within {CHROMIUM_TIMEOUT:?}",
                args.join(" ")
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        Err(format!(
            "chromium {} failed ({status}):\n{out}\n{err}",
            args.join(" ")
        ))
    }
}

/// Dollars as the page shows them: two decimals from $1 up, three below.
fn dollars(value: f64) -> String {
    if value.abs() >= 1.0 {
        format!("${value:.2}")
    } else {
        format!("${value:.3}")
    }
}

/// Text as a browser serializes it in the DOM (`&`, `<`, `>` escaped).
fn dom_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `page` and `cost` are the same figure, summed perhaps in another order (the stores list
/// objects in no fixed order).
fn assert_same(page: f64, cost: f64, what: &str) {
    assert!(
        (page - cost).abs() <= 1e-9 * cost.abs().max(1.0),
        "{what}: the page says {page}, /cost {cost}"
    );
}

/// The `data-value` of the element with `id` (a card) in `dom`.
fn card_value(dom: &str, id: &str) -> f64 {
    let card = dom
        .split(&format!("id=\"{id}\""))
        .nth(1)
        .unwrap_or_else(|| panic!("no #{id} in the DOM:\n{dom}"));
    card.split("data-value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("#{id} has no numeric data-value"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_renders_in_chromium_with_the_fleets_cost_and_a_pending_pods_reason() {
    let chromium = tokio::task::spawn_blocking(chromium)
        .await
        .expect("the install ran")
        .unwrap_or_else(|e| panic!("{e}"));
    let (ctx, _writers) = context();

    // Three hours of history, one sample a minute, the fleet growing, before the live passes.
    for minute in (1..=180).rev() {
        let at = now() - TimeDelta::minutes(minute);
        let cost = if minute > 120 {
            1.006
        } else if minute > 60 {
            2.012
        } else {
            7.5
        };
        ctx.page.record_cost(at, cost);
    }
    // Two passes of the real loop a batch window apart: the engine solves and gives its reason
    // for the pod no instance type can hold.
    let mut driver = Driver::new(ctx.clone(), Default::default());
    driver.pass(now() - TimeDelta::seconds(2));
    driver.pass(now());
    page::record_pass(&driver, now());
    page::record_decision(
        &ctx,
        now() - TimeDelta::minutes(62),
        Decision {
            kind: DecisionKind::Launch,
            nodeclaims: vec!["gpu-b1".into()],
            nodepool: "gpu".into(),
            summary: format!("{} spot", spot_gpu_type(&Catalog::embedded())),
            reason: None,
            price_per_hour: None,
            saving_per_hour: None,
        },
    );
    page::record_decision(
        &ctx,
        now() - TimeDelta::minutes(10),
        Decision {
            kind: DecisionKind::Disrupt,
            nodeclaims: vec!["gpu-old-1".into(), "gpu-old-2".into()],
            nodepool: String::new(),
            summary: "multi-delete: 2 node(s) -> 0 replacement(s), 3 pod(s) moved".into(),
            reason: Some("underutilized".into()),
            price_per_hour: None,
            saving_per_hour: Some(2.012),
        },
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding 127.0.0.1");
    let addr = listener.local_addr().expect("an address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, metrics_router(ctx.clone()), async move {
        let _ = stopped.await;
    }));

    let started = Instant::now();
    let profile = target_dir().join(format!("chromium-profile-{}", std::process::id()));
    let screenshot = target_dir().join("quartermaster-page.png");
    let url = format!("http://{addr}/");
    let (cost, status, dom, shot) = tokio::task::spawn_blocking({
        let profile = profile.clone();
        let screenshot = screenshot.clone();
        move || {
            let (code, cost) = get(addr, "/cost");
            assert_eq!(code, 200, "{cost}");
            let (code, status) = get(addr, "/status.json");
            assert_eq!(code, 200, "{status}");
            let dom = run_chromium(&chromium, &profile, &["--dump-dom".into(), url.clone()]);
            let _ = std::fs::remove_file(&screenshot);
            let shot = run_chromium(
                &chromium,
                &profile,
                &[
                    format!("--screenshot={}", screenshot.display()),
                    "--window-size=1280,1100".into(),
                    url,
                ],
            );
            (cost, status, dom, shot)
        }
    })
    .await
    .expect("the browser ran");
    let _ = stop.send(());
    let _ = server.await;
    let _ = std::fs::remove_dir_all(&profile);
    let dom = dom.unwrap_or_else(|e| panic!("{e}"));
    shot.unwrap_or_else(|e| panic!("{e}"));
    let cost: Value = serde_json::from_str(&cost).expect("/cost is JSON");
    let status: Value = serde_json::from_str(&status).expect("/status.json is JSON");

    // The page rendered: a whole document, no script.
    assert!(dom.contains("<h1>Quartermaster</h1>"), "{dom}");
    assert!(!dom.contains("<script"), "no script in the page:\n{dom}");

    // The fleet's cost per hour is /cost's, as a number and as shown.
    let per_hour = cost["cost_per_hour"].as_f64().expect("/cost cost_per_hour");
    assert!(per_hour > 0.0, "{cost}");
    assert_same(card_value(&dom, "cost-per-hour"), per_hour, "cost per hour");
    assert_same(
        status["fleet"]["cost_per_hour"]
            .as_f64()
            .unwrap_or_default(),
        per_hour,
        "status.json cost per hour",
    );
    assert!(
        dom.contains(&format!(">{}</div>", dollars(per_hour))),
        "{} missing from the DOM:\n{dom}",
        dollars(per_hour)
    );
    assert_same(
        card_value(&dom, "cost-since-start"),
        cost["cost_since_start"]
            .as_f64()
            .expect("/cost cost_since_start"),
        "cost since start",
    );
    // The nodes /cost lists, by instance type and capacity type, with their summed price.
    let nodes = cost["nodes"].as_array().expect("/cost nodes");
    assert_eq!(nodes.len(), 3, "{cost}");
    assert_eq!(card_value(&dom, "nodes"), 3.0);
    let spot_type = spot_gpu_type(&Catalog::embedded());
    for (instance_type, capacity) in [("g5.xlarge", "on-demand"), (spot_type.as_str(), "spot")] {
        let of_group: Vec<&Value> = nodes
            .iter()
            .filter(|n| n["instance_type"] == instance_type && n["capacity_type"] == capacity)
            .collect();
        let sum: f64 = of_group
            .iter()
            .map(|n| n["price_per_hour"].as_f64().unwrap_or_default())
            .sum();
        let row = format!("<td>gpu</td><td>{instance_type}</td><td>{capacity}</td>");
        let after = dom
            .split(&row)
            .nth(1)
            .unwrap_or_else(|| panic!("no fleet row {row} in the DOM:\n{dom}"));
        let row_end = after.split("</tr>").next().unwrap_or_default();
        assert!(
            row_end.contains(&format!(">{}</td>", of_group.len()))
                && row_end.contains(&format!(">{}</td>", dollars(sum))),
            "the {instance_type} {capacity} row shows {} node(s) at {}: {row_end}",
            of_group.len(),
            dollars(sum)
        );
    }

    // The pending pod with the engine's reason.
    let pending = &status["pending"]["shown"];
    assert_eq!(pending[0]["pod"], "ml/train-huge", "{status}");
    let reason = pending[0]["reason"]
        .as_str()
        .unwrap_or_else(|| panic!("the engine gave a reason: {status}"));
    assert!(reason.contains("nvidia.com/gpu"), "{reason}");
    assert!(dom.contains("ml/train-huge"), "{dom}");
    assert!(
        dom.contains(&dom_text(reason)),
        "the reason {reason:?} missing from the DOM:\n{dom}"
    );

    // Decisions and the chart.
    assert!(dom.contains("gpu-old-1, gpu-old-2"), "{dom}");
    assert!(
        dom.contains(&format!(">{}</span>", dollars(2.012))),
        "{dom}"
    );
    assert!(
        dom.contains("<svg class=\"chart\" id=\"cost-chart\""),
        "{dom}"
    );
    assert!(dom.contains("<path class=\"line\" d=\"M"), "{dom}");
    assert_eq!(
        status["cost_history"].as_array().map(Vec::len),
        Some(181),
        "three hours of samples and the pass's"
    );

    // A screenshot for people to look at.
    let png = std::fs::read(&screenshot)
        .unwrap_or_else(|e| panic!("reading {}: {e}", screenshot.display()));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000,
        "{} is a PNG of the page ({} bytes)",
        screenshot.display(),
        png.len()
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the page and the browser took {:?}",
        started.elapsed()
    );
}
