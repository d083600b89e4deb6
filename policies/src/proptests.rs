//! Property-based tests of the parsers and the requirements algebra: arbitrary input never
//! panics, and generated valid input gives what a simple reference computation gives.
//!
//! 64 cases per property by default (CI); `PROPTEST_CASES=5000 cargo test -p
//! quartermaster-policies proptests` runs more.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use proptest::prelude::*;

use crate::duration::{
    format_duration, parse_duration, parse_duration_with_days, parse_nillable_duration,
};
use crate::quantity::{Millis, parse_quantity};
use crate::requirements::{Operator, Requirement, Requirements};

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

// ---------------------------------------------------------------------------------------------
// Quantities
// ---------------------------------------------------------------------------------------------

/// Strings that look like quantities, so the fuzzing reaches past the first character.
fn quantity_like() -> impl Strategy<Value = String> {
    "[+-]?[0-9]{0,45}(\\.[0-9]{0,45})?([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,5}|Gib|K|mm| )?"
}

/// Suffixes with their power of ten and power of two.
const SUFFIXES: &[(&str, i64, u32)] = &[
    ("", 0, 0),
    ("n", -9, 0),
    ("u", -6, 0),
    ("m", -3, 0),
    ("k", 3, 0),
    ("M", 6, 0),
    ("G", 9, 0),
    ("T", 12, 0),
    ("P", 15, 0),
    ("E", 18, 0),
    ("Ki", 0, 10),
    ("Mi", 0, 20),
    ("Gi", 0, 30),
    ("Ti", 0, 40),
    ("Pi", 0, 50),
    ("Ei", 0, 60),
];

/// One generated quantity: `[-]int[.frac]suffix`, or `[-]int[.frac]e<exp>`.
#[derive(Debug, Clone)]
struct GenQuantity {
    negative: bool,
    int: String,
    frac: String,
    suffix: String,
    pow10: i64,
    pow2: u32,
}

impl GenQuantity {
    fn text(&self) -> String {
        let sign = if self.negative { "-" } else { "" };
        if self.frac.is_empty() {
            format!("{sign}{}{}", self.int, self.suffix)
        } else {
            format!("{sign}{}.{}{}", self.int, self.frac, self.suffix)
        }
    }

    /// The exact value in milli-units, rounded up (away from zero) to a whole milli-unit;
    /// `None` when it does not fit an `i128`.
    ///
    /// value = (int + frac / 10^f) × 10^pow10 × 2^pow2 × 1000, computed as the integer part
    /// plus the rounded-up fractional part so no intermediate is larger than the result.
    fn expected_millis(&self) -> Option<i128> {
        let digits = format!("{}{}", self.int, self.frac);
        let mantissa: u128 = digits.trim_start_matches('0').parse().unwrap_or(0);
        let exp = self.pow10 + 3 - self.frac.len() as i64;
        let magnitude: u128 = if exp >= 0 {
            if mantissa == 0 {
                0
            } else {
                let scale = 10u128.checked_pow(u32::try_from(exp).ok()?)?;
                mantissa
                    .checked_mul(scale)?
                    .checked_mul(1u128 << self.pow2)?
            }
        } else {
            // mantissa × 2^pow2 / 10^-exp, rounded up, by long division in base 2.
            let Some(scale) = 10u128.checked_pow(u32::try_from(-exp).ok()?) else {
                // 10^-exp is beyond u128: any non-zero mantissa here is far below one milli-unit.
                return Some(i128::from(mantissa != 0) * if self.negative { -1 } else { 1 });
            };
            let mut q = mantissa / scale;
            let mut r = mantissa % scale;
            for _ in 0..self.pow2 {
                q = q.checked_mul(2)?;
                r *= 2;
                if r >= scale {
                    r -= scale;
                    q += 1;
                }
            }
            q.checked_add(u128::from(r != 0))?
        };
        let magnitude = i128::try_from(magnitude).ok()?;
        Some(if self.negative { -magnitude } else { magnitude })
    }
}

