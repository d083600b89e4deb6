//! Resource vectors: every quantity the solver compares, as fixed-size integer arrays.
//!
//! Slots are fixed for the resources every cluster has and for the accelerators we know; other
//! extended resources take the spare slots in the order a snapshot meets them. Fixed arrays keep
//! the hot loop (does this pod fit this node?) free of maps and allocation.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// How many distinct resources one snapshot may use.
pub const MAX_RESOURCES: usize = 16;

/// Well-known resource names, in slot order. `cpu` is in millicores, `memory` and
/// `ephemeral-storage` in bytes, everything else in whole units.
pub const FIXED_RESOURCES: [&str; 8] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "pods",
    "nvidia.com/gpu",
    "habana.ai/gaudi",
    "aws.amazon.com/neuron",
    "vpc.amazonaws.com/efa",
];

/// Slot of `cpu` (millicores).
pub const CPU: usize = 0;
/// Slot of `memory` (bytes).
pub const MEMORY: usize = 1;
/// Slot of `ephemeral-storage` (bytes).
pub const EPHEMERAL_STORAGE: usize = 2;
/// Slot of `pods` (count).
pub const PODS: usize = 3;
/// First slot of the accelerator resources (`nvidia.com/gpu`, `habana.ai/gaudi`, `aws.amazon.com/neuron`).
pub const ACCELERATORS: std::ops::Range<usize> = 4..7;

/// Maps resource names to slots for one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceTable {
    names: Vec<String>,
}

