//! Property-based tests of label selectors (`matchLabels`, `matchExpressions`, `matchLabelKeys`,
//! `mismatchLabelKeys`): arbitrary selectors never panic, only the set operators are accepted,
//! and an accepted selector matches exactly the pods a reference evaluation matches.
//!
//! 64 cases per property by default (CI); `PROPTEST_CASES=5000 cargo test -p
//! quartermaster-cluster proptests` runs more.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use proptest::prelude::*;

use super::label_selector;

/// 64 cases unless `PROPTEST_CASES` says otherwise (an explicit `cases` hides the variable from
/// proptest itself, so it is read here).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

const KEYS: &[&str] = &["app", "tier", "example.com/team"];
const VALUES: &[&str] = &["a", "b", "c", "", "1", "web"];
const OPERATORS: &[&str] = &[
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "Gt",
    "Lt",
    "Gte",
    "in",
    "Equals",
    "",
];

fn key() -> impl Strategy<Value = String> {
    proptest::sample::select(KEYS).prop_map(str::to_owned)
}

fn value() -> impl Strategy<Value = String> {
    proptest::sample::select(VALUES).prop_map(str::to_owned)
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(key(), value(), 0..4)
}

fn expression() -> impl Strategy<Value = LabelSelectorRequirement> {
    (
        key(),
        proptest::sample::select(OPERATORS),
        proptest::option::of(proptest::collection::vec(value(), 0..3)),
    )
        .prop_map(|(key, op, values)| LabelSelectorRequirement {
            key,
            operator: op.to_owned(),
            values,
        })
}

fn selector() -> impl Strategy<Value = LabelSelector> {
    (
        proptest::option::of(labels()),
        proptest::option::of(proptest::collection::vec(expression(), 0..4)),
    )
        .prop_map(|(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        })
}

/// Whether Kubernetes accepts the expression in a label selector.
fn reference_valid(e: &LabelSelectorRequirement) -> bool {
    let n = e.values.as_ref().map_or(0, Vec::len);
    match e.operator.as_str() {
        "In" | "NotIn" => n > 0,
        "Exists" | "DoesNotExist" => n == 0,
        _ => false,
    }
}

fn reference_matches(e: &LabelSelectorRequirement, pod: &BTreeMap<String, String>) -> bool {
    let values = e.values.as_deref().unwrap_or_default();
    let label = pod.get(&e.key);
    match e.operator.as_str() {
        "In" => label.is_some_and(|v| values.contains(v)),
        "NotIn" => label.is_none_or(|v| !values.contains(v)),
        "Exists" => label.is_some(),
        _ => label.is_none(),
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_selectors_never_panic(
        match_labels in proptest::option::of(
            proptest::collection::btree_map(any::<String>(), any::<String>(), 0..3)),
        expressions in proptest::collection::vec(
            (any::<String>(), any::<String>(), proptest::option::of(proptest::collection::vec(any::<String>(), 0..3))),
            0..3,
        ),
        match_keys in proptest::collection::vec(any::<String>(), 0..3),
        own in proptest::collection::btree_map(any::<String>(), any::<String>(), 0..3),
        pod in proptest::collection::btree_map(any::<String>(), any::<String>(), 0..3),
    ) {
        let selector = LabelSelector {
            match_labels,
            match_expressions: Some(
                expressions
                    .into_iter()
                    .map(|(key, operator, values)| LabelSelectorRequirement { key, operator, values })
                    .collect(),
            ),
        };
        if let Ok(r) = label_selector(&selector, &match_keys, &match_keys, &own) {
            let _ = r.matches(&pod);
            let _ = r.to_string();
        }
    }

    #[test]
    fn selectors_match_what_kubernetes_matches(
        selector in selector(),
        match_keys in proptest::collection::vec(key(), 0..2),
        mismatch_keys in proptest::collection::vec(key(), 0..2),
        own in labels(),
        pod in labels(),
    ) {
        let expressions = selector.match_expressions.as_deref().unwrap_or_default();
        let result = label_selector(&selector, &match_keys, &mismatch_keys, &own);
        let valid = expressions.iter().all(reference_valid);
        prop_assert_eq!(result.is_ok(), valid, "{:?}: {:?}", selector, result);
        let Ok(requirements) = result else { return Ok(()) };
        let want = selector
            .match_labels
            .iter()
            .flatten()
            .all(|(k, v)| pod.get(k) == Some(v))
            && expressions.iter().all(|e| reference_matches(e, &pod))
            && match_keys
                .iter()
                .all(|k| own.get(k).is_none_or(|v| pod.get(k) == Some(v)))
            && mismatch_keys
                .iter()
                .all(|k| own.get(k).is_none_or(|v| pod.get(k) != Some(v)));
        prop_assert_eq!(
            requirements.matches(&pod),
            want,
            "{:?} (matchLabelKeys {:?}, mismatchLabelKeys {:?}, own {:?}) on {:?}: {}",
            selector,
            match_keys,
            mismatch_keys,
            own,
            pod,
            requirements
        );
    }
}