fn gen_quantity() -> impl Strategy<Value = GenQuantity> {
    let suffix = prop_oneof![
        4 => proptest::sample::select(SUFFIXES).prop_map(|(s, p10, p2)| (s.to_owned(), p10, p2)),
        1 => (-40i64..=40, any::<bool>()).prop_map(|(e, upper)| {
            (format!("{}{e}", if upper { 'E' } else { 'e' }), e, 0)
        }),
    ];
    (
        any::<bool>(),
        "[0-9]{1,24}",
        "[0-9]{0,14}",
        suffix,
        any::<bool>(),
    )
        .prop_map(
            |(negative, int, frac, (suffix, pow10, pow2), leading_dot)| {
                // `.5` is a quantity too: drop the integer part now and then.
                let int = if leading_dot && !frac.is_empty() {
                    String::new()
                } else {
                    int
                };
                GenQuantity {
                    negative,
                    int,
                    frac,
                    suffix,
                    pow10,
                    pow2,
                }
            },
        )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn quantity_parsing_never_panics(s in any::<String>()) {
        let _ = parse_quantity(&s);
    }

    #[test]
    fn quantity_like_strings_never_panic_and_round_trip(s in quantity_like()) {
        if let Ok(v) = parse_quantity(&s) {
            // Display is canonical and parses back to the same value.
            prop_assert_eq!(parse_quantity(&v.to_string()), Ok(v), "{:?} shown as {}", s, v);
        }
    }

    #[test]
    fn generated_quantities_parse_to_the_exact_value(q in gen_quantity()) {
        let text = q.text();
        match (parse_quantity(&text), q.expected_millis()) {
            (Ok(got), Some(want)) => prop_assert_eq!(got.millis(), want, "{}", text),
            (Err(_), None) => {}
            (got, want) => prop_assert!(false, "{text}: parsed {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn integers_with_binary_and_decimal_suffixes(n in any::<i64>(), i in 0..SUFFIXES.len()) {
        let (suffix, pow10, pow2) = SUFFIXES[i];
        let text = format!("{n}{suffix}");
        let exp = pow10 + 3;
        let want = if exp >= 0 {
            i128::from(n)
                .checked_mul(10i128.pow(exp as u32))
                .and_then(|v| v.checked_mul(1i128 << pow2))
        } else {
            // Round away from zero.
            let scale = 10i128.pow((-exp) as u32);
            let m = i128::from(n).unsigned_abs() as i128;
            let r = m / scale + i128::from(m % scale != 0);
            Some(if n < 0 { -r } else { r })
        };
        prop_assert_eq!(parse_quantity(&text).ok().map(Millis::millis), want, "{}", text);
    }

    #[test]
    fn millis_display_round_trips(v in (i128::MIN + 1)..=i128::MAX) {
        let m = Millis::from_millis(v);
        prop_assert_eq!(parse_quantity(&m.to_string()), Ok(m));
    }

    #[test]
    fn huge_quantities_are_errors(
        digits in "[1-9][0-9]{39,60}",
        suffix in proptest::sample::select(SUFFIXES).prop_filter("unit or larger", |s| s.1 >= 0),
        exp in 0i64..=1000,
    ) {
        // At least 10^39 base units, i.e. 10^42 milli-units: past i128 (1.7 × 10^38).
        let text = format!("{digits}{}", suffix.0);
        prop_assert!(parse_quantity(&text).is_err(), "{} parsed", text);
        let scaled = format!("{digits}e{exp}");
        prop_assert!(parse_quantity(&scaled).is_err(), "{} parsed", scaled);
        let power = format!("1e{}", exp + 39);
        prop_assert!(parse_quantity(&power).is_err(), "{} parsed", power);
    }
}

// ---------------------------------------------------------------------------------------------
// Durations
// ---------------------------------------------------------------------------------------------

const NANOS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];
const DAY_NANOS: &[(&str, u128)] = &[("d", 86_400_000_000_000), ("w", 604_800_000_000_000)];

fn duration_like() -> impl Strategy<Value = String> {
    "[+-]?([0-9]{0,25}(\\.[0-9]{0,35})?(ns|us|µs|ms|s|m|h|d|w|x|)){1,4}|Never|never|0"
}

/// Go's rule: each term's fraction is truncated to whole nanoseconds.
fn term_nanos(int: u64, frac: &str, unit: u128) -> u128 {
    let scale = 10u128.pow(frac.len() as u32);
    let f: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().unwrap()
    };
    u128::from(int) * unit + f * unit / scale
}

