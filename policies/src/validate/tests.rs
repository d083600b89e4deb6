//! Validation tests: every check, with its exact path.

use serde_json::{Value, json};

use super::*;

const NODEPOOL: &str = include_str!("../../testdata/nodepool.yaml");
const NODECLAIM: &str = include_str!("../../testdata/nodeclaim.yaml");
const AWS: &str = include_str!("../../testdata/awsnodeclass.yaml");
const GCP: &str = include_str!("../../testdata/gcpnodeclass.yaml");
const AZURE: &str = include_str!("../../testdata/azurenodeclass.yaml");

fn yaml(text: &str) -> Value {
    serde_norway::from_str(text).unwrap()
}

/// Sets the value at a JSON pointer, creating the last object key or
/// appending when the last array index equals the length.
fn set(mut doc: Value, pointer: &str, value: Value) -> Value {
    let (parent, last) = pointer.rsplit_once('/').unwrap();
    match doc
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no {parent}"))
    {
        Value::Object(map) => {
            map.insert(last.replace("~1", "/"), value);
        }
        Value::Array(items) => {
            let i: usize = last.parse().unwrap();
            if i == items.len() {
                items.push(value);
            } else {
                items[i] = value;
            }
        }
        other => panic!("cannot set into {other}"),
    }
    doc
}

fn remove(mut doc: Value, pointer: &str) -> Value {
    let (parent, last) = pointer.rsplit_once('/').unwrap();
    match doc.pointer_mut(parent).unwrap() {
        Value::Object(map) => {
            map.remove(&last.replace("~1", "/"));
        }
        Value::Array(items) => {
            items.remove(last.parse::<usize>().unwrap());
        }
        other => panic!("cannot remove from {other}"),
    }
    doc
}

fn errors(doc: &Value) -> Vec<FieldError> {
    match validate_manifest(doc) {
        Ok(obj) => panic!("expected errors, {} {} is valid", obj.kind(), obj.name()),
        Err(errs) => {
            assert!(
                !errs.is_empty(),
                "an Err must carry at least one FieldError"
            );
            errs
        }
    }
}

/// Asserts the document has exactly one error, at `path`, whose reason contains `reason`.
#[track_caller]
fn only_error(doc: &Value, path: &str, reason: &str) {
    let errs = errors(doc);
    assert_eq!(errs.len(), 1, "expected one error at {path}, got {errs:#?}");
    assert_eq!(errs[0].path, path, "{errs:#?}");
    assert!(
        errs[0].reason.contains(reason),
        "reason {:?} should contain {reason:?}",
        errs[0].reason
    );
}

/// Asserts some error is at `path` with a reason containing `reason`.
#[track_caller]
fn has_error(errs: &[FieldError], path: &str, reason: &str) {
    assert!(
        errs.iter()
            .any(|e| e.path == path && e.reason.contains(reason)),
        "no error at {path} containing {reason:?} in {errs:#?}"
    );
}

const REQ: &str = "/spec/template/spec/requirements";
const REQ_PATH: &str = "spec.template.spec.requirements";

fn np() -> Value {
    yaml(NODEPOOL)
}

fn np_with_requirement(r: Value) -> Value {
    set(np(), &format!("{REQ}/0"), r)
}

#[test]
fn field_error_display() {
    let e = FieldError::new("spec.weight", "must be between 1 and 100, got 0");
    assert_eq!(
        e.to_string(),
        "spec.weight: must be between 1 and 100, got 0"
    );
}

#[test]
fn valid_manifests_pass() {
    for (text, kind, name) in [
        (NODEPOOL, "NodePool", "gpu-training"),
        (NODECLAIM, "NodeClaim", "gpu-training-x7k2p"),
        (AWS, "AWSNodeClass", "gpu"),
        (GCP, "GCPNodeClass", "gpu"),
        (AZURE, "AzureNodeClass", "gpu"),
    ] {
        let obj = validate_manifest(&yaml(text)).unwrap_or_else(|e| panic!("{kind}: {e:#?}"));
        assert_eq!(obj.kind(), kind);
        assert_eq!(obj.name(), name);
        assert_eq!(obj.metadata().name.as_deref(), Some(name));
    }
    let ValidatedObject::NodePool(pool) = validate_manifest(&np()).unwrap() else {
        panic!("not a NodePool")
    };
    assert_eq!(pool.weight(), 50);
}

#[test]
fn minimal_nodepool_is_valid() {
    let doc = json!({
        "apiVersion": "quartermaster.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": {
            "group": "quartermaster.dev", "kind": "GCPNodeClass", "name": "default"}}}}
    });
    assert!(validate_manifest(&doc).is_ok());
    // A nodeClassRef to another group is not checked for kind, nor for existence.
    let doc = set(
        doc,
        "/spec/template/spec/nodeClassRef/group",
        json!("karpenter.k8s.aws"),
    );
    let doc = set(
        doc,
        "/spec/template/spec/nodeClassRef/kind",
        json!("EC2NodeClass"),
    );
    assert!(validate_manifest(&doc).is_ok());
}

