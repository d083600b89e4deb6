//! The chart's CRDs are exactly what `quartermaster crds` prints, so they cannot drift.

use quartermaster_tests::{quartermaster, workspace_root};

const CHART_CRDS: &str = "charts/quartermaster/crds/quartermaster.dev.yaml";

#[test]
fn chart_crds_equal_generated_crds() {
    let out = quartermaster(&["crds"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let path = workspace_root().join(CHART_CRDS);
    if std::env::var_os("QUARTERMASTER_BLESS").is_some() {
        std::fs::write(&path, &out.stdout).expect("writing the chart CRDs");
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == out.stdout,
        "{CHART_CRDS} differs from `quartermaster crds`; regenerate it with \
         `cargo run -q -p quartermaster -- crds > {CHART_CRDS}`"
    );
}

#[test]
fn every_kind_is_generated_in_group_quartermaster_dev() {
    let out = quartermaster(&["crds"]);
    for kind in [
        "NodePool",
        "NodeClaim",
        "AWSNodeClass",
        "GCPNodeClass",
        "AzureNodeClass",
    ] {
        assert!(
            out.stdout.contains(&format!("kind: {kind}\n")),
            "{kind} missing"
        );
    }
    assert_eq!(out.stdout.matches("group: quartermaster.dev\n").count(), 5);
    assert_eq!(out.stdout.matches("scope: Cluster\n").count(), 5);
}
