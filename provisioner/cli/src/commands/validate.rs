//! `quartermaster validate FILE...`: checks Quartermaster manifests, one object at a time.

use std::io::Write;

use std::collections::BTreeSet;

use quartermaster_policies::validate::check_manifest;
use quartermaster_pricing::Catalog;

use crate::cli::ValidateArgs;
use crate::manifests::{describe, read_documents};

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
            let what = describe(&document.value);
            for note in &document.notes {
                writeln!(err, "{file}: note: {note}")?;
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
        writeln!(err, "{objects} objects valid")?;
        Ok(crate::EXIT_OK)
    } else {
        writeln!(err, "{problems} problems in {objects} objects")?;
        Ok(crate::EXIT_FAILURE)
    }
}
