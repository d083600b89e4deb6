//! End to end against a real cluster: the `quartermaster controller` binary with the kwok cloud.
//!
//! Runs only when `QUARTERMASTER_E2E_KUBECONFIG` names a kubeconfig (and says it was skipped
//! otherwise): it applies the CRDs, a NodeClass and GPU and CPU NodePools, creates a GPU and a
//! CPU Deployment, waits until every pod is bound to a node the controller launched, checks the
//! NodeClaims, Node labels, events, metrics and `/cost`, kills the controller in the middle of a
//! launch and starts it again (no second Node may appear), then scales to zero and waits until
//! the nodes are consolidated away and every finalizer is gone. See README.md ("End-to-end
//! tests") for running it against kind or a local control plane.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use quartermaster_policies::{NodeClaim, NodePool};
use quartermaster_tests::prometheus::free_port;
use quartermaster_tests::workspace_root;
use serde_json::{Value, json};

pub(super) const NAMESPACE: &str = "quartermaster-e2e";
/// The end-to-end tests share one cluster and its NodePools: one runs at a time.
pub(super) static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());
const MANAGER: &str = "quartermaster-e2e";
/// Generous: a kubelet-less scheduler binds 3-10 s after a node appears, and the machine is shared.
const TIMEOUT: Duration = Duration::from_secs(180);

pub(super) fn kubeconfig() -> Option<PathBuf> {
    std::env::var_os("QUARTERMASTER_E2E_KUBECONFIG").map(PathBuf::from)
}

/// The controller binary: `QUARTERMASTER_E2E_BINARY` when set (say, a release build, to
/// measure; a relative path is read from the workspace root, not from `tests/` where the test
/// runs), else the debug build, built if needed.
pub(super) fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("QUARTERMASTER_E2E_BINARY") {
        return workspace_root().join(path);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        // The workspace's binaries with its tests: the same feature set `cargo test --workspace`
        // built the dependencies with, so none is compiled again (`-p quartermaster` alone
        // unifies features differently and rebuilds the cloud SDKs: minutes on a fresh clone).
        .args(["build", "-q", "--workspace", "--bins", "--tests"])
        .current_dir(workspace_root())
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the quartermaster binary failed");
    target.join("debug").join("quartermaster")
}

pub(super) struct Controller {
    pub(super) child: Child,
    metrics_port: u16,
    log: PathBuf,
}

/// The kwok cloud most tests use: launches and device plugins take 2 s.
pub(super) const KWOK_2S: &str = "launchLatency: {default: 2s}\ndevicePluginDelay: {default: 2s}\n";

impl Controller {
    /// Starts the controller of test `test` on the kwok cloud `kwok_yaml`, its files (the kwok
    /// config, `controller.log`) in a directory of its own under the temporary directory.
    pub(super) fn start_for(kubeconfig: &std::path::Path, test: &str, kwok_yaml: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("quartermaster-e2e-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kwok = dir.join("kwok.yaml");
        std::fs::write(&kwok, kwok_yaml).unwrap();
        Self::start(kubeconfig, &kwok, dir.join("controller.log"))
    }

    pub(super) fn start(
        kubeconfig: &std::path::Path,
        kwok_config: &std::path::Path,
        log: PathBuf,
    ) -> Self {
        Self::start_as(
            kubeconfig,
            kwok_config,
            log,
            &format!("e2e-{}", std::process::id()),
        )
    }

    /// [`Controller::start`] with `identity` as its name in the leader election (two replicas
    /// need two names).
    pub(super) fn start_as(
        kubeconfig: &std::path::Path,
        kwok_config: &std::path::Path,
        log: PathBuf,
        identity: &str,
    ) -> Self {
        let metrics_port = free_port().expect("a free port");
        let health_port = free_port().expect("a free port");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        let child = Command::new(binary())
            .args([
                "controller",
                "--cloud-provider",
                "kwok",
                "--cluster-name",
                "e2e",
                "--leader-election-namespace",
                NAMESPACE,
                "--log-format",
                "text",
                "--batch-idle-duration",
                "1s",
            ])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--kwok-config")
            .arg(kwok_config)
            .arg(format!("--metrics-port={metrics_port}"))
            .arg(format!("--health-probe-port={health_port}"))
            .env("POD_NAME", identity)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .expect("the controller starts");
        Self {
            child,
            metrics_port,
            log,
        }
    }

    /// SIGKILL (`kill -9`): no shutdown code runs.
    pub(super) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(super) fn get(&self, path: &str) -> String {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.metrics_port));
        quartermaster_tests::prometheus::http_get(addr, path)
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    pub(super) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Where its log is written.
    pub(super) fn log_path(&self) -> &std::path::Path {
        &self.log
    }

