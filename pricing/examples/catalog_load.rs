//! The perf-guard `catalog-load` workload on catalog data read from a directory, so that two
//! versions of the data can be compared under the same binary:
//!
//! ```text
//! cargo build --release -p quartermaster-pricing --example catalog_load
//! valgrind --tool=cachegrind --cachegrind-out-file=/dev/null \
//!     target/release/examples/catalog_load pricing/data
//! /usr/bin/time -v target/release/examples/catalog_load pricing/data
//! ```
//!
//! The directory holds `aws.toml`, `gcp.toml`, `azure.toml` and whichever generated offerings
//! files `offerings/<cloud>.csv`, `offerings/<cloud>-cpu.csv` exist. Without an argument the
//! embedded catalog is loaded, as perf-guard does.

use std::path::Path;
use std::process::ExitCode;

use quartermaster_pricing::generate::Part;
use quartermaster_pricing::{Catalog, Cloud};

fn load(dir: &Path) -> Result<Catalog, String> {
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut facts = Vec::new();
    let mut offerings = Vec::new();
    for cloud in Cloud::ALL {
        let name = format!("{cloud}.toml");
        facts.push((name.clone(), read(&dir.join(&name))?));
        for part in Part::ALL {
            let file = format!("offerings/{}", part.file_name(cloud));
            if dir.join(&file).is_file() {
                offerings.push((name.clone(), file.clone(), read(&dir.join(&file))?));
            }
        }
    }
    let facts: Vec<(&str, &str)> = facts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let offerings: Vec<(&str, &str, &str)> = offerings
        .iter()
        .map(|(f, n, t)| (f.as_str(), n.as_str(), t.as_str()))
        .collect();
    Catalog::from_sources(&facts, &offerings).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let all = match std::env::args().nth(1) {
        Some(dir) => match load(Path::new(&dir)) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("catalog_load: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => Catalog::embedded_all_regions(),
    };
    let labelled: usize = all.labels().iter().map(|t| t.offerings.len()).sum();
    let default = all.in_default_regions();
    println!(
        "{} types, {labelled} offerings labelled; {} types in the default regions",
        all.len(),
        default.len()
    );
    ExitCode::SUCCESS
}
