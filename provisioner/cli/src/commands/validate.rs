//! `quartermaster validate FILE...`: checks Quartermaster manifests, one object at a time: every
//! problem of each object in one run (standard output, each line naming the file and the object),
//! warnings on standard error.

use std::io::Write;

use std::collections::BTreeSet;

use quartermaster_policies::validate::check_manifest;
use quartermaster_pricing::Catalog;

use crate::cli::ValidateArgs;
use crate::manifests::read_documents;

pub fn run(args: &ValidateArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    let mut problems = 0usize;
    let mut objects = 0usize;
    // Every label key an instance type or offering of the embedded catalog carries.
    let catalog = Catalog::embedded();
    let carried: BTreeSet<String> = catalog
        .instance_types()
        .iter()
        .flat_map(|it| {
            it.offerings
                .iter()
                .flat_map(|o| it.offering_labels(o).into_keys())
        })
        .collect();
    for path in &args.files {
        let file = path.display();
        let documents = match read_documents(path) {
            Ok(documents) => documents,
            Err(e) => {
                writeln!(out, "{e:#}")?;
                problems += 1;
                continue;
            }
        };
        if documents.is_empty() {
            writeln!(out, "{file}: no objects found")?;
            problems += 1;
        }
        for document in documents {
            objects += 1;
            // Inside a directory, each document names its own file.
            let file = document.file.display();
            let what = document.what();
            for note in &document.notes {
                writeln!(err, "{file}: note: {note}")?;
            }
            if !is_object_like(&document.value) {
                writeln!(
                    out,
                    "{file}: {what}: no kind (is this a Kubernetes manifest?)"
                )?;
                problems += 1;
                continue;
            }
            // Every problem of the object in one run, and the warnings about what could be read.
            let report = check_manifest(&document.value);
            for error in &report.errors {
                writeln!(out, "{file}: {what}: {error}")?;
                problems += 1;
            }
            for warning in report.warnings(&|k| carried.contains(k)) {
                writeln!(err, "{file}: {what}: warning: {warning}")?;
            }
        }
    }
    if problems == 0 {
        writeln!(err, "{} valid", count(objects, "object"))?;
        Ok(crate::EXIT_OK)
    } else {
        writeln!(
            err,
            "{} in {}",
            count(problems, "problem"),
            count(objects, "object")
        )?;
        Ok(crate::EXIT_FAILURE)
    }
}

/// Whether `value` looks like a Kubernetes object at all: a mapping with an `apiVersion` or a
/// `kind` (text, a list or a mapping with neither is some other file).
fn is_object_like(value: &serde_json::Value) -> bool {
    value.get("apiVersion").is_some() || value.get("kind").is_some()
}

/// `1 object`, `2 objects`.
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