fn gen_terms(with_days: bool) -> impl Strategy<Value = Vec<(u64, String, usize)>> {
    // Four terms stay below Go's limit of i64::MAX nanoseconds (about 15 250 weeks).
    let (units, max) = if with_days {
        (NANOS.len() + DAY_NANOS.len(), 3_000)
    } else {
        (NANOS.len(), 100_000)
    };
    proptest::collection::vec((0u64..max, "[0-9]{0,9}", 0..units), 1..5)
}

fn unit_of(i: usize) -> (&'static str, u128) {
    NANOS
        .get(i)
        .copied()
        .unwrap_or_else(|| DAY_NANOS[i - NANOS.len()])
}

fn render_terms(terms: &[(u64, String, usize)]) -> (String, u128) {
    let mut text = String::new();
    let mut total = 0u128;
    for (int, frac, u) in terms {
        let (unit, nanos) = unit_of(*u);
        if frac.is_empty() {
            text.push_str(&format!("{int}{unit}"));
        } else {
            text.push_str(&format!("{int}.{frac}{unit}"));
        }
        total += term_nanos(*int, frac, nanos);
    }
    (text, total)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn duration_parsing_never_panics(s in any::<String>()) {
        let _ = parse_duration(&s);
        let _ = parse_duration_with_days(&s);
        let _ = parse_nillable_duration(&s);
    }

    #[test]
    fn duration_like_strings_never_panic(s in duration_like()) {
        let go = parse_duration(&s);
        let days = parse_duration_with_days(&s);
        // Go's grammar is a subset of the one with days, with the same values.
        if let Ok(d) = go {
            prop_assert_eq!(days.clone(), Ok(d), "{}", s);
        }
        for d in [go, days].into_iter().flatten() {
            prop_assert!(d.as_nanos() <= i64::MAX as u128, "{s} is past Go's limit");
        }
        match parse_nillable_duration(&s) {
            Ok(None) => prop_assert_eq!(s.as_str(), "Never"),
            Ok(Some(d)) => prop_assert_eq!(parse_duration(&s), Ok(d)),
            Err(_) => prop_assert!(parse_duration(&s).is_err()),
        }
    }

    #[test]
    fn generated_go_durations_parse_to_the_right_value(terms in gen_terms(false), sign in "\\+?") {
        let (text, nanos) = render_terms(&terms);
        let text = format!("{sign}{text}");
        let want = Duration::from_nanos(u64::try_from(nanos).unwrap());
        prop_assert_eq!(parse_duration(&text), Ok(want), "{}", text);
        prop_assert_eq!(parse_nillable_duration(&text), Ok(Some(want)), "{}", text);
        prop_assert_eq!(parse_duration_with_days(&text), Ok(want), "{}", text);
        // A negative duration is rejected unless it is zero.
        let negative = parse_duration(&format!("-{}", text.trim_start_matches('+')));
        if nanos == 0 {
            prop_assert_eq!(negative, Ok(Duration::ZERO));
        } else {
            prop_assert!(negative.is_err(), "-{} parsed", text);
        }
    }

    #[test]
    fn generated_durations_with_days_parse_to_the_right_value(terms in gen_terms(true)) {
        let (text, nanos) = render_terms(&terms);
        let want = Duration::from_nanos(u64::try_from(nanos).unwrap());
        prop_assert_eq!(parse_duration_with_days(&text), Ok(want), "{}", text);
        let uses_days = terms.iter().any(|(_, _, u)| *u >= NANOS.len());
        prop_assert_eq!(parse_duration(&text).is_ok(), !uses_days, "{}", text);
    }

    #[test]
    fn whole_seconds_minutes_hours(h in 0u64..2_000_000, m in 0u64..10_000, s in 0u64..100_000) {
        let text = format!("{h}h{m}m{s}s");
        prop_assert_eq!(parse_duration(&text), Ok(Duration::from_secs(h * 3600 + m * 60 + s)));
    }

    #[test]
    fn formatted_durations_parse_back(nanos in 0..=i64::MAX as u64) {
        let d = Duration::from_nanos(nanos);
        prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d), "{}", format_duration(d));
    }

    #[test]
    fn past_go_limit_is_an_error(extra in 1u64..1_000_000_000) {
        // i64::MAX nanoseconds is 2562047h47m16.854775807s.
        let limit = i64::MAX as u64;
        let text = format!("{}ns", u128::from(limit) + u128::from(extra));
        prop_assert!(parse_duration(&text).is_err());
        prop_assert_eq!(
            parse_duration(&format!("{limit}ns")),
            Ok(Duration::from_nanos(limit))
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Requirements and label selectors
// ---------------------------------------------------------------------------------------------

/// Label keys the reference understands: plain keys, a deprecated key and its current form,
/// and an alias with the same values (`karpenter.sh/capacity-type`) and its canonical key.
const KEYS: &[&str] = &[
    "team",
    "example.com/tier",
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "quartermaster.dev/capacity-type",
    "karpenter.sh/capacity-type",
];

/// The key a requirement on `key` is held under.
fn canonical(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" => "topology.kubernetes.io/zone",
        "karpenter.sh/capacity-type" => "quartermaster.dev/capacity-type",
        k => k,
    }
}

/// The other keys a node may carry the canonical key's value under.
fn fallbacks(canonical: &str) -> &'static [&'static str] {
    match canonical {
        "topology.kubernetes.io/zone" => &["failure-domain.beta.kubernetes.io/zone"],
        "quartermaster.dev/capacity-type" => &["karpenter.sh/capacity-type"],
        _ => &[],
    }
}

