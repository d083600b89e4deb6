//! Reserved capacity in `plan` and `explain` (`--reservations FILE`), and the reservations
//! `catalog --live` lists.
//!
//! The reservations of the file are offered to the NodePools of the manifests exactly as the
//! controller offers what the clouds report (`quartermaster_controller::reservations::offers`:
//! the pools whose NodeClass selects each; a reservation's free slots are what the file says is
//! `available` plus the input's own Nodes in it), and their free slots stand in the snapshot
//! as empty in-flight nodes built by the engine's own [`quartermaster_engine::stand_ins`]: the
//! solver fills them before it buys anything, never buys a reserved offering new. After the
//! solve each stand-in that holds pods becomes a planned node of capacity type `reserved`
//! (price 0: the reservation is paid whether used or not) naming its reservation.

pub mod explain;
pub mod file;
pub mod summary;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use quartermaster_controller::reservations::{NodeClasses, offers};
use quartermaster_engine::{ReservationOffer, SlotShape, parse_stand_in, stand_ins};
use quartermaster_policies::{
    AWSNodeClass, AzureNodeClass, GCPNodeClass, NodePool, ValidatedObject, validate_manifest,
};
use quartermaster_pricing::reservation::{KARPENTER_RESERVATION_ID, LABEL_RESERVATION_ID};
use quartermaster_pricing::{CapacityType, Catalog, Reservation};
use quartermaster_solver::{
    ClusterSnapshot, NODEPOOL_LABEL, NewNode, NodePoolSpec, OfferingChoice, OfferingKey, Plan,
    PodRef, Resources, daemonset_overhead, to_resources,
};
use serde_json::Value;

/// The reservations of one `plan` or `explain` run, offered to the input's pools.
pub struct Reserved {
    /// Each reservation with the pools whose NodeClass selects it (its count already capped
    /// at `available` plus the input's own nodes in it).
    pub offers: Vec<ReservationOffer>,
    /// The reservations as the file gives them (same order).
    pub given: Vec<Reservation>,
    /// Slots of each reservation (by id) held by Nodes of the input.
    pub taken: BTreeMap<String, u32>,
    /// The pools as the manifests configure them (before `plan` adjusts their usage).
    pub pools: Vec<NodePoolSpec>,
    /// The stand-ins put in the snapshot: name, reservation id, pool index.
    pub stand_ins: Vec<(String, String, usize)>,
    /// When the plan is made (a reservation's window is judged at it).
    pub now: DateTime<Utc>,
}

/// The NodePools and NodeClasses of the manifests, typed as the controller holds them.
struct Objects {
    node_pools: Vec<Arc<NodePool>>,
    aws: Vec<Arc<AWSNodeClass>>,
    gcp: Vec<Arc<GCPNodeClass>>,
    azure: Vec<Arc<AzureNodeClass>>,
}

impl Objects {
    /// The `quartermaster.dev` NodePools and NodeClasses among `objects` (reading them already
    /// validated each; one that does not validate is not one the snapshot has either).
    fn of(objects: &[Value]) -> Self {
        let mut out = Self {
            node_pools: Vec::new(),
            aws: Vec::new(),
            gcp: Vec::new(),
            azure: Vec::new(),
        };
        for v in objects {
            let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
            if !matches!(
                kind,
                "NodePool" | "AWSNodeClass" | "GCPNodeClass" | "AzureNodeClass"
            ) {
                continue;
            }
            match validate_manifest(v) {
                Ok(ValidatedObject::NodePool(p)) => out.node_pools.push(Arc::new(p)),
                Ok(ValidatedObject::AwsNodeClass(c)) => out.aws.push(Arc::new(c)),
                Ok(ValidatedObject::GcpNodeClass(c)) => out.gcp.push(Arc::new(c)),
                Ok(ValidatedObject::AzureNodeClass(c)) => out.azure.push(Arc::new(c)),
                _ => {}
            }
        }
        out
    }
}

