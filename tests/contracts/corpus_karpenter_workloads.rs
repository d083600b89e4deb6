//! Karpenter's example workloads (`karpenter-aws/workloads/` and the blueprints' workload
//! files, in `../shared/real-world/`), each planned against the corpus's own NodePools as it
//! is: every file is pinned to what it must plan to, or to the precise reason it cannot.

use std::collections::BTreeSet;
use std::path::PathBuf;

use quartermaster_tests::{quartermaster, workspace_root};
use serde_json::Value;

fn corpus() -> PathBuf {
    workspace_root().join("../shared/real-world")
}

/// What a file must plan to.
enum Expect {
    /// Every pod placed, on exactly this many new nodes (`None`: any number).
    Placed(Option<usize>),
    /// Scaled to zero: nothing planned, and a note says so.
    ScaledToZero,
    /// Nothing placed: every pod's reason contains this.
    Unschedulable(&'static str),
}

struct Case {
    file: &'static str,
    pools: &'static [&'static str],
    expect: Expect,
}

const GENERAL: &[&str] = &["karpenter-aws/v1/general-purpose.yaml"];

const CASES: &[Case] = &[
    Case {
        file: "karpenter-aws/workloads/arm64.yaml",
        pools: &["karpenter-aws/v1/multiple-arch.yaml"],
        // Its arm64 pool asks for categories c and a: the catalog's c7g.
        expect: Expect::Placed(Some(1)),
    },
    Case {
        file: "karpenter-aws/workloads/disruption-budget.yaml",
        pools: GENERAL,
        expect: Expect::Placed(None),
    },
    Case {
        file: "karpenter-aws/workloads/gpu-amd.yaml",
        pools: GENERAL,
        expect: Expect::ScaledToZero,
    },
    Case {
        file: "karpenter-aws/workloads/gpu-nvidia.yaml",
        pools: GENERAL,
        expect: Expect::ScaledToZero,
    },
    Case {
        file: "karpenter-aws/workloads/inflate.yaml",
        pools: GENERAL,
        expect: Expect::Placed(Some(1)),
    },
    Case {
        file: "karpenter-aws/workloads/neuron.yaml",
        pools: GENERAL,
        expect: Expect::ScaledToZero,
    },
    Case {
        file: "karpenter-aws/workloads/prefer-arm.yaml",
        pools: GENERAL,
        expect: Expect::ScaledToZero,
    },
    Case {
        file: "karpenter-aws/workloads/spot.yaml",
        pools: GENERAL,
        expect: Expect::ScaledToZero,
    },
    Case {
        file: "karpenter-aws/workloads/spread-hostname.yaml",
        pools: GENERAL,
        expect: Expect::Placed(Some(10)),
    },
    Case {
        file: "karpenter-aws/workloads/spread-hostname-zone.yaml",
        pools: GENERAL,
        expect: Expect::Placed(None),
    },
    Case {
        file: "karpenter-aws/workloads/spread-zone.yaml",
        pools: GENERAL,
        expect: Expect::ScaledToZero,
    },
    // The blueprints' own default NodePool (label intent=apps) lives in their Terraform, not in
    // a manifest: their pods are told which selector no given pool satisfies.
    Case {
        file: "karpenter-blueprints/batch-jobs__workloads-not-evicted.yaml",
        pools: GENERAL,
        expect: Expect::Unschedulable("intent In [apps]"),
    },
    Case {
        file: "karpenter-blueprints/graviton__workload-flexible.yaml",
        pools: GENERAL,
        expect: Expect::Unschedulable("intent In [apps]"),
    },
    Case {
        file: "karpenter-blueprints/ha-az-nodes__workload.yaml",
        pools: GENERAL,
        expect: Expect::Unschedulable("intent In [apps]"),
    },
    // Time-slicing declared with NodeOverlays: four one-GPU pods share one GPU node.
    Case {
        file: "karpenter-blueprints/node-overlay__workload-gpu-slices.yaml",
        pools: &[
            "karpenter-blueprints/node-overlay__gpu-nodepool.yaml",
            "karpenter-blueprints/node-overlay__gpu-nodeclass.yaml",
            "karpenter-blueprints/node-overlay__node-overlay-gpu-slices.yaml",
        ],
        expect: Expect::Placed(Some(1)),
    },
    Case {
        file: "karpenter-blueprints/nvidia-gpu-workload__workload.yaml",
        pools: &[
            "karpenter-blueprints/nvidia-gpu-workload__gpu-nodepool.yaml",
            "karpenter-blueprints/nvidia-gpu-workload__gpu-nodeclass.yaml",
        ],
        expect: Expect::Placed(Some(1)),
    },
    Case {
        // Its pools require a label no instance type carries (capacity-spread): the nodes get
        // it, as Karpenter's do.
        file: "karpenter-blueprints/od-spot-split__workload.yaml",
        pools: &["karpenter-blueprints/od-spot-split__od-spot.yaml"],
        expect: Expect::Placed(None),
    },
];

fn plan(case: &Case) -> Value {
    let root = corpus();
    let files: Vec<String> = case
        .pools
        .iter()
        .chain([&case.file])
        .map(|f| root.join(f).display().to_string())
        .collect();
    let mut args = vec!["plan"];
    for f in &files {
        args.extend(["-f", f.as_str()]);
    }
    args.extend(["-o", "json"]);
    let out = quartermaster(&args);
    assert_eq!(out.code, 0, "{}: {}", case.file, out.stderr);
    out.json()
}

#[test]
fn every_karpenter_workload_plans_as_pinned() {
    let mut failures = Vec::new();
    for case in CASES {
        let p = plan(case);
        let nodes = p["new_nodes"].as_array().unwrap();
        let unschedulable = p["unschedulable"].as_array().unwrap();
        let notes: Vec<&str> = p["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let ok = match &case.expect {
            Expect::Placed(n) => {
                unschedulable.is_empty() && !nodes.is_empty() && n.is_none_or(|n| nodes.len() == n)
            }
            Expect::ScaledToZero => {
                nodes.is_empty()
                    && notes
                        .iter()
                        .any(|n| n.contains(": spec.replicas is 0; no pods planned"))
            }
            Expect::Unschedulable(reason) => {
                nodes.is_empty()
                    && !unschedulable.is_empty()
                    && unschedulable
                        .iter()
                        .all(|u| u["reason"].as_str().unwrap().contains(reason))
            }
        };
        if !ok {
            failures.push(format!("{}: {p:#}", case.file));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_karpenter_workload_file_is_pinned() {
    let pinned: BTreeSet<&str> = CASES.iter().map(|c| c.file).collect();
    let root = corpus();
    for dir in ["karpenter-aws/workloads", "karpenter-blueprints"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("the real-world corpus") {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            // NodePools, NodeClasses and overlays are pinned by corpus_karpenter.
            if ["kind: NodePool", "kind: EC2NodeClass", "kind: NodeOverlay"]
                .iter()
                .any(|k| text.contains(k))
            {
                continue;
            }
            let name = format!("{dir}/{}", path.file_name().unwrap().to_string_lossy());
            assert!(
                pinned.contains(name.as_str()),
                "{name} is in the corpus but no test says what it must plan to"
            );
        }
    }
}

/// Every pinned Karpenter workload with its pools: the files to pass to `plan` and `explain`.
pub(crate) fn inputs() -> Vec<Vec<String>> {
    let root = corpus();
    CASES
        .iter()
        .map(|case| {
            case.pools
                .iter()
                .chain([&case.file])
                .map(|f| root.join(f).display().to_string())
                .collect()
        })
        .collect()
}
