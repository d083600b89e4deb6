//! Watches, not polls: one reflector per kind the controller reads, each filling an in-memory
//! store that every other part reads. The driver is woken whenever any store changes; no
//! decision is made before every store has synced once. Objects are cached without their
//! `metadata.managedFields` (nothing here reads them; on Pods and Nodes they are often the
//! largest part of the object): [`trim`] runs on every object before the store takes it.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::{StreamExt, TryStreamExt as _};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplate};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use quartermaster_policies::{AWSNodeClass, AzureNodeClass, GCPNodeClass, NodeClaim, NodePool};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use crate::pod_groups::{CoschedulingPodGroup, VolcanoPodGroup};
use crate::provisioning_requests::ProvisioningRequest;

/// The stores of every kind the controller reads.
#[derive(Clone)]
pub struct Stores {
    /// Pods (all namespaces).
    pub pods: Store<Pod>,
    /// Nodes.
    pub nodes: Store<Node>,
    /// NodePools.
    pub node_pools: Store<NodePool>,
    /// NodeClaims.
    pub node_claims: Store<NodeClaim>,
    /// AWSNodeClasses.
    pub aws_node_classes: Store<AWSNodeClass>,
    /// GCPNodeClasses.
    pub gcp_node_classes: Store<GCPNodeClass>,
    /// AzureNodeClasses.
    pub azure_node_classes: Store<AzureNodeClass>,
    /// DaemonSets (their pods are overhead on every new node).
    pub daemon_sets: Store<DaemonSet>,
    /// PodDisruptionBudgets (honoured by evictions; read for status).
    pub pdbs: Store<PodDisruptionBudget>,
    /// ProvisioningRequests (`autoscaling.x-k8s.io/v1`; empty where the CRD is not installed).
    pub provisioning_requests: Store<ProvisioningRequest>,
    /// PodTemplates (what ProvisioningRequests and CapacityBuffers name).
    pub pod_templates: Store<PodTemplate>,
    /// CapacityBuffers (`autoscaling.x-k8s.io/v1alpha1`; empty where the CRD is not installed).
    pub capacity_buffers: Store<crate::capacity_buffers::CapacityBuffer>,
    /// Volcano PodGroups (empty where the CRD is not installed).
    pub volcano_pod_groups: Store<VolcanoPodGroup>,
    /// Coscheduling PodGroups (empty where the CRD is not installed).
    pub coscheduling_pod_groups: Store<CoschedulingPodGroup>,
    /// DeviceClasses (`resource.k8s.io/v1`; empty where the cluster does not serve it).
    pub device_classes: Store<DeviceClass>,
    /// ResourceClaims (`resource.k8s.io/v1`; empty where the cluster does not serve it).
    pub resource_claims: Store<ResourceClaim>,
    /// ResourceClaimTemplates (`resource.k8s.io/v1`; empty where the cluster does not serve it).
    pub resource_claim_templates: Store<ResourceClaimTemplate>,
    /// ResourceSlices (`resource.k8s.io/v1`; empty where the cluster does not serve it): the
    /// devices the DRA drivers publish, per node.
    pub resource_slices: Store<ResourceSlice>,
    changed: Arc<Notify>,
    synced: Arc<AtomicUsize>,
}

/// How many kinds are watched (readiness waits for all of them).
const KINDS: usize = 18;

