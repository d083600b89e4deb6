//! Soft constraints with a price.
//!
//! Preferred node affinity, preferred pod (anti-)affinity and `ScheduleAnyway` topology spreads
//! are wishes, not rules: honouring them can cost a little (one more zone) or a lot (a spot GPU
//! type that only exists as an eight-GPU machine). Each preference follows the policy of the
//! NodePool that governs its pods ([`crate::PreferenceRule`]):
//!
//! * `Respect`: honoured at any price (the packer relaxes one only when a pod cannot be placed
//!   otherwise), as Karpenter's `Respect`;
//! * `Ignore`: dropped before packing, as Karpenter's `Ignore`;
//! * `CostBounded` (the default): honoured while the plan costs at most the pool's budget more
//!   than the plan without them. First every such preference is tried at once; when that plan
//!   is within budget of the plan without them (or costs nothing), all are honoured. Otherwise
//!   they are added one at a time, heaviest first, each kept when the plan with it stays within
//!   its budget and leaves no more pods pending, dropped otherwise.
//!
//! Every decision is measured by solving: what a preference costs is the difference between
//! two plans the packer actually produces, never an estimate, so the figure the plan reports is
//! the one a user would see by changing the policy. The plan's lower bound is computed for the
//! constraints actually applied. This wraps the gang layer, so `plan`, `explain`, the engine
//! (provisioning and consolidation) and the simulator all follow the same rule.

mod apply;
mod found;

use chrono::{DateTime, Utc};
use quartermaster_policies::PreferencePolicy;
use quartermaster_pricing::Catalog;

use found::Preference;
pub use found::{PreferenceKind, SPREAD_WEIGHT};

use crate::plan::{Plan, PreferenceDecision};
use crate::snapshot::ClusterSnapshot;
use crate::{SolveOptions, gang};

/// Preferences decided (and priced) one by one; past this many, the lightest are weighed as
/// one batch, so a snapshot with hundreds of workloads costs a bounded number of solves.
const ONE_BY_ONE: usize = 12;

/// Dollars per hour below which two plan costs are the same.
const EPSILON: f64 = 1e-9;

/// [`crate::solve_with`]: the plan with the preferences the policies honour.
pub(crate) fn solve(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    now: DateTime<Utc>,
    options: &SolveOptions,
) -> Plan {
    if !snapshot.pending.iter().any(found::has_preferences) {
        return gang::solve(snapshot, catalog, now, options);
    }
    let preferences = found::find(snapshot);
    let trial_options = SolveOptions {
        skip_lower_bound: true,
        ..options.clone()
    };
    let solve_keeping = |keep: &[bool]| {
        gang::solve(
            &apply::keeping(snapshot, &preferences, keep),
            catalog,
            now,
            &trial_options,
        )
    };
    let mut decisions: Vec<PreferenceDecision> = preferences.iter().map(undecided).collect();
    let mut keep: Vec<bool> = preferences
        .iter()
        .map(|p| p.rule.policy == PreferencePolicy::Respect)
        .collect();
    let bounded: Vec<usize> = (0..preferences.len())
        .filter(|&i| preferences[i].rule.policy == PreferencePolicy::CostBounded)
        .collect();
    let mut current = if bounded.is_empty() {
        solve_keeping(&keep)
    } else {
        decide_bounded(
            &preferences,
            &bounded,
            &mut keep,
            &mut decisions,
            &solve_keeping,
        )
    };
    for (d, &k) in decisions.iter_mut().zip(&keep) {
        d.honoured = k;
    }
    if options.price_preferences {
        price_the_rest(
            &preferences,
            &keep,
            &current,
            &mut decisions,
            &solve_keeping,
        );
    }
    if !options.skip_lower_bound {
        // The bound for the constraints actually applied.
        current = gang::solve(
            &apply::keeping(snapshot, &preferences, &keep),
            catalog,
            now,
            options,
        );
    }
    current.preferences = decisions;
    current
}

fn undecided(p: &Preference) -> PreferenceDecision {
    PreferenceDecision {
        pod_group: p.pod_group.clone(),
        kind: p.kind,
        detail: p.detail.clone(),
        weight: p.weight,
        policy: p.rule.policy,
        pods: p.members.len(),
        honoured: false,
        cost_per_hour: None,
        leaves_pending: 0,
        decided_with: 0,
    }
}

