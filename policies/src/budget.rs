//! Disruption budgets: how many of a NodePool's nodes may be disrupted at once.
//!
//! Semantics follow Karpenter v1: a budget with neither `schedule` nor
//! `duration` is always active; a scheduled budget is active while `now` is
//! within `duration` after a time the cron `schedule` (UTC) fires. `nodes` is
//! a count (`"3"`) or a percentage of the pool's nodes (`"10%"`, rounded up).
//! The allowed number of disruptions is the minimum over active budgets that
//! apply to the disruption reason; a NodePool without `budgets` gets the
//! default budget `nodes: "10%"`. Time is always an input: nothing here reads
//! the clock.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::parse_duration;
use crate::error::PolicyError;

/// Karpenter's default budget when a NodePool sets none.
pub const DEFAULT_BUDGET_NODES: &str = "10%";

/// Why a node is being disrupted.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum DisruptionReason {
    /// Consolidation onto fewer / cheaper nodes.
    Underutilized,
    /// The node runs no workload pods.
    Empty,
    /// The node no longer matches its NodePool / NodeClass.
    Drifted,
}

impl DisruptionReason {
    /// Every reason.
    pub const ALL: [DisruptionReason; 3] = [
        DisruptionReason::Underutilized,
        DisruptionReason::Empty,
        DisruptionReason::Drifted,
    ];

    /// The reason as written in manifests.
    pub const fn as_str(self) -> &'static str {
        match self {
            DisruptionReason::Underutilized => "Underutilized",
            DisruptionReason::Empty => "Empty",
            DisruptionReason::Drifted => "Drifted",
        }
    }
}

impl fmt::Display for DisruptionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One disruption budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// The reasons this budget applies to; all reasons when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<DisruptionReason>,
    /// How many nodes may be disrupted at once: `"N"` or `"N%"` (0–100%).
    #[schemars(regex(pattern = r"^((100|[0-9]{1,2})%|[0-9]+)$"))]
    pub nodes: String,
    /// When the budget starts to apply: a 5-field cron expression in UTC or
    /// a macro (`@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
    /// `@midnight`, `@hourly`). Requires `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// How long the budget applies after each `schedule` hit (`"8h"`,
    /// `"30m"`). Requires `schedule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
}

/// The parsed `nodes` field of a [`Budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetNodes {
    /// An absolute number of nodes.
    Count(u64),
    /// A percentage (0–100) of the pool's nodes, rounded up.
    Percent(u8),
}

impl BudgetNodes {
    /// Parses `"N"` or `"N%"`.
    pub fn parse(s: &str) -> Result<Self, PolicyError> {
        let bad = |reason: String| PolicyError::InvalidBudget { reason };
        let digits_ok = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
        if let Some(pct) = s.strip_suffix('%') {
            if !digits_ok(pct) {
                return Err(bad(format!("nodes {s:?} must be \"N\" or \"N%\"")));
            }
            return match pct.parse::<u32>() {
                Ok(p) if p <= 100 => Ok(BudgetNodes::Percent(p as u8)),
                _ => Err(bad(format!("nodes {s:?} must not exceed 100%"))),
            };
        }
        if !digits_ok(s) {
            return Err(bad(format!("nodes {s:?} must be \"N\" or \"N%\"")));
        }
        s.parse::<u64>()
            .map(BudgetNodes::Count)
            .map_err(|_| bad(format!("nodes {s:?} is too large")))
    }

    /// The number of nodes this allows out of `total_nodes`.
    pub fn of(self, total_nodes: usize) -> usize {
        match self {
            BudgetNodes::Count(n) => usize::try_from(n).unwrap_or(usize::MAX),
            BudgetNodes::Percent(p) => (total_nodes as u128 * u128::from(p)).div_ceil(100) as usize,
        }
    }
}

