//! Command-line grammar (clap derive). Flags named in issues are contracts: extend, never rename.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Quartermaster: a cost-aware GPU node provisioner for Kubernetes.
///
/// It watches pods that cannot be scheduled, decides which machines to buy across AWS, GCP and
/// Azure from a sourced price catalog, and later consolidates them into cheaper shapes.
#[derive(Debug, Parser)]
#[command(name = "quartermaster", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List instance types with their accelerators, labels and priced offerings.
    ///
    /// Example: `quartermaster catalog --gpu h100 --capacity-type spot -o json`
    Catalog(CatalogArgs),
    /// Check what a first install gets wrong on a cloud: credentials and whose, the permissions
    /// the controller needs, the NodeClass's subnets and images, GPU quotas, the price APIs.
    ///
    /// One line per check (OK / WARN / FAIL, with the fix); exits 1 on any FAIL.
    /// Example: `quartermaster doctor --cloud aws -f nodeclass.yaml --region us-west-2`
    Doctor(DoctorArgs),
    /// Print every Quartermaster CRD as multi-document YAML (what `charts/quartermaster/crds/` holds).
    Crds,
    /// Check NodePool, NodeClaim and NodeClass manifests (multi-document YAML).
    ///
    /// Prints `file: kind/name: field.path: reason` for each problem; exits 1 when any is found.
    Validate(ValidateArgs),
    /// Decide which nodes to buy for the pods in ordinary Kubernetes YAML (a what-if, offline).
    ///
    /// Reads Pods, Deployments, StatefulSets, ReplicaSets, Jobs, DaemonSets, Nodes, NodePools and
    /// NodeClasses; prints new nodes with their pods and prices, the lower bound, and every pod
    /// that cannot be placed with its reason.
    Plan(PlanArgs),
    /// Benchmark the solver on generated scenarios against a Karpenter-style greedy baseline.
    Bench(BenchArgs),
    /// Watch Quartermaster do its whole job against simulated clouds (no cluster, no cloud
    /// account): a scenario's workload arrives over simulated days, the engine launches spot and
    /// on-demand nodes, falls back, replaces interrupted nodes and removes empty ones.
    ///
    /// Prints cost, pending times, nodes and GPU utilisation, and what the same work would cost
    /// on on-demand capacity only. Without a SCENARIO it runs an embedded demo scenario.
    /// Example: `quartermaster simulate scenarios/llm-training-burst.yaml --report-dir out/`
    Simulate(SimulateArgs),
    /// Run the in-cluster controller: watch pods that cannot be scheduled, provision nodes for
    /// them through a cloud provider, and remove nodes that are no longer needed.
    ///
    /// Every flag is also read from the environment variable of the same name in upper snake
    /// case (`--cluster-name` from `CLUSTER_NAME`). With `--cloud-provider kwok` no cloud
    /// account is needed: nodes are Kubernetes Node objects the controller keeps alive.
    /// Example: `quartermaster controller --cloud-provider kwok --kubeconfig ~/.kube/config`
    Controller(ControllerArgs),
    /// What the fleet costs, allocated to NodePools, namespaces and pods (FOCUS 1.2 with -o csv).
    ///
    /// With --prometheus, the history over --since from a Prometheus that scraped the controller;
    /// without it, the live fleet from the API server.
    /// Example: `quartermaster report --prometheus http://prometheus:9090 --since 24h -o csv`
    Report(crate::commands::report::ReportArgs),
    /// Convert another provisioner's manifests into Quartermaster's.
    ///
    /// `import karpenter` writes `quartermaster.dev/v1` NodePools and AWSNodeClasses for
    /// Karpenter v1 NodePools and EC2NodeClasses, with a comment for each field that changes or
    /// has a different effect and a warning for each one with no equivalent.
    /// Example: `quartermaster import karpenter -f nodepool.yaml --region us-west-2 -o qm.yaml`
    Import(crate::commands::import::ImportArgs),
    /// Why a pod goes where the plan puts it: every candidate offering (NodePool × instance
    /// type × zone × capacity type) with its price and the reason it was chosen or not.
    ///
    /// Example: `quartermaster explain pod default/train-0 -f workload.yaml -f nodepools.yaml`
    Explain(crate::commands::explain::ExplainArgs),
}

/// A cloud provider for the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CloudProviderArg {
    /// Nodes without machines on any cluster (no cloud account).
    Kwok,
    /// Amazon EC2.
    Aws,
    /// Google Compute Engine.
    Gcp,
    /// Azure virtual machines.
    Azure,
}

