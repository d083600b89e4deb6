//! What requirements are matched against: anything that answers "the value of label `key`".

use std::collections::BTreeMap;
use std::sync::Arc;

/// A set of labels that can be asked for one label's value. Requirements only ever look labels
/// up by key, so a node's labels can be kept in layers (shared type labels, offering labels,
/// pool labels) instead of being copied into one map per offering.
pub trait LabelLookup {
    /// The value of label `key`, if set.
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelLookup for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<T: LabelLookup + ?Sized> LabelLookup for Arc<T> {
    fn label(&self, key: &str) -> Option<&str> {
        (**self).label(key)
    }
}

impl<T: LabelLookup + ?Sized> LabelLookup for &T {
    fn label(&self, key: &str) -> Option<&str> {
        (**self).label(key)
    }
}
