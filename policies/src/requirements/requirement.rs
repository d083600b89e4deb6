//! One label key's requirement: a set of acceptable label states.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;

use crate::error::PolicyError;
use crate::labels::{label_alias, normalize_label_key};

/// A node selector operator. `Gte` and `Lte` are Quartermaster extensions;
/// they are normalised to `Gt` / `Lt` when a [`Requirement`] is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// The label is present and its value is one of the values.
    In,
    /// The label is absent, or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label is present and is an integer greater than the value.
    Gt,
    /// The label is present and is an integer less than the value.
    Lt,
    /// The label is present and is an integer greater than or equal to the value.
    Gte,
    /// The label is present and is an integer less than or equal to the value.
    Lte,
}

impl Operator {
    /// Every operator, in declaration order.
    pub const ALL: [Operator; 8] = [
        Operator::In,
        Operator::NotIn,
        Operator::Exists,
        Operator::DoesNotExist,
        Operator::Gt,
        Operator::Lt,
        Operator::Gte,
        Operator::Lte,
    ];

    /// The operator as written in manifests.
    pub const fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
            Operator::Gte => "Gte",
            Operator::Lte => "Lte",
        }
    }

    /// Whether the operator compares integers (`Gt`, `Lt`, `Gte`, `Lte`).
    pub const fn is_numeric(self) -> bool {
        matches!(
            self,
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte
        )
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Operator {
    type Err = PolicyError;

    /// Case-sensitive, as Kubernetes is.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operator::ALL
            .into_iter()
            .find(|op| op.as_str() == s)
            .ok_or_else(|| PolicyError::UnknownOperator {
                operator: s.to_owned(),
            })
    }
}

/// The acceptable states of one label on a node.
///
/// A label is either absent or present with a string value. A requirement
/// is the set of acceptable states, held as:
///
/// * a value set: either an explicit set of allowed values, or the
///   complement of a set of excluded values;
/// * optional integer bounds (`greater_than < value < less_than`), which only
///   complements carry (an explicit set is filtered by the bounds instead);
/// * whether an absent label is acceptable.
///
/// | operator        | value set              | absent ok |
/// |-----------------|------------------------|-----------|
/// | `In [a b]`      | `{a, b}`               | no        |
/// | `NotIn [a b]`   | all but `{a, b}`       | yes       |
/// | `Exists`        | all                    | no        |
/// | `DoesNotExist`  | `{}`                   | yes       |
/// | `Gt 4`          | all with bound `> 4`   | no        |
///
/// Unlike Karpenter, which folds absence into the operator, tracking it
/// separately keeps intersections exact: `Exists ∩ NotIn [a]` is "present and
/// not `a`" and is incompatible with `DoesNotExist`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    complement: bool,
    values: BTreeSet<String>,
    allows_absent: bool,
    greater_than: Option<i128>,
    less_than: Option<i128>,
    min_values: Option<u32>,
}

/// The key with deprecated aliases replaced, reusing the allocation when unchanged.
fn normalized(key: String) -> String {
    match normalize_label_key(&key) {
        n if n == key => key,
        n => n.to_owned(),
    }
}

/// Parses a label value as Go's `strconv.Atoi` / Kubernetes' `ParseInt` would.
fn parse_int(value: &str) -> Option<i128> {
    value.parse::<i64>().ok().map(i128::from)
}