#[test]
fn routing_by_api_version_and_kind() {
    only_error(
        &set(np(), "/apiVersion", json!("karpenter.sh/v1")),
        "apiVersion",
        "unsupported apiVersion \"karpenter.sh/v1\"",
    );
    only_error(
        &set(np(), "/apiVersion", json!("quartermaster.dev/v1beta1")),
        "apiVersion",
        "unsupported version",
    );
    only_error(
        &set(np(), "/apiVersion", json!(1)),
        "apiVersion",
        "expected string, got integer",
    );
    only_error(
        &remove(np(), "/apiVersion"),
        "apiVersion",
        "required field is missing",
    );
    only_error(
        &set(np(), "/kind", json!("Pod")),
        "kind",
        "unsupported kind \"Pod\"",
    );
    only_error(&remove(np(), "/kind"), "kind", "required field is missing");
    // Another API's object: one problem that says so.
    only_error(
        &json!({"apiVersion": "v1", "kind": "ConfigMap"}),
        "kind",
        "v1 ConfigMap is not a Quartermaster object",
    );
    // Another API with a misspelt kind of ours: both named.
    let both = errors(&json!({"apiVersion": "v1", "kind": "NodePol"}));
    assert_eq!(both.len(), 2);
    has_error(&both, "apiVersion", "unsupported");
    has_error(&both, "kind", "did you mean \"NodePool\"?");
    only_error(&json!([1, 2]), "<root>", "expected an object, got array");
    // The kind picks the schema: a NodeClaim body under kind NodePool fails.
    let claim_as_pool = set(yaml(NODECLAIM), "/kind", json!("NodePool"));
    has_error(
        &errors(&claim_as_pool),
        "spec.requirements",
        "unknown field",
    );
}

#[test]
fn metadata_name_is_required() {
    only_error(
        &remove(np(), "/metadata/name"),
        "metadata.name",
        "required field is missing",
    );
    only_error(
        &set(np(), "/metadata/name", json!("")),
        "metadata.name",
        "required field is missing",
    );
    only_error(
        &remove(np(), "/metadata"),
        "metadata.name",
        "required field is missing",
    );
    only_error(
        &set(np(), "/metadata/name", json!("GPU_Pool")),
        "metadata.name",
        "RFC 1123",
    );
    // NodePool names become label values, so they are limited to 63 characters.
    only_error(
        &set(np(), "/metadata/name", json!("a".repeat(64))),
        "metadata.name",
        "63",
    );
    assert!(validate_manifest(&set(yaml(AWS), "/metadata/name", json!("a".repeat(64)))).is_ok());
    only_error(
        &remove(yaml(AWS), "/metadata/name"),
        "metadata.name",
        "required field is missing",
    );
    only_error(
        &set(np(), "/metadata", json!("x")),
        "metadata",
        "expected object",
    );
}

#[test]
fn unknown_fields_and_wrong_types_are_all_reported() {
    let doc = set(
        np(),
        &format!("{REQ}/0"),
        json!({"key": "quartermaster.dev/capacity-type", "operatr": "In", "values": ["spot"]}),
    );
    let doc = set(doc, "/spec/weight", json!("high"));
    let doc = set(doc, "/spec/disruption/budgets/0/node", json!("10%"));
    let doc = set(doc, "/spec/sepc", json!({}));
    let doc = set(doc, "/extra", json!(1));
    let errs = errors(&doc);
    has_error(&errs, &format!("{REQ_PATH}[0].operatr"), "unknown field");
    has_error(
        &errs,
        &format!("{REQ_PATH}[0].operator"),
        "required field is missing",
    );
    has_error(&errs, "spec.weight", "expected integer, got string");
    has_error(&errs, "spec.disruption.budgets[0].node", "unknown field");
    has_error(&errs, "spec.sepc", "unknown field");
    has_error(&errs, "extra", "unknown field");
    assert_eq!(errs.len(), 6, "{errs:#?}");

    only_error(
        &set(np(), REQ, json!({"key": "x"})),
        REQ_PATH,
        "expected array, got object",
    );
    only_error(
        &set(np(), "/spec/template/spec/taints", Value::Null),
        "spec.template.spec.taints",
        "must not be null",
    );
    only_error(
        &set(np(), "/spec/limits/cpu", json!([1])),
        "spec.limits[cpu]",
        "expected integer or string",
    );
    only_error(&remove(np(), "/spec"), "spec", "required field is missing");
    // Enums are checked when deserialising.
    only_error(
        &set(
            np(),
            "/spec/disruption/consolidationPolicy",
            json!("Always"),
        ),
        "spec.disruption.consolidationPolicy",
        "unknown variant `Always`",
    );
    only_error(
        &set(
            np(),
            "/spec/disruption/budgets/1/reasons/0",
            json!("Expired"),
        ),
        "spec.disruption.budgets[1].reasons[0]",
        "unknown variant `Expired`",
    );
    // Numbers are accepted for quantities, as Kubernetes does.
    assert!(validate_manifest(&set(np(), "/spec/limits/cpu", json!(1000))).is_ok());
    // Status written by the controller is accepted.
    let with_status = set(
        np(),
        "/status",
        json!({"resources": {"nodes": "3"}, "hourlyCost": 12.5}),
    );
    assert!(validate_manifest(&with_status).is_ok());
}