impl Stores {
    /// Starts one watch per kind on `client`; the returned future drives them all (run it in a
    /// task). Watch errors (429, 5xx, a dropped connection) are retried with backoff by the
    /// watcher and never end the stream.
    pub fn start(client: &Client) -> (Self, impl std::future::Future<Output = ()> + Send + use<>) {
        let changed = Arc::new(Notify::new());
        let synced = Arc::new(AtomicUsize::new(0));
        let (pods, w_pods) = reflector::store();
        let (nodes, w_nodes) = reflector::store();
        let (node_pools, w_pools) = reflector::store();
        let (node_claims, w_claims) = reflector::store();
        let (aws, w_aws) = reflector::store();
        let (gcp, w_gcp) = reflector::store();
        let (azure, w_azure) = reflector::store();
        let (daemon_sets, w_ds) = reflector::store();
        let (pdbs, w_pdbs) = reflector::store();
        let (provisioning_requests, w_provreqs) = reflector::store();
        let (pod_templates, w_templates) = reflector::store();
        let (capacity_buffers, w_buffers) = reflector::store();
        let (volcano_pod_groups, w_volcano) = reflector::store();
        let (coscheduling_pod_groups, w_coscheduling) = reflector::store();
        let (device_classes, w_classes) = reflector::store();
        let (resource_claims, w_rclaims) = reflector::store();
        let (resource_claim_templates, w_rtemplates) = reflector::store();
        let (resource_slices, w_slices) = reflector::store();
        let streams = vec![
            watch(Api::<Pod>::all(client.clone()), w_pods, &changed, &synced),
            watch(Api::<Node>::all(client.clone()), w_nodes, &changed, &synced),
            watch(
                Api::<NodePool>::all(client.clone()),
                w_pools,
                &changed,
                &synced,
            ),
            watch(
                Api::<NodeClaim>::all(client.clone()),
                w_claims,
                &changed,
                &synced,
            ),
            watch(
                Api::<AWSNodeClass>::all(client.clone()),
                w_aws,
                &changed,
                &synced,
            ),
            watch(
                Api::<GCPNodeClass>::all(client.clone()),
                w_gcp,
                &changed,
                &synced,
            ),
            watch(
                Api::<AzureNodeClass>::all(client.clone()),
                w_azure,
                &changed,
                &synced,
            ),
            watch(
                Api::<DaemonSet>::all(client.clone()),
                w_ds,
                &changed,
                &synced,
            ),
            watch(
                Api::<PodDisruptionBudget>::all(client.clone()),
                w_pdbs,
                &changed,
                &synced,
            ),
            watch_optional(
                Api::<ProvisioningRequest>::all(client.clone()),
                w_provreqs,
                &changed,
                &synced,
            ),
            watch(
                Api::<PodTemplate>::all(client.clone()),
                w_templates,
                &changed,
                &synced,
            ),
            watch_optional(
                Api::<crate::capacity_buffers::CapacityBuffer>::all(client.clone()),
                w_buffers,
                &changed,
                &synced,
            ),
            watch_optional(
                Api::<VolcanoPodGroup>::all(client.clone()),
                w_volcano,
                &changed,
                &synced,
            ),
            watch_optional(
                Api::<CoschedulingPodGroup>::all(client.clone()),
                w_coscheduling,
                &changed,
                &synced,
            ),
            // Dynamic Resource Allocation: served from Kubernetes 1.34 on (v1).
            watch_optional(
                Api::<DeviceClass>::all(client.clone()),
                w_classes,
                &changed,
                &synced,
            ),
            watch_optional(
                Api::<ResourceClaim>::all(client.clone()),
                w_rclaims,
                &changed,
                &synced,
            ),
            watch_optional(
                Api::<ResourceClaimTemplate>::all(client.clone()),
                w_rtemplates,
                &changed,
                &synced,
            ),
            watch_optional(
                Api::<ResourceSlice>::all(client.clone()),
                w_slices,
                &changed,
                &synced,
            ),
        ];
        let stores = Self {
            pods,
            nodes,
            node_pools,
            node_claims,
            aws_node_classes: aws,
            gcp_node_classes: gcp,
            azure_node_classes: azure,
            daemon_sets,
            pdbs,
            provisioning_requests,
            pod_templates,
            capacity_buffers,
            volcano_pod_groups,
            coscheduling_pod_groups,
            device_classes,
            resource_claims,
            resource_claim_templates,
            resource_slices,
            changed,
            synced,
        };
        let run = async move {
            futures::future::join_all(streams).await;
        };
        (stores, run)
    }

    /// Stores read from writers filled by hand (tests, or a one-off listing): every kind
    /// counts as synced. The stores see later changes made through the writers.
    pub fn from_writers(w: &Writers) -> Self {
        Self {
            pods: w.pods.as_reader(),
            nodes: w.nodes.as_reader(),
            node_pools: w.node_pools.as_reader(),
            node_claims: w.node_claims.as_reader(),
            aws_node_classes: w.aws_node_classes.as_reader(),
            gcp_node_classes: w.gcp_node_classes.as_reader(),
            azure_node_classes: w.azure_node_classes.as_reader(),
            daemon_sets: w.daemon_sets.as_reader(),
            pdbs: w.pdbs.as_reader(),
            provisioning_requests: w.provisioning_requests.as_reader(),
            pod_templates: w.pod_templates.as_reader(),
            capacity_buffers: w.capacity_buffers.as_reader(),
            volcano_pod_groups: w.volcano_pod_groups.as_reader(),
            coscheduling_pod_groups: w.coscheduling_pod_groups.as_reader(),
            device_classes: w.device_classes.as_reader(),
            resource_claims: w.resource_claims.as_reader(),
            resource_claim_templates: w.resource_claim_templates.as_reader(),
            resource_slices: w.resource_slices.as_reader(),
            changed: Arc::new(Notify::new()),
            synced: Arc::new(AtomicUsize::new(KINDS)),
        }
    }

