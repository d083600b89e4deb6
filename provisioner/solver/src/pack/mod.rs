//! The packer behind [`crate::solve`]: shapes, classes, bins, the packing loop, right-sizing.
//!
//! Steps: (1) every (NodePool, instance type) becomes a shape with its allowed offerings;
//! (2) pending pods are grouped into classes of identical pods, each with the shapes it may use
//! and its topology rules; (3) classes are placed in order, first on room already paid for,
//! then on new nodes chosen by value per dollar; (4) each new node is re-sized to the cheapest
//! offering that holds its pods; (5) a lower bound is computed for the same pods.

mod bins;
mod classes;
mod finish;
mod packer;
mod reasons;
mod shapes;

use chrono::{DateTime, Utc};
use quartermaster_pricing::Catalog;

use crate::SolveOptions;
use crate::plan::Plan;
use crate::snapshot::ClusterSnapshot;

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
                "NodePool {}: no instance type in the catalog satisfies its requirements",
                pool.name
            ));
        }
    }
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
    let mut packer = packer::Packer::new(
        snapshot,
        &shapes,
        classes,
        groups,
        &mut zones,
        options.strategy,
    );
    packer.run(|p, c| reasons::static_reason(p.snapshot, p.shapes, &p.classes[c]));
    let choices = finish::right_size(&mut packer, &pool_shapes);
    finish::assemble(&packer, catalog, &zones, &choices, notes)
}
