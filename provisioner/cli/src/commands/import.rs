//! `quartermaster import karpenter -f FILE... [--region R] [-o FILE]`: Karpenter v1 NodePools
//! and EC2NodeClasses as `quartermaster.dev/v1` manifests.
//!
//! Each converted object is preceded by comment lines saying where it came from and what
//! happened to each field that changed or is carried with a different effect, and every problem
//! `validate` will find in it (a `PROBLEM` comment and a `problem:` line naming the file and
//! the object). Objects that are not Karpenter NodePools or EC2NodeClasses are left out, and
//! each is named in a warning (on standard error and as a comment), as is every field with no
//! Quartermaster equivalent.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use quartermaster_policies::karpenter;
use quartermaster_policies::validate::check_manifest;
use serde_json::Value;

use crate::manifests::parse_documents_raw;

/// Arguments of `quartermaster import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// What to import from.
    #[command(subcommand)]
    pub source: ImportSource,
}

/// Where manifests are imported from.
#[derive(Debug, Subcommand)]
pub enum ImportSource {
    /// Karpenter v1 `karpenter.sh/v1` NodePools and `karpenter.k8s.aws/v1` EC2NodeClasses.
    ///
    /// Example: `quartermaster import karpenter -f nodepool.yaml -f nodeclass.yaml -o qm.yaml`
    Karpenter(KarpenterImportArgs),
}

/// Flags of `quartermaster import karpenter`.
#[derive(Debug, Args)]
pub struct KarpenterImportArgs {
    /// Karpenter manifests (multi-document YAML or `kind: List`); `-` reads standard input.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1.., value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Set this region on every AWSNodeClass (an EC2NodeClass has none: Karpenter uses the
    /// cluster's). Without it the AWSNodeClass has no region and the cluster's is used.
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// Write the manifests to this file instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The comment prefix of every line `import` adds.
const PREFIX: &str = "# quartermaster import:";

pub fn run(args: &ImportArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    let ImportSource::Karpenter(args) = &args.source;
    let mut text = String::new();
    let mut converted = 0usize;
    let mut problems = 0usize;
    for path in &args.files {
        for document in parse_documents_raw(path)? {
            // Inside a directory, each document names its own file.
            let file = document.file.display().to_string();
            let what = document.what();
            let value = document.value;
            let Some(c) = karpenter::convert(&value, args.region.as_deref()) else {
                let warning = match value.get("apiVersion").and_then(Value::as_str) {
                    _ if value.get("kind").and_then(Value::as_str).is_none() => format!(
                        "{file}: {what}: no kind (is this a Kubernetes manifest?); left out"
                    ),
                    Some(api) => format!(
                        "{file}: {api} {what} is not a Karpenter v1 NodePool or EC2NodeClass; left out"
                    ),
                    None => format!(
                        "{file}: {what} (no apiVersion) is not a Karpenter v1 NodePool or EC2NodeClass; left out"
                    ),
                };
                writeln!(err, "warning: {warning}")?;
                text.push_str(&format!("{PREFIX} WARNING {warning}\n"));
                continue;
            };
            converted += 1;
            text.push_str("---\n");
            text.push_str(&format!(
                "{PREFIX} {} {what} from {file}\n",
                value
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ));
            for line in &c.fields {
                text.push_str(&format!("{PREFIX} {line}\n"));
            }
            for warning in &c.warnings {
                writeln!(err, "warning: {file}: {what}: {warning}")?;
                text.push_str(&format!("{PREFIX} WARNING {warning}\n"));
            }
            // What `validate` will say about the written object, said now (all of it).
            for problem in check_manifest(&c.value).errors {
                problems += 1;
                writeln!(err, "problem: {file}: {what}: {problem}")?;
                text.push_str(&format!("{PREFIX} PROBLEM {problem}\n"));
            }
            text.push_str(
                &serde_norway::to_string(&c.value)
                    .with_context(|| format!("{file}: {what}: writing YAML"))?,
            );
        }
    }
    if converted == 0 {
        writeln!(
            err,
            "no Karpenter v1 NodePool or EC2NodeClass found in {}",
            args.files
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        return Ok(crate::EXIT_FAILURE);
    }
    if problems > 0 {
        writeln!(
            err,
            "{problems} problem(s) to fix before the output passes `quartermaster validate` (marked PROBLEM in it)"
        )?;
    }
    match &args.output {
        Some(path) => {
            std::fs::write(path, &text)
                .with_context(|| format!("{}: cannot write", path.display()))?;
            writeln!(
                err,
                "{converted} objects written to {} (check with `quartermaster validate {}`)",
                path.display(),
                path.display()
            )?;
        }
        None => out.write_all(text.as_bytes())?,
    }
    Ok(crate::EXIT_OK)
}