/// Decides the `CostBounded` preferences (`bounded`, heaviest first); `keep` holds the
/// `Respect` ones on entry and every honoured one on return. Returns the plan for `keep`.
fn decide_bounded(
    preferences: &[Preference],
    bounded: &[usize],
    keep: &mut [bool],
    decisions: &mut [PreferenceDecision],
    solve_keeping: &dyn Fn(&[bool]) -> Plan,
) -> Plan {
    let budget_of = |set: &[usize]| {
        set.iter()
            .map(|&i| preferences[i].rule.budget)
            .fold(f64::INFINITY, f64::min)
    };
    let mut all = keep.to_vec();
    for &i in bounded {
        all[i] = true;
    }
    let with_all = solve_keeping(&all);
    // Room already paid for holds everything: honouring costs nothing.
    if with_all.unschedulable.is_empty() && with_all.cost_per_hour <= EPSILON {
        keep.copy_from_slice(&all);
        return with_all;
    }
    let without = solve_keeping(keep);
    if within(&with_all, &without, &without, budget_of(bounded)) {
        keep.copy_from_slice(&all);
        return with_all;
    }
    let mut current = without.clone();
    for batch in batches(bounded) {
        let mut trial_keep = keep.to_vec();
        for &i in batch {
            trial_keep[i] = true;
        }
        let trial = solve_keeping(&trial_keep);
        let ok = within(&trial, &current, &without, budget_of(batch));
        record(decisions, batch, &trial, &current);
        if ok {
            keep.copy_from_slice(&trial_keep);
            current = trial;
        }
    }
    current
}

/// Whether `trial` leaves no more pods pending than `current` and costs at most `budget` more
/// than `without` (the plan without any bounded preference).
fn within(trial: &Plan, current: &Plan, without: &Plan, budget: f64) -> bool {
    trial.unschedulable.len() <= current.unschedulable.len()
        && trial.cost_per_hour <= without.cost_per_hour * (1.0 + budget) + EPSILON
}

/// Records what the preferences of `batch` cost: `with` is the plan with them, `base` without.
fn record(decisions: &mut [PreferenceDecision], batch: &[usize], with: &Plan, base: &Plan) {
    let share = (with.cost_per_hour - base.cost_per_hour) / batch.len() as f64;
    let pending = with
        .unschedulable
        .len()
        .saturating_sub(base.unschedulable.len());
    for &i in batch {
        decisions[i].cost_per_hour = Some(clean(share));
        decisions[i].leaves_pending = pending;
        decisions[i].decided_with = batch.len() - 1;
    }
}

/// Prices every preference not measured while deciding: an honoured one by the plan without
/// it, a dropped one by the plan with it.
fn price_the_rest(
    preferences: &[Preference],
    keep: &[bool],
    current: &Plan,
    decisions: &mut [PreferenceDecision],
    solve_keeping: &dyn Fn(&[bool]) -> Plan,
) {
    let unpriced: Vec<usize> = (0..preferences.len())
        .filter(|&i| decisions[i].cost_per_hour.is_none())
        .collect();
    for honoured in [true, false] {
        let set: Vec<usize> = unpriced
            .iter()
            .copied()
            .filter(|&i| keep[i] == honoured)
            .collect();
        for batch in batches(&set) {
            let mut trial_keep = keep.to_vec();
            for &i in batch {
                trial_keep[i] = !honoured;
            }
            let other = solve_keeping(&trial_keep);
            if honoured {
                record(decisions, batch, current, &other);
            } else {
                record(decisions, batch, &other, current);
            }
        }
    }
}

/// `set` cut into the batches decided together: one by one up to [`ONE_BY_ONE`], the rest (the
/// lightest) as one.
fn batches(set: &[usize]) -> Vec<&[usize]> {
    if set.len() <= ONE_BY_ONE {
        return set.chunks(1).collect();
    }
    let (alone, rest) = set.split_at(ONE_BY_ONE - 1);
    let mut out: Vec<&[usize]> = alone.chunks(1).collect();
    out.push(rest);
    out
}

/// Rounds away floating-point dust (a cost that moved by 1e-12 moved by nothing).
fn clean(x: f64) -> f64 {
    if x.abs() < 1e-9 { 0.0 } else { x }
}