/// The catalog with the reserved offerings of `reservations` (priced 0; the solver only ever
/// reaches them through a stand-in).
pub fn catalog_with(catalog: Catalog, reservations: &[Reservation]) -> Catalog {
    if reservations.is_empty() {
        catalog
    } else {
        catalog.with_reserved_offerings(reservations)
    }
}

impl Reserved {
    /// Offers `reservations` to the pools of `objects` and puts their free slots in `snapshot`
    /// as stand-ins (the reserved offerings themselves unavailable as new nodes). `pools` are
    /// the snapshot's pools as configured (`plan` caps static pools before this). `catalog`
    /// must hold the reserved offerings ([`catalog_with`]).
    pub fn apply(
        reservations: Vec<Reservation>,
        objects: &[Value],
        pools: Vec<NodePoolSpec>,
        snapshot: &mut ClusterSnapshot,
        catalog: &Catalog,
        now: DateTime<Utc>,
    ) -> Self {
        let taken = taken_slots(snapshot);
        let objects = Objects::of(objects);
        let offers = offers(
            &reservations,
            &objects.node_pools,
            NodeClasses {
                aws: &objects.aws,
                gcp: &objects.gcp,
                azure: &objects.azure,
            },
            &taken,
        );
        snapshot
            .unavailable
            .extend(reservations.iter().map(|r| OfferingKey {
                cloud: r.cloud,
                instance_type: r.instance_type.clone(),
                zone: r.zone.clone(),
                capacity_type: CapacityType::Reserved,
            }));
        let specs: Vec<&NodePoolSpec> = pools.iter().collect();
        let taken_ref: BTreeMap<&str, u32> = taken.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let ClusterSnapshot {
            node_pools,
            resources,
            daemonsets,
            nodes,
            ..
        } = snapshot;
        let made = stand_ins(
            &offers,
            &taken_ref,
            now,
            &specs,
            node_pools,
            |pool, choice| slot_shape(&pools[pool], catalog, resources, daemonsets, choice),
        );
        let stand_ins = made
            .iter()
            .filter_map(|n| {
                let (id, pool) = parse_stand_in(&n.name)?;
                Some((n.name.clone(), id.to_owned(), pool))
            })
            .collect();
        nodes.extend(made);
        Self {
            offers,
            given: reservations,
            taken,
            pools,
            stand_ins,
            now,
        }
    }

    /// The reservation and pool index of the stand-in `node`, when it is one of ours.
    pub fn stand_in(&self, node: &str) -> Option<(&ReservationOffer, usize)> {
        let (_, id, pool) = self.stand_ins.iter().find(|(n, _, _)| n == node)?;
        let offer = self.offers.iter().find(|o| o.reservation.id == *id)?;
        Some((offer, *pool))
    }

    /// What a node of `offer`'s reservation would be in pool `pool`: the slot's shape, with
    /// the reservation's labels.
    pub fn shape_in(
        &self,
        offer: &ReservationOffer,
        pool: usize,
        snapshot: &ClusterSnapshot,
        catalog: &Catalog,
    ) -> Option<SlotShape> {
        let r = &offer.reservation;
        let (mut labels, capacity, room) = slot_shape(
            self.pools.get(pool)?,
            catalog,
            &snapshot.resources,
            &snapshot.daemonsets,
            &reserved_choice(r),
        )?;
        labels.extend(r.node_labels());
        Some((labels, capacity, room))
    }

