//! `quartermaster validate FILE...`: checks Quartermaster manifests, one object at a time.

use std::io::Write;

use quartermaster_policies::validate_manifest;

use crate::cli::ValidateArgs;
use crate::manifests::{describe, read_documents};

pub fn run(args: &ValidateArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    let mut problems = 0usize;
    let mut objects = 0usize;
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
            if let Err(errors) = validate_manifest(&document.value) {
                for error in errors {
                    writeln!(out, "{file}: {what}: {error}")?;
                    problems += 1;
                }
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
