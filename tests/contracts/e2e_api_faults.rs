//! End to end against a real cluster, with our fault-injecting proxy between the controller and
//! the API server: watches cut (cleanly and abruptly), 429 with `Retry-After`, 500, 503, 409
//! conflicts on writes, and delayed answers. The controller must keep working and make no
//! wrong decision from a stale or partial cache: every pod binds, no pod is replaced while its
//! Deployment only grows (a node deleted under running pods would replace them), scaling down
//! leaves exactly one Node per NodeClaim and no finalizer stuck, and scaling to zero removes
//! every node.
//!
//! The proxy listens on 127.0.0.1 in plain HTTP and forwards through a `kube::Client` (TLS and
//! the token from the test's kubeconfig); the controller's kubeconfig names the proxy. Faults
//! are drawn from a fixed seed. Runs only when `QUARTERMASTER_E2E_KUBECONFIG` names a
//! kubeconfig, one end-to-end test at a time.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams};
use quartermaster_policies::NodePool;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::e2e::{
    Controller, NAMESPACE, apply, claims_and_nodes, client, deployment, on_cluster, scale, setup,
    unbound, wait_for, wait_until_no_nodes,
};

/// Share of ordinary (non-watch) requests answered 429, 500 and 503, of writes answered 409,
/// and of requests held back before they are passed on.
const THROTTLE: f64 = 0.04;
const SERVER_ERROR: f64 = 0.03;
const UNAVAILABLE: f64 = 0.03;
const CONFLICT: f64 = 0.05;
const DELAY: f64 = 0.2;

/// What the proxy did.
#[derive(Debug, Default)]
struct Counts {
    requests: AtomicU64,
    throttled: AtomicU64,
    server_errors: AtomicU64,
    unavailable: AtomicU64,
    conflicts: AtomicU64,
    delayed: AtomicU64,
    watches_cut: AtomicU64,
    watches_broken: AtomicU64,
}

impl Counts {
    fn faults(&self) -> u64 {
        [
            &self.throttled,
            &self.server_errors,
            &self.unavailable,
            &self.conflicts,
            &self.delayed,
            &self.watches_cut,
            &self.watches_broken,
        ]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum()
    }

    fn line(&self) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "api faults: {} requests, {} throttled (429), {} 500, {} 503, {} conflicts (409), {} delayed, {} watches cut, {} watches broken",
            n(&self.requests),
            n(&self.throttled),
            n(&self.server_errors),
            n(&self.unavailable),
            n(&self.conflicts),
            n(&self.delayed),
            n(&self.watches_cut),
            n(&self.watches_broken)
        )
    }
}

/// A response body fed by a task (so that a watch can be cut while it streams).
struct ChannelBody(tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx)
    }
}

fn status(code: StatusCode, reason: &str, retry_after: bool) -> Response<ChannelBody> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let body = format!(
        r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the e2e fault proxy","reason":"{reason}","code":{}}}"#,
        code.as_u16()
    );
    let _ = tx.try_send(Ok(Frame::data(Bytes::from(body))));
    let mut r = Response::builder()
        .status(code)
        .header("content-type", "application/json");
    if retry_after {
        r = r.header("retry-after", "1");
    }
    r.body(ChannelBody(rx)).expect("a valid response")
}

struct Proxy {
    upstream: Client,
    rng: Mutex<StdRng>,
    counts: Counts,
}

