//! Offering limits ([`crate::OfferingLimit`]): at most so many new nodes on a set of offerings.
//!
//! The packer packs without them. Afterwards each new node keeps its offering while its limits
//! have room, and otherwise moves to the cheapest of its alternatives whose limits do (nodes
//! that would pay most for moving keep the limited offerings first). The lower bound counts
//! them: the offerings of one shape under the same limits are one bound shape, at their lowest
//! price, of at most the limits' smallest `max` copies.

use std::collections::HashMap;

use quartermaster_pricing::Catalog;

use super::packer::Packer;
use super::shapes::{Shape, Zones};
use crate::snapshot::{ClusterSnapshot, OfferingKey};

/// The snapshot's limits by (shape, offering).
#[derive(Debug, Default)]
pub struct OfferingLimits {
    /// The limits (indices into `max`) each limited (shape, offering) counts against, and its
    /// group: the offerings of the same shape under the same limits.
    by_offering: HashMap<(usize, usize), (Vec<usize>, usize)>,
    /// Each limit's `max`.
    max: Vec<u32>,
    /// Each group's lowest price (over all its offerings) and the smallest `max` of its limits.
    groups: Vec<(f64, u32)>,
}

impl OfferingLimits {
    /// The snapshot's limits over `shapes` (empty, and free, when it has none).
    pub fn new(
        snapshot: &ClusterSnapshot,
        catalog: &Catalog,
        shapes: &[Shape],
        zones: &Zones,
    ) -> Self {
        let mut out = Self::default();
        if snapshot.offering_limits.is_empty() {
            return out;
        }
        out.max = snapshot.offering_limits.iter().map(|l| l.max).collect();
        let mut group_of: HashMap<(usize, Vec<usize>), usize> = HashMap::new();
        for (s, shape) in shapes.iter().enumerate() {
            let ty = &catalog.instance_types()[shape.instance_type];
            for (o, offering) in shape.offerings.iter().enumerate() {
                let key = OfferingKey {
                    cloud: ty.cloud,
                    instance_type: ty.name.clone(),
                    zone: zones.name(offering.zone).to_owned(),
                    capacity_type: offering.capacity_type,
                };
                let limits: Vec<usize> = snapshot
                    .offering_limits
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.offerings.contains(&key))
                    .map(|(i, _)| i)
                    .collect();
                if limits.is_empty() {
                    continue;
                }
                let max = limits.iter().map(|&l| out.max[l]).min().unwrap_or(u32::MAX);
                let next = out.groups.len();
                let g = *group_of.entry((s, limits.clone())).or_insert(next);
                if g == next {
                    out.groups.push((offering.price, max));
                }
                out.groups[g].0 = out.groups[g].0.min(offering.price);
                out.by_offering.insert((s, o), (limits, g));
            }
        }
        out
    }

    /// Whether no offering is limited.
    pub fn is_empty(&self) -> bool {
        self.by_offering.is_empty()
    }

    /// The limits `(shape, offering)` counts against.
    fn of(&self, shape: usize, offering: usize) -> &[usize] {
        self.by_offering
            .get(&(shape, offering))
            .map_or(&[], |(limits, _)| limits.as_slice())
    }

    /// For the lower bound, the group of a limited `(shape, offering)`: the group's index, its
    /// lowest price and how many copies of the shape its offerings may take together (the
    /// smallest `max` of its limits). `None` when the offering is not limited.
    pub fn group(&self, shape: usize, offering: usize) -> Option<(usize, f64, f64)> {
        let &(_, g) = self.by_offering.get(&(shape, offering))?;
        let (price, max) = self.groups[g];
        Some((g, price, f64::from(max)))
    }

    /// Moves new nodes off offerings whose limits are full onto the cheapest alternative whose
    /// limits have room (`choices[b]`: bin `b`'s offerings, chosen first). A node without such
    /// an alternative keeps its offering: the plan then exceeds the limit (the caller can
    /// tell from the plan's nodes).
    pub fn keep_within(&self, packer: &mut Packer<'_>, choices: &mut [Vec<(usize, usize)>]) {
        if self.is_empty() {
            return;
        }
        let price =
            |packer: &Packer<'_>, (s, o): (usize, usize)| packer.shapes[s].offerings[o].price;
        // What a node pays to leave its offering for its cheapest unlimited alternative: the
        // nodes that would pay most keep the limited offerings.
        let mut order: Vec<(f64, usize)> = Vec::new();
        for (b, list) in choices.iter().enumerate() {
            let Some(&first) = list.first() else {
                continue;
            };
            if packer.bins[b].pods.is_empty() || self.of(first.0, first.1).is_empty() {
                continue;
            }
            let fallback = list
                .iter()
                .find(|&&(s, o)| self.of(s, o).is_empty())
                .map_or(f64::INFINITY, |&c| price(packer, c));
            order.push((fallback - price(packer, first), b));
        }
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut used = vec![0u32; self.max.len()];
        for (_, b) in order {
            let list = &choices[b];
            let current = list[0];
            let pool = packer.shapes[current.0].pool;
            // An alternative must keep the pool within its own limits, as the node does now.
            let room = |c: &(usize, usize)| {
                self.of(c.0, c.1).iter().all(|&l| used[l] < self.max[l])
                    && (*c == current
                        || super::finish::swap_within_limits(packer, pool, current, *c))
            };
            let pick = list.iter().position(room).unwrap_or(0);
            let (shape, offering) = list[pick];
            for &l in self.of(shape, offering) {
                used[l] += 1;
            }
            if pick == 0 {
                continue;
            }
            super::finish::repick(packer, b, (shape, offering));
            let chosen = choices[b].remove(pick);
            choices[b].insert(0, chosen);
        }
    }
}
