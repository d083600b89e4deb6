//! The layering rules of ARCHITECTURE.md, checked on the real dependency graph.

use std::process::Command;

use quartermaster_tests::workspace_root;

/// Crates that must never appear below a pure crate: async runtimes, HTTP stacks, kube's client,
/// cloud SDKs.
const IMPURE: &[&str] = &[
    "tokio",
    "hyper",
    "reqwest",
    "kube-client",
    "kube-runtime",
    "aws-sdk",
    "aws-config",
    "google-cloud",
    "azure_",
];

/// `cargo tree` of a package's normal dependencies, one crate per line (`extra` narrows it).
fn normal_dependencies(package: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "tree",
        "--offline",
        "-e",
        "normal",
        "--prefix",
        "none",
        "-p",
        package,
    ];
    args.extend_from_slice(extra);
    let output = Command::new(env!("CARGO"))
        .current_dir(workspace_root())
        .args(&args)
        .output()
        .expect("running cargo tree");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

#[test]
fn pure_crates_have_no_runtime_network_or_sdk_dependency() {
    for package in [
        "quartermaster-policies",
        "quartermaster-pricing",
        "quartermaster-solver",
        "quartermaster-cluster",
        "quartermaster-cloud",
        "quartermaster-engine",
        "quartermaster-sim",
        "quartermaster-simulation",
    ] {
        let tree = normal_dependencies(package, &[]);
        for line in tree.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            assert!(
                !IMPURE.iter().any(|bad| name.starts_with(bad)),
                "{package} depends on {name}, breaking the layering rules in ARCHITECTURE.md"
            );
        }
    }
}

#[test]
fn pricing_and_policies_do_not_depend_on_each_other() {
    assert!(!normal_dependencies("quartermaster-pricing", &[]).contains("quartermaster-policies"));
    assert!(!normal_dependencies("quartermaster-policies", &[]).contains("quartermaster-pricing"));
}

#[test]
fn the_solver_depends_on_policies_and_pricing_only() {
    // `--depth 1` lists direct dependencies; of ours, only the two pure crates may appear, so
    // the solver cannot reach a cloud, a cluster or a clock.
    let tree = normal_dependencies("quartermaster-solver", &["--depth", "1"]);
    let ours: Vec<&str> = tree
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.starts_with("quartermaster"))
        .collect();
    assert_eq!(
        ours,
        ["quartermaster-policies", "quartermaster-pricing"],
        "{tree}"
    );
}

#[test]
fn the_default_build_has_no_cloud_sdk_and_clouds_adds_all_three() {
    // The README's first command builds the default features on a fresh clone: with the SDKs
    // that takes twice as long (aws-sdk-ec2 alone is minutes).
    let sdks = |tree: &str| -> Vec<String> {
        let mut found: Vec<String> = tree
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| {
                ["aws-sdk", "google-cloud", "azure_"]
                    .iter()
                    .any(|s| name.starts_with(s))
            })
            .map(str::to_owned)
            .collect();
        found.sort();
        found.dedup();
        found
    };
    let default = sdks(&normal_dependencies("quartermaster", &[]));
    assert!(
        default.is_empty(),
        "the default features pull in {default:?}"
    );
    let clouds = sdks(&normal_dependencies(
        "quartermaster",
        &["--features", "clouds"],
    ));
    for sdk in [
        "aws-sdk-ec2",
        "google-cloud-compute-v1",
        "azure_mgmt_compute",
    ] {
        assert!(
            clouds.iter().any(|s| s == sdk),
            "`clouds` lacks {sdk}: {clouds:?}"
        );
    }
}

/// Every `.rs` file below `dir` (skipping `target/`), read whole and joined.
fn sources_below(dir: &std::path::Path, out: &mut String) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                sources_below(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            out.push('\n');
        }
    }
}

/// Whether `ident` appears in `text` as a whole word.
fn mentions(text: &str, ident: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(ident).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + ident.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// What `cargo machete` checks: a crate declares no dependency its sources never name (a
/// declared but unused crate costs build time and hides from `cargo deny` what is really used).
#[test]
fn every_declared_dependency_is_named_in_its_crate() {
    let output = Command::new(env!("CARGO"))
        .current_dir(workspace_root())
        .args([
            "metadata",
            "--offline",
            "--no-deps",
            "--format-version",
            "1",
        ])
        .output()
        .expect("running cargo metadata");
    assert!(output.status.success(), "cargo metadata failed");
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let mut unused = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let manifest = std::path::Path::new(package["manifest_path"].as_str().expect("path"));
        let mut sources = String::new();
        sources_below(manifest.parent().expect("a crate folder"), &mut sources);
        for dependency in package["dependencies"].as_array().expect("dependencies") {
            let name = dependency["rename"]
                .as_str()
                .or(dependency["name"].as_str())
                .expect("a name");
            if !mentions(&sources, &name.replace('-', "_")) {
                unused.push(format!(
                    "{}: {name} ({})",
                    package["name"].as_str().unwrap_or_default(),
                    dependency["kind"].as_str().unwrap_or("normal")
                ));
            }
        }
    }
    assert!(
        unused.is_empty(),
        "declared but never named in the crate's sources: {unused:?}"
    );
}
