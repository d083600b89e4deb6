//! The engine's claims by name, with a revision that moves on every change: a driver that
//! remembers the revision can tell that nothing about any claim changed without looking at
//! them (the controller's pass at rest skips rebuilding every claim's status then).
//!
//! Reads go through [`std::ops::Deref`] to the map; every way to change a claim is a method
//! here that moves the revision first, and there is no `DerefMut`, so a change that would not
//! move it does not compile.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use crate::state::Claim;

/// Claims by name, and how many times they may have changed.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClaimTable {
    by_name: BTreeMap<String, Claim>,
    revision: u64,
}

impl std::ops::Deref for ClaimTable {
    type Target = BTreeMap<String, Claim>;

    fn deref(&self) -> &Self::Target {
        &self.by_name
    }
}

impl ClaimTable {
    /// Moves with every change (and with every mutable look that may change nothing).
    pub(crate) fn revision(&self) -> u64 {
        self.revision
    }

    pub(crate) fn get_mut<Q>(&mut self, name: &Q) -> Option<&mut Claim>
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.revision += 1;
        self.by_name.get_mut(name)
    }

    pub(crate) fn insert(&mut self, name: String, claim: Claim) -> Option<Claim> {
        self.revision += 1;
        self.by_name.insert(name, claim)
    }

    pub(crate) fn remove<Q>(&mut self, name: &Q) -> Option<Claim>
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.revision += 1;
        self.by_name.remove(name)
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut Claim> {
        self.revision += 1;
        self.by_name.values_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_moves_the_revision_and_reads_do_not() {
        let mut table = ClaimTable::default();
        let start = table.revision();
        assert!(table.get("a").is_none());
        assert_eq!(table.revision(), start, "a read");
        table.get_mut("a");
        let after_look = table.revision();
        assert!(after_look > start, "a mutable look may change: it counts");
        table.remove("a");
        assert!(table.revision() > after_look);
        let before = table.revision();
        table.values_mut().for_each(drop);
        assert!(table.revision() > before);
    }
}
