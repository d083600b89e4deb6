//! The per-class integral covers added up, each shape's price split among the classes that one
//! copy of it can hold together.
//!
//! Give every (shape `s`, class `c`) pair a weight `w_sc ≥ 0` such that the classes any one copy
//! of `s` can hold at once weigh at most 1 together. In a packing, charge each copy of `s` to
//! every class it hosts at `w_sc·price_s`: no copy is charged more than its price, so the charges
//! add up to at most the packing's cost. The copies hosting class `c` hold all of its pods, so
//! their charges to `c` are at least the cheapest whole-copy cover of `c` at the prices
//! `w_sc·price_s`. Adding those covers over the classes is therefore a valid bound (a class whose
//! cover is not computed adds 0, which keeps it valid).
//!
//! The weight used is `1/k_s` for every class of `s`, where `k_s` is at most how many distinct
//! classes one copy can hold at once: the number of classes `s` may host, and, per resource, the
//! number of its classes whose smallest requests still fit together. Where classes share only
//! shapes dearer than their own covers (an H100 machine that could host both an L4 workload and
//! an L40S one), the covers add up undiluted; the maximum of one cover alone, the other bound, is
//! then below the sum.

use super::cover::{cheapest_cover, holders};
use super::prep::Problem;
use crate::resources::MAX_RESOURCES;

/// The sum over `problem`'s classes of their whole-copy covers at split prices (see the module
/// docs); each cover's dynamic programme is limited to `budget` cell updates (a class over it
/// adds 0). The work is added to `work`. `0` without the programmes when a quick estimate shows
/// the sum cannot exceed `beat` (the bound already known).
pub(super) fn split_covers(problem: &Problem, beat: f64, budget: u64, work: &mut u64) -> f64 {
    let sharing: Vec<f64> = problem
        .shapes
        .iter()
        .map(|shape| classes_held_together(problem, &shape.classes, &shape.capacity) as f64)
        .collect();
    // Each cover costs at most the copies of one shape holding the whole class.
    let most: f64 = problem
        .classes
        .iter()
        .map(|class| {
            class
                .shapes
                .iter()
                .filter_map(|&(s, i)| {
                    let shape = &problem.shapes[s];
                    let fit = shape.fit[i];
                    let copies = class.count.div_ceil(fit.max(1)) as f64;
                    (fit > 0 && shape.copies.is_none_or(|c| c >= copies))
                        .then(|| copies * shape.price / sharing[s])
                })
                .fold(f64::INFINITY, f64::min)
        })
        .sum();
    *work += problem.classes.len() as u64;
    if most <= beat {
        return 0.0;
    }
    let mut total = 0.0;
    for class in &problem.classes {
        let holders = holders(problem, class, |s| problem.shapes[s].price / sharing[s]);
        if let Some(c) = cheapest_cover(class.count, &holders, budget, work) {
            total += c;
        }
    }
    total
}

/// At least as many distinct classes of `classes` as one copy of `capacity` can hold at once
/// (never less than 1): their number, and per resource how many of their requests, smallest
/// first, fit together.
fn classes_held_together(
    problem: &Problem,
    classes: &[usize],
    capacity: &crate::resources::Resources,
) -> usize {
    let mut most = classes.len().max(1);
    let mut amounts: Vec<i64> = Vec::with_capacity(classes.len());
    for r in 0..MAX_RESOURCES {
        let cap = capacity.get(r);
        amounts.clear();
        amounts.extend(
            classes
                .iter()
                .map(|&c| problem.classes[c].requests.get(r).max(0))
                .filter(|&a| a > 0),
        );
        // Classes that do not request `r` never stop each other sharing it.
        let free = classes.len() - amounts.len();
        if free >= most {
            continue;
        }
        amounts.sort_unstable();
        let mut used = 0i64;
        let mut fit = free;
        for &a in &amounts {
            used = used.saturating_add(a);
            if used > cap || fit >= most {
                break;
            }
            fit += 1;
        }
        most = most.min(fit.max(1));
    }
    most
}
