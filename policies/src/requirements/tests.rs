//! Requirement algebra tables.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;

use super::*;
use crate::labels::is_well_known_label;

const K: &str = "example.com/k";

/// `"In a b"` → `K In [a, b]`.
fn req(spec: &str) -> Requirement {
    let mut parts = spec.split_whitespace();
    let op: Operator = parts.next().unwrap().parse().unwrap();
    Requirement::new(K, op, parts).unwrap()
}

fn reqs(pairs: &[(&str, &str)]) -> Requirements {
    let mut out = Requirements::new();
    for (key, spec) in pairs {
        let mut parts = spec.split_whitespace();
        let op: Operator = parts.next().unwrap().parse().unwrap();
        out.add(Requirement::new(*key, op, parts).unwrap());
    }
    out
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Label states to check semantics against: absent, and a spread of values
/// covering every value and bound used in the tables.
fn universe() -> Vec<Option<String>> {
    let mut u: Vec<Option<String>> = vec![None];
    for v in ["a", "b", "c", "x", "", "05", "-3"] {
        u.push(Some(v.to_owned()));
    }
    for n in -1..=15 {
        u.push(Some(n.to_string()));
    }
    u
}

const SPECS: &[&str] = &[
    "In a b",
    "In b c",
    "In c",
    "In 5 7",
    "In 1",
    "In a 7",
    "NotIn a",
    "NotIn a b",
    "NotIn 5",
    "NotIn 7",
    "Exists",
    "DoesNotExist",
    "Gt 5",
    "Gt 10",
    "Lt 5",
    "Lt 8",
    "Lt 6",
    "Gte 5",
    "Lte 5",
    "Gte 7",
    "Lte 4",
];

#[test]
fn operator_parsing() {
    for op in Operator::ALL {
        assert_eq!(op.as_str().parse::<Operator>().unwrap(), op);
        assert_eq!(op.to_string(), op.as_str());
    }
    let err = "in".parse::<Operator>().unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"unknown operator "in": expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte"#
    );
    assert!("Equals".parse::<Operator>().is_err());
    assert!("".parse::<Operator>().is_err());
}

#[test]
fn construction_checks_values() {
    let cases: &[(Operator, &[&str], &str)] = &[
        (Operator::In, &[], "operator In requires at least one value"),
        (
            Operator::NotIn,
            &[],
            "operator NotIn requires at least one value",
        ),
        (Operator::Exists, &["a"], "operator Exists takes no values"),
        (
            Operator::DoesNotExist,
            &["a"],
            "operator DoesNotExist takes no values",
        ),
        (
            Operator::Gt,
            &[],
            "operator Gt requires exactly one value, got 0",
        ),
        (
            Operator::Lt,
            &["1", "2"],
            "operator Lt requires exactly one value, got 2",
        ),
        (
            Operator::Gte,
            &["abc"],
            "operator Gte requires an integer value, got \"abc\"",
        ),
        (
            Operator::Lte,
            &["1.5"],
            "operator Lte requires an integer value, got \"1.5\"",
        ),
    ];
    for (op, values, reason) in cases {
        let err = Requirement::new(K, *op, values.iter().copied()).unwrap_err();
        assert_eq!(
            err,
            PolicyError::InvalidRequirement {
                key: K.into(),
                reason: (*reason).into()
            },
            "{op} {values:?}"
        );
    }
}

