//! The single-class integral bound: the cheapest set of whole machine copies that could hold the
//! pods of one class on their own.

use super::prep::{Class, Problem};

/// One way to hold pods of the class: `fit` pods per copy (`≥ 1`), `price` per copy, at most
/// `copies` copies (`None`: unlimited).
#[derive(Debug, Clone, Copy)]
pub(super) struct Holder {
    /// Pods of the class one copy holds.
    pub fit: u64,
    /// Price of one copy.
    pub price: f64,
    /// Copies available.
    pub copies: Option<f64>,
}

/// The ways `problem`'s shapes hold pods of `class`, each copy priced at `price(shape index)`.
pub(super) fn holders(
    problem: &Problem,
    class: &Class,
    price: impl Fn(usize) -> f64,
) -> Vec<Holder> {
    class
        .shapes
        .iter()
        .map(|&(s, i)| {
            let shape = &problem.shapes[s];
            Holder {
                fit: shape.fit[i],
                price: price(s),
                copies: shape.copies,
            }
        })
        .collect()
}

/// The minimum of `Σ price_s·y_s` over integers `0 ≤ y_s ≤ copies_s` with `Σ fit_s·y_s ≥ count`,
/// by dynamic programming over the number of pods covered; `None` when no such `y` exists or
/// when the table would cost more than `budget` cell updates (the work is added to `work`).
pub(super) fn cheapest_cover(
    count: u64,
    options: &[Holder],
    budget: u64,
    work: &mut u64,
) -> Option<f64> {
    let n = usize::try_from(count).ok()?;
    // Items of a bounded knapsack: unlimited ones, and bounded ones split in powers of two.
    let mut unlimited: Vec<(usize, f64)> = Vec::new();
    let mut single: Vec<(usize, f64)> = Vec::new();
    for o in options {
        let fit = usize::try_from(o.fit.min(count)).ok()?;
        if fit == 0 {
            continue;
        }
        match o.copies {
            Some(c) if c * (fit as f64) < n as f64 => {
                // c < n here, so it fits a usize.
                let mut left = c as usize;
                let mut chunk = 1usize;
                while left > 0 {
                    let take = chunk.min(left);
                    single.push((fit * take, o.price * take as f64));
                    left -= take;
                    chunk *= 2;
                }
            }
            _ => unlimited.push((fit, o.price)),
        }
    }
    let cells = (n as u64 + 1).saturating_mul((unlimited.len() + single.len()) as u64);
    if cells > budget {
        return None;
    }
    *work += cells;
    // best[d]: cheapest cost covering at least d pods.
    let mut best = vec![f64::INFINITY; n + 1];
    best[0] = 0.0;
    for &(fit, price) in &single {
        for d in (1..=n).rev() {
            let from = best[d.saturating_sub(fit)] + price;
            if from < best[d] {
                best[d] = from;
            }
        }
    }
    for &(fit, price) in &unlimited {
        for d in 1..=n {
            let from = best[d.saturating_sub(fit)] + price;
            if from < best[d] {
                best[d] = from;
            }
        }
    }
    best[n].is_finite().then_some(best[n])
}

/// The smallest `Σ_s price_s·y_s ≥ target` over integers `0 ≤ y_s ≤ copies_s` — every plan's
/// cost is such a sum, so this raises a bound `target` to the next cost a plan can have. `levels`
/// are (price > 0, copies) pairs. `None` when the search would visit more than `budget` nodes (its
/// partial result would not be a bound).
pub(super) fn next_achievable(
    levels: &[(f64, Option<f64>)],
    target: f64,
    budget: u64,
    work: &mut u64,
) -> Option<f64> {
    if target <= 0.0 {
        return Some(0.0);
    }
    // Merge equal prices and sort dearest first: fewer choices near the root.
    let mut merged: Vec<(f64, Option<f64>)> = Vec::new();
    for &(p, c) in levels {
        match merged.iter_mut().find(|(q, _)| *q == p) {
            Some((_, copies)) => *copies = copies.zip(c).map(|(a, b)| a + b),
            None => merged.push((p, c)),
        }
    }
    merged.sort_by(|a, b| b.0.total_cmp(&a.0));
    // Allow for rounding in the sums: a sum within a relative 1e-12 of the target reaches it.
    let goal = target * (1.0 - 1e-12);
    let mut search = Search {
        levels: &merged,
        goal,
        best: f64::INFINITY,
        nodes: 0,
        budget,
    };
    search.visit(0, 0.0);
    *work += search.nodes;
    (search.nodes <= budget && search.best.is_finite()).then_some(search.best)
}

struct Search<'a> {
    levels: &'a [(f64, Option<f64>)],
    goal: f64,
    best: f64,
    nodes: u64,
    budget: u64,
}

impl Search<'_> {
    fn visit(&mut self, level: usize, sum: f64) {
        self.nodes += 1;
        if self.nodes > self.budget || sum >= self.best || self.best <= self.goal / (1.0 - 1e-12) {
            return;
        }
        if sum >= self.goal {
            self.best = sum;
            return;
        }
        let Some(&(price, copies)) = self.levels.get(level) else {
            return;
        };
        let need = ((self.goal - sum) / price).ceil();
        let most = copies.map_or(need, |c| c.min(need));
        // Fewest copies that reach the goal at this level first, then fewer (leaving the rest to
        // cheaper levels).
        let mut k = most;
        while k >= 0.0 {
            self.visit(level + 1, sum + k * price);
            if self.nodes > self.budget {
                return;
            }
            k -= 1.0;
        }
    }
}
