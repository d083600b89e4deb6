//! After packing: each new node gets the cheapest offering that still holds its pods (the
//! others become its fallbacks), and the plan is assembled with its lower bound.

use std::collections::HashMap;
use std::rc::Rc;

use quartermaster_policies::{Requirement, Requirements};
use quartermaster_pricing::Catalog;

use crate::bound::{BoundClass, BoundInput, BoundShape, lower_bound};
use crate::plan::{ExistingPlacement, NewNode, OfferingChoice, Plan, Relaxation, Unschedulable};
use crate::pod::ZONE;

use super::accelerator_notes;
use super::bins::BinKind;
use super::classes::CompatSet;
use super::classes::Topology;
use super::limits::OfferingLimits;
use super::packer::Packer;
use super::shapes::Zones;
use crate::resources::Resources;

/// How many fallback offerings each new node carries.
const MAX_ALTERNATIVES: usize = 12;

/// Re-picks every new node's offering: the cheapest (shape, offering) of the same pool that
/// every class on it allows and that holds its requests (the zone stays when a pod's
/// constraints depend on it). Returns, per bin, the ordered alternatives (chosen first).
pub fn right_size(packer: &mut Packer<'_>, pool_shapes: &[Vec<usize>]) -> Vec<Vec<(usize, usize)>> {
    let mut choices = vec![Vec::new(); packer.bins.len()];
    #[allow(clippy::needless_range_loop)] // the body re-borrows `packer` mutably
    for b in 0..packer.bins.len() {
        let BinKind::New { shape, offering } = packer.bins[b].kind else {
            continue;
        };
        let bin = &packer.bins[b];
        let pool = packer.shapes[shape].pool;
        let zone_fixed = bin
            .classes
            .iter()
            .any(|&(c, _)| packer.classes[c as usize].zone_sensitive);
        let guarded = super::guard::guarded(&packer.snapshot.node_pools[pool]);
        let limits = &packer.snapshot.node_pools[pool].limits;
        let limited =
            limits.max_hourly_cost.is_some() || limits.resources.0.iter().any(|&l| l != i64::MAX);
        let mut found: Vec<(f64, usize, usize)> = Vec::new();
        for &s2 in &pool_shapes[pool] {
            let shape2 = &packer.shapes[s2];
            if !bin.requests.fits_in(&shape2.allocatable) {
                continue;
            }
            for (o2, off) in shape2.offerings.iter().enumerate() {
                if zone_fixed && off.zone != bin.zone {
                    continue;
                }
                if bin
                    .classes
                    .iter()
                    .all(|&(c, _)| packer.classes[c as usize].allows(s2, o2))
                    && (!limited || swap_within_limits(packer, pool, (shape, offering), (s2, o2)))
                {
                    found.push((off.price, s2, o2));
                }
            }
            // A guarded pool looks at every offering: the overshoot guard compares with the
            // cheapest within its bound, minValues counts distinct values.
            if !guarded && found.len() > MAX_ALTERNATIVES * 4 {
                break;
            }
        }
        found.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let pool_spec = &packer.snapshot.node_pools[pool];
        super::guard::within_overshoot(pool_spec, packer.shapes, &bin.requests, &mut found);
        let mut all_found = found.clone();
        found.dedup_by(|a, b| {
            a.1 == b.1
                && packer.shapes[a.1].offerings[a.2].zone == packer.shapes[b.1].offerings[b.2].zone
                && a.0 == b.0
        });
        // A node's MIG layout is part of its claim: the fallbacks keep the chosen one.
        if let Some(&(_, first, _)) = found.first() {
            let layout = packer.shapes[first].mig_config;
            found.retain(|&(_, s, _)| packer.shapes[s].mig_config == layout);
            all_found.retain(|&(_, s, _)| packer.shapes[s].mig_config == layout);
        }
        let mut list: Vec<(usize, usize)> = found.iter().map(|&(_, s, o)| (s, o)).collect();
        if list.is_empty() {
            list.push((shape, offering));
        }
        list.truncate(MAX_ALTERNATIVES + 1);
        super::guard::extend_for_min_values(pool_spec, packer.shapes, &all_found, &mut list);
        let (s_new, o_new) = list[0];
        if (s_new, o_new) != (shape, offering) {
            repick(packer, b, (s_new, o_new));
        }
        choices[b] = list;
    }
    choices
}