    /// Whether every store has completed its first list.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire) >= KINDS
    }

    /// Resolves when some store changed since the last call.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Wakes whoever waits in [`Stores::changed`] (outcomes of the controller's own calls).
    pub fn poke(&self) {
        self.changed.notify_one();
    }

    /// A digest of every store's contents (see [`digest`]): equal digests mean that no object
    /// was added, changed or removed in between. One pass over each store, no allocation but
    /// the lists.
    pub fn digests(&self) -> StoreDigests {
        StoreDigests([
            digest(&self.pods),
            digest(&self.nodes),
            digest(&self.node_pools),
            digest(&self.node_claims),
            digest(&self.aws_node_classes),
            digest(&self.gcp_node_classes),
            digest(&self.azure_node_classes),
            digest(&self.daemon_sets),
            digest(&self.pdbs),
            digest(&self.provisioning_requests),
            digest(&self.pod_templates),
            digest(&self.capacity_buffers),
            digest(&self.volcano_pod_groups),
            digest(&self.coscheduling_pod_groups),
            digest(&self.device_classes),
            digest(&self.resource_claims),
            digest(&self.resource_claim_templates),
            digest(&self.resource_slices),
        ])
    }

    /// The Pod `namespace/name`, looked up by key (never a copy of the whole store).
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.get(&ObjectRef::new(name).within(namespace))
    }

    /// The Node `name`.
    pub fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(&ObjectRef::new(name))
    }

    /// The NodeClaim `name`.
    pub fn node_claim(&self, name: &str) -> Option<Arc<NodeClaim>> {
        self.node_claims.get(&ObjectRef::new(name))
    }

    /// The NodePool `name`.
    pub fn node_pool(&self, name: &str) -> Option<Arc<NodePool>> {
        self.node_pools.get(&ObjectRef::new(name))
    }

    /// The AWSNodeClass `name`.
    pub fn aws_node_class(&self, name: &str) -> Option<Arc<AWSNodeClass>> {
        self.aws_node_classes.get(&ObjectRef::new(name))
    }

    /// The GCPNodeClass `name`.
    pub fn gcp_node_class(&self, name: &str) -> Option<Arc<GCPNodeClass>> {
        self.gcp_node_classes.get(&ObjectRef::new(name))
    }

    /// The AzureNodeClass `name`.
    pub fn azure_node_class(&self, name: &str) -> Option<Arc<AzureNodeClass>> {
        self.azure_node_classes.get(&ObjectRef::new(name))
    }
}

/// The digests of every store, in [`Stores`]' field order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreDigests([u64; KINDS]);

impl StoreDigests {
    /// Only the stores in `kinds` (indexes in [`Stores`]' field order); the others read as 0.
    fn only(&self, kinds: &[usize]) -> Self {
        let mut out = [0; KINDS];
        for &k in kinds {
            out[k] = self.0[k];
        }
        Self(out)
    }

    /// What NodeClaim and NodePool statuses are built from: NodePools, NodeClaims and the
    /// NodeClasses.
    pub fn of_statuses(&self) -> Self {
        self.only(&[2, 3, 4, 5, 6])
    }

    /// What reading pods and the configuration depends on, but for which nodes are
    /// Quartermaster's: every store except Nodes, NodeClaims and PodDisruptionBudgets.
    pub fn of_pods_and_config(&self) -> Self {
        self.only(&[0, 2, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17])
    }
}

/// A digest of the objects in `store` by uid and `resourceVersion`, whatever their order: it
/// moves when one is added, removed or changed. A store holding an object without a uid or a
/// `resourceVersion` (never so from an API server) gets a digest that matches nothing, so
/// nothing is ever taken as unchanged on its account.
pub fn digest<K>(store: &Store<K>) -> u64
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    use std::hash::BuildHasher;
    static UNMATCHED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // The same seed every call, so that equal stores give equal digests.
    let hasher = foldhash::fast::FixedState::with_seed(0);
    let objects = store.state();
    let mut sum = objects.len() as u64;
    for object in &objects {
        let meta = object.meta();
        let (Some(uid), Some(version)) = (&meta.uid, &meta.resource_version) else {
            // A value no other call gives.
            return UNMATCHED.fetch_add(1, Ordering::Relaxed) | (1 << 63);
        };
        sum = sum.wrapping_add(hasher.hash_one((uid, version)));
    }
    sum
}

