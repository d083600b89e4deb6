//! Labels of every instance type and offering, built once per catalog: a solve looks at every
//! offering, and building their label maps each time was most of a solve's work.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::{CapacityType, InstanceType};

/// Labels as shared, immutable maps.
pub type SharedLabels = Arc<BTreeMap<String, String>>;

/// The labels of one instance type and of each of its offerings.
#[derive(Debug)]
pub struct TypeLabels {
    /// [`InstanceType::labels`].
    pub instance_type: SharedLabels,
    /// Per offering, in the type's order: [`crate::Offering::labels`] (what
    /// [`InstanceType::offering_labels`] adds to the type's labels).
    pub offerings: Vec<SharedLabels>,
}

/// An offering's own labels depend only on its region, zone and capacity type, which thousands
/// of offerings share: one map per combination, shared by all of them.
type OfferingLabelsByKey<'a> = HashMap<(&'a str, &'a str, CapacityType), SharedLabels>;

impl TypeLabels {
    fn of<'a>(it: &'a InstanceType, shared: &mut OfferingLabelsByKey<'a>) -> Self {
        Self {
            instance_type: Arc::new(it.labels()),
            offerings: it
                .offerings
                .iter()
                .map(|o| {
                    shared
                        .entry((o.region.as_str(), o.zone.as_str(), o.capacity_type))
                        .or_insert_with(|| Arc::new(o.labels()))
                        .clone()
                })
                .collect(),
        }
    }
}

/// Built on first use, dropped when the catalog's types change. Equal to any other cache (it
/// is derived from the catalog, not part of what the catalog is).
#[derive(Clone, Default)]
pub(crate) struct LabelCache(OnceLock<Arc<Vec<TypeLabels>>>);

impl LabelCache {
    pub(crate) fn get(&self, types: &[InstanceType]) -> &[TypeLabels] {
        self.0.get_or_init(|| {
            let mut shared = OfferingLabelsByKey::new();
            Arc::new(
                types
                    .iter()
                    .map(|t| TypeLabels::of(t, &mut shared))
                    .collect(),
            )
        })
    }

    pub(crate) fn clear(&mut self) {
        self.0.take();
    }
}

impl PartialEq for LabelCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl fmt::Debug for LabelCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "LabelCache(built)"
        } else {
            "LabelCache(empty)"
        })
    }
}
