//! Launch shapes: every (NodePool, instance type) pair a new node could be, with the offerings
//! (zone × capacity type × price) the pool allows and the room left after system overhead and
//! DaemonSets.

use std::collections::BTreeMap;
use std::sync::Arc;

use quartermaster_policies::LabelLookup;
use quartermaster_pricing::label_cache::SharedLabels;
use quartermaster_pricing::{CapacityType, Catalog, InstanceType};

use super::offering_labels::OfferingLabels;

use crate::pod::{Pod, tolerates_all};
use crate::resources::{ResourceTable, Resources};
use crate::snapshot::{ClusterSnapshot, NodePoolSpec, OfferingKey};

/// The label the NVIDIA GPU Operator's MIG manager reads for a node's MIG layout.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";

/// Interned zone name.
pub type ZoneId = u16;

/// Interns zone names so topology counts are plain vectors.
#[derive(Debug, Default)]
pub struct Zones {
    names: Vec<String>,
}

impl Zones {
    /// The id of `zone`, interning it.
    pub fn intern(&mut self, zone: &str) -> ZoneId {
        if let Some(i) = self.names.iter().position(|z| z == zone) {
            return i as ZoneId;
        }
        self.names.push(zone.to_owned());
        (self.names.len() - 1) as ZoneId
    }

    /// The name of `id`.
    pub fn name(&self, id: ZoneId) -> &str {
        &self.names[id as usize]
    }

    /// How many zones are known.
    pub fn len(&self) -> usize {
        self.names.len()
    }
}

/// One priced way to launch a shape.
#[derive(Debug, Clone)]
pub struct ShapeOffering {
    /// Zone.
    pub zone: ZoneId,
    /// Capacity type.
    pub capacity_type: CapacityType,
    /// Dollars per hour the solver ranks and packs by: the expected cost, i.e. the price plus,
    /// for spot capacity with a known interruption band, the band's hourly rate × the pool's
    /// restart cost ([`quartermaster_pricing::Catalog::expected_cost_per_hour`]); the price
    /// otherwise.
    pub price: f64,
    /// The offering's price per hour (what the plan's cost and the pool's cost limit count).
    pub list_price: f64,
    /// Every label a node of this offering carries (type, offering and pool labels).
    pub labels: OfferingLabels,
}

/// A (NodePool, instance type) pair with its usable offerings.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Index into `snapshot.node_pools`.
    pub pool: usize,
    /// Index into `catalog.instance_types()`.
    pub instance_type: usize,
    /// Offerings allowed by the pool and available, cheapest first.
    pub offerings: Vec<ShapeOffering>,
    /// Room for pods: allocatable minus DaemonSet overhead.
    pub allocatable: Resources,
    /// Full capacity (what NodePool limits count).
    pub capacity: Resources,
    /// Whole accelerator devices of the type (what `maxGpuOvershoot` counts).
    pub accelerators: i64,
    /// The MIG layout its GPUs get, when the pool leaves the layout to the solver (one shape
    /// per layout); the node is labelled `nvidia.com/mig.config` with it.
    pub mig_config: Option<&'static str>,
    /// The slots its accelerators are advertised in (whole, shared or MIG slices), with the
    /// capacity of each (see [`super::guard::devices_used`]).
    pub accelerator_slots: Vec<(usize, i64)>,
}

impl Shape {
    /// The cheapest offering's price.
    pub fn min_price(&self) -> f64 {
        self.offerings.first().map_or(f64::INFINITY, |o| o.price)
    }
}

/// Converts the catalog's resource map into a vector over the snapshot's resource table.
pub fn to_resources(table: &ResourceTable, map: &BTreeMap<String, u64>) -> Resources {
    let mut r = Resources::ZERO;
    for (name, amount) in map {
        if let Some(slot) = table.slot(name) {
            r.set(slot, i64::try_from(*amount).unwrap_or(i64::MAX));
        }
    }
    r
}

/// Sum of the requests of the DaemonSet pods that would run on a node with these labels and taints.
pub fn daemonset_overhead<L: LabelLookup + ?Sized>(
    daemonsets: &[Pod],
    labels: &L,
    pool: &NodePoolSpec,
) -> Resources {
    let mut overhead = Resources::ZERO;
    for ds in daemonsets {
        let taints_ok = tolerates_all(&ds.tolerations, &pool.taints).is_ok();
        let terms_ok = ds.node_terms.is_empty() || ds.node_terms.iter().any(|t| t.matches(labels));
        if taints_ok && terms_ok {
            overhead += ds.requests;
        }
    }
    overhead
}

