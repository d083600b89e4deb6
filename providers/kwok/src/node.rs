//! A kwok Node: built from a launch (labels, taint, provider id, the annotations that describe
//! the fake machine) and read back (the [`Instance`] it is, the [`Machine`] it has).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use quartermaster_cloud::{Instance, InstanceState, LaunchRequest};
use quartermaster_policies::labels::{LABEL_HOSTNAME, LABEL_NODEPOOL};
use quartermaster_policies::quantity::{Millis, quantity_millis, to_quantity};
use quartermaster_pricing::{CapacityType, InstanceType, Offering, labels, resources};

use crate::keys;
use crate::time::{from_time, parse_rfc3339, rfc3339};

/// Everything a launch decides about its Node, before any API call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Launch {
    /// Node name (the claim name).
    pub(crate) name: String,
    /// Labels.
    pub(crate) labels: BTreeMap<String, String>,
    /// The fake machine.
    pub(crate) machine: Machine,
    /// Billed price.
    pub(crate) price_per_hour: f64,
    /// When the launch was accepted.
    pub(crate) launched_at: DateTime<Utc>,
    /// The request's tags.
    pub(crate) tags: BTreeMap<String, String>,
}

impl Launch {
    /// The Node for `request` of `ty` in `offering`: the launch was accepted at `launched_at`,
    /// the Node appears at `appears_at` and its device plugin reports `device_plugin_delay`
    /// after that.
    pub(crate) fn new(
        ty: &InstanceType,
        offering: &Offering,
        request: &LaunchRequest,
        launched_at: DateTime<Utc>,
        appears_at: DateTime<Utc>,
        device_plugin_delay: std::time::Duration,
    ) -> Self {
        let name = request.claim_name.clone();
        let mut l = ty.offering_labels(offering);
        l.extend(request.labels.clone());
        l.insert(LABEL_HOSTNAME.to_owned(), name.clone());
        l.insert(LABEL_NODEPOOL.to_owned(), request.node_pool.clone());
        l.insert(keys::LABEL_NODECLAIM.to_owned(), name.clone());
        l.insert(keys::LABEL_KWOK.to_owned(), "true".to_owned());
        // The offering's facts win over anything the request says.
        l.insert(labels::INSTANCE_TYPE.to_owned(), ty.name.clone());
        l.insert(labels::ZONE.to_owned(), offering.zone.clone());
        l.insert(labels::REGION.to_owned(), offering.region.clone());
        l.insert(
            labels::CAPACITY_TYPE.to_owned(),
            offering.capacity_type.to_string(),
        );
        let devices: Vec<String> = ty
            .accelerator
            .as_ref()
            .filter(|a| a.count > 0 && !a.is_fractional())
            .map(|a| vec![a.resource.clone()])
            .unwrap_or_default();
        let devices_ready_at =
            (!devices.is_empty()).then(|| crate::config::after(appears_at, device_plugin_delay));
        Self {
            labels: l,
            machine: Machine {
                capacity: quantities(&ty.capacity()),
                allocatable: quantities(&ty.allocatable()),
                devices,
                devices_ready_at,
            },
            price_per_hour: request.price_per_hour,
            launched_at,
            tags: request.tags.clone(),
            name,
        }
    }

    /// The Node object to create (its status is written separately, through `/status`).
    pub(crate) fn node(&self) -> Node {
        let mut annotations = self.machine.annotations();
        annotations.insert(
            keys::ANNOTATION_KWOK_NODE.to_owned(),
            keys::KWOK_NODE_FAKE.to_owned(),
        );
        annotations.insert(
            keys::ANNOTATION_PRICE.to_owned(),
            self.price_per_hour.to_string(),
        );
        annotations.insert(
            keys::ANNOTATION_LAUNCHED_AT.to_owned(),
            rfc3339(self.launched_at),
        );
        if !self.tags.is_empty() {
            annotations.insert(keys::ANNOTATION_TAGS.to_owned(), json_object(&self.tags));
        }
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(self.labels.clone()),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(keys::provider_id(&self.name)),
                taints: Some(vec![Taint {
                    key: keys::TAINT_UNREGISTERED.to_owned(),
                    // As a real node registers (see the AWS user data): never NoExecute, whose
                    // removal races the taint-eviction controller's cache.
                    effect: "NoSchedule".to_owned(),
                    ..Taint::default()
                }]),
                ..NodeSpec::default()
            }),
            status: None,
        }
    }
}

/// The fake machine behind a Node: what it has, and when its device plugin reports.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Machine {
    /// Full capacity, accelerators included.
    pub(crate) capacity: BTreeMap<String, Quantity>,
    /// Full allocatable, accelerators included.
    pub(crate) allocatable: BTreeMap<String, Quantity>,
    /// Extended resources the device plugin reports late.
    pub(crate) devices: Vec<String>,
    /// When it reports them.
    pub(crate) devices_ready_at: Option<DateTime<Utc>>,
}

