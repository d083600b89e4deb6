//! Why a new node with accelerators holds only pods that request none of them: said per node and
//! summarised in the plan's notes, so nobody finds a GPU bill for CPU pods without a reason.

use std::collections::BTreeMap;

use quartermaster_pricing::Catalog;

use super::bins::{Bin, BinKind};
use super::classes::Topology;
use super::packer::Packer;
use super::shapes::{ZoneId, Zones};

/// The reason for bin `b`, when it is a new node of an accelerator type whose pods request none
/// of its accelerator.
pub fn node_note(
    packer: &Packer<'_>,
    catalog: &Catalog,
    zones: &Zones,
    pool_shapes: &[Vec<usize>],
    b: usize,
) -> Option<Note> {
    let bin = &packer.bins[b];
    let BinKind::New { shape, offering } = bin.kind else {
        return None;
    };
    let s = &packer.shapes[shape];
    let it = &catalog.instance_types()[s.instance_type];
    let accelerator = it.accelerator.as_ref()?;
    let uses_it = packer
        .snapshot
        .resources
        .slot(&accelerator.resource)
        .is_some_and(|slot| bin.requests.get(slot) > 0);
    if uses_it || bin.pods.is_empty() {
        return None;
    }
    let zone = s.offerings[offering].zone;
    let zone_name = zones.name(zone);
    let mut why = vec![where_not_cheaper(
        packer,
        catalog,
        pool_shapes,
        bin,
        zone,
        zone_name,
    )];
    if let Some(forced) = why_this_zone(packer, bin, zone_name) {
        why.push(forced);
    }
    Some(Note {
        what: format!(
            "{} ({} × {}) holds only pods that request no {}",
            it.name, accelerator.count, accelerator.name, accelerator.resource
        ),
        why: why.join("; "),
    })
}

/// A node's accelerator note in two parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    /// `p5.4xlarge (1 × h100) holds only pods that request no nvidia.com/gpu`.
    pub what: String,
    /// Why.
    pub why: String,
}

impl Note {
    /// The note of one node.
    pub fn sentence(&self) -> String {
        format!("{}: {}", self.what, self.why)
    }
}

/// Whether a type without accelerators could have held the pods in the node's zone.
fn where_not_cheaper(
    packer: &Packer<'_>,
    catalog: &Catalog,
    pool_shapes: &[Vec<usize>],
    bin: &Bin,
    zone: ZoneId,
    zone_name: &str,
) -> String {
    let BinKind::New { shape, .. } = bin.kind else {
        return String::new();
    };
    let pool = packer.shapes[shape].pool;
    let plain_in_zone = pool_shapes[pool].iter().any(|&s2| {
        let shape2 = &packer.shapes[s2];
        catalog.instance_types()[shape2.instance_type]
            .accelerator
            .is_none()
            && shape2.offerings.iter().enumerate().any(|(o2, off)| {
                off.zone == zone
                    && bin
                        .classes
                        .iter()
                        .all(|&(c, _)| packer.classes[c as usize].allows(s2, o2))
            })
    });
    if plain_in_zone {
        format!(
            "no type without accelerators that these pods may use holds them more cheaply in zone {zone_name}"
        )
    } else {
        format!(
            "zone {zone_name}: NodePool {} offers these pods only accelerator types there",
            packer.snapshot.node_pools[pool].name
        )
    }
}

/// Which rule of the pods keeps them in this zone.
fn why_this_zone(packer: &Packer<'_>, bin: &Bin, zone_name: &str) -> Option<String> {
    for &(c, _) in &bin.classes {
        let class = &packer.classes[c as usize];
        if let Some(rule) = class
            .spreads
            .iter()
            .find(|r| r.active && r.topology == Topology::Zone)
        {
            let group = &packer.groups.groups[rule.group];
            let zones = packer.eligible_zones[c as usize].len() as i64;
            let total = group.total;
            // Whatever the order, no zone may end more than maxSkew above the least loaded one,
            // so the others hold at most (zones - 1) × (x + maxSkew) and x is at least this.
            let others = (zones - 1) * rule.max_skew;
            let forced = (total - others + zones - 1).div_euclid(zones.max(1));
            let per_node = class
                .spreads
                .iter()
                .find(|r| r.active && r.topology == Topology::Hostname)
                .map(|r| {
                    let nodes = (forced + r.max_skew - 1).div_euclid(r.max_skew);
                    format!(
                        ", at most {} per node (topology spread on {}, maxSkew {}), so at least {} node(s)",
                        r.max_skew,
                        Topology::Hostname.key(),
                        r.max_skew,
                        nodes.max(1)
                    )
                });
            return Some(if forced > 0 {
                format!(
                    "topology spread on {} (maxSkew {} over {zones} zones) forces at least {forced} of the {total} pods it counts into {zone_name}{}",
                    Topology::Zone.key(),
                    rule.max_skew,
                    per_node.unwrap_or_default()
                )
            } else {
                format!(
                    "topology spread on {} (maxSkew {} over {zones} zones) puts {} of its {total} pods in {zone_name}",
                    Topology::Zone.key(),
                    rule.max_skew,
                    group
                        .zone_counts
                        .get(bin.zone as usize)
                        .copied()
                        .unwrap_or(0)
                )
            });
        }
        if class.zone_sensitive && class.affinity.iter().any(|r| r.active) {
            return Some(format!(
                "pod affinity keeps them in {zone_name} with the pods they follow"
            ));
        }
        if class.zone_sensitive {
            return Some(format!(
                "their node affinity or zonal pod anti-affinity narrows the zones they may use to ones like {zone_name}"
            ));
        }
    }
    None
}

/// One note per (NodePool, type, zone, reason) of the nodes that have one: `nodes` holds
/// (NodePool, instance type, zone, note).
pub fn summarise(nodes: &[(String, String, String, Note)]) -> Vec<String> {
    let mut grouped: BTreeMap<(&str, &str, &str, &str), usize> = BTreeMap::new();
    for (pool, it, zone, note) in nodes {
        *grouped
            .entry((pool.as_str(), it.as_str(), zone.as_str(), note.why.as_str()))
            .or_default() += 1;
    }
    grouped
        .into_iter()
        .map(|((pool, it, zone, why), count)| {
            format!(
                "NodePool {pool}: {count} × {it} in {zone} for pods that request no accelerator: {why}"
            )
        })
        .collect()
}
