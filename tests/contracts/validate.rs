//! `quartermaster validate`: shipped examples pass; broken manifests are rejected with field paths.

use quartermaster_tests::{path, quartermaster};

#[test]
fn shipped_examples_are_valid() {
    let files: Vec<String> = std::fs::read_dir(path("examples/nodepools"))
        .expect("examples/nodepools exists")
        .map(|e| e.expect("dir entry").path().display().to_string())
        .collect();
    assert!(files.len() >= 4);
    let mut argv = vec!["validate"];
    argv.extend(files.iter().map(String::as_str));
    let out = quartermaster(&argv);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
}

#[test]
fn invalid_nodepool_problems_carry_field_paths() {
    let file = path("examples/invalid/nodepool-errors.yaml");
    let out = quartermaster(&["validate", &file]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    let prefix = format!("{file}: NodePool/broken: ");
    let expected_paths = [
        "spec.weight",
        "spec.template.spec.nodeClassRef",
        "spec.template.spec.requirements[0].values",
        "spec.template.spec.requirements[1].operator",
        "spec.template.spec.requirements[2].values",
        "spec.limits[cpu]",
        "spec.disruption.budgets[0].nodes",
        "spec.disruption.budgets[1].schedule",
        "spec.disruption.budgets[2].duration",
    ];
    for expected in expected_paths {
        assert!(
            out.stdout.lines().any(|l| {
                l.strip_prefix(&format!("{prefix}{expected}"))
                    .is_some_and(|rest| {
                        rest.starts_with(": ") || rest.starts_with('[') || rest.starts_with('.')
                    })
            }),
            "no problem reported at {expected}:\n{}",
            out.stdout
        );
    }
    assert!(
        out.stdout.lines().all(|l| l.starts_with(&prefix)),
        "{}",
        out.stdout
    );
}

#[test]
fn unknown_fields_and_kinds_are_named() {
    let dir = std::env::temp_dir().join(format!("qm-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("typo.yaml");
    std::fs::write(
        &file,
        "apiVersion: quartermaster.dev/v1\nkind: NodePool\nmetadata: {name: typo}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: x}\n      requirments: []\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
    )
    .unwrap();
    let f = file.display().to_string();
    let out = quartermaster(&["validate", &f]);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains(&format!("{f}: NodePool/typo: spec.template.spec")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("requirments"), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!("{f}: Widget/w: ")),
        "{}",
        out.stdout
    );
}

#[test]
fn a_missing_node_class_ref_is_named() {
    let dir = std::env::temp_dir().join(format!("qm-validate-ref-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("noref.yaml");
    std::fs::write(
        &file,
        "apiVersion: quartermaster.dev/v1\nkind: NodePool\nmetadata: {name: noref}\nspec:\n  template:\n    spec:\n      requirements: []\n",
    )
    .unwrap();
    let f = file.display().to_string();
    let out = quartermaster(&["validate", &f]);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout.contains(&format!(
            "{f}: NodePool/noref: spec.template.spec.nodeClassRef: "
        )),
        "{}",
        out.stdout
    );
}

#[test]
fn unreadable_and_malformed_files_are_one_line_each() {
    let out = quartermaster(&["validate", "/nonexistent/pool.yaml"]);
    assert_eq!(out.code, 1);
    assert!(out.stdout.contains("/nonexistent/pool.yaml"));
    let dir = std::env::temp_dir().join(format!("qm-validate-yaml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("broken.yaml");
    std::fs::write(&file, "kind: NodePool\nspec: [unclosed\n").unwrap();
    let out = quartermaster(&["validate", file.to_str().unwrap()]);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("broken.yaml: document 1: not valid YAML"),
        "{}",
        out.stdout
    );
}
