//! [`KwokKubelet`]: what a kubelet would do for kwok Nodes, with no machine behind them.

pub(crate) mod lease;
pub(crate) mod pods;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};
use quartermaster_cloud::Clock;

use crate::api_error::is_not_found;
use crate::keys;
use crate::node::{Machine, is_kwok};
use crate::node_status::{is_current, ready_heartbeat, reported_status};

use pods::{PodStep, next_step};

/// How often each Node's Lease is renewed (the kubelet's default: a quarter of its 40 s), in a
/// fleet small enough ([`lease_renew_interval`]).
pub const LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// Lease renewals per second the kubelet aims to stay under (larger fleets renew less often).
pub const MAX_LEASE_RENEWALS_PER_SECOND: f64 = 100.0;
/// The longest renewal interval: half the 40 s Lease, so one missed renewal is no outage (the
/// node-lifecycle controller waits 50 s before it marks a node unreachable).
pub const MAX_LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(20);
/// How often each Node's `Ready` condition is re-reported when nothing changes: as a kubelet
/// with node Leases (`nodeStatusReportFrequency`, 5 min); liveness is the Lease's job.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(300);
/// How many Lease renewals, status reports and pod writes one pass has in flight at once (a
/// pass over 2,000 nodes must fit in the renewal interval).
const CONCURRENT_CALLS: usize = 16;
/// Pod writes one pass makes at most (a pod not reached waits for the next pass, a second
/// later): a pass stays short, so Leases never wait behind a burst of pod starts.
const POD_WRITES_PER_PASS: usize = 256;
/// How often the loop looks at everything even when no watch event arrives (leases, heartbeats,
/// device plugins, `run-for` deadlines).
pub const SYNC_PERIOD: Duration = Duration::from_secs(1);
/// A write that did not show up in the watch yet is not repeated sooner than this.
const RESEND_AFTER: Duration = Duration::from_secs(10);
/// After a watch event, how long to wait for more before acting on them together (each pass
/// looks at every node and bound pod: during a scale-up of thousands of pods, events arrive
/// all the time, and 50 ms made the passes cost more than the writes they batch).
const DEBOUNCE: Duration = Duration::from_millis(200);

/// Plays kubelet for every kwok Node (of every cloud) and the pods bound to them:
///
/// * renews each Node's Lease in `kube-node-lease` every 10 s, so the node-lifecycle
///   controller does not mark it unreachable;
/// * reports its status through `/status`: `Ready` (heartbeat every 30 s), capacity and
///   allocatable from the Node's kwok annotations, the accelerators once the device-plugin
///   delay of its launch has passed;
/// * reports a bound `Pending` pod `Running` (containers running and ready, a made-up pod IP
///   in 198.18.0.0/15), completes the deletion of a deleted pod (grace period 0: there are no
///   containers to stop), and reports a pod annotated `kwok.quartermaster.dev/run-for:
///   DURATION` `Succeeded` that long after it started, so Jobs finish.
///
/// It watches kwok Nodes (label `quartermaster.dev/kwok=true`) and bound pods
/// (`spec.nodeName!=`), acts on changes within ~200 ms and looks at everything every second.
/// Every decision takes "now" from the [`Clock`]. API errors are logged and retried on a later
/// pass; the loop never stops on its own.
pub struct KwokKubelet {
    client: kube::Client,
    clock: Arc<dyn Clock>,
    nodes: Api<Node>,
    leases: Api<Lease>,
    memory: Memory,
}

/// What the kubelet remembers between passes: what it wrote that the watch may not show yet.
#[derive(Debug, Default)]
struct Memory {
    nodes: BTreeMap<String, NodeMemory>,
    /// By pod uid.
    pods: BTreeMap<String, PodMemory>,
}

#[derive(Debug, Default)]
struct NodeMemory {
    /// The Lease as last written, for the next renewal.
    lease: Option<Lease>,
    lease_renewed_at: Option<DateTime<Utc>>,
    /// When the status was last written, and whether it had the accelerators.
    status_sent: Option<(DateTime<Utc>, bool)>,
}

#[derive(Debug, Default)]
struct PodMemory {
    /// The last step taken, and when.
    done: Option<(PodStep, DateTime<Utc>)>,
    /// A bad `run-for` annotation was reported.
    warned: bool,
}

/// What a watch task does with each event: wake the loop, or log the error (the watch retries
/// with backoff).
fn notify<T>(
    changed: Arc<tokio::sync::Notify>,
    what: &'static str,
) -> impl FnMut(Result<T, watcher::Error>) -> std::future::Ready<()> {
    move |event| {
        match event {
            Ok(_) => changed.notify_one(),
            Err(e) => tracing::warn!(error = %e, "kwok kubelet: watching {what} failed; retrying"),
        }
        std::future::ready(())
    }
}

