//! Offering limits ([`crate::OfferingLimit`]): at most so many new nodes on a set of offerings.
//!
//! The packer packs without them. Afterwards each new node keeps its offering while its limits
//! have room, and otherwise moves to the cheapest of its alternatives whose limits do, in its
//! own NodePool or in another of the same weight that holds its pods (nodes that would pay most
//! for moving keep the limited offerings first). The lower bound counts
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
    /// limits have room (`choices[b]`: bin `b`'s offerings, chosen first), or onto another
    /// NodePool of the same weight when that pool sells a cheaper one that holds the node's pods
    /// (as the engine does with a claim whose cheap offerings have no capacity: see
    /// `finish::elsewhere`). A node without such an alternative keeps its offering: the plan
    /// then exceeds the limit (the caller can tell from the plan's nodes).
    pub fn keep_within(
        &self,
        packer: &mut Packer<'_>,
        pool_shapes: &[Vec<usize>],
        choices: &mut [Vec<(usize, usize)>],
    ) {
        if self.is_empty() {
            return;
        }
        let price =
            |packer: &Packer<'_>, (s, o): (usize, usize)| packer.shapes[s].offerings[o].price;
        // What a node pays to leave its offering for its cheapest unlimited alternative (in its
        // pool or another): the nodes that would pay most keep the limited offerings.
        let mut order: Vec<(f64, usize)> = Vec::new();
        for (b, list) in choices.iter().enumerate() {
            let Some(&first) = list.first() else {
                continue;
            };
            if packer.bins[b].pods.is_empty() || self.of(first.0, first.1).is_empty() {
                continue;
            }
            let own = list
                .iter()
                .find(|&&(s, o)| self.of(s, o).is_empty())
                .map_or(f64::INFINITY, |&c| price(packer, c));
            let across = self
                .across(packer, pool_shapes, b, |c| self.of(c.0, c.1).is_empty())
                .map_or(f64::INFINITY, |(p, _)| p);
            order.push((own.min(across) - price(packer, first), b));
        }
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut used = vec![0u32; self.max.len()];
        for (_, b) in order {
            let list = &choices[b];
            let current = list[0];
            let pool = packer.shapes[current.0].pool;
            let open = |c: (usize, usize)| self.of(c.0, c.1).iter().all(|&l| used[l] < self.max[l]);
            // An alternative must keep the pool within its own limits, as the node does now.
            let room = |c: &(usize, usize)| {
                open(*c)
                    && (*c == current
                        || super::finish::swap_within_limits(packer, pool, current, *c))
            };
            // The cheapest alternative with room: in the node's fallbacks or, the list being
            // cut at a dozen, the rest of its pool's offerings; then in another pool when that
            // is cheaper still (a tie stays in the node's own pool).
            let own = match list.iter().position(room) {
                Some(i) => Some((price(packer, list[i]), list[i])),
                None => self.further(packer, pool_shapes, b, &room),
            };
            let across = match own {
                Some((_, c)) if c == current => None,
                _ => self.across(packer, pool_shapes, b, open),
            };
            let (shape, offering) = [own, across]
                .into_iter()
                .flatten()
                .min_by(|x, y| x.0.total_cmp(&y.0))
                .map_or(current, |(_, c)| c);
            for &l in self.of(shape, offering) {
                used[l] += 1;
            }
            if (shape, offering) == current {
                continue;
            }
            super::finish::repick(packer, b, (shape, offering));
            match choices[b].iter().position(|&c| c == (shape, offering)) {
                Some(i) => {
                    let chosen = choices[b].remove(i);
                    choices[b].insert(0, chosen);
                }
                None => choices[b] = vec![(shape, offering)],
            }
        }
    }

    /// The cheapest offering of new bin `b`'s own pool that `room` accepts, that every pod on
    /// it allows and that holds them (in the bin's zone when a pod's constraints depend on it,
    /// with the node's MIG layout); `None` in a guarded pool (minValues, maxGpuOvershoot), whose
    /// fallbacks right-sizing chose under its guards.
    fn further(
        &self,
        packer: &Packer<'_>,
        pool_shapes: &[Vec<usize>],
        b: usize,
        room: &impl Fn(&(usize, usize)) -> bool,
    ) -> Option<(f64, (usize, usize))> {
        let bin = &packer.bins[b];
        let super::bins::BinKind::New { shape, .. } = bin.kind else {
            return None;
        };
        let pool = packer.shapes[shape].pool;
        if super::guard::guarded(&packer.snapshot.node_pools[pool]) {
            return None;
        }
        let zone_fixed = bin
            .classes
            .iter()
            .any(|&(c, _)| packer.classes[c as usize].zone_sensitive);
        let layout = packer.shapes[shape].mig_config;
        let mut best: Option<(f64, (usize, usize))> = None;
        for &s2 in &pool_shapes[pool] {
            let candidate = &packer.shapes[s2];
            if best.is_some_and(|(p, _)| candidate.min_price() >= p) {
                break;
            }
            if !bin.requests.fits_in(&candidate.allocatable) || candidate.mig_config != layout {
                continue;
            }
            for (o2, off) in candidate.offerings.iter().enumerate() {
                if best.is_some_and(|(p, _)| off.price >= p)
                    || (zone_fixed && off.zone != bin.zone)
                    || !room(&(s2, o2))
                    || !bin
                        .classes
                        .iter()
                        .all(|&(c, _)| packer.classes[c as usize].allows(s2, o2))
                {
                    continue;
                }
                best = Some((off.price, (s2, o2)));
            }
        }
        best
    }

    /// The cheapest offering `open` accepts of another NodePool of the same weight that holds
    /// new bin `b`'s pods (`finish::cheapest_elsewhere`); `None` also when a pod of the bin has
    /// topology spread or pod (anti-)affinity, whose domains another pool's labels could change.
    fn across(
        &self,
        packer: &Packer<'_>,
        pool_shapes: &[Vec<usize>],
        b: usize,
        open: impl Fn((usize, usize)) -> bool,
    ) -> Option<(f64, (usize, usize))> {
        let constrained = packer.bins[b].classes.iter().any(|&(c, _)| {
            let class = &packer.classes[c as usize];
            !class.spreads.is_empty()
                || !class.affinity.is_empty()
                || !class.anti_affinity.is_empty()
        });
        if constrained {
            return None;
        }
        super::finish::cheapest_elsewhere(packer, pool_shapes, b, open)
    }
}