/// Log line formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (the default in the cluster).
    Json,
    /// Human-readable lines.
    Text,
}

/// `--nominate-pods` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NominatePodsArg {
    /// Pods planned on nodes the controller brought up.
    NewNodes,
    /// Every pod the engine planned.
    All,
    /// None.
    Off,
}

/// `--scheduler-scoring` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchedulerScoringArg {
    /// The default profile: `NodeResourcesFit` LeastAllocated (the emptiest node).
    LeastAllocated,
    /// A bin-packing profile: `NodeResourcesFit` MostAllocated (the fullest node that fits).
    MostAllocated,
}

/// Arguments of `quartermaster controller`. Flag names follow Karpenter's settings.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Kubeconfig file; otherwise the in-cluster configuration or `KUBECONFIG`.
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Where nodes come from.
    #[arg(long, env = "CLOUD_PROVIDER", value_enum, default_value_t = CloudProviderArg::Kwok)]
    pub cloud_provider: CloudProviderArg,
    /// The cluster's name (instance tags, cost reports).
    #[arg(long, env = "CLUSTER_NAME", default_value = "quartermaster")]
    pub cluster_name: String,
    /// Port of `/metrics` and `/cost`.
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,
    /// Port of `/healthz` and `/readyz`.
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,
    /// Elect one acting replica through a Lease (`--leader-elect=false` to act alone).
    #[arg(long, env = "LEADER_ELECT", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease (the pod's namespace in the cluster).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub leader_election_namespace: String,
    /// This replica's identity in the election (the pod's name in the cluster; the host name
    /// otherwise).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// How soft constraints (preferred affinities, `ScheduleAnyway` spreads) are weighed against
    /// cost, for every NodePool: `Respect`, `Ignore` or `CostBounded` (default: each NodePool's
    /// `spec.preferencePolicy`, itself `CostBounded` by default).
    #[arg(long, env = "PREFERENCE_POLICY", value_name = "POLICY", value_parser = parse_preference_policy)]
    pub preference_policy: Option<quartermaster_solver::PreferencePolicy>,
    /// Which pending pods get `status.nominatedNodeName`, where the kube-scheduler should expect
    /// them (KEP-5278; a hint, never relied on): `new-nodes` (pods planned on a node this
    /// controller brought up, written as it registers), `all` (also pods planned on room that
    /// already existed) or `off`.
    #[arg(long, env = "NOMINATE_PODS", value_enum, default_value_t = NominatePodsArg::NewNodes)]
    pub nominate_pods: NominatePodsArg,
    /// How the cluster's kube-scheduler scores nodes: `least-allocated` (its default profile)
    /// or `most-allocated` (a bin-packing profile). A consolidation move is made only when it still
    /// saves once the pods it displaces are bound by that scoring: the scheduler reads no
    /// nomination, and a move it scatters buys new nodes for the pods left over.
    #[arg(long, env = "SCHEDULER_SCORING", value_enum, default_value_t = SchedulerScoringArg::LeastAllocated)]
    pub scheduler_scoring: SchedulerScoringArg,
    /// Sustained Kubernetes API requests per second (client-side rate limit).
    #[arg(long, env = "KUBE_CLIENT_QPS", default_value_t = 200.0)]
    pub kube_client_qps: f64,
    /// Kubernetes API requests that may go out at once.
    #[arg(long, env = "KUBE_CLIENT_BURST", default_value_t = 300)]
    pub kube_client_burst: u32,
    /// A batch of pending pods closes after this long without a new one.
    #[arg(long, env = "BATCH_IDLE_DURATION", default_value = "1s")]
    pub batch_idle_duration: String,
    /// A batch of pending pods closes at the latest this long after its first pod.
    #[arg(long, env = "BATCH_MAX_DURATION", default_value = "10s")]
    pub batch_max_duration: String,
    /// How often live prices are fetched from the cloud's price APIs while leading (AWS Pricing
    /// API and spot price history, GCP Cloud Billing Catalog, Azure Retail Prices); a changed
    /// price reprices running nodes and triggers consolidation. `0` keeps the catalog as started.
    #[arg(long, env = "PRICE_REFRESH_INTERVAL", default_value = "12h")]
    pub price_refresh_interval: String,
    /// error, warn, info, debug or trace (or a tracing filter such as `quartermaster=debug`).
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log line format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    /// kwok cloud settings (launch latency, capacity limits, insufficient-capacity windows,
    /// device-plugin delay) as YAML.
    #[arg(long, env = "KWOK_CONFIG", value_name = "FILE")]
    pub kwok_config: Option<PathBuf>,
    /// The cluster's region: NodeClasses without a region launch here (AWS: also the SDK's
    /// region when `AWS_REGION` is unset).
    #[arg(long, env = "CLUSTER_REGION", value_name = "REGION")]
    pub region: Option<String>,
    /// AWS: the SQS queue EventBridge sends EC2's spot interruption warnings, scheduled changes
    /// and instance state changes to (Karpenter's setting of the same name).
    #[arg(long, env = "INTERRUPTION_QUEUE", value_name = "NAME")]
    pub interruption_queue: Option<String>,
    /// What nodes need to join the cluster (boxed: clap's arguments stay small).
    #[command(flatten)]
    pub join: Box<ClusterJoinArgs>,
    /// Where the GCP and Azure APIs are and which project / subscription to use.
    #[command(flatten)]
    pub access: Box<CloudAccessArgs>,
}

