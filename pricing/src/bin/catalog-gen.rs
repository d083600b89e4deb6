//! `catalog-gen`: regenerates the embedded catalog's offerings from a SkyPilot catalog snapshot.
//!
//! ```text
//! cargo run -p quartermaster-pricing --bin catalog-gen -- \
//!     --skypilot DIR --commit SHA --read-on YYYY-MM-DD [--cloud aws,gcp,azure]
//!     [--part accelerators|cpu] [--extract WHAT] [--repo OWNER/NAME] [--out pricing/data]
//! ```
//!
//! `DIR` is a checkout of `skypilot-org/skypilot-catalog` (or of the fork `--repo` names, which
//! the header records; its `catalogs/v8/<cloud>/vms.csv` is read) or a directory of extracts laid out as `<cloud>/vms.csv`. For every cloud of
//! `--cloud` (default: aws, gcp and azure) found there, the facts file `<out>/<cloud>.toml` and
//! the snapshot give `<out>/offerings/<cloud>.csv` (accelerator types) and
//! `<out>/offerings/<cloud>-cpu.csv` (CPU types; `--part` writes one of them only, e.g. from an
//! extract of the snapshot's rows, which `--extract WHAT` describes in the header); a cloud whose `vms.csv` is missing is skipped with a note,
//! and a part with no generated type is not written. Then the coverage of the resulting catalog (the facts files plus every
//! `<out>/offerings/<cloud>.csv` there) is printed as the Markdown table the README's catalog
//! section shows (`catalog-gen --coverage` prints it alone, generating nothing). A new `offerings/<cloud>.csv` is embedded by adding it to
//! `EMBEDDED_OFFERINGS` (pricing/src/catalog.rs).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::NaiveDate;
use quartermaster_pricing::generate::{Part, Snapshot, generate};
use quartermaster_pricing::{Catalog, Cloud, coverage};

const USAGE: &str = "usage: catalog-gen --coverage [--out DIR] | catalog-gen --skypilot DIR --commit SHA --read-on YYYY-MM-DD [--cloud aws,gcp,azure] [--part accelerators|cpu] [--extract WHAT] [--repo OWNER/NAME] [--out DIR]";

struct Args {
    skypilot: PathBuf,
    commit: String,
    read_on: NaiveDate,
    clouds: Vec<Cloud>,
    parts: Vec<Part>,
    extract: Option<String>,
    repo: String,
    out: PathBuf,
}

