//! How a NodePool weighs its pods' soft constraints against cost (`spec.preferencePolicy`,
//! `spec.preferenceBudget`).
//!
//! Soft constraints are `preferredDuringSchedulingIgnoredDuringExecution` node affinity, pod
//! affinity and pod anti-affinity terms, and `whenUnsatisfiable: ScheduleAnyway` topology
//! spreads. `Respect` and `Ignore` mean what they mean in Karpenter; `CostBounded` (the default)
//! honours them, the heaviest first, while the plan costs at most the budget more than the plan
//! without them.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default `spec.preferenceBudget`: a plan may cost 10% more to honour preferences.
pub const DEFAULT_PREFERENCE_BUDGET: &str = "10%";

/// How soft constraints are treated when buying nodes.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
pub enum PreferencePolicy {
    /// Honour every preference at any price; relax one only when a pod cannot be placed
    /// otherwise (Karpenter's `Respect`).
    Respect,
    /// Plan as if the pods had no preferences (Karpenter's `Ignore`).
    Ignore,
    /// Honour preferences, the heaviest first, while the plan costs at most
    /// `spec.preferenceBudget` more than the plan without them.
    #[default]
    CostBounded,
}

impl PreferencePolicy {
    /// Every policy, in the order the flag lists them.
    pub const ALL: [PreferencePolicy; 3] = [Self::Respect, Self::Ignore, Self::CostBounded];

    /// The name used in manifests and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Respect => "Respect",
            Self::Ignore => "Ignore",
            Self::CostBounded => "CostBounded",
        }
    }
}

impl fmt::Display for PreferencePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PreferencePolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!("unknown preference policy {s:?}: expected Respect, Ignore or CostBounded")
            })
    }
}

/// Parses a preference budget (`"10%"`, `"2.5%"`, `"0%"`) into a fraction (0.10).
pub fn parse_preference_budget(text: &str) -> Result<f64, String> {
    let number = text
        .strip_suffix('%')
        .ok_or_else(|| format!("{text:?} is not a percentage: expected e.g. \"10%\""))?;
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && !number.trim().is_empty() => Ok(v / 100.0),
        Ok(_) => Err(format!("{text:?} must be a percentage of 0% or more")),
        Err(_) => Err(format!(
            "{text:?} is not a percentage: expected e.g. \"10%\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_as_fractions() {
        assert_eq!(parse_preference_budget("10%"), Ok(0.10));
        assert_eq!(parse_preference_budget("0%"), Ok(0.0));
        assert_eq!(parse_preference_budget("2.5%"), Ok(0.025));
        assert!(
            parse_preference_budget("10")
                .unwrap_err()
                .contains("not a percentage")
        );
        assert!(
            parse_preference_budget("-5%")
                .unwrap_err()
                .contains("0% or more")
        );
        assert!(parse_preference_budget("%").is_err());
    }

    #[test]
    fn policies_read_their_names() {
        for p in PreferencePolicy::ALL {
            assert_eq!(p.as_str().parse::<PreferencePolicy>(), Ok(p));
        }
        assert_eq!(
            "ignore".parse::<PreferencePolicy>(),
            Ok(PreferencePolicy::Ignore)
        );
        assert!(
            "Sometimes"
                .parse::<PreferencePolicy>()
                .unwrap_err()
                .contains("CostBounded")
        );
        assert_eq!(PreferencePolicy::default(), PreferencePolicy::CostBounded);
    }
}