    /// Turns the stand-ins the plan placed pods on into planned nodes of capacity type
    /// `reserved` (price 0), appended to `plan.new_nodes`. Returns, per new node of the plan,
    /// the reservation it lands on.
    pub fn fold_into_plan(
        &self,
        plan: &mut Plan,
        snapshot: &ClusterSnapshot,
    ) -> Vec<Option<String>> {
        let mut landed: Vec<Option<String>> = vec![None; plan.new_nodes.len()];
        let mut kept = Vec::with_capacity(plan.existing.len());
        for placement in std::mem::take(&mut plan.existing) {
            let Some((offer, pool)) = self.stand_in(&placement.node) else {
                kept.push(placement);
                continue;
            };
            let spec = &self.pools[pool];
            let requests = placement
                .pods
                .iter()
                .filter_map(|p| snapshot.pending.iter().find(|q| &q.id == p))
                .fold(Resources::default(), |sum, p| sum + p.requests);
            plan.new_nodes.push(NewNode {
                node_pool: spec.name.clone(),
                cloud: spec.cloud,
                offering: reserved_choice(&offer.reservation),
                alternatives: Vec::new(),
                pods: placement.pods,
                requests,
                requirements: spec.requirements.clone(),
                accelerator_note: None,
            });
            landed.push(Some(offer.reservation.id.clone()));
        }
        plan.existing = kept;
        landed
    }

    /// Slots of `id` the plan used, and the pods on them.
    pub fn used_by(&self, id: &str, plan: &Plan, landed: &[Option<String>]) -> Vec<PodRef> {
        plan.new_nodes
            .iter()
            .zip(landed)
            .filter(|(_, l)| l.as_deref() == Some(id))
            .flat_map(|(n, _)| n.pods.iter().cloned())
            .collect()
    }
}

/// Which of a reservation's pools its free slots go to.
#[derive(Debug, Clone, PartialEq)]
pub enum PoolFor {
    /// The first of its pools that allows it (index into [`Reserved::pools`]).
    Pool(usize),
    /// No NodePool's NodeClass selects it.
    NotSelected,
    /// Pools select it, but the first one's requirements (or node shape) rule it out.
    Excluded {
        /// The NodePool.
        pool: String,
        /// The requirement that fails, with what the node would carry.
        detail: String,
    },
}

/// Whether a reservation takes launches at a time, and if not why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Window {
    /// Started and not draining.
    Open,
    /// Starts later.
    NotOpen(DateTime<Utc>),
    /// A Capacity Block within its drain time (or an ODCR past its end).
    Draining {
        /// When its nodes are drained.
        drain_at: DateTime<Utc>,
        /// When it ends.
        end: DateTime<Utc>,
    },
}

impl Window {
    /// The window of `r` at `now`.
    pub fn of(r: &Reservation, now: DateTime<Utc>) -> Self {
        match (r.start, r.drain_at(), r.end) {
            (Some(s), _, _) if now < s => Self::NotOpen(s),
            (_, Some(drain_at), Some(end)) if now >= drain_at => Self::Draining { drain_at, end },
            _ => Self::Open,
        }
    }

    /// `open`, `not-open` or `draining` (`ended` past the end).
    pub fn status(self, now: DateTime<Utc>) -> &'static str {
        match self {
            Self::Open => "open",
            Self::NotOpen(_) => "not-open",
            Self::Draining { end, .. } if now >= end => "ended",
            Self::Draining { .. } => "draining",
        }
    }
}

