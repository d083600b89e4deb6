//! The NodeClasses a provider has seen (from the controller through
//! [`CloudProvider::node_class_observed`](crate::CloudProvider::node_class_observed), and from
//! its own launches), by name: what `is_drifted` compares an instance against.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// NodeClass specs by name (or by the key a cloud stores the name under, e.g. a GCP label
/// value). A poisoned lock is still read: a spec is replaced whole, never left half-written.
#[derive(Debug)]
pub struct NodeClasses<S> {
    by_name: Mutex<BTreeMap<String, S>>,
}

impl<S> Default for NodeClasses<S> {
    fn default() -> Self {
        Self {
            by_name: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<S: Clone> NodeClasses<S> {
    /// Records the current spec of the NodeClass under `key`.
    pub fn set(&self, key: impl Into<String>, spec: S) {
        self.by_name
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.into(), spec);
    }

    /// The spec last recorded under `key`.
    pub fn get(&self, key: &str) -> Option<S> {
        self.by_name
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_spec_set_is_the_one_read() {
        let classes = NodeClasses::default();
        assert_eq!(classes.get("gpu"), None);
        classes.set("gpu", 1);
        classes.set("gpu", 2);
        assert_eq!(classes.get("gpu"), Some(2));
        assert_eq!(classes.get("cpu"), None);
    }
}