#[test]
fn single_requirement_semantics() {
    /// (spec, normalised operator, display, values it has, values it lacks, absent ok)
    type Case<'a> = (
        &'a str,
        Operator,
        &'a str,
        &'a [&'a str],
        &'a [&'a str],
        bool,
    );
    let cases: &[Case] = &[
        (
            "In a b",
            Operator::In,
            "In [a, b]",
            &["a", "b"],
            &["c", ""],
            false,
        ),
        (
            "NotIn a",
            Operator::NotIn,
            "NotIn [a]",
            &["b", "", "5"],
            &["a"],
            true,
        ),
        ("Exists", Operator::Exists, "Exists", &["a", ""], &[], false),
        (
            "DoesNotExist",
            Operator::DoesNotExist,
            "DoesNotExist",
            &[],
            &["a", ""],
            true,
        ),
        (
            "Gt 5",
            Operator::Gt,
            "Gt 5",
            &["6", "100", "+6", "06"],
            &["5", "4", "a", "6.0"],
            false,
        ),
        (
            "Lt 5",
            Operator::Lt,
            "Lt 5",
            &["4", "-10"],
            &["5", "x"],
            false,
        ),
        ("Gte 5", Operator::Gt, "Gt 4", &["5", "6"], &["4"], false),
        ("Lte 5", Operator::Lt, "Lt 6", &["5", "-1"], &["6"], false),
    ];
    for (spec, op, display, yes, no, absent) in cases {
        let r = req(spec);
        assert_eq!(r.operator(), *op, "{spec}");
        assert_eq!(r.to_string(), *display, "{spec}");
        for v in *yes {
            assert!(r.has(v), "{spec} should have {v:?}");
        }
        for v in *no {
            assert!(!r.has(v), "{spec} should not have {v:?}");
        }
        assert_eq!(r.allows_absent(), *absent, "{spec}");
        assert_eq!(r.key(), K);
    }
    assert!(req("DoesNotExist").is_empty());
    assert!(!req("DoesNotExist").is_unsatisfiable());
    assert!(!req("Exists").is_empty());
    assert_eq!(req("In a b").values().unwrap().len(), 2);
    assert!(req("In a").excluded().is_none());
    assert_eq!(req("NotIn a").excluded().unwrap().len(), 1);
    assert!(req("NotIn a").values().is_none());
    assert_eq!(req("Gt 5").greater_than(), Some(5));
    assert_eq!(req("Lte 5").less_than(), Some(6));
}

#[test]
fn intersection_table() {
    // (a, b, a ∩ b displayed, compatible)
    let table: &[(&str, &str, &str, bool)] = &[
        ("In a b", "In b c", "In [b]", true),
        ("In a b", "In c", "In []", false),
        ("In a b", "NotIn a", "In [b]", true),
        ("In a b", "NotIn a b", "In []", false),
        ("In a b", "Exists", "In [a, b]", true),
        ("In a b", "DoesNotExist", "In []", false),
        ("In 5 7", "Gt 5", "In [7]", true),
        ("In 5 7", "Lt 5", "In []", false),
        ("In a 7", "Gt 5", "In [7]", true),
        ("In a b", "Gt 5", "In []", false),
        ("In 5 7", "Gte 5", "In [5, 7]", true),
        ("In 5 7", "Lte 4", "In []", false),
        ("NotIn a", "NotIn a b", "NotIn [a, b]", true),
        ("NotIn a", "Exists", "Exists, NotIn [a]", true),
        ("NotIn a", "DoesNotExist", "DoesNotExist", true),
        ("NotIn 7", "Gt 5", "NotIn [7], Gt 5", true),
        ("NotIn 5", "Lt 8", "NotIn [5], Lt 8", true),
        ("Exists", "Exists", "Exists", true),
        ("Exists", "DoesNotExist", "In []", false),
        ("Exists", "Gt 5", "Gt 5", true),
        ("DoesNotExist", "DoesNotExist", "DoesNotExist", true),
        ("DoesNotExist", "Gt 5", "In []", false),
        ("DoesNotExist", "Lt 5", "In []", false),
        ("Gt 5", "Gt 10", "Gt 10", true),
        ("Gt 5", "Lt 8", "Gt 5, Lt 8", true),
        ("Gt 5", "Lt 6", "In []", false),
        ("Gt 5", "Lt 5", "In []", false),
        ("Gt 10", "Lt 8", "In []", false),
        ("Lt 5", "Lt 8", "Lt 5", true),
        ("Gte 5", "Lte 5", "Gt 4, Lt 6", true),
        ("Gte 7", "Lte 5", "In []", false),
        ("Gte 5", "Lt 5", "In []", false),
    ];
    for (a, b, want, compatible) in table {
        let (ra, rb) = (req(a), req(b));
        for (x, y) in [(&ra, &rb), (&rb, &ra)] {
            let got = x.intersect(y);
            assert_eq!(got.to_string(), *want, "{a} ∩ {b}");
            assert_eq!(x.intersects(y), *compatible, "{a} ~ {b}");
            assert_eq!(
                !got.is_unsatisfiable(),
                *compatible,
                "{a} ∩ {b} satisfiable"
            );
        }
    }
}