#[test]
fn requirement_operators_and_values() {
    let p = |suffix: &str| format!("{REQ_PATH}[0]{suffix}");
    only_error(
        &np_with_requirement(
            json!({"key": "example.com/a", "operator": "Equals", "values": ["x"]}),
        ),
        &p(".operator"),
        "unknown operator \"Equals\"",
    );
    only_error(
        &np_with_requirement(
            json!({"key": "quartermaster.dev/instance-gpu-count", "operator": "Gt", "values": ["many"]}),
        ),
        &p(".values[0]"),
        "operator Gt requires an integer value",
    );
    only_error(
        &np_with_requirement(
            json!({"key": "quartermaster.dev/instance-gpu-count", "operator": "Lt", "values": ["1", "2"]}),
        ),
        &p(".values"),
        "operator Lt requires exactly one value, got 2",
    );
    only_error(
        &np_with_requirement(
            json!({"key": "quartermaster.dev/instance-gpu-count", "operator": "Gte"}),
        ),
        &p(".values"),
        "operator Gte requires exactly one value, got 0",
    );
    only_error(
        &np_with_requirement(
            json!({"key": "quartermaster.dev/instance-gpu-count", "operator": "Lte", "values": ["1.5"]}),
        ),
        &p(".values[0]"),
        "operator Lte requires an integer value",
    );
    only_error(
        &np_with_requirement(json!({"key": "example.com/a", "operator": "In", "values": []})),
        &p(".values"),
        "operator In requires at least one value",
    );
    only_error(
        &np_with_requirement(json!({"key": "example.com/a", "operator": "NotIn"})),
        &p(".values"),
        "operator NotIn requires at least one value",
    );
    only_error(
        &np_with_requirement(
            json!({"key": "example.com/a", "operator": "Exists", "values": ["x"]}),
        ),
        &p(".values"),
        "operator Exists takes no values",
    );
    only_error(
        &np_with_requirement(
            json!({"key": "example.com/a", "operator": "DoesNotExist", "values": ["x"]}),
        ),
        &p(".values"),
        "operator DoesNotExist takes no values",
    );
    only_error(
        &np_with_requirement(
            json!({"key": "example.com/a", "operator": "In", "values": ["bad value"]}),
        ),
        &p(".values[0]"),
        "label value",
    );
    only_error(
        &np_with_requirement(json!({"key": "Bad Key", "operator": "Exists"})),
        &p(".key"),
        "label key",
    );
    only_error(
        &np_with_requirement(
            json!({"key": "quartermaster.dev/nodepool", "operator": "In", "values": ["x"]}),
        ),
        &p(".key"),
        "set by Quartermaster",
    );
}

#[test]
fn min_values_bounds() {
    let p = format!("{REQ_PATH}[0].minValues");
    let base = json!({"key": "quartermaster.dev/instance-family", "operator": "In", "values": ["p5", "p4d", "g6"]});
    let with = |n: i64| {
        let mut r = base.clone();
        r["minValues"] = json!(n);
        np_with_requirement(r)
    };
    only_error(&with(0), &p, "must be at least 1, got 0");
    only_error(&with(-2), &p, "must be at least 1, got -2");
    only_error(
        &with(4),
        &p,
        "minValues (4) exceeds the number of values (3)",
    );
    only_error(&with(51), &p, "must be at most 50");
    assert!(validate_manifest(&with(3)).is_ok());
    // With Exists, minValues is checked against the instance types, not values.
    let exists =
        json!({"key": "quartermaster.dev/instance-family", "operator": "Exists", "minValues": 5});
    assert!(validate_manifest(&np_with_requirement(exists)).is_ok());
}

#[test]
fn contradicting_requirements() {
    let doc = set(
        np(),
        &format!("{REQ}/7"),
        json!({"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-west-1a"]}),
    );
    only_error(
        &doc,
        &format!("{REQ_PATH}[7]"),
        r#"contradicts earlier requirements on key "topology.kubernetes.io/zone": In [us-east-1a, us-east-1b, us-east-1c] vs In [eu-west-1a]"#,
    );
    // Labels must satisfy the requirements on their key.
    let doc = set(
        np(),
        "/spec/template/metadata/labels/topology.kubernetes.io~1zone",
        json!("us-west-2a"),
    );
    only_error(
        &doc,
        "spec.template.metadata.labels[topology.kubernetes.io/zone]",
        "does not satisfy requirement In [us-east-1a, us-east-1b, us-east-1c]",
    );
}

#[test]
fn template_labels() {
    let labels = "/spec/template/metadata/labels";
    let at = |k: &str| format!("spec.template.metadata.labels[{k}]");
    only_error(
        &set(np(), &format!("{labels}/bad key"), json!("x")),
        &at("bad key"),
        "label key",
    );
    only_error(
        &set(np(), &format!("{labels}/team"), json!("not valid!")),
        &at("team"),
        "invalid value",
    );
    only_error(
        &set(
            np(),
            &format!("{labels}/kubernetes.io~1hostname"),
            json!("x"),
        ),
        &at("kubernetes.io/hostname"),
        "restricted",
    );
    only_error(
        &set(
            np(),
            &format!("{labels}/quartermaster.dev~1owner"),
            json!("x"),
        ),
        &at("quartermaster.dev/owner"),
        "restricted",
    );
    only_error(
        &set(
            np(),
            &format!("{labels}/quartermaster.dev~1nodepool"),
            json!("x"),
        ),
        &at("quartermaster.dev/nodepool"),
        "set by Quartermaster",
    );
    only_error(
        &set(
            np(),
            "/spec/template/metadata/annotations/bad key",
            json!("x"),
        ),
        "spec.template.metadata.annotations[bad key]",
        "annotation key",
    );
    // Well-known labels and exception domains are allowed.
    assert!(
        validate_manifest(&set(
            np(),
            &format!("{labels}/kubernetes.io~1arch"),
            json!("amd64")
        ))
        .is_ok()
    );
    assert!(
        validate_manifest(&set(
            np(),
            &format!("{labels}/node-restriction.kubernetes.io~1x"),
            json!("y")
        ))
        .is_ok()
    );
}

