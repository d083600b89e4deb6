//! The bad-input corpus (`tests/fixtures/bad-input/`): every malformed file gets exactly the one
//! error line written here, a failing exit code, and no panic. The lines are a contract: a user
//! reads them, and scripts match them.

use quartermaster_tests::{path, quartermaster};

/// `(file, command, the exact line it must print)`. The command's `{}` is the file's path,
/// and so is the `{}` of the line.
const CASES: &[(&str, &str, &str)] = &[
    // Catalogs: broken price feeds and shapes.
    (
        "catalog-nan-price.toml",
        "plan -f examples/nodepools/aws-general.yaml --catalog {}",
        r#"error: {}: instance type "x1.large" (aws): on_demand.price: must be a finite non-negative number, got NaN"#,
    ),
    (
        "catalog-negative-price.toml",
        "plan -f examples/nodepools/aws-general.yaml --catalog {}",
        r#"error: {}: instance type "x1.large" (aws): on_demand.price: must be a finite non-negative number, got -1.5"#,
    ),
    (
        "catalog-absurd-price.toml",
        "plan -f examples/nodepools/aws-general.yaml --catalog {}",
        r#"error: {}: instance type "x1.large" (aws): on_demand.price: must be at most 10000 dollars per hour, got 1000000000000.0"#,
    ),
    (
        "catalog-wrong-type.toml",
        "plan -f examples/nodepools/aws-general.yaml --catalog {}",
        r#"error: {}: instance type "x1.large" (aws): vcpu: invalid type: string "two", expected u32"#,
    ),
    (
        "catalog-missing-field.toml",
        "plan -f examples/nodepools/aws-general.yaml --catalog {}",
        r#"error: {}: instance type "x1.large" (aws): (entry): missing field `memory_mib`"#,
    ),
    (
        "catalog-unknown-schema.toml",
        "plan -f examples/nodepools/aws-general.yaml --catalog {}",
        "error: {}: schema: unsupported schema version 99; this build reads schema 1",
    ),
    // NodePools.
    (
        "nodepool-bad-quantity.yaml",
        "validate {}",
        r#"{}: NodePool/gpu: spec.limits[cpu]: invalid quantity "12 cores": unknown suffix " cores""#,
    ),
    (
        "nodepool-bad-duration.yaml",
        "validate {}",
        r#"{}: NodePool/gpu: spec.disruption.consolidateAfter: invalid duration "10 minutes": expected a duration such as "30s", "15m", "720h" or "1h30m", or "Never""#,
    ),
    (
        "nodepool-bad-operator.yaml",
        "validate {}",
        r#"{}: NodePool/gpu: spec.template.spec.requirements[0].operator: unknown operator "Contains": expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte"#,
    ),
    (
        "nodepool-gt-not-a-number.yaml",
        "validate {}",
        r#"{}: NodePool/gpu: spec.template.spec.requirements[0].values[0]: operator Gt requires an integer value, got "many""#,
    ),
    (
        "nodepool-budget-bad-percent.yaml",
        "validate {}",
        r#"{}: NodePool/gpu: spec.disruption.budgets[0].nodes: nodes "150%" must not exceed 100%"#,
    ),
    // Workloads.
    (
        "pod-negative-request.yaml",
        "plan -f examples/nodepools/aws-general.yaml -f {}",
        r#"error: {}: Pod/default/p: spec.containers[0].resources.requests.cpu: "-1" is negative"#,
    ),
    (
        "pod-gpu-request-not-limit.yaml",
        "plan -f examples/nodepools/aws-general.yaml -f {}",
        r#"error: {}: Pod/default/p: spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2"#,
    ),
    (
        "pod-truncated.yaml",
        "plan -f examples/nodepools/aws-general.yaml -f {}",
        "error: {}: document 1: not valid YAML: did not find expected ',' or '}' at line 4 column 1, while parsing a flow mapping at line 3 column 11",
    ),
    (
        "binary.yaml",
        "validate {}",
        "{}: document 1: not valid YAML: control characters are not allowed",
    ),
    // Scenarios.
    (
        "scenario-nan-rate.yaml",
        "simulate {} --check",
        "error: {}: spec.cloud.interruptions.spotRatePerHour: must be a finite number >= 0, got NaN",
    ),
    (
        "scenario-bad-duration.yaml",
        "simulate {} --check",
        r#"error: {}: spec.duration: invalid duration "3 days": unknown unit " days" (expected one of ns, us, ms, s, m, h, d, w) at line 17 column 13"#,
    ),
];

#[test]
fn every_bad_input_gets_its_exact_error_and_a_failing_exit_code() {
    let dir = path("tests/fixtures/bad-input");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let listed: Vec<&str> = CASES.iter().map(|(f, _, _)| *f).collect();
    for f in &files {
        assert!(listed.contains(&f.as_str()), "{f} has no case in CASES");
    }
    for (file, command, line) in CASES {
        let file_path = format!("{dir}/{file}");
        let args: Vec<String> = command
            .split(' ')
            .map(|a| match a {
                "{}" => file_path.clone(),
                a if a.starts_with("examples/") => path(a),
                a => a.to_owned(),
            })
            .collect();
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = quartermaster(&argv);
        assert_eq!(out.code, 1, "{file}: {out:?}");
        let expected = line.replace("{}", &file_path);
        assert!(
            out.stdout
                .lines()
                .chain(out.stderr.lines())
                .any(|l| l == expected),
            "{file}: expected the line\n{expected}\nin\n{}{}",
            out.stdout,
            out.stderr
        );
    }
}