/// Gives new bin `b` the node `to` (shape, offering) instead of its own, moving its pool's
/// usage (resources, nodes and hourly cost) with it: to the other pool when `to` is another
/// pool's.
pub(super) fn repick(packer: &mut Packer<'_>, b: usize, to: (usize, usize)) {
    let BinKind::New { shape, offering } = packer.bins[b].kind else {
        return;
    };
    let (old, new) = (&packer.shapes[shape], &packer.shapes[to.0]);
    let (old_price, new_price) = (
        old.offerings[offering].list_price,
        new.offerings[to.1].list_price,
    );
    if old.pool == new.pool {
        let usage = &mut packer.usage[old.pool];
        usage.resources -= old.capacity;
        usage.resources += new.capacity;
        usage.hourly_cost += new_price - old_price;
    } else {
        let usage = &mut packer.usage[old.pool];
        usage.resources -= old.capacity;
        usage.hourly_cost -= old_price;
        usage.nodes = usage.nodes.saturating_sub(1);
        let usage = &mut packer.usage[new.pool];
        usage.resources += new.capacity;
        usage.hourly_cost += new_price;
        usage.nodes += 1;
    }
    let bin = &mut packer.bins[b];
    bin.kind = BinKind::New {
        shape: to.0,
        offering: to.1,
    };
    bin.zone = new.offerings[to.1].zone;
    bin.free = new.allocatable.saturating_sub(&bin.requests);
}

/// Whether the bin's node may be `to` (shape, offering) instead of `from` without passing a
/// limit of `pool` that `from` kept to: a larger type the re-pick finds cheaper must not take
/// the pool past its resource limits or `maxHourlyCost` (nor may a fallback offering).
pub(super) fn swap_within_limits(
    packer: &Packer<'_>,
    pool: usize,
    from: (usize, usize),
    to: (usize, usize),
) -> bool {
    let limits = &packer.snapshot.node_pools[pool].limits;
    let usage = &packer.usage[pool];
    let (old, new) = (&packer.shapes[from.0], &packer.shapes[to.0]);
    let resources_ok = (0..packer.snapshot.resources.len()).all(|slot| {
        let limit = limits.resources.get(slot);
        let (was, will) = (old.capacity.get(slot), new.capacity.get(slot));
        limit == i64::MAX
            || will <= was
            || usage
                .resources
                .get(slot)
                .saturating_sub(was)
                .saturating_add(will)
                <= limit
    });
    let cost_ok = limits.max_hourly_cost.is_none_or(|max| {
        let was = old.offerings[from.1].list_price;
        let will = new.offerings[to.1].list_price;
        will <= was || usage.hourly_cost - was + will <= max + 1e-9
    });
    resources_ok && cost_ok
}

/// The price of the cheapest offering of *another* NodePool of the same weight that every pod
/// of new bin `b` may use, that holds them and that keeps that pool within its limits: a
/// fallback of the bin's own pool dearer than it is left off the claim. When the claim's cheap
/// offerings have no capacity, its pods then go back to the solver, which buys from the other
/// pool (a Karpenter NodeClaim falls back within its NodePool whatever another one offers).
/// `None` (no ceiling) for a bin whose pods are zone-bound or in a gang, in a pool with
/// `minValues` or an overshoot guard, or with no other pool of its weight.
fn elsewhere(packer: &Packer<'_>, pool_shapes: &[Vec<usize>], b: usize) -> Option<f64> {
    cheapest_elsewhere(packer, pool_shapes, b, |_| true).map(|(price, _)| price)
}