/// Where each cloud's API is, and the account it acts in. AWS takes its endpoint from the SDK's
/// standard `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_EC2` variables; GCP and Azure from these.
/// Credentials never come from flags: each SDK's default chain provides them.
#[derive(Debug, Clone, Default, Args)]
pub struct CloudAccessArgs {
    /// GCP: the Compute Engine API endpoint (an emulator or a private endpoint); default the
    /// public `https://compute.googleapis.com`.
    #[arg(long, env = "GCP_ENDPOINT", value_name = "URL")]
    pub gcp_endpoint: Option<String>,
    /// GCP: the project instances are created in.
    #[arg(long, env = "GCP_PROJECT", value_name = "PROJECT")]
    pub gcp_project: Option<String>,
    /// Azure: the Resource Manager endpoint (an emulator or a sovereign cloud); default
    /// `https://management.azure.com`.
    #[arg(long, env = "AZURE_ENDPOINT", value_name = "URL")]
    pub azure_endpoint: Option<String>,
    /// Azure: the subscription VMs are created in.
    #[arg(long, env = "AZURE_SUBSCRIPTION_ID", value_name = "ID")]
    pub azure_subscription_id: Option<String>,
    /// Azure: the resource group VMs are created in (AKS: the node resource group, `MC_…`).
    #[arg(long, env = "AZURE_RESOURCE_GROUP", value_name = "NAME")]
    pub azure_resource_group: Option<String>,
}

/// What nodes need to join the cluster (Karpenter's settings of the same names).
#[derive(Debug, Args)]
pub struct ClusterJoinArgs {
    /// The cluster's API server endpoint that nodes join (`https://…`; AWS: written into the
    /// nodes' `nodeadm` NodeConfig).
    #[arg(long, env = "CLUSTER_ENDPOINT", value_name = "URL")]
    pub cluster_endpoint: Option<String>,
    /// The cluster's CA bundle, base64, as `aws eks describe-cluster` prints it (AWS: the nodes'
    /// NodeConfig).
    #[arg(long, env = "CLUSTER_CA_BUNDLE", value_name = "BASE64")]
    pub cluster_ca_bundle: Option<String>,
    /// The cluster's service CIDR (AWS: the nodes' NodeConfig; default `10.100.0.0/16`, EKS's
    /// default).
    #[arg(long, env = "CLUSTER_CIDR", value_name = "CIDR")]
    pub cluster_cidr: Option<String>,
}

/// Output formats for listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned columns for people.
    Table,
    /// One JSON document (a stable contract for scripts).
    Json,
    /// Comma-separated values, one row per offering.
    Csv,
}

/// A cloud, as typed on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CloudArg {
    /// Amazon Web Services.
    Aws,
    /// Google Cloud.
    Gcp,
    /// Microsoft Azure.
    Azure,
}

/// A capacity type, as typed on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CapacityTypeArg {
    /// Spot / preemptible capacity.
    Spot,
    /// On-demand capacity.
    OnDemand,
}

