//! Dynamic Resource Allocation against the upstream examples (issue 22): the manifests of
//! NVIDIA's GPU DRA driver (quickstart `gpu-test*`, its e2e and bats specs), of the Kubernetes
//! documentation and of the DRA example driver, copied with their sources into
//! `tests/fixtures/dra/` (each file's header says where from and what was changed).
//!
//! - `validate` accepts every DRA object in them (the workload kinds beside them are not its
//!   business and are refused as such), and refuses the one example that is really broken with
//!   the expected message;
//! - `plan` puts every pod of the NVIDIA examples on a type whose predicted devices satisfy its
//!   claims (the devices checked independently through `quartermaster_pricing::published_devices`,
//!   pods sharing one ResourceClaim on one node), with or without NVIDIA's own DeviceClasses;
//! - what no type can satisfy (fictional drivers, the DRA example driver's `gpu.example.com`, an
//!   attribute the driver no longer publishes, a GPU that does not exist) is unschedulable, and
//!   `explain` says which claim rules each type out.
//!
//! Tests marked `#[ignore]` are product bugs found with these examples (see each reason).

use std::collections::BTreeMap;

use quartermaster_pricing::{Catalog, Cloud, DeviceAttribute, published_devices};
use quartermaster_tests::{path, quartermaster};
use serde_json::Value;

/// Where the fixtures live, relative to the workspace root.
const DIR: &str = "tests/fixtures/dra";
/// The GPU NodePool of the examples (tainted `nvidia.com/gpu`; NVIDIA's examples tolerate it).
const AWS_GPU: &str = "examples/nodepools/aws-gpu.yaml";
/// Our untainted GPU pool, for the examples whose pods carry no toleration.
const UNTAINTED: &str = "tests/fixtures/dra/pool-aws-gpu-untainted.yaml";
/// Our A100 pool in mig-parted's `all-balanced` layout.
const MIG_POOL: &str = "tests/fixtures/dra/pool-aws-a100-mig.yaml";
/// NVIDIA's DeviceClasses as its Helm chart renders them for `resource.k8s.io/v1`.
const NVIDIA_CLASSES: &str = "tests/fixtures/dra/nvidia-deviceclasses.yaml";

fn fixture(name: &str) -> String {
    format!("{DIR}/{name}")
}

/// Runs `quartermaster VERB -f FILE... -o json` (files relative to the workspace root).
fn run(verb: &[&str], files: &[String]) -> Value {
    let files: Vec<String> = files.iter().map(|f| path(f)).collect();
    let mut args: Vec<&str> = verb.to_vec();
    for f in &files {
        args.extend(["-f", f.as_str()]);
    }
    args.extend(["-o", "json"]);
    let out = quartermaster(&args);
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    out.json()
}

/// `"46068Mi"`, `"80Gi"` in MiB.
fn mib(quantity: &str) -> u64 {
    if let Some(n) = quantity.strip_suffix("Mi") {
        n.parse().expect("MiB")
    } else if let Some(n) = quantity.strip_suffix("Gi") {
        n.parse::<u64>().expect("GiB") * 1024
    } else {
        panic!("unexpected memory quantity {quantity}")
    }
}

