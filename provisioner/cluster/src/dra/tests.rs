//! DRA at ingestion: claims become accelerator requests and an instance-type term, with the
//! reasons kept for explanations.

use quartermaster_pricing::Catalog;
use quartermaster_solver::INSTANCE_TYPE_LABEL;
use quartermaster_solver::resources::ResourceTable;

use crate::testing::objects;
use crate::{Ingested, SnapshotOptions, snapshot};

const TEMPLATE_40GI: &str = "---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu-40gi, namespace: ns}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: \"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0\"}
";

fn pod_with(claims: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: ns}}\nspec:\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: '1'}}, claims: [{{name: gpu}}]}}\n  resourceClaims:\n{claims}\n"
    )
}

/// An AWS NodePool for every GPU type.
const AWS_POOL: &str = "---
apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: default}
";

fn ingest_with_catalog(yaml: &str) -> Ingested {
    let catalog = Catalog::embedded();
    snapshot(
        &objects(&format!("{AWS_POOL}{yaml}")),
        SnapshotOptions::priced(&catalog),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn gpus(ingested: &Ingested, pod: usize) -> i64 {
    let slot = ResourceTable::default()
        .slot("nvidia.com/gpu")
        .expect("fixed slot");
    ingested.snapshot.pending[pod].requests.get(slot)
}

fn allowed_types(ingested: &Ingested, pod: usize) -> Vec<String> {
    let terms = &ingested.snapshot.pending[pod].node_terms;
    assert_eq!(terms.len(), 1);
    let r = terms[0]
        .get(INSTANCE_TYPE_LABEL)
        .expect("an instance-type term");
    let mut out: Vec<String> = ingested.snapshot.pending[pod]
        .devices
        .as_ref()
        .expect("device fit")
        .fits
        .keys()
        .filter(|t| r.has(t))
        .cloned()
        .collect();
    out.sort();
    out
}

#[test]
fn a_template_claim_takes_one_gpu_on_types_with_40gi_or_more() {
    let ingested = ingest_with_catalog(&format!(
        "{TEMPLATE_40GI}{}",
        pod_with("  - {name: gpu, resourceClaimTemplateName: one-gpu-40gi}")
    ));
    assert_eq!(gpus(&ingested, 0), 1);
    let fit = ingested.snapshot.pending[0].devices.clone().expect("fit");
    assert_eq!(fit.claims, ["ResourceClaimTemplate/ns/one-gpu-40gi"]);
    let allowed = allowed_types(&ingested, 0);
    assert!(allowed.iter().any(|t| t == "p4d.24xlarge"), "{allowed:?}");
    assert!(allowed.iter().any(|t| t == "p5.48xlarge"), "{allowed:?}");
    // L4 (24 GB) and T4 (16 GB) are ruled out by the claim's own selector, and it says so.
    for small in ["g6.xlarge", "g4dn.xlarge"] {
        let why = fit.rejection(small).expect("ruled out");
        assert!(
            why.contains("compareTo(quantity('40Gi'))"),
            "{small}: {why}"
        );
        assert!(why.contains("matches 0 of 1 device(s)"), "{small}: {why}");
    }
    // A CPU type publishes no devices.
    assert_eq!(
        fit.rejection("m7i.large").as_deref(),
        Some("a node of this type publishes no devices")
    );
}

#[test]
fn all_devices_are_planned_as_on_the_cheapest_type_that_satisfies_the_claim() {
    let template = "---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: all-h100, namespace: ns}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.nvidia.com
          allocationMode: All
          selectors:
          - cel: {expression: \"device.attributes['gpu.nvidia.com'].productName.contains('H100')\"}
";
    let ingested = ingest_with_catalog(&format!(
        "{template}{}",
        pod_with("  - {name: gpu, resourceClaimTemplateName: all-h100}")
    ));
    let fit = ingested.snapshot.pending[0].devices.clone().expect("fit");
    let n = gpus(&ingested, 0);
    assert!(n >= 1);
    // Every type allowed takes the same number of devices, and types that would take more
    // say why they are not planned for.
    assert!(fit.fits.values().all(|c| i64::from(*c) == n), "{fit:?}");
    assert!(
        fit.choice.is_some(),
        "All over types of different sizes is a choice"
    );
    assert!(
        fit.ruled_out
            .values()
            .any(|w| w.contains("the cheapest type that satisfies its claims")),
        "{fit:?}"
    );
}

#[test]
fn first_available_falls_back_in_order() {
    let template = "---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: h100-or-two-l4, namespace: ns}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - name: h100
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: \"device.attributes['gpu.nvidia.com'].productName.contains('H100')\"}
        - name: two-l4
          deviceClassName: gpu.nvidia.com
          count: 2
          selectors:
          - cel: {expression: \"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4'\"}
";
    let ingested = ingest_with_catalog(&format!(
        "{template}{}",
        pod_with("  - {name: gpu, resourceClaimTemplateName: h100-or-two-l4}")
    ));
    let fit = ingested.snapshot.pending[0].devices.clone().expect("fit");
    // The cheapest type that satisfies either is a 4-L4 g6 (the H100 types cost far more),
    // so the pod is planned for two devices on types with two or more L4s.
    assert_eq!(gpus(&ingested, 0), 2, "{fit:?}");
    assert!(
        fit.choice
            .as_deref()
            .is_some_and(|c| c.contains("gpu/two-l4")),
        "{fit:?}"
    );
    assert!(fit.fits.keys().all(|t| t.starts_with("g6.")), "{fit:?}");
    assert!(fit.fits.contains_key("g6.12xlarge"), "{fit:?}");
    assert!(
        ingested.notes.iter().any(|n| n.contains("h100-or-two-l4")
            && n.contains("planned with request gpu/two-l4 on g6.12xlarge")),
        "the choice is reported: {:?}",
        ingested.notes
    );
}

#[test]
fn a_missing_template_rules_every_type_out_and_says_which() {
    let ingested = ingest_with_catalog(&pod_with(
        "  - {name: gpu, resourceClaimTemplateName: nowhere}",
    ));
    let fit = ingested.snapshot.pending[0].devices.clone().expect("fit");
    assert!(fit.fits.is_empty());
    assert_eq!(
        fit.rejection("p5.48xlarge").as_deref(),
        Some("ResourceClaimTemplate/ns/nowhere is not given")
    );
    // Nothing satisfies the instance-type term: the pod stays unschedulable.
    let term = &ingested.snapshot.pending[0].node_terms[0];
    assert!(
        !term
            .get(INSTANCE_TYPE_LABEL)
            .expect("term")
            .has("p5.48xlarge")
    );
}

#[test]
fn a_shared_claim_takes_its_devices_once_and_keeps_its_pods_together() {
    let claim = "---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu, namespace: ns}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
";
    let pod = |name: &str| {
        pod_with("  - {name: gpu, resourceClaimName: shared-gpu}")
            .replace("{name: p,", &format!("{{name: {name},"))
    };
    let ingested = ingest_with_catalog(&format!("{claim}{}{}", pod("a"), pod("b")));
    assert_eq!(gpus(&ingested, 0) + gpus(&ingested, 1), 1);
    for p in &ingested.snapshot.pending {
        assert_eq!(p.affinity.len(), 1, "one node for the claim's pods");
        assert!(
            p.labels
                .keys()
                .any(|k| k.starts_with(super::apply::SHARED_CLAIM_LABEL_PREFIX))
        );
    }
}

#[test]
fn an_allocated_claim_pins_its_pod_and_takes_nothing_more() {
    let claim = "---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: done, namespace: ns}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.nvidia.com, pool: node-a, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-a]}]
";
    let ingested = ingest_with_catalog(&format!(
        "{claim}{}",
        pod_with("  - {name: gpu, resourceClaimName: done}")
    ));
    assert_eq!(gpus(&ingested, 0), 0);
    let term = &ingested.snapshot.pending[0].node_terms[0];
    assert!(
        term.get("kubernetes.io/hostname")
            .expect("pinned")
            .has("node-a")
    );
    assert!(term.get(INSTANCE_TYPE_LABEL).is_none());
}

#[test]
fn without_a_catalog_claims_are_noted_not_guessed() {
    let ingested = crate::testing::ingest(&format!(
        "{TEMPLATE_40GI}{}",
        pod_with("  - {name: gpu, resourceClaimTemplateName: one-gpu-40gi}")
    ));
    assert!(ingested.snapshot.pending[0].devices.is_none());
    assert!(
        ingested.notes.iter().any(|n| n.contains("resourceClaims")),
        "{:?}",
        ingested.notes
    );
}

#[test]
fn dra_objects_are_read_not_skipped() {
    let ingested = ingest_with_catalog(TEMPLATE_40GI);
    assert!(
        !ingested
            .notes
            .iter()
            .any(|n| n.contains("ResourceClaimTemplate")),
        "{:?}",
        ingested.notes
    );
}

#[test]
fn an_existing_node_counts_the_gpus_its_slices_publish_and_its_pods_claims_take_them() {
    let node = "---
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels:
    quartermaster.dev/nodepool: gpu
    node.kubernetes.io/instance-type: g6e.12xlarge
    kubernetes.io/hostname: n1
status:
  allocatable: {cpu: '47', memory: 370Gi, pods: '110'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu-nvidia-com}
spec:
  driver: gpu.nvidia.com
  nodeName: n1
  pool: {name: n1, generation: 2, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {type: {string: gpu}}}
  - {name: gpu-1, attributes: {type: {string: gpu}}}
  - {name: gpu-2, attributes: {type: {string: gpu}}}
  - {name: gpu-3, attributes: {type: {string: gpu}}}
  - {name: gpu-0-mig-1g5gb-19-0, attributes: {type: {string: mig}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu-nvidia-com-old}
spec:
  driver: gpu.nvidia.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {type: {string: gpu}}}
";
    let bound = pod_with("  - {name: gpu, resourceClaimTemplateName: one-gpu-40gi}")
        .replace("{name: p,", "{name: running,")
        .replace("spec:\n", "spec:\n  nodeName: n1\n");
    let ingested = ingest_with_catalog(&format!("{TEMPLATE_40GI}{node}{bound}"));
    let slot = ResourceTable::default()
        .slot("nvidia.com/gpu")
        .expect("slot");
    let n1 = &ingested.snapshot.nodes[0];
    // Four whole GPUs of the newest generation; the MIG device and the old slice do not count.
    assert_eq!(n1.allocatable.get(slot), 4);
    assert_eq!(n1.pods.len(), 1);
    // The running pod's claim takes one of them, and it may move only where its claim fits.
    assert_eq!(n1.pods[0].requests.get(slot), 1);
    let term = &n1.pods[0].node_terms[0];
    assert!(
        term.get(INSTANCE_TYPE_LABEL)
            .expect("term")
            .has("g6e.12xlarge")
    );
    assert!(
        !term
            .get(INSTANCE_TYPE_LABEL)
            .expect("term")
            .has("g6.12xlarge")
    );
}

#[test]
fn a_node_overlay_overrides_the_device_model_for_a_driver_we_do_not_model() {
    let yaml = "---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: fpga
  annotations:
    quartermaster.dev/devices: '[{\"driver\": \"fpga.example.com\", \"count\": 2, \"namePrefix\": \"fpga\", \"attributes\": {\"model\": {\"string\": \"u250\"}}, \"capacity\": {\"memory\": \"64Gi\"}}]'
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m7g.large]}]
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: no-dra-on-g5
  annotations:
    quartermaster.dev/devices: '[{\"driver\": \"gpu.nvidia.com\", \"count\": 0}]'
spec:
  requirements: [{key: quartermaster.dev/instance-family, operator: In, values: [g5]}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: fpga.example.com}
spec:
  selectors: [{cel: {expression: \"device.driver == 'fpga.example.com'\"}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-u250, namespace: ns}
spec:
  spec:
    devices:
      requests:
      - name: fpga
        exactly:
          deviceClassName: fpga.example.com
          selectors: [{cel: {expression: \"device.attributes['fpga.example.com'].model == 'u250'\"}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: any-gpu, namespace: ns}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
";
    let fpga_pod = pod_with("  - {name: gpu, resourceClaimTemplateName: one-u250}");
    let gpu_pod = pod_with("  - {name: gpu, resourceClaimTemplateName: any-gpu}")
        .replace("{name: p,", "{name: g,");
    let ingested = ingest_with_catalog(&format!("{yaml}{fpga_pod}{gpu_pod}"));
    let fpga = ingested.snapshot.pending[0].devices.clone().expect("fit");
    assert_eq!(
        fpga.fits.keys().collect::<Vec<_>>(),
        ["m7g.large"],
        "only the overlay's type publishes the FPGAs: {:?}",
        fpga.rejection("m7g.large")
    );
    // Counted in a resource named after the driver, which the overlay gives its types.
    let slot = ingested
        .snapshot
        .resources
        .slot("fpga.example.com")
        .expect("a slot for the driver's devices");
    assert_eq!(ingested.snapshot.pending[0].requests.get(slot), 1);
    let overlay = &ingested.snapshot.node_pools[0].node_shape.overlays[0];
    assert_eq!(overlay.capacity["fpga.example.com"], 2);
    // count 0 takes a modelled driver's devices away from the overlay's types.
    let gpu = ingested.snapshot.pending[1].devices.clone().expect("fit");
    assert!(
        gpu.fits.keys().any(|t| t.starts_with("g6.")),
        "{:?}",
        gpu.fits
    );
    assert!(
        !gpu.fits.keys().any(|t| t.starts_with("g5.")),
        "{:?}",
        gpu.fits
    );
    assert_eq!(
        gpu.rejection("g5.xlarge").as_deref(),
        Some("a node of this type publishes no devices")
    );
}

#[test]
fn a_malformed_device_override_is_an_error_naming_the_overlay() {
    let yaml = "---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: broken
  annotations:
    quartermaster.dev/devices: '[{\"driver\": \"x.example.com\", \"count\": \"two\"}]'
spec: {}
";
    let catalog = Catalog::embedded();
    let err = snapshot(&objects(yaml), SnapshotOptions::priced(&catalog)).expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("NodeOverlay/broken")
            && text.contains("metadata.annotations[quartermaster.dev/devices]"),
        "{text}"
    );
}
