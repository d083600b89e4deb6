//! Launched nodes carry the alias labels (Karpenter, the cloud, the GPU Operator) unless their
//! NodePool opts out.

use std::collections::BTreeMap;

use quartermaster_policies::labels::ANNOTATION_ALIAS_LABELS;

use super::fixtures::*;
use crate::{Action, Engine, EngineConfig};

fn launched_labels(mut e: Engine) -> BTreeMap<String, String> {
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    actions
        .iter()
        .find_map(|a| match a {
            Action::Launch { request, .. } => Some(request.labels.clone()),
            _ => None,
        })
        .expect("a launch")
}

#[test]
fn launched_nodes_carry_karpenter_and_gpu_operator_labels() {
    let l = launched_labels(engine());
    assert_eq!(l["quartermaster.dev/capacity-type"], "spot");
    assert_eq!(l["karpenter.sh/capacity-type"], "spot");
    assert_eq!(l["karpenter.sh/nodepool"], "gpu");
    assert_eq!(l["karpenter.k8s.aws/instance-gpu-name"], "a10g");
    assert_eq!(l["karpenter.k8s.aws/instance-family"], "g5");
    assert_eq!(l["karpenter.k8s.aws/instance-size"], "xlarge");
    assert_eq!(l["nvidia.com/gpu.product"], "NVIDIA-A10G");
    assert_eq!(l["nvidia.com/gpu.present"], "true");
    assert!(!l.contains_key("cloud.google.com/gke-accelerator"));
}

#[test]
fn the_nodepool_annotation_keeps_alias_labels_off() {
    let mut setup = setup("5m");
    setup.pools[0]
        .node_pool
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(ANNOTATION_ALIAS_LABELS.to_owned(), "false".to_owned());
    let l = launched_labels(Engine::new(setup, EngineConfig::default()));
    assert_eq!(l["quartermaster.dev/capacity-type"], "spot");
    assert!(l.keys().all(|k| !k.starts_with("karpenter.")), "{l:?}");
    assert!(!l.contains_key("nvidia.com/gpu.product"));
}