/// Parses a budget schedule: standard 5-field cron (minute, hour,
/// day-of-month, month, day-of-week) or a macro, evaluated in UTC.
pub fn parse_schedule(schedule: &str) -> Result<Cron, PolicyError> {
    let trimmed = schedule.trim();
    let bad = |reason: String| PolicyError::InvalidSchedule {
        schedule: schedule.to_owned(),
        reason,
    };
    let pattern = if trimmed.eq_ignore_ascii_case("@midnight") {
        "@daily"
    } else {
        trimmed
    };
    if let Some(name) = pattern.strip_prefix('@') {
        const MACROS: [&str; 6] = ["yearly", "annually", "monthly", "weekly", "daily", "hourly"];
        if !MACROS.iter().any(|m| m.eq_ignore_ascii_case(name)) {
            return Err(bad(
                "unknown macro; expected one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"
                    .to_owned(),
            ));
        }
    } else if pattern.split_whitespace().count() != 5 {
        return Err(bad(
            "expected 5 fields (minute hour day-of-month month day-of-week)".to_owned(),
        ));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(pattern)
        .map_err(|e| bad(e.to_string()))
}

impl Budget {
    /// A budget allowing `nodes` (`"N"` or `"N%"`) at all times, for all reasons.
    pub fn always(nodes: impl Into<String>) -> Self {
        Budget {
            reasons: Vec::new(),
            nodes: nodes.into(),
            schedule: None,
            duration: None,
        }
    }

    /// Karpenter's default budget: `nodes: "10%"`.
    pub fn default_budget() -> Self {
        Self::always(DEFAULT_BUDGET_NODES)
    }

    /// The parsed `nodes` field.
    pub fn nodes(&self) -> Result<BudgetNodes, PolicyError> {
        BudgetNodes::parse(&self.nodes)
    }

    /// The parsed `duration`, if set.
    pub fn window(&self) -> Result<Option<Duration>, PolicyError> {
        self.duration
            .as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(Into::into)
    }

    /// Whether the budget applies to `reason` (an empty `reasons` list applies to all).
    pub fn applies_to(&self, reason: DisruptionReason) -> bool {
        self.reasons.is_empty() || self.reasons.contains(&reason)
    }

    /// Whether the budget is in force at `now`: always without a schedule;
    /// otherwise when the schedule fired in `(now - duration, now]`.
    /// `schedule` without `duration` (or the reverse) is an error.
    pub fn is_active(&self, now: DateTime<Utc>) -> Result<bool, PolicyError> {
        match (&self.schedule, self.window()?) {
            (None, None) => Ok(true),
            (Some(schedule), Some(window)) => {
                let cron = parse_schedule(schedule)?;
                let window =
                    TimeDelta::from_std(window).map_err(|_| PolicyError::InvalidBudget {
                        reason: "duration is too long".to_owned(),
                    })?;
                let Some(checkpoint) = now.checked_sub_signed(window) else {
                    return Ok(true);
                };
                match cron.find_next_occurrence(&checkpoint, false) {
                    Ok(next) => Ok(next <= now),
                    Err(_) => Ok(false),
                }
            }
            (Some(_), None) => Err(PolicyError::InvalidBudget {
                reason: "schedule requires a duration".to_owned(),
            }),
            (None, Some(_)) => Err(PolicyError::InvalidBudget {
                reason: "duration requires a schedule".to_owned(),
            }),
        }
    }

    /// How many of `total_nodes` this budget lets be disrupted at `now`.
    ///
    /// An inactive budget does not constrain and returns `total_nodes`; an
    /// active one returns its `nodes` (percentages rounded up), capped at
    /// `total_nodes`. A malformed budget fails closed and returns 0.
    pub fn allowed_disruptions(&self, total_nodes: usize, now: DateTime<Utc>) -> usize {
        match self.is_active(now) {
            Ok(false) => total_nodes,
            Ok(true) => match self.nodes() {
                Ok(nodes) => nodes.of(total_nodes).min(total_nodes),
                Err(_) => 0,
            },
            Err(_) => 0,
        }
    }
}

/// The minimum of [`Budget::allowed_disruptions`] over `budgets` that apply
/// to `reason`; `total_nodes` when none applies. `None` means the default
/// budget ([`DEFAULT_BUDGET_NODES`]); `Some(&[])` means no budgets at all.
pub fn allowed_disruptions(
    budgets: Option<&[Budget]>,
    reason: DisruptionReason,
    total_nodes: usize,
    now: DateTime<Utc>,
) -> usize {
    match budgets {
        None => Budget::default_budget().allowed_disruptions(total_nodes, now),
        Some(budgets) => budgets
            .iter()
            .filter(|b| b.applies_to(reason))
            .map(|b| b.allowed_disruptions(total_nodes, now))
            .min()
            .unwrap_or(total_nodes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    fn scheduled(nodes: &str, schedule: &str, duration: &str) -> Budget {
        Budget {
            reasons: Vec::new(),
            nodes: nodes.into(),
            schedule: Some(schedule.into()),
            duration: Some(duration.into()),
        }
    }

    #[test]
    fn nodes_parsing() {
        assert_eq!(BudgetNodes::parse("3").unwrap(), BudgetNodes::Count(3));
        assert_eq!(BudgetNodes::parse("0").unwrap(), BudgetNodes::Count(0));
        assert_eq!(BudgetNodes::parse("10%").unwrap(), BudgetNodes::Percent(10));
        assert_eq!(
            BudgetNodes::parse("100%").unwrap(),
            BudgetNodes::Percent(100)
        );
        for bad in ["101%", "", "%", "-1", "1.5", "ten", "10 %", "5%%", "+3"] {
            assert!(BudgetNodes::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn percentages_round_up() {
        assert_eq!(BudgetNodes::Percent(10).of(5), 1);
        assert_eq!(BudgetNodes::Percent(10).of(10), 1);
        assert_eq!(BudgetNodes::Percent(10).of(11), 2);
        assert_eq!(BudgetNodes::Percent(25).of(10), 3);
        assert_eq!(BudgetNodes::Percent(0).of(10), 0);
        assert_eq!(BudgetNodes::Percent(100).of(7), 7);
        assert_eq!(BudgetNodes::Percent(10).of(0), 0);
        assert_eq!(BudgetNodes::Count(4).of(2), 4);
    }

    #[test]
    fn unscheduled_budget_is_always_active() {
        let b = Budget::always("2");
        let now = at(2025, 1, 1, 12, 0, 0);
        assert!(b.is_active(now).unwrap());
        assert_eq!(b.allowed_disruptions(10, now), 2);
        assert_eq!(b.allowed_disruptions(1, now), 1, "capped at the node count");
    }

    #[test]
    fn scheduled_window_boundaries() {
        // Weekdays 09:00 UTC for 8 hours: no disruption during business hours.
        let b = scheduled("0", "0 9 * * mon-fri", "8h");
        // Wednesday 2025-01-08.
        assert!(!b.is_active(at(2025, 1, 8, 8, 59, 59)).unwrap());
        assert!(b.is_active(at(2025, 1, 8, 9, 0, 0)).unwrap());
        assert!(b.is_active(at(2025, 1, 8, 12, 30, 0)).unwrap());
        assert!(b.is_active(at(2025, 1, 8, 16, 59, 59)).unwrap());
        assert!(!b.is_active(at(2025, 1, 8, 17, 0, 0)).unwrap());
        // Saturday.
        assert!(!b.is_active(at(2025, 1, 11, 12, 0, 0)).unwrap());
        assert_eq!(b.allowed_disruptions(10, at(2025, 1, 8, 10, 0, 0)), 0);
        assert_eq!(b.allowed_disruptions(10, at(2025, 1, 8, 18, 0, 0)), 10);
    }

    #[test]
    fn window_spanning_midnight_and_sub_second_now() {
        let b = scheduled("1", "@daily", "30m");
        let just_after = at(2025, 3, 1, 0, 0, 0) + TimeDelta::milliseconds(1);
        assert!(b.is_active(just_after).unwrap());
        assert!(b.is_active(at(2025, 3, 1, 0, 29, 59)).unwrap());
        assert!(!b.is_active(at(2025, 3, 1, 0, 30, 0)).unwrap());
        let overnight = scheduled("1", "0 22 * * *", "4h");
        assert!(overnight.is_active(at(2025, 3, 2, 1, 0, 0)).unwrap());
        assert!(!overnight.is_active(at(2025, 3, 2, 2, 0, 0)).unwrap());
    }

    #[test]
    fn macros_and_bad_schedules() {
        for ok in [
            "@yearly",
            "@annually",
            "@monthly",
            "@weekly",
            "@daily",
            "@midnight",
            "@hourly",
            "*/5 * * * *",
            "0 0 1 jan *",
            "0 9 * * 1-5",
        ] {
            assert!(parse_schedule(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "@reboot",
            "@every 5m",
            "* * * *",
            "0 0 * * * *",
            "61 * * * *",
            "0 25 * * *",
            "not a cron",
            "0 0 32 * *",
        ] {
            assert!(parse_schedule(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn misconfigured_budgets_fail_closed() {
        let now = at(2025, 1, 1, 0, 0, 0);
        let no_duration = Budget {
            schedule: Some("@daily".into()),
            ..Budget::always("5")
        };
        assert!(no_duration.is_active(now).is_err());
        assert_eq!(no_duration.allowed_disruptions(10, now), 0);
        assert_eq!(Budget::always("200%").allowed_disruptions(10, now), 0);
    }

    #[test]
    fn minimum_over_applicable_budgets() {
        let now = at(2025, 1, 8, 10, 0, 0); // Wednesday 10:00 UTC
        let budgets = vec![
            Budget::always("20%"),
            Budget {
                reasons: vec![DisruptionReason::Drifted],
                ..Budget::always("1")
            },
            scheduled("0", "0 9 * * mon-fri", "8h"),
        ];
        let mut underutilized_only = scheduled("0", "0 9 * * mon-fri", "8h");
        underutilized_only.reasons = vec![DisruptionReason::Underutilized];
        let r = DisruptionReason::Empty;
        assert_eq!(allowed_disruptions(Some(&budgets), r, 20, now), 0);
        let night = at(2025, 1, 8, 23, 0, 0);
        assert_eq!(allowed_disruptions(Some(&budgets), r, 20, night), 4);
        assert_eq!(
            allowed_disruptions(Some(&budgets), DisruptionReason::Drifted, 20, night),
            1
        );
        let only_underutilized = vec![underutilized_only];
        assert_eq!(
            allowed_disruptions(
                Some(&only_underutilized),
                DisruptionReason::Underutilized,
                20,
                now
            ),
            0
        );
        assert_eq!(
            allowed_disruptions(Some(&only_underutilized), DisruptionReason::Empty, 20, now),
            20
        );
        assert_eq!(allowed_disruptions(None, r, 20, now), 2, "default 10%");
        assert_eq!(allowed_disruptions(None, r, 5, now), 1, "10% rounds up");
        assert_eq!(allowed_disruptions(Some(&[]), r, 20, now), 20);
    }
}
