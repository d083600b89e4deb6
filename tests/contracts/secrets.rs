//! No credential, token, bootstrap secret or user data ever appears in what Quartermaster
//! prints or serves: distinctive canaries (`CANARY-SECRET-…`) go in through every path a
//! secret can take, and every output is searched for them — as they are, and base64-encoded
//! at every alignment (user data travels base64-encoded), and percent-encoded.
//!
//! Paths in, and the tests that feed them:
//!
//! | path | tests |
//! |---|---|
//! | AWSNodeClass `userData`, annotations, `tags` | plan/explain/validate, simulate, controller binary, SDK logs |
//! | GCPNodeClass `metadata` (`kube-env`, `startup-script`) | plan/explain/validate |
//! | AzureNodeClass `bootstrapSecretRef` (custom data) | plan/validate; SDK logs (the VM PUT's `customData`) |
//! | NodePool annotations | plan/explain, simulate, controller binary |
//! | pod env values, `secretKeyRef`s, args, annotations; Secret objects in manifests | plan/explain/validate, simulate, report, controller binary |
//! | kubeconfig bearer token | report (live), controller binary |
//! | AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN | doctor aws, controller binary, SDK logs |
//! | IRSA token file, EKS Pod Identity token (file and variable) | doctor aws |
//! | GOOGLE_APPLICATION_CREDENTIALS key file, GCP_BILLING_API_KEY | doctor gcp |
//! | AZURE_CLIENT_SECRET, AZURE_FEDERATED_TOKEN_FILE | doctor azure |
//! | Azure bearer token (the static test token) | SDK logs |
//!
//! Outputs searched: `plan`, `explain` and `validate` (text and JSON); `simulate` (text, JSON,
//! and `summary.json`, `cost.csv`, `report.html` of `--report-dir`); `report` (table, JSON,
//! FOCUS CSV) and its errors; `doctor` for each cloud (table and JSON), standard output and
//! error; the real controller binary's logs at `--log-level trace` in JSON and text, its
//! `/metrics`, `/cost` (JSON and CSV), `/` and `/status.json`, and every request body it sent
//! the API server (Events, NodeClaims, Nodes, statuses); the controller's log subscriber over
//! the AWS and Azure SDKs at work (a CreateLaunchTemplate with `UserData`, signed with a
//! session token that SigV4 prints at trace; a VM PUT whose body azure_core prints at debug
//! with its `customData` and bearer token).
//!
//! Covered elsewhere: launch errors that quote the request (a cloud rejecting the user data),
//! Kubernetes Events and NodeClaim conditions of a failed launch, and the controller's page at
//! TRACE with the kwok cloud — `quartermaster-controller`'s `tests::secrets` (in-crate, with a
//! cloud that echoes the request); the `Debug` of NodeClass specs and launch requests, launch
//! errors scrubbed of NodeClass secrets, and the environment's credentials as secrets —
//! `quartermaster-cloud`'s `redact` and `types` tests; the SDK-filter callsites —
//! `quartermaster`'s `logging` tests; the identity sources of `doctor` — the pure functions'
//! tests in `quartermaster-aws` (`doctor`), `quartermaster-gcp` and `quartermaster-azure`
//! (`credentials`).
//!
//! Not covered (and why): the real clouds' launch paths end to end (no cloud account; they reach
//! user data only after lookups that need the emulators of `tests/clouds`, which this test does
//! not edit), so a real SDK error quoting user data is covered only through the providers'
//! scrubbing (`CloudError::scrubbed`), not a real echo; the IRSA token as the AWS SDK sends it
//! to STS (`AssumeRoleWithWebIdentity`: no STS here; the SDK redacts request bodies, and its
//! request-dump callsites are dropped whatever their body); `report --prometheus` (its input is
//! the controller's own metric labels, searched here at the source, `/metrics`); `catalog
//! --live` (network; the GCP API key travels in a header, which ureq's logging redacts);
//! Events scrubbed of the process environment's credentials (the in-crate test would have to
//! set process variables, which races other tests; the controller binary here runs with them
//! set, and nothing prints them); GCP's SDK logs (sanitized URLs only, no bodies).

mod kube_server;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use quartermaster_tests::prometheus::{free_port, http_get};
use quartermaster_tests::{Output, quartermaster};
use serde_json::{Value, json};

use kube_server::KubeServer;

