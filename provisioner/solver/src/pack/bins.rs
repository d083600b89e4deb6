//! Bins: nodes being filled (existing nodes, in-flight claims and planned new nodes), and the
//! rule that says how many more pods of a class one bin can take.

use crate::pod::HostPort;
use crate::resources::Resources;

use super::classes::{Class, Groups, Topology};
use super::shapes::ZoneId;

/// Zone id of a bin whose node carries no zone label.
pub const NO_ZONE: ZoneId = ZoneId::MAX;

/// What a bin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinKind {
    /// An existing node or in-flight NodeClaim (index into `snapshot.nodes`).
    Existing(usize),
    /// A node to buy: shape and offering indices.
    New {
        /// Index into the shapes.
        shape: usize,
        /// Index into the shape's offerings.
        offering: usize,
    },
}

/// A node being filled.
#[derive(Debug, Clone)]
pub struct Bin {
    /// What it is.
    pub kind: BinKind,
    /// Its zone.
    pub zone: ZoneId,
    /// Room left.
    pub free: Resources,
    /// Host ports in use.
    pub host_ports: Vec<HostPort>,
    /// Pods placed by the solver, per class: (class, count).
    pub classes: Vec<(u32, u32)>,
    /// Pod indices placed by the solver.
    pub pods: Vec<usize>,
    /// Sum of the requests placed by the solver.
    pub requests: Resources,
}

/// Why a bin cannot take a pod of a class.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Not enough room.
    Resources,
    /// A host port is taken.
    HostPort(u16),
    /// A topology spread constraint.
    Spread(Topology, i64),
    /// Required pod affinity has no matching pod in the domain.
    Affinity(Topology),
    /// Required pod anti-affinity (the class's own or a placed pod's).
    AntiAffinity(Topology),
}

impl Block {
    /// A sentence for users.
    pub fn describe(&self) -> String {
        match self {
            Block::Resources => "no room on any node it may use".to_owned(),
            Block::HostPort(p) => format!("host port {p} is taken on every node it may use"),
            Block::Spread(t, skew) => {
                format!(
                    "topology spread on {} (maxSkew {skew}) cannot be satisfied",
                    t.key()
                )
            }
            Block::Affinity(t) => format!(
                "pod affinity on {} finds no matching pod in any usable domain",
                t.key()
            ),
            Block::AntiAffinity(t) => format!(
                "pod anti-affinity on {} excludes every usable domain",
                t.key()
            ),
        }
    }
}

/// The eligible zones of a class for spread counting: zones it could be placed in.
pub fn min_zone_count(zones: &[ZoneId], counts: &[i64], min_domains: Option<u32>) -> i64 {
    if min_domains.is_some_and(|m| (zones.len() as u32) < m) {
        return 0;
    }
    zones
        .iter()
        .map(|&z| counts.get(z as usize).copied().unwrap_or(0))
        .min()
        .unwrap_or(0)
}

/// How many more pods of `class`, at most `cap` (at least 1), fit a bin in `zone` with `free`
/// room (`bin` is `None` for a bin not opened yet, which holds nothing). Rules relaxed by the
/// packer are skipped.
#[allow(clippy::too_many_arguments)]
pub fn room(
    class: &Class,
    class_index: usize,
    classes: &[Class],
    groups: &Groups,
    eligible_zones: &[ZoneId],
    bin: Option<(usize, &Bin)>,
    zone: ZoneId,
    free: &Resources,
    cap: i64,
) -> Result<i64, Block> {
    let mut k = free.copies_of(&class.requests, cap.max(1));
    if k == 0 {
        return Err(Block::Resources);
    }
    if !class.host_ports.is_empty() {
        if let Some((_, b)) = bin
            && let Some(p) = class
                .host_ports
                .iter()
                .find(|p| b.host_ports.iter().any(|q| q.conflicts(p)))
        {
            return Err(Block::HostPort(p.port));
        }
        k = k.min(1);
    }
    let bin_index = bin.map(|(i, _)| i);
    for rule in class.spreads.iter().filter(|r| r.active) {
        let group = &groups.groups[rule.group];
        if !class.member_of.contains(&rule.group) {
            continue;
        }
        let allowed = match rule.topology {
            Topology::Hostname => rule.max_skew - group.on_bin(bin_index),
            Topology::Zone => {
                let min = min_zone_count(eligible_zones, &group.zone_counts, rule.min_domains);
                min + rule.max_skew - group.in_zone(zone)
            }
        };
        if allowed <= 0 {
            return Err(Block::Spread(rule.topology, rule.max_skew));
        }
        k = k.min(allowed);
    }
    for rule in class.affinity.iter().filter(|r| r.active) {
        let group = &groups.groups[rule.group];
        let here = match rule.topology {
            Topology::Hostname => group.on_bin(bin_index),
            Topology::Zone => group.in_zone(zone),
        };
        // The first pod of a self-affine group opens the domain; the rest follow it there.
        if here == 0 && !(group.total == 0 && class.member_of.contains(&rule.group)) {
            return Err(Block::Affinity(rule.topology));
        }
    }
    for rule in class.anti_affinity.iter().filter(|r| r.active) {
        let group = &groups.groups[rule.group];
        let here = match rule.topology {
            Topology::Hostname => group.on_bin(bin_index),
            Topology::Zone => group.in_zone(zone),
        };
        if here > 0 {
            return Err(Block::AntiAffinity(rule.topology));
        }
        if class.member_of.contains(&rule.group) {
            k = k.min(1);
        }
    }
    if let Some((_, b)) = bin {
        for &(other, _) in &b.classes {
            let other_class = &classes[other as usize];
            if other as usize == class_index {
                continue;
            }
            let repelled = other_class.anti_affinity.iter().any(|r| {
                r.active && r.topology == Topology::Hostname && class.member_of.contains(&r.group)
            });
            if repelled {
                return Err(Block::AntiAffinity(Topology::Hostname));
            }
        }
    }
    Ok(k)
}
