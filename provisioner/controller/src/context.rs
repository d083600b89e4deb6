//! What every part of the controller shares: the stores (reads), the writer (gated writes),
//! the cloud providers, the catalog, the clock and the metrics.

use std::collections::BTreeMap;
use std::sync::Arc;

use quartermaster_cloud::{Clock, CloudProvider};
use quartermaster_pricing::{Catalog, Cloud};

use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::stores::Stores;
use crate::writes::Writer;

/// The cloud provider of each cloud the NodePools may use.
pub type Providers = BTreeMap<Cloud, Arc<dyn CloudProvider>>;

/// Shared by the driver and the tasks it starts.
pub struct Context {
    /// Watched objects.
    pub stores: Stores,
    /// Gated writes to the API server.
    pub writer: Writer,
    /// Cloud providers by cloud.
    pub providers: Providers,
    /// The price catalog.
    pub catalog: Catalog,
    /// Now.
    pub clock: Arc<dyn Clock>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The cluster's name (tags, cost reports).
    pub cluster_name: String,
    /// The cluster's region (`--region`): NodePools whose NodeClass names none buy here.
    pub region: Option<String>,
    /// `--preference-policy`: overrides every NodePool's `spec.preferencePolicy`.
    pub preference_policy: Option<quartermaster_policies::PreferencePolicy>,
    /// `--nominate-pods`: which pending pods get `status.nominatedNodeName`.
    pub nominate_pods: NominatePods,
    /// Whether this replica leads.
    pub leadership: Leadership,
    /// What the provisioning loop leaves for the page (`/`, `/status.json`).
    pub page: crate::page::PageState,
    /// The room CapacityBuffers hold (the leader's last pass), for `/cost` and the page.
    pub headroom: crate::fleet::Headroom,
}

/// Which pending pods the controller tells the kube-scheduler about
/// (`status.nominatedNodeName`, KEP-5278). A hint only: nothing waits for the scheduler to obey.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NominatePods {
    /// Pods planned on a node the controller brought up, written as the node registers, so the
    /// scheduler keeps that room for them (an 8-GPU node bought for 8-GPU pods is not filled
    /// with 1-GPU pods first). Pods planned on room that already existed are left to the
    /// scheduler: it finds that room itself, and a reservation the cluster has since given to
    /// another pod makes every node look full to it.
    #[default]
    NewNodes,
    /// Also pods planned on existing room (every `Action::Bind`).
    All,
    /// None: the scheduler is told nothing.
    Off,
}

impl Context {
    /// Runs `work` in a task that is dropped the moment this replica stops leading: no call to
    /// the API server or a cloud is made by a replica that lost the lease.
    pub fn spawn<F>(&self, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let mut leadership = self.leadership.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = leadership.lost() => {}
                () = work => {}
            }
        });
    }

    /// The provider of `cloud`.
    pub fn provider(&self, cloud: Cloud) -> Option<&Arc<dyn CloudProvider>> {
        self.providers.get(&cloud)
    }
}
