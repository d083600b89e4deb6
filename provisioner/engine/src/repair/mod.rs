//! Node repair, GPU first: a node whose conditions say it is broken for longer than a rule
//! tolerates is rebooted in place or replaced, as the rule says.
//!
//! Rules match a node condition type and status (`Ready=False`, `AcceleratedHardwareReady=False`)
//! with a toleration. The defaults are Karpenter's AWS provider's repair policies (kubelet
//! `Ready` False or Unknown for 30 minutes; the EKS node monitoring agent's
//! `AcceleratedHardwareReady` False for 10 minutes, and its `StorageReady`, `NetworkingReady`,
//! `KernelReady` and `ContainerRuntimeReady` False for 30 minutes), read in
//! `aws/karpenter-provider-aws` `pkg/cloudprovider/cloudprovider.go` `RepairPolicies()`.
//!
//! A rule's action is `Replace` (a new node, the pods planned again elsewhere) or `Reboot` (the
//! instance is rebooted in place through the cloud: pods stay bound and restart there, nothing
//! is bought; the GPU faults a reset clears). A node still broken a whole toleration after its
//! reboot is replaced; a cloud that cannot reboot (or a reboot that fails) means replace at once.
//! Rules may name the condition's `reason` (the EKS node monitoring agent reports NVIDIA XID
//! codes as `NvidiaXID<n>Error`); the first matching rule decides, so reason rules come first.
//! The default reboot rules are the XIDs NVIDIA says a GPU reset or driver reload clears: XID 48
//! (double-bit ECC error; NVIDIA Health Validation "Xid checks": `reset_gpu`), XID 63 and 64
//! (dynamic page retirement: "reload the driver to activate"; NVIDIA "Dynamic Page Retirement —
//! Visibility"); read 2026-12-04. Everything else (XID 79, "GPU has fallen off the bus",
//! included) is replaced.
//!
//! Holes of the peers closed here:
//! * a condition that flaps does not restart the clock: a node is unhealthy from the first time
//!   a rule matched (the condition's `lastTransitionTime`, so a restarted controller agrees) and
//!   becomes healthy again only after it stayed healthy for the rule's whole toleration;
//! * the guard against mass repair (a bad driver rollout breaks every node: replacing them all
//!   helps nobody) is absolute and relative: a pool's nodes are repaired while at most
//!   `max(max_unhealthy_nodes, max_unhealthy_fraction × nodes)` of them are unhealthy, so a pool
//!   of two nodes can still have its broken one replaced (Karpenter's 20% alone blocks it);
//! * a gang's broken node is replaced in the gang's zone and placement group: its pods are
//!   planned again while the gang's other members run, and the solver keeps a gang's pending
//!   members in the zone of its running ones (the replacement carries the gang's labels).

mod decide;

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};

use crate::events::NodeCondition;

/// What node repair does to a node a rule found broken for too long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RepairAction {
    /// Replace it: delete the node, its pods planned again elsewhere.
    #[default]
    Replace,
    /// Reboot it in place (once); replace it if it is still broken a toleration later.
    Reboot,
}

impl RepairAction {
    /// `replace` or `reboot`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Replace => "replace",
            Self::Reboot => "reboot",
        }
    }
}

/// One repair rule: a node whose condition `condition` has status `status` (and reason
/// `reason`, when the rule names one) for longer than `toleration` is repaired by `action`.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairRule {
    /// The condition type (`Ready`, `AcceleratedHardwareReady`, …).
    pub condition: String,
    /// The unhealthy status (`False`, `Unknown`, or `True` for conditions that report a fault).
    pub status: String,
    /// The condition's reason this rule is for (`NvidiaXID48Error`); `None`: any reason.
    pub reason: Option<String>,
    /// How long the node may stay so before it is repaired.
    pub toleration: TimeDelta,
    /// What is done then.
    pub action: RepairAction,
}

impl RepairRule {
    fn new(condition: &str, status: &str, minutes: i64) -> Self {
        Self {
            condition: condition.to_owned(),
            status: status.to_owned(),
            reason: None,
            toleration: TimeDelta::minutes(minutes),
            action: RepairAction::Replace,
        }
    }

    fn reboot_for(condition: &str, status: &str, reason: &str, minutes: i64) -> Self {
        Self {
            reason: Some(reason.to_owned()),
            action: RepairAction::Reboot,
            ..Self::new(condition, status, minutes)
        }
    }

    /// Whether this rule is for the same condition, status and reason as `other`.
    fn same_match(&self, other: &RepairRule) -> bool {
        self.condition == other.condition
            && self.status == other.status
            && self.reason == other.reason
    }