    /// Stops it and removes the directory of [`Controller::start_for`] (its log with it).
    pub(super) fn kill_and_clean(self) {
        let dir = self.log.parent().map(std::path::Path::to_path_buf);
        self.kill();
        if let Some(dir) = dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// CPU seconds and peak RSS (MiB) of the controller so far, from /proc.
    pub(super) fn usage(&self) -> (f64, f64) {
        usage(self.child.id())
    }

    /// The controller's established TCP connections to the API server of `kubeconfig`, from
    /// /proc (its sockets' inodes, matched in the TCP tables by remote port).
    pub(super) fn api_connections(&self, kubeconfig: &std::path::Path) -> usize {
        let port = Kubeconfig::read_from(kubeconfig)
            .ok()
            .and_then(|k| k.clusters.into_iter().next()?.cluster?.server)
            .and_then(|server| server.parse::<http::Uri>().ok())
            .and_then(|uri| {
                uri.port_u16().or(Some(if uri.scheme_str() == Some("http") {
                    80
                } else {
                    443
                }))
            })
            .expect("the kubeconfig names a server");
        let pid = self.child.id();
        let sockets: std::collections::BTreeSet<String> =
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .filter_map(|target| {
                    let t = target.to_string_lossy();
                    Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect();
        ["tcp", "tcp6"]
            .iter()
            .filter_map(|table| std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok())
            .flat_map(|text| text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
            .filter(|line| {
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
                let f: Vec<&str> = line.split_whitespace().collect();
                let remote_port = f
                    .get(2)
                    .and_then(|a| a.rsplit_once(':'))
                    .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
                f.get(3) == Some(&"01")
                    && remote_port == Some(port)
                    && f.get(9).is_some_and(|inode| sockets.contains(*inode))
            })
            .count()
    }
}

/// CPU seconds and peak RSS (MiB) of a process, from /proc.
pub(super) fn usage(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    (ticks / 100.0, hwm_kib / 1024.0)
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) async fn client(path: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("QUARTERMASTER_E2E_KUBECONFIG is readable");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a usable kubeconfig");
    Client::try_from(config).expect("a client")
}

pub(super) async fn apply<K>(api: &Api<K>, name: &str, object: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {name}: {e}"));
}

pub(super) async fn wait_for<F, Fut>(what: &str, ctl: Option<&Controller>, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let start = Instant::now();
    loop {
        let last = match check().await {
            Ok(()) => return,
            Err(e) => e,
        };
        if start.elapsed() > TIMEOUT {
            let log = ctl.map(Controller::log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "timed out waiting for {what}: {last}\ncontroller log (last lines, newest first):\n{}",
                tail.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

pub(super) fn deployment(name: &str, replicas: i32, gpus: u32) -> Value {
    let mut requests = json!({"cpu": "1", "memory": "2Gi"});
    let mut spec = json!({"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": requests.clone()}}]});
    if gpus > 0 {
        requests["nvidia.com/gpu"] = json!(gpus.to_string());
        spec = json!({
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": requests, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
        });
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})
}

pub(super) async fn setup(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in quartermaster_policies::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        apply(&crds, &name, serde_json::to_value(&crd).unwrap()).await;
    }
    wait_for("the CRDs to be established", None, || {
        let crds = crds.clone();
        async move {
            for crd in quartermaster_policies::crds() {
                let name = crd.metadata.name.clone().unwrap_or_default();
                let got = crds.get(&name).await.map_err(|e| e.to_string())?;
                let established = got
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if !established {
                    return Err(format!("{name} not established"));
                }
            }
            Ok(())
        }
    })
    .await;
    let ns: Api<Namespace> = Api::all(client.clone());
    apply(
        &ns,
        NAMESPACE,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
    )
    .await;
    let classes: Api<quartermaster_policies::AWSNodeClass> = Api::all(client.clone());
    apply(
        &classes,
        "e2e",
        json!({"apiVersion": "quartermaster.dev/v1", "kind": "AWSNodeClass",
        "metadata": {"name": "e2e"},
        "spec": {"region": "us-east-1", "amiFamily": "AL2023", "role": "QuartermasterNodeRole",
            "subnetSelectorTerms": [{"tags": {"quartermaster.dev/discovery": "e2e"}}],
            "securityGroupSelectorTerms": [{"tags": {"quartermaster.dev/discovery": "e2e"}}]}}),
    )
    .await;
    let pools: Api<NodePool> = Api::all(client.clone());
    apply(&pools, "e2e-gpu", json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
        "metadata": {"name": "e2e-gpu"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "e2e"},
            "requirements": [
                {"key": "quartermaster.dev/instance-family", "operator": "In", "values": ["g5", "g6"]},
                {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}],
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "15s",
                "budgets": [{"nodes": "100%"}]}}})).await;
    apply(&pools, "e2e-cpu", json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
        "metadata": {"name": "e2e-cpu"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "e2e"},
            "requirements": [
                {"key": "quartermaster.dev/instance-gpu-count", "operator": "DoesNotExist"},
                {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}]}},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "15s",
                "budgets": [{"nodes": "100%"}]}}})).await;
}

