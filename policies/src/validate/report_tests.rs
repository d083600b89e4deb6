//! [`check_manifest`] reports every problem of an object in one run: unknown fields (with
//! "did you mean"), wrong types and unsupported values do not hide the semantic checks.

use serde_json::Value;

use super::*;

fn yaml(text: &str) -> Value {
    serde_norway::from_str(text).unwrap()
}

fn shown(report: &ManifestReport) -> Vec<String> {
    report.errors.iter().map(ToString::to_string).collect()
}

const MISSPELT_POOL: &str = r#"
apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  weigth: 10
  limits: {cpu: "-1"}
  template:
    spec:
      nodeClasRef: {group: quartermaster.dev, kind: AWSNodeClass, name: default}
      requirments: []
      requirements:
        - {key: karpenter.sh/capacity-type, operator: in, values: [spot]}
        - {key: "bad key!", operator: In, values: [x]}
        - {key: kubernetes.io/arch, operator: Exists, values: [amd64]}
      expireAfter: 720hh
      taints: [{key: nvidia.com/gpu, effect: NoSchedul}]
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilised
    consolidateAfter: 5x
"#;

#[test]
fn unknown_fields_do_not_hide_the_other_problems() {
    let report = check_manifest(&yaml(MISSPELT_POOL));
    assert_eq!(
        shown(&report),
        [
            "spec.template.spec.nodeClasRef: unknown field; did you mean \"nodeClassRef\"?",
            "spec.template.spec.requirments: unknown field; did you mean \"requirements\"?",
            "spec.template.spec.nodeClassRef: required field is missing",
            "spec.weigth: unknown field; did you mean \"weight\"?",
            "spec.disruption.consolidationPolicy: unknown variant `WhenEmptyOrUnderutilised`, expected one of `WhenEmpty`, `WhenEmptyOrUnderutilized`, `Balanced`; did you mean \"WhenEmptyOrUnderutilized\"?",
            "spec.limits[cpu]: \"-1\" must not be negative",
            "spec.template.spec.requirements[0].operator: unknown operator \"in\": expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte; did you mean \"In\"?",
            "spec.template.spec.requirements[1].key: label key name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            "spec.template.spec.requirements[2].values: operator Exists takes no values",
            "spec.template.spec.taints[0].effect: unsupported effect \"NoSchedul\": expected one of NoSchedule, PreferNoSchedule, NoExecute; did you mean \"NoSchedule\"?",
            "spec.template.spec.expireAfter: invalid duration \"720hh\": expected a duration such as \"30s\", \"15m\", \"720h\" or \"1h30m\", or \"Never\"",
            "spec.disruption.consolidateAfter: invalid duration \"5x\": expected a duration such as \"30s\", \"15m\", \"720h\" or \"1h30m\", or \"Never\"",
        ]
    );
    // The object could still be read, as far as it goes, for warnings.
    assert!(matches!(report.object, Some(ValidatedObject::NodePool(_))));
    assert!(report.is_repaired("spec.template.spec.nodeClassRef.name"));
    assert!(!report.is_repaired("spec.template.spec.requirements[1]"));
    // validate_manifest returns the same problems.
    assert_eq!(
        validate_manifest(&yaml(MISSPELT_POOL)).unwrap_err(),
        report.errors
    );
}

#[test]
fn a_broken_required_value_is_stood_in_for_and_not_reported_twice() {
    // A wrong type on a required object: one error, and no "must not be empty" for the
    // placeholder's fields.
    let report = check_manifest(&yaml(
        r#"
apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: default
      expireAfter: soon
"#,
    ));
    assert_eq!(
        shown(&report),
        [
            "spec.template.spec.nodeClassRef: expected object, got string",
            "spec.template.spec.expireAfter: invalid duration \"soon\": expected a duration such as \"30s\", \"15m\", \"720h\" or \"1h30m\", or \"Never\"",
        ]
    );
    // Metadata of the wrong type and a misspelt top-level field.
    let report = check_manifest(&yaml(
        r#"
apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metdata: {name: a}
metadata: [a]
spec: {amiFamily: AL2023, role: r, subnetSelectorTerms: [{id: subnet-1}], securityGroupSelectorTerms: [{id: sg-1}], region: us-east-1}
"#,
    ));
    assert_eq!(
        shown(&report),
        [
            "metdata: unknown field; did you mean \"metadata\"?",
            "metadata: expected object, got array",
        ]
    );
}