/// How often each Lease is renewed with `nodes` kwok Nodes: every [`LEASE_RENEW_INTERVAL`],
/// stretched so that renewals stay under [`MAX_LEASE_RENEWALS_PER_SECOND`] (one process plays
/// kubelet for every node; thousands of renewals a second would load the API server more than
/// the cluster it simulates), and never beyond [`MAX_LEASE_RENEW_INTERVAL`], half the Lease.
pub fn lease_renew_interval(nodes: usize) -> Duration {
    let spread = Duration::from_secs_f64(nodes as f64 / MAX_LEASE_RENEWALS_PER_SECOND);
    spread.clamp(LEASE_RENEW_INTERVAL, MAX_LEASE_RENEW_INTERVAL)
}

fn since(now: DateTime<Utc>, then: DateTime<Utc>) -> Duration {
    (now - then).to_std().unwrap_or(Duration::ZERO)
}

fn pod_key(pod: &Pod) -> String {
    pod.metadata
        .uid
        .clone()
        .unwrap_or_else(|| format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()))
}

impl KwokKubelet {
    /// A kubelet for every kwok Node reachable through `client`, reading the time from `clock`.
    pub fn new(client: kube::Client, clock: Arc<dyn Clock>) -> Self {
        Self {
            nodes: Api::all(client.clone()),
            leases: Api::namespaced(client.clone(), keys::NODE_LEASE_NAMESPACE),
            client,
            clock,
            memory: Memory::default(),
        }
    }

    /// Runs until `shutdown` completes. Watch errors are logged and the watches restarted with
    /// backoff; it never returns before `shutdown`.
    ///
    /// The two watches run in tasks of their own, so the stores stay current while a pass is
    /// writing (a pass over thousands of nodes takes seconds; a watch read only between passes
    /// fell minutes behind, and new nodes got no Lease).
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let changed = Arc::new(tokio::sync::Notify::new());
        let (node_store, node_writer) = reflector::store::<Node>();
        let (pod_store, pod_writer) = reflector::store::<Pod>();
        let kwok_nodes = watcher::Config::default().labels(&format!("{}=true", keys::LABEL_KWOK));
        let bound_pods = watcher::Config::default().fields("spec.nodeName!=");
        let watches = [
            tokio::spawn(
                watcher(self.nodes.clone(), kwok_nodes)
                    .default_backoff()
                    .modify(|n: &mut Node| n.managed_fields_mut().clear())
                    .reflect(node_writer)
                    .for_each(notify(changed.clone(), "nodes")),
            ),
            tokio::spawn(
                watcher(Api::<Pod>::all(self.client.clone()), bound_pods)
                    .default_backoff()
                    .modify(|p: &mut Pod| p.managed_fields_mut().clear())
                    .reflect(pod_writer)
                    .for_each(notify(changed.clone(), "pods")),
            ),
        ];
        let mut shutdown = pin!(shutdown);
        let mut ticks = tokio::time::interval(SYNC_PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                _ = ticks.tick() => {}
                () = changed.notified() => {
                    // More changes usually follow: act on them together.
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(DEBOUNCE) => {}
                    }
                }
            }
            let (nodes, pods) = (node_store.state(), pod_store.state());
            tokio::select! {
                () = &mut shutdown => break,
                () = self.sync(&nodes, &pods) => {}
            }
        }
        for watch in watches {
            watch.abort();
        }
    }

    /// One pass over every kwok Node and bound pod, at the clock's now: Leases and node status
    /// first, then at most [`POD_WRITES_PER_PASS`] pod writes. Calls start in name order,
    /// [`CONCURRENT_CALLS`] at a time, so what a pass decides is deterministic.
    pub(crate) async fn sync(&mut self, nodes: &[Arc<Node>], pods: &[Arc<Pod>]) {
        let now = self.clock.now();
        let mut nodes: Vec<&Node> = nodes
            .iter()
            .map(AsRef::as_ref)
            .filter(|n| is_kwok(n))
            .collect();
        nodes.sort_by_key(|n| n.name_any());
        let names: BTreeSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        let live: Vec<&Node> = nodes
            .iter()
            .copied()
            .filter(|n| n.metadata.deletion_timestamp.is_none())
            .collect();
        let mut memories: Vec<(String, NodeMemory)> = live
            .iter()
            .map(|n| {
                let name = n.name_any();
                let memory = self.memory.nodes.remove(&name).unwrap_or_default();
                (name, memory)
            })
            .collect();
        let renew_interval = lease_renew_interval(live.len());
        let mut calls = Vec::with_capacity(live.len());
        for (node, (_, memory)) in live.iter().zip(memories.iter_mut()) {
            calls.push(sync_node(
                &self.leases,
                &self.nodes,
                node,
                memory,
                now,
                renew_interval,
            ));
        }
        let gone: Vec<bool> = futures::stream::iter(calls)
            .buffered(CONCURRENT_CALLS)
            .collect()
            .await;
        let gone: BTreeSet<String> = memories
            .iter()
            .zip(gone)
            .filter(|(_, gone)| *gone)
            .map(|((name, _), _)| name.clone())
            .collect();
        for (name, memory) in memories {
            if !gone.contains(&name) {
                self.memory.nodes.insert(name, memory);
            }
        }
        self.memory.nodes.retain(|name, _| names.contains(name));

        let mut bound: Vec<&Pod> = pods
            .iter()
            .map(AsRef::as_ref)
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some_and(|n| names.contains(n))
            })
            .collect();
        bound.sort_by_key(|p| (p.namespace().unwrap_or_default(), p.name_any()));
        // Pod writes go out in parallel, at most a pass's worth: the next pass (a second later)
        // renews the Leases that fell due first, so thousands of pods starting at once never
        // starve the heartbeats of their nodes.
        let writes: Vec<_> = bound
            .iter()
            .filter_map(|pod| self.pod_write(pod, now))
            .take(POD_WRITES_PER_PASS)
            .collect();
        futures::stream::iter(writes)
            .buffered(CONCURRENT_CALLS)
            .collect::<Vec<()>>()
            .await;
        let keys: BTreeSet<String> = bound.iter().map(|p| pod_key(p)).collect();
        self.memory.pods.retain(|k, _| keys.contains(k));
    }
}