/// Flags of `quartermaster catalog`.
#[derive(Debug, Args)]
pub struct CatalogArgs {
    /// Only instance types of this cloud.
    #[arg(long, value_enum)]
    pub cloud: Option<CloudArg>,
    /// Only offerings in this region (e.g. us-east-1, us-central1, eastus).
    #[arg(long)]
    pub region: Option<String>,
    /// Only instance types with this accelerator (label value, e.g. h100, a100, l4, gaudi, trainium).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Only instance types with at least this many whole accelerators.
    #[arg(long, value_name = "N")]
    pub min_gpus: Option<u32>,
    /// Only offerings of this capacity type.
    #[arg(long, value_enum)]
    pub capacity_type: Option<CapacityTypeArg>,
    /// Output format (`toml` writes a file `--catalog` accepts).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CatalogFormat::Table)]
    pub output: CatalogFormat,
    /// Replace or extend the embedded catalog with this file (TOML, same format as pricing/data/).
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Merge in what the cloud's price APIs say now (needs --cloud; --region, else the
    /// catalog's default region): each price with its source and age. Prices the API does not
    /// give, or gives as nonsense (zero, NaN, absurd next to the catalog), keep the catalog's.
    #[arg(long, requires = "cloud")]
    pub live: bool,
    /// AWS, with --live: the EC2 and Pricing endpoint (a local test server or a private
    /// endpoint); default the SDK's (`AWS_ENDPOINT_URL_EC2`, `AWS_ENDPOINT_URL`). A plain
    /// `http://` endpoint is called with static test credentials.
    #[arg(long, value_name = "URL", requires = "live")]
    pub aws_endpoint: Option<String>,
    /// Cloud endpoints and projects for --live.
    #[command(flatten)]
    pub access: CloudAccessArgs,
}

/// Output formats of `catalog`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CatalogFormat {
    /// Aligned columns for people.
    Table,
    /// A JSON array (a stable contract for scripts).
    Json,
    /// Comma-separated values, one line per offering.
    Csv,
    /// A catalog file (`--catalog FILE` reads it back).
    Toml,
}

/// Flags of `quartermaster doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The cloud to check.
    #[arg(long, value_enum)]
    pub cloud: CloudArg,
    /// The NodeClass to check (YAML: AWSNodeClass, GCPNodeClass or AzureNodeClass): its
    /// subnets, security groups, images or templates must exist.
    #[arg(short = 'f', long = "filename", value_name = "NODECLASS.yaml")]
    pub file: Option<PathBuf>,
    /// The region (default: the SDK's, e.g. AWS_REGION; GCP / Azure: the NodeClass's).
    #[arg(long, env = "CLUSTER_REGION", value_name = "REGION")]
    pub region: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Table)]
    pub output: PlanFormat,
    /// Cloud endpoints and projects.
    #[command(flatten)]
    pub access: CloudAccessArgs,
}

/// Flags of `quartermaster validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Manifest files (multi-document YAML or a `kind: List`); `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

/// Output formats for `plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    /// Aligned columns for people.
    Table,
    /// One JSON object (a stable contract for scripts).
    Json,
}

/// Flags of `quartermaster plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Kubernetes manifests (multi-document YAML or `kind: List`); `-` reads standard input.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1.., value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Replace or extend the embedded catalog with this file.
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// The cluster's region: NodeClasses without a region buy here (default: the catalog's
    /// default region of each cloud).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// The cluster's API server runs the ExtendedResourceToleration admission plugin (GKE adds
    /// the same toleration to GPU pods): a pod requesting an extended resource such as
    /// `nvidia.com/gpu` tolerates the NoSchedule taint of that key.
    #[arg(long)]
    pub extended_resource_toleration: bool,
    /// How soft constraints (preferred affinities, `ScheduleAnyway` spreads) are weighed against
    /// cost, for every NodePool: `Respect`, `Ignore` or `CostBounded` (default: each NodePool's
    /// `spec.preferencePolicy`, itself `CostBounded` by default).
    #[arg(long, value_name = "POLICY", value_parser = parse_preference_policy)]
    pub preference_policy: Option<quartermaster_solver::PreferencePolicy>,
    /// How much the solver improves its first plan, in percent of the default work (100): 0
    /// keeps the construction's plan, more buys cheaper plans on large inputs for time.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub search_effort: Option<u32>,
    /// Capacity reservations (ODCRs, Capacity Blocks) to use, as the controller uses what the
    /// clouds report: a YAML or JSON list of `{id, cloud, instanceType, zone, count, available,
    /// type: default|capacity-block, start, end, pricePerHour, tags}`. A NodePool uses one when
    /// its NodeClass selects it and its requirements allow capacity type `reserved`.
    #[arg(long, value_name = "FILE")]
    pub reservations: Option<PathBuf>,
    /// Plan as of this time (RFC 3339, e.g. 2027-01-12T00:00:00Z; default now): which
    /// reservations are open, and the time the solver is given.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Table)]
    pub output: PlanFormat,
}

