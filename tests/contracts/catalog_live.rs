//! `catalog -o toml` writes a file `--catalog` reads back: the same catalog, and the same plan;
//! `catalog --live` needs `--cloud`; `doctor` refuses a NodeClass file it cannot read.

use quartermaster_tests::{path, quartermaster};

fn temp_file(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("qm-catalog-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn toml_output_round_trips_through_catalog_and_plan() {
    let toml = quartermaster(&["catalog", "-o", "toml"]);
    assert_eq!(toml.code, 0, "{}", toml.stderr);
    let file = temp_file("all.toml");
    std::fs::write(&file, &toml.stdout).unwrap();
    let file = file.display().to_string();

    // The whole catalog written and read back (extend mode) is the same catalog.
    let before = quartermaster(&["catalog", "-o", "json"]).json();
    let after = quartermaster(&["catalog", "-o", "json", "--catalog", &file]);
    assert_eq!(after.code, 0, "{}", after.stderr);
    assert_eq!(after.json(), before);

    // And `plan` on it decides the same.
    let fixture = path("tests/fixtures/plan/cross-cloud-price.yaml");
    let plan = quartermaster(&["plan", "-o", "json", "-f", &fixture]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let replanned = quartermaster(&["plan", "-o", "json", "-f", &fixture, "--catalog", &file]);
    assert_eq!(replanned.code, 0, "{}", replanned.stderr);
    assert_eq!(replanned.json(), plan.json());
}

#[test]
fn toml_output_of_a_filtered_catalog_is_a_valid_override() {
    let toml = quartermaster(&["catalog", "--cloud", "aws", "--gpu", "h100", "-o", "toml"]);
    assert_eq!(toml.code, 0, "{}", toml.stderr);
    assert!(
        toml.stdout.contains("name = \"p5.48xlarge\""),
        "{}",
        toml.stdout
    );
    let file = temp_file("h100.toml");
    std::fs::write(&file, &toml.stdout).unwrap();
    let read = quartermaster(&[
        "catalog",
        "--catalog",
        &file.display().to_string(),
        "--gpu",
        "h100",
        "--cloud",
        "aws",
        "-o",
        "json",
    ]);
    assert_eq!(read.code, 0, "{}", read.stderr);
}

#[test]
fn live_needs_a_cloud() {
    let out = quartermaster(&["catalog", "--live"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--cloud"), "{}", out.stderr);
}

#[test]
fn doctor_names_a_missing_nodeclass_file() {
    let out = quartermaster(&[
        "doctor",
        "--cloud",
        "aws",
        "-f",
        "/nonexistent/nodeclass.yaml",
    ]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("/nonexistent/nodeclass.yaml"),
        "{}",
        out.stderr
    );
}