#[test]
fn weight_range() {
    only_error(
        &set(np(), "/spec/weight", json!(0)),
        "spec.weight",
        "must be between 1 and 100, got 0",
    );
    only_error(
        &set(np(), "/spec/weight", json!(101)),
        "spec.weight",
        "got 101",
    );
    assert!(validate_manifest(&set(np(), "/spec/weight", json!(100))).is_ok());
    assert!(validate_manifest(&remove(np(), "/spec/weight")).is_ok());
}

#[test]
fn limits() {
    only_error(
        &set(np(), "/spec/limits/cpu", json!("-1")),
        "spec.limits[cpu]",
        "must not be negative",
    );
    only_error(
        &set(np(), "/spec/limits/memory", json!("lots")),
        "spec.limits[memory]",
        "invalid quantity",
    );
    only_error(
        &set(np(), "/spec/limits/nodes", json!("2.5")),
        "spec.limits[nodes]",
        "whole number",
    );
    only_error(
        &set(np(), "/spec/limits/maxHourlyCost", json!("-5")),
        "spec.limits[maxHourlyCost]",
        "must not be negative",
    );
    only_error(
        &set(np(), "/spec/limits/maxHourlyCost", json!("NaN")),
        "spec.limits[maxHourlyCost]",
        "finite",
    );
    only_error(
        &set(np(), "/spec/limits/maxHourlyCost", json!("cheap")),
        "spec.limits[maxHourlyCost]",
        "not a number",
    );
    only_error(
        &set(np(), "/spec/limits/bad name", json!("1")),
        "spec.limits[bad name]",
        "resource name",
    );
    assert!(validate_manifest(&set(np(), "/spec/limits/maxHourlyCost", json!(12.75))).is_ok());
}

#[test]
fn node_class_ref() {
    let r = "/spec/template/spec/nodeClassRef";
    let p = "spec.template.spec.nodeClassRef";
    only_error(&remove(np(), r), p, "required field is missing");
    only_error(
        &remove(np(), &format!("{r}/group")),
        &format!("{p}.group"),
        "required field is missing",
    );
    only_error(
        &remove(np(), &format!("{r}/name")),
        &format!("{p}.name"),
        "required field is missing",
    );
    only_error(
        &set(np(), &format!("{r}/name"), json!("")),
        &format!("{p}.name"),
        "must not be empty",
    );
    only_error(
        &set(np(), &format!("{r}/group"), json!("")),
        &format!("{p}.group"),
        "must not be empty",
    );
    only_error(
        &set(np(), &format!("{r}/kind"), json!("")),
        &format!("{p}.kind"),
        "must not be empty",
    );
    only_error(
        &set(np(), &format!("{r}/kind"), json!("EC2NodeClass")),
        &format!("{p}.kind"),
        "unsupported kind \"EC2NodeClass\" for group quartermaster.dev",
    );
    let errs = errors(&set(np(), r, json!({})));
    assert_eq!(errs.len(), 3, "{errs:#?}");
    for f in ["group", "kind", "name"] {
        has_error(&errs, &format!("{p}.{f}"), "required field is missing");
    }
}

#[test]
fn durations() {
    only_error(
        &set(np(), "/spec/template/spec/expireAfter", json!("30d")),
        "spec.template.spec.expireAfter",
        "invalid duration \"30d\"",
    );
    only_error(
        &set(np(), "/spec/template/spec/expireAfter", json!("1.5h")),
        "spec.template.spec.expireAfter",
        "invalid duration",
    );
    assert!(
        validate_manifest(&set(
            np(),
            "/spec/template/spec/expireAfter",
            json!("Never")
        ))
        .is_ok()
    );
    only_error(
        &set(
            np(),
            "/spec/template/spec/terminationGracePeriod",
            json!("Never"),
        ),
        "spec.template.spec.terminationGracePeriod",
        "invalid duration \"Never\"",
    );
    only_error(
        &set(
            np(),
            "/spec/template/spec/spotInterruptionCost",
            json!("ten minutes"),
        ),
        "spec.template.spec.spotInterruptionCost",
        "invalid duration",
    );
    assert!(
        validate_manifest(&set(
            np(),
            "/spec/template/spec/spotInterruptionCost",
            json!("10m")
        ))
        .is_ok()
    );
    only_error(
        &set(np(), "/spec/disruption/consolidateAfter", json!("soon")),
        "spec.disruption.consolidateAfter",
        "invalid duration",
    );
    only_error(
        &set(
            np(),
            "/spec/disruption/consolidateAfter",
            json!("99999999999h"),
        ),
        "spec.disruption.consolidateAfter",
        "too large",
    );
    assert!(
        validate_manifest(&set(
            np(),
            "/spec/disruption/consolidateAfter",
            json!("Never")
        ))
        .is_ok()
    );
    assert!(
        validate_manifest(&set(
            np(),
            "/spec/disruption/consolidateAfter",
            json!("1h30m")
        ))
        .is_ok()
    );
}

#[test]
fn taints() {
    only_error(
        &set(
            np(),
            "/spec/template/spec/taints/0/effect",
            json!("NoScheduleX"),
        ),
        "spec.template.spec.taints[0].effect",
        "unsupported effect \"NoScheduleX\": expected one of NoSchedule, PreferNoSchedule, NoExecute",
    );
    only_error(
        &set(
            np(),
            "/spec/template/spec/startupTaints/0/effect",
            json!(""),
        ),
        "spec.template.spec.startupTaints[0].effect",
        "unsupported effect",
    );
    only_error(
        &set(np(), "/spec/template/spec/taints/0/key", json!("bad key")),
        "spec.template.spec.taints[0].key",
        "taint key",
    );
    only_error(
        &set(
            np(),
            "/spec/template/spec/taints/1",
            json!({"key": "nvidia.com/gpu", "effect": "NoSchedule"}),
        ),
        "spec.template.spec.taints[1]",
        "duplicate taint",
    );
    only_error(
        &remove(np(), "/spec/template/spec/taints/0/effect"),
        "spec.template.spec.taints[0].effect",
        "required field is missing",
    );
}

