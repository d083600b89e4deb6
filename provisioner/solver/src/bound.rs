//! A lower bound on the cost of packing pods into priced machines.
//!
//! Every plan reports [`lower_bound`] so users see at most how far from optimal it can be. The
//! bound is **valid**: no integral packing — every pod of every schedulable class on one copy of
//! a shape its class allows, the pods on each copy fitting its capacity in every resource, at
//! most `⌊max_copies⌋` copies of a shape — costs less. It is at least as **tight** as the LP
//! relaxation
//!
//! ```text
//! min Σ_s price_s·y_s  s.t.  Σ_s x_cs = count_c,  Σ_c req_cr·x_cs ≤ cap_sr·y_s,  y_s ≤ max_copies_s,  x, y ≥ 0
//! ```
//!
//! when it solves its own (stronger) LP to optimality, which it does on GPU-sized inputs in well
//! under a millisecond; on very large inputs a deterministic work budget may stop it first, and
//! it then returns the best dual bound found, which starts from the resource-volume bound below.
//!
//! # The LP that is solved
//!
//! Write `z ∈ ℝ^classes` for the (fractional) contents of one copy of shape `s`. The *machine
//! polytope* `P_s` is cut out by `0 ≤ z_c ≤ upper_cs` and by rows `Σ_c g_c·z_c ≤ 1`:
//!
//! * `upper_cs = ⌊cap_s / req_c⌋` in the binding resource, and also at most `count_c` on inputs
//!   of up to a few thousand (class, shape) pairs: one copy holds at most that many pods of class
//!   `c` in any integral packing — no more than fit, nor more than exist. (On larger inputs the
//!   count cap, which makes the LP slow to converge and rarely binds there, is left out: leaving
//!   out a constraint only relaxes the LP.)
//! * for every requested resource `r`, rows `g_c = f(req_cr / cap_sr)` where `f` is the identity
//!   (the capacity row of the LP above) or a *dual-feasible function* (DFF): `f` maps `[0, 1]` to
//!   `[0, 1]` so that `Σ x_i ≤ 1` implies `Σ f(x_i) ≤ 1`. The pods on one copy use at most all of
//!   resource `r`, so their sizes `x_i = req_r/cap_r` sum to at most 1, and so do their `f(x_i)`:
//!   every such row holds for the integral contents of every copy. The DFFs used are Fekete and
//!   Schepers' `u^(k)(x) = x` if `(k+1)·x ∈ ℤ`, else `⌊(k+1)·x⌋/k` for `k = 1…4` (for `k = 1`:
//!   two pods each needing more than half a machine never share one; for the binding resource of
//!   a single class, `k = ⌊cap/req⌋` charges `1/k` of a machine per pod), and the threshold
//!   function that counts a pod larger than `cap − t` as a whole machine, one smaller than `t` as
//!   nothing and the others by size (`2t ≤ cap`: a pod larger than `cap − t` leaves less than `t`
//!   to the others, which then count nothing). Both are evaluated in exact integer arithmetic
//!   (and checked against all small bins by a test).
//!
//! The LP is then `min Σ_s price_s·Σ_v λ_sv` over multipliers `λ ≥ 0` of points `v ∈ P_s`
//! covering every class (`Σ λ_sv·v_c ≥ count_c`) with `Σ_v λ_sv ≤ ⌊max_copies_s⌋`. Every integral
//! packing is a solution (each bought copy is one point of its shape's polytope with `λ = 1`), so
//! the LP optimum is a valid bound; with the identity rows alone and no `upper` it is exactly the
//! LP above (a test checks this against a textbook simplex), and every other row or bound only
//! cuts it further.
//!
//! # Why the number returned is valid even when the LP is not solved to optimality
//!
//! The value returned comes from a *dual* solution, never from a primal one. Weak duality: for
//! prices `u_c ≥ 0` per pod of each class and `t_s ≥ 0` per capped shape with
//! `φ_s(u) := max_{z ∈ P_s} u·z ≤ price_s + t_s` (and `t_s = 0` for unlimited shapes),
//! `Σ_c count_c·u_c − Σ_s ⌊max_copies_s⌋·t_s` is at most the LP optimum. `φ_s` is bounded from
//! above by a certificate — row weights `w ≥ 0`, and `φ_s(u) ≤ Σ_j w_j + Σ_c upper_cs·(u_c −
//! Σ_j w_j·g_jc)⁺` for any `u` by LP duality — so rounding inside the pricing simplex cannot
//! make the bound invalid. For an unlimited shape whose certificate exceeds its price by a factor
//! `θ_s > 1`, the prices of its classes are divided by `θ_s` (`φ_s` is monotone and positively
//! homogeneous, so this makes the shape feasible again); a shape whose certificate is below its
//! price by a factor `σ_s` lets its classes' prices grow by up to `σ_s` (each class by the
//! smallest factor among its shapes); capped shapes pay `t_s = (certificate − price_s)⁺`. The
//! result is dual feasible up to floating-point rounding, and a relative margin of 10⁻⁹ is taken
//! off for that.
//!
//! The duals come from Dantzig–Wolfe column generation: a restricted master LP (a revised
//! simplex with a dense basis inverse) over the points found so far, and per shape a pricing LP
//! (a bounded primal simplex, warm-started) finding the point of `P_s` that pays most at the
//! current duals, smoothed towards the best duals so far (Wentges). When no point pays, the duals
//! are optimal and the bound is the LP optimum ([`BoundMethod::LinearProgram`]).
//!
//! The first duals are the **resource-volume** bound: the fluid relaxation `min Σ_s price_s·y_s`
//! s.t. `Σ_s cap_sr·y_s ≥ Σ_c count_c·req_cr` per resource, `y_s ≤ max_copies_s`, has optimal
//! dual prices `ρ_r ≥ 0` per unit of resource with `Σ_r ρ_r·cap_sr ≤ price_s (+ t_s)`; charging a
//! pod `u_c = Σ_r ρ_r·req_cr` keeps `φ_s(u) ≤ Σ_r ρ_r·cap_sr`, so it is dual feasible. When the
//! work budget runs out before the LP optimum is proven, the best dual bound so far is returned
//! ([`BoundMethod::ResourceVolume`]); on Karpenter-sized inputs it is within a few tenths of a
//! percent of the LP optimum.
//!
//! # Reductions and extra arguments, each valid
//!
//! * A class with no shape, or whose shapes none can hold even one of its pods, is
//!   unschedulable and ignored; a class that unlimited free room (price 0, no copy limit) or only
//!   free room can host adds nothing to any plan's cost and is dropped. Dropping pods never
//!   raises the optimum. Out-of-range and repeated shape indices are ignored; negative requests,
//!   and negative or NaN prices, read as 0; a shape of infinite price is never worth buying.
//! * Classes with equal requests and equal shape lists are merged: their packings are the same.
//! * A shape is dropped when another *unlimited* shape is no dearer, at least as large in every
//!   resource its classes request and allowed for all of its classes: every copy of the first in
//!   a packing can be swapped for a copy of the second without raising its cost, so the optimum
//!   is unchanged.
//! * A class whose every shape is capacity-limited may have more pods than those shapes hold;
//!   the LP then gets an *escape* column placing one such pod nowhere at the dearest per-pod cost
//!   its shapes could charge in the LP. Adding a column only relaxes the LP. (For a class that
//!   only free room may host the escape costs 0: such classes are dropped above.)
//! * Per class, the cheapest set of *whole* copies holding its pods alone (a small knapsack
//!   solved by dynamic programming) is also a bound: in any packing the copies that host pods of
//!   the class cost at least that. The maximum of valid bounds is valid.
//! * Those covers also *add up* once each shape's price is split among the classes one copy of
//!   it can hold together (`split`): a copy charged to several classes is charged no more than
//!   its price in all.
//! * Every packing costs `Σ_s price_s·y_s` for whole numbers of copies `y_s`: the bound is raised
//!   to the smallest such sum that reaches it (a bounded search, skipped when it is too large).
//!
//! The result is a pure, deterministic function of the input: no clock, no randomness, and the
//! budget counts operations, not time.