const USER_DATA: &str = "CANARY-SECRET-userdata-7f3a91c2e5d4";
const GCP_KUBE_ENV: &str = "CANARY-SECRET-kubeenv-2b6e04d19a";
const GCP_STARTUP: &str = "CANARY-SECRET-startup-58c1f7e3b0";
const NODECLASS_ANNOTATION: &str = "CANARY-SECRET-ncannotation-3b8e71";
const NODECLASS_TAG: &str = "CANARY-SECRET-nctag-9d2f6a40";
const POOL_ANNOTATION: &str = "CANARY-SECRET-poolannotation-61ac";
const POD_ENV: &str = "CANARY-SECRET-podenv-0c4d95b7e2";
const POD_ARG: &str = "CANARY-SECRET-podarg-5e7b13c8";
const POD_ANNOTATION: &str = "CANARY-SECRET-podannotation-a1f0";
const SECRET_OBJECT: &str = "CANARY-SECRET-secretobject-44d2";
const KUBE_TOKEN: &str = "CANARY-SECRET-kubetoken-e93b7c1f20";
const AWS_SECRET_KEY: &str = "CANARY-SECRET-awssecretkey-6a1d";
const AWS_SESSION: &str = "CANARY-SECRET-awssession-0f83c2";
const IRSA_TOKEN: &str = "CANARY-SECRET-irsajwt-b27e5d";
const POD_IDENTITY_TOKEN: &str = "CANARY-SECRET-podidentity-19fa";
const GCP_PRIVATE_KEY: &str = "CANARY-SECRET-gcpprivatekey-7c05";
const GCP_KEY_ID: &str = "CANARY-SECRET-gcpkeyid-d3e8";
const GCP_API_KEY: &str = "CANARY-SECRET-billingkey-a60b";
const AZURE_SECRET: &str = "CANARY-SECRET-azuresecret-81c4";
const AZURE_FEDERATED: &str = "CANARY-SECRET-azurefederated-2d97";
const AZURE_TOKEN: &str = "CANARY-SECRET-azurebearer-f41e";
const AZURE_CUSTOM_DATA: &str = "CANARY-SECRET-customdata-5bd0";

/// An access key id identifies and may be shown, but only its last four characters.
const AWS_KEY_ID: &str = "AKIACANARYKEYIDW7XZ";

const CANARIES: [&str; 22] = [
    USER_DATA,
    GCP_KUBE_ENV,
    GCP_STARTUP,
    NODECLASS_ANNOTATION,
    NODECLASS_TAG,
    POOL_ANNOTATION,
    POD_ENV,
    POD_ARG,
    POD_ANNOTATION,
    SECRET_OBJECT,
    KUBE_TOKEN,
    AWS_SECRET_KEY,
    AWS_SESSION,
    IRSA_TOKEN,
    POD_IDENTITY_TOKEN,
    GCP_PRIVATE_KEY,
    GCP_KEY_ID,
    GCP_API_KEY,
    AZURE_SECRET,
    AZURE_FEDERATED,
    AZURE_TOKEN,
    AZURE_CUSTOM_DATA,
];

/// The forms a canary may take in an output: itself, its base64 at each alignment (the
/// characters that do not depend on its neighbours), and those percent-encoded (a form body).
fn needles(canary: &str) -> Vec<String> {
    let mut out = vec![canary.to_owned()];
    for offset in 0..3 {
        let mut bytes = vec![b'x'; offset];
        bytes.extend_from_slice(canary.as_bytes());
        let encoded = STANDARD.encode(&bytes);
        let encoded = encoded.trim_end_matches('=');
        let core = &encoded[if offset == 0 { 0 } else { 4 }..encoded.len() - 4];
        out.push(core.to_owned());
        out.push(
            core.replace('+', "%2B")
                .replace('/', "%2F")
                .replace('=', "%3D"),
        );
    }
    out
}

/// Panics naming the canary and the output when `text` holds any form of any canary, or the
/// whole AWS access key id.
fn assert_clean(what: &str, text: &str) {
    for canary in CANARIES {
        for needle in needles(canary) {
            assert!(
                !text.contains(&needle),
                "{canary} (as {needle:?}) leaked into {what}:\n{text}"
            );
        }
    }
    assert!(
        !text.contains(AWS_KEY_ID),
        "the whole access key id leaked into {what}:\n{text}"
    );
}

fn assert_output_clean(what: &str, out: &Output) {
    assert_clean(&format!("{what} (stdout)"), &out.stdout);
    assert_clean(&format!("{what} (stderr)"), &out.stderr);
}

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qm-secrets-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a file");
    path.display().to_string()
}

