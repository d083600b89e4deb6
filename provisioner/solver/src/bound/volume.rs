//! The resource-volume bound: one price per unit of each resource, the same on every shape.
//!
//! The fluid relaxation `min Σ_s price_s·y_s` s.t. `Σ_s cap_sr·y_s ≥ Σ_c count_c·req_cr` for
//! every resource, `y_s ≤ copies_s`, `y ≥ 0` forgets which class may use which shape and how pods
//! split across machines. Its optimal dual, prices `ρ_r ≥ 0` per unit of resource, charges each
//! pod `u_c = Σ_r ρ_r·req_cr`; every shape satisfies `Σ_r ρ_r·cap_sr ≤ price_s (+ t_s when
//! capped)`, and since one copy's contents use at most its capacity, `φ_s(u) ≤ Σ_r ρ_r·cap_sr`: a
//! feasible dual of the LP of [`super`], and a good centre to start the column generation from.

use super::master::{Column, Master};
use super::prep::Problem;
use crate::resources::MAX_RESOURCES;

/// Per class, the price `Σ_r ρ_r·req_cr` of one pod at the fluid relaxation's optimal resource
/// prices `ρ`; `None` when some requested resource is only on capacity-limited shapes.
pub(super) fn prices(problem: &Problem, work: &mut u64) -> Option<Vec<f64>> {
    let mut demand = [0.0f64; MAX_RESOURCES];
    for class in &problem.classes {
        for (r, d) in demand.iter_mut().enumerate() {
            *d += class.count as f64 * class.requests.get(r) as f64;
        }
    }
    let resources: Vec<usize> = (0..MAX_RESOURCES).filter(|&r| demand[r] > 0.0).collect();
    if resources.is_empty() {
        return None;
    }
    let mut rhs = vec![1.0; resources.len()];
    let mut ge = vec![true; resources.len()];
    let mut copy_row = vec![None; problem.shapes.len()];
    for (s, shape) in problem.shapes.iter().enumerate() {
        if let Some(m) = shape.copies {
            copy_row[s] = Some(rhs.len());
            rhs.push(m);
            ge.push(false);
        }
    }
    // Starting columns: per resource, its cheapest unlimited shape counting that resource only.
    let mut start_cols = Vec::new();
    for (row, &r) in resources.iter().enumerate() {
        let best = problem
            .shapes
            .iter()
            .filter(|s| s.copies.is_none() && s.capacity.get(r) > 0)
            .min_by(|a, b| {
                (a.price / a.capacity.get(r) as f64)
                    .total_cmp(&(b.price / b.capacity.get(r) as f64))
            })?;
        start_cols.push(Column {
            cost: best.price,
            entries: vec![(row, best.capacity.get(r) as f64 / demand[r])],
        });
    }
    let start: Vec<Option<usize>> = (0..rhs.len())
        .map(|i| (i < resources.len()).then_some(i))
        .collect();
    let mut master = Master::new(rhs, &ge, start_cols, &start);
    for (s, shape) in problem.shapes.iter().enumerate() {
        let mut entries: Vec<(usize, f64)> = resources
            .iter()
            .enumerate()
            .filter(|&(_, &r)| shape.capacity.get(r) > 0)
            .map(|(row, &r)| (row, shape.capacity.get(r) as f64 / demand[r]))
            .collect();
        if let Some(row) = copy_row[s] {
            entries.push((row, 1.0));
        }
        master.add(Column {
            cost: shape.price,
            entries,
        });
    }
    master.solve(work, 100 * (resources.len() + problem.shapes.len()) + 1000);
    let pi = master.duals();
    let mut rho = [0.0f64; MAX_RESOURCES];
    for (row, &r) in resources.iter().enumerate() {
        rho[r] = pi[row].max(0.0) / demand[r];
    }
    let prices: Vec<f64> = problem
        .classes
        .iter()
        .map(|c| {
            let u: f64 = (0..MAX_RESOURCES)
                .map(|r| rho[r] * c.requests.get(r) as f64)
                .sum();
            c.escape.map_or(u, |e| u.min(e))
        })
        .collect();
    Some(prices)
}