mod capacity;
mod cg;
mod cover;
mod master;
mod parts;
mod prep;
mod pricing;
mod split;
#[cfg(test)]
mod tests;
mod volume;

use crate::resources::Resources;

/// A group of identical pods.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundClass {
    /// How many pods.
    pub count: u64,
    /// What one pod requests.
    pub requests: Resources,
    /// Indices (into [`BoundInput::shapes`]) of the shapes that may host these pods. An empty
    /// list marks the pods unschedulable: they are ignored.
    pub shapes: Vec<usize>,
}

/// A machine one can buy (price > 0), or existing free room (price 0, `max_copies` `Some(1.0)`).
#[derive(Debug, Clone, PartialEq)]
pub struct BoundShape {
    /// Dollars per hour of one copy (a negative or NaN price reads as 0).
    pub price: f64,
    /// What one copy holds.
    pub capacity: Resources,
    /// How many copies may be used (rounded down); `None`: any number.
    pub max_copies: Option<f64>,
}

/// What to bound.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BoundInput {
    /// The pods, by class.
    pub classes: Vec<BoundClass>,
    /// The machines and free room they may use.
    pub shapes: Vec<BoundShape>,
}

/// How a [`LowerBound`] was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundMethod {
    /// The strengthened LP relaxation was solved to optimality (and the result maybe raised
    /// further by the integral arguments): at least the plain LP relaxation.
    LinearProgram,
    /// The work budget ran out first: the best dual-feasible bound found, starting from the
    /// resource-volume bound (one price per unit of each resource); valid, but it may be below
    /// the LP relaxation.
    ResourceVolume,
}