/// A time as the tables and JSON print it (`2027-01-14T00:00:00Z`).
pub fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Reserved {
    /// The pool a reservation's free slots go to (as [`stand_ins`] chooses it), or why none.
    pub fn pool_for(
        &self,
        offer: &ReservationOffer,
        snapshot: &ClusterSnapshot,
        catalog: &Catalog,
    ) -> PoolFor {
        let r = &offer.reservation;
        let mut excluded = None;
        for name in &offer.pools {
            let Some(pool) = self
                .pools
                .iter()
                .position(|p| p.name == *name && p.cloud == r.cloud)
            else {
                continue;
            };
            let spec = &self.pools[pool];
            let shape = slot_shape(
                spec,
                catalog,
                &snapshot.resources,
                &snapshot.daemonsets,
                &reserved_choice(r),
            );
            let detail = match shape {
                Some((labels, _, _)) => match first_failure(&spec.requirements, &labels) {
                    None => return PoolFor::Pool(pool),
                    Some(detail) => detail,
                },
                None => format!(
                    "its node shape (GPU sharing) does not apply to {}",
                    r.instance_type
                ),
            };
            excluded.get_or_insert(PoolFor::Excluded {
                pool: name.clone(),
                detail,
            });
        }
        excluded.unwrap_or(PoolFor::NotSelected)
    }

    /// Free slots of `offer` before the plan: its count (capped at what the file says is
    /// available plus the input's own nodes in it) less those the input's Nodes hold.
    pub fn free(&self, offer: &ReservationOffer) -> u32 {
        let r = &offer.reservation;
        r.count
            .saturating_sub(self.taken.get(&r.id).copied().unwrap_or(0))
    }

    /// Stand-ins `offer`'s free slots became (fewer than free: closed, no pool, limits).
    pub fn offered(&self, offer: &ReservationOffer) -> u32 {
        let n = self
            .stand_ins
            .iter()
            .filter(|(_, id, _)| *id == offer.reservation.id)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}

/// The first requirement of `reqs` the labels fail, with the label's value on the node.
pub fn first_failure(
    reqs: &quartermaster_policies::Requirements,
    labels: &BTreeMap<String, String>,
) -> Option<String> {
    reqs.iter().find_map(|r| {
        let value = labels.get(r.key()).map(String::as_str);
        (!r.matches(value)).then(|| match value {
            Some(v) => format!("{} {r} (the node would have {}={v})", r.key(), r.key()),
            None => format!("{} {r} (the node would not carry {})", r.key(), r.key()),
        })
    })
}

/// Slots of each reservation held by Nodes of the input (labelled with its id, ours or
/// Karpenter's key).
fn taken_slots(snapshot: &ClusterSnapshot) -> BTreeMap<String, u32> {
    let mut taken: BTreeMap<String, u32> = BTreeMap::new();
    for n in &snapshot.nodes {
        if let Some(id) = n
            .labels
            .get(LABEL_RESERVATION_ID)
            .or_else(|| n.labels.get(KARPENTER_RESERVATION_ID))
        {
            *taken.entry(id.clone()).or_default() += 1;
        }
    }
    taken
}

/// The offering a node launched into `r` has.
pub fn reserved_choice(r: &Reservation) -> OfferingChoice {
    OfferingChoice {
        instance_type: r.instance_type.clone(),
        zone: r.zone.clone(),
        capacity_type: CapacityType::Reserved,
        price_per_hour: 0.0,
    }
}

/// What a node of `choice` is in `pool`: the offering's and the pool's labels (and their
/// aliases, as the engine's nodes carry them), its capacity, its room for pods after
/// DaemonSets. `None` when the catalog has no such offering or the pool's node shape does not
/// apply to the type.
fn slot_shape(
    pool: &NodePoolSpec,
    catalog: &Catalog,
    resources: &quartermaster_solver::ResourceTable,
    daemonsets: &[quartermaster_solver::Pod],
    choice: &OfferingChoice,
) -> Option<SlotShape> {
    let it = catalog.get(pool.cloud, &choice.instance_type)?;
    let o = it
        .offerings
        .iter()
        .find(|o| o.zone == choice.zone && o.capacity_type == choice.capacity_type)?;
    let mut labels = it.offering_labels(o);
    labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels.insert(NODEPOOL_LABEL.to_owned(), pool.name.clone());
    let aliases = quartermaster_policies::labels::alias_labels(&labels);
    labels.extend(aliases);
    let capacity = to_resources(resources, &pool.node_shape.capacity_in_layout(it, None)?);
    let overhead = daemonset_overhead(daemonsets, &labels, pool);
    let room = to_resources(resources, &pool.node_shape.allocatable_in_layout(it, None)?)
        .saturating_sub(&overhead);
    Some((labels, capacity, room))
}
