//! NodePool tests: round trip, accessors, budgets at given times.

use std::time::Duration;

use chrono::TimeZone;
use serde_json::Value;

use super::*;
use crate::quantity::Millis;

const NODEPOOL: &str = include_str!("../../testdata/nodepool.yaml");

fn pool() -> NodePool {
    serde_norway::from_str(NODEPOOL).unwrap()
}

fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

#[test]
fn round_trips_a_karpenter_style_yaml() {
    let original: Value = serde_norway::from_str(NODEPOOL).unwrap();
    let np = pool();
    let back = serde_json::to_value(&np).unwrap();
    assert_eq!(back, original);
    // And through YAML text again.
    let text = serde_norway::to_string(&np).unwrap();
    let again: NodePool = serde_norway::from_str(&text).unwrap();
    assert_eq!(again, np);
    assert_eq!(np.metadata.name.as_deref(), Some("gpu-training"));
    assert_eq!(np.spec.template.spec.taints[0].effect, "NoSchedule");
    assert_eq!(np.node_class_ref().kind, "AWSNodeClass");
}

#[test]
fn unknown_spec_fields_are_rejected_by_serde() {
    let text = NODEPOOL.replace("  weight: 50", "  wieght: 50");
    let err = serde_norway::from_str::<NodePool>(&text).unwrap_err();
    assert!(err.to_string().contains("unknown field `wieght`"), "{err}");
    // Unknown metadata and status fields are tolerated (real objects carry them).
    let text = format!("{NODEPOOL}status:\n  futureField: 1\n  hourlyCost: 3.5\n");
    let np: NodePool = serde_norway::from_str(&text).unwrap();
    assert_eq!(np.status.unwrap().hourly_cost, Some(3.5));
}

#[test]
fn requirements_and_labels() {
    let np = pool();
    let reqs = np.requirements().unwrap();
    assert_eq!(reqs.len(), 7);
    let family = reqs.get("quartermaster.dev/instance-family").unwrap();
    assert_eq!(family.min_values(), Some(2));
    assert_eq!(
        reqs.get("quartermaster.dev/instance-gpu-count")
            .unwrap()
            .to_string(),
        "Gt 3"
    );
    let node = np.node_requirements().unwrap();
    assert_eq!(node.len(), 9);
    assert_eq!(node.get("example.com/team").unwrap().to_string(), "In [ml]");
}

#[test]
fn weight_limits_and_durations() {
    let mut np = pool();
    assert_eq!(np.weight(), 50);
    let limits = np.limits().unwrap();
    assert_eq!(limits.resources["cpu"], Millis::from_whole(2000));
    assert_eq!(limits.resources["memory"], Millis::from_whole(8000 << 30));
    assert_eq!(limits.resources["nvidia.com/gpu"], Millis::from_whole(64));
    assert_eq!(limits.nodes, Some(16));
    assert_eq!(limits.max_hourly_cost, Some(450.5));
    assert_eq!(
        np.expire_after().unwrap(),
        Some(Duration::from_secs(720 * 3600))
    );
    assert_eq!(
        np.termination_grace_period().unwrap(),
        Some(Duration::from_secs(48 * 3600))
    );
    assert_eq!(
        np.consolidate_after().unwrap(),
        Some(Duration::from_secs(600))
    );
    assert_eq!(
        np.consolidation_policy(),
        ConsolidationPolicy::WhenEmptyOrUnderutilized
    );

    np.spec.weight = None;
    np.spec.template.spec.expire_after = None;
    np.spec.template.spec.termination_grace_period = None;
    np.spec.disruption = None;
    assert_eq!(np.weight(), 0);
    assert_eq!(
        np.expire_after().unwrap(),
        Some(Duration::from_secs(720 * 3600)),
        "default 720h"
    );
    assert_eq!(np.termination_grace_period().unwrap(), None);
    assert_eq!(np.consolidate_after().unwrap(), Some(Duration::ZERO));
    assert_eq!(
        np.consolidation_policy(),
        ConsolidationPolicy::WhenEmptyOrUnderutilized
    );
    np.spec.template.spec.expire_after = Some("Never".into());
    assert_eq!(np.expire_after().unwrap(), None);
    np.spec.template.spec.expire_after = Some("soon".into());
    assert!(np.expire_after().is_err());
    np.spec.limits.insert("cpu".into(), Quantity("-1".into()));
    assert!(np.limits().is_err());
}