/// [`elsewhere`]'s offering: its price and (shape, offering), among the offerings `open`
/// accepts.
pub(super) fn cheapest_elsewhere(
    packer: &Packer<'_>,
    pool_shapes: &[Vec<usize>],
    b: usize,
    open: impl Fn((usize, usize)) -> bool,
) -> Option<(f64, (usize, usize))> {
    let bin = &packer.bins[b];
    let BinKind::New { shape, .. } = bin.kind else {
        return None;
    };
    let pool = packer.shapes[shape].pool;
    let tier = packer.tiers.iter().find(|t| t.contains(&pool))?;
    if tier.len() < 2
        || super::guard::guarded(&packer.snapshot.node_pools[pool])
        || bin
            .classes
            .iter()
            .any(|&(c, _)| packer.classes[c as usize].zone_sensitive)
        || bin
            .pods
            .iter()
            .any(|&p| packer.snapshot.pending[p].gang.is_some())
    {
        return None;
    }
    let mut best: Option<(f64, (usize, usize))> = None;
    let below = |best: &Option<(f64, (usize, usize))>, price: f64| best.is_none_or(|b| price < b.0);
    for &other in tier.iter().filter(|&&q| q != pool) {
        let limits = &packer.snapshot.node_pools[other].limits;
        let usage = &packer.usage[other];
        if limits.nodes.is_some_and(|most| usage.nodes >= most) {
            continue;
        }
        for &s2 in &pool_shapes[other] {
            let candidate = &packer.shapes[s2];
            if !below(&best, candidate.min_price()) {
                break;
            }
            if !bin.requests.fits_in(&candidate.allocatable)
                || !bin
                    .classes
                    .iter()
                    .all(|&(c, _)| packer.classes[c as usize].compat_for(s2).is_some())
            {
                continue;
            }
            let room = (0..packer.snapshot.resources.len()).all(|slot| {
                let limit = limits.resources.get(slot);
                limit == i64::MAX
                    || usage
                        .resources
                        .get(slot)
                        .saturating_add(candidate.capacity.get(slot))
                        <= limit
            });
            if !room {
                continue;
            }
            for (o2, off) in candidate.offerings.iter().enumerate() {
                if !below(&best, off.price) {
                    break;
                }
                let affordable = limits
                    .max_hourly_cost
                    .is_none_or(|max| usage.hourly_cost + off.list_price <= max + 1e-9);
                if affordable
                    && open((s2, o2))
                    && bin
                        .classes
                        .iter()
                        .all(|&(c, _)| packer.classes[c as usize].allows(s2, o2))
                {
                    best = Some((off.price, (s2, o2)));
                    break;
                }
            }
        }
    }
    best
}

fn choice(
    packer: &Packer<'_>,
    catalog: &Catalog,
    zones: &Zones,
    shape: usize,
    offering: usize,
) -> OfferingChoice {
    let s = &packer.shapes[shape];
    let o = &s.offerings[offering];
    OfferingChoice {
        instance_type: catalog.instance_types()[s.instance_type].name.clone(),
        zone: zones.name(o.zone).to_owned(),
        capacity_type: o.capacity_type,
        price_per_hour: o.list_price,
    }
}

/// Turns the packed state into a [`Plan`].
pub fn assemble(
    packer: &Packer<'_>,
    catalog: &Catalog,
    zones: &Zones,
    pool_shapes: &[Vec<usize>],
    choices: &[Vec<(usize, usize)>],
    notes: Vec<String>,
    bound_with: Option<&OfferingLimits>,
) -> Plan {
    let snapshot = packer.snapshot;
    let mut plan = Plan {
        notes,
        ..Plan::default()
    };
    let mut accelerated = Vec::new();
    for (b, bin) in packer.bins.iter().enumerate() {
        if bin.pods.is_empty() {
            continue;
        }
        let pods = bin
            .pods
            .iter()
            .map(|&p| snapshot.pending[p].id.clone())
            .collect();
        match bin.kind {
            BinKind::Existing(n) => plan.existing.push(ExistingPlacement {
                node: snapshot.nodes[n].name.clone(),
                in_flight: snapshot.nodes[n].in_flight,
                pods,
            }),
            BinKind::New { shape, offering } => {
                let pool = &snapshot.node_pools[packer.shapes[shape].pool];
                let chosen = choice(packer, catalog, zones, shape, offering);
                let ceiling = elsewhere(packer, pool_shapes, b);
                let alternatives: Vec<OfferingChoice> = choices[b]
                    .iter()
                    .filter(|&&(s, o)| (s, o) != (shape, offering))
                    .filter(|&&(s, o)| {
                        ceiling.is_none_or(|c| packer.shapes[s].offerings[o].price <= c)
                    })
                    .map(|&(s, o)| choice(packer, catalog, zones, s, o))
                    .collect();
                let mut requirements: Requirements = pool.requirements.clone();
                let mut types: Vec<String> = vec![chosen.instance_type.clone()];
                types.extend(alternatives.iter().map(|a| a.instance_type.clone()));
                types.dedup();
                requirements.add(Requirement::in_values(crate::INSTANCE_TYPE_LABEL, types));
                if let Some(layout) = packer.shapes[shape].mig_config {
                    requirements.add(Requirement::in_values(
                        super::shapes::MIG_CONFIG_LABEL,
                        [layout],
                    ));
                }
                if bin
                    .classes
                    .iter()
                    .any(|&(c, _)| packer.classes[c as usize].zone_sensitive)
                {
                    requirements.add(Requirement::in_values(ZONE, [chosen.zone.clone()]));
                }
                plan.cost_per_hour += chosen.price_per_hour;
                let accelerator_note =
                    accelerator_notes::node_note(packer, catalog, zones, pool_shapes, b);
                if let Some(note) = &accelerator_note {
                    accelerated.push((
                        pool.name.clone(),
                        chosen.instance_type.clone(),
                        chosen.zone.clone(),
                        note.clone(),
                    ));
                }
                let accelerator_note = accelerator_note.map(|n| n.sentence());
                plan.new_nodes.push(NewNode {
                    node_pool: pool.name.clone(),
                    cloud: pool.cloud,
                    offering: chosen,
                    alternatives,
                    pods,
                    requests: bin.requests,
                    requirements,
                    accelerator_note,
                });
            }
        }
    }
    plan.notes
        .extend(accelerator_notes::summarise(&accelerated));
    for (pod, reason) in &packer.unschedulable {
        plan.unschedulable.push(Unschedulable {
            pod: snapshot.pending[*pod].id.clone(),
            reason: reason.clone(),
        });
    }
    plan.unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));
    for (pod, relaxed) in &packer.relaxed {
        plan.relaxations.push(Relaxation {
            pod: snapshot.pending[*pod].id.clone(),
            relaxed: relaxed.clone(),
        });
    }
    if let Some(limits) = bound_with {
        plan.lower_bound_per_hour = bound(packer, limits).min(plan.cost_per_hour);
    }
    plan
}