    /// `AcceleratedHardwareReady=False for 10m`, `AcceleratedHardwareReady=False
    /// (NvidiaXID48Error) for 10m`.
    pub fn describe(&self) -> String {
        let reason = self
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        format!(
            "{}={}{reason} for {}m",
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
                RepairRule::reboot_for("AcceleratedHardwareReady", "False", "NvidiaXID48Error", 10),
                RepairRule::reboot_for("AcceleratedHardwareReady", "False", "NvidiaXID63Error", 10),
                RepairRule::reboot_for("AcceleratedHardwareReady", "False", "NvidiaXID64Error", 10),
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
                .find(|c| {
                    c.kind == rule.condition
                        && c.status == rule.status
                        && rule
                            .reason
                            .as_ref()
                            .is_none_or(|r| c.reason.as_ref() == Some(r))
                })
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
            let action = match p.action.as_deref() {
                None | Some("Replace") => RepairAction::Replace,
                Some("Reboot") => RepairAction::Reboot,
                Some(other) => {
                    return Err(format!(
                        "spec.repair.policies[{i}].action: {other:?} is not Replace or Reboot"
                    ));
                }
            };
            rules.push(RepairRule {
                condition: p.condition_type.clone(),
                status: p.condition_status.clone().unwrap_or_else(|| "False".into()),
                reason: p.condition_reason.clone(),
                toleration: duration(
                    &p.toleration,
                    &format!("spec.repair.policies[{i}].toleration"),
                )?,
                action,
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

    /// `base` with this pool's changes: its policies replace the toleration and action of the
    /// default rule of the same condition, status and reason (a policy without a reason sets
    /// the toleration of the reason rules of its condition too) (or are added: a rule naming a
    /// reason before the defaults, so it decides before the generic rule of its condition; any
    /// other after them), the default toleration applies to the other defaults, and
    /// `enabled: false` leaves no rule.
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
                let named = self.rules.iter().find(|o| o.same_match(r));
                // A policy without a reason sets the toleration of every default rule of its
                // condition and status (the reason rules too: "GPU faults within 2m").
                let general = self.rules.iter().find(|o| {
                    o.reason.is_none() && o.condition == r.condition && o.status == r.status
                });
                RepairRule {
                    toleration: named
                        .or(general)
                        .map(|o| o.toleration)
                        .or(self.default_toleration)
                        .unwrap_or(r.toleration),
                    action: named.map_or(r.action, |o| o.action),
                    ..r.clone()
                }
            })
            .collect();
        let added = |o: &&RepairRule| !base.rules.iter().any(|r| r.same_match(o));
        let mut first: Vec<RepairRule> = self
            .rules
            .iter()
            .filter(added)
            .filter(|o| o.reason.is_some())
            .cloned()
            .collect();
        first.append(&mut rules);
        rules = first;
        rules.extend(
            self.rules
                .iter()
                .filter(added)
                .filter(|o| o.reason.is_none())
                .cloned(),
        );
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
    /// Its action.
    action: RepairAction,
    /// Since when (the condition's transition time when it has one; the reboot's time after a
    /// reboot).
    since: DateTime<Utc>,
    /// Set while the node looks healthy again; cleared when a rule matches again.
    healthy_since: Option<DateTime<Utc>>,
    /// Whether it was rebooted already (a node still broken after its reboot is replaced).
    rebooted: bool,
}

/// What node repair decided for one node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RepairDue {
    /// The claim.
    pub claim: String,
    /// Why (`AcceleratedHardwareReady=False (NvidiaXID48Error) for 10m`, with "still broken
    /// after a reboot" when it was rebooted).
    pub why: String,
    /// What to do.
    pub action: RepairAction,
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
                        action: rule.action,
                        since: since.unwrap_or(now).min(now),
                        healthy_since: None,
                        rebooted: false,
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

    /// Every claim due for repair at `now`, with why and what to do.
    pub fn due_all(&self, now: DateTime<Utc>) -> Vec<RepairDue> {
        self.by_claim
            .iter()
            .filter(|(_, u)| u.healthy_since.is_none() && now - u.since >= u.toleration)
            .map(|(claim, u)| {
                let (why, action) = if u.rebooted {
                    (
                        format!("{}, still broken after a reboot", u.rule),
                        RepairAction::Replace,
                    )
                } else {
                    (u.rule.clone(), u.action)
                };
                RepairDue {
                    claim: claim.clone(),
                    why,
                    action,
                }
            })
            .collect()
    }

    /// `claim`'s node was rebooted at `now`: its clock starts again from the reboot, and if it
    /// is still broken when the toleration has passed once more it is replaced.
    pub fn rebooted(&mut self, claim: &str, now: DateTime<Utc>) {
        if let Some(u) = self.by_claim.get_mut(claim) {
            u.rebooted = true;
            u.since = now;
        }
    }

    /// Whether `claim`'s node is unhealthy now.
    pub fn unhealthy(&self, claim: &str) -> bool {
        self.by_claim
            .get(claim)
            .is_some_and(|u| u.healthy_since.is_none())
    }

    /// Why `claim`'s node is due for repair at `now`, if it is: unhealthy now, and for longer
    /// than its rule tolerates.
    #[cfg(test)]
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
