//! Dantzig–Wolfe column generation for the LP of [`super`], with dual smoothing, returning the
//! best dual bound it finds.

use super::master::{Column, Master, Status};
use super::prep::Problem;
use super::pricing::{Priced, Pricer};
use super::volume;

/// Weight of the stability centre (the best dual so far) in the prices the shapes are priced at
/// (Wentges smoothing).
const SMOOTHING: f64 = 0.85;

/// Solves the LP of the module docs within `budget` units of work; returns the best dual bound
/// found and whether it is the LP optimum.
pub(super) fn solve(problem: &Problem, budget: u64, work: &mut u64) -> (f64, bool) {
    let nc = problem.classes.len();
    let mut rhs: Vec<f64> = problem.classes.iter().map(|c| c.count as f64).collect();
    let mut ge = vec![true; nc];
    let mut copy_row = vec![None; problem.shapes.len()];
    for (s, shape) in problem.shapes.iter().enumerate() {
        if let Some(m) = shape.copies {
            copy_row[s] = Some(rhs.len());
            rhs.push(m);
            ge.push(false);
        }
    }
    // Starting columns: each class alone on its cheapest unlimited shape, or its escape column.
    let mut cols = Vec::with_capacity(nc);
    for (c, class) in problem.classes.iter().enumerate() {
        let unlimited = class
            .shapes
            .iter()
            .copied()
            .filter(|&(s, _)| problem.shapes[s].copies.is_none())
            .min_by(|&(s, i), &(t, j)| {
                let a = problem.shapes[s].price / problem.shapes[s].alone(i);
                let b = problem.shapes[t].price / problem.shapes[t].alone(j);
                a.total_cmp(&b).then(s.cmp(&t))
            });
        // (A class has an escape exactly when it has no unlimited shape.)
        let col = match (class.escape, unlimited) {
            (Some(_), _) | (None, None) => Column {
                cost: class.escape.unwrap_or(0.0),
                entries: vec![(c, 1.0)],
            },
            (None, Some((s, i))) => Column {
                cost: problem.shapes[s].price,
                entries: vec![(c, problem.shapes[s].alone(i))],
            },
        };
        cols.push(col);
    }
    let start: Vec<Option<usize>> = (0..rhs.len()).map(|i| (i < nc).then_some(i)).collect();
    let rows = rhs.len();
    let mut master = Master::new(rhs, &ge, cols, &start);
    let purge_limit = 4 * (nc + problem.shapes.len()) + 64;
    let pivot_limit = 20 * rows + 500;

    let mut pricer = Pricer::new(problem.shapes.len());
    let mut priced: Vec<Priced> = vec![Priced::default(); problem.shapes.len()];
    let mut local = Vec::new();
    let mut price_all = |u: &[f64], priced: &mut Vec<Priced>, work: &mut u64| {
        for (s, shape) in problem.shapes.iter().enumerate() {
            local.clear();
            local.extend(shape.classes.iter().map(|&c| u[c]));
            priced[s] = pricer.price(s, shape, &local, work);
        }
    };
    let column = |s: usize, p: &Priced| {
        let shape = &problem.shapes[s];
        let mut entries: Vec<(usize, f64)> = p
            .point
            .iter()
            .map(|&(i, v)| (shape.classes[i], v))
            .collect();
        if let Some(r) = copy_row[s] {
            entries.push((r, 1.0));
        }
        Column {
            cost: shape.price,
            entries,
        }
    };

    // The resource-volume duals: a first bound, the first centre and the first columns.
    let mut best = 0.0f64;
    let mut center: Option<Vec<f64>> = None;
    if let Some(u) = volume::prices(problem, work) {
        price_all(&u, &mut priced, work);
        let (bound, feasible) = dual_bound(problem, &u, &priced);
        best = bound;
        center = Some(feasible);
        for (s, p) in priced.iter().enumerate() {
            if !p.point.is_empty() {
                master.add(column(s, p));
            }
        }
    }

    let mut smoothing = SMOOTHING;
    loop {
        let status = master.solve(work, pivot_limit);
        let pi = master.duals().to_vec();
        let mut u: Vec<f64> = problem
            .classes
            .iter()
            .enumerate()
            .map(|(c, class)| {
                let v = pi[c].max(0.0);
                class.escape.map_or(v, |e| v.min(e))
            })
            .collect();
        // Rounding noise on prices that should be zero only costs pricing work (and, for a class
        // no row limits, makes φ infinite): lowering any price keeps the dual bound valid.
        let floor = 1e-10 * u.iter().copied().fold(0.0, f64::max);
        u.iter_mut().filter(|v| **v <= floor).for_each(|v| *v = 0.0);
        let at: Vec<f64> = match &center {
            Some(c) if smoothing > 0.0 => c
                .iter()
                .zip(&u)
                .map(|(c, v)| smoothing * c + (1.0 - smoothing) * v)
                .collect(),
            _ => u.clone(),
        };
        price_all(&at, &mut priced, work);
        let (bound, feasible) = dual_bound(problem, &at, &priced);
        if bound > best || center.is_none() {
            best = best.max(bound);
            center = Some(feasible);
        }

        let tol = master.tolerance();
        let mut added = 0;
        for (s, p) in priced.iter().enumerate() {
            // The master's own reduced cost of the new column, at its raw duals.
            let shape = &problem.shapes[s];
            let gain: f64 = p.point.iter().map(|&(i, v)| pi[shape.classes[i]] * v).sum();
            let row = copy_row[s].map_or(0.0, |r| pi[r]);
            if shape.price - gain - row < -tol {
                master.add(column(s, p));
                added += 1;
            }
        }
        let objective = master.objective();
        let closed = objective - best <= 1e-9 * objective.abs().max(1e-9);
        if status == Status::Optimal && closed {
            return (best, true);
        }
        if added == 0 && status == Status::Optimal {
            if smoothing == 0.0 {
                // Exact pricing at the master's optimal duals found nothing: LP optimum.
                return (best, true);
            }
            // Mis-pricing: the centre moved; price at the master's duals when it happens again.
            smoothing = if smoothing < SMOOTHING {
                0.0
            } else {
                SMOOTHING / 2.0
            };
        } else if added > 0 {
            smoothing = SMOOTHING;
        }
        if *work > budget {
            return (best, false);
        }
        if master.len() > purge_limit {
            master.purge(purge_limit / 2);
        }
    }
}

