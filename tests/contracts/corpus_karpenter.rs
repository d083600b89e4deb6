//! Real Karpenter v1 manifests (the upstream examples, the docs' YAML blocks and the AWS
//! blueprints, see `SOURCES.txt` in the corpus): `validate` reads them as they are, `import
//! karpenter` turns them into manifests `validate` accepts, and the GPU blueprint plans a GPU
//! node after import. Files that are really invalid fail with a pinned message.
//!
//! The corpus lives beside the checkout (`../shared/real-world`; in CI `../shared` next to the
//! clone).

use std::path::{Path, PathBuf};

use quartermaster_tests::{Output, quartermaster, workspace_root};

/// The corpus directory; a clear failure when it is missing.
fn corpus() -> PathBuf {
    let dir = workspace_root().join("../shared/real-world");
    assert!(
        dir.is_dir(),
        "the real-world corpus is missing: expected {} (a `shared/real-world` directory beside the checkout)",
        dir.display()
    );
    dir
}

/// Every Karpenter file with a NodePool or EC2NodeClass, as `dir/file` relative to the corpus.
fn karpenter_files() -> Vec<String> {
    let root = corpus();
    let mut files = Vec::new();
    for dir in [
        "karpenter-aws/v1",
        "karpenter-aws/docs",
        "karpenter-blueprints",
    ] {
        let entries = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{}: {e}", root.join(dir).display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let is_karpenter =
                text.contains("kind: NodePool") || text.contains("kind: EC2NodeClass");
            if path.extension().is_some_and(|e| e == "yaml") && is_karpenter {
                let name = path.file_name().expect("file name").to_string_lossy();
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    files
}

/// Files that are really invalid (documentation fragments, placeholders), with the problem
/// `validate` must report. Every other file must pass.
const INVALID: &[(&str, &str)] = &[
    (
        "karpenter-aws/docs/nodeclasses.md-block0.yaml",
        "AWSNodeClass/default: spec.instanceProfile: mutually exclusive with role",
    ),
    (
        "karpenter-aws/docs/nodeclasses.md-block0.yaml",
        "AWSNodeClass/default: spec.placementGroupSelector: name and id are mutually exclusive",
    ),
    (
        "karpenter-aws/docs/nodepools.md-block0.yaml",
        "NodePool/default: spec.disruption.consolidationPolicy: unknown variant `WhenEmptyOrUnderutilized | Balanced | WhenEmpty`",
    ),
    (
        "karpenter-aws/docs/nodepools.md-block4.yaml",
        "NodePool/default: spec.template.spec.nodeClassRef: required field is missing",
    ),
    (
        "karpenter-aws/docs/nodepools.md-block5.yaml",
        "NodePool/gpu: spec.template.spec.nodeClassRef: required field is missing",
    ),
    (
        "karpenter-aws/docs/nodepools.md-block6.yaml",
        "NodePool/static-capacity: spec.template.spec.nodeClassRef: required field is missing",
    ),
    (
        "karpenter-aws/docs/nodepools.md-block7.yaml",
        "NodePool/cilium-startup: spec.template.spec.nodeClassRef: required field is missing",
    ),
    (
        "karpenter-aws/docs/scheduling.md-block7.yaml",
        "NodePool/gpu: spec.template.spec.nodeClassRef: required field is missing",
    ),
    (
        "karpenter-aws/docs/scheduling.md-block12.yaml",
        "NodePool/reserved-instance: spec.template.spec.nodeClassRef: required field is missing",
    ),
    (
        "karpenter-aws/docs/scheduling.md-block13.yaml",
        "NodePool/arm64-specific: spec.template.spec.nodeClassRef: required field is missing",
    ),
    (
        "karpenter-aws/docs/scheduling.md-block25.yaml",
        "NodePool/spot: spec.template.spec.nodeClassRef: required field is missing",
    ),
    (
        "karpenter-blueprints/reserved-capacity__odcr.yaml",
        "NodePool/odcr-priority: spec.template.spec.requirements[3].values[0]: label value must consist of alphanumeric characters",
    ),
];

/// A known fault outside this corpus test, tolerated with its exact message until fixed: the
/// `nvidia.com/gpu.present` alias (a flag for `instance-gpu-manufacturer: nvidia`) is not
/// translated when template labels are checked against requirements, so a pool that both labels
/// its nodes `nvidia.com/gpu.present: "true"` and requires NVIDIA GPUs is reported. Karpenter
/// accepts this file.
const KNOWN_FAULTS: &[(&str, &str)] = &[];

fn show(o: &Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        o.code, o.stdout, o.stderr
    )
}

/// Checks one `validate` run of `file` against the pinned problems (none: it must pass).
fn check_validate(file: &str, o: &Output, what: &str) {
    let pinned: Vec<&str> = INVALID
        .iter()
        .chain(KNOWN_FAULTS)
        .filter(|(f, _)| *f == file)
        .map(|(_, m)| *m)
        .collect();
    if pinned.is_empty() {
        assert_eq!(o.code, 0, "{what} {file} must pass:\n{}", show(o));
        return;
    }
    if o.code == 0 && KNOWN_FAULTS.iter().any(|(f, _)| *f == file) {
        return; // The fault was fixed.
    }
    assert_eq!(o.code, 1, "{what} {file} must fail:\n{}", show(o));
    for message in pinned {
        assert!(
            o.stdout.contains(message),
            "{what} {file}: expected {message:?} in:\n{}",
            show(o)
        );
    }
}

#[test]
fn every_karpenter_file_validates_as_is() {
    let root = corpus();
    let files = karpenter_files();
    assert!(files.len() >= 41, "corpus too small: {files:?}");
    for file in &files {
        let path = root.join(file).display().to_string();
        let o = quartermaster(&["validate", &path]);
        check_validate(file, &o, "validate");
        assert!(
            o.stderr.contains("read as quartermaster.dev/v1"),
            "{file}: the conversion is noted:\n{}",
            show(&o)
        );
    }
}

/// Imports `files` (relative to the corpus) into a scratch file, returning its path.
fn import(files: &[&str], extra: &[&str], out: &Path) -> Output {
    let root = corpus();
    let paths: Vec<String> = files
        .iter()
        .map(|f| root.join(f).display().to_string())
        .collect();
    let mut args = vec!["import", "karpenter"];
    for p in &paths {
        args.extend(["-f", p.as_str()]);
    }
    args.extend(extra);
    let out = out.display().to_string();
    args.extend(["-o", out.as_str()]);
    quartermaster(&args)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qm-corpus-karpenter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}

#[test]
fn every_import_validates() {
    for file in karpenter_files() {
        let out = scratch(&file.replace('/', "__"));
        let o = import(&[&file], &[], &out);
        assert_eq!(o.code, 0, "import {file}:\n{}", show(&o));
        let text = std::fs::read_to_string(&out).expect("import wrote its output");
        assert!(
            text.contains("# quartermaster import: karpenter."),
            "{file}: every object says where it came from:\n{text}"
        );
        assert!(!text.contains("apiVersion: karpenter"), "{text}");
        let v = quartermaster(&["validate", &out.display().to_string()]);
        check_validate(&file, &v, "validate of the import of");
        assert!(
            !v.stderr.contains("read as"),
            "{file}: the import needs no conversion:\n{}",
            show(&v)
        );
        let _ = std::fs::remove_file(&out);
    }
}

#[test]
fn fields_without_an_equivalent_are_named_and_changed_fields_commented() {
    let out = scratch("nodeclass-reference.yaml");
    let o = import(
        &["karpenter-aws/docs/nodeclasses.md-block0.yaml"],
        &[],
        &out,
    );
    assert_eq!(o.code, 0, "{}", show(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    for line in [
        "# quartermaster import: kind: EC2NodeClass -> AWSNodeClass",
        "# quartermaster import: spec.kubelet: carried as is",
        "# quartermaster import: spec.capacityReservationSelectorTerms: carried as is",
        "# quartermaster import: spec.region: unset, so the cluster's region is used",
        "# quartermaster import: status: dropped",
    ] {
        assert!(text.contains(line), "{line:?} missing in:\n{text}");
    }
    let _ = std::fs::remove_file(&out);

    let static_pool = scratch("static.yaml");
    let o = import(
        &["karpenter-blueprints/static-nodepool__static-nodepool.yaml"],
        &[],
        &static_pool,
    );
    assert_eq!(o.code, 0, "{}", show(&o));
    let text = std::fs::read_to_string(&static_pool).unwrap();
    assert!(
        text.contains("# quartermaster import: spec.replicas: kept; a static NodePool: Quartermaster keeps this many nodes"),
        "{text}"
    );
    assert!(text.contains("replicas: 1"), "{text}");
    let _ = std::fs::remove_file(&static_pool);

    // An object that is not a Karpenter NodePool or EC2NodeClass is named, not silently dropped.
    let mixed = scratch("mixed.yaml");
    let o = import(
        &[
            "karpenter-blueprints/nvidia-gpu-workload__gpu-nodeclass.yaml",
            "karpenter-blueprints/nvidia-gpu-workload__workload.yaml",
        ],
        &[],
        &mixed,
    );
    assert_eq!(o.code, 0, "{}", show(&o));
    assert!(
        o.stderr.contains("warning: ")
            && o.stderr.contains(
                "v1 Pod/nvidia-smi is not a Karpenter v1 NodePool or EC2NodeClass; left out"
            ),
        "{}",
        show(&o)
    );
    let _ = std::fs::remove_file(&mixed);
}

const GPU_BLUEPRINT: [&str; 2] = [
    "karpenter-blueprints/nvidia-gpu-workload__gpu-nodepool.yaml",
    "karpenter-blueprints/nvidia-gpu-workload__gpu-nodeclass.yaml",
];
const GPU_WORKLOAD: &str = "karpenter-blueprints/nvidia-gpu-workload__workload.yaml";

fn new_nodes(plan: &Output) -> Vec<serde_json::Value> {
    assert_eq!(plan.code, 0, "{}", show(plan));
    plan.json()["new_nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn the_gpu_blueprint_plans_a_gpu_node_after_import() {
    let imported = scratch("gpu-blueprint.yaml");
    let o = import(&GPU_BLUEPRINT, &[], &imported);
    assert_eq!(o.code, 0, "{}", show(&o));
    let workload = corpus().join(GPU_WORKLOAD).display().to_string();
    let plan = quartermaster(&[
        "plan",
        "-f",
        &imported.display().to_string(),
        "-f",
        &workload,
        "-o",
        "json",
    ]);
    let nodes = new_nodes(&plan);
    assert_eq!(nodes.len(), 1, "{}", show(&plan));
    assert_eq!(nodes[0]["nodepool"], "gpu");
    assert_eq!(nodes[0]["capacity_type"], "on-demand");
    let catalog = quartermaster(&["catalog", "--cloud", "aws", "-o", "json"]).json();
    let instance = nodes[0]["instance_type"].as_str().unwrap();
    let entry = catalog
        .as_array()
        .and_then(|a| a.iter().find(|t| t["name"] == instance))
        .unwrap_or_else(|| panic!("{instance} in the catalog"));
    assert!(
        entry.to_string().contains("\"t4\""),
        "the pod asks for a T4: {entry}"
    );

    // The same, read as is (converted on the fly).
    let root = corpus();
    let as_is: Vec<String> = GPU_BLUEPRINT
        .iter()
        .chain([&GPU_WORKLOAD])
        .map(|f| root.join(f).display().to_string())
        .collect();
    let plan = quartermaster(&[
        "plan", "-f", &as_is[0], "-f", &as_is[1], "-f", &as_is[2], "-o", "json",
    ]);
    assert_eq!(new_nodes(&plan).len(), 1, "{}", show(&plan));
    let _ = std::fs::remove_file(&imported);
}

#[test]
fn an_unknown_region_is_a_precise_error() {
    let imported = scratch("mars.yaml");
    let o = import(&GPU_BLUEPRINT, &["--region", "mars-north-7"], &imported);
    assert_eq!(o.code, 0, "{}", show(&o));
    let v = quartermaster(&["validate", &imported.display().to_string()]);
    assert_eq!(v.code, 1, "{}", show(&v));
    assert!(
        v.stdout.contains(
            "AWSNodeClass/gpu: spec.region: \"mars-north-7\" is not an AWS region name such as \"us-east-1\""
        ),
        "{}",
        show(&v)
    );
    // A well-formed region the catalog does not sell in: plan says which regions it has.
    let imported_west = scratch("eu.yaml");
    let o = import(&GPU_BLUEPRINT, &["--region", "af-south-1"], &imported_west);
    assert_eq!(o.code, 0, "{}", show(&o));
    let workload = corpus().join(GPU_WORKLOAD).display().to_string();
    let plan = quartermaster(&[
        "plan",
        "-f",
        &imported_west.display().to_string(),
        "-f",
        &workload,
    ]);
    assert_ne!(plan.code, 0, "{}", show(&plan));
    assert!(
        plan.stderr.contains(
            "NodePool/gpu: spec.template.spec.nodeClassRef: AWSNodeClass gpu spec.region \"af-south-1\" has no aws offerings in the catalog; its aws regions: ap-east-1, ap-northeast-1, ap-northeast-2, ap-northeast-3, ap-south-1, ap-southeast-1, ap-southeast-2, ap-southeast-3, ap-southeast-4, ca-central-1, eu-central-1, eu-north-1, eu-south-1, eu-south-2, eu-west-1, eu-west-2, eu-west-3, me-central-1, us-east-1, us-east-2, us-west-1, us-west-2"
        ),
        "{}",
        show(&plan)
    );
    let _ = std::fs::remove_file(&imported);
    let _ = std::fs::remove_file(&imported_west);
}

/// A catalog extension selling a T4 type the embedded catalog lacks (`g4dn.2xlarge`) only in
/// us-west-2, dearer than the us-east-1 `g4dn.xlarge`, so that only the region makes plan
/// choose it.
const WEST_CATALOG: &str = r#"schema = 1
cloud = "aws"
region = "us-west-2"

[[instance_type]]
name = "g4dn.2xlarge"
family = "g4dn"
vcpu = 8
memory_mib = 32768
arch = "amd64"
accelerator = { manufacturer = "nvidia", name = "t4", count = 1, memory_mib = 16384, resource = "nvidia.com/gpu" }
local_nvme_gb = 125
network_gbps = 5.0
max_pods = 29
spec_source = "test"
zones = ["us-west-2a", "us-west-2b"]
zones_source = "test"
on_demand = { price = 9.0, source = "test", as_of = 2026-11-30 }
"#;

#[test]
fn the_node_class_region_restricts_the_offerings() {
    let catalog = scratch("west.toml");
    std::fs::write(&catalog, WEST_CATALOG).unwrap();
    let catalog = catalog.display().to_string();
    let workload = corpus().join(GPU_WORKLOAD).display().to_string();
    let plan_with = |region: &[&str], name: &str| {
        let imported = scratch(name);
        let o = import(&GPU_BLUEPRINT, region, &imported);
        assert_eq!(o.code, 0, "{}", show(&o));
        let plan = quartermaster(&[
            "plan",
            "-f",
            &imported.display().to_string(),
            "-f",
            &workload,
            "--catalog",
            &catalog,
            "-o",
            "json",
        ]);
        let _ = std::fs::remove_file(&imported);
        new_nodes(&plan)
    };
    let west = plan_with(&["--region", "us-west-2"], "west.yaml");
    assert_eq!(west.len(), 1, "{west:?}");
    for node in &west {
        assert!(
            node["zone"].as_str().unwrap().starts_with("us-west-2"),
            "{west:?}"
        );
        assert_eq!(node["instance_type"], "g4dn.2xlarge");
    }
    let east = plan_with(&["--region", "us-east-1"], "east.yaml");
    assert_eq!(east.len(), 1, "{east:?}");
    assert!(
        east[0]["zone"].as_str().unwrap().starts_with("us-east-1"),
        "{east:?}"
    );
    assert_eq!(east[0]["instance_type"], "g4dn.xlarge");
}

#[test]
fn an_unknown_ami_alias_is_a_precise_error() {
    let file = scratch("bogus-alias.yaml");
    let text = std::fs::read_to_string(corpus().join(GPU_BLUEPRINT[1]))
        .unwrap()
        .replace("alias: al2023@latest", "alias: bogus@latest");
    std::fs::write(&file, text).unwrap();
    let v = quartermaster(&["validate", &file.display().to_string()]);
    assert_eq!(v.code, 1, "{}", show(&v));
    assert!(
        v.stdout.contains(
            "AWSNodeClass/gpu: spec.amiSelectorTerms[0].alias: unknown AMI family \"bogus\" in alias \"bogus@latest\": expected one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025"
        ),
        "{}",
        show(&v)
    );
    let _ = std::fs::remove_file(&file);
}
