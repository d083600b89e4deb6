//! Warnings (not errors) about NodePool requirement keys that nothing supplies.

use crate::NodePool;
use crate::labels::{LABEL_NODEPOOL, normalize_label_key};

use super::FieldError;

/// The requirements of `pool` on a label key that no instance type carries (`carried` says
/// which keys the catalog's instance types and offerings carry) and the pool's template labels
/// do not set. Alias keys (`karpenter.sh/capacity-type`, ...) count as their canonical key.
/// Such a requirement is almost always a mistake: `In` / `Exists` leave the pool with no
/// instance type, `NotIn` / `DoesNotExist` always hold. A warning, not an error.
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
                        "no instance type in the catalog carries label {:?} (In/Exists match nothing, NotIn/DoesNotExist always hold)",
                        r.key
                    ),
                )
            })
        })
        .collect()
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
}
