//! NodePool limits: resource caps, a node count cap and an hourly cost ceiling.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::error::PolicyError;
use crate::quantity::{Millis, parse_quantity};

/// The `spec.limits` key holding the ceiling in dollars per hour.
pub const LIMIT_MAX_HOURLY_COST: &str = "maxHourlyCost";
/// The `spec.limits` key capping the number of nodes.
pub const LIMIT_NODES: &str = "nodes";

/// Parsed `spec.limits`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    /// Per-resource caps (`cpu`, `memory`, `nvidia.com/gpu`, ...) in milli-units.
    pub resources: BTreeMap<String, Millis>,
    /// Cap on the number of nodes.
    pub nodes: Option<u64>,
    /// Ceiling on the pool's summed price, in dollars per hour.
    pub max_hourly_cost: Option<f64>,
}

/// What a NodePool currently uses (or what a launch would add).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Resource totals (`cpu`, `memory`, `nvidia.com/gpu`, ...) in milli-units.
    pub resources: BTreeMap<String, Millis>,
    /// Number of nodes.
    pub nodes: u64,
    /// Summed price in dollars per hour.
    pub hourly_cost: f64,
}

impl Usage {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Usage) {
        for (k, v) in &other.resources {
            *self.resources.entry(k.clone()).or_default() += *v;
        }
        self.nodes = self.nodes.saturating_add(other.nodes);
        self.hourly_cost += other.hourly_cost;
    }

    /// `self + other`.
    pub fn plus(&self, other: &Usage) -> Usage {
        let mut out = self.clone();
        out.add(other);
        out
    }
}

/// A limit that usage goes over.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitExceeded {
    /// The limit's key (`cpu`, `nodes`, `maxHourlyCost`, ...).
    pub resource: String,
    /// The limit, as text.
    pub limit: String,
    /// The usage, as text.
    pub usage: String,
}

/// `cpu: usage 12 exceeds limit 10`.
impl fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: usage {} exceeds limit {}",
            self.resource, self.usage, self.limit
        )
    }
}

/// Parses a `maxHourlyCost` value: a finite, non-negative number of dollars.
pub fn parse_hourly_cost(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if !value.is_finite() {
        return Err(format!("{text:?} must be a finite number"));
    }
    if value < 0.0 {
        return Err(format!("{text:?} must not be negative"));
    }
    Ok(value)
}