impl Requirement {
    /// Builds a requirement, checking that `values` fit `op`:
    /// `In`/`NotIn` need at least one value, `Exists`/`DoesNotExist` none, and
    /// `Gt`/`Lt`/`Gte`/`Lte` exactly one integer. The key is normalised
    /// (deprecated aliases such as `failure-domain.beta.kubernetes.io/zone`
    /// become their current form), and an alias key of
    /// [`crate::labels::LABEL_ALIASES`] becomes its canonical key with its
    /// values mapped (`cloud.google.com/gke-spot In [true]` is
    /// `quartermaster.dev/capacity-type In [spot]`).
    pub fn new<K, I, V>(key: K, op: Operator, values: I) -> Result<Self, PolicyError>
    where
        K: Into<String>,
        I: IntoIterator<Item = V>,
        V: Into<String>,
    {
        let raw: String = key.into();
        let alias = label_alias(&raw);
        let key = normalized(raw);
        let mut values: Vec<String> = values.into_iter().map(Into::into).collect();
        let mut op = op;
        if let Some(a) = alias {
            for v in &mut values {
                *v = a.canonical_value(v).to_owned();
            }
            if let (Some(present), true) = (a.presence_value(), values.is_empty()) {
                match op {
                    Operator::Exists => (op, values) = (Operator::In, vec![present.to_owned()]),
                    Operator::DoesNotExist => {
                        (op, values) = (Operator::NotIn, vec![present.to_owned()]);
                    }
                    _ => {}
                }
            }
        }
        let invalid = |reason: String| PolicyError::InvalidRequirement {
            key: key.clone(),
            reason,
        };
        match op {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    return Err(invalid(format!(
                        "operator {op} requires at least one value"
                    )));
                }
                let set: BTreeSet<String> = values.into_iter().collect();
                Ok(if op == Operator::In {
                    Self::concrete(key, set, false)
                } else {
                    Self::complement(key, set, true)
                })
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    return Err(invalid(format!("operator {op} takes no values")));
                }
                Ok(if op == Operator::Exists {
                    Self::exists(key)
                } else {
                    Self::does_not_exist(key)
                })
            }
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
                let [value] = values.as_slice() else {
                    return Err(invalid(format!(
                        "operator {op} requires exactly one value, got {}",
                        values.len()
                    )));
                };
                let n = parse_int(value).ok_or_else(|| {
                    invalid(format!(
                        "operator {op} requires an integer value, got {value:?}"
                    ))
                })?;
                let mut r = Self::exists(key);
                match op {
                    Operator::Gt => r.greater_than = Some(n),
                    Operator::Gte => r.greater_than = Some(n - 1),
                    Operator::Lt => r.less_than = Some(n),
                    _ => r.less_than = Some(n + 1),
                }
                Ok(r)
            }
        }
    }

    fn concrete(key: String, values: BTreeSet<String>, allows_absent: bool) -> Self {
        Requirement {
            key,
            complement: false,
            values,
            allows_absent,
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    fn complement(key: String, excluded: BTreeSet<String>, allows_absent: bool) -> Self {
        Requirement {
            key,
            complement: true,
            values: excluded,
            allows_absent,
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    /// `key In values` without validation; an empty `values` gives a
    /// requirement nothing satisfies.
    pub fn in_values<K, I, V>(key: K, values: I) -> Self
    where
        K: Into<String>,
        I: IntoIterator<Item = V>,
        V: Into<String>,
    {
        let raw: String = key.into();
        let alias = label_alias(&raw);
        let values = values.into_iter().map(Into::into);
        let values = match alias {
            Some(a) => values.map(|v| a.canonical_value(&v).to_owned()).collect(),
            None => values.collect(),
        };
        Self::concrete(normalized(raw), values, false)
    }

    /// `key Exists`.
    pub fn exists(key: impl Into<String>) -> Self {
        Self::complement(normalized(key.into()), BTreeSet::new(), false)
    }

    /// `key DoesNotExist`.
    pub fn does_not_exist(key: impl Into<String>) -> Self {
        Self::concrete(normalized(key.into()), BTreeSet::new(), true)
    }

    /// The same requirement with `minValues` set.
    pub fn with_min_values(mut self, min_values: Option<u32>) -> Self {
        self.min_values = min_values;
        self
    }

    /// The (normalised) label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether a node whose label has this `value` satisfies the requirement.
    pub fn has(&self, value: &str) -> bool {
        if self.complement {
            !self.values.contains(value) && self.within_bounds(value)
        } else {
            self.values.contains(value)
        }
    }

    /// Whether a node without this label satisfies the requirement
    /// (`NotIn`, `DoesNotExist`).
    pub fn allows_absent(&self) -> bool {
        self.allows_absent
    }

    /// Whether a node with this label (`Some(value)`) or without it (`None`)
    /// satisfies the requirement.
    pub fn matches(&self, value: Option<&str>) -> bool {
        match value {
            Some(v) => self.has(v),
            None => self.allows_absent,
        }
    }

    fn within_bounds(&self, value: &str) -> bool {
        if self.greater_than.is_none() && self.less_than.is_none() {
            return true;
        }
        let Some(n) = parse_int(value) else {
            return false;
        };
        self.greater_than.is_none_or(|gt| n > gt) && self.less_than.is_none_or(|lt| n < lt)
    }

    /// Whether the integer bounds leave no integer (and so no value).
    fn bounds_empty(gt: Option<i128>, lt: Option<i128>) -> bool {
        matches!((gt, lt), (Some(gt), Some(lt)) if gt + 1 >= lt)
    }

    /// Whether no label *value* satisfies the requirement. A `DoesNotExist`
    /// requirement is empty in this sense yet satisfiable by an absent label;
    /// see [`Requirement::is_unsatisfiable`].
    pub fn is_empty(&self) -> bool {
        if self.complement {
            Self::bounds_empty(self.greater_than, self.less_than)
        } else {
            self.values.is_empty()
        }
    }

    /// Whether no node can satisfy the requirement: no value fits and an
    /// absent label is not acceptable either.
    pub fn is_unsatisfiable(&self) -> bool {
        self.is_empty() && !self.allows_absent
    }

    /// The allowed values when the requirement is an explicit set (`In`, or
    /// `DoesNotExist` as the empty set); `None` for complements.
    pub fn values(&self) -> Option<&BTreeSet<String>> {
        (!self.complement).then_some(&self.values)
    }

    /// The excluded values when the requirement is a complement (`NotIn`,
    /// `Exists`, bounds); `None` for explicit sets.
    pub fn excluded(&self) -> Option<&BTreeSet<String>> {
        self.complement.then_some(&self.values)
    }

    /// Exclusive lower integer bound, if any.
    pub fn greater_than(&self) -> Option<i128> {
        self.greater_than
    }

    /// Exclusive upper integer bound, if any.
    pub fn less_than(&self) -> Option<i128> {
        self.less_than
    }

    /// `minValues`: how many distinct values of this key the instance types
    /// picked for a node claim must span.
    pub fn min_values(&self) -> Option<u32> {
        self.min_values
    }

    /// The requirement's main operator after normalisation:
    ///
    /// * `In`: an explicit set, absent not allowed (an empty one is
    ///   unsatisfiable);
    /// * `DoesNotExist`: the empty set, absent allowed;
    /// * `NotIn`: a complement, absent allowed;
    /// * `Gt` / `Lt`: a complement with only that bound and no exclusions;
    /// * `Exists`: any other complement that needs the label (plain, or with
    ///   both bounds, or with exclusions).
    ///
    /// [`Requirement::to_node_selector_requirements`] gives the exact form.
    pub fn operator(&self) -> Operator {
        if !self.complement {
            if self.allows_absent && self.values.is_empty() {
                Operator::DoesNotExist
            } else {
                Operator::In
            }
        } else if self.allows_absent {
            Operator::NotIn
        } else if self.values.is_empty() {
            match (self.greater_than, self.less_than) {
                (Some(_), None) => Operator::Gt,
                (None, Some(_)) => Operator::Lt,
                _ => Operator::Exists,
            }
        } else {
            Operator::Exists
        }
    }

    /// The intersection: states acceptable to both. The key is `self`'s;
    /// `minValues` is the larger of the two.
    pub fn intersect(&self, other: &Requirement) -> Requirement {
        let allows_absent = self.allows_absent && other.allows_absent;
        let min_values = self.min_values.max(other.min_values);
        let greater_than = match (self.greater_than, other.greater_than) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let less_than = match (self.less_than, other.less_than) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut out = match (self.complement, other.complement) {
            (true, true) => {
                if Self::bounds_empty(greater_than, less_than) {
                    Self::concrete(self.key.clone(), BTreeSet::new(), allows_absent)
                } else {
                    let mut r = Self::complement(
                        self.key.clone(),
                        self.values.union(&other.values).cloned().collect(),
                        allows_absent,
                    );
                    r.greater_than = greater_than;
                    r.less_than = less_than;
                    r
                }
            }
            (false, true) => Self::concrete(
                self.key.clone(),
                self.values
                    .iter()
                    .filter(|v| other.has(v))
                    .cloned()
                    .collect(),
                allows_absent,
            ),
            (true, false) => Self::concrete(
                self.key.clone(),
                other
                    .values
                    .iter()
                    .filter(|v| self.has(v))
                    .cloned()
                    .collect(),
                allows_absent,
            ),
            (false, false) => {
                let (small, large) = if self.values.len() <= other.values.len() {
                    (&self.values, &other.values)
                } else {
                    (&other.values, &self.values)
                };
                Self::concrete(
                    self.key.clone(),
                    small
                        .iter()
                        .filter(|v| large.contains(*v))
                        .cloned()
                        .collect(),
                    allows_absent,
                )
            }
        };
        out.min_values = min_values;
        out
    }

    /// Whether some node state satisfies both requirements: both accept an
    /// absent label, or some value is in both. Equivalent to
    /// `!self.intersect(other).is_unsatisfiable()` without allocating.
    pub fn intersects(&self, other: &Requirement) -> bool {
        if self.allows_absent && other.allows_absent {
            return true;
        }
        match (self.complement, other.complement) {
            (true, true) => {
                let gt = self.greater_than.max(other.greater_than);
                let lt = match (self.less_than, other.less_than) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                // A complement of a finite set with a non-empty integer range
                // always has members ("05" and "5" are distinct values).
                !Self::bounds_empty(gt, lt)
            }
            (false, true) => self.values.iter().any(|v| other.has(v)),
            (true, false) => other.values.iter().any(|v| self.has(v)),
            (false, false) => {
                let (small, large) = if self.values.len() <= other.values.len() {
                    (&self.values, &other.values)
                } else {
                    (&other.values, &self.values)
                };
                small.iter().any(|v| large.contains(v))
            }
        }
    }

    /// The requirement as Kubernetes node selector terms that are ANDed
    /// together (one term for the simple cases; e.g. `Exists` + `NotIn` for
    /// "present and not `a`"). Bounds beyond the `i64` range are clamped.
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirement> {
        let term = |op: Operator, values: Vec<String>| NodeSelectorRequirement {
            key: self.key.clone(),
            operator: op.as_str().to_owned(),
            values: (!values.is_empty()).then_some(values),
        };
        let listed = || self.values.iter().cloned().collect::<Vec<_>>();
        let clamp = |n: i128| {
            n.clamp(i128::from(i64::MIN), i128::from(i64::MAX))
                .to_string()
        };
        if !self.complement {
            return vec![if self.allows_absent && self.values.is_empty() {
                term(Operator::DoesNotExist, vec![])
            } else {
                term(Operator::In, listed())
            }];
        }
        if self.allows_absent {
            return vec![term(Operator::NotIn, listed())];
        }
        let mut out = Vec::new();
        let bounded = self.greater_than.is_some() || self.less_than.is_some();
        if !bounded {
            out.push(term(Operator::Exists, vec![]));
        }
        if !self.values.is_empty() {
            out.push(term(Operator::NotIn, listed()));
        }
        if let Some(gt) = self.greater_than {
            out.push(term(Operator::Gt, vec![clamp(gt)]));
        }
        if let Some(lt) = self.less_than {
            out.push(term(Operator::Lt, vec![clamp(lt)]));
        }
        out
    }
}

/// The operator and values without the key: `In [a, b]`, `NotIn [a]`,
/// `Exists`, `DoesNotExist`, `Gt 4`, `NotIn [x], Gt 4, Lt 9`.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, term) in self.to_node_selector_requirements().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&term.operator)?;
            let values = term.values.as_deref().unwrap_or_default();
            match term.operator.as_str() {
                "Gt" | "Lt" => write!(f, " {}", values.join(""))?,
                "In" | "NotIn" => write!(f, " [{}]", values.join(", "))?,
                _ => {}
            }
        }
        if let Some(n) = self.min_values {
            write!(f, " (minValues {n})")?;
        }
        Ok(())
    }
}