/// Writers for [`Stores::from_writers`]: fill them with [`Writers::replace`].
#[allow(missing_docs)]
#[derive(Default)]
pub struct Writers {
    pub pods: reflector::store::Writer<Pod>,
    pub nodes: reflector::store::Writer<Node>,
    pub node_pools: reflector::store::Writer<NodePool>,
    pub node_claims: reflector::store::Writer<NodeClaim>,
    pub aws_node_classes: reflector::store::Writer<AWSNodeClass>,
    pub gcp_node_classes: reflector::store::Writer<GCPNodeClass>,
    pub azure_node_classes: reflector::store::Writer<AzureNodeClass>,
    pub daemon_sets: reflector::store::Writer<DaemonSet>,
    pub pdbs: reflector::store::Writer<PodDisruptionBudget>,
    pub provisioning_requests: reflector::store::Writer<ProvisioningRequest>,
    pub pod_templates: reflector::store::Writer<PodTemplate>,
    pub capacity_buffers: reflector::store::Writer<crate::capacity_buffers::CapacityBuffer>,
    pub volcano_pod_groups: reflector::store::Writer<VolcanoPodGroup>,
    pub coscheduling_pod_groups: reflector::store::Writer<CoschedulingPodGroup>,
    pub device_classes: reflector::store::Writer<DeviceClass>,
    pub resource_claims: reflector::store::Writer<ResourceClaim>,
    pub resource_claim_templates: reflector::store::Writer<ResourceClaimTemplate>,
    pub resource_slices: reflector::store::Writer<ResourceSlice>,
}

impl Writers {
    /// Replaces everything in `writer`'s store with `objects`, as a watch's re-list would
    /// (each [`trim`]med as a watch's are).
    pub fn replace<K>(writer: &mut reflector::store::Writer<K>, objects: Vec<K>)
    where
        K: Resource + kube::runtime::reflector::Lookup + Clone,
        <K as kube::runtime::reflector::Lookup>::DynamicType: Eq + std::hash::Hash + Clone,
    {
        writer.apply_watcher_event(&watcher::Event::Init);
        for mut o in objects {
            trim(&mut o);
            writer.apply_watcher_event(&watcher::Event::InitApply(o));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
    }
}

/// What the stores keep of an object: everything but `metadata.managedFields` (the
/// server-side-apply field ownership, which the controller never reads).
pub fn trim<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

fn watch<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    changed: &Arc<Notify>,
    synced: &Arc<AtomicUsize>,
) -> futures::future::BoxFuture<'static, ()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    watch_kind(api, writer, changed, synced, false)
}

/// [`watch`] for a kind whose CRD may not be installed (ProvisioningRequests come with Cluster
/// Autoscaler's or Kueue's CRDs, PodGroups with Volcano's or the coscheduling plugin's) or
/// whose API group the cluster may not serve (`resource.k8s.io/v1` before Kubernetes 1.34): a
/// failed first list counts as synced (empty), so decisions do not wait for a kind the cluster
/// does not serve; the watch keeps retrying.
fn watch_optional<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    changed: &Arc<Notify>,
    synced: &Arc<AtomicUsize>,
) -> futures::future::BoxFuture<'static, ()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    watch_kind(api, writer, changed, synced, true)
}

/// How often a kind that is not served is looked for again.
const OPTIONAL_KIND_RECHECK: std::time::Duration = std::time::Duration::from_secs(300);