/// Renews `node`'s Lease when due and reports its status when it changed (or the report
/// interval passed). Returns whether the node is gone (a 404: the store has not seen the
/// deletion yet), which is no error.
async fn sync_node(
    leases: &Api<Lease>,
    nodes: &Api<Node>,
    node: &Node,
    memory: &mut NodeMemory,
    now: DateTime<Utc>,
    renew_interval: Duration,
) -> bool {
    let name = node.name_any();
    let lease_due = memory
        .lease_renewed_at
        .is_none_or(|t| since(now, t) >= renew_interval);
    if lease_due {
        match lease::renew(leases, node, memory.lease.take(), now).await {
            Ok(lease) => {
                memory.lease = Some(lease);
                memory.lease_renewed_at = Some(now);
            }
            Err(e) if is_not_found(&e) => return true,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "kwok kubelet: renewing the node Lease failed; retrying")
            }
        }
    }

    let machine = Machine::of(node);
    let devices_ready = machine.as_ref().is_none_or(|m| m.devices_ready(now));
    let last_beat = ready_heartbeat(node).max(memory.status_sent.map(|(at, _)| at));
    let heartbeat_due = last_beat.is_none_or(|t| since(now, t) >= STATUS_INTERVAL);
    let stale = !is_current(node, machine.as_ref(), now);
    let sent_recently = memory
        .status_sent
        .is_some_and(|(at, had)| had == devices_ready && since(now, at) < RESEND_AFTER);
    if heartbeat_due || (stale && !sent_recently) {
        let status = reported_status(node, machine.as_ref(), now);
        let patch = serde_json::json!({ "status": status });
        match nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => memory.status_sent = Some((now, devices_ready)),
            Err(e) if is_not_found(&e) => return true,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "kwok kubelet: reporting node status failed; retrying")
            }
        }
    }
    false
}

impl KwokKubelet {
    /// How many pods the kubelet has looked at (tests: how far a pass got).
    #[cfg(test)]
    pub(crate) fn pods_seen(&self) -> usize {
        self.memory.pods.len()
    }

    /// The write `pod` needs now (recorded as done), if any.
    fn pod_write(
        &mut self,
        pod: &Pod,
        now: DateTime<Utc>,
    ) -> Option<impl Future<Output = ()> + use<>> {
        let key = pod_key(pod);
        let memory = self.memory.pods.entry(key).or_default();
        let step = match next_step(pod, now) {
            Ok(Some(step)) => step,
            Ok(None) => return None,
            Err(why) => {
                if !memory.warned {
                    memory.warned = true;
                    tracing::warn!(pod = %format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()), "kwok kubelet: {why}; the pod runs until deleted");
                }
                return None;
            }
        };
        if memory
            .done
            .is_some_and(|(did, at)| did == step && since(now, at) < RESEND_AFTER)
        {
            return None;
        }
        memory.done = Some((step, now));

        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        // What the write needs, taken now: the future owns it.
        let write = match step {
            PodStep::Delete => PodWrite::Delete(DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: pod.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            }),
            PodStep::Start => PodWrite::Status(Box::new(pods::running_status(pod, now))),
            PodStep::Finish(started) => {
                PodWrite::Status(Box::new(pods::succeeded_status(pod, started, now)))
            }
        };
        Some(async move {
            let result = match write {
                PodWrite::Delete(params) => match pods.delete(&name, &params).await {
                    Err(e) if is_not_found(&e) => Ok(()),
                    other => other.map(|_| ()),
                },
                PodWrite::Status(status) => {
                    let patch = serde_json::json!({ "status": status });
                    pods.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                        .await
                        .map(|_| ())
                }
            };
            if let Err(e) = result {
                tracing::warn!(pod = %format!("{namespace}/{name}"), error = %e, ?step, "kwok kubelet: acting for a pod failed; retrying");
            }
        })
    }
}

/// A pod write, with what it sends.
enum PodWrite {
    Delete(DeleteParams),
    Status(Box<k8s_openapi::api::core::v1::PodStatus>),
}