impl Proxy {
    fn draw(&self) -> f64 {
        self.rng.lock().unwrap().random::<f64>()
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<ChannelBody> {
        self.counts.requests.fetch_add(1, Ordering::Relaxed);
        let watch = req
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
        let write = !matches!(req.method().as_str(), "GET" | "HEAD");
        if !watch {
            let x = self.draw();
            if x < THROTTLE {
                self.counts.throttled.fetch_add(1, Ordering::Relaxed);
                return status(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", true);
            }
            if x < THROTTLE + SERVER_ERROR {
                self.counts.server_errors.fetch_add(1, Ordering::Relaxed);
                return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", false);
            }
            if x < THROTTLE + SERVER_ERROR + UNAVAILABLE {
                self.counts.unavailable.fetch_add(1, Ordering::Relaxed);
                return status(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", true);
            }
            if write && self.draw() < CONFLICT {
                self.counts.conflicts.fetch_add(1, Ordering::Relaxed);
                return status(StatusCode::CONFLICT, "Conflict", false);
            }
        }
        if self.draw() < DELAY {
            self.counts.delayed.fetch_add(1, Ordering::Relaxed);
            let ms = (self.draw() * 800.0) as u64;
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        // A watch lives 2 to 12 s, then ends cleanly or breaks (a third of them).
        let cut = watch.then(|| {
            let after = Duration::from_millis(2_000 + (self.draw() * 10_000.0) as u64);
            (after, self.draw() < 1.0 / 3.0)
        });

        let (parts, body) = req.into_parts();
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let mut up = http::Request::builder().method(parts.method.clone()).uri(
            parts
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_owned(),
        );
        for (k, v) in &parts.headers {
            if k != http::header::HOST && k != http::header::AUTHORIZATION {
                up = up.header(k, v);
            }
        }
        let Ok(up) = up.body(kube::client::Body::from(body.to_vec())) else {
            return status(StatusCode::BAD_REQUEST, "BadRequest", false);
        };
        let response = match self.upstream.send(up).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("e2e fault proxy: upstream failed: {e}");
                return status(StatusCode::BAD_GATEWAY, "InternalError", false);
            }
        };
        let (parts, mut upstream_body) = response.into_parts();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let me = self.clone();
        tokio::spawn(async move {
            let deadline = cut.map(|(after, _)| tokio::time::Instant::now() + after);
            loop {
                let next = upstream_body.frame();
                let frame = match deadline {
                    Some(d) => match tokio::time::timeout_at(d, next).await {
                        Ok(f) => f,
                        Err(_) => {
                            if cut.is_some_and(|(_, broken)| broken) {
                                me.counts.watches_broken.fetch_add(1, Ordering::Relaxed);
                                let _ = tx
                                    .send(Err(std::io::Error::other("watch broken by the proxy")))
                                    .await;
                            } else {
                                me.counts.watches_cut.fetch_add(1, Ordering::Relaxed);
                            }
                            return;
                        }
                    },
                    None => next.await,
                };
                match frame {
                    Some(Ok(f)) => {
                        if tx.send(Ok(f)).await.is_err() {
                            return;
                        }
                    }
                    Some(Err(e)) => {
                        let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                        return;
                    }
                    None => return,
                }
            }
        });
        let mut r = Response::builder().status(parts.status);
        for (k, v) in &parts.headers {
            if k != http::header::CONTENT_LENGTH && k != http::header::TRANSFER_ENCODING {
                r = r.header(k, v);
            }
        }
        r.body(ChannelBody(rx)).expect("a valid response")
    }
}

/// Starts the proxy on 127.0.0.1; returns its port.
async fn start_proxy(proxy: Arc<Proxy>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let port = listener.local_addr().expect("an address").port();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let proxy = proxy.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let proxy = proxy.clone();
                    async move { Ok::<_, Infallible>(proxy.handle(req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    port
}

#[test]
fn the_controller_keeps_working_through_api_faults_and_decides_nothing_wrong_from_its_cache() {
    on_cluster(api_faults);
}

/// The pod names of `app`'s Deployment alive now.
async fn pod_names(client: &Client, app: &str) -> BTreeSet<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    pods.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| p.metadata.name)
                .collect()
        })
        .unwrap_or_default()
}

/// Every pod bound to one of our nodes, one Node per NodeClaim, none stuck deleting, `watched`
/// at `replicas` pods; the pod names of `watched` seen all along are collected into `seen`.
async fn settle(
    client: &Client,
    ctl: &Controller,
    what: &str,
    (watched, replicas): (&str, usize),
    seen: &Mutex<BTreeSet<String>>,
) {
    wait_for(what, Some(ctl), || {
        let client = client.clone();
        async move {
            let names = pod_names(&client, watched).await;
            let count = names.len();
            seen.lock().unwrap().extend(names);
            if count != replicas {
                return Err(format!("{count} {watched} pods, not {replicas}"));
            }
            let left = unbound(&client).await?;
            if !left.is_empty() {
                return Err(format!("unbound: {left:?}"));
            }
            let (claims, nodes) = claims_and_nodes(&client).await;
            let mut c: Vec<String> = claims
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect();
            let mut n: Vec<String> = nodes
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            c.sort();
            n.sort();
            if c != n {
                return Err(format!("claims {c:?} vs nodes {n:?}"));
            }
            if let Some(c) = claims
                .iter()
                .find(|c| c.metadata.deletion_timestamp.is_some())
            {
                return Err(format!("{:?} still deleting", c.metadata.name));
            }
            Ok(())
        }
    })
    .await;
}

async fn api_faults(kubeconfig: PathBuf) {
    let client = client(&kubeconfig).await;
    setup(&client).await;
    let proxy = Arc::new(Proxy {
        upstream: client.clone(),
        rng: Mutex::new(StdRng::seed_from_u64(17)),
        counts: Counts::default(),
    });
    let port = start_proxy(proxy.clone()).await;
    let dir = std::env::temp_dir().join(format!(
        "quartermaster-e2e-api-faults-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let proxied = dir.join("kubeconfig");
    std::fs::write(
        &proxied,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: proxy, cluster: {{server: \"http://127.0.0.1:{port}\"}}}}]\nusers: [{{name: proxy, user: {{}}}}]\ncontexts: [{{name: proxy, context: {{cluster: proxy, user: proxy}}}}]\ncurrent-context: proxy\n"
        ),
    )
    .unwrap();
    let kwok = dir.join("kwok.yaml");
    std::fs::write(
        &kwok,
        "launchLatency: {default: 1s}\ndevicePluginDelay: {default: 2s}\n",
    )
    .unwrap();
    let ctl = Controller::start(&proxied, &kwok, dir.join("controller.log"));
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    for name in ["f-gpu", "f-cpu", "gpu", "cpu", "r-gpu", "r-gang"] {
        let _ = deployments.delete(name, &DeleteParams::default()).await;
    }
    wait_until_no_nodes(&client, &ctl, "leftovers of an earlier run to be gone").await;

    // Growing only: every pod binds and none is ever replaced.
    let seen = Mutex::new(BTreeSet::new());
    apply(&deployments, "f-gpu", deployment("f-gpu", 4, 1)).await;
    apply(&deployments, "f-cpu", deployment("f-cpu", 3, 0)).await;
    settle(&client, &ctl, "the first pods bound", ("f-gpu", 4), &seen).await;
    scale(&client, "f-gpu", 8).await;
    settle(&client, &ctl, "eight GPU pods bound", ("f-gpu", 8), &seen).await;
    let alive = pod_names(&client, "f-gpu").await;
    let seen = seen.into_inner().unwrap();
    assert_eq!(
        seen, alive,
        "a GPU pod was replaced while its Deployment only grew: a node went under it"
    );

    // Shrinking: the empty nodes go, the rest stay whole.
    scale(&client, "f-gpu", 2).await;
    scale(&client, "f-cpu", 1).await;
    let seen = Mutex::new(BTreeSet::new());
    settle(
        &client,
        &ctl,
        "the cluster after scaling down",
        ("f-gpu", 2),
        &seen,
    )
    .await;

    // To zero: every node goes, every finalizer with it.
    scale(&client, "f-gpu", 0).await;
    scale(&client, "f-cpu", 0).await;
    wait_until_no_nodes(&client, &ctl, "every NodeClaim and Node to be gone").await;
    println!("{}", proxy.counts.line());
    assert!(proxy.counts.faults() > 0, "{}", proxy.counts.line());
    ctl.kill();
    for name in ["f-gpu", "f-cpu"] {
        let _ = deployments.delete(name, &DeleteParams::default()).await;
    }
    let pools: Api<NodePool> = Api::all(client.clone());
    let _ = pools.delete("e2e-gpu", &DeleteParams::default()).await;
    let _ = pools.delete("e2e-cpu", &DeleteParams::default()).await;
    let _ = std::fs::remove_dir_all(&dir);
}
