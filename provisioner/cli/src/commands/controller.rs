//! `quartermaster controller`: wires the Kubernetes client, the cloud provider and the
//! controller together and runs them until SIGTERM or Ctrl-C.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use chrono::TimeDelta;
use quartermaster_cloud::{Clock, CloudProvider, SystemClock};
use quartermaster_controller::Settings;
use quartermaster_controller::client::{ClientSettings, build_client, build_loop_clients};
use quartermaster_controller::context::{NominatePods, Providers};
use quartermaster_controller::leader::LeaderSettings;
use quartermaster_engine::{EngineConfig, SchedulerScoring};
use quartermaster_kwok::{KwokCloud, KwokConfig, KwokKubelet};
use quartermaster_policies::duration::parse_duration;
use quartermaster_pricing::{Catalog, Cloud};

use crate::cli::{
    CloudProviderArg, ControllerArgs, LogFormat, NominatePodsArg, SchedulerScoringArg,
};

fn duration(flag: &str, text: &str) -> anyhow::Result<TimeDelta> {
    let d = parse_duration(text).with_context(|| format!("{flag} {text:?}"))?;
    TimeDelta::from_std(d).with_context(|| format!("{flag} {text:?} is too long"))
}

fn init_logging(args: &ControllerArgs) -> anyhow::Result<()> {
    use tracing_subscriber::util::SubscriberInitExt as _;
    let format = match args.log_format {
        LogFormat::Json => crate::logging::Format::Json,
        LogFormat::Text => crate::logging::Format::Text,
    };
    let subscriber = crate::logging::subscriber(
        &args.log_level,
        format,
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        std::io::stderr,
    )?;
    // Already initialised (a second run in one process): keep the first.
    let _ = subscriber.try_init();
    Ok(())
}

/// Runs the controller; returns only on shutdown or a fatal error.
pub fn run(args: &ControllerArgs, _err: &mut dyn Write) -> anyhow::Result<u8> {
    let mut engine = EngineConfig {
        batch_idle: duration("--batch-idle-duration", &args.batch_idle_duration)?,
        batch_max: duration("--batch-max-duration", &args.batch_max_duration)?,
        scheduler_scoring: match args.scheduler_scoring {
            SchedulerScoringArg::LeastAllocated => SchedulerScoring::LeastAllocated,
            SchedulerScoringArg::MostAllocated => SchedulerScoring::MostAllocated,
        },
        ..EngineConfig::default()
    };
    if engine.batch_idle > engine.batch_max {
        bail!("--batch-idle-duration must not be longer than --batch-max-duration");
    }
    engine.claim_name_tag = claim_name_tag();
    let kwok_config = match &args.kwok_config {
        Some(path) => KwokConfig::from_path(path)?,
        None => KwokConfig::default(),
    };
    let cloud_settings = crate::clouds::Settings::from_args(args)?;
    init_logging(args)?;
    let identity = args.identity.clone().unwrap_or_else(|| {
        std::env::var("HOSTNAME")
            .unwrap_or_else(|_| format!("quartermaster-{}", std::process::id()))
    });
    let settings = Settings {
        cluster_name: args.cluster_name.clone(),
        metrics_port: args.metrics_port,
        health_probe_port: args.health_probe_port,
        leader: args
            .leader_elect
            .then(|| LeaderSettings::new(args.leader_election_namespace.clone(), identity.clone())),
        identity,
        engine,
        resync: Duration::from_secs(10),
        region: args.region.clone(),
        preference_policy: args.preference_policy,
        nominate_pods: match args.nominate_pods {
            NominatePodsArg::NewNodes => NominatePods::NewNodes,
            NominatePodsArg::All => NominatePods::All,
            NominatePodsArg::Off => NominatePods::Off,
        },
        price_refresh: crate::clouds::price_refresh(args)?,
    };
    let client_settings = ClientSettings {
        kubeconfig: args.kubeconfig.clone(),
        qps: args.kube_client_qps,
        burst: args.kube_client_burst,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        // One rate limit, three queues: the loop's, NodeClaim creates', Events' (at most a
        // quarter of it).
        let loop_clients = build_loop_clients(&client_settings).await?;
        let client = loop_clients.api.clone();
        // Separate rate limits: the Lease's renewals never wait behind the loop's writes, and
        // the kwok cloud and kubelet (stand-ins for a cloud API and one kubelet per node, each
        // with a client of its own) do not spend the controller's budget.
        let leader_election_client = build_client(&client_settings).await?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        // Every region: NodeClasses name theirs, the others buy in `--region`.
        let catalog = Catalog::embedded_all_regions();
        let mut providers = Providers::new();
        let mut while_leading: Vec<quartermaster_controller::run::LeaderTask> = Vec::new();
        if let Some((cloud, provider)) =
            crate::clouds::connect(cloud_settings, &client, &catalog, &clock).await?
        {
            providers.insert(cloud, provider);
        }
        if args.cloud_provider == CloudProviderArg::Kwok {
            add_kwok(
                &mut providers,
                &mut while_leading,
                build_client(&client_settings).await?,
                &catalog,
                &kwok_config,
                &clock,
            )?;
        }
        quartermaster_controller::run(
            settings,
            quartermaster_controller::Clients {
                api: loop_clients,
                leader_election: leader_election_client,
            },
            providers,
            catalog,
            clock,
            while_leading,
            shutdown_signal(),
        )
        .await?;
        anyhow::Ok(())
    })?;
    Ok(crate::EXIT_OK)
}

/// The kwok cloud for every cloud, and its kubelet while leading. Both stand for the world
/// outside the controller (a cloud's API, one kubelet per node), so `kwok_client` has a rate
/// limit of its own: the controller's budget is for the controller's own requests.
fn add_kwok(
    providers: &mut Providers,
    while_leading: &mut Vec<quartermaster_controller::run::LeaderTask>,
    kwok_client: kube::Client,
    catalog: &Catalog,
    kwok_config: &KwokConfig,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<()> {
    for cloud in [Cloud::Aws, Cloud::Gcp, Cloud::Azure] {
        let kwok = KwokCloud::new(
            kwok_client.clone(),
            cloud,
            catalog.clone(),
            kwok_config.clone(),
            clock.clone(),
        )?;
        providers.insert(cloud, Arc::new(kwok) as Arc<dyn CloudProvider>);
    }
    let kubelet_clock = clock.clone();
    while_leading.push(Box::new(move |stop| {
        Box::pin(KwokKubelet::new(kwok_client.clone(), kubelet_clock.clone()).run(stop))
    }));
    Ok(())
}

/// Five lowercase letters and digits, new at every start: NodeClaim names stay unique across
/// restarts (`gpu-k3x9q00001`).
fn claim_name_tag() -> String {
    use rand::RngExt as _;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
