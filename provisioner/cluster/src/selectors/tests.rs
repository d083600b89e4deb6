use std::collections::BTreeMap;

use quartermaster_solver::pod::{TaintEffect, WhenUnsatisfiable};

use crate::testing::{ingest, ingest_err, pod};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

const APP: &str = "containers: [{name: a}]\n";

#[test]
fn node_selector_is_anded_into_each_ored_term() {
    let ingested = ingest(&pod(
        "p",
        &format!(
            "{APP}nodeSelector: {{kubernetes.io/arch: amd64}}\naffinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}}]\n      - matchExpressions: [{{key: quartermaster.dev/instance-gpu-memory, operator: Gt, values: ['20000']}}]"
        ),
    ));
    let terms = &ingested.snapshot.pending[0].node_terms;
    assert_eq!(terms.len(), 2);
    let amd_in_a = labels(&[
        ("kubernetes.io/arch", "amd64"),
        ("topology.kubernetes.io/zone", "us-east-1a"),
    ]);
    let arm_in_a = labels(&[
        ("kubernetes.io/arch", "arm64"),
        ("topology.kubernetes.io/zone", "us-east-1a"),
    ]);
    assert!(terms[0].matches(&amd_in_a));
    assert!(
        !terms[0].matches(&arm_in_a),
        "nodeSelector applies to every term"
    );
    let big_gpu = labels(&[
        ("kubernetes.io/arch", "amd64"),
        ("quartermaster.dev/instance-gpu-memory", "81920"),
    ]);
    let small_gpu = labels(&[
        ("kubernetes.io/arch", "amd64"),
        ("quartermaster.dev/instance-gpu-memory", "16384"),
    ]);
    assert!(terms[1].matches(&big_gpu));
    assert!(!terms[1].matches(&small_gpu));
}

#[test]
fn alias_keys_in_selectors_affinity_and_spread_become_canonical() {
    let ingested = ingest(&pod(
        "p",
        &format!(
            "{APP}nodeSelector: {{karpenter.sh/capacity-type: spot, nvidia.com/gpu.product: NVIDIA-A10G}}\naffinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: karpenter.k8s.aws/instance-gpu-name, operator: In, values: [a10g]}}]\ntopologySpreadConstraints:\n- maxSkew: 1\n  topologyKey: karpenter.sh/capacity-type\n  whenUnsatisfiable: DoNotSchedule\n  labelSelector: {{matchLabels: {{app: p}}}}"
        ),
    ));
    let p = &ingested.snapshot.pending[0];
    let g5_spot = labels(&[
        ("quartermaster.dev/capacity-type", "spot"),
        ("quartermaster.dev/instance-gpu-name", "a10g"),
        ("quartermaster.dev/instance-gpu-product", "NVIDIA-A10G"),
    ]);
    let mut g5_on_demand = g5_spot.clone();
    g5_on_demand.insert("quartermaster.dev/capacity-type".into(), "on-demand".into());
    assert!(p.node_terms[0].matches(&g5_spot));
    assert!(!p.node_terms[0].matches(&g5_on_demand));
    assert_eq!(
        p.topology_spread[0].topology_key,
        "quartermaster.dev/capacity-type"
    );
}

#[test]
fn node_selector_alone_is_one_term_and_no_constraint_is_none() {
    let s =
        ingest(&(pod("a", &format!("{APP}nodeSelector: {{team: ml}}")) + &pod("b", APP))).snapshot;
    assert_eq!(s.pending[0].node_terms.len(), 1);
    assert!(s.pending[0].node_terms[0].matches(&labels(&[("team", "ml")])));
    assert!(s.pending[1].node_terms.is_empty());
}