impl Limits {
    /// Parses `spec.limits`. Quantities must be non-negative; `nodes` a whole
    /// number; `maxHourlyCost` a finite non-negative number.
    pub fn from_resource_list(list: &BTreeMap<String, Quantity>) -> Result<Self, PolicyError> {
        let mut out = Limits::default();
        for (name, q) in list {
            let invalid = |reason: String| PolicyError::InvalidLimit {
                resource: name.clone(),
                reason,
            };
            if name == LIMIT_MAX_HOURLY_COST {
                out.max_hourly_cost = Some(parse_hourly_cost(&q.0).map_err(invalid)?);
                continue;
            }
            let v = parse_quantity(&q.0).map_err(|e| invalid(e.reason))?;
            if v.is_negative() {
                return Err(invalid(format!("{:?} must not be negative", q.0)));
            }
            if name == LIMIT_NODES {
                if v.millis() % 1000 != 0 {
                    return Err(invalid(format!("{:?} must be a whole number", q.0)));
                }
                out.nodes = Some(u64::try_from(v.to_whole_floor()).unwrap_or(u64::MAX));
            } else {
                out.resources.insert(name.clone(), v);
            }
        }
        Ok(out)
    }

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.nodes.is_none() && self.max_hourly_cost.is_none()
    }

    /// Every limit that `usage` goes over (strictly greater than the limit,
    /// as Karpenter's `ExceededBy`). Resources `usage` does not mention count
    /// as zero.
    pub fn all_exceeded_by(&self, usage: &Usage) -> Vec<LimitExceeded> {
        let mut out = Vec::new();
        for (name, limit) in &self.resources {
            let used = usage.resources.get(name).copied().unwrap_or_default();
            if used > *limit {
                out.push(LimitExceeded {
                    resource: name.clone(),
                    limit: limit.to_string(),
                    usage: used.to_string(),
                });
            }
        }
        if let Some(limit) = self.nodes
            && usage.nodes > limit
        {
            out.push(LimitExceeded {
                resource: LIMIT_NODES.to_owned(),
                limit: limit.to_string(),
                usage: usage.nodes.to_string(),
            });
        }
        if let Some(limit) = self.max_hourly_cost
            && usage.hourly_cost > limit
        {
            out.push(LimitExceeded {
                resource: LIMIT_MAX_HOURLY_COST.to_owned(),
                limit: format!("${limit:.4}/h"),
                usage: format!("${:.4}/h", usage.hourly_cost),
            });
        }
        out
    }

    /// The first limit (resources in key order, then `nodes`, then
    /// `maxHourlyCost`) that `usage` goes over.
    pub fn exceeded_by(&self, usage: &Usage) -> Option<LimitExceeded> {
        self.all_exceeded_by(usage).into_iter().next()
    }

    /// The first limit that `current + additional` would go over.
    pub fn would_exceed(&self, current: &Usage, additional: &Usage) -> Option<LimitExceeded> {
        self.exceeded_by(&current.plus(additional))
    }

    /// How much of each resource limit is left after `usage` (never negative).
    pub fn remaining(&self, usage: &Usage) -> BTreeMap<String, Millis> {
        self.resources
            .iter()
            .map(|(k, limit)| {
                let used = usage.resources.get(k).copied().unwrap_or_default();
                (k.clone(), (*limit - used).max(Millis::ZERO))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    fn usage(pairs: &[(&str, &str)], nodes: u64, cost: f64) -> Usage {
        Usage {
            resources: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), parse_quantity(v).unwrap()))
                .collect(),
            nodes,
            hourly_cost: cost,
        }
    }

    #[test]
    fn parses_limits() {
        let l = Limits::from_resource_list(&list(&[
            ("cpu", "1000"),
            ("memory", "1000Gi"),
            ("nvidia.com/gpu", "64"),
            ("nodes", "20"),
            ("maxHourlyCost", "250.50"),
        ]))
        .unwrap();
        assert_eq!(l.resources["cpu"], Millis::from_whole(1000));
        assert_eq!(l.resources["nvidia.com/gpu"], Millis::from_whole(64));
        assert_eq!(l.nodes, Some(20));
        assert_eq!(l.max_hourly_cost, Some(250.5));
        assert!(!l.resources.contains_key("nodes"));
        assert!(Limits::default().is_empty());
    }

    #[test]
    fn rejects_bad_limits() {
        for (k, v) in [
            ("cpu", "-1"),
            ("cpu", "lots"),
            ("nodes", "1.5"),
            ("maxHourlyCost", "-3"),
            ("maxHourlyCost", "NaN"),
            ("maxHourlyCost", "inf"),
            ("maxHourlyCost", "$5"),
        ] {
            let e = Limits::from_resource_list(&list(&[(k, v)])).unwrap_err();
            assert!(
                matches!(e, PolicyError::InvalidLimit { ref resource, .. } if resource == k),
                "{k}={v}: {e}"
            );
        }
    }

    #[test]
    fn exceeded_is_strict() {
        let l = Limits::from_resource_list(&list(&[
            ("cpu", "10"),
            ("nvidia.com/gpu", "8"),
            ("nodes", "2"),
            ("maxHourlyCost", "100"),
        ]))
        .unwrap();
        assert_eq!(
            l.exceeded_by(&usage(&[("cpu", "10"), ("nvidia.com/gpu", "8")], 2, 100.0)),
            None
        );
        let e = l.exceeded_by(&usage(&[("cpu", "10500m")], 0, 0.0)).unwrap();
        assert_eq!(e.to_string(), "cpu: usage 10500m exceeds limit 10");
        let e = l.exceeded_by(&usage(&[], 3, 0.0)).unwrap();
        assert_eq!(e.resource, "nodes");
        let e = l.exceeded_by(&usage(&[], 0, 100.01)).unwrap();
        assert_eq!(
            e.to_string(),
            "maxHourlyCost: usage $100.0100/h exceeds limit $100.0000/h"
        );
        assert_eq!(
            l.all_exceeded_by(&usage(&[("cpu", "11"), ("nvidia.com/gpu", "9")], 3, 101.0))
                .len(),
            4
        );
    }

    #[test]
    fn would_exceed_adds_the_launch() {
        let l = Limits::from_resource_list(&list(&[
            ("nvidia.com/gpu", "16"),
            ("maxHourlyCost", "120"),
        ]))
        .unwrap();
        let current = usage(&[("nvidia.com/gpu", "8")], 1, 98.32);
        let p5 = usage(&[("nvidia.com/gpu", "8")], 1, 98.32);
        let e = l.would_exceed(&current, &p5).unwrap();
        assert_eq!(e.resource, "maxHourlyCost");
        let small = usage(&[("nvidia.com/gpu", "1")], 1, 1.2);
        assert_eq!(l.would_exceed(&current, &small), None);
        assert_eq!(
            l.remaining(&current)["nvidia.com/gpu"],
            Millis::from_whole(8)
        );
        assert_eq!(
            l.remaining(&usage(&[("nvidia.com/gpu", "20")], 0, 0.0))["nvidia.com/gpu"],
            Millis::ZERO
        );
    }
}