#[test]
fn allowed_disruptions_follow_the_budgets() {
    let mut np = pool();
    // Budgets: 10% always; 0 on weekdays 09:00-17:00 UTC for Underutilized and
    // Empty; 1 for Drifted.
    let wednesday_noon = at(2025, 1, 8, 12, 0);
    let wednesday_night = at(2025, 1, 8, 20, 0);
    let saturday_noon = at(2025, 1, 11, 12, 0);
    use DisruptionReason::*;
    let cases = [
        (Underutilized, wednesday_noon, 0),
        (Empty, wednesday_noon, 0),
        (Drifted, wednesday_noon, 1),
        (Underutilized, wednesday_night, 2),
        (Empty, saturday_noon, 2),
        (Drifted, wednesday_night, 1),
    ];
    for (reason, now, want) in cases {
        assert_eq!(
            np.allowed_disruptions(reason, 12, now),
            want,
            "{reason} at {now}"
        );
    }
    // Without budgets the default is 10%, rounded up.
    np.spec.disruption.as_mut().unwrap().budgets = None;
    assert_eq!(np.allowed_disruptions(Underutilized, 12, wednesday_noon), 2);
    assert_eq!(np.allowed_disruptions(Underutilized, 3, wednesday_noon), 1);
    np.spec.disruption = None;
    assert_eq!(np.allowed_disruptions(Drifted, 30, wednesday_noon), 3);
    assert!(np.budgets().is_none());
    // An explicit empty list means no budget.
    np.spec.disruption = Some(Disruption {
        budgets: Some(vec![]),
        ..Default::default()
    });
    assert_eq!(np.allowed_disruptions(Empty, 7, wednesday_noon), 7);
}

fn with_sharing(sharing: serde_json::Value) -> Vec<String> {
    let mut np = pool();
    np.spec.template.spec.gpu_sharing =
        Some(serde_json::from_value(sharing).expect("a GpuSharingSpec"));
    crate::validate::validate_nodepool(&np)
        .iter()
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn gpu_sharing_takes_each_strategy_with_its_own_fields_only() {
    assert!(
        with_sharing(serde_json::json!({"strategy": "time-slicing", "replicas": 4})).is_empty()
    );
    assert!(
        with_sharing(serde_json::json!({"strategy": "mig", "migConfig": "all-1g.10gb"})).is_empty()
    );
    let errs = with_sharing(serde_json::json!({"strategy": "mps", "replicas": 1}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("spec.template.spec.gpuSharing.replicas")
            && errs[0].contains("must be 2 or more to share a GPU, got 1"),
        "{errs:?}"
    );
    // Without migConfig the layout is chosen per node.
    assert!(with_sharing(serde_json::json!({"strategy": "mig"})).is_empty());
    let errs = with_sharing(serde_json::json!({"strategy": "mig", "migConfig": ""}));
    assert!(
        errs.len() == 1 && errs[0].contains("gpuSharing.migConfig"),
        "{errs:?}"
    );
    let errs = with_sharing(serde_json::json!({"strategy": "mig", "replicas": 2}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs.iter()
            .any(|e| e.contains("gpuSharing.replicas") && e.contains("only with"))
    );
    let bad: Result<GpuSharingSpec, _> =
        serde_json::from_value(serde_json::json!({"strategy": "timeslicing"}));
    assert!(bad.is_err());
}

#[test]
fn max_gpu_overshoot_is_a_non_negative_whole_number() {
    let mut np = pool();
    np.spec.template.spec.max_gpu_overshoot = Some(2);
    assert!(crate::validate::validate_nodepool(&np).is_empty());
    np.spec.template.spec.max_gpu_overshoot = Some(0);
    assert!(crate::validate::validate_nodepool(&np).is_empty());
    np.spec.template.spec.max_gpu_overshoot = Some(-1);
    let errs: Vec<String> = crate::validate::validate_nodepool(&np)
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("spec.template.spec.maxGpuOvershoot")
            && errs[0].contains("0 or more, got -1"),
        "{errs:?}"
    );
    // The field is camelCase in YAML; a fraction is not an accelerator count.
    let spec: Result<NodeClaimTemplateSpec, _> = serde_json::from_value(serde_json::json!({
        "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "x"},
        "maxGpuOvershoot": 2
    }));
    assert_eq!(spec.expect("parses").max_gpu_overshoot, Some(2));
    let spec: Result<NodeClaimTemplateSpec, _> = serde_json::from_value(serde_json::json!({
        "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "x"},
        "maxGpuOvershoot": 1.5
    }));
    assert!(spec.is_err());
}