impl Machine {
    /// The machine a kwok Node's annotations describe; `None` when they are missing or
    /// malformed (then nobody knows its capacity, and the kubelet leaves it alone).
    pub(crate) fn of(node: &Node) -> Option<Machine> {
        let a = node.metadata.annotations.as_ref()?;
        let map = |key: &str| -> Option<BTreeMap<String, Quantity>> {
            let m: BTreeMap<String, String> = serde_json::from_str(a.get(key)?).ok()?;
            Some(m.into_iter().map(|(k, v)| (k, Quantity(v))).collect())
        };
        let devices: Vec<String> = a
            .get(keys::ANNOTATION_DEVICES)
            .map(|d| {
                d.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let devices_ready_at = match a.get(keys::ANNOTATION_DEVICES_READY_AT) {
            Some(t) => Some(parse_rfc3339(t)?),
            None if devices.is_empty() => None,
            None => return None,
        };
        Some(Machine {
            capacity: map(keys::ANNOTATION_CAPACITY)?,
            allocatable: map(keys::ANNOTATION_ALLOCATABLE)?,
            devices,
            devices_ready_at,
        })
    }

    fn annotations(&self) -> BTreeMap<String, String> {
        let text = |m: &BTreeMap<String, Quantity>| {
            json_object(&m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        };
        let mut a = BTreeMap::new();
        a.insert(keys::ANNOTATION_CAPACITY.to_owned(), text(&self.capacity));
        a.insert(
            keys::ANNOTATION_ALLOCATABLE.to_owned(),
            text(&self.allocatable),
        );
        if !self.devices.is_empty() {
            a.insert(keys::ANNOTATION_DEVICES.to_owned(), self.devices.join(","));
        }
        if let Some(t) = self.devices_ready_at {
            a.insert(keys::ANNOTATION_DEVICES_READY_AT.to_owned(), rfc3339(t));
        }
        a
    }

    /// Whether the device plugin has reported at `now`.
    pub(crate) fn devices_ready(&self, now: DateTime<Utc>) -> bool {
        self.devices_ready_at.is_none_or(|t| t <= now)
    }

    /// Capacity and allocatable as the Node reports them at `now`: without the devices until
    /// the device plugin reports.
    pub(crate) fn reported(
        &self,
        now: DateTime<Utc>,
    ) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
        let ready = self.devices_ready(now);
        let keep = |m: &BTreeMap<String, Quantity>| {
            m.iter()
                .filter(|(k, _)| ready || !self.devices.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        (keep(&self.capacity), keep(&self.allocatable))
    }
}

/// Catalog resources (`cpu` in millicores, the rest in whole units) as quantities.
fn quantities(m: &BTreeMap<String, u64>) -> BTreeMap<String, Quantity> {
    m.iter()
        .map(|(k, &v)| {
            let v = i128::from(v);
            let millis = if k == resources::CPU {
                Millis::from_millis(v)
            } else {
                Millis::from_millis(v * 1000)
            };
            (k.clone(), to_quantity(millis))
        })
        .collect()
}

/// Whether every quantity in `want` is in `have` with the same value (`"16Gi"` equals
/// `"17179869184"`).
pub(crate) fn holds_all(
    have: Option<&BTreeMap<String, Quantity>>,
    want: &BTreeMap<String, Quantity>,
) -> bool {
    want.iter().all(|(k, w)| {
        have.and_then(|h| h.get(k)).is_some_and(|h| {
            match (quantity_millis(h), quantity_millis(w)) {
                (Ok(h), Ok(w)) => h == w,
                _ => h == w,
            }
        })
    })
}

fn json_object(m: &BTreeMap<String, String>) -> String {
    serde_json::to_string(m).unwrap_or_else(|_| "{}".to_owned())
}

/// Whether a Node is one the kwok cloud created.
pub(crate) fn is_kwok(node: &Node) -> bool {
    label(node, keys::LABEL_KWOK) == Some("true")
}

/// A label's value.
pub(crate) fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The instance a kwok Node is; `None` when it lacks what every kwok Node has (not ours, or
/// edited by hand).
pub(crate) fn instance(node: &Node) -> Option<Instance> {
    let name = node.metadata.name.as_deref()?;
    let capacity_type: CapacityType = label(node, labels::CAPACITY_TYPE)?.parse().ok()?;
    let launched_at = annotation(node, keys::ANNOTATION_LAUNCHED_AT)
        .and_then(parse_rfc3339)
        .or_else(|| node.metadata.creation_timestamp.as_ref().map(from_time))
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let tags = annotation(node, keys::ANNOTATION_TAGS)
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default();
    Some(Instance {
        provider_id: keys::provider_id(name),
        claim_name: label(node, keys::LABEL_NODECLAIM)
            .unwrap_or(name)
            .to_owned(),
        instance_type: label(node, labels::INSTANCE_TYPE)?.to_owned(),
        zone: label(node, labels::ZONE)?.to_owned(),
        capacity_type,
        price_per_hour: annotation(node, keys::ANNOTATION_PRICE)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0.0),
        state: if node.metadata.deletion_timestamp.is_some() {
            InstanceState::ShuttingDown
        } else {
            InstanceState::Running
        },
        launched_at,
        tags,
    })
}