#[test]
fn a_misspelt_kind_is_named() {
    let report = check_manifest(&yaml(
        "apiVersion: quartermaster.dev/v1\nkind: NodePol\nmetadata: {name: a}\nspec: {}\n",
    ));
    assert_eq!(
        shown(&report),
        [
            "kind: unsupported kind \"NodePol\": expected one of NodePool, NodeClaim, AWSNodeClass, GCPNodeClass, AzureNodeClass; did you mean \"NodePool\"?"
        ]
    );
}

#[test]
fn warnings_skip_repaired_values_and_suggest_values() {
    let report = check_manifest(&yaml(
        r#"
apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spott]}
        - {key: karpenter.sh/capacity_type, operator: In, values: [spot]}
"#,
    ));
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let carried = |k: &str| k == crate::labels::LABEL_CAPACITY_TYPE;
    let warnings: Vec<String> = report
        .warnings(&carried)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        warnings,
        [
            "spec.template.spec.requirements[1].key: no instance type in the catalog carries label \"karpenter.sh/capacity_type\" (In/Exists match nothing, NotIn/DoesNotExist always hold); did you mean \"karpenter.sh/capacity-type\"?",
            "spec.template.spec.requirements[0].values[0]: \"spott\" is not a value label \"karpenter.sh/capacity-type\" takes (spot, on-demand, reserved, flex-start); did you mean \"spot\"?",
        ]
    );
}

#[test]
fn misspelt_metadata_fields_are_named() {
    let report = check_manifest(&yaml(
        r#"
apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: p, lables: {team: ml}}
spec:
  template:
    metadata: {lables: {team: ml}}
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64], minValue: 1}
"#,
    ));
    assert_eq!(
        shown(&report),
        [
            "metadata.lables: unknown field; did you mean \"labels\"?",
            "spec.template.metadata.lables: unknown field; did you mean \"labels\"?",
            "spec.template.spec.requirements[0].minValue: unknown field; did you mean \"minValues\"?",
        ]
    );
}

#[test]
fn a_field_written_at_the_wrong_level_names_its_place() {
    // Karpenter v1beta1 kept expireAfter under spec.disruption; v1 moved it to the template.
    let report = check_manifest(&yaml(
        r#"
apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: p}
spec:
  disruption: {consolidationPolicy: WhenEmpty, expireAfter: 720h}
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: default}
"#,
    ));
    assert_eq!(
        shown(&report),
        [
            "spec.disruption.expireAfter: unknown field; did you mean spec.template.spec.expireAfter?"
        ]
    );
}

#[test]
fn kinds_effects_api_versions_and_ami_families_get_a_suggestion() {
    let report = check_manifest(&yaml(
        r#"
apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: EC2NodeClass, name: default}
      taints: [{key: a, effect: NoExecut}]
"#,
    ));
    assert_eq!(
        shown(&report),
        [
            "spec.template.spec.taints[0].effect: unsupported effect \"NoExecut\": expected one of NoSchedule, PreferNoSchedule, NoExecute; did you mean \"NoExecute\"?",
            "spec.template.spec.nodeClassRef.kind: unsupported kind \"EC2NodeClass\" for group quartermaster.dev: expected one of AWSNodeClass, GCPNodeClass, AzureNodeClass; did you mean \"AWSNodeClass\"?",
        ]
    );
    let report = check_manifest(&yaml(
        "apiVersion: quartermaster.dve/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {}\n",
    ));
    assert_eq!(
        shown(&report),
        [
            "apiVersion: unsupported apiVersion \"quartermaster.dve/v1\": expected \"quartermaster.dev/v1\"; did you mean \"quartermaster.dev/v1\"?"
        ]
    );
    let report = check_manifest(&yaml(
        r#"
apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata: {name: a}
spec:
  role: r
  amiSelectorTerms: [{alias: al2032@latest}]
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
"#,
    ));
    assert!(
        shown(&report)
            .iter()
            .any(|e| e.ends_with("; did you mean \"al2023\"?")),
        "{:?}",
        report.errors
    );
}

#[test]
fn another_apis_object_is_one_line() {
    let report = check_manifest(&yaml(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n",
    ));
    assert_eq!(
        shown(&report),
        [
            "kind: apps/v1 Deployment is not a Quartermaster object: validate checks NodePool, NodeClaim, AWSNodeClass, GCPNodeClass, AzureNodeClass (plan reads workloads)"
        ]
    );
}