fn watch_kind<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    changed: &Arc<Notify>,
    synced: &Arc<AtomicUsize>,
    optional: bool,
) -> futures::future::BoxFuture<'static, ()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let changed = changed.clone();
    let synced = synced.clone();
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    // Both PodGroup kinds are `PodGroup`: the API version tells which is not served.
    let api_version = K::api_version(&K::DynamicType::default()).into_owned();
    Box::pin(async move {
        let mut seen_init = false;
        // A kind that may not be served is looked for every few minutes, with one INFO line,
        // instead of a watch that fails (and logs) every second.
        if optional {
            let mut said = false;
            loop {
                match api.list(&kube::api::ListParams::default().limit(1)).await {
                    Ok(_) => break,
                    Err(kube::Error::Api(e)) if e.code == 404 => {
                        if !seen_init {
                            seen_init = true;
                            synced.fetch_add(1, Ordering::AcqRel);
                            changed.notify_one();
                        }
                        if !said {
                            said = true;
                            tracing::info!(
                                kind,
                                api_version,
                                every = ?OPTIONAL_KIND_RECHECK,
                                "kind not served (CRD not installed or API version not enabled?); read as empty and looked for again periodically"
                            );
                        }
                        tokio::time::sleep(OPTIONAL_KIND_RECHECK).await;
                    }
                    // Anything else (RBAC, a flaky API server): the watch below retries it.
                    Err(_) => break,
                }
            }
            if said {
                tracing::info!(kind, api_version, "kind served now; watching it");
            }
        }
        let stream = watcher(api, watcher::Config::default().any_semantic())
            .default_backoff()
            .modify(trim)
            .reflect(writer);
        let mut stream = std::pin::pin!(stream.into_stream());
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::InitDone) => {
                    if !seen_init {
                        seen_init = true;
                        synced.fetch_add(1, Ordering::AcqRel);
                        tracing::debug!(kind, "store synced");
                    }
                    changed.notify_one();
                }
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                Ok(_) => changed.notify_one(),
                Err(e) if optional && !seen_init => {
                    seen_init = true;
                    synced.fetch_add(1, Ordering::AcqRel);
                    changed.notify_one();
                    tracing::info!(kind, api_version, error = %e, "kind not served (CRD not installed or API version not enabled?); read as empty, watch retried");
                }
                Err(e) => tracing::warn!(kind, error = %e, "watch failed; retrying with backoff"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};

    use super::*;

    /// A `metadata.managedFields` as the API server writes it.
    fn managed_fields() -> Value {
        json!([{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
            "time": "2026-12-04T10:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}])
    }

    /// Runs the watch of `K` against a server whose first list answers `list` (at `path`), and
    /// returns the store once it has synced.
    async fn watched<K>(path: &str, list: Value) -> Store<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
    {
        let (service, mut server) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let (changed, synced) = (Arc::new(Notify::new()), Arc::new(AtomicUsize::new(0)));
        let (store, writer) = reflector::store::<K>();
        let run = tokio::spawn(watch(Api::<K>::all(client), writer, &changed, &synced));
        let (request, reply) = server.next_request().await.expect("the first list");
        assert_eq!(request.uri().path(), path);
        reply.send_response(
            Response::builder()
                .body(Body::from(serde_json::to_vec(&list).expect("JSON")))
                .expect("a response"),
        );
        store.wait_until_ready().await.expect("the store synced");
        run.abort();
        store
    }

    #[tokio::test]
    async fn pods_and_nodes_are_cached_without_their_managed_fields() {
        let pods: Store<Pod> = watched(
            "/api/v1/pods",
            json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "7"},
                "items": [{"metadata": {"name": "llm-0", "namespace": "ml", "resourceVersion": "7",
                    "labels": {"app": "llm"}, "managedFields": managed_fields()},
                    "spec": {"containers": [{"name": "main", "image": "vllm"}]}}]}),
        )
        .await;
        let pod = pods
            .get(&ObjectRef::new("llm-0").within("ml"))
            .expect("the pod is cached");
        assert_eq!(pod.metadata.managed_fields, None, "{pod:?}");
        assert_eq!(
            pod.metadata.labels.as_ref().and_then(|l| l.get("app")),
            Some(&"llm".to_owned()),
            "the rest of the object is kept"
        );

        let nodes: Store<Node> = watched(
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "9"},
                "items": [{"metadata": {"name": "node-0", "resourceVersion": "9",
                    "managedFields": managed_fields()},
                    "spec": {"providerID": "kwok://node-0"}}]}),
        )
        .await;
        let node = nodes
            .get(&ObjectRef::new("node-0"))
            .expect("the node is cached");
        assert_eq!(node.metadata.managed_fields, None, "{node:?}");
        assert_eq!(
            node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
            Some("kwok://node-0")
        );
    }

    #[test]
    fn stores_filled_by_hand_are_trimmed_too() {
        let mut writer = reflector::store::Writer::<Pod>::default();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml", "managedFields": managed_fields()}
        }))
        .expect("a Pod");
        assert!(pod.metadata.managed_fields.is_some());
        Writers::replace(&mut writer, vec![pod]);
        let cached = writer
            .as_reader()
            .get(&ObjectRef::new("p").within("ml"))
            .expect("cached");
        assert_eq!(cached.metadata.managed_fields, None);
    }
}
