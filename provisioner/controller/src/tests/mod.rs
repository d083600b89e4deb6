//! The controller's reconcile logic against a mocked API server, scenario by scenario: a real
//! `kube::Client` over `tower_test`, the kwok cloud (Node objects) as the provider, stores
//! refilled from the server's state between passes as watches would, and a manual clock.

mod at_rest;
mod capacity_buffers;
mod dra;
mod fake_api;
mod pass_latency;
mod pod_groups;
mod provisioning_requests;
mod reservations;
mod scenarios;
mod scheduler_disobeys;
mod secrets;
mod spans;
mod stale_node;

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::{Clock, CloudProvider, ManualClock};
use quartermaster_engine::EngineConfig;
use quartermaster_kwok::{KwokCloud, KwokConfig};
use quartermaster_pricing::{Catalog, Cloud};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::context::{Context, Providers};
use crate::driver::Driver;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::stores::{Stores, Writers};
use crate::writes::Writer;

pub use fake_api::FakeApi;

pub const QM: &str = "quartermaster.dev";
/// The DRA API group.
pub const RESOURCE: &str = "resource.k8s.io";

pub fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

/// A cluster (the fake API server), the controller's context over it, and a driver.
pub struct Env {
    pub api: FakeApi,
    pub writers: Writers,
    pub ctx: Arc<Context>,
    pub clock: Arc<ManualClock>,
    pub driver: Driver,
}

impl Env {
    /// A leading controller over `api`.
    pub fn new(api: FakeApi) -> Self {
        Self::with_leadership(api, Leadership::always())
    }

    pub fn with_leadership(api: FakeApi, leadership: Leadership) -> Self {
        Self::with_provider(api, leadership, |client, catalog, clock| {
            let kwok = KwokCloud::new(
                client,
                Cloud::Aws,
                catalog,
                KwokConfig::default(),
                clock as Arc<dyn Clock>,
            )
            .expect("default kwok config");
            Arc::new(kwok) as Arc<dyn CloudProvider>
        })
    }

    /// A controller over `api` whose AWS provider `provider` makes (the kwok cloud unless a
    /// test needs another).
    pub fn with_provider(
        api: FakeApi,
        leadership: Leadership,
        provider: impl FnOnce(kube::Client, Catalog, Arc<ManualClock>) -> Arc<dyn CloudProvider>,
    ) -> Self {
        let client = api.client();
        let clock = Arc::new(ManualClock::new(t0()));
        let writers = Writers::default();
        let stores = Stores::from_writers(&writers);
        let catalog = Catalog::embedded();
        let mut providers = Providers::new();
        providers.insert(
            Cloud::Aws,
            provider(client.clone(), catalog.clone(), clock.clone()),
        );
        let ctx = Arc::new(Context {
            stores,
            writer: Writer::new(
                crate::client::LoopClients::shared(client),
                leadership.subscribe(),
                Some("test".into()),
            ),
            providers,
            catalog,
            clock: clock.clone(),
            metrics: Arc::new(Metrics::new()),
            cluster_name: "test".into(),
            region: None,
            preference_policy: None,
            nominate_pods: Default::default(),
            leadership,
            page: Default::default(),
            headroom: Default::default(),
        });
        let config = EngineConfig {
            claim_name_tag: "t".into(),
            ..EngineConfig::default()
        };
        let driver = Driver::new(ctx.clone(), config);
        let mut env = Self {
            api,
            writers,
            ctx,
            clock,
            driver,
        };
        env.sync();
        env
    }

    /// A new controller (a restart, or a new leader) over the same cluster.
    pub fn restart(self) -> Self {
        Self::new(self.api)
    }

