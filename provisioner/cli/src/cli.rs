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
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Replace or extend the embedded catalog with this file (TOML, same format as pricing/data/).
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
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
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Table)]
    pub output: PlanFormat,
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
}