/// The dual bound of the module docs at pod prices `u ≥ 0`, given each shape's certificate;
/// also the prices it charges.
///
/// Two normalisations keep every shape's constraint while making the most of it:
/// * down: an unlimited shape whose certificate exceeds its price by `θ_s > 1` divides the prices
///   of its classes by `θ_s` (each class takes the largest factor among its shapes);
/// * up: a shape whose certificate is below its price, `σ_s = price_s / certificate_s > 1`, lets
///   its classes be multiplied by `σ_s`; each class takes the smallest `σ_s` among its shapes
///   (and stays at most its escape cost), so on every shape all prices grow by at most its
///   `σ_s` and `φ_s` (monotone, positively homogeneous) stays within the price.
pub(super) fn dual_bound(problem: &Problem, u: &[f64], priced: &[Priced]) -> (f64, Vec<f64>) {
    let mut down = vec![1.0f64; u.len()];
    for (shape, p) in problem.shapes.iter().zip(priced) {
        if shape.copies.is_some() {
            continue;
        }
        let phi = p.certificate(shape, |i| u[shape.classes[i]]);
        let theta = phi / shape.price;
        if theta > 1.0 {
            for &c in &shape.classes {
                down[c] = down[c].max(theta);
            }
        }
    }
    let u2: Vec<f64> = u
        .iter()
        .zip(&down)
        .map(|(&v, &s)| if s.is_finite() { v / s } else { 0.0 })
        .collect();
    // Certificates at the scaled prices, and how far each shape's prices may grow.
    let mut up: Vec<f64> = problem
        .classes
        .iter()
        .zip(&u2)
        .map(|(c, &v)| match c.escape {
            Some(e) if v > 0.0 => (e / v).max(1.0),
            _ => f64::INFINITY,
        })
        .collect();
    let mut penalty = 0.0;
    for (shape, p) in problem.shapes.iter().zip(priced) {
        let phi = p.certificate(shape, |i| u2[shape.classes[i]]);
        let sigma = if phi < shape.price {
            shape.price / phi
        } else {
            1.0
        };
        if let Some(m) = shape.copies {
            penalty += m * (phi - shape.price).max(0.0);
        }
        for &c in &shape.classes {
            up[c] = up[c].min(sigma);
        }
    }
    let u3: Vec<f64> = u2
        .iter()
        .zip(&up)
        .map(|(&v, &g)| if g.is_finite() && g > 1.0 { v * g } else { v })
        .collect();
    let gain: f64 = problem
        .classes
        .iter()
        .zip(&u3)
        .map(|(c, &v)| c.count as f64 * v)
        .sum();
    (gain - penalty, u3)
}