/// The whole NVIDIA GPUs (`type` `gpu`) a node of the AWS type publishes, as the device model
/// says: `(productName, memory in MiB)`.
fn gpus(instance_type: &str) -> Vec<(String, u64)> {
    let catalog = Catalog::embedded();
    let it = catalog
        .get(Cloud::Aws, instance_type)
        .unwrap_or_else(|| panic!("{instance_type} is not in the catalog"));
    let string = |v: Option<&DeviceAttribute>| match v {
        Some(DeviceAttribute::String(s)) => s.clone(),
        other => panic!("{instance_type}: not a string attribute: {other:?}"),
    };
    published_devices(it)
        .into_iter()
        .filter(|d| d.driver == "gpu.nvidia.com")
        .filter(|d| string(d.attributes.get("type")) == "gpu")
        .map(|d| {
            (
                string(d.attributes.get("productName")),
                mib(&d.capacity["memory"]),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// validate

/// Examples `validate` refuses, with the problem it must report.
const REFUSED: &[(&str, &str)] = &[(
    // The documentation's YAML indents `expression:` beside `cel:` instead of under it, so the
    // selector has an empty `cel` (and an unknown field `expression`): the API server refuses
    // it too.
    "k8s-docs-resourceclaim.yaml",
    "ResourceClaim/example-resource-claim: spec.devices.requests[0].exactly.selectors[0].cel.expression: required field is missing",
)];

/// The workload kinds beside the DRA objects in the examples: `validate` checks Quartermaster
/// objects only and names these as not its own (`plan` reads them).
const WORKLOAD_KINDS: &[&str] = &["Namespace", "Pod", "Deployment", "Job"];

fn fixture_names() -> Vec<String> {
    let dir = quartermaster_tests::workspace_root().join(DIR);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_fixture_names_its_source_and_its_dra_objects_pass_validate() {
    let names = fixture_names();
    assert!(names.len() >= 25, "fixtures missing: {names:?}");
    for name in &names {
        let file = path(&fixture(name));
        let text = std::fs::read_to_string(&file).expect("fixture");
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        let first = header.first().copied().unwrap_or_default();
        assert!(
            (first.starts_with("# Source: ")
                && header.iter().any(|l| l.contains("https://github.com/")))
                || first.starts_with("# Our own (not upstream)"),
            "{name}: the header must give the source: {header:?}"
        );
        let out = quartermaster(&["validate", &file]);
        let shown = format!("stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
        if let Some((_, problem)) = REFUSED.iter().find(|(n, _)| n == name) {
            assert_eq!(out.code, 1, "{name}: {shown}");
            assert!(
                out.stdout.contains(&format!("{file}: {problem}")),
                "{name}: expected `{problem}`: {shown}"
            );
            continue;
        }
        let workloads = text
            .lines()
            .filter(|l| {
                l.strip_prefix("kind: ")
                    .is_some_and(|k| WORKLOAD_KINDS.contains(&k.trim()))
            })
            .count();
        let problems: Vec<&str> = out
            .stdout
            .lines()
            .filter(|l| l.starts_with(&format!("{file}: ")))
            .collect();
        for p in &problems {
            let named = WORKLOAD_KINDS
                .iter()
                .any(|k| p.starts_with(&format!("{file}: {k}/")));
            assert!(
                named && p.contains("is not a Quartermaster object"),
                "{name}: a DRA object or pool is refused: {p}"
            );
        }
        assert_eq!(problems.len(), workloads, "{name}: {shown}");
        assert_eq!(out.code, u8::from(workloads > 0), "{name}: {shown}");
    }
}

// ---------------------------------------------------------------------------------------------
// plan: the NVIDIA examples that must be placed

/// An upstream example whose pods must all be placed.
struct Placed {
    /// The fixture (in `tests/fixtures/dra/`).
    fixture: &'static str,
    /// Each pod and the whole GPUs its claims take.
    pods: &'static [(&'static str, usize)],
    /// Pods that share one ResourceClaim (its GPUs are counted once, on one node).
    shared: &'static [&'static str],
    /// The least memory (MiB) each GPU taken must have, from the claim's selector.
    min_gpu_mib: u64,
}

const PLACED: &[Placed] = &[
    // Two pods, each its own claim from a template: one GPU each.
    Placed {
        fixture: "nvidia-gpu-test1.yaml",
        pods: &[("gpu-test1/pod1", 1), ("gpu-test1/pod2", 1)],
        shared: &[],
        min_gpu_mib: 0,
    },
    // One pod, two containers sharing one claim: one GPU.
    Placed {
        fixture: "nvidia-gpu-test2.yaml",
        pods: &[("gpu-test2/pod", 1)],
        shared: &[],
        min_gpu_mib: 0,
    },
    // One ResourceClaim shared by two pods: one GPU, both pods on its node.
    Placed {
        fixture: "nvidia-gpu-test3.yaml",
        pods: &[("gpu-test3/pod1", 1), ("gpu-test3/pod2", 1)],
        shared: &["gpu-test3/pod1", "gpu-test3/pod2"],
        min_gpu_mib: 0,
    },
    // Two requests in one claim (time-slicing and MPS configs): two distinct GPUs.
    Placed {
        fixture: "nvidia-gpu-test5.yaml",
        pods: &[("gpu-test5/pod0", 2)],
        shared: &[],
        min_gpu_mib: 0,
    },
    // Two claims from one template in one pod: two GPUs.
    Placed {
        fixture: "nvidia-gpu-test7.yaml",
        pods: &[("gpu-test7/gpu-pod", 2)],
        shared: &[],
        min_gpu_mib: 0,
    },
    // `count: 2`.
    Placed {
        fixture: "nvidia-gpu-test8.yaml",
        pods: &[("gpu-test8/gpu-pod", 2)],
        shared: &[],
        min_gpu_mib: 0,
    },
    // One MPS-shared GPU for two containers.
    Placed {
        fixture: "nvidia-gpu-test-mps.yaml",
        pods: &[("gpu-test-mps/test-pod", 1)],
        shared: &[],
        min_gpu_mib: 0,
    },
    // NVIDIA's e2e `[sharing]`: a Deployment of four replicas sharing one ResourceClaim: one
    // GPU, all four on its node.
    Placed {
        fixture: "nvidia-e2e-timeslicing.yaml",
        pods: &[
            ("nvidia-e2e-sharing/gpu-test-0", 1),
            ("nvidia-e2e-sharing/gpu-test-1", 1),
            ("nvidia-e2e-sharing/gpu-test-2", 1),
            ("nvidia-e2e-sharing/gpu-test-3", 1),
        ],
        shared: &[
            "nvidia-e2e-sharing/gpu-test-0",
            "nvidia-e2e-sharing/gpu-test-1",
            "nvidia-e2e-sharing/gpu-test-2",
            "nvidia-e2e-sharing/gpu-test-3",
        ],
        min_gpu_mib: 0,
    },
    // `driverVersion.compareTo(semver("580.95.5")) >= 0`: every GPU of the assumed driver.
    Placed {
        fixture: "nvidia-e2e-driver-version.yaml",
        pods: &[("nvidia-e2e-driver/test-gpu-driver-version", 1)],
        shared: &[],
        min_gpu_mib: 0,
    },
    // `memory.compareTo(quantity("72Gi")) >= 0`: an H100 80GB (81559Mi), not an L40S or an
    // A100 40GB.
    Placed {
        fixture: "nvidia-e2e-memory-size.yaml",
        pods: &[("nvidia-e2e-memory/test-gpu-memory", 1)],
        shared: &[],
        min_gpu_mib: 72 * 1024,
    },
];

/// Checks that `plan` placed every pod of `case` on a type with the GPUs its claims take.
/// Returns the instance types of the new nodes, sorted.
fn check_placed(case: &Placed, plan: &Value) -> Vec<String> {
    let name = case.fixture;
    assert_eq!(
        plan["unschedulable"].as_array().map(Vec::len),
        Some(0),
        "{name}: {plan:#}"
    );
    let nodes = plan["new_nodes"].as_array().expect("new_nodes");
    let mut node_of: BTreeMap<String, usize> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for p in n["pods"].as_array().expect("pods") {
            let p = p.as_str().expect("pod name").to_owned();
            assert!(
                case.pods.iter().any(|(q, _)| *q == p),
                "{name}: unexpected pod {p}: {plan:#}"
            );
            assert!(node_of.insert(p, i).is_none(), "{name}: placed twice");
        }
    }
    for (p, _) in case.pods {
        assert!(node_of.contains_key(*p), "{name}: {p} not placed: {plan:#}");
    }
    if let Some(first) = case.shared.first() {
        for p in case.shared {
            assert_eq!(
                node_of[*p], node_of[*first],
                "{name}: pods sharing a ResourceClaim on different nodes: {plan:#}"
            );
        }
    }
    let mut types = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let it = n["instance_type"].as_str().expect("instance_type");
        types.push(it.to_owned());
        let mut wanted = 0;
        let mut shared_counted = false;
        for (p, g) in case.pods.iter().filter(|(p, _)| node_of[*p] == i) {
            if case.shared.contains(p) {
                if shared_counted {
                    continue;
                }
                shared_counted = true;
            }
            wanted += g;
        }
        let fitting = gpus(it)
            .into_iter()
            .filter(|(_, m)| *m >= case.min_gpu_mib)
            .count();
        assert!(
            fitting >= wanted,
            "{name}: {it} has {fitting} GPU(s) satisfying the claims, its pods take {wanted}: {plan:#}"
        );
    }
    let cost = plan["cost_per_hour"].as_f64().expect("cost");
    let bound = plan["lower_bound_per_hour"].as_f64().expect("bound");
    assert!(bound <= cost + 1e-9, "{name}: bound {bound} > cost {cost}");
    types.sort();
    types
}

#[test]
fn nvidia_examples_plan_on_types_whose_devices_satisfy_their_claims() {
    for case in PLACED {
        let built_in = run(&["plan"], &[AWS_GPU.to_owned(), fixture(case.fixture)]);
        let types = check_placed(case, &built_in);
        // NVIDIA's own DeviceClasses (as its chart installs them) replace the built-in ones
        // of the same names and select the same devices.
        let given = run(
            &["plan"],
            &[
                AWS_GPU.to_owned(),
                NVIDIA_CLASSES.to_owned(),
                fixture(case.fixture),
            ],
        );
        assert_eq!(check_placed(case, &given), types, "{}", case.fixture);
    }
}

#[test]
fn a_memory_selector_gets_an_80gb_gpu_and_explain_rules_the_smaller_ones_out() {
    let files = [AWS_GPU.to_owned(), fixture("nvidia-e2e-memory-size.yaml")];
    let plan = run(&["plan"], &files);
    let it = plan["new_nodes"][0]["instance_type"]
        .as_str()
        .expect("a new node");
    let (product, memory) = gpus(it).into_iter().next().expect("a GPU");
    assert!(
        product.contains("H100") && memory >= 72 * 1024,
        "{it}: {product} {memory}Mi"
    );
    let e = run(
        &["explain", "pod", "nvidia-e2e-memory/test-gpu-memory"],
        &files,
    );
    assert_eq!(e["outcome"]["instance_type"], it, "{e:#}");
    // L40S (46068Mi) and A100-SXM4-40GB (40960Mi): the selector matches none of their GPUs.
    for (t, n) in [("g6e.xlarge", 1), ("p4d.24xlarge", 8)] {
        let want = format!(
            "resource claims: ResourceClaimTemplate/nvidia-e2e-memory/gpu-memory-template: request gpu: 0 free device(s) match, 1 wanted: `device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"72Gi\")) >= 0` matches 0 of {n} device(s)"
        );
        assert!(
            claim_reasons(&e, "aws-gpu", t).iter().any(|r| *r == want),
            "{t}: no `{want}` in {e:#}"
        );
    }
}

#[test]
fn two_claims_in_one_pod_rule_out_a_one_gpu_type_for_the_second() {
    let files = [AWS_GPU.to_owned(), fixture("nvidia-gpu-test7.yaml")];
    let e = run(&["explain", "pod", "gpu-test7/gpu-pod"], &files);
    assert_eq!(e["outcome"]["kind"], "new-node", "{e:#}");
    let r = claim_reasons(&e, "aws-gpu", "g6.xlarge");
    assert!(
        r.iter().any(|r| r.starts_with(
            "resource claims: ResourceClaimTemplate/gpu-test7/single-gpu: request gpu: 0 free device(s) match, 1 wanted"
        )),
        "{r:?}"
    );
}

/// The `resource claims:` reasons `explain` gives for `instance_type` in `nodepool`.
fn claim_reasons<'a>(e: &'a Value, nodepool: &str, instance_type: &str) -> Vec<&'a str> {
    e["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .filter(|c| c["nodepool"] == nodepool && c["instance_type"] == instance_type)
        .filter_map(|c| c["reason"].as_str())
        .filter(|r| r.starts_with("resource claims:"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// plan and explain: what no type can satisfy

/// An upstream example no catalog type can satisfy, and why.
struct Unsatisfiable {
    /// All the files to plan (relative to the workspace root; fixtures by name).
    files: &'static [&'static str],
    /// Each pod and the claim `explain` must name for it.
    pods: &'static [(&'static str, &'static str)],
    /// The NodePool and instance type whose `explain` row is checked.
    probe: (&'static str, &'static str),
    /// A piece of the reason beyond the claim (the selector or the missing object).
    detail: &'static str,
}

const UNSATISFIABLE: &[Unsatisfiable] = &[
    // MIG devices exist only on a node whose GPUs have a MIG layout; aws-gpu has none, so the
    // A100s publish whole GPUs (with a MIG pool: see the ignored test below).
    Unsatisfiable {
        files: &[AWS_GPU, "nvidia-gpu-test4.yaml"],
        pods: &[
            (
                "gpu-test4/pod-0",
                "ResourceClaimTemplate/gpu-test4/mig-devices",
            ),
            (
                "gpu-test4/pod-3",
                "ResourceClaimTemplate/gpu-test4/mig-devices",
            ),
        ],
        probe: ("aws-gpu", "p4d.24xlarge"),
        detail: "type == 'mig'` matches 0 of 8 device(s)",
    },
    // The selector reads the `index` attribute, which NVIDIA's driver no longer publishes
    // (removed in 36fc80ab, 2025-09; v0.4.0, the release we model, has none): on an A100 the
    // selector fails as it does in the kube-scheduler, elsewhere it matches nothing.
    Unsatisfiable {
        files: &[AWS_GPU, "nvidia-gpu-test6.yaml"],
        pods: &[("gpu-test6/pod-0", "ResourceClaimTemplate/gpu-test6/a100")],
        probe: ("aws-gpu", "p4d.24xlarge"),
        detail: "selector failed",
    },
    // NVIDIA's negative e2e test: there is no "h300".
    Unsatisfiable {
        files: &[AWS_GPU, "nvidia-e2e-error-handling.yaml"],
        pods: &[(
            "nvidia-e2e-negative/test-unavailable-gpu",
            "ResourceClaimTemplate/nvidia-e2e-negative/h300-nonexistent-template",
        )],
        probe: ("aws-gpu", "p5.4xlarge"),
        detail: "h300",
    },
    // NVIDIA's bats test of a productName that matches nothing (no toleration: our untainted
    // pool).
    Unsatisfiable {
        files: &[AWS_GPU, UNTAINTED, "nvidia-bats-gpu-cel-nomatch.yaml"],
        pods: &[(
            "default/pod-cel-nomatch",
            "ResourceClaimTemplate/default/rct-cel-nomatch",
        )],
        probe: ("aws-gpu-untainted", "g6.xlarge"),
        detail: "productName == \"NONEXISTENT-GPU-XYZ\"` matches 0 of 1 device(s)",
    },
    // The DRA example driver (gpu.example.com) is a mock no catalog type publishes devices
    // for: its class selects nothing on a real GPU node.
    Unsatisfiable {
        files: &[
            AWS_GPU,
            UNTAINTED,
            "example-driver-deviceclass.yaml",
            "example-driver-basic-resourceclaimtemplate.yaml",
        ],
        pods: &[
            (
                "basic-resourceclaimtemplate/pod0",
                "ResourceClaimTemplate/basic-resourceclaimtemplate/single-gpu",
            ),
            (
                "basic-resourceclaimtemplate/pod1",
                "ResourceClaimTemplate/basic-resourceclaimtemplate/single-gpu",
            ),
        ],
        probe: ("aws-gpu-untainted", "g6.xlarge"),
        detail: "`device.driver == 'gpu.example.com'` matches 0 of 1 device(s)",
    },
    Unsatisfiable {
        files: &[
            AWS_GPU,
            UNTAINTED,
            "example-driver-deviceclass.yaml",
            "example-driver-basic-shared-claim-across-pods.yaml",
        ],
        pods: &[
            (
                "basic-shared-claim-across-pods/pod0",
                "ResourceClaim/basic-shared-claim-across-pods/single-gpu",
            ),
            (
                "basic-shared-claim-across-pods/pod1",
                "ResourceClaim/basic-shared-claim-across-pods/single-gpu",
            ),
        ],
        probe: ("aws-gpu-untainted", "g6.xlarge"),
        detail: "`device.driver == 'gpu.example.com'` matches 0 of 1 device(s)",
    },
    Unsatisfiable {
        files: &[
            AWS_GPU,
            UNTAINTED,
            "example-driver-deviceclass.yaml",
            "example-driver-cel-selector.yaml",
        ],
        pods: &[(
            "cel-selector/pod0",
            "ResourceClaimTemplate/cel-selector/single-gpu-cel",
        )],
        probe: ("aws-gpu-untainted", "g6.xlarge"),
        detail: "`device.driver == 'gpu.example.com'` matches 0 of 1 device(s)",
    },
    // firstAvailable: the first subrequest is reported.
    Unsatisfiable {
        files: &[
            AWS_GPU,
            UNTAINTED,
            "example-driver-deviceclass.yaml",
            "example-driver-prioritized-alternatives.yaml",
        ],
        pods: &[
            (
                "prioritized-alternatives/pod0",
                "ResourceClaimTemplate/prioritized-alternatives/prioritized-gpu",
            ),
            (
                "prioritized-alternatives/pod1",
                "ResourceClaimTemplate/prioritized-alternatives/preferred-gpu",
            ),
        ],
        probe: ("aws-gpu-untainted", "g6.xlarge"),
        detail: "request gpu/",
    },
    // Without the example driver's DeviceClass the class itself is missing.
    Unsatisfiable {
        files: &[
            AWS_GPU,
            UNTAINTED,
            "example-driver-basic-resourceclaimtemplate.yaml",
        ],
        pods: &[(
            "basic-resourceclaimtemplate/pod0",
            "ResourceClaimTemplate/basic-resourceclaimtemplate/single-gpu",
        )],
        probe: ("aws-gpu-untainted", "g6.xlarge"),
        detail: "DeviceClass \"gpu.example.com\" not found",
    },
    // The documentation's Job: one claim per pod from the template and one shared
    // ResourceClaim, whose selector is broken as given (see REFUSED).
    Unsatisfiable {
        files: &[
            AWS_GPU,
            UNTAINTED,
            "k8s-docs-deviceclass.yaml",
            "k8s-docs-resourceclaim.yaml",
            "k8s-docs-resourceclaimtemplate.yaml",
            "k8s-docs-dra-example-job.yaml",
        ],
        pods: &[
            (
                "default/example-dra-job-0",
                "ResourceClaim/default/example-resource-claim",
            ),
            (
                "default/example-dra-job-1",
                "ResourceClaim/default/example-resource-claim",
            ),
        ],
        probe: ("aws-gpu-untainted", "g6.xlarge"),
        detail: "a selector must set cel",
    },
    // The same Job without the shared ResourceClaim.
    Unsatisfiable {
        files: &[
            AWS_GPU,
            UNTAINTED,
            "k8s-docs-deviceclass.yaml",
            "k8s-docs-resourceclaimtemplate.yaml",
            "k8s-docs-dra-example-job.yaml",
        ],
        pods: &[(
            "default/example-dra-job-0",
            "ResourceClaim/default/example-resource-claim",
        )],
        probe: ("aws-gpu-untainted", "g6.xlarge"),
        detail: "is not given",
    },
    // The "Install a DRA driver" tutorial: the DRA example driver again.
    Unsatisfiable {
        files: &[AWS_GPU, UNTAINTED, "k8s-docs-driver-install-tutorial.yaml"],
        pods: &[("dra-tutorial/pod0", "ResourceClaim/dra-tutorial/some-gpu")],
        probe: ("aws-gpu-untainted", "g6.xlarge"),
        detail: "`device.driver == 'gpu.example.com'` matches 0 of 1 device(s)",
    },
    // The documentation's prioritized list: fictional class resource.example.com.
    Unsatisfiable {
        files: &[AWS_GPU, UNTAINTED, "k8s-docs-prioritized-list.yaml"],
        pods: &[(
            "default/pod-with-prioritized-list",
            "ResourceClaimTemplate/default/prioritized-list-claim-template",
        )],
        probe: ("aws-gpu-untainted", "g6.xlarge"),
        detail: "firstAvailable[0].deviceClassName: DeviceClass \"resource.example.com\" not found",
    },
];

fn unsatisfiable_files(case: &Unsatisfiable) -> Vec<String> {
    case.files
        .iter()
        .map(|f| {
            if f.contains('/') {
                (*f).to_owned()
            } else {
                fixture(f)
            }
        })
        .collect()
}

#[test]
fn what_no_type_satisfies_is_unschedulable_and_explain_names_the_claim() {
    for case in UNSATISFIABLE {
        let files = unsatisfiable_files(case);
        let plan = run(&["plan"], &files);
        assert_eq!(
            plan["new_nodes"].as_array().map(Vec::len),
            Some(0),
            "{files:?}: {plan:#}"
        );
        let unschedulable: Vec<&str> = plan["unschedulable"]
            .as_array()
            .expect("unschedulable")
            .iter()
            .filter_map(|u| u["pod"].as_str())
            .collect();
        for (pod, claim) in case.pods {
            assert!(
                unschedulable.contains(pod),
                "{files:?}: {pod} not unschedulable: {plan:#}"
            );
            let e = run(&["explain", "pod", pod], &files);
            assert_eq!(e["outcome"]["kind"], "unschedulable", "{pod}: {e:#}");
            let (pool, it) = case.probe;
            let reasons = claim_reasons(&e, pool, it);
            assert!(
                !reasons.is_empty()
                    && reasons.iter().all(|r| {
                        r.starts_with(&format!("resource claims: {claim}"))
                            && r.contains(case.detail)
                    }),
                "{pod} on {pool}/{it}: expected `resource claims: {claim}…{}…`, got {reasons:?}",
                case.detail
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Product bugs found with these examples (ignored so CI stays green; the report has the
// commands).

#[test]
fn the_plan_names_the_claim_that_makes_a_pod_unschedulable() {
    for case in UNSATISFIABLE {
        let files = unsatisfiable_files(case);
        let plan = run(&["plan"], &files);
        for (pod, claim) in case.pods {
            let reason = plan["unschedulable"]
                .as_array()
                .expect("unschedulable")
                .iter()
                .find(|u| u["pod"] == *pod)
                .and_then(|u| u["reason"].as_str())
                .unwrap_or_else(|| panic!("{pod} not unschedulable: {plan:#}"));
            assert!(reason.contains(claim), "{pod}: {reason}");
        }
    }
}

#[test]
fn nvidia_mig_example_plans_on_a_pool_with_a_mig_layout() {
    // gpu-test4: per pod, 2x 1g.5gb + 2g.10gb + 3g.20gb on one parent GPU (matchAttribute
    // parentUUID) = exactly one A100 40GB in mig-parted's all-balanced layout; four replicas
    // fit the eight GPUs of one p4d.24xlarge.
    let files = [
        AWS_GPU.to_owned(),
        MIG_POOL.to_owned(),
        fixture("nvidia-gpu-test4.yaml"),
    ];
    let plan = run(&["plan"], &files);
    assert_eq!(
        plan["unschedulable"].as_array().map(Vec::len),
        Some(0),
        "{plan:#}"
    );
    let nodes = plan["new_nodes"].as_array().expect("new_nodes");
    assert_eq!(nodes.len(), 1, "{plan:#}");
    assert_eq!(nodes[0]["instance_type"], "p4d.24xlarge", "{plan:#}");
    assert_eq!(nodes[0]["nodepool"], "aws-a100-mig", "{plan:#}");
    assert_eq!(
        nodes[0]["pods"].as_array().map(Vec::len),
        Some(4),
        "{plan:#}"
    );
}

#[test]
fn a_product_name_selector_gets_that_gpu() {
    // NVIDIA's e2e `[cel/productName]`: productName.lowerAscii().matches("^.*nvidia l40s.*$").
    let files = [AWS_GPU.to_owned(), fixture("nvidia-e2e-product-type.yaml")];
    let plan = run(&["plan"], &files);
    assert_eq!(
        plan["unschedulable"].as_array().map(Vec::len),
        Some(0),
        "{plan:#}"
    );
    let it = plan["new_nodes"][0]["instance_type"]
        .as_str()
        .expect("a new node");
    let (product, _) = gpus(it).into_iter().next().expect("a GPU");
    assert_eq!(product, "NVIDIA L40S", "{it}: {plan:#}");
}