impl Default for ResourceTable {
    fn default() -> Self {
        Self {
            names: FIXED_RESOURCES.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

impl ResourceTable {
    /// The slot of `name`, if known.
    pub fn slot(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The slot of `name`, registering it in a spare slot when new; `None` when all slots are used.
    pub fn slot_or_insert(&mut self, name: &str) -> Option<usize> {
        if let Some(slot) = self.slot(name) {
            return Some(slot);
        }
        if self.names.len() == MAX_RESOURCES {
            return None;
        }
        self.names.push(name.to_owned());
        Some(self.names.len() - 1)
    }

    /// The name held in `slot`.
    pub fn name(&self, slot: usize) -> &str {
        self.names.get(slot).map_or("?", String::as_str)
    }

    /// How many slots are in use.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Always false: the fixed resources are always present.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Formats `amount` of the resource in `slot` the way Kubernetes users read it.
    pub fn format(&self, slot: usize, amount: i64) -> String {
        match slot {
            CPU if amount % 1000 == 0 => format!("{}", amount / 1000),
            CPU => format!("{amount}m"),
            MEMORY | EPHEMERAL_STORAGE => {
                const GI: i64 = 1 << 30;
                const MI: i64 = 1 << 20;
                if amount % GI == 0 {
                    format!("{}Gi", amount / GI)
                } else if amount % MI == 0 {
                    format!("{}Mi", amount / MI)
                } else {
                    amount.to_string()
                }
            }
            _ => amount.to_string(),
        }
    }
}

/// An amount of every resource (see [`ResourceTable`] for the slots).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Resources(pub [i64; MAX_RESOURCES]);

impl Resources {
    /// Nothing of anything.
    pub const ZERO: Resources = Resources([0; MAX_RESOURCES]);

    /// A vector with `amount` in `slot` and zero elsewhere.
    #[inline]
    pub fn single(slot: usize, amount: i64) -> Self {
        let mut r = Self::ZERO;
        r.0[slot] = amount;
        r
    }

    /// The amount in `slot`.
    #[inline]
    pub fn get(&self, slot: usize) -> i64 {
        self.0[slot]
    }

    /// Sets the amount in `slot`.
    #[inline]
    pub fn set(&mut self, slot: usize, amount: i64) {
        self.0[slot] = amount;
    }

    /// True when every amount of `self` is at most the same amount of `capacity`.
    #[inline]
    pub fn fits_in(&self, capacity: &Resources) -> bool {
        self.0.iter().zip(capacity.0.iter()).all(|(a, c)| a <= c)
    }

    /// The first slot where `self` exceeds `capacity`.
    #[inline]
    pub fn first_excess(&self, capacity: &Resources) -> Option<usize> {
        (0..MAX_RESOURCES).find(|&s| self.0[s] > capacity.0[s])
    }

    /// Element-wise maximum.
    #[inline]
    pub fn max(&self, other: &Resources) -> Resources {
        let mut r = *self;
        for (a, b) in r.0.iter_mut().zip(other.0.iter()) {
            *a = (*a).max(*b);
        }
        r
    }

    /// Element-wise subtraction clamped at zero.
    #[inline]
    pub fn saturating_sub(&self, other: &Resources) -> Resources {
        let mut r = *self;
        for (a, b) in r.0.iter_mut().zip(other.0.iter()) {
            *a = (*a - *b).max(0);
        }
        r
    }

    /// How many copies of `item` fit into `self` (capped at `cap`).
    #[inline]
    pub fn copies_of(&self, item: &Resources, cap: i64) -> i64 {
        let mut n = cap;
        for (have, need) in self.0.iter().zip(item.0.iter()) {
            if *need > 0 {
                n = n.min(have / need);
            } else if *have < 0 {
                return 0;
            }
        }
        n.max(0)
    }

    /// True when any accelerator slot is non-zero.
    #[inline]
    pub fn has_accelerator(&self) -> bool {
        ACCELERATORS.into_iter().any(|s| self.0[s] > 0)
    }

    /// True when every slot is zero.
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|a| *a == 0)
    }
}

impl Add for Resources {
    type Output = Resources;
    #[inline]
    fn add(mut self, rhs: Resources) -> Resources {
        self += rhs;
        self
    }
}

impl AddAssign for Resources {
    #[inline]
    fn add_assign(&mut self, rhs: Resources) {
        for (a, b) in self.0.iter_mut().zip(rhs.0.iter()) {
            *a += *b;
        }
    }
}

impl Sub for Resources {
    type Output = Resources;
    #[inline]
    fn sub(mut self, rhs: Resources) -> Resources {
        self -= rhs;
        self
    }
}

impl SubAssign for Resources {
    #[inline]
    fn sub_assign(&mut self, rhs: Resources) {
        for (a, b) in self.0.iter_mut().zip(rhs.0.iter()) {
            *a -= *b;
        }
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let table = ResourceTable::default();
        let mut map = f.debug_map();
        for (slot, amount) in self.0.iter().enumerate().filter(|(_, a)| **a != 0) {
            map.entry(&table.name(slot).to_owned(), amount);
        }
        map.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_of_counts_the_binding_resource() {
        let mut node = Resources::ZERO;
        node.set(CPU, 8000);
        node.set(MEMORY, 32 << 30);
        node.set(4, 4);
        let mut pod = Resources::ZERO;
        pod.set(CPU, 3000);
        pod.set(4, 1);
        assert_eq!(node.copies_of(&pod, i64::MAX), 2);
        assert_eq!(node.copies_of(&pod, 1), 1);
        assert!(pod.fits_in(&node));
        assert_eq!((pod + pod + pod).first_excess(&node), Some(CPU));
    }

    #[test]
    fn extra_resources_take_spare_slots() {
        let mut table = ResourceTable::default();
        assert_eq!(table.slot("nvidia.com/gpu"), Some(4));
        let slot = table.slot_or_insert("example.com/fpga").unwrap();
        assert_eq!(slot, FIXED_RESOURCES.len());
        assert_eq!(table.slot_or_insert("example.com/fpga"), Some(slot));
        for i in 0..MAX_RESOURCES {
            table.slot_or_insert(&format!("x/{i}"));
        }
        assert_eq!(table.slot_or_insert("one/too-many"), None);
    }
}
