//! Node repair, GPU first: a node whose conditions say it is broken for longer than a rule
//! tolerates is replaced, its pods planned again elsewhere.
//!
//! Rules match a node condition type and status (`Ready=False`, `AcceleratedHardwareReady=False`)
//! with a toleration. The defaults are Karpenter's AWS provider's repair policies (kubelet
//! `Ready` False or Unknown for 30 minutes; the EKS node monitoring agent's
//! `AcceleratedHardwareReady` False for 10 minutes, and its `StorageReady`, `NetworkingReady`,
//! `KernelReady` and `ContainerRuntimeReady` False for 30 minutes), read in
//! `aws/karpenter-provider-aws` `pkg/cloudprovider/cloudprovider.go` `RepairPolicies()`.
//!
//! Two holes of the peers are closed here:
//! * a condition that flaps does not restart the clock: a node is unhealthy from the first time
//!   a rule matched (the condition's `lastTransitionTime`, so a restarted controller agrees) and
//!   becomes healthy again only after it stayed healthy for the rule's whole toleration;
//! * the guard against mass repair (a bad driver rollout breaks every node: replacing them all
//!   helps nobody) is absolute and relative: a pool's nodes are repaired while at most
//!   `max(max_unhealthy_nodes, max_unhealthy_fraction × nodes)` of them are unhealthy, so a pool
//!   of two nodes can still have its broken one replaced (Karpenter's 20% alone blocks it).

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};

use crate::events::NodeCondition;

/// One repair rule: a node whose condition `condition` has status `status` for longer than
/// `toleration` is replaced.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairRule {
    /// The condition type (`Ready`, `AcceleratedHardwareReady`, …).
    pub condition: String,
    /// The unhealthy status (`False`, `Unknown`, or `True` for conditions that report a fault).
    pub status: String,
    /// How long the node may stay so before it is replaced.
    pub toleration: TimeDelta,
}

impl RepairRule {
    fn new(condition: &str, status: &str, minutes: i64) -> Self {
        Self {
            condition: condition.to_owned(),
            status: status.to_owned(),
            toleration: TimeDelta::minutes(minutes),
        }
    }

    /// `AcceleratedHardwareReady=False for 10m`.
    pub fn describe(&self) -> String {
        format!(
            "{}={} for {}m",
            self.condition,
            self.status,
            self.toleration.num_minutes()
        )
    }
}

/// How nodes are repaired.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairConfig {
    /// The rules, the first match deciding; empty: no repair.
    pub rules: Vec<RepairRule>,
    /// A pool's nodes are repaired while at most this many of them are unhealthy…
    pub max_unhealthy_nodes: usize,
    /// … or at most this fraction of them, whichever allows more.
    pub max_unhealthy_fraction: f64,
}

impl Default for RepairConfig {
    fn default() -> Self {
        Self {
            rules: vec![
                RepairRule::new("AcceleratedHardwareReady", "False", 10),
                RepairRule::new("Ready", "False", 30),
                RepairRule::new("Ready", "Unknown", 30),
                RepairRule::new("StorageReady", "False", 30),
                RepairRule::new("NetworkingReady", "False", 30),
                RepairRule::new("KernelReady", "False", 30),
                RepairRule::new("ContainerRuntimeReady", "False", 30),
            ],
            max_unhealthy_nodes: 1,
            max_unhealthy_fraction: 0.2,
        }
    }
}

impl RepairConfig {
    /// How many unhealthy nodes a pool of `nodes` may have and still be repaired.
    pub fn allowed_unhealthy(&self, nodes: usize) -> usize {
        let relative = (self.max_unhealthy_fraction * nodes as f64).floor() as usize;
        self.max_unhealthy_nodes.max(relative)
    }

    /// The first rule `conditions` match, with the time its condition last changed.
    fn matching(&self, conditions: &[NodeCondition]) -> Option<(usize, Option<DateTime<Utc>>)> {
        self.rules.iter().enumerate().find_map(|(i, rule)| {
            conditions
                .iter()
                .find(|c| c.kind == rule.condition && c.status == rule.status)
                .map(|c| (i, c.since))
        })
    }
}

/// A NodePool's `spec.repair`, parsed: what it changes about the engine's [`RepairConfig`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RepairOverride {
    /// `enabled: false`.
    pub disabled: bool,
    /// `policies`: tolerations for (condition, status), replacing a default rule's or added.
    pub rules: Vec<RepairRule>,
    /// `defaultTolerationDuration`: the toleration of every default rule `rules` do not name.
    pub default_toleration: Option<TimeDelta>,
    /// `maxUnhealthyNodes`.
    pub max_unhealthy_nodes: Option<usize>,
    /// `maxUnhealthyPercentage`, as a fraction.
    pub max_unhealthy_fraction: Option<f64>,
}

