//! The controller as one function: watches, leader election, HTTP endpoints, and the
//! provisioning loop while this replica leads.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use quartermaster_cloud::Clock;
use quartermaster_engine::EngineConfig;
use quartermaster_pricing::Catalog;
use tokio::sync::watch;

use crate::ControllerError;
use crate::client::LoopClients;
use crate::context::{Context, Providers};
use crate::driver::Driver;
use crate::leader::{LeaderElector, LeaderSettings, Leadership};
use crate::metrics::Metrics;
use crate::stores::Stores;
use crate::writes::Writer;

/// How the controller runs (the flags, resolved).
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--cluster-name`.
    pub cluster_name: String,
    /// `--metrics-port`: `/metrics` and `/cost`.
    pub metrics_port: u16,
    /// `--health-probe-port`: `/healthz` and `/readyz`.
    pub health_probe_port: u16,
    /// Leader election (`None` with `--leader-elect=false`).
    pub leader: Option<LeaderSettings>,
    /// This replica's name (events' reporting instance).
    pub identity: String,
    /// Engine timings (`--batch-idle-duration`, `--batch-max-duration`).
    pub engine: EngineConfig,
    /// Longest time between two passes of the provisioning loop.
    pub resync: Duration,
    /// `--region`: the cluster's region, where NodePools whose NodeClass names no region buy.
    pub region: Option<String>,
    /// `--preference-policy`: overrides every NodePool's `spec.preferencePolicy`.
    pub preference_policy: Option<quartermaster_policies::PreferencePolicy>,
    /// `--nominate-pods`: which pending pods get `status.nominatedNodeName`.
    pub nominate_pods: crate::context::NominatePods,
    /// `--price-refresh-interval`: live prices while leading (`None`: the catalog as started).
    pub price_refresh: Option<crate::price_refresh::PriceRefresh>,
}

/// Work that runs only while this replica leads (the kwok cloud's kubelet): started when it
/// starts leading, given a future that resolves when it must stop.
pub type LeaderTask = Box<dyn Fn(BoxFuture<'static, ()>) -> BoxFuture<'static, ()> + Send + Sync>;

/// The controller's Kubernetes clients: the loop's three ([`LoopClients`], one rate limit and
/// three queues) and the Lease's, behind a rate limit of its own: a provisioning loop with a
/// long queue of writes must never delay a lease renewal (a missed renew deadline stops every
/// write and rebuilds the engine).
#[derive(Clone)]
pub struct Clients {
    /// The provisioning loop's: watches, reads and writes, NodeClaim creates, Events
    /// (`--kube-client-qps` for the three together).
    pub api: LoopClients,
    /// Leader election: the Lease's reads and renewals.
    pub leader_election: kube::Client,
}

impl Clients {
    /// One client for everything (tests; a rate limit shared with the renewals).
    pub fn shared(client: kube::Client) -> Self {
        Self {
            api: LoopClients::shared(client.clone()),
            leader_election: client,
        }
    }
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    clients: Clients,
    providers: Providers,
    catalog: Catalog,
    clock: Arc<dyn Clock>,
    while_leading: Vec<LeaderTask>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControllerError> {
    let client = clients.api.api.clone();
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });

    let (stores, watching) = Stores::start(&client);
    tokio::spawn(watching);

    let leadership = match settings.leader.clone() {
        Some(leader) => {
            let (elector, leadership) =
                LeaderElector::new(clients.leader_election.clone(), leader, clock.clone())?;
            tokio::spawn(elector.run(stopped()));
            leadership
        }
        None => Leadership::always(),
    };
    let metrics = Arc::new(Metrics::new());
    let ctx = Arc::new(Context {
        stores,
        writer: Writer::new(
            clients.api.clone(),
            leadership.subscribe(),
            Some(settings.identity.clone()),
        ),
        providers,
        catalog,
        clock,
        metrics: metrics.clone(),
        cluster_name: settings.cluster_name.clone(),
        region: settings.region.clone(),
        preference_policy: settings.preference_policy,
        nominate_pods: settings.nominate_pods,
        leadership: leadership.clone(),
        page: Default::default(),
        headroom: Default::default(),
    });

    let metrics_server = crate::http::serve(
        crate::http::bind(settings.metrics_port).await?,
        crate::http::metrics_router(ctx.clone()),
        stopped(),
    );
    let health_server = crate::http::serve(
        crate::http::bind(settings.health_probe_port).await?,
        crate::http::health_router(ctx.clone()),
        stopped(),
    );
    let servers = tokio::spawn(async move { tokio::try_join!(metrics_server, health_server) });

    let mut leadership = leadership;
    let mut stop = std::pin::pin!(stopped());
    loop {
        tokio::select! {
            () = &mut stop => break,
            acquired = leadership.acquired() => {
                if !acquired {
                    // The elector stopped (shutdown).
                    stop.as_mut().await;
                    break;
                }
            }
        }
        tracing::info!(identity = %settings.identity, "leading: provisioning starts");
        metrics.leader.set(1);
        // A new driver each time this replica starts leading: its state is rebuilt from the
        // cluster, never carried over from an earlier term.
        let mut driver = Driver::new(ctx.clone(), settings.engine.clone());
        if let Some(refresh) = settings.price_refresh.clone() {
            let (catalog_tx, catalog_rx) = tokio::sync::mpsc::unbounded_channel();
            driver = driver.with_catalog_updates(catalog_rx);
            let mut lost = leadership.clone();
            let shutdown = stopped();
            tokio::spawn(crate::price_refresh::run(
                refresh,
                ctx.catalog.clone(),
                ctx.clock.clone(),
                catalog_tx,
                async move {
                    tokio::select! {
                        () = lost.lost() => {}
                        () = shutdown => {}
                    }
                },
            ));
        }
        for task in &while_leading {
            let mut lost = leadership.clone();
            let shutdown = stopped();
            tokio::spawn(task(Box::pin(async move {
                tokio::select! {
                    () = lost.lost() => {}
                    () = shutdown => {}
                }
            })));
        }
        let mut lost = leadership.clone();
        tokio::select! {
            () = driver.run(settings.resync, std::future::pending()) => {}
            () = lost.lost() => {
                tracing::warn!("leader lease lost: every write has stopped");
            }
            () = &mut stop => break,
        }
        metrics.leader.set(0);
    }
    metrics.leader.set(0);
    match servers.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(ControllerError::Http(e.to_string())),
    }
}
