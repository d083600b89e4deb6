//! `quartermaster report`: what the fleet costs, allocated to NodePools, namespaces and pods.
//!
//! With `--prometheus URL`, the history over `--since` comes from a Prometheus that scraped the
//! controller's cost gauges (`quartermaster_node_hourly_cost_dollars`,
//! `quartermaster_pod_allocated_hourly_cost_dollars`): both are read with
//! `/api/v1/query_range`, turned into usage intervals and allocated by `quartermaster-cost` —
//! the same rule and FOCUS writer as `simulate`'s `cost.csv` and the controller's `/cost`.
//! Without it, the live fleet is read from the API server.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use quartermaster_cost::prometheus::{
    NODE_COST_METRIC, POD_COST_METRIC, Series, Window, node_usage, parse_query_range, pod_usage,
};
use quartermaster_cost::{Billing, FleetCost, NodeUsage, PodUsage, fleet_cost, write_csv};
use quartermaster_policies::duration::parse_duration_with_days;
use quartermaster_pricing::Catalog;

use crate::output::{Table, money};

/// Output formats of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// Totals and breakdowns for people.
    Table,
    /// The FOCUS 1.2 cost allocation (the columns of `simulate`'s `cost.csv`).
    Csv,
    /// One JSON object, the same as the controller's `/cost`.
    Json,
}

/// Flags of `quartermaster report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Kubeconfig of the cluster whose live fleet to read (default: $KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Read the history from this Prometheus (it must scrape the controller), e.g.
    /// http://prometheus.monitoring:9090.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// How far back to report with --prometheus: a Go duration, with days and weeks too (ms, s,
    /// m, h, d, w), e.g. 90m, 24h, 7d, 1h30m.
    #[arg(long, value_name = "DURATION", default_value = "24h")]
    pub since: String,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ReportFormat::Table)]
    pub output: ReportFormat,
    /// The cluster's name in the FOCUS rows (`x_Cluster`, billing account).
    #[arg(long, value_name = "NAME", default_value = "kubernetes")]
    pub cluster: String,
}

/// What a report is computed from: usage intervals up to `at`.
#[derive(Debug, Clone)]
pub struct Usage {
    /// Billed nodes.
    pub nodes: Vec<NodeUsage>,
    /// Pods on them.
    pub pods: Vec<PodUsage>,
    /// The instant the report is for; open intervals are billed up to it.
    pub at: DateTime<Utc>,
    /// Where the figures come from, for the table's heading.
    pub source: String,
}

/// Runs `report`; returns the exit code.
pub fn run(args: &ReportArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    let since = parse_since(&args.since)?;
    let usage = match &args.prometheus {
        Some(url) => {
            let usage = from_prometheus(url, since, Utc::now())?;
            if usage.nodes.is_empty() {
                writeln!(
                    err,
                    "warning: {url} has no {NODE_COST_METRIC} series in the last {}: does it \
                     scrape the controller's /metrics?",
                    args.since
                )?;
            }
            usage
        }
        None => live(args.kubeconfig.clone())?,
    };
    write_report(&usage, args.output, &args.cluster, out)?;
    Ok(crate::EXIT_OK)
}

/// `--since`: a positive duration (days and weeks allowed).
fn parse_since(text: &str) -> anyhow::Result<TimeDelta> {
    let d = parse_duration_with_days(text).context("--since")?;
    if d.is_zero() {
        bail!("--since {text:?}: must be more than zero");
    }
    TimeDelta::from_std(d).with_context(|| format!("--since {text:?}: too long"))
}

/// The fleet over `[now - since, now]` from the cost gauges Prometheus at `url` scraped, with
/// list prices from the embedded catalog.
pub fn from_prometheus(url: &str, since: TimeDelta, now: DateTime<Utc>) -> anyhow::Result<Usage> {
    let base = url.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        bail!("--prometheus {url:?}: expected an http:// or https:// URL");
    }
    let window = Window::ending_at(now, since);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let node_series = query_range(&agent, base, NODE_COST_METRIC, &window)?;
    let pod_series = query_range(&agent, base, POD_COST_METRIC, &window)?;
    let mut nodes = node_usage(&node_series, &window)
        .with_context(|| format!("reading {NODE_COST_METRIC} from {base}"))?;
    let pods = pod_usage(&pod_series, &window)
        .with_context(|| format!("reading {POD_COST_METRIC} from {base}"))?;
    quartermaster_cost::fill_list_prices(&Catalog::embedded_all_regions(), &mut nodes);
    Ok(Usage {
        nodes,
        pods,
        at: window.end,
        source: format!(
            "Prometheus {base}, {} to {}, step {}s",
            time(window.start),
            time(window.end),
            window.step.num_seconds()
        ),
    })
}

