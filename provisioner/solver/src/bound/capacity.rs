//! The cheapest whole copies whose capacity in one resource adds up to what all the pods ask.
//!
//! The copies of a packing hold every pod, so in each resource their capacities add up to at
//! least the pods' total request. The cheapest set of whole copies doing so in resource `r` (each
//! shape at most its copy limit, free room included) is a bound. It is solved as a cover in
//! units of `g`: each copy counts `⌈cap/g⌉` units and the demand `⌊total/g⌋`; every set of copies
//! covering the demand still covers it in units, so the rounded problem's optimum is no higher
//! and stays a bound. `g` is chosen so the table fits the budget.
//!
//! It is the integral counterpart of the resource-volume bound: forty cores of pods on a pool
//! whose cheapest machine holds thirty-two cost two machines, where the LP charges 1.25.

use super::cover::{Holder, cheapest_cover};
use super::prep::Problem;
use crate::resources::MAX_RESOURCES;

/// Largest number of demand units in one table.
const MOST_UNITS: u64 = 4096;

/// The largest, over the resources the pods request, of the cheapest whole-copy capacity
/// cover; 0 when none is computed. Each table is limited to `budget` cell updates, added to
/// `work`; a resource whose cover a quick estimate shows cannot exceed `beat` (the bound
/// already known) gets none.
pub(super) fn capacity_cover(problem: &Problem, beat: f64, budget: u64, work: &mut u64) -> f64 {
    let holders = problem.shapes.len().max(1) as u64;
    let mut best = 0.0f64;
    for r in 0..MAX_RESOURCES {
        let demand: u64 = problem
            .classes
            .iter()
            .map(|c| c.count.saturating_mul(c.requests.get(r).max(0) as u64))
            .fold(0u64, u64::saturating_add);
        if demand == 0 {
            continue;
        }
        // Units: no more than MOST_UNITS, and few enough that the table fits the budget.
        let units = MOST_UNITS.min(budget / holders).max(1);
        let g = demand.div_ceil(units).max(1);
        let need = demand / g;
        if need == 0 {
            continue;
        }
        // The cover costs at most enough copies of one unlimited shape.
        let most = problem
            .shapes
            .iter()
            .filter(|shape| shape.copies.is_none() && shape.capacity.get(r) > 0)
            .map(|shape| demand.div_ceil(shape.capacity.get(r) as u64) as f64 * shape.price)
            .fold(f64::INFINITY, f64::min);
        if most <= beat.max(best) {
            continue;
        }
        let options: Vec<Holder> = problem
            .shapes
            .iter()
            .filter_map(|shape| {
                let cap = shape.capacity.get(r).max(0) as u64;
                (cap > 0).then(|| Holder {
                    fit: cap.div_ceil(g),
                    price: shape.price,
                    copies: shape.copies,
                })
            })
            .collect();
        if let Some(c) = cheapest_cover(need, &options, budget, work) {
            best = best.max(c);
        }
    }
    best
}