/// NodeClasses of every cloud with their secrets, a GPU NodePool with a secret annotation, a
/// Deployment and a Pod with secret env values, args and annotations, and a Secret object.
fn manifests() -> String {
    format!(
        r#"apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata:
  name: secret-class
  annotations: {{ops/note: {NODECLASS_ANNOTATION}}}
spec:
  region: us-east-1
  amiFamily: AL2023
  instanceProfile: nodes
  subnetSelectorTerms: [{{tags: {{k: v}}}}]
  securityGroupSelectorTerms: [{{tags: {{k: v}}}}]
  tags: {{team: {NODECLASS_TAG}}}
  userData: |
    #!/bin/bash
    export BOOTSTRAP_TOKEN={USER_DATA}
---
apiVersion: quartermaster.dev/v1
kind: GCPNodeClass
metadata: {{name: secret-gcp}}
spec:
  project: my-project
  region: us-central1
  zones: [us-central1-a]
  metadata:
    kube-env: "KUBELET_CERT: {GCP_KUBE_ENV}"
    startup-script: "echo {GCP_STARTUP}"
---
apiVersion: quartermaster.dev/v1
kind: AzureNodeClass
metadata: {{name: secret-azure}}
spec:
  subscriptionId: 00000000-0000-0000-0000-000000000000
  resourceGroup: mc_rg
  location: eastus
  subnetId: /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s
  bootstrapSecretRef: {{name: node-bootstrap}}
---
apiVersion: quartermaster.dev/v1
kind: NodePool
metadata:
  name: gpu
  annotations: {{ops/note: {POOL_ANNOTATION}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: quartermaster.dev, kind: AWSNodeClass, name: secret-class}}
      requirements:
        - {{key: quartermaster.dev/capacity-type, operator: In, values: [on-demand]}}
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [g5.xlarge, g5.2xlarge]}}
---
apiVersion: v1
kind: Secret
metadata: {{name: node-bootstrap, namespace: ml}}
stringData: {{custom-data: {SECRET_OBJECT}}}
data: {{other: {b64}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: serve, namespace: ml}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: serve}}}}
  template:
    metadata:
      labels: {{app: serve}}
      annotations: {{ops/token: {POD_ANNOTATION}}}
    spec:
      containers:
        - name: main
          image: vllm
          args: ["--token={POD_ARG}"]
          env:
            - {{name: API_TOKEN, value: {POD_ENV}}}
            - name: DB_PASSWORD
              valueFrom: {{secretKeyRef: {{name: db, key: password}}}}
          resources:
            requests: {{cpu: "2", memory: 8Gi, nvidia.com/gpu: "1"}}
            limits: {{nvidia.com/gpu: "1"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: train-0
  namespace: ml
  annotations: {{ops/token: {POD_ANNOTATION}}}
spec:
  containers:
    - name: main
      image: trainer
      command: ["/bin/train", "--token={POD_ARG}"]
      env: [{{name: API_TOKEN, value: {POD_ENV}}}]
      resources:
        requests: {{cpu: "2", memory: 8Gi, nvidia.com/gpu: "1"}}
        limits: {{nvidia.com/gpu: "1"}}
"#,
        b64 = STANDARD.encode(SECRET_OBJECT)
    )
}

#[test]
fn plan_explain_and_validate_print_no_secret_of_the_manifests() {
    let dir = scratch("plan");
    let file = write(&dir, "workload.yaml", &manifests());
    for format in ["table", "json"] {
        let plan = quartermaster(&["plan", "-f", &file, "-o", format]);
        assert_eq!(plan.code, 0, "{plan:?}");
        assert!(
            plan.stdout.contains("g5."),
            "the pods are planned: {plan:?}"
        );
        assert_output_clean(&format!("plan -o {format}"), &plan);
        let explain = quartermaster(&["explain", "pod", "ml/train-0", "-f", &file, "-o", format]);
        assert_eq!(explain.code, 0, "{explain:?}");
        assert_output_clean(&format!("explain -o {format}"), &explain);
    }
    let validate = quartermaster(&["validate", &file]);
    assert_output_clean("validate", &validate);
    // A NodeClass whose secret sits in a field of the wrong type, and one with an unknown
    // field: the errors name the field, never the value.
    let broken = format!(
        "apiVersion: quartermaster.dev/v1\nkind: AWSNodeClass\nmetadata: {{name: broken}}\nspec:\n  amiFamily: AL2023\n  role: r\n  subnetSelectorTerms: [{{tags: {{k: v}}}}]\n  securityGroupSelectorTerms: [{{tags: {{k: v}}}}]\n  userData: [{USER_DATA}]\n  kubelet: {{maxPods: {USER_DATA}}}\n  bootstrapToken: {USER_DATA}\n"
    );
    let broken = write(&dir, "broken.yaml", &broken);
    let out = quartermaster(&["validate", &broken]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("spec.kubelet.maxPods"), "{out:?}");
    assert_output_clean("validate (wrong types)", &out);
    let out = quartermaster(&["plan", "-f", &broken]);
    assert_output_clean("plan (wrong types)", &out);
}