#[test]
fn budgets() {
    let b = "/spec/disruption/budgets";
    let at = |i: usize, f: &str| format!("spec.disruption.budgets[{i}].{f}");
    only_error(
        &set(np(), &format!("{b}/0/nodes"), json!("150%")),
        &at(0, "nodes"),
        "must not exceed 100%",
    );
    only_error(
        &set(np(), &format!("{b}/0/nodes"), json!("ten")),
        &at(0, "nodes"),
        "must be \"N\" or \"N%\"",
    );
    only_error(
        &set(np(), &format!("{b}/0/nodes"), json!("-1")),
        &at(0, "nodes"),
        "must be \"N\" or \"N%\"",
    );
    only_error(
        &set(np(), &format!("{b}/0/nodes"), json!(3)),
        &at(0, "nodes"),
        "expected string, got integer",
    );
    only_error(
        &set(np(), &format!("{b}/1/schedule"), json!("every weekday")),
        &at(1, "schedule"),
        "invalid cron schedule",
    );
    only_error(
        &set(np(), &format!("{b}/1/schedule"), json!("0 25 * * *")),
        &at(1, "schedule"),
        "invalid cron schedule",
    );
    only_error(
        &set(np(), &format!("{b}/1/schedule"), json!("@reboot")),
        &at(1, "schedule"),
        "unknown macro",
    );
    for ok in [
        "@daily",
        "@midnight",
        "@hourly",
        "@weekly",
        "@monthly",
        "@yearly",
        "@annually",
        "*/15 1-5 * * *",
    ] {
        assert!(
            validate_manifest(&set(np(), &format!("{b}/1/schedule"), json!(ok))).is_ok(),
            "{ok}"
        );
    }
    only_error(
        &remove(np(), &format!("{b}/1/duration")),
        &at(1, "duration"),
        "required when schedule is set",
    );
    only_error(
        &remove(np(), &format!("{b}/1/schedule")),
        &at(1, "schedule"),
        "required when duration is set",
    );
    only_error(
        &set(np(), &format!("{b}/1/duration"), json!("Never")),
        &at(1, "duration"),
        "invalid duration",
    );
}

#[test]
fn all_problems_are_collected() {
    let doc = set(np(), "/spec/weight", json!(0));
    let doc = set(doc, "/spec/disruption/budgets/0/nodes", json!("200%"));
    let doc = set(doc, &format!("{REQ}/0/operator"), json!("Like"));
    let doc = set(
        doc,
        "/spec/template/spec/taints/0/effect",
        json!("Sometimes"),
    );
    let doc = set(doc, "/spec/limits/cpu", json!("-4"));
    let doc = set(
        doc,
        "/spec/template/spec/nodeClassRef/kind",
        json!("Unknown"),
    );
    let doc = remove(doc, "/metadata/name");
    let errs = errors(&doc);
    let mut paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "metadata.name",
            "spec.disruption.budgets[0].nodes",
            "spec.limits[cpu]",
            "spec.template.spec.nodeClassRef.kind",
            "spec.template.spec.requirements[0].operator",
            "spec.template.spec.taints[0].effect",
            "spec.weight",
        ]
    );
}

#[test]
fn nodeclaim_checks() {
    let nc = || yaml(NODECLAIM);
    only_error(
        &set(nc(), "/spec/resources/requests/cpu", json!("-1")),
        "spec.resources.requests[cpu]",
        "must not be negative",
    );
    only_error(
        &set(nc(), "/spec/requirements/1/operator", json!("Within")),
        "spec.requirements[1].operator",
        "unknown operator",
    );
    only_error(
        &set(nc(), "/spec/expireAfter", json!("forever")),
        "spec.expireAfter",
        "invalid duration",
    );
    only_error(
        &remove(nc(), "/spec/nodeClassRef"),
        "spec.nodeClassRef",
        "required field is missing",
    );
    only_error(
        &set(nc(), "/spec/taints/0/effect", json!("x")),
        "spec.taints[0].effect",
        "unsupported effect",
    );
    only_error(
        &set(nc(), "/spec/resources/limits", json!({})),
        "spec.resources.limits",
        "unknown field",
    );
    // Status fields are not checked for unknown keys.
    assert!(
        validate_manifest(&set(
            nc(),
            "/status/lastPodEventTime",
            json!("2025-01-01T00:00:00Z")
        ))
        .is_ok()
    );
}