fn args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut skypilot, mut commit, mut read_on) = (None, None, None);
    let mut clouds = Cloud::ALL.to_vec();
    let mut parts = Part::ALL.to_vec();
    let mut extract = None;
    let mut repo = "skypilot-org/skypilot-catalog".to_owned();
    let mut out = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--skypilot" => skypilot = Some(PathBuf::from(value()?)),
            "--commit" => commit = Some(value()?),
            "--read-on" => {
                let v = value()?;
                read_on = Some(
                    NaiveDate::parse_from_str(&v, "%Y-%m-%d")
                        .map_err(|_| format!("--read-on {v}: not a date YYYY-MM-DD"))?,
                );
            }
            "--out" => out = PathBuf::from(value()?),
            "--part" => {
                parts = match value()?.as_str() {
                    "accelerators" => vec![Part::Accelerators],
                    "cpu" => vec![Part::Cpu],
                    other => return Err(format!("--part {other}: accelerators or cpu\n{USAGE}")),
                };
            }
            "--extract" => extract = Some(value()?),
            "--repo" => repo = value()?,
            "--cloud" => {
                clouds = value()?
                    .split(',')
                    .map(|c| c.trim().parse::<Cloud>().map_err(|e| e.to_string()))
                    .collect::<Result<_, _>>()?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    match (skypilot, commit, read_on) {
        (Some(skypilot), Some(commit), Some(read_on)) => Ok(Args {
            skypilot,
            commit,
            read_on,
            clouds,
            parts,
            extract,
            repo,
            out,
        }),
        _ => Err(USAGE.to_owned()),
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `catalog-gen --coverage [--out DIR]`: the coverage table of the catalog in `DIR` (default:
/// pricing/data), nothing generated.
fn coverage_only() -> Option<Result<(), String>> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) != Some("--coverage") {
        return None;
    }
    let out = match argv.get(1..).unwrap_or_default() {
        [] => Path::new(env!("CARGO_MANIFEST_DIR")).join("data"),
        [flag, dir] if flag == "--out" => PathBuf::from(dir),
        _ => return Some(Err(USAGE.to_owned())),
    };
    Some(print_coverage(&out))
}

fn run() -> Result<(), String> {
    if let Some(r) = coverage_only() {
        return r;
    }
    let a = args()?;
    let mut written = 0;
    for &cloud in &a.clouds {
        let rel = format!("catalogs/v8/{cloud}/vms.csv");
        let path = [
            a.skypilot.join(&rel),
            a.skypilot.join(format!("{cloud}/vms.csv")),
        ]
        .into_iter()
        .find(|p| p.is_file());
        let Some(path) = path else {
            eprintln!(
                "catalog-gen: no {rel} under {}; {cloud} skipped",
                a.skypilot.display()
            );
            continue;
        };
        let facts_name = format!("{cloud}.toml");
        let facts = read(&a.out.join(&facts_name))?;
        let snapshot = Snapshot {
            repo: a.repo.clone(),
            path: rel,
            commit: a.commit.clone(),
            read_on: a.read_on,
            extract: a.extract.clone(),
        };
        let vms = read(&path)?;
        for &part in &a.parts {
            let file = part.file_name(cloud);
            let g = generate(cloud, part, &facts_name, &facts, &vms, &snapshot)
                .map_err(|e| e.to_string())?;
            if g.summary.types == 0 {
                // No type of this part is generated (all curated, or none in the snapshot): an
                // empty file is not written, and an existing one is left as it is.
                eprintln!(
                    "catalog-gen: no {} type of {facts_name} is generated from the snapshot; offerings/{file} not written",
                    part.as_str()
                );
                continue;
            }
            let dir = a.out.join("offerings");
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let target = dir.join(&file);
            std::fs::write(&target, &g.text).map_err(|e| format!("{}: {e}", target.display()))?;
            let s = &g.summary;
            eprintln!(
                "catalog-gen: {} ({} rows read): {} types, {} regions, {} on-demand and {} spot offerings",
                target.display(),
                s.rows_read,
                s.types,
                s.regions,
                s.on_demand,
                s.spot
            );
            if !s.left_out.is_empty() {
                eprintln!(
                    "catalog-gen: accelerator types left out (no entry in {facts_name}): {}",
                    s.left_out.iter().cloned().collect::<Vec<_>>().join(" ")
                );
            }
            written += 1;
        }
    }
    if written == 0 {
        return Err(format!("nothing generated from {}", a.skypilot.display()));
    }
    print_coverage(&a.out)
}

/// Prints the coverage of the catalog as it will be embedded: the facts files in `out` plus the
/// offerings files in `<out>/offerings` (not the copies compiled into this binary).
fn print_coverage(out: &Path) -> Result<(), String> {
    let mut facts = Vec::new();
    let mut offerings = Vec::new();
    for cloud in Cloud::ALL {
        let name = format!("{cloud}.toml");
        facts.push((name.clone(), read(&out.join(&name))?));
        for part in Part::ALL {
            let file = format!("offerings/{}", part.file_name(cloud));
            let generated = out.join(&file);
            if generated.is_file() {
                offerings.push((name.clone(), file, read(&generated)?));
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
    let catalog = Catalog::from_sources(&facts, &offerings).map_err(|e| e.to_string())?;
    print!("{}", coverage::markdown(&coverage::coverage(&catalog)));
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("catalog-gen: {e}");
            ExitCode::FAILURE
        }
    }
}