/// Pods of the test namespace that are not bound to a node of a NodeClaim.
pub(super) async fn unbound(client: &Client) -> Result<Vec<String>, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let nodes: Api<Node> = Api::all(client.clone());
    let ours: Vec<String> = nodes
        .list(&ListParams::default().labels("quartermaster.dev/nodeclaim"))
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let list = pods
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    if list.items.is_empty() {
        return Err("no pods yet".into());
    }
    Ok(list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            !p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some_and(|n| ours.contains(n))
        })
        .filter_map(|p| p.metadata.name)
        .collect())
}

pub(super) async fn wait_all_bound(client: &Client, ctl: &Controller, what: &str) {
    wait_for(what, Some(ctl), || {
        let client = client.clone();
        async move {
            let left = unbound(&client).await?;
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("unbound: {left:?}"))
            }
        }
    })
    .await;
}

pub(super) async fn wait_until_no_nodes(client: &Client, ctl: &Controller, what: &str) {
    wait_for(what, Some(ctl), || {
        let client = client.clone();
        async move {
            let (c, n) = claims_and_nodes(&client).await;
            if c.is_empty() && n.is_empty() {
                Ok(())
            } else {
                Err(format!("{} claims, {} nodes left", c.len(), n.len()))
            }
        }
    })
    .await;
}

pub(super) async fn scale(client: &Client, name: &str, replicas: i32) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap_or_else(|e| panic!("scaling {name}: {e}"));
}

pub(super) async fn claims_and_nodes(client: &Client) -> (Vec<NodeClaim>, Vec<Node>) {
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let c = claims
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let n = nodes
        .list(&ListParams::default().labels("quartermaster.dev/kwok=true"))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    (c, n)
}

/// Runs `test` against the cluster `QUARTERMASTER_E2E_KUBECONFIG` names (says it was skipped
/// when it names none), one end-to-end test at a time.
pub(super) fn on_cluster<F, Fut>(test: F)
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some(kubeconfig) = kubeconfig() else {
        println!(
            "skipped: QUARTERMASTER_E2E_KUBECONFIG is not set (see README.md, End-to-end tests)"
        );
        return;
    };
    let _one_at_a_time = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(test(kubeconfig));
}

#[test]
fn the_controller_provisions_survives_a_restart_mid_launch_and_consolidates_on_a_real_cluster() {
    on_cluster(e2e);
}