#[test]
fn aws_node_class_checks() {
    let aws = || yaml(AWS);
    only_error(
        &set(aws(), "/spec/region", json!("")),
        "spec.region",
        "must not be empty",
    );
    assert_eq!(
        validate_manifest(&remove(aws(), "/spec/region")).map(|_| ()),
        Ok(()),
        "without a region the cluster's is used"
    );
    only_error(
        &set(aws(), "/spec/region", json!("US East")),
        "spec.region",
        "not an AWS region",
    );
    only_error(
        &set(aws(), "/spec/region", json!("mars-north-7")),
        "spec.region",
        "\"mars-north-7\" is not an AWS region name such as \"us-east-1\"",
    );
    for region in ["us-gov-west-1", "ap-southeast-4", "eu-central-2"] {
        assert_eq!(
            validate_manifest(&set(aws(), "/spec/region", json!(region))).map(|_| ()),
            Ok(()),
            "{region}"
        );
    }
    only_error(
        &set(
            aws(),
            "/spec/amiSelectorTerms",
            json!([{"alias": "bogus@latest"}]),
        ),
        "spec.amiSelectorTerms[0].alias",
        "unknown AMI family \"bogus\" in alias \"bogus@latest\": expected one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025",
    );
    only_error(
        &set(
            aws(),
            "/spec/amiSelectorTerms",
            json!([{"alias": "windows2022@v1"}]),
        ),
        "spec.amiSelectorTerms[0].alias",
        "Windows aliases do not support pinning",
    );
    only_error(
        &set(
            aws(),
            "/spec/placementGroupSelector",
            json!({"name": "a", "id": "pg-1"}),
        ),
        "spec.placementGroupSelector",
        "name and id are mutually exclusive",
    );
    only_error(
        &set(aws(), "/spec/amiFamily", json!("Windows2030")),
        "spec.amiFamily",
        "unknown variant `Windows2030`, expected one of `AL2`, `AL2023`, `Bottlerocket`, `Windows2019`, `Windows2022`, `Windows2025`, `Custom`",
    );
    only_error(
        &set(aws(), "/spec/subnetSelectorTerms", json!([])),
        "spec.subnetSelectorTerms",
        "at least one subnet selector term",
    );
    only_error(
        &remove(aws(), "/spec/subnetSelectorTerms"),
        "spec.subnetSelectorTerms",
        "at least one",
    );
    only_error(
        &set(aws(), "/spec/subnetSelectorTerms/0", json!({})),
        "spec.subnetSelectorTerms[0]",
        "must specify id or tags",
    );
    only_error(
        &set(
            aws(),
            "/spec/subnetSelectorTerms/0",
            json!({"id": "subnet-1", "tags": {"a": "b"}}),
        ),
        "spec.subnetSelectorTerms[0]",
        "mutually exclusive",
    );
    only_error(
        &set(aws(), "/spec/subnetSelectorTerms/0/tags", json!({"k": ""})),
        "spec.subnetSelectorTerms[0].tags[k]",
        "must not be empty",
    );
    only_error(
        &set(aws(), "/spec/securityGroupSelectorTerms", json!([])),
        "spec.securityGroupSelectorTerms",
        "at least one security group",
    );
    only_error(
        &set(aws(), "/spec/securityGroupSelectorTerms/1", json!({})),
        "spec.securityGroupSelectorTerms[1]",
        "must specify id, name or tags",
    );
    only_error(
        &set(
            aws(),
            "/spec/securityGroupSelectorTerms/1/id",
            json!("sg-1"),
        ),
        "spec.securityGroupSelectorTerms[1]",
        "mutually exclusive",
    );
    only_error(
        &set(aws(), "/spec/subnetSelectorTerms/1/id", json!("")),
        "spec.subnetSelectorTerms[1].id",
        "must not be empty",
    );
    only_error(
        &set(aws(), "/spec/amiFamily", json!("Ubuntu")),
        "spec.amiFamily",
        "unknown variant `Ubuntu`",
    );
    let no_ami = remove(remove(aws(), "/spec/amiFamily"), "/spec/amiSelectorTerms");
    only_error(
        &no_ami,
        "spec.amiFamily",
        "amiFamily or amiSelectorTerms is required",
    );
    let custom = set(
        remove(aws(), "/spec/amiSelectorTerms"),
        "/spec/amiFamily",
        json!("Custom"),
    );
    only_error(
        &custom,
        "spec.amiSelectorTerms",
        "required when amiFamily is Custom",
    );
    only_error(
        &set(aws(), "/spec/amiSelectorTerms/0/id", json!("ami-1")),
        "spec.amiSelectorTerms[0]",
        "alias is mutually exclusive",
    );
    only_error(
        &set(aws(), "/spec/instanceProfile", json!("profile")),
        "spec.instanceProfile",
        "mutually exclusive with role",
    );
    only_error(
        &remove(aws(), "/spec/role"),
        "spec.role",
        "role or instanceProfile is required",
    );
    only_error(
        &set(aws(), "/spec/tags/quartermaster.dev~1nodepool", json!("x")),
        "spec.tags[quartermaster.dev/nodepool]",
        "restricted",
    );
    only_error(
        &set(
            aws(),
            "/spec/blockDeviceMappings/0/ebs/volumeSize",
            json!("0"),
        ),
        "spec.blockDeviceMappings[0].ebs.volumeSize",
        "must be positive",
    );
    only_error(
        &set(
            aws(),
            "/spec/blockDeviceMappings/1",
            json!({"deviceName": "/dev/xvdb", "rootVolume": true}),
        ),
        "spec.blockDeviceMappings[1].rootVolume",
        "only one",
    );
    only_error(
        &set(
            aws(),
            "/spec/metadataOptions/httpTokens",
            json!("sometimes"),
        ),
        "spec.metadataOptions.httpTokens",
        "unsupported value",
    );
    only_error(
        &set(
            aws(),
            "/spec/metadataOptions/httpPutResponseHopLimit",
            json!(65),
        ),
        "spec.metadataOptions.httpPutResponseHopLimit",
        "between 1 and 64",
    );
    only_error(
        &set(aws(), "/spec/efa", json!("yes")),
        "spec.efa",
        "expected boolean, got string",
    );
}