/// One `/api/v1/query_range` call.
fn query_range(
    agent: &ureq::Agent,
    base: &str,
    query: &str,
    window: &Window,
) -> anyhow::Result<Vec<Series>> {
    let endpoint = format!("{base}/api/v1/query_range");
    let mut response = agent
        .get(&endpoint)
        .query_pairs(
            window
                .query_params(query)
                .iter()
                .map(|(k, v)| (*k, v.as_str())),
        )
        .call()
        .with_context(|| format!("asking {endpoint} for {query}"))?;
    let status = response.status();
    let body = response
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()
        .with_context(|| format!("reading the answer of {endpoint}"))?;
    parse_query_range(&body).with_context(|| {
        format!(
            "{endpoint} for {query} answered {status}: {}",
            body.chars().take(200).collect::<String>()
        )
    })
}

/// Writes the report in `format`.
pub fn write_report(
    usage: &Usage,
    format: ReportFormat,
    cluster: &str,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    match format {
        ReportFormat::Csv => {
            write_csv(
                &usage.nodes,
                &usage.pods,
                usage.at,
                &Billing::for_cluster(cluster),
                out,
            )?;
        }
        ReportFormat::Json => {
            let fleet = fleet_cost(&usage.nodes, &usage.pods, usage.at);
            let text = serde_json::to_string_pretty(&fleet).context("encoding JSON")?;
            writeln!(out, "{text}")?;
        }
        ReportFormat::Table => {
            let fleet = fleet_cost(&usage.nodes, &usage.pods, usage.at);
            write_table(&fleet, &usage.source, out)?;
        }
    }
    Ok(())
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn write_table(fleet: &FleetCost, source: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(out, "Fleet cost ({source})")?;
    writeln!(
        out,
        "Now: ${}/h ({} nodes running). Since start: ${} (idle ${}).",
        money(fleet.cost_per_hour),
        fleet.nodes.iter().filter(|n| n.ended_at.is_none()).count(),
        money(fleet.cost_since_start),
        money(fleet.idle.cost_since_start),
    )?;
    let groups = [
        ("NODEPOOL", &fleet.by_node_pool),
        ("NAMESPACE", &fleet.by_namespace),
        ("CAPACITY TYPE", &fleet.by_capacity_type),
    ];
    for (title, lines) in groups {
        writeln!(out)?;
        let mut table = Table::new([title, "$/HOUR NOW", "$ SINCE START"]);
        for (name, line) in lines {
            table.push([
                name.clone(),
                money(line.cost_per_hour),
                money(line.cost_since_start),
            ]);
        }
        if title == "NAMESPACE" {
            table.push([
                "(idle)".to_owned(),
                money(fleet.idle.cost_per_hour),
                money(fleet.idle.cost_since_start),
            ]);
        }
        table.write(out)?;
    }
    writeln!(out)?;
    let mut nodes = Table::new([
        "NODE",
        "NODEPOOL",
        "INSTANCE TYPE",
        "CAPACITY",
        "$/HOUR",
        "STARTED",
        "ENDED",
        "$ SINCE START",
    ]);
    for n in &fleet.nodes {
        nodes.push([
            n.name.clone(),
            n.nodepool.clone(),
            n.instance_type.clone(),
            n.capacity_type.clone(),
            money(n.price_per_hour),
            time(n.started_at),
            n.ended_at.map_or_else(|| "running".to_owned(), time),
            money(n.cost_since_start),
        ]);
    }
    nodes.write(out)?;
    Ok(())
}

/// The live fleet: NodeClaims, Nodes and Pods listed from the API server, allocated now.
fn live(kubeconfig: Option<PathBuf>) -> anyhow::Result<Usage> {
    // A runtime of its own on a thread of its own: `run` may be called from async code.
    std::thread::scope(|scope| {
        scope
            .spawn(|| live_on_own_runtime(kubeconfig))
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("reading the live fleet failed")))
    })
}

fn live_on_own_runtime(kubeconfig: Option<PathBuf>) -> anyhow::Result<Usage> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ListParams};
    use quartermaster_policies::NodeClaim;
    use std::sync::Arc;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let settings = quartermaster_controller::client::ClientSettings {
            kubeconfig,
            ..Default::default()
        };
        let client = quartermaster_controller::client::build_client(&settings).await?;
        let lp = ListParams::default();
        let claims = Api::<NodeClaim>::all(client.clone())
            .list(&lp)
            .await
            .context("listing NodeClaims")?;
        let pods = Api::<Pod>::all(client)
            .list(&lp)
            .await
            .context("listing Pods")?;
        let (nodes, pods) = quartermaster_controller::fleet::usage(
            &claims.items.into_iter().map(Arc::new).collect::<Vec<_>>(),
            &pods.items.into_iter().map(Arc::new).collect::<Vec<_>>(),
            &quartermaster_pricing::Catalog::embedded_all_regions(),
        );
        anyhow::Ok(Usage {
            nodes,
            pods,
            at: Utc::now(),
            source: "the API server (live fleet)".to_owned(),
        })
    })
}
