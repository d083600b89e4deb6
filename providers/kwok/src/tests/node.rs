//! Building a kwok Node and reading it back.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use quartermaster_cloud::InstanceState;

use super::fixtures::{at, cpu_request, gpu_request, kwok_node, t0};
use crate::keys;
use crate::node::{Machine, holds_all, instance};

fn gpu_node() -> Node {
    serde_json::from_value(kwok_node(&gpu_request(), t0())).unwrap()
}

#[test]
fn a_node_describes_its_machine_and_its_instance() {
    let node = gpu_node();
    let machine = Machine::of(&node).expect("annotations");
    assert_eq!(machine.devices, ["nvidia.com/gpu"]);
    assert_eq!(machine.devices_ready_at, Some(at(5)));
    let (capacity, allocatable) = machine.reported(at(4));
    assert!(
        !capacity.contains_key("nvidia.com/gpu") && !allocatable.contains_key("nvidia.com/gpu")
    );
    let (capacity, allocatable) = machine.reported(at(5));
    assert_eq!(capacity["nvidia.com/gpu"], Quantity("1".into()));
    assert_eq!(allocatable["nvidia.com/gpu"], Quantity("1".into()));

    let i = instance(&node).expect("a kwok node");
    assert_eq!(i.provider_id, "kwok://gpu-abc12");
    assert_eq!(i.state, InstanceState::Running);
    assert_eq!(i.tags, gpu_request().tags);

    // A CPU type has nothing to wait for.
    let cpu: Node = serde_json::from_value(kwok_node(&cpu_request(), t0())).unwrap();
    let m = Machine::of(&cpu).unwrap();
    assert!(m.devices.is_empty() && m.devices_ready(t0()));
}

#[test]
fn a_node_without_its_annotations_has_no_known_machine() {
    let mut node = gpu_node();
    let a = node.metadata.annotations.as_mut().unwrap();
    a.remove(keys::ANNOTATION_DEVICES_READY_AT);
    assert_eq!(Machine::of(&node), None);
    node.metadata.annotations = None;
    assert_eq!(Machine::of(&node), None);
}

#[test]
fn quantities_compare_by_value() {
    let q = |pairs: &[(&str, &str)]| -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    };
    let have = q(&[("memory", "16Gi"), ("cpu", "3920m"), ("pods", "58")]);
    assert!(holds_all(
        Some(&have),
        &q(&[("memory", "17179869184"), ("cpu", "3.92")])
    ));
    assert!(!holds_all(Some(&have), &q(&[("nvidia.com/gpu", "1")])));
    assert!(!holds_all(None, &q(&[("pods", "58")])));
    assert!(holds_all(None, &BTreeMap::new()));
}

#[test]
fn provider_ids_name_the_node() {
    assert_eq!(keys::provider_id("n-1"), "kwok://n-1");
    assert_eq!(keys::node_name("kwok://n-1"), Some("n-1"));
    for bad in ["kwok://", "aws:///us-east-1a/i-1", "kwok://a/b", "n-1"] {
        assert_eq!(keys::node_name(bad), None, "{bad}");
    }
}
