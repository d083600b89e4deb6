//! Warnings (not errors) about NodePool requirements that can never mean what they say: keys
//! that nothing supplies, values a label never takes.

use crate::NodePool;
use crate::labels::{
    AliasValues, LABEL_ARCH, LABEL_CAPACITY_TYPE, LABEL_CLOUD, LABEL_NODEPOOL, LABEL_OS,
    label_alias, normalize_label_key,
};
use crate::requirements::Operator;

use super::FieldError;
use super::suggest::{did_you_mean, known_label_keys};

/// Labels that take a closed set of values, and those values.
const CLOSED_LABELS: &[(&str, &[&str])] = &[
    (
        LABEL_CAPACITY_TYPE,
        &["spot", "on-demand", "reserved", "flex-start"],
    ),
    (LABEL_ARCH, &["amd64", "arm64"]),
    (LABEL_OS, &["linux", "windows"]),
    (LABEL_CLOUD, &["aws", "gcp", "azure"]),
];

/// The requirements of `pool` on a label key that no instance type carries (`carried` says
/// which keys the catalog's instance types and offerings carry) and the pool's template labels
/// do not set. Alias keys (`karpenter.sh/capacity-type`, ...) count as their canonical key.
/// Such a requirement is almost always a mistake: `In` / `Exists` leave the pool with no
/// instance type, `NotIn` / `DoesNotExist` always hold. A warning, not an error; it names the
/// known key the key was probably meant to be (`karpenter.sh/capacity_type`).
pub fn unknown_requirement_keys(
    pool: &NodePool,
    carried: &dyn Fn(&str) -> bool,
) -> Vec<FieldError> {
    let template = &pool.spec.template;
    let set_by_template = |key: &str| {
        template
            .metadata
            .labels
            .keys()
            .any(|k| k == key || normalize_label_key(k) == key)
    };
    template
        .spec
        .requirements
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let key = normalize_label_key(&r.key);
            let known = carried(key) || key == LABEL_NODEPOOL || set_by_template(key);
            (!known).then(|| {
                FieldError::new(
                    format!("spec.template.spec.requirements[{i}].key"),
                    format!(
                        "no instance type in the catalog carries label {:?} (In/Exists match nothing, NotIn/DoesNotExist always hold){}",
                        r.key,
                        did_you_mean(&r.key, known_label_keys())
                    ),
                )
            })
        })
        .collect()
}

/// The `In` / `NotIn` values of `pool`'s requirements on a label with a closed set of values
/// (capacity type, architecture, OS, cloud; alias keys such as `karpenter.sh/capacity-type`
/// included) that are not one of them: `In` then matches nothing on that value and `NotIn`
/// excludes nothing. Each names the value it was probably meant to be (`spott` → `spot`).
pub fn unlikely_requirement_values(pool: &NodePool) -> Vec<FieldError> {
    let mut warnings = Vec::new();
    for (i, r) in pool.spec.template.spec.requirements.iter().enumerate() {
        if !matches!(r.operator.parse(), Ok(Operator::In | Operator::NotIn)) {
            continue;
        }
        let canonical = match label_alias(&r.key) {
            Some(alias) if alias.values == AliasValues::Same => alias.canonical,
            Some(_) => continue,
            None => normalize_label_key(&r.key),
        };
        let Some((_, allowed)) = CLOSED_LABELS.iter().find(|(k, _)| *k == canonical) else {
            continue;
        };
        for (j, v) in r.values.iter().enumerate() {
            if allowed.contains(&v.as_str()) {
                continue;
            }
            warnings.push(FieldError::new(
                format!("spec.template.spec.requirements[{i}].values[{j}]"),
                format!(
                    "{v:?} is not a value label {:?} takes ({}){}",
                    r.key,
                    allowed.join(", "),
                    did_you_mean(v, allowed.iter().copied())
                ),
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(requirements: &str, labels: &str) -> NodePool {
        serde_norway::from_str(&format!(
            "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {{name: p}}
spec:
  template:
    metadata: {{labels: {labels}}}
    spec:
      nodeClassRef: {{group: quartermaster.dev, kind: AWSNodeClass, name: default}}
      requirements: {requirements}
"
        ))
        .unwrap()
    }

    #[test]
    fn keys_nothing_carries_are_named_aliases_and_template_labels_are_not() {
        let carried = |k: &str| {
            k.starts_with("quartermaster.dev/instance-") || k == crate::labels::LABEL_CAPACITY_TYPE
        };
        let p = pool(
            "[{key: karpenter.sh/capacity-type, operator: NotIn, values: [spot]},
              {key: karpenter.k8s.aws/instance-cpu-manufacturer, operator: In, values: [intel]},
              {key: karpenter.k8s.aws/instance-family, operator: In, values: [g5]},
              {key: team, operator: In, values: [ml]},
              {key: example.com/other, operator: NotIn, values: [x]}]",
            "{team: ml}",
        );
        let w = unknown_requirement_keys(&p, &carried);
        let paths: Vec<&str> = w.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.template.spec.requirements[1].key",
                "spec.template.spec.requirements[4].key"
            ]
        );
        assert!(
            w[0].reason
                .contains("karpenter.k8s.aws/instance-cpu-manufacturer")
        );
    }

    #[test]
    fn a_misspelt_key_names_the_known_key() {
        let p = pool(
            "[{key: karpenter.sh/capacity_type, operator: In, values: [spot]},
              {key: node.kubernetes.io/instance_type, operator: Exists}]",
            "{}",
        );
        let w = unknown_requirement_keys(&p, &|_| false);
        assert!(
            w[0].reason
                .ends_with("; did you mean \"karpenter.sh/capacity-type\"?"),
            "{}",
            w[0]
        );
        assert!(
            w[1].reason
                .ends_with("; did you mean \"node.kubernetes.io/instance-type\"?"),
            "{}",
            w[1]
        );
    }

    #[test]
    fn values_a_closed_label_never_takes_are_named() {
        let p = pool(
            "[{key: karpenter.sh/capacity-type, operator: In, values: [spott, on-demand]},
              {key: kubernetes.io/arch, operator: NotIn, values: [amd46]},
              {key: quartermaster.dev/capacity-type, operator: In, values: [reserved, flex-start]},
              {key: kubernetes.io/os, operator: Exists},
              {key: team, operator: In, values: [x]}]",
            "{}",
        );
        let w = unlikely_requirement_values(&p);
        let shown: Vec<String> = w.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "spec.template.spec.requirements[0].values[0]: \"spott\" is not a value label \"karpenter.sh/capacity-type\" takes (spot, on-demand, reserved, flex-start); did you mean \"spot\"?",
                "spec.template.spec.requirements[1].values[0]: \"amd46\" is not a value label \"kubernetes.io/arch\" takes (amd64, arm64); did you mean \"amd64\"?",
            ]
        );
    }
}