async fn e2e(kubeconfig: PathBuf) {
    let client = client(&kubeconfig).await;
    setup(&client).await;
    let dir = std::env::temp_dir().join(format!("quartermaster-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Launches take 2 s, so the controller can be killed while one is under way.
    let kwok = dir.join("kwok.yaml");
    std::fs::write(
        &kwok,
        "launchLatency: {default: 2s}\ndevicePluginDelay: {default: 2s}\n",
    )
    .unwrap();
    let log = dir.join("controller.log");
    let ctl = Controller::start(&kubeconfig, &kwok, log.clone());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    // What an interrupted earlier run left behind goes first (the controller removes its nodes).
    for name in ["gpu", "cpu"] {
        let _ = deployments.delete(name, &DeleteParams::default()).await;
    }
    wait_until_no_nodes(&client, &ctl, "leftovers of an earlier run to be gone").await;
    apply(&deployments, "gpu", deployment("gpu", 3, 1)).await;
    apply(&deployments, "cpu", deployment("cpu", 2, 0)).await;

    wait_all_bound(
        &client,
        &ctl,
        "every pod bound to a node the controller launched",
    )
    .await;

    let (claims, nodes) = claims_and_nodes(&client).await;
    assert!(
        claims.len() >= 2,
        "a GPU and a CPU node at least: {}",
        claims.len()
    );
    for claim in &claims {
        let status = claim.status.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        assert!(
            status
                .conditions
                .iter()
                .any(|c| c.type_ == "Initialized" && c.status == "True"),
            "{name}: {:?}",
            status.conditions
        );
        assert_eq!(
            status.provider_id.as_deref(),
            Some(format!("kwok://{name}").as_str())
        );
        assert!(
            claim
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == "quartermaster.dev/termination")
        );
    }
    for node in &nodes {
        let labels: BTreeMap<String, String> = node.metadata.labels.clone().unwrap_or_default();
        for key in [
            "quartermaster.dev/nodepool",
            "quartermaster.dev/nodeclaim",
            "node.kubernetes.io/instance-type",
            "topology.kubernetes.io/zone",
            "topology.kubernetes.io/region",
            "quartermaster.dev/capacity-type",
            "kubernetes.io/arch",
        ] {
            assert!(
                labels.contains_key(key),
                "{key} missing on {:?}: {labels:?}",
                node.metadata.name
            );
        }
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        assert!(
            !taints
                .iter()
                .any(|t| t.key == "quartermaster.dev/unregistered")
        );
        if labels.get("quartermaster.dev/nodepool").map(String::as_str) == Some("e2e-gpu") {
            assert!(
                labels.contains_key("quartermaster.dev/instance-gpu-name"),
                "{labels:?}"
            );
        }
    }
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("quartermaster"))
        .filter_map(|e| e.reason)
        .collect();
    for reason in ["Launched", "Registered", "Initialized", "Nominated"] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "no {reason} event among {reasons:?}"
        );
    }
    let metrics = ctl.get("/metrics");
    for line in [
        "quartermaster_nodeclaims_created_total{nodepool=\"e2e-gpu\"}",
        "quartermaster_solve_duration_seconds_count",
        "quartermaster_reconcile_duration_seconds_count",
        "quartermaster_node_hourly_cost_dollars{",
        "quartermaster_leader 1",
    ] {
        assert!(
            metrics.contains(line),
            "{line} missing from /metrics:\n{metrics}"
        );
    }
    let cost: Value = serde_json::from_str(&ctl.get("/cost")).expect("/cost is JSON");
    assert!(
        cost["cost_per_hour"].as_f64().unwrap_or_default() > 0.0,
        "{cost}"
    );
    assert!(cost["by_node_pool"]["e2e-gpu"].is_object(), "{cost}");
    // `report` reads the same live fleet from the API server.
    let report = quartermaster_tests::quartermaster(&[
        "report",
        "--kubeconfig",
        kubeconfig.to_str().expect("a UTF-8 path"),
        "-o",
        "json",
    ]);
    assert_eq!(report.code, 0, "{}", report.stderr);
    let live = report.json();
    assert_eq!(
        live["nodes"].as_array().map(Vec::len),
        cost["nodes"].as_array().map(Vec::len),
        "report and /cost see the same nodes: {live}"
    );
    let csv = ctl.get("/cost?format=csv");
    assert!(csv.starts_with("BilledCost,"), "{csv}");
    println!(
        "metrics after provisioning:\n{}",
        metrics
            .lines()
            .filter(|l| l.contains("duration_seconds_sum")
                || l.contains("duration_seconds_count")
                || l.contains("pod_pending_seconds_sum")
                || l.contains("pod_pending_seconds_count"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Kill the controller in the middle of a launch, start it again: no second Node.
    let before = claims.len();
    scale(&client, "gpu", 5).await;
    wait_for("a new NodeClaim for the new pods", Some(&ctl), || {
        let client = client.clone();
        async move {
            let (c, _) = claims_and_nodes(&client).await;
            if c.len() > before {
                Ok(())
            } else {
                Err(format!("{} claims", c.len()))
            }
        }
    })
    .await;
    ctl.kill();
    let ctl = Controller::start(&kubeconfig, &kwok, log.clone());
    wait_all_bound(&client, &ctl, "every pod bound after the restart").await;
    let (claims, nodes) = claims_and_nodes(&client).await;
    let claim_names: Vec<String> = claims
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let node_names: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert_eq!(
        claim_names, node_names,
        "exactly one Node per NodeClaim after the restart"
    );

    // Scale to zero: the nodes are consolidated away and every finalizer goes.
    scale(&client, "gpu", 0).await;
    scale(&client, "cpu", 0).await;
    wait_until_no_nodes(&client, &ctl, "every NodeClaim and Node to be gone").await;
    println!(
        "final metrics:\n{}",
        ctl.get("/metrics")
            .lines()
            .filter(|l| l.contains("_sum") || l.contains("_count") || l.contains("terminated"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    ctl.kill();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let _ = deployments.delete("gpu", &DeleteParams::default()).await;
    let _ = deployments.delete("cpu", &DeleteParams::default()).await;
    let pools: Api<NodePool> = Api::all(client.clone());
    let _ = pools.delete("e2e-gpu", &DeleteParams::default()).await;
    let _ = pools.delete("e2e-cpu", &DeleteParams::default()).await;
    let _ = std::fs::remove_dir_all(&dir);
}