#[test]
fn intersection_matches_set_semantics_for_all_pairs() {
    let universe = universe();
    for a in SPECS {
        for b in SPECS {
            let (ra, rb) = (req(a), req(b));
            let both = ra.intersect(&rb);
            let mut any = false;
            for state in &universe {
                let s = state.as_deref();
                let want = ra.matches(s) && rb.matches(s);
                assert_eq!(both.matches(s), want, "({a}) ∩ ({b}) on {s:?}");
                any |= want;
            }
            assert_eq!(ra.intersects(&rb), any, "({a}) ~ ({b})");
            assert_eq!(both.is_unsatisfiable(), !any, "({a}) ∩ ({b}) unsatisfiable");
            assert_eq!(
                rb.intersect(&ra).to_node_selector_requirements(),
                both.to_node_selector_requirements(),
                "commutative: ({a}) ∩ ({b})"
            );
            // Associativity / idempotence on a third operand.
            for c in SPECS.iter().step_by(3) {
                let rc = req(c);
                let left = ra.intersect(&rb).intersect(&rc);
                let right = ra.intersect(&rb.intersect(&rc));
                for state in &universe {
                    assert_eq!(
                        left.matches(state.as_deref()),
                        right.matches(state.as_deref())
                    );
                }
            }
            assert_eq!(ra.intersect(&ra).to_string(), ra.to_string(), "{a} ∩ {a}");
        }
    }
}

#[test]
fn node_selector_round_trip_preserves_semantics() {
    let universe = universe();
    for a in SPECS {
        for b in SPECS {
            let r = req(a).intersect(&req(b));
            let terms = r.to_node_selector_requirements();
            let back = Requirements::from_k8s(&terms);
            let Ok(back) = back else {
                // Only the unsatisfiable "In []" has no valid Kubernetes form.
                assert!(r.is_unsatisfiable(), "({a}) ∩ ({b}) → {terms:?}");
                continue;
            };
            let back = back.get(K).unwrap();
            for s in &universe {
                assert_eq!(
                    back.matches(s.as_deref()),
                    r.matches(s.as_deref()),
                    "({a}) ∩ ({b}) on {s:?}"
                );
            }
        }
    }
}

#[test]
fn min_values_take_the_maximum() {
    let a = req("In a b c").with_min_values(Some(2));
    let b = req("Exists").with_min_values(Some(3));
    assert_eq!(a.intersect(&b).min_values(), Some(3));
    assert_eq!(a.intersect(&req("In a")).min_values(), Some(2));
    assert_eq!(req("Exists").min_values(), None);
    assert_eq!(a.to_string(), "In [a, b, c] (minValues 2)");
}

#[test]
fn requirements_add_and_intersect() {
    let mut r = reqs(&[("zone", "In a b c"), ("arch", "In amd64")]);
    r.add(Requirement::new("zone", Operator::NotIn, ["b"]).unwrap());
    assert_eq!(r.get("zone").unwrap().to_string(), "In [a, c]");
    assert_eq!(r.len(), 2);
    assert!(!r.is_empty());
    assert_eq!(r.keys().collect::<Vec<_>>(), ["arch", "zone"]);
    assert_eq!(r.iter().count(), 2);
    let other = reqs(&[("zone", "In c d"), ("gpu", "Exists")]);
    let both = r.intersect(&other);
    assert_eq!(both.get("zone").unwrap().to_string(), "In [c]");
    assert_eq!(both.len(), 3);
    assert_eq!(both.to_string(), "arch In [amd64]; gpu Exists; zone In [c]");
    assert_eq!(
        both.single_valued_labels(),
        labels(&[("arch", "amd64"), ("zone", "c")])
    );
    let clash = r.intersect(&reqs(&[("arch", "In arm64")]));
    assert_eq!(clash.unsatisfiable_keys().collect::<Vec<_>>(), ["arch"]);
    assert!(Requirements::new().is_empty());
}