/// A lower bound on the cost of any plan that places the pods.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LowerBound {
    /// Dollars per hour.
    pub dollars_per_hour: f64,
    /// How it was obtained.
    pub method: BoundMethod,
}

/// Knobs of the computation (fixed in production; tests switch the strengthening off to compare
/// against the plain LP).
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// Use the integrality arguments: fit bounds, DFF rows, per-class covers, price rounding.
    pub strengthen: bool,
    /// Fekete–Schepers rows `u^(1) … u^(dff_levels)` per resource.
    pub dff_levels: u32,
    /// Threshold rows per resource, for the largest pod sizes above half a machine.
    pub large_rows: usize,
    /// Cap each class's pods per copy at the class's count, not only at what fits.
    pub count_caps: bool,
    /// Deterministic work budget (roughly floating-point operations).
    pub work_budget: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            strengthen: true,
            dff_levels: 4,
            large_rows: 2,
            count_caps: true,
            work_budget: 200_000_000,
        }
    }
}

/// Relative safety margin against floating-point rounding.
const MARGIN: f64 = 1e-9;

/// A lower bound on the cost of any integral packing of `input`'s pods into copies of its shapes.
/// Pure and deterministic; see the [module docs](self) for why it is valid.
pub fn lower_bound(input: &BoundInput) -> LowerBound {
    lower_bound_with(input, &Options::default())
}

/// [`lower_bound`] with explicit [`Options`].
pub(crate) fn lower_bound_with(input: &BoundInput, options: &Options) -> LowerBound {
    let problem = prep::reduce(input, options);
    if problem.classes.is_empty() {
        return LowerBound {
            dollars_per_hour: 0.0,
            method: BoundMethod::LinearProgram,
        };
    }
    let mut work = 0u64;
    let mut value = 0.0;
    let mut converged = true;
    let mut levels: Vec<(f64, Option<f64>)> = Vec::new();
    let parts = parts::split(problem);
    let several = parts.len() > 1;
    for part in &parts {
        let (v, c) = part_bound(part, options, &mut work);
        value += v;
        converged &= c;
        levels.extend(price_levels(part));
    }
    // Each part's cost is already raised to one its own shapes can add up to; the sum of the
    // parts to one all of them can.
    if options.strengthen && several {
        value = raise_to_achievable(value, &levels, &mut work);
    }
    let method = if converged {
        BoundMethod::LinearProgram
    } else {
        BoundMethod::ResourceVolume
    };
    LowerBound {
        dollars_per_hour: value,
        method,
    }
}

/// The bound of one independent part (see `parts`) and whether its LP was solved to optimality.
fn part_bound(problem: &prep::Problem, options: &Options, work: &mut u64) -> (f64, bool) {
    let (lp, converged) = cg::solve(problem, options.work_budget, work);
    let mut value = (lp * (1.0 - MARGIN)).max(0.0);
    if !options.strengthen {
        return (value, converged);
    }
    for class in &problem.classes {
        let holders = cover::holders(problem, class, |s| problem.shapes[s].price);
        if let Some(c) = cover::cheapest_cover(class.count, &holders, 200_000, work) {
            value = value.max(c * (1.0 - MARGIN));
        }
    }
    if problem.classes.len() > 1 {
        let added = split::split_covers(problem, value, 200_000, work);
        value = value.max(added * (1.0 - MARGIN));
    }
    let whole = capacity::capacity_cover(problem, value, 200_000, work);
    value = value.max(whole * (1.0 - MARGIN));
    let levels: Vec<(f64, Option<f64>)> = price_levels(problem).collect();
    (raise_to_achievable(value, &levels, work), converged)
}

/// The (price, copies) of every shape one pays for: every plan's cost is a sum of such prices.
fn price_levels(problem: &prep::Problem) -> impl Iterator<Item = (f64, Option<f64>)> + '_ {
    problem
        .shapes
        .iter()
        .filter(|s| s.price > 0.0)
        .map(|s| (s.price, s.copies))
}

/// `value` raised to the next cost a plan buying copies at `levels` (price, copies) can have.
fn raise_to_achievable(value: f64, levels: &[(f64, Option<f64>)], work: &mut u64) -> f64 {
    // Rounding noise in the LP value (an LP optimum of 0 may come out as 1e-17) must not
    // reach the next price: aim a little lower.
    let noise = 1e-9 * levels.iter().map(|l| l.0).fold(value, f64::max);
    match cover::next_achievable(levels, value - noise, 50_000, work) {
        Some(v) => value.max(v * (1.0 - MARGIN)),
        None => value,
    }
}
