//! The requirements algebra: label requirements per key, their intersection
//! and compatibility, as Karpenter's `pkg/scheduling` does it.

mod lookup;
mod requirement;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;

pub use lookup::LabelLookup;
pub use requirement::{Operator, Requirement};

use crate::common::NodeSelectorRequirementWithMinValues;
use crate::error::PolicyError;
use crate::labels::{LABEL_ALIASES, NORMALIZED_LABELS, normalize_label_key};

/// Requirements on a set of label keys (ANDed); at most one [`Requirement`]
/// per key, so adding a second one for a key intersects the two.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    /// One requirement per key, sorted by key. A vector, not a map: most sets hold one to a
    /// few keys, and every pod's selectors and node terms hold some (a one-key B-tree map took
    /// about 1.7 kB, most of a pod's memory in a 100,000-pod solve).
    by_key: Vec<Requirement>,
}

/// Why two sets of requirements cannot be satisfied by the same node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incompatibility {
    /// The label key.
    pub key: String,
    /// The receiving side's requirement (`self` in `a.compatible(b)`); `None`
    /// when it does not define the key and so offers no known values.
    pub ours: Option<Box<Requirement>>,
    /// The other side's requirement.
    pub theirs: Box<Requirement>,
}

/// `key "topology.kubernetes.io/zone": In [us-east-1a] vs In [us-east-1b]`.
impl fmt::Display for Incompatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ours {
            Some(ours) => write!(f, "key {:?}: {} vs {}", self.key, ours, self.theirs),
            None => write!(
                f,
                "key {:?}: undefined (no known values) vs {}",
                self.key, self.theirs
            ),
        }
    }
}

impl std::error::Error for Incompatibility {}

impl Requirements {
    /// No requirements (every node matches).
    pub fn new() -> Self {
        Self::default()
    }

    /// From Quartermaster's `requirements` (with `minValues`).
    pub fn from_node_selector_requirements(
        reqs: &[NodeSelectorRequirementWithMinValues],
    ) -> Result<Self, PolicyError> {
        let mut out = Self::new();
        for r in reqs {
            let op: Operator = r.operator.parse()?;
            let min_values = match r.min_values {
                None => None,
                Some(n) if n >= 1 => Some(n as u32),
                Some(n) => {
                    return Err(PolicyError::InvalidRequirement {
                        key: r.key.clone(),
                        reason: format!("minValues must be at least 1, got {n}"),
                    });
                }
            };
            out.add(
                Requirement::new(r.key.as_str(), op, r.values.iter().cloned())?
                    .with_min_values(min_values),
            );
        }
        Ok(out)
    }

    /// From Kubernetes node selector requirements (a pod's node affinity
    /// term or `nodeSelectorTerms[i].matchExpressions`).
    pub fn from_k8s(reqs: &[NodeSelectorRequirement]) -> Result<Self, PolicyError> {
        let mut out = Self::new();
        for r in reqs {
            let op: Operator = r.operator.parse()?;
            out.add(Requirement::new(
                r.key.as_str(),
                op,
                r.values.iter().flatten().cloned(),
            )?);
        }
        Ok(out)
    }