#[test]
fn simulate_prints_and_reports_no_secret_of_the_scenario() {
    let dir = scratch("simulate");
    let scenario = format!(
        r##"apiVersion: quartermaster.dev/v1alpha1
kind: Scenario
metadata: {{name: secrets}}
spec:
  duration: 30m
  nodePools:
    - apiVersion: quartermaster.dev/v1
      kind: NodePool
      metadata:
        name: gpu
        annotations: {{ops/note: {POOL_ANNOTATION}}}
      spec:
        template:
          spec:
            nodeClassRef: {{group: quartermaster.dev, kind: AWSNodeClass, name: default}}
            requirements:
              - {{key: node.kubernetes.io/instance-type, operator: In, values: [g5.xlarge]}}
  nodeClasses:
    - apiVersion: quartermaster.dev/v1
      kind: AWSNodeClass
      metadata:
        name: default
        annotations: {{ops/note: {NODECLASS_ANNOTATION}}}
      spec:
        region: us-east-1
        amiFamily: AL2023
        role: NodeRole
        subnetSelectorTerms: [{{tags: {{k: v}}}}]
        securityGroupSelectorTerms: [{{tags: {{k: v}}}}]
        tags: {{team: {NODECLASS_TAG}}}
        userData: "#!/bin/bash\nexport BOOTSTRAP_TOKEN={USER_DATA}\n"
  workload:
    - name: serve
      namespace: ml
      kind: Deployment
      replicas: 2
      template:
        metadata:
          labels: {{app: serve}}
          annotations: {{ops/token: {POD_ANNOTATION}}}
        spec:
          containers:
            - name: main
              image: vllm
              args: ["--token={POD_ARG}"]
              env: [{{name: API_TOKEN, value: {POD_ENV}}}]
              resources:
                requests: {{cpu: "2", memory: 8Gi, nvidia.com/gpu: "1"}}
                limits: {{nvidia.com/gpu: "1"}}
"##
    );
    let file = write(&dir, "scenario.yaml", &scenario);
    let reports = dir.join("report");
    let reports_s = reports.display().to_string();
    let table = quartermaster(&["simulate", &file, "--report-dir", &reports_s]);
    assert_eq!(table.code, 0, "{table:?}");
    assert_output_clean("simulate", &table);
    let json = quartermaster(&["simulate", &file, "-o", "json"]);
    assert_eq!(json.code, 0, "{json:?}");
    assert!(
        json.json()["total_cost"].as_f64().is_some_and(|c| c > 0.0),
        "nodes were bought: {json:?}"
    );
    assert_output_clean("simulate -o json", &json);
    let check = quartermaster(&["simulate", &file, "--check"]);
    assert_output_clean("simulate --check", &check);
    let mut files = 0;
    for entry in std::fs::read_dir(&reports).expect("the report directory") {
        let path = entry.expect("an entry").path();
        let text = std::fs::read_to_string(&path).expect("a text report");
        assert_clean(&path.display().to_string(), &text);
        files += 1;
    }
    assert!(files >= 3, "summary.json, cost.csv and report.html");
}

