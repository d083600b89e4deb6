//! The packer behind [`crate::solve`]: shapes, classes, bins, the packing loop, right-sizing.
//!
//! Steps: (1) every (NodePool, instance type) becomes a shape with its allowed offerings;
//! (2) pending pods are grouped into classes of identical pods, each with the shapes it may use
//! and its topology rules; (3) classes are placed in order, first on room already paid for,
//! then on new nodes chosen by value per dollar; (4) each new node is re-sized to the cheapest
//! offering that holds its pods; (5) a lower bound is computed for the same pods.

mod accelerator_notes;
mod bins;
pub(crate) mod classes;
mod finish;
pub(crate) mod guard;
mod improve;
mod limits;
pub(crate) mod offering_labels;
mod packer;
mod reasons;
pub(crate) mod shapes;

use chrono::{DateTime, Utc};
use quartermaster_pricing::Catalog;

use crate::plan::Plan;
use crate::snapshot::ClusterSnapshot;
use crate::{SolveOptions, Strategy};

/// A packed state with each new bin's offerings (chosen first) and its score (pods left
/// pending, cost).
type Packed<'a> = (packer::Packer<'a>, Vec<Vec<(usize, usize)>>, (usize, f64));

/// See [`crate::solve_with`].
pub fn solve(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    _now: DateTime<Utc>,
    options: &SolveOptions,
) -> Plan {
    let mut notes = Vec::new();
    let mut zones = shapes::Zones::default();
    let shapes = shapes::build_shapes(snapshot, catalog, &mut zones);
    for pool in &snapshot.node_pools {
        if !shapes
            .iter()
            .any(|s| snapshot.node_pools[s.pool].name == pool.name)
        {
            notes.push(format!(
                "NodePool {}: no instance type in the catalog satisfies its requirements: {}",
                pool.name,
                crate::explain::empty_pool_reason(pool, catalog)
            ));
        }
    }
    let limits = limits::OfferingLimits::new(snapshot, catalog, &shapes, &zones);
    let mut groups = classes::Groups::default();
    let classes = classes::build_classes(snapshot, &shapes, zones.len(), &mut groups, &mut notes);
    let mut pool_shapes: Vec<Vec<usize>> = vec![Vec::new(); snapshot.node_pools.len()];
    for (i, s) in shapes.iter().enumerate() {
        pool_shapes[s.pool].push(i);
    }
    for list in &mut pool_shapes {
        list.sort_by(|&a, &b| {
            shapes[a]
                .min_price()
                .total_cmp(&shapes[b].min_price())
                .then(a.cmp(&b))
        });
    }
    // Two constructive heuristics, keep the better plan: the cost-efficiency packer, and a
    // first-fit-decreasing packer (what Karpenter does, with our right-sizing). Fewer pods left
    // pending wins first, then the lower cost. The baseline strategy runs alone.
    let strategies: &[Strategy] = match options.strategy {
        Strategy::CostOptimal => &[Strategy::CostOptimal, Strategy::KarpenterGreedy],
        Strategy::KarpenterGreedy => &[Strategy::KarpenterGreedy],
    };
    let mut best: Option<Packed<'_>> = None;
    for &strategy in strategies {
        let mut packer = packer::Packer::new(
            snapshot,
            &shapes,
            &pool_shapes,
            classes.clone(),
            groups.clone(),
            &mut zones,
            strategy,
        );
        packer.run(|p, c| reasons::static_reason(p.snapshot, p.shapes, &p.classes[c]));
        let choices = finish::right_size(&mut packer, &pool_shapes);
        let score = (packer.unschedulable.len(), packer.new_cost());
        if best
            .as_ref()
            .is_none_or(|(_, _, b)| score.0 < b.0 || (score.0 == b.0 && score.1 < b.1 - 1e-9))
        {
            best = Some((packer, choices, score));
        }
    }
    let (mut packer, mut choices, _) = best.expect("at least one strategy runs");
    // The improvement phase works on the better construction (not on the baseline strategy,
    // whose job is to stand for Karpenter's greedy packing).
    // A move that leaves a node of a guarded pool (maxGpuOvershoot, minValues) outside its
    // guard undoes the phase: construction checked every node it opened.
    if options.strategy == Strategy::CostOptimal {
        let guarded = snapshot.node_pools.iter().any(guard::guarded);
        let saved = guarded.then(|| packer.save());
        improve::improve(
            &mut packer,
            &pool_shapes,
            options.search_effort.unwrap_or(100),
        );
        choices = finish::right_size(&mut packer, &pool_shapes);
        if let Some(saved) = saved
            && (0..packer.bins.len()).any(|b| packer.bin_guards(b).is_err())
        {
            packer.restore(saved);
            choices = finish::right_size(&mut packer, &pool_shapes);
        }
    }
    limits.keep_within(&mut packer, &pool_shapes, &mut choices);
    finish::assemble(
        &packer,
        catalog,
        &zones,
        &pool_shapes,
        &choices,
        notes,
        (!options.skip_lower_bound).then_some(&limits),
    )
}