/// Builds every shape of every pool, pools ordered by descending weight.
pub fn build_shapes(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    zones: &mut Zones,
) -> Vec<Shape> {
    let mut shapes = Vec::new();
    for (pool_index, pool) in snapshot.node_pools.iter().enumerate() {
        // Flex-start is opt-in (see [`crate::flex_start`]): decided once per pool.
        let flex_start = crate::flex_start::opts_in(pool);
        // The pool's label layer, per MIG layout.
        let mut pool_labels: BTreeMap<Option<&'static str>, SharedLabels> = BTreeMap::new();
        for (type_index, it) in catalog.instance_types().iter().enumerate() {
            if it.cloud != pool.cloud {
                continue;
            }
            // A MIG pool without a named layout: one shape per layout of the type's GPU.
            let layouts: Vec<Option<&'static str>> = match pool.node_shape.auto_mig_layouts(it) {
                Some(names) => names.into_iter().map(Some).collect(),
                None => vec![None],
            };
            for layout in layouts {
                let pool_labels = pool_labels.entry(layout).or_insert_with(|| {
                    let mut labels = pool.labels.clone();
                    labels.insert(crate::NODEPOOL_LABEL.to_owned(), pool.name.clone());
                    if let Some(layout) = layout {
                        labels.insert(MIG_CONFIG_LABEL.to_owned(), layout.to_owned());
                    }
                    Arc::new(labels)
                });
                if let Some(shape) = build_shape(
                    snapshot,
                    catalog,
                    pool_index,
                    pool,
                    flex_start,
                    type_index,
                    it,
                    layout,
                    pool_labels,
                    zones,
                ) {
                    shapes.push(shape);
                }
            }
        }
    }
    shapes
}

/// The shape of `it` in `pool` (in MIG `layout`), its offerings labelled with the pool's
/// label layer `pool_labels`; flex-start offerings only when the pool opts in (`flex_start`).
#[allow(clippy::too_many_arguments)]
fn build_shape(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    pool_index: usize,
    pool: &NodePoolSpec,
    flex_start: bool,
    type_index: usize,
    it: &InstanceType,
    layout: Option<&'static str>,
    pool_labels: &SharedLabels,
    zones: &mut Zones,
) -> Option<Shape> {
    let type_labels = &catalog.labels()[type_index];
    let mut offerings: Vec<ShapeOffering> = Vec::new();
    for (o, offering_labels) in it.offerings.iter().zip(&type_labels.offerings) {
        if !o.available || (o.capacity_type == CapacityType::FlexStart && !flex_start) {
            continue;
        }
        if !snapshot.unavailable.is_empty()
            && snapshot.unavailable.contains(&OfferingKey {
                cloud: it.cloud,
                instance_type: it.name.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type,
            })
        {
            continue;
        }
        let labels = OfferingLabels {
            pool: pool_labels.clone(),
            offering: offering_labels.clone(),
            instance_type: type_labels.instance_type.clone(),
        };
        if !pool.requirements.matches(&labels) {
            continue;
        }
        let restart_cost = o.minutes_of_price(pool.node_shape.spot_interruption_minutes());
        offerings.push(ShapeOffering {
            zone: zones.intern(&o.zone),
            capacity_type: o.capacity_type,
            price: catalog.expected_cost_per_hour(it, o, restart_cost),
            list_price: o.price_per_hour,
            labels,
        });
    }
    if offerings.is_empty() {
        return None;
    }
    offerings.sort_by(|a, b| a.price.total_cmp(&b.price).then(a.zone.cmp(&b.zone)));
    let capacity = to_resources(
        &snapshot.resources,
        &pool.node_shape.capacity_in_layout(it, layout)?,
    );
    let overhead = daemonset_overhead(&snapshot.daemonsets, &offerings[0].labels, pool);
    let allocatable = to_resources(
        &snapshot.resources,
        &pool.node_shape.allocatable_in_layout(it, layout)?,
    )
    .saturating_sub(&overhead);
    let accelerator_slots = super::guard::accelerator_slots(&snapshot.resources, &capacity);
    Some(Shape {
        pool: pool_index,
        instance_type: type_index,
        offerings,
        allocatable,
        capacity,
        accelerators: i64::from(it.accelerator_count()),
        mig_config: layout,
        accelerator_slots,
    })
}