/// Label values: strings, and integers in the spellings Go's `ParseInt` and Rust's `i64`
/// parser agree on or both reject.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(vec![
            "a",
            "b",
            "c",
            "spot",
            "on-demand",
            "us-east-1a",
            "",
            "0",
            "1",
            "-1",
            "05",
            "+4",
            "7",
            "10",
            " 7",
            "1.5",
            "0x10",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "99999999999999999999",
        ])
        .prop_map(str::to_owned),
        (-20i64..20).prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
    ]
}

fn operator() -> impl Strategy<Value = Operator> {
    proptest::sample::select(Operator::ALL.to_vec())
}

/// One requirement as written: key, operator and values (possibly wrong for the operator).
fn written() -> impl Strategy<Value = (String, Operator, Vec<String>)> {
    (
        proptest::sample::select(KEYS).prop_map(str::to_owned),
        operator(),
        prop_oneof![
            1 => Just(Vec::new()),
            4 => proptest::collection::vec(value(), 1..2),
            2 => proptest::collection::vec(value(), 2..4),
        ],
    )
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(
        proptest::sample::select(KEYS).prop_map(str::to_owned),
        value(),
        0..5,
    )
}

/// Whether `values` suit `op` (what [`Requirement::new`] accepts).
fn reference_valid(op: Operator, values: &[String]) -> bool {
    match op {
        Operator::In | Operator::NotIn => !values.is_empty(),
        Operator::Exists | Operator::DoesNotExist => values.is_empty(),
        _ => values.len() == 1 && values[0].parse::<i64>().is_ok(),
    }
}

/// The textbook meaning of one operator on a label that is absent (`None`) or has a value.
fn reference_matches(op: Operator, values: &[String], label: Option<&str>) -> bool {
    let int = |s: &str| s.parse::<i64>().ok();
    let bound = || int(&values[0]).expect("validated");
    match (op, label) {
        (Operator::In, Some(v)) => values.iter().any(|x| x == v),
        (Operator::In, None) => false,
        (Operator::NotIn, Some(v)) => !values.iter().any(|x| x == v),
        (Operator::NotIn, None) => true,
        (Operator::Exists, l) => l.is_some(),
        (Operator::DoesNotExist, l) => l.is_none(),
        (_, None) => false,
        (Operator::Gt, Some(v)) => int(v).is_some_and(|n| n > bound()),
        (Operator::Lt, Some(v)) => int(v).is_some_and(|n| n < bound()),
        (Operator::Gte, Some(v)) => int(v).is_some_and(|n| n >= bound()),
        (Operator::Lte, Some(v)) => int(v).is_some_and(|n| n <= bound()),
    }
}