#[test]
fn gcp_node_class_checks() {
    let gcp = || yaml(GCP);
    only_error(
        &remove(gcp(), "/spec/project"),
        "spec.project",
        "required field is missing",
    );
    only_error(
        &set(gcp(), "/spec/project", json!("")),
        "spec.project",
        "must not be empty",
    );
    only_error(
        &set(gcp(), "/spec/project", json!("My_Project")),
        "spec.project",
        "not a project id",
    );
    only_error(
        &set(gcp(), "/spec/region", json!("")),
        "spec.region",
        "must not be empty",
    );
    only_error(
        &remove(gcp(), "/spec/region"),
        "spec.region",
        "required field is missing",
    );
    only_error(
        &set(gcp(), "/spec/zones/1", json!("europe-west4-a")),
        "spec.zones[1]",
        "not in region \"us-central1\"",
    );
    only_error(
        &set(
            gcp(),
            "/spec/image",
            json!({"family": "cos-stable", "selfLink": "projects/cos-cloud/global/images/cos-1"}),
        ),
        "spec.image",
        "mutually exclusive",
    );
    only_error(
        &set(gcp(), "/spec/image", json!({})),
        "spec.image",
        "family or selfLink is required",
    );
    only_error(
        &set(gcp(), "/spec/disk/sizeGiB", json!(5)),
        "spec.disk.sizeGiB",
        "at least 10",
    );
    only_error(
        &set(gcp(), "/spec/serviceAccount", json!("nodes")),
        "spec.serviceAccount",
        "service account email",
    );
    only_error(
        &set(gcp(), "/spec/labels/Team", json!("ml")),
        "spec.labels[Team]",
        "GCE label keys",
    );
    only_error(
        &set(gcp(), "/spec/tags/1", json!("GPU Nodes")),
        "spec.tags[1]",
        "network tag",
    );
}

#[test]
fn gcp_reservation_affinity_checks() {
    let with = |affinity: Value| set(yaml(GCP), "/spec/reservationAffinity", affinity);
    for ok in [
        json!({"consumeReservationType": "ANY_RESERVATION"}),
        json!({"consumeReservationType": "NO_RESERVATION"}),
        json!({"consumeReservationType": "SPECIFIC_RESERVATION", "values": ["h100-a", "h100-b"]}),
        json!({"consumeReservationType": "SPECIFIC_RESERVATION",
               "key": "compute.googleapis.com/reservation-name", "values": ["h100-a"]}),
        json!({"consumeReservationType": "SPECIFIC_RESERVATION",
               "key": "googleapis.com/reservation-name", "values": ["h100-a"]}),
    ] {
        assert!(validate_manifest(&with(ok.clone())).is_ok(), "{ok}");
    }
    only_error(
        &with(json!({"consumeReservationType": "SPECIFIC_RESERVATION"})),
        "spec.reservationAffinity.values",
        "SPECIFIC_RESERVATION needs values",
    );
    only_error(
        &with(json!({"consumeReservationType": "ANY_RESERVATION", "values": ["h100-a"]})),
        "spec.reservationAffinity.values",
        "ANY_RESERVATION takes no values",
    );
    only_error(
        &with(json!({"consumeReservationType": "NO_RESERVATION",
                     "key": "compute.googleapis.com/reservation-name"})),
        "spec.reservationAffinity.key",
        "NO_RESERVATION takes no key",
    );
    only_error(
        &with(json!({"consumeReservationType": "SPECIFIC_RESERVATION",
                     "key": "team", "values": ["h100-a"]})),
        "spec.reservationAffinity.key",
        "unsupported key \"team\"",
    );
    only_error(
        &with(json!({"consumeReservationType": "SPECIFIC_RESERVATION", "values": ["H100_A"]})),
        "spec.reservationAffinity.values[0]",
        "not a reservation name",
    );
    only_error(
        &with(json!({"consumeReservationType": "SPECIFIC_RESERVATION",
                     "values": ["projects/other/reservations/h100"]})),
        "spec.reservationAffinity.values[0]",
        "another project",
    );
    only_error(
        &with(json!({"consumeReservationType": "SPECIFIC_RESERVATION",
                     "values": ["h100-a", "h100-a"]})),
        "spec.reservationAffinity.values[1]",
        "listed twice",
    );
    only_error(
        &with(json!({"consumeReservationType": "SPECIFIC"})),
        "spec.reservationAffinity.consumeReservationType",
        "unknown variant `SPECIFIC`",
    );
    // Compute Engine's default type is ANY_RESERVATION, and the error says so.
    only_error(
        &with(json!({"values": ["h100-a"]})),
        "spec.reservationAffinity.values",
        "ANY_RESERVATION takes no values: only SPECIFIC_RESERVATION names reservations (consumeReservationType defaults to ANY_RESERVATION)",
    );
    assert!(validate_manifest(&with(json!({}))).is_ok());
}