impl RepairOverride {
    /// Reads a NodePool's `spec.repair` (absent: no change).
    pub fn from_spec(spec: Option<&quartermaster_policies::RepairSpec>) -> Result<Self, String> {
        let Some(spec) = spec else {
            return Ok(Self::default());
        };
        let duration = |text: &str, path: &str| {
            quartermaster_policies::duration::parse_duration(text)
                .ok()
                .and_then(|d| TimeDelta::from_std(d).ok())
                .ok_or_else(|| format!("{path}: invalid duration {text:?}"))
        };
        let mut rules = Vec::new();
        for (i, p) in spec.policies.iter().enumerate() {
            rules.push(RepairRule {
                condition: p.condition_type.clone(),
                status: p.condition_status.clone().unwrap_or_else(|| "False".into()),
                toleration: duration(
                    &p.toleration,
                    &format!("spec.repair.policies[{i}].toleration"),
                )?,
            });
        }
        Ok(Self {
            disabled: spec.enabled == Some(false),
            rules,
            default_toleration: spec
                .default_toleration_duration
                .as_deref()
                .map(|t| duration(t, "spec.repair.defaultTolerationDuration"))
                .transpose()?,
            max_unhealthy_nodes: spec.max_unhealthy_nodes.map(|n| n.max(0) as usize),
            max_unhealthy_fraction: spec
                .max_unhealthy_percentage
                .map(|p| p.clamp(0, 100) as f64 / 100.0),
        })
    }

    /// `base` with this pool's changes: its policies replace the toleration of the default
    /// rule of the same condition and status (or are added after the defaults), the default
    /// toleration applies to the other defaults, and `enabled: false` leaves no rule.
    pub fn resolve(&self, base: &RepairConfig) -> RepairConfig {
        if self.disabled {
            return RepairConfig {
                rules: Vec::new(),
                ..base.clone()
            };
        }
        let mut rules: Vec<RepairRule> = base
            .rules
            .iter()
            .map(|r| {
                let named = self
                    .rules
                    .iter()
                    .find(|o| o.condition == r.condition && o.status == r.status);
                RepairRule {
                    toleration: named
                        .map(|o| o.toleration)
                        .or(self.default_toleration)
                        .unwrap_or(r.toleration),
                    ..r.clone()
                }
            })
            .collect();
        for o in &self.rules {
            if !rules
                .iter()
                .any(|r| r.condition == o.condition && r.status == o.status)
            {
                rules.push(o.clone());
            }
        }
        RepairConfig {
            rules,
            max_unhealthy_nodes: self.max_unhealthy_nodes.unwrap_or(base.max_unhealthy_nodes),
            max_unhealthy_fraction: self
                .max_unhealthy_fraction
                .unwrap_or(base.max_unhealthy_fraction),
        }
    }
}

/// A node found unhealthy.
#[derive(Debug, Clone, PartialEq)]
struct Unhealthy {
    /// The rule that matched first (`AcceleratedHardwareReady=False for 10m`).
    rule: String,
    /// Its toleration (the pool's).
    toleration: TimeDelta,
    /// Since when (the condition's transition time when it has one).
    since: DateTime<Utc>,
    /// Set while the node looks healthy again; cleared when a rule matches again.
    healthy_since: Option<DateTime<Utc>>,
}

/// Which claims' nodes are unhealthy, and since when. A plain index: fed conditions, asked
/// what is due.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RepairTracker {
    by_claim: BTreeMap<String, Unhealthy>,
}

impl RepairTracker {
    /// Records what `claim`'s node reports at `now`.
    pub fn observe(
        &mut self,
        config: &RepairConfig,
        claim: &str,
        conditions: &[NodeCondition],
        now: DateTime<Utc>,
    ) {
        match config.matching(conditions) {
            Some((rule, since)) => {
                let rule = &config.rules[rule];
                let entry = self
                    .by_claim
                    .entry(claim.to_owned())
                    .or_insert_with(|| Unhealthy {
                        rule: rule.describe(),
                        toleration: rule.toleration,
                        since: since.unwrap_or(now).min(now),
                        healthy_since: None,
                    });
                entry.healthy_since = None;
            }
            None => {
                let Some(entry) = self.by_claim.get_mut(claim) else {
                    return;
                };
                let healthy_since = *entry.healthy_since.get_or_insert(now);
                // Healthy for a whole toleration: recovered. A shorter good spell is a flap and
                // does not restart the clock.
                if now - healthy_since >= entry.toleration {
                    self.by_claim.remove(claim);
                }
            }
        }
    }

    /// Whether no node is tracked (nothing to do).
    pub fn is_empty(&self) -> bool {
        self.by_claim.is_empty()
    }

    /// Forgets the nodes that stayed healthy for their rule's whole toleration by `now`.
    pub fn forget_recovered(&mut self, now: DateTime<Utc>) {
        self.by_claim
            .retain(|_, u| u.healthy_since.is_none_or(|h| now - h < u.toleration));
    }

    /// Every claim due for repair at `now`, with why.
    pub fn due_all(&self, now: DateTime<Utc>) -> Vec<(String, String)> {
        self.by_claim
            .keys()
            .filter_map(|c| self.due(c, now).map(|why| (c.clone(), why)))
            .collect()
    }

