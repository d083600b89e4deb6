//! The labels a node of one offering would carry, kept in shared layers: the instance type's
//! and the offering's come from the catalog (built once), the pool's are built once per solve.
//! Nothing is copied per offering.

use quartermaster_policies::LabelLookup;
use quartermaster_pricing::label_cache::SharedLabels;

/// A node's labels in three layers; a key is looked up in the pool's layer first, then the
/// offering's, then the instance type's (the order in which a node's labels are put together).
#[derive(Debug, Clone)]
pub struct OfferingLabels {
    /// The pool template's labels, `quartermaster.dev/nodepool` and the MIG layout.
    pub pool: SharedLabels,
    /// Region, zone and capacity type.
    pub offering: SharedLabels,
    /// The instance type's labels.
    pub instance_type: SharedLabels,
}

impl OfferingLabels {
    /// The value of label `key`, if set.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.pool
            .get(key)
            .or_else(|| self.offering.get(key))
            .or_else(|| self.instance_type.get(key))
    }

    /// Whether label `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl LabelLookup for OfferingLabels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}
