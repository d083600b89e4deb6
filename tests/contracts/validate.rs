//! `quartermaster validate`: shipped examples pass; broken manifests are rejected with field paths,
//! every problem of a file in one run, with "did you mean" for misspelt names; every error of
//! `validate`, `plan` and `import` names the file and the object.

use std::path::PathBuf;

use quartermaster_tests::{Output, path, quartermaster, workspace_root};

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

fn show(o: &Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        o.code, o.stdout, o.stderr
    )
}

/// A real corpus file (`../shared/real-world/`, see `SOURCES.txt` there).
fn corpus_file(relative: &str) -> String {
    let file = workspace_root().join("../shared/real-world").join(relative);
    std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "the real-world corpus is missing: {} ({e}; a `shared/real-world` directory beside the checkout)",
            file.display()
        )
    })
}

/// A scratch directory of its own for each test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qm-validate-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `text` with each `(from, to)` replaced once; panics when `from` is not there.
fn misspelt(text: &str, edits: &[(&str, &str)]) -> String {
    let mut text = text.to_owned();
    for (from, to) in edits {
        assert!(text.contains(from), "{from:?} not in the corpus file");
        text = text.replacen(from, to, 1);
    }
    text
}

const GPU_POOL: &str = "karpenter-blueprints/nvidia-gpu-workload__gpu-nodepool.yaml";

#[test]
fn every_problem_of_a_real_file_is_reported_in_one_run() {
    // The Karpenter GPU blueprint's NodePool, read as is, with misspelt field names and broken
    // values: an unknown field no longer hides the others.
    let text = misspelt(
        &corpus_file(GPU_POOL),
        &[
            ("nodeClassRef:", "nodeClasRef:"),
            ("requirements:", "requirments:"),
            ("expireAfter: 720h", "expireAfter: 720hh"),
            (
                "consolidationPolicy: WhenEmpty",
                "consolidationPolicy: WhenEmpyt",
            ),
            ("consolidateAfter: 5m", "consolidateAfter: 5x"),
            ("memory: 100Gi", "memory: 100Gx"),
            ("effect: NoSchedule", "effect: NoSchedul"),
        ],
    );
    let file = scratch("one-run").join("gpu-nodepool.yaml");
    std::fs::write(&file, text).unwrap();
    let f = file.display().to_string();
    let out = quartermaster(&["validate", &f]);
    assert_eq!(out.code, 1, "{}", show(&out));
    let expected = [
        "spec.template.spec.nodeClasRef: unknown field; did you mean \"nodeClassRef\"?",
        "spec.template.spec.requirments: unknown field; did you mean \"requirements\"?",
        "spec.template.spec.nodeClassRef: required field is missing",
        "spec.disruption.consolidationPolicy: unknown variant `WhenEmpyt`, expected one of `WhenEmpty`, `WhenEmptyOrUnderutilized`, `Balanced`; did you mean \"WhenEmpty\"?",
        "spec.limits[memory]: invalid quantity \"100Gx\"",
        "spec.template.spec.taints[0].effect: unsupported effect \"NoSchedul\": expected one of NoSchedule, PreferNoSchedule, NoExecute",
        "spec.template.spec.expireAfter: invalid duration \"720hh\"",
        "spec.disruption.consolidateAfter: invalid duration \"5x\"",
    ];
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), expected.len(), "{}", show(&out));
    for (line, want) in lines.iter().zip(expected) {
        assert!(
            line.starts_with(&format!("{f}: NodePool/gpu: {want}")),
            "expected {want:?}, got:\n{}",
            show(&out)
        );
    }
    assert!(
        out.stderr.contains("8 problems in 1 object"),
        "{}",
        show(&out)
    );
}

#[test]
fn misspelt_label_keys_operators_and_values_get_a_suggestion() {
    let text = misspelt(
        &corpus_file(GPU_POOL),
        &[
            (
                "key: karpenter.sh/capacity-type",
                "key: karpenter.sh/capacity_type",
            ),
            (
                "key: karpenter.k8s.aws/instance-category",
                "key: karpenter.k8s.aws/instance-categroy",
            ),
        ],
    );
    // A misspelt key is a warning (a requirement may name any label), with the key meant.
    let file = scratch("suggest").join("keys.yaml");
    std::fs::write(&file, &text).unwrap();
    let f = file.display().to_string();
    let out = quartermaster(&["validate", &f]);
    assert_eq!(out.code, 0, "{}", show(&out));
    for (i, meant) in [
        (0, "karpenter.sh/capacity-type"),
        (1, "karpenter.k8s.aws/instance-category"),
    ] {
        let line =
            format!("{f}: NodePool/gpu: warning: spec.template.spec.requirements[{i}].key: ");
        assert!(
            out.stderr
                .lines()
                .any(|l| l.starts_with(&line)
                    && l.ends_with(&format!("; did you mean \"{meant}\"?"))),
            "{line}... did you mean {meant:?}:\n{}",
            show(&out)
        );
    }

    // A misspelt operator is an error; a capacity type that does not exist a warning.
    let text = misspelt(
        &corpus_file(GPU_POOL),
        &[
            ("operator: In", "operator: in"),
            ("values: [\"on-demand\"]", "values: [\"on-demnad\"]"),
        ],
    );
    let file = scratch("suggest").join("values.yaml");
    std::fs::write(&file, &text).unwrap();
    let f = file.display().to_string();
    let out = quartermaster(&["validate", &f]);
    assert_eq!(out.code, 1, "{}", show(&out));
    assert_eq!(
        out.stdout.trim_end(),
        format!(
            "{f}: NodePool/gpu: spec.template.spec.requirements[0].operator: unknown operator \"in\": expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte; did you mean \"In\"?"
        ),
        "{}",
        show(&out)
    );
    // Read as is, the Karpenter key is converted to the Quartermaster key it stands for.
    let text = misspelt(
        &corpus_file(GPU_POOL),
        &[("values: [\"on-demand\"]", "values: [\"on-demnad\"]")],
    );
    std::fs::write(&file, &text).unwrap();
    let out = quartermaster(&["validate", &f]);
    assert_eq!(out.code, 0, "{}", show(&out));
    assert!(
        out.stderr.contains(&format!(
            "{f}: NodePool/gpu: warning: spec.template.spec.requirements[0].values[0]: \"on-demnad\" is not a value label \"quartermaster.dev/capacity-type\" takes (spot, on-demand, reserved, flex-start); did you mean \"on-demand\"?"
        )),
        "{}",
        show(&out)
    );
}