#[test]
fn compatible_reports_the_conflicting_key() {
    let zone = crate::labels::LABEL_ZONE;
    let pool = reqs(&[(zone, "In us-east-1a"), ("example.com/team", "In ml")]);
    let pod = reqs(&[(zone, "In us-east-1b")]);
    let err = pool.compatible(&pod).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"key "topology.kubernetes.io/zone": In [us-east-1a] vs In [us-east-1b]"#
    );
    assert_eq!(err.key, zone);
    // Reverse direction names the sides the other way round.
    let err = pod.compatible(&pool).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"key "topology.kubernetes.io/zone": In [us-east-1b] vs In [us-east-1a]"#
    );
    assert!(
        pool.compatible(&reqs(&[(zone, "In us-east-1a us-east-1b")]))
            .is_ok()
    );
    // Keys on one side only never conflict in `compatible`.
    assert!(pool.compatible(&reqs(&[("other", "In x")])).is_ok());
}

#[test]
fn compatibility_with_undefined_keys() {
    let allow = &is_well_known_label;
    let pool = reqs(&[
        (crate::labels::LABEL_CAPACITY_TYPE, "In spot on-demand"),
        ("example.com/team", "NotIn legacy"),
        ("example.com/tier", "Exists"),
        ("example.com/tier", "NotIn batch"),
    ]);
    // (pod requirement, compatible)
    type Row<'a> = ((&'a str, &'a str), Result<(), &'a str>);
    let table: &[Row] = &[
        ((crate::labels::LABEL_CAPACITY_TYPE, "In spot"), Ok(())),
        (
            (crate::labels::LABEL_CAPACITY_TYPE, "In reserved"),
            Err(r#"key "quartermaster.dev/capacity-type": In [on-demand, spot] vs In [reserved]"#),
        ),
        // Undefined well-known labels: the instance type supplies them.
        (("topology.kubernetes.io/zone", "In us-east-1a"), Ok(())),
        ((crate::labels::LABEL_INSTANCE_GPU_COUNT, "Gt 3"), Ok(())),
        // Undefined custom labels: only requirements an absent label satisfies.
        (
            ("example.com/owner", "In alice"),
            Err(r#"key "example.com/owner": undefined (no known values) vs In [alice]"#),
        ),
        (
            ("example.com/owner", "Exists"),
            Err(r#"key "example.com/owner": undefined (no known values) vs Exists"#),
        ),
        (
            ("example.com/owner", "Gt 1"),
            Err(r#"key "example.com/owner": undefined (no known values) vs Gt 1"#),
        ),
        (("example.com/owner", "NotIn alice"), Ok(())),
        (("example.com/owner", "DoesNotExist"), Ok(())),
        // Defined on both sides: NotIn / DoesNotExist meet on absence.
        (("example.com/team", "DoesNotExist"), Ok(())),
        (("example.com/team", "NotIn ml"), Ok(())),
        (("example.com/team", "In ml"), Ok(())),
        (
            ("example.com/team", "In legacy"),
            Err(r#"key "example.com/team": NotIn [legacy] vs In [legacy]"#),
        ),
        // Exists ∩ NotIn needs the label, so absence is not enough.
        (
            ("example.com/tier", "DoesNotExist"),
            Err(r#"key "example.com/tier": Exists, NotIn [batch] vs DoesNotExist"#),
        ),
        (("example.com/tier", "In web"), Ok(())),
    ];
    for ((key, spec), want) in table {
        let pod = reqs(&[(key, spec)]);
        let got = pool
            .compatible_with_undefined(&pod, allow)
            .map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_owned), "{key} {spec}");
    }
    // Everything is allowed when every key may be undefined.
    let pod = reqs(&[("example.com/owner", "In alice")]);
    assert!(pool.compatible_with_undefined(&pod, &|_| true).is_ok());
    // Keys only the pool defines never conflict.
    assert!(
        pool.compatible_with_undefined(&Requirements::new(), allow)
            .is_ok()
    );
}

#[test]
fn matches_node_labels() {
    let r = reqs(&[
        ("zone", "In a b"),
        ("team", "NotIn legacy"),
        ("spot", "DoesNotExist"),
        ("gpus", "Gte 4"),
        ("arch", "Exists"),
    ]);
    let node = |extra: &[(&str, &str)]| {
        let mut l = labels(&[("zone", "a"), ("gpus", "8"), ("arch", "amd64")]);
        l.extend(labels(extra));
        l
    };
    assert!(r.matches(&node(&[])));
    assert!(r.matches(&node(&[("team", "ml")])));
    assert!(!r.matches(&node(&[("team", "legacy")])));
    assert!(!r.matches(&node(&[("spot", "true")])));
    assert!(!r.matches(&node(&[("zone", "c")])));
    assert!(!r.matches(&node(&[("gpus", "2")])));
    assert!(!r.matches(&node(&[("gpus", "many")])));
    assert!(r.matches(&node(&[("gpus", "4")])));
    let mut no_arch = node(&[]);
    no_arch.remove("arch");
    assert!(!r.matches(&no_arch));
    let mut no_gpus = node(&[]);
    no_gpus.remove("gpus");
    assert!(!r.matches(&no_gpus), "Gt/Lt need the label");
    assert!(Requirements::new().matches(&BTreeMap::new()));
}

#[test]
fn constructors_from_other_forms() {
    let terms = vec![
        NodeSelectorRequirement {
            key: "failure-domain.beta.kubernetes.io/zone".into(),
            operator: "In".into(),
            values: Some(vec!["a".into(), "b".into()]),
        },
        NodeSelectorRequirement {
            key: "topology.kubernetes.io/zone".into(),
            operator: "NotIn".into(),
            values: Some(vec!["a".into()]),
        },
        NodeSelectorRequirement {
            key: "gpu".into(),
            operator: "Exists".into(),
            values: None,
        },
    ];
    let r = Requirements::from_k8s(&terms).unwrap();
    assert_eq!(r.len(), 2, "deprecated zone label is normalised");
    assert_eq!(
        r.get("topology.kubernetes.io/zone").unwrap().to_string(),
        "In [b]"
    );
    assert_eq!(
        r.get("failure-domain.beta.kubernetes.io/zone")
            .unwrap()
            .to_string(),
        "In [b]"
    );
    assert!(r.has("gpu"));
    // A node carrying only the deprecated label still matches.
    assert!(r.matches(&labels(&[
        ("failure-domain.beta.kubernetes.io/zone", "b"),
        ("gpu", "1")
    ])));

    let bad = vec![NodeSelectorRequirement {
        key: "k".into(),
        operator: "Like".into(),
        values: None,
    }];
    assert!(matches!(
        Requirements::from_k8s(&bad),
        Err(PolicyError::UnknownOperator { .. })
    ));

    let from_labels = Requirements::from_labels(&labels(&[("a", "1"), ("b", "2")]));
    assert_eq!(from_labels.to_string(), "a In [1]; b In [2]");

    let with_min = vec![
        NodeSelectorRequirementWithMinValues {
            min_values: Some(2),
            ..NodeSelectorRequirementWithMinValues::new("family", "In", ["p5", "p4d", "g6"])
        },
        NodeSelectorRequirementWithMinValues::new("cpu", "Gte", ["8"]),
    ];
    let r = Requirements::from_node_selector_requirements(&with_min).unwrap();
    assert_eq!(r.get("family").unwrap().min_values(), Some(2));
    assert_eq!(r.get("cpu").unwrap().to_string(), "Gt 7");
    let zero = vec![NodeSelectorRequirementWithMinValues {
        min_values: Some(0),
        ..NodeSelectorRequirementWithMinValues::new("family", "Exists", Vec::<String>::new())
    }];
    assert!(Requirements::from_node_selector_requirements(&zero).is_err());

    let collected: Requirements = [req("In a b"), req("NotIn a")].into_iter().collect();
    assert_eq!(collected.get(K).unwrap().to_string(), "In [b]");
    let mut extended = Requirements::new();
    extended.extend([req("Exists")]);
    assert_eq!((&extended).into_iter().count(), 1);
    assert_eq!(
        extended.to_node_selector_requirements(),
        vec![NodeSelectorRequirement {
            key: K.into(),
            operator: "Exists".into(),
            values: None
        }]
    );
}

#[test]
fn numeric_edge_cases() {
    let r = Requirement::new(K, Operator::Gte, [i64::MIN.to_string()]).unwrap();
    assert!(r.has(&i64::MIN.to_string()));
    assert!(!r.has("not-a-number"));
    let r = Requirement::new(K, Operator::Lte, [i64::MAX.to_string()]).unwrap();
    assert!(r.has(&i64::MAX.to_string()));
    // Bounds beyond i64 are clamped in the Kubernetes form.
    assert_eq!(
        r.to_node_selector_requirements()[0].values,
        Some(vec![i64::MAX.to_string()])
    );
    assert!(Requirement::new(K, Operator::Gt, ["99999999999999999999"]).is_err());
}