/// The label value a requirement on `key` sees on a node with `labels`.
fn reference_label<'a>(key: &str, labels: &'a BTreeMap<String, String>) -> Option<&'a str> {
    let c = canonical(key);
    labels
        .get(c)
        .or_else(|| fallbacks(c).iter().find_map(|k| labels.get(*k)))
        .map(String::as_str)
}

fn k8s(key: &str, op: &str, values: Option<Vec<String>>) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_owned(),
        operator: op.to_owned(),
        values,
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_requirements_never_panic(
        key in prop_oneof![any::<String>(), proptest::sample::select(vec![
            "cloud.google.com/gke-spot", "nvidia.com/gpu.present", "kubernetes.azure.com/scalesetpriority",
            "karpenter.k8s.aws/instance-memory", "beta.kubernetes.io/arch", "team",
        ]).prop_map(str::to_owned)],
        op in prop_oneof![any::<String>(), operator().prop_map(|o| o.to_string())],
        values in proptest::option::of(proptest::collection::vec(any::<String>(), 0..4)),
        node in proptest::collection::btree_map(any::<String>(), any::<String>(), 0..4),
    ) {
        let reqs = Requirements::from_k8s(&[k8s(&key, &op, values.clone())]);
        if let Ok(reqs) = &reqs {
            let _ = reqs.matches(&node);
            let _ = reqs.to_string();
            let _ = reqs.to_node_selector_requirements();
            let _ = reqs.compatible(reqs);
            let _ = reqs.intersect(reqs).unsatisfiable_keys().count();
        }
        if let Ok(op) = op.parse::<Operator>() {
            let r = Requirement::new(key.as_str(), op, values.clone().unwrap_or_default());
            prop_assert_eq!(r.is_ok(), reqs.is_ok());
            if let Ok(r) = r {
                for v in node.values() {
                    let _ = r.matches(Some(v));
                }
                let _ = r.operator();
                let _ = r.to_string();
            }
        } else {
            prop_assert!(reqs.is_err(), "operator {:?} accepted", op);
        }
    }

    #[test]
    fn one_requirement_agrees_with_the_operator((key, op, values) in written(), node in labels()) {
        let r = Requirement::new(key.as_str(), op, values.iter().cloned());
        prop_assert_eq!(r.is_ok(), reference_valid(op, &values), "{} {} {:?}", key, op, values);
        let Ok(r) = r else { return Ok(()) };
        prop_assert_eq!(r.key(), canonical(&key));
        let label = reference_label(&key, &node);
        let want = reference_matches(op, &values, label);
        prop_assert_eq!(r.matches(label), want, "{} {} {:?} on {:?}", key, op, values, label);
        let reqs: Requirements = [r.clone()].into_iter().collect();
        prop_assert_eq!(reqs.matches(&node), want, "{} on {:?}", reqs, node);
        // Through the Kubernetes type, by the operator's name.
        let from_k8s = Requirements::from_k8s(&[k8s(&key, op.as_str(), Some(values.clone()))]);
        prop_assert_eq!(from_k8s.map(|r| r.matches(&node)), Ok(want));
    }

    #[test]
    fn requirements_are_the_conjunction(list in proptest::collection::vec(written(), 1..6), node in labels()) {
        let valid: Vec<_> = list.iter().filter(|(_, op, v)| reference_valid(*op, v)).collect();
        let reqs: Requirements = valid
            .iter()
            .map(|(k, op, v)| Requirement::new(k.as_str(), *op, v.iter().cloned()).unwrap())
            .collect();
        let want = valid
            .iter()
            .all(|(k, op, v)| reference_matches(*op, v, reference_label(k, &node)));
        prop_assert_eq!(reqs.matches(&node), want, "{} on {:?}", reqs, node);
        // A node that satisfies them shows they are satisfiable.
        if want {
            prop_assert_eq!(reqs.unsatisfiable_keys().count(), 0, "{}", reqs);
        }
    }

    #[test]
    fn intersection_and_compatibility(
        a in proptest::collection::vec(written(), 1..4),
        b in proptest::collection::vec(written(), 1..4),
        node in labels(),
    ) {
        let build = |list: &[(String, Operator, Vec<String>)]| -> Requirements {
            list.iter()
                .filter_map(|(k, op, v)| Requirement::new(k.as_str(), *op, v.iter().cloned()).ok())
                .collect()
        };
        let (a, b) = (build(&a), build(&b));
        let both = a.intersect(&b);
        prop_assert_eq!(both.matches(&node), a.matches(&node) && b.matches(&node), "{} / {}", a, b);
        prop_assert_eq!(b.intersect(&a).matches(&node), both.matches(&node));
        // A witness node proves compatibility (both ways).
        if both.matches(&node) {
            prop_assert!(a.compatible(&b).is_ok(), "{} vs {} on {:?}", a, b, node);
            prop_assert!(b.compatible(&a).is_ok());
        }
        prop_assert_eq!(a.compatible(&b).is_ok(), b.compatible(&a).is_ok());
        // `intersects` is `!intersect(..).is_unsatisfiable()`, key by key.
        for ra in a.iter() {
            if let Some(rb) = b.get(ra.key()) {
                prop_assert_eq!(ra.intersects(rb), !ra.intersect(rb).is_unsatisfiable(), "{} / {}", ra, rb);
            }
        }
    }

    #[test]
    fn node_selector_terms_round_trip(list in proptest::collection::vec(written(), 1..5), node in labels()) {
        // Bounds within i64 (a `Gte` of i64::MIN is clamped when written back), and
        // satisfiable: an unsatisfiable requirement is written as `In` with no values, which
        // Kubernetes (and `from_k8s`) rejects.
        let reqs: Requirements = list
            .iter()
            .filter(|(_, _, v)| v.iter().all(|x| x.parse::<i64>().ok().is_none_or(|n| n.unsigned_abs() < 1 << 62)))
            .filter_map(|(k, op, v)| Requirement::new(k.as_str(), *op, v.iter().cloned()).ok())
            .collect();
        prop_assume!(reqs.unsatisfiable_keys().next().is_none());
        let back = Requirements::from_k8s(&reqs.to_node_selector_requirements());
        prop_assert!(back.is_ok(), "{}: {:?}", reqs, back);
        let back = back.unwrap();
        prop_assert_eq!(back.matches(&node), reqs.matches(&node), "{} vs {}", reqs, back);
    }

    #[test]
    fn label_selectors_match_labels_and_expressions(
        match_labels in proptest::collection::btree_map(
            proptest::sample::select(KEYS).prop_map(str::to_owned), value(), 0..3),
        expressions in proptest::collection::vec(
            written().prop_filter("label selectors take set operators", |(_, op, _)| !op.is_numeric()),
            0..3,
        ),
        pod in labels(),
    ) {
        // A label selector (`matchLabels` and `matchExpressions`) is requirements on pod labels.
        let mut selector = Requirements::from_labels(&match_labels);
        let parsed = Requirements::from_k8s(
            &expressions
                .iter()
                .map(|(k, op, v)| k8s(k, op.as_str(), (!v.is_empty()).then(|| v.clone())))
                .collect::<Vec<_>>(),
        );
        let all_valid = expressions.iter().all(|(_, op, v)| reference_valid(*op, v));
        prop_assert_eq!(parsed.is_ok(), all_valid);
        let Ok(parsed) = parsed else { return Ok(()) };
        selector = selector.intersect(&parsed);
        let want = match_labels
            .iter()
            .all(|(k, v)| reference_label(k, &pod) == Some(v.as_str()))
            && expressions
                .iter()
                .all(|(k, op, v)| reference_matches(*op, v, reference_label(k, &pod)));
        prop_assert_eq!(selector.matches(&pod), want, "{} on {:?}", selector, pod);
    }
}