/// A lower bound on the cost of placing the pods this plan places.
///
/// Each bound shape is a (shape, cheapest offering a class may use) pair, so a class limited to
/// on-demand is never priced at spot. Offerings under [`crate::OfferingLimit`]s are bound shapes
/// of their own (see [`OfferingLimits::group`]), beside the next offerings up to the first
/// unlimited one; each shape of a limit shared by several shapes gets all of it, a relaxation,
/// so the bound stays valid.
fn bound(packer: &Packer<'_>, limits: &OfferingLimits) -> f64 {
    let plain = lower_bound(&bound_input(packer, false, limits)).dollars_per_hour;
    // The per-node caps make the column generation much slower, so with them only the
    // resource-volume bound (plus the integral arguments) is computed: a valid bound, and the
    // larger of two valid bounds is valid.
    let capped = crate::bound::lower_bound_with(
        &bound_input(packer, true, limits),
        &crate::bound::Options {
            work_budget: 0,
            strengthen: false,
            ..crate::bound::Options::default()
        },
    )
    .dollars_per_hour;
    plain.max(capped)
}

/// The bound's input for the pods this plan places; `caps`: with the per-node caps of
/// [`node_caps`].
fn bound_input(packer: &Packer<'_>, caps: bool, limits: &OfferingLimits) -> BoundInput {
    let (extra, per_copy) = if caps {
        node_caps(packer)
    } else {
        (vec![Resources::ZERO; packer.classes.len()], Resources::ZERO)
    };
    let mut shapes: Vec<BoundShape> = Vec::new();
    let mut index: HashMap<(u32, u16), usize> = HashMap::new();
    let mut limited_index: HashMap<usize, usize> = HashMap::new();
    let mut existing_index: HashMap<usize, usize> = HashMap::new();
    let mut placed = vec![0u64; packer.classes.len()];
    for bin in &packer.bins {
        for &(c, n) in &bin.classes {
            placed[c as usize] += u64::from(n);
        }
    }
    // Pods with the same requests, shapes and existing nodes are one class for the bound
    // (labels and topology do not enter it).
    let mut merged: HashMap<(Resources, *const CompatSet, Vec<usize>), usize> = HashMap::new();
    let mut classes: Vec<BoundClass> = Vec::new();
    for (c, class) in packer.classes.iter().enumerate() {
        if placed[c] == 0 {
            continue;
        }
        let requests = class.requests + extra[c];
        let key = (requests, Rc::as_ptr(&class.compat), class.existing.clone());
        if let Some(&i) = merged.get(&key) {
            classes[i].count += placed[c];
            continue;
        }
        let mut compatible = Vec::with_capacity(class.compat.list.len());
        for sc in &class.compat.list {
            let shape = &packer.shapes[sc.shape as usize];
            if !class.requests.fits_in(&shape.allocatable) {
                continue;
            }
            // The cheapest allowed offering; while it is limited, the next ones too.
            for &o in &sc.offerings {
                let capacity = shape.allocatable + per_copy;
                let Some((group, price, max)) = limits.group(sc.shape as usize, o as usize) else {
                    let i = *index.entry((sc.shape, o)).or_insert_with(|| {
                        shapes.push(BoundShape {
                            price: shape.offerings[o as usize].price,
                            capacity,
                            max_copies: None,
                        });
                        shapes.len() - 1
                    });
                    compatible.push(i);
                    break;
                };
                let i = *limited_index.entry(group).or_insert_with(|| {
                    shapes.push(BoundShape {
                        price,
                        capacity,
                        max_copies: Some(max),
                    });
                    shapes.len() - 1
                });
                if !compatible.contains(&i) {
                    compatible.push(i);
                }
            }
        }
        for (b, bin) in packer.bins.iter().enumerate() {
            let BinKind::Existing(n) = bin.kind else {
                break;
            };
            if class.existing.contains(&n) {
                let i = *existing_index.entry(b).or_insert_with(|| {
                    shapes.push(BoundShape {
                        price: 0.0,
                        capacity: bin.free + bin.requests + per_copy,
                        max_copies: Some(1.0),
                    });
                    shapes.len() - 1
                });
                compatible.push(i);
            }
        }
        merged.insert(key, classes.len());
        classes.push(BoundClass {
            count: placed[c],
            requests,
            shapes: compatible,
        });
    }
    BoundInput { classes, shapes }
}