    /// Whether `claim`'s node is unhealthy now.
    pub fn unhealthy(&self, claim: &str) -> bool {
        self.by_claim
            .get(claim)
            .is_some_and(|u| u.healthy_since.is_none())
    }

    /// Why `claim`'s node is due for repair at `now`, if it is: unhealthy now, and for longer
    /// than its rule tolerates.
    pub fn due(&self, claim: &str, now: DateTime<Utc>) -> Option<String> {
        let u = self.by_claim.get(claim)?;
        (u.healthy_since.is_none() && now - u.since >= u.toleration).then(|| u.rule.clone())
    }

    /// When the first unhealthy node becomes due (for the engine's next deadline).
    pub fn next_due(&self) -> Option<DateTime<Utc>> {
        self.by_claim
            .values()
            .filter(|u| u.healthy_since.is_none())
            .map(|u| u.since + u.toleration)
            .min()
    }

    /// Forgets claims that are gone.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.by_claim.retain(|c, _| keep(c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap() + TimeDelta::minutes(minutes)
    }

    fn condition(kind: &str, status: &str, since: Option<i64>) -> NodeCondition {
        NodeCondition {
            kind: kind.into(),
            status: status.into(),
            since: since.map(at),
            reason: None,
        }
    }

    #[test]
    fn a_broken_gpu_is_due_after_its_toleration_from_the_transition_time() {
        let config = RepairConfig::default();
        let mut t = RepairTracker::default();
        let broken = [
            condition("Ready", "True", Some(0)),
            condition("AcceleratedHardwareReady", "False", Some(2)),
        ];
        // Seen first at minute 5, broken since minute 2 (a restarted controller agrees).
        t.observe(&config, "c", &broken, at(5));
        assert!(t.unhealthy("c"));
        assert_eq!(t.due("c", at(11)), None);
        assert_eq!(
            t.due("c", at(12)).as_deref(),
            Some("AcceleratedHardwareReady=False for 10m")
        );
        assert_eq!(t.next_due(), Some(at(12)));
    }

    #[test]
    fn a_flapping_condition_does_not_restart_the_clock() {
        let config = RepairConfig::default();
        let mut t = RepairTracker::default();
        // Not ready for 20 minutes, ready for 5, not ready again (a new transition time): the
        // clock runs from the first failure.
        t.observe(&config, "c", &[condition("Ready", "False", Some(0))], at(0));
        t.observe(
            &config,
            "c",
            &[condition("Ready", "True", Some(20))],
            at(20),
        );
        assert!(!t.unhealthy("c"));
        t.observe(
            &config,
            "c",
            &[condition("Ready", "True", Some(20))],
            at(25),
        );
        t.observe(
            &config,
            "c",
            &[condition("Ready", "False", Some(25))],
            at(25),
        );
        assert_eq!(t.due("c", at(30)).as_deref(), Some("Ready=False for 30m"));
        // Healthy for a whole toleration: recovered, forgotten.
        t.observe(
            &config,
            "c",
            &[condition("Ready", "True", Some(31))],
            at(31),
        );
        t.observe(
            &config,
            "c",
            &[condition("Ready", "True", Some(31))],
            at(61),
        );
        assert!(!t.unhealthy("c"));
        assert_eq!(t.due("c", at(100)), None);
    }

    #[test]
    fn a_pool_overrides_tolerations_adds_conditions_and_can_turn_repair_off() {
        let spec: quartermaster_policies::RepairSpec = serde_json::from_value(serde_json::json!({
            "defaultTolerationDuration": "45m",
            "maxUnhealthyNodes": 3,
            "policies": [
                {"conditionType": "AcceleratedHardwareReady", "toleration": "2m"},
                {"conditionType": "NetworkUnavailable", "conditionStatus": "True", "toleration": "5m"}
            ]
        }))
        .unwrap();
        let config = RepairOverride::from_spec(Some(&spec))
            .unwrap()
            .resolve(&RepairConfig::default());
        let toleration = |kind: &str, status: &str| {
            config
                .rules
                .iter()
                .find(|r| r.condition == kind && r.status == status)
                .map(|r| r.toleration.num_minutes())
        };
        assert_eq!(toleration("AcceleratedHardwareReady", "False"), Some(2));
        assert_eq!(toleration("Ready", "False"), Some(45), "the pool's default");
        assert_eq!(toleration("NetworkUnavailable", "True"), Some(5), "added");
        assert_eq!(config.max_unhealthy_nodes, 3);
        assert_eq!(config.max_unhealthy_fraction, 0.2);

        let off = quartermaster_policies::RepairSpec {
            enabled: Some(false),
            ..Default::default()
        };
        let config = RepairOverride::from_spec(Some(&off))
            .unwrap()
            .resolve(&RepairConfig::default());
        assert!(config.rules.is_empty());
    }

    #[test]
    fn the_guard_is_absolute_and_relative() {
        let config = RepairConfig::default();
        // One broken node of two may be repaired (20% alone would allow none).
        assert_eq!(config.allowed_unhealthy(2), 1);
        assert_eq!(config.allowed_unhealthy(10), 2);
        assert_eq!(config.allowed_unhealthy(100), 20);
    }
}