/// A kubeconfig for `server` that authenticates with the canary bearer token.
fn kubeconfig(dir: &Path, server: &str) -> String {
    write(
        dir,
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {{server: \"{server}\"}}\nusers:\n- name: fake\n  user: {{token: {KUBE_TOKEN}}}\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: fake, namespace: default}}\ncurrent-context: fake\n"
        ),
    )
}

fn pod_with_secrets(name: &str, node: Option<&str>, phase: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml",
            "annotations": {"ops/token": POD_ANNOTATION},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1"}]},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "trainer",
                "args": [format!("--token={POD_ARG}")],
                "env": [{"name": "API_TOKEN", "value": POD_ENV},
                        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
                "resources": {"requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
                              "limits": {"nvidia.com/gpu": "1"}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        },
        "status": {"phase": phase, "conditions": if node.is_some() { json!([]) } else { json!([
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/0 nodes are available"}]) }}})
}

#[test]
fn report_reads_the_live_fleet_without_printing_its_secrets() {
    let an_hour_ago = (chrono::Utc::now() - chrono::TimeDelta::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let claim = json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodeClaim",
        "metadata": {"name": "gpu-abc", "labels": {"quartermaster.dev/nodepool": "gpu"},
            "annotations": {"ops/note": POOL_ANNOTATION}},
        "spec": {"nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "secret-class"},
            "requirements": []},
        "status": {"providerID": "aws:///us-east-1a/i-0abc", "nodeName": "node-a",
            "instanceType": "g5.xlarge", "zone": "us-east-1a", "capacityType": "on-demand",
            "pricePerHour": 1.006,
            "conditions": [{"type": "Launched", "status": "True", "reason": "Launched", "message": "",
                "lastTransitionTime": an_hour_ago}]}});
    let server = KubeServer::start(vec![
        ("/apis/quartermaster.dev/v1", "nodeclaims", claim),
        (
            "/api/v1",
            "pods",
            pod_with_secrets("train-0", Some("node-a"), "Running"),
        ),
    ]);
    let dir = scratch("report");
    let config = kubeconfig(&dir, &server.url());
    for format in ["table", "json", "csv"] {
        let out = quartermaster(&["report", "--kubeconfig", &config, "-o", format]);
        assert_eq!(out.code, 0, "{out:?}");
        assert!(
            out.stdout.contains("gpu-abc") || out.stdout.contains("node-a"),
            "the claim is reported: {out:?}"
        );
        assert_output_clean(&format!("report -o {format}"), &out);
    }
    assert!(
        server
            .seen()
            .iter()
            .any(|r| r.authorization.as_deref() == Some(&format!("Bearer {KUBE_TOKEN}"))),
        "the API server got the kubeconfig's token"
    );
    // An API server that is not there: the error names it, not the token.
    let dead = kubeconfig(&dir, "http://127.0.0.1:1");
    let out = quartermaster(&["report", "--kubeconfig", &dead]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_output_clean("report (no API server)", &out);
}

/// The `quartermaster` binary, built once for every test of this module.
fn binary() -> PathBuf {
    static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BINARY.get_or_init(crate::e2e::binary).clone()
}

/// `quartermaster ARGS` as a process with exactly `env` (and PATH), so SDK chains see only
/// what the test gives them.
fn run_binary(args: &[&str], env: &[(&str, String)], home: &Path) -> Output {
    let mut command = Command::new(binary());
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", home.join("no-aws-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            home.join("no-aws-credentials"),
        )
        .stdin(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("the quartermaster binary runs");
    Output {
        code: out.status.code().unwrap_or(-1) as u8,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The line of the `doctor` check `name` in `out` (table format: `OUTCOME NAME  DETAIL`).
fn check_line<'a>(out: &'a Output, name: &str) -> &'a str {
    out.stdout
        .lines()
        .find(|l| {
            l.get(5..)
                .is_some_and(|rest| rest.starts_with(&format!("{name} ")))
        })
        .unwrap_or_else(|| panic!("no {name} line in {out:?}"))
}

#[test]
fn doctor_names_each_clouds_identity_and_prints_no_secret() {
    let dir = scratch("doctor");
    let dead = "http://127.0.0.1:1".to_owned();
    let aws_base = || {
        vec![
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ENDPOINT_URL", dead.clone()),
        ]
    };

    // AWS: environment keys (temporary, with a session token).
    let mut env = aws_base();
    env.extend([
        ("AWS_ACCESS_KEY_ID", AWS_KEY_ID.to_owned()),
        ("AWS_SECRET_ACCESS_KEY", AWS_SECRET_KEY.to_owned()),
        ("AWS_SESSION_TOKEN", AWS_SESSION.to_owned()),
    ]);
    let out = run_binary(&["doctor", "--cloud", "aws"], &env, &dir);
    assert_eq!(
        out.code, 1,
        "the STS call fails against a dead endpoint: {out:?}"
    );
    let line = check_line(&out, "credentials");
    assert!(
        line.contains("environment keys (AWS_ACCESS_KEY_ID …W7XZ, with AWS_SESSION_TOKEN)"),
        "{out:?}"
    );
    assert!(
        check_line(&out, "identity").contains("GetCallerIdentity"),
        "{out:?}"
    );
    assert_output_clean("doctor --cloud aws (environment keys)", &out);
    let json = run_binary(&["doctor", "--cloud", "aws", "-o", "json"], &env, &dir);
    assert!(json.stdout.contains("…W7XZ"), "{json:?}");
    assert_output_clean("doctor --cloud aws -o json", &json);

    // AWS: IRSA (the token file holds the canary).
    let irsa = write(&dir, "irsa-token", IRSA_TOKEN);
    let mut env = aws_base();
    env.extend([
        ("AWS_WEB_IDENTITY_TOKEN_FILE", irsa.clone()),
        (
            "AWS_ROLE_ARN",
            "arn:aws:iam::111122223333:role/quartermaster".to_owned(),
        ),
    ]);
    let out = run_binary(&["doctor", "--cloud", "aws"], &env, &dir);
    let line = check_line(&out, "credentials");
    assert!(
        line.contains("IRSA: role arn:aws:iam::111122223333:role/quartermaster")
            && line.contains(&irsa),
        "{out:?}"
    );
    assert_output_clean("doctor --cloud aws (IRSA)", &out);

    // AWS: EKS Pod Identity, with a token file and, broken, a token variable the SDK cannot
    // send (a newline): its error quotes the token.
    let pod_identity = write(&dir, "pod-identity-token", POD_IDENTITY_TOKEN);
    let mut env = aws_base();
    env.extend([
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "http://127.0.0.1:1/v1/credentials".to_owned(),
        ),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", pod_identity),
    ]);
    let out = run_binary(&["doctor", "--cloud", "aws"], &env, &dir);
    assert!(
        check_line(&out, "credentials").contains("EKS Pod Identity"),
        "{out:?}"
    );
    assert_output_clean("doctor --cloud aws (EKS Pod Identity)", &out);
    let mut env = aws_base();
    env.extend([
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "http://127.0.0.1:1/v1/credentials".to_owned(),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN",
            format!("{POD_IDENTITY_TOKEN}\nbroken"),
        ),
    ]);
    let out = run_binary(&["doctor", "--cloud", "aws"], &env, &dir);
    assert_eq!(out.code, 1, "{out:?}");
    assert_output_clean("doctor --cloud aws (unusable container token)", &out);

    // GCP: a service account key file; its email is shown, never its key.
    let key = write(
        &dir,
        "sa.json",
        &json!({"type": "service_account", "project_id": "my-project",
            "private_key_id": GCP_KEY_ID,
            "private_key": format!("-----BEGIN PRIVATE KEY-----\n{GCP_PRIVATE_KEY}\n-----END PRIVATE KEY-----\n"),
            "client_email": "quartermaster@my-project.iam.gserviceaccount.com",
            "token_uri": "http://127.0.0.1:1/token"})
        .to_string(),
    );
    let env = vec![
        ("GOOGLE_APPLICATION_CREDENTIALS", key.clone()),
        ("GCP_BILLING_ENDPOINT", dead.clone()),
        ("GCP_BILLING_API_KEY", GCP_API_KEY.to_owned()),
    ];
    for args in [
        vec!["doctor", "--cloud", "gcp", "--gcp-project", "my-project"],
        vec![
            "doctor",
            "--cloud",
            "gcp",
            "--gcp-project",
            "my-project",
            "--gcp-endpoint",
            "http://127.0.0.1:1",
        ],
    ] {
        let out = run_binary(&args, &env, &dir);
        assert_eq!(out.code, 1, "{out:?}");
        let line = check_line(&out, "identity");
        assert!(
            line.starts_with("OK ")
                && line.ends_with(&format!(
                    "service account quartermaster@my-project.iam.gserviceaccount.com from GOOGLE_APPLICATION_CREDENTIALS ({key})"
                )),
            "{out:?}"
        );
        assert_output_clean(&format!("{args:?}"), &out);
    }

    // Azure: a service principal's secret, then workload identity; the client id is shown.
    let client = "11111111-2222-3333-4444-555555555555";
    let federated = write(&dir, "azure-token", AZURE_FEDERATED);
    let args = [
        "doctor",
        "--cloud",
        "azure",
        "--azure-endpoint",
        "https://127.0.0.1:1",
        "--azure-subscription-id",
        "00000000-0000-0000-0000-000000000000",
        "--azure-resource-group",
        "rg",
        "--region",
        "eastus",
    ];
    for (variable, value, shown) in [
        (
            "AZURE_CLIENT_SECRET",
            AZURE_SECRET.to_owned(),
            "a service principal from the environment: client id 11111111-2222-3333-4444-555555555555",
        ),
        (
            "AZURE_FEDERATED_TOKEN_FILE",
            federated.clone(),
            "workload identity: client id 11111111-2222-3333-4444-555555555555",
        ),
    ] {
        let env = vec![
            ("AZURE_CLIENT_ID", client.to_owned()),
            (
                "AZURE_TENANT_ID",
                "66666666-7777-8888-9999-000000000000".to_owned(),
            ),
            (variable, value),
            ("AZURE_AUTHORITY_HOST", "https://127.0.0.1:1".to_owned()),
            ("AZURE_PRICES_ENDPOINT", dead.clone()),
            ("IDENTITY_ENDPOINT", dead.clone()),
        ];
        let out = run_binary(&args, &env, &dir);
        assert_eq!(out.code, 1, "{out:?}");
        assert!(check_line(&out, "identity").contains(shown), "{out:?}");
        assert_output_clean(&format!("doctor --cloud azure ({variable})"), &out);
    }
}

/// Runs the controller binary against `server` with the kwok cloud at `--log-level trace` in
/// `format` until it has launched a node (or exited), and returns its log and what its
/// `/metrics`, `/cost` and page served meanwhile.
fn run_controller(
    server: &KubeServer,
    format: &str,
    dir: &Path,
) -> (String, Vec<(String, String)>) {
    let config = kubeconfig(dir, &server.url());
    let metrics_port = free_port().expect("a free port");
    let health_port = free_port().expect("a free port");
    let mut child = Command::new(binary())
        .args([
            "controller",
            "--cloud-provider",
            "kwok",
            "--leader-elect=false",
            "--log-level",
            "trace",
            "--log-format",
            format,
            "--batch-idle-duration",
            "1s",
            "--batch-max-duration",
            "2s",
            "--price-refresh-interval",
            "0",
        ])
        .arg("--kubeconfig")
        .arg(&config)
        .arg(format!("--metrics-port={metrics_port}"))
        .arg(format!("--health-probe-port={health_port}"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("POD_NAME", "secrets-test")
        .env("AWS_ACCESS_KEY_ID", AWS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", AWS_SECRET_KEY)
        .env("AWS_SESSION_TOKEN", AWS_SESSION)
        .env("AZURE_CLIENT_SECRET", AZURE_SECRET)
        .env("GCP_BILLING_API_KEY", GCP_API_KEY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the controller starts");
    let log = Arc::new(Mutex::new(String::new()));
    let (launched_tx, launched_rx) = std::sync::mpsc::channel::<()>();
    let mut readers = Vec::new();
    for stream in [
        Box::new(child.stderr.take().expect("stderr")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stdout.take().expect("stdout")),
    ] {
        let log = log.clone();
        let launched = launched_tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if line.contains("launched") && line.contains("nodeclaim") {
                    let _ = launched.send(());
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        }));
    }
    drop(launched_tx);
    // A guard against a controller that never launches (the log is checked all the same); no
    // time is asserted.
    let _ = launched_rx.recv_timeout(Duration::from_secs(300));
    // …and until its Launched Event reached the API server.
    for _ in 0..6000 {
        if server
            .seen()
            .iter()
            .any(|r| r.method == "POST" && r.target.contains("/events"))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], metrics_port));
    let mut served = Vec::new();
    for path in ["/metrics", "/cost", "/cost?format=csv", "/", "/status.json"] {
        if let Ok((status, body)) = http_get(addr, path) {
            assert_eq!(status, 200, "{path}: {body}");
            served.push((path.to_owned(), body));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    for reader in readers {
        let _ = reader.join();
    }
    let text = log.lock().unwrap().clone();
    (text, served)
}

#[test]
fn the_controllers_logs_at_trace_endpoints_and_writes_hold_no_secret() {
    let dir = scratch("controller");
    for format in ["json", "text"] {
        let server = KubeServer::start(vec![
            (
                "/apis/quartermaster.dev/v1",
                "awsnodeclasses",
                json!({"apiVersion": "quartermaster.dev/v1", "kind": "AWSNodeClass",
                    "metadata": {"name": "secret-class", "annotations": {"ops/note": NODECLASS_ANNOTATION}},
                    "spec": {"region": "us-east-1", "amiFamily": "AL2023", "instanceProfile": "nodes",
                        "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                        "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
                        "tags": {"team": NODECLASS_TAG},
                        "userData": format!("#!/bin/bash\nexport BOOTSTRAP_TOKEN={USER_DATA}\n")}}),
            ),
            (
                "/apis/quartermaster.dev/v1",
                "nodepools",
                json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
                    "metadata": {"name": "gpu", "annotations": {"ops/note": POOL_ANNOTATION}},
                    "spec": {"template": {"spec": {
                        "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "secret-class"},
                        "requirements": [
                            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge"]},
                            {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}],
                        "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}},
                        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}}}),
            ),
            (
                "/api/v1",
                "pods",
                pod_with_secrets("train-0", None, "Pending"),
            ),
        ]);
        let (log, served) = run_controller(&server, format, &dir);
        assert!(
            log.lines().any(|l| l.contains("TRACE")) && log.contains("launched"),
            "the controller logged at trace and launched ({format}):\n{log}"
        );
        assert_clean(&format!("the controller's {format} log"), &log);
        for (path, body) in &served {
            assert_clean(&format!("{path} ({format})"), body);
        }
        let seen = server.seen();
        let bearer = format!("Bearer {KUBE_TOKEN}");
        let without: Vec<(&str, &str)> = seen
            .iter()
            .filter(|r| r.authorization.as_deref() != Some(bearer.as_str()))
            .map(|r| (r.method.as_str(), r.target.as_str()))
            .collect();
        assert!(
            without.is_empty(),
            "every request carried the kubeconfig's token; these did not: {without:?}"
        );
        assert!(
            seen.iter()
                .any(|r| r.method == "POST" && r.target.contains("nodeclaims")),
            "the controller launched ({format}): {:#?}\n{log}",
            seen.iter()
                .map(|r| format!("{} {}", r.method, r.target))
                .collect::<Vec<_>>()
        );
        assert!(
            seen.iter()
                .any(|r| r.method == "POST" && r.target.contains("/events")),
            "the controller published Events ({format})"
        );
        for r in &seen {
            assert_clean(&format!("{} {} ({format})", r.method, r.target), &r.body);
        }
    }
}

/// Bytes shared with a log writer.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// The AWS and Azure SDKs at work against dead endpoints, with secrets in their requests: a
/// CreateLaunchTemplate whose `UserData` holds the user data canary (signed with canary keys
/// and session token), and a VM PUT with canary custom data and a canary bearer token.
fn sdk_calls() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let config = aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:1")
            .credentials_provider(aws_sdk_ec2::config::Credentials::new(
                AWS_KEY_ID,
                AWS_SECRET_KEY,
                Some(AWS_SESSION.to_owned()),
                None,
                "test",
            ))
            .http_client(
                aws_smithy_http_client::Builder::new()
                    .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                        aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
                    ))
                    .build_https(),
            )
            .retry_config(aws_sdk_ec2::config::retry::RetryConfig::disabled())
            .build();
        let user_data = format!("#!/bin/bash\nexport BOOTSTRAP_TOKEN={USER_DATA}\n");
        let result = aws_sdk_ec2::Client::from_conf(config)
            .create_launch_template()
            .launch_template_name("quartermaster/secrets")
            .launch_template_data(
                aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                    .user_data(STANDARD.encode(&user_data))
                    .build(),
            )
            .send()
            .await;
        assert!(result.is_err(), "nothing listens at the endpoint");

        let settings = quartermaster_azure::AzureSettings {
            cluster_name: "secrets".into(),
            subscription_id: "00000000-0000-0000-0000-000000000000".into(),
            resource_group: "rg".into(),
            endpoint: Some("http://127.0.0.1:1".into()),
            credentials: quartermaster_azure::CredentialSource::StaticToken(AZURE_TOKEN.into()),
            ..quartermaster_azure::AzureSettings::default()
        };
        let cloud = quartermaster_azure::AzureCloud::connect(
            settings,
            quartermaster_pricing::Catalog::embedded(),
            Arc::new(quartermaster_cloud::SystemClock),
        )
        .expect("an Azure client");
        let put = cloud
            .arm()
            .put_vm(quartermaster_azure::port::VmSpec {
                name: "qm-secrets-0".into(),
                location: "eastus".into(),
                size: "Standard_NC24ads_A100_v4".into(),
                zone: None,
                spot: false,
                subnet_id: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s".into(),
                image: quartermaster_azure::port::ImageRef::Id("/images/x".into()),
                os_disk_size_gb: None,
                custom_data: Some(STANDARD.encode(format!("#cloud-config\ntoken: {AZURE_CUSTOM_DATA}\n"))),
                ssh_public_key: None,
                identities: Vec::new(),
                capacity_reservation_group: None,
                tags: Default::default(),
            })
            .await;
        assert!(put.is_err(), "nothing listens at the endpoint");
    });
}