/// Per-node caps the pods' hard hostname rules impose, as extra resources in the spare slots of
/// the resource vectors: the pods of the classes with required hostname anti-affinity towards a
/// group they belong to take one unit of a slot whose every node has 1 (no two share a node),
/// and the pods under a required hostname spread rule on a group they belong to take one unit
/// of a slot whose every node has the largest maxSkew among them (the packer counts a node's
/// domain against 0, the count on a node no pod is on, as Karpenter does). Returns each class's
/// extra requests and what every node holds. The caps that bind most (pods per unit of cap) get
/// the slots when there are more caps than spare slots; leaving a cap out only weakens the bound.
fn node_caps(packer: &Packer<'_>) -> (Vec<Resources>, Resources) {
    // (group, anti-affinity?) -> (classes, cap, pods)
    let mut caps: std::collections::BTreeMap<(usize, bool), (Vec<usize>, i64, u64)> =
        std::collections::BTreeMap::new();
    for (c, class) in packer.classes.iter().enumerate() {
        let pods = class.pods.len() as u64;
        for r in class.anti_affinity.iter() {
            if r.active
                && !r.soft
                && r.topology == Topology::Hostname
                && class.member_of.contains(&r.group)
            {
                let e = caps.entry((r.group, true)).or_insert((Vec::new(), 1, 0));
                e.0.push(c);
                e.2 += pods;
            }
        }
        for r in class.spreads.iter() {
            if r.active
                && !r.soft
                && r.topology == Topology::Hostname
                && class.member_of.contains(&r.group)
            {
                let e = caps.entry((r.group, false)).or_insert((Vec::new(), 0, 0));
                e.0.push(c);
                e.1 = e.1.max(r.max_skew);
                e.2 += pods;
            }
        }
    }
    let mut ranked: Vec<(Vec<usize>, i64, u64)> = caps.into_values().collect();
    ranked.sort_by(|a, b| {
        (b.2 as f64 / b.1 as f64)
            .total_cmp(&(a.2 as f64 / a.1 as f64))
            .then(a.0.cmp(&b.0))
    });
    let first_spare = packer.snapshot.resources.len();
    let mut extra = vec![Resources::ZERO; packer.classes.len()];
    let mut per_copy = Resources::ZERO;
    for (slot, (classes, cap, _)) in (first_spare..crate::resources::MAX_RESOURCES).zip(ranked) {
        per_copy.set(slot, cap);
        for c in classes {
            extra[c].set(slot, 1);
        }
    }
    (extra, per_copy)
}