/// `--at`: an RFC 3339 time.
pub fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| format!("{text:?} is not an RFC 3339 time such as 2027-01-12T00:00:00Z: {e}"))
}

/// `--preference-policy`.
pub fn parse_preference_policy(
    text: &str,
) -> Result<quartermaster_solver::PreferencePolicy, String> {
    text.parse()
}

/// Flags of `quartermaster bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Run only this scenario (default: every scenario at its default sizes).
    #[arg(long, value_name = "NAME")]
    pub scenario: Option<String>,
    /// Number of pods (overrides the scenario's default sizes).
    #[arg(long, value_name = "N")]
    pub pods: Option<usize>,
    /// How much the cost-optimal solver improves its first plan, in percent of the default
    /// work (100): 0 keeps the construction's plan, more buys cheaper plans for time.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub search_effort: Option<u32>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Table)]
    pub output: PlanFormat,
}

/// Flags of `quartermaster simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Scenario file (YAML; see scenarios/README.md). Default: the embedded demo scenario.
    #[arg(value_name = "SCENARIO")]
    pub scenario: Option<PathBuf>,
    /// Seed of every random draw (overrides the scenario's `spec.seed`).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Write summary.json, cost.csv (FOCUS cost allocation) and report.html into this directory.
    #[arg(long, value_name = "DIR")]
    pub report_dir: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Table)]
    pub output: PlanFormat,
    /// Only read and validate the scenario (every check, the probe solves included); do not run it.
    #[arg(long)]
    pub check: bool,
    /// Provision every pod on its own (as without gang support), to compare.
    #[arg(long)]
    pub no_gang: bool,
    /// Run without the scenario's CapacityBuffers (`spec.capacityBuffers`), to compare
    /// pending times and cost with and without headroom.
    #[arg(long)]
    pub without_buffers: bool,
    /// Run with no NodePool opted in to flex-start (`flex-start` taken out of their
    /// capacity-type requirements), to compare cost and pending times with and without it.
    #[arg(long)]
    pub without_flex_start: bool,
    /// Run with the disruption rules lifted, to compare: every NodePool consolidates
    /// underutilized nodes after 30 s with no budget and replaces spot with any cheaper spot
    /// type, every Job checkpoints, no pod is do-not-disrupt or under a PodDisruptionBudget.
    /// The cost difference is what the rules cost; `fleet_cost_over_hindsight` shows how close
    /// the engine comes to the hindsight when it may make the hindsight's moves.
    #[arg(long)]
    pub without_disruption_rules: bool,
    /// Who binds pods: `scheduler`, a stand-in for the kube-scheduler that ignores the
    /// engine's nominations (filters, then LeastAllocated and balanced-allocation scores),
    /// `most-allocated` (the same scoring MostAllocated, a packing profile), or `planned`, every
    /// pod where the engine planned it (the best case, to compare).
    #[arg(long, value_enum, default_value_t = BinderArg::Scheduler)]
    pub binder: BinderArg,
    /// Lay faults over the simulated clouds, drawn from this seed: API throttling, server
    /// errors and lost answers, Nodes and GPUs that never come up, spot interruptions,
    /// insufficient-capacity storms across whole families, price jumps. The run exits with 3
    /// when an invariant breaks (a leaked or doubly launched instance, unbilled time, a broken
    /// budget or PodDisruptionBudget, a servable pod left waiting).
    #[arg(long, value_name = "SEED")]
    pub chaos: Option<u64>,
    /// How soft constraints are weighed against cost, for every NodePool of the scenario:
    /// `Respect`, `Ignore` or `CostBounded` (default: each NodePool's `spec.preferencePolicy`).
    #[arg(long, value_name = "POLICY", value_parser = parse_preference_policy)]
    pub preference_policy: Option<quartermaster_solver::PreferencePolicy>,
}

/// `simulate --binder`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BinderArg {
    /// The kube-scheduler stand-in.
    Scheduler,
    /// The same with MostAllocated scoring (a packing scheduler profile).
    MostAllocated,
    /// The engine's plan.
    Planned,
}