    /// Each label as `key In [value]` (a pod's `nodeSelector`, or a node's labels).
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        let mut out = Self::new();
        for (k, v) in labels {
            out.add(Requirement::in_values(k.as_str(), [v.as_str()]));
        }
        out
    }

    /// Adds a requirement, intersecting it with any existing one on the same key.
    pub fn add(&mut self, r: Requirement) {
        match self.position(r.key()) {
            Ok(i) => self.by_key[i] = self.by_key[i].intersect(&r),
            Err(i) => {
                self.by_key.reserve_exact(1);
                self.by_key.insert(i, r);
            }
        }
    }

    /// Where `key`'s requirement is (`Ok`), or would go (`Err`).
    fn position(&self, key: &str) -> Result<usize, usize> {
        self.by_key.binary_search_by(|r| r.key().cmp(key))
    }

    /// The requirement on exactly `key` (no normalisation).
    fn exact(&self, key: &str) -> Option<&Requirement> {
        self.position(key).ok().map(|i| &self.by_key[i])
    }

    /// Requirements satisfied exactly by nodes satisfying both `self` and `other`.
    pub fn intersect(&self, other: &Requirements) -> Requirements {
        let mut out = self.clone();
        for r in &other.by_key {
            out.add(r.clone());
        }
        out
    }

    /// Whether the keys both sides define can be satisfied together: for
    /// each shared key some label state (a value, or absence when both accept
    /// absence) satisfies both requirements. Keys defined on one side only
    /// never conflict here. This is symmetric and matches Karpenter's
    /// `Requirements.Intersects`.
    ///
    /// Returns the first conflict in key order.
    pub fn compatible(&self, other: &Requirements) -> Result<(), Incompatibility> {
        let (small, large) = if self.len() <= other.len() {
            (self, other)
        } else {
            (other, self)
        };
        for a in &small.by_key {
            let key = a.key();
            if let Some(b) = large.exact(key)
                && !a.intersects(b)
            {
                let (ours, theirs) = if std::ptr::eq(small, self) {
                    (a, b)
                } else {
                    (b, a)
                };
                return Err(Incompatibility {
                    key: key.to_owned(),
                    ours: Some(Box::new(ours.clone())),
                    theirs: Box::new(theirs.clone()),
                });
            }
        }
        Ok(())
    }

    /// Karpenter's `Compatible`: `self` is what a node offers (NodePool or
    /// instance type requirements), `other` what a workload demands.
    ///
    /// Shared keys must intersect as in [`Requirements::compatible`]. In
    /// addition, a key that `other` defines and `self` does not is accepted
    /// only if `other`'s requirement is satisfied by an absent label (`NotIn`,
    /// `DoesNotExist`) or `allow_undefined(key)` says the node will carry the
    /// label anyway (typically [`crate::labels::is_well_known_label`], whose
    /// values the instance type supplies). Keys only `self` defines never
    /// conflict. Not symmetric.
    pub fn compatible_with_undefined(
        &self,
        other: &Requirements,
        allow_undefined: &dyn Fn(&str) -> bool,
    ) -> Result<(), Incompatibility> {
        for theirs in &other.by_key {
            let key = theirs.key();
            match self.exact(key) {
                Some(ours) => {
                    if !ours.intersects(theirs) {
                        return Err(Incompatibility {
                            key: key.to_owned(),
                            ours: Some(Box::new(ours.clone())),
                            theirs: Box::new(theirs.clone()),
                        });
                    }
                }
                None => {
                    if !theirs.allows_absent() && !allow_undefined(key) {
                        return Err(Incompatibility {
                            key: key.to_owned(),
                            ours: None,
                            theirs: Box::new(theirs.clone()),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether a node with these labels satisfies every requirement
    /// (`DoesNotExist`: the key is absent; `NotIn`: absent or not listed;
    /// `Gt`/`Lt`: present and an integer in range). Deprecated label keys on
    /// the node count under their normalised key when the normalised key is
    /// absent, and so do alias labels ([`LABEL_ALIASES`], values mapped): a
    /// node Karpenter launched matches on `karpenter.sh/capacity-type`.
    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        self.by_key.iter().all(|r| {
            let key = r.key();
            let value = labels
                .label(key)
                .or_else(|| {
                    NORMALIZED_LABELS
                        .iter()
                        .filter(|(_, new)| *new == key)
                        .find_map(|(old, _)| labels.label(old))
                })
                .or_else(|| {
                    LABEL_ALIASES
                        .iter()
                        .filter(|a| a.canonical == key)
                        .find_map(|a| labels.label(a.key).map(|v| a.canonical_value(v)))
                });
            r.matches(value)
        })
    }

    /// The requirement on `key` (after normalisation), if any.
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.exact(key).or_else(|| {
            let normalized = normalize_label_key(key);
            (normalized != key)
                .then(|| self.exact(normalized))
                .flatten()
        })
    }

    /// Whether there is a requirement on `key`.
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.by_key.iter().map(Requirement::key)
    }

    /// The requirements, in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> + '_ {
        self.by_key.iter()
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether there are no requirements.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The keys whose requirement nothing can satisfy.
    pub fn unsatisfiable_keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.by_key
            .iter()
            .filter(|r| r.is_unsatisfiable())
            .map(Requirement::key)
    }

    /// Labels a node satisfying these requirements must carry: the keys
    /// whose requirement is `In` with exactly one value.
    pub fn single_valued_labels(&self) -> BTreeMap<String, String> {
        self.by_key
            .iter()
            .filter_map(|r| {
                let values = r.values()?;
                if values.len() == 1 && !r.allows_absent() {
                    values.first().map(|v| (r.key().to_owned(), v.clone()))
                } else {
                    None
                }
            })
            .collect()
    }

    /// All requirements as Kubernetes node selector requirements (ANDed).
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirement> {
        self.by_key
            .iter()
            .flat_map(Requirement::to_node_selector_requirements)
            .collect()
    }
}

impl<'a> IntoIterator for &'a Requirements {
    type Item = &'a Requirement;
    type IntoIter = std::slice::Iter<'a, Requirement>;
    fn into_iter(self) -> Self::IntoIter {
        self.by_key.iter()
    }
}

impl FromIterator<Requirement> for Requirements {
    fn from_iter<T: IntoIterator<Item = Requirement>>(iter: T) -> Self {
        let mut out = Self::new();
        for r in iter {
            out.add(r);
        }
        out
    }
}

impl Extend<Requirement> for Requirements {
    fn extend<T: IntoIterator<Item = Requirement>>(&mut self, iter: T) {
        for r in iter {
            self.add(r);
        }
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.by_key.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{} {r}", r.key())?;
        }
        Ok(())
    }
}