#[test]
fn match_fields_are_ignored_with_a_note_and_empty_terms_match_nothing() {
    let ingested = ingest(&pod(
        "p",
        &format!(
            "{APP}affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchFields: [{{key: metadata.name, operator: In, values: [node-1]}}]"
        ),
    ));
    assert!(
        ingested
            .notes
            .iter()
            .any(|n| n.contains("matchFields ignored")),
        "{:?}",
        ingested.notes
    );
    assert_eq!(ingested.snapshot.pending[0].node_terms.len(), 1);
    assert!(
        ingested.snapshot.pending[0].node_terms[0]
            .matches(&labels(&[("kubernetes.io/hostname", "x")]))
    );

    let ingested = ingest(&pod(
        "p",
        &format!(
            "{APP}affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms: [{{}}]"
        ),
    ));
    let term = &ingested.snapshot.pending[0].node_terms[0];
    assert!(!term.matches(&labels(&[("kubernetes.io/hostname", "x")])));
    assert!(!term.matches(&labels(&[])));
}

#[test]
fn preferred_node_terms_keep_their_weight() {
    let s = ingest(&pod(
            "p",
            &format!(
                "{APP}affinity:\n  nodeAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - weight: 30\n      preference: {{matchExpressions: [{{key: quartermaster.dev/capacity-type, operator: In, values: [spot]}}]}}"
            ),
        ))
        .snapshot;
    let preferred = &s.pending[0].preferred_node_terms;
    assert_eq!(preferred.len(), 1);
    assert_eq!(preferred[0].weight, 30);
    assert!(
        preferred[0]
            .requirements
            .matches(&labels(&[("quartermaster.dev/capacity-type", "spot")]))
    );
    let e = ingest_err(&pod(
        "p",
        &format!(
            "{APP}affinity:\n  nodeAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - weight: 0\n      preference: {{matchExpressions: [{{key: a, operator: Exists}}]}}"
        ),
    ));
    assert!(
        e.to_string()
            .contains("preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
        "{e}"
    );
}

#[test]
fn bad_operator_names_the_term() {
    let e = ingest_err(&pod(
        "p",
        &format!(
            "{APP}affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: a, operator: Near, values: [b]}}]"
        ),
    ));
    assert!(
            e.to_string().starts_with(
                "Pod/ns/p: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions: unknown operator"
            ),
            "{e}"
        );
}

#[test]
fn tolerations() {
    let s = ingest(&pod(
            "p",
            &format!(
                "{APP}tolerations:\n- {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}\n- {{key: team, value: ml}}\n- {{operator: Exists}}"
            ),
        ))
        .snapshot;
    let t = &s.pending[0].tolerations;
    assert_eq!(t.len(), 3);
    assert!(
        t[0].exists && t[0].key == "nvidia.com/gpu" && t[0].effect == Some(TaintEffect::NoSchedule)
    );
    assert!(!t[1].exists && t[1].value == "ml" && t[1].effect.is_none());
    assert!(t[2].exists && t[2].key.is_empty());
    let e = ingest_err(&pod(
        "p",
        &format!("{APP}tolerations: [{{key: a, effect: NoScheduleX}}]"),
    ));
    assert!(
        e.to_string()
            .starts_with("Pod/ns/p: spec.tolerations[0].effect: unknown effect"),
        "{e}"
    );
}

#[test]
fn topology_spread_constraints() {
    let ingested = ingest(&pod(
        "p",
        &format!(
            "{APP}topologySpreadConstraints:\n- maxSkew: 1\n  topologyKey: topology.kubernetes.io/zone\n  whenUnsatisfiable: DoNotSchedule\n  minDomains: 3\n  labelSelector:\n    matchLabels: {{app: p}}\n    matchExpressions: [{{key: tier, operator: NotIn, values: [batch]}}]\n  matchLabelKeys: [app]\n- maxSkew: 2\n  topologyKey: kubernetes.io/hostname\n  whenUnsatisfiable: ScheduleAnyway\n  labelSelector: {{matchLabels: {{app: p}}}}\n- maxSkew: 1\n  topologyKey: kubernetes.io/hostname\n  whenUnsatisfiable: DoNotSchedule"
        ),
    ));
    let spread = &ingested.snapshot.pending[0].topology_spread;
    assert_eq!(
        spread.len(),
        2,
        "the constraint without a selector counts no pods and is dropped"
    );
    assert_eq!(spread[0].topology_key, "topology.kubernetes.io/zone");
    assert_eq!(spread[0].max_skew, 1);
    assert_eq!(spread[0].min_domains, Some(3));
    assert_eq!(
        spread[0].when_unsatisfiable,
        WhenUnsatisfiable::DoNotSchedule
    );
    assert!(spread[0].selector.matches(&labels(&[("app", "p")])));
    assert!(
        !spread[0]
            .selector
            .matches(&labels(&[("app", "p"), ("tier", "batch")]))
    );
    assert_eq!(
        spread[1].when_unsatisfiable,
        WhenUnsatisfiable::ScheduleAnyway
    );
    assert!(
        ingested
            .notes
            .iter()
            .any(|n| n.contains("topologySpreadConstraints[2]: no labelSelector")),
        "{:?}",
        ingested.notes
    );
    let e = ingest_err(&pod(
        "p",
        &format!(
            "{APP}topologySpreadConstraints: [{{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Sometimes, labelSelector: {{}}}}]"
        ),
    ));
    assert!(
        e.to_string()
            .contains("spec.topologySpreadConstraints[0].whenUnsatisfiable"),
        "{e}"
    );
}

#[test]
fn pod_affinity_and_anti_affinity() {
    let ingested = ingest(&pod(
        "p",
        &format!(
            "{APP}affinity:
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: topology.kubernetes.io/zone
      labelSelector: {{matchLabels: {{app: cache}}}}
      namespaces: [data]
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector: {{matchExpressions: [{{key: app, operator: In, values: [p]}}]}}
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 40
      podAffinityTerm:
        topologyKey: topology.kubernetes.io/zone
        labelSelector: {{matchLabels: {{app: p}}}}
        namespaceSelector: {{}}"
        ),
    ));
    let p = &ingested.snapshot.pending[0];
    assert_eq!(p.affinity.len(), 1);
    assert_eq!(p.affinity[0].namespaces, ["data"]);
    assert_eq!(p.affinity[0].preferred_weight, None);
    assert!(p.affinity[0].selector.matches(&labels(&[("app", "cache")])));
    assert_eq!(p.anti_affinity.len(), 2);
    assert_eq!(p.anti_affinity[0].topology_key, "kubernetes.io/hostname");
    assert_eq!(p.anti_affinity[0].preferred_weight, None);
    assert_eq!(p.anti_affinity[1].preferred_weight, Some(40));
    assert!(p.anti_affinity[1].namespaces.is_empty());
    assert!(
        ingested
            .notes
            .iter()
            .any(|n| n.contains("namespaceSelector {} (all namespaces) ignored")),
        "{:?}",
        ingested.notes
    );
    let e = ingest_err(&pod(
        "p",
        &format!(
            "{APP}affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - {{topologyKey: kubernetes.io/hostname, labelSelector: {{matchExpressions: [{{key: app, operator: Gt, values: ['1']}}]}}}}"
        ),
    ));
    assert!(
            e.to_string().contains(
                "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator"
            ),
            "{e}"
        );
}

#[test]
fn match_label_keys_narrow_the_selector_to_the_pods_own_values() {
    let s = ingest(&pod(
            "p",
            &format!(
                "{APP}affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - topologyKey: kubernetes.io/hostname\n      labelSelector: {{matchExpressions: [{{key: app, operator: Exists}}]}}\n      matchLabelKeys: [app]\n      mismatchLabelKeys: [missing]"
            ),
        ))
        .snapshot;
    let sel = &s.pending[0].anti_affinity[0].selector;
    assert!(sel.matches(&labels(&[("app", "p")])));
    assert!(!sel.matches(&labels(&[("app", "q")])));
}