    /// Refills the stores from the server, as watches would.
    pub fn sync(&mut self) {
        let api = &self.api;
        Writers::replace(&mut self.writers.pods, typed(api.list("", "pods")));
        Writers::replace(&mut self.writers.nodes, typed(api.list("", "nodes")));
        Writers::replace(
            &mut self.writers.node_pools,
            typed(api.list(QM, "nodepools")),
        );
        Writers::replace(
            &mut self.writers.node_claims,
            typed(api.list(QM, "nodeclaims")),
        );
        Writers::replace(
            &mut self.writers.aws_node_classes,
            typed(api.list(QM, "awsnodeclasses")),
        );
        Writers::replace(
            &mut self.writers.daemon_sets,
            typed(api.list("apps", "daemonsets")),
        );
        Writers::replace(
            &mut self.writers.provisioning_requests,
            typed(api.list("autoscaling.x-k8s.io", "provisioningrequests")),
        );
        Writers::replace(
            &mut self.writers.pod_templates,
            typed(api.list("", "podtemplates")),
        );
        Writers::replace(
            &mut self.writers.capacity_buffers,
            typed(api.list("autoscaling.x-k8s.io", "capacitybuffers")),
        );
        Writers::replace(
            &mut self.writers.volcano_pod_groups,
            typed(api.list("scheduling.volcano.sh", "podgroups")),
        );
        Writers::replace(
            &mut self.writers.coscheduling_pod_groups,
            typed(api.list("scheduling.x-k8s.io", "podgroups")),
        );
        Writers::replace(
            &mut self.writers.device_classes,
            typed(api.list(RESOURCE, "deviceclasses")),
        );
        Writers::replace(
            &mut self.writers.resource_claims,
            typed(api.list(RESOURCE, "resourceclaims")),
        );
        Writers::replace(
            &mut self.writers.resource_claim_templates,
            typed(api.list(RESOURCE, "resourceclaimtemplates")),
        );
        Writers::replace(
            &mut self.writers.resource_slices,
            typed(api.list(RESOURCE, "resourceslices")),
        );
    }

    /// Lets spawned tasks run to completion (paused tokio time moves through their sleeps).
    pub async fn settle(&mut self) {
        for _ in 0..20 {
            tokio::time::sleep(std::time::Duration::from_millis(150)).await;
            tokio::task::yield_now().await;
        }
    }

    /// Moves the clock to `t0 + seconds`, runs one pass, lets its tasks finish, refills stores.
    pub async fn pass_at(&mut self, seconds: i64) {
        let now = t0() + TimeDelta::seconds(seconds);
        self.clock.set(now);
        self.sync();
        self.driver.pass(now);
        self.settle().await;
        self.sync();
    }

    /// Several passes one second apart (batch windows close, statuses follow).
    pub async fn passes(&mut self, from: i64, to: i64) {
        for s in from..=to {
            self.pass_at(s).await;
        }
    }
}

fn typed<K: DeserializeOwned>(values: Vec<Value>) -> Vec<K> {
    values
        .into_iter()
        .inspect(|v| assert!(v["metadata"]["name"].is_string(), "nameless object: {v}"))
        .map(|v| serde_json::from_value(v).expect("the fake server holds valid objects"))
        .collect()
}

/// A cluster with an AWSNodeClass, a GPU NodePool and the given pending pods.
pub fn cluster_with_gpu_pool(pods: &[(&str, u32)]) -> FakeApi {
    let api = FakeApi::default();
    api.insert(
        QM,
        "awsnodeclasses",
        json!({"apiVersion": "quartermaster.dev/v1", "kind": "AWSNodeClass",
            "metadata": {"name": "default"},
            "spec": {"region": "us-east-1", "amiFamily": "AL2023",
                "role": "KarpenterNodeRole", "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}}),
    );
    api.insert(
        QM,
        "nodepools",
        json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
            "metadata": {"name": "gpu"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge", "g5.2xlarge"]},
                    {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
            }},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}}}),
    );
    for (name, gpus) in pods {
        api.insert("", "pods", pending_pod(name, *gpus));
    }
    api
}

/// Every call the controller made to `api` is one the chart's RBAC (the tables in `rbac.rs`)
/// allows.
pub fn assert_rbac_allows_every_call(api: &FakeApi) {
    use crate::rbac::{CLUSTER_RULES, KWOK_CLUSTER_RULES, NAMESPACE_RULES, allows};
    for r in api.log() {
        let allowed = allows(CLUSTER_RULES, &r.group, &r.resource, r.verb())
            || allows(KWOK_CLUSTER_RULES, &r.group, &r.resource, r.verb())
            || allows(NAMESPACE_RULES, &r.group, &r.resource, r.verb());
        assert!(
            allowed,
            "{} ({}) is not in the RBAC tables",
            r.short(),
            r.group
        );
    }
}

/// A pod the scheduler gave up on, asking for `gpus` GPUs.
pub fn pending_pod(name: &str, gpus: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "containers": [{"name": "main", "image": "vllm",
                "resources": {"requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": gpus.to_string()},
                              "limits": {"nvidia.com/gpu": gpus.to_string()}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        },
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/0 nodes are available"}]}})
}