#[test]
fn every_error_names_the_file_and_the_object() {
    let dir = scratch("names");
    let pool = misspelt(
        &corpus_file(GPU_POOL),
        &[("expireAfter: 720h", "expireAfter: 30d")],
    );
    std::fs::write(dir.join("gpu-nodepool.yaml"), &pool).unwrap();
    std::fs::write(dir.join("notes.yaml"), "just some text\n").unwrap();
    let d = dir.display().to_string();
    let pool_file = format!("{d}/gpu-nodepool.yaml");
    let notes_file = format!("{d}/notes.yaml");

    // validate -f DIR: each line names the file inside the directory and the object.
    let out = quartermaster(&["validate", &d]);
    assert_eq!(out.code, 1, "{}", show(&out));
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        [
            format!(
                "{pool_file}: NodePool/gpu: spec.template.spec.expireAfter: invalid duration \"30d\": expected a duration such as \"30s\", \"15m\", \"720h\" or \"1h30m\", or \"Never\""
            ),
            format!("{notes_file}: document 1: no kind (is this a Kubernetes manifest?)"),
        ],
        "{}",
        show(&out)
    );

    // plan: the file and the object.
    let workload = workspace_root()
        .join("../shared/real-world/karpenter-blueprints/nvidia-gpu-workload__workload.yaml")
        .display()
        .to_string();
    let out = quartermaster(&["plan", "-f", &pool_file, "-f", &workload]);
    assert_ne!(out.code, 0, "{}", show(&out));
    assert!(
        out.stderr.contains(&format!(
            "{pool_file}: NodePool/gpu: spec.template.spec.expireAfter: invalid duration \"30d\""
        )),
        "{}",
        show(&out)
    );
    let out = quartermaster(&["plan", "-f", &notes_file]);
    assert_ne!(out.code, 0, "{}", show(&out));
    assert!(
        out.stderr.contains(&format!(
            "{notes_file}: document 1: no kind (is this a Kubernetes manifest?)"
        )),
        "{}",
        show(&out)
    );

    // import: a left-out document names its file inside the directory.
    let out = quartermaster(&["import", "karpenter", "-f", &d]);
    assert_eq!(out.code, 0, "{}", show(&out));
    assert!(
        out.stderr.contains(&format!(
            "warning: {notes_file}: document 1: no kind (is this a Kubernetes manifest?); left out"
        )),
        "{}",
        show(&out)
    );
    assert!(
        out.stdout.contains(&format!(
            "# quartermaster import: karpenter.sh/v1 NodePool/gpu from {pool_file}"
        )),
        "{}",
        show(&out)
    );
    // import: what validate will reject in the output, said now with the file and the object.
    assert!(
        out.stderr.contains(&format!(
            "problem: {pool_file}: NodePool/gpu: spec.template.spec.expireAfter: invalid duration \"30d\""
        )) && out
            .stdout
            .contains("# quartermaster import: PROBLEM spec.template.spec.expireAfter: invalid duration"),
        "{}",
        show(&out)
    );
    // A broken YAML document: the file and the document.
    std::fs::write(dir.join("notes.yaml"), "kind: A\n---\nkind: [unclosed\n").unwrap();
    for argv in [
        vec!["validate", d.as_str()],
        vec!["plan", "-f", notes_file.as_str()],
        vec!["import", "karpenter", "-f", notes_file.as_str()],
    ] {
        let out = quartermaster(&argv);
        assert_ne!(out.code, 0, "{}", show(&out));
        assert!(
            format!("{}{}", out.stdout, out.stderr)
                .contains(&format!("{notes_file}: document 2: not valid YAML")),
            "{argv:?}: {}",
            show(&out)
        );
    }
}

#[test]
fn dra_objects_are_checked_and_a_selector_that_does_not_compile_is_refused() {
    let good = path("examples/dra/gpu-40gi.yaml");
    let out = quartermaster(&["validate", &good]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let bad = path("examples/invalid/dra-errors.yaml");
    let out = quartermaster(&["validate", &bad]);
    assert_eq!(
        out.code, 1,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let prefix = format!("{bad}: ResourceClaim/broken: spec.devices.requests[0].exactly.");
    assert!(
        out.stdout.contains(&format!(
            "{prefix}allocationMode: Unsupported value: \"Most\": supported values: \"All\", \"ExactCount\""
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "{prefix}selectors[0].cel.expression: Invalid value: \"device.capacity['gpu.nvidia.com'].memory >=\": compilation failed: ERROR: <input>:1:"
        )),
        "{}",
        out.stdout
    );
}