#[test]
fn azure_node_class_checks() {
    let az = || yaml(AZURE);
    for (field, path) in [
        ("subscriptionId", "spec.subscriptionId"),
        ("resourceGroup", "spec.resourceGroup"),
        ("location", "spec.location"),
        ("subnetId", "spec.subnetId"),
    ] {
        only_error(
            &remove(az(), &format!("/spec/{field}")),
            path,
            "required field is missing",
        );
        only_error(
            &set(az(), &format!("/spec/{field}"), json!("")),
            path,
            "must not be empty",
        );
    }
    only_error(
        &set(az(), "/spec/subscriptionId", json!("my-subscription")),
        "spec.subscriptionId",
        "GUID",
    );
    for bad in [
        "subnet-1",
        "/subscriptions/12345678-90ab-cdef-1234-567890abcdef/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet",
        "/subscriptions/12345678-90ab-cdef-1234-567890abcdef/resourceGroups/rg/providers/Microsoft.Compute/virtualNetworks/vnet/subnets/s",
        "/subscriptions/not-a-guid/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/s",
        "/subscriptions/12345678-90ab-cdef-1234-567890abcdef/resourceGroups//providers/Microsoft.Network/virtualNetworks/vnet/subnets/s",
    ] {
        only_error(
            &set(az(), "/spec/subnetId", json!(bad)),
            "spec.subnetId",
            "subnet resource id",
        );
    }
    // ARM ids are case-insensitive in their fixed segments.
    let lower = "/SUBSCRIPTIONS/12345678-90ab-cdef-1234-567890abcdef/resourcegroups/rg/providers/microsoft.network/virtualnetworks/vnet/subnets/s";
    assert!(validate_manifest(&set(az(), "/spec/subnetId", json!(lower))).is_ok());
    only_error(
        &set(az(), "/spec/image/id", json!("/subscriptions/x/images/y")),
        "spec.image",
        "mutually exclusive",
    );
    only_error(
        &set(az(), "/spec/managedIdentities/0", json!("node-identity")),
        "spec.managedIdentities[0]",
        "user-assigned identity",
    );
    only_error(
        &set(az(), "/spec/osDiskSizeGB", json!(0)),
        "spec.osDiskSizeGB",
        "must be positive",
    );
    only_error(
        &set(az(), "/spec/tags/a~1b", json!("x")),
        "spec.tags[a/b]",
        "Azure tag names",
    );
    let group = "/subscriptions/12345678-90ab-cdef-1234-567890abcdef/resourceGroups/ml-nodes/providers/Microsoft.Compute/capacityReservationGroups/h100";
    assert!(
        validate_manifest(&set(az(), "/spec/capacityReservationGroupID", json!(group))).is_ok()
    );
    for bad in [
        "h100",
        // A capacity reservation of the group, not the group.
        "/subscriptions/12345678-90ab-cdef-1234-567890abcdef/resourceGroups/ml-nodes/providers/Microsoft.Compute/capacityReservationGroups/h100/capacityReservations/eastus-1",
        "/subscriptions/12345678-90ab-cdef-1234-567890abcdef/resourceGroups/ml-nodes/providers/Microsoft.Network/capacityReservationGroups/h100",
        "/subscriptions/my-subscription/resourceGroups/ml-nodes/providers/Microsoft.Compute/capacityReservationGroups/h100",
    ] {
        only_error(
            &set(az(), "/spec/capacityReservationGroupID", json!(bad)),
            "spec.capacityReservationGroupID",
            "capacity reservation group resource id",
        );
    }
}

#[test]
fn typed_validators_are_usable_directly() {
    let ValidatedObject::NodePool(mut pool) = validate_manifest(&np()).unwrap() else {
        panic!()
    };
    assert!(validate_nodepool(&pool).is_empty());
    pool.spec.weight = Some(500);
    pool.spec.template.spec.requirements[0].operator = "Maybe".into();
    let errs = validate_nodepool(&pool);
    has_error(&errs, "spec.weight", "got 500");
    has_error(
        &errs,
        &format!("{REQ_PATH}[0].operator"),
        "unknown operator",
    );
}

#[test]
fn preference_policy_and_budget() {
    for policy in ["Respect", "Ignore", "CostBounded"] {
        let doc = set(np(), "/spec/preferencePolicy", json!(policy));
        assert!(validate_manifest(&doc).is_ok(), "{policy}");
    }
    let errs = errors(&set(np(), "/spec/preferencePolicy", json!("Sometimes")));
    has_error(&errs, "spec.preferencePolicy", "Sometimes");
    assert!(validate_manifest(&set(np(), "/spec/preferenceBudget", json!("12.5%"))).is_ok());
    only_error(
        &set(np(), "/spec/preferenceBudget", json!("ten")),
        "spec.preferenceBudget",
        "\"ten\" is not a percentage",
    );
}

#[test]
fn repair_settings() {
    let good = set(
        np(),
        "/spec/repair",
        json!({"defaultTolerationDuration": "30m", "maxUnhealthyNodes": 2, "maxUnhealthyPercentage": 50,
               "policies": [{"conditionType": "AcceleratedHardwareReady", "toleration": "5m"},
                            {"conditionType": "NetworkUnavailable", "conditionStatus": "True", "toleration": "10m"}]}),
    );
    assert!(validate_manifest(&good).is_ok());
    only_error(
        &set(
            np(),
            "/spec/repair",
            json!({"policies": [{"conditionType": "Ready", "conditionStatus": "Maybe", "toleration": "5m"}]}),
        ),
        "spec.repair.policies[0].conditionStatus",
        "must be True, False or Unknown",
    );
    only_error(
        &set(
            np(),
            "/spec/repair",
            json!({"policies": [{"conditionType": "Ready", "toleration": "soon"}]}),
        ),
        "spec.repair.policies[0].toleration",
        "invalid duration",
    );
    only_error(
        &set(np(), "/spec/repair", json!({"maxUnhealthyPercentage": 150})),
        "spec.repair.maxUnhealthyPercentage",
        "between 0 and 100",
    );
}