#[test]
fn the_sdks_request_dumps_never_reach_the_controllers_log() {
    // Control: a plain subscriber at trace sees the SDKs print secrets — AWS SigV4 the session
    // token (its canonical request), azure_core the bearer token and the custom data (its
    // transport event) — so this test exercises the callsites it means to. (The AWS SDK
    // redacts request bodies, so the user data itself shows only where a filter failed.)
    let plain = Buffer::default();
    let sink = plain.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, sdk_calls);
    let plain = plain.text();
    for canary in [AWS_SESSION, AZURE_TOKEN, AZURE_CUSTOM_DATA] {
        assert!(
            needles(canary).iter().any(|n| plain.contains(n)),
            "the SDKs no longer print {canary} at trace; this test needs a new witness"
        );
    }

    for format in [
        quartermaster::logging::Format::Json,
        quartermaster::logging::Format::Text,
    ] {
        let log = Buffer::default();
        let sink = log.clone();
        let subscriber =
            quartermaster::logging::subscriber("trace", format, false, move || sink.clone())
                .expect("the controller's subscriber");
        tracing::subscriber::with_default(subscriber, sdk_calls);
        let log = log.text();
        assert!(
            log.contains("aws_smithy_runtime") && log.contains("azure"),
            "the SDKs logged ({format:?}):\n{log}"
        );
        assert_clean(
            &format!("the controller's {format:?} log of the SDKs"),
            &log,
        );
    }
}

#[test]
fn the_chart_takes_no_credential_values() {
    let values = std::fs::read_to_string(quartermaster_tests::path(
        "charts/quartermaster/values.yaml",
    ))
    .expect("values.yaml");
    let schema = std::fs::read_to_string(quartermaster_tests::path(
        "charts/quartermaster/values.schema.json",
    ))
    .expect("values.schema.json");
    let credential_words = [
        "accesskey",
        "secretkey",
        "secretaccesskey",
        "sessiontoken",
        "clientsecret",
        "password",
        "apikey",
        "credentials",
        "privatekey",
        "bearertoken",
        "token:",
    ];
    for (name, text) in [("values.yaml", &values), ("values.schema.json", &schema)] {
        for line in text.lines() {
            let trimmed = line.trim_start();
            if trimmed.starts_with('#') {
                continue;
            }
            let squashed: String = trimmed
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == ':')
                .collect::<String>()
                .to_ascii_lowercase();
            for word in credential_words {
                assert!(
                    !squashed.contains(word),
                    "{name} takes a credential ({word}): {line}"
                );
            }
        }
    }
}
