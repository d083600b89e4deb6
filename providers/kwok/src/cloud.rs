//! [`KwokCloud`]: a [`CloudProvider`] whose instances are Node objects.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use quartermaster_cloud::{
    Clock, CloudError, CloudEvent, CloudFuture, CloudProvider, Instance, LaunchRequest,
};
use quartermaster_pricing::{CapacityType, Catalog, Cloud, InstanceType, Offering, labels};

use crate::api_error::{cloud_error, is_conflict, is_not_found};
use crate::config::OfferingRef;
use crate::node::{Launch, instance, is_kwok, label};
use crate::node_status::reported_status;
use crate::slices::{FIELD_MANAGER, resource_slices};
use crate::{KwokConfig, KwokError, keys};

/// The kwok cloud: launching an instance creates a Node object named after the NodeClaim
/// (`providerID: kwok://NAME`), with every label a node of that instance type and offering
/// carries, capacity and allocatable from the catalog, and `Ready`; deleting it deletes the
/// Node. No machine runs: a [`crate::KwokKubelet`] keeps the Nodes alive and plays kubelet for
/// the pods bound to them.
///
/// One `KwokCloud` pretends to be one [`Cloud`] (the one the NodePools' NodeClasses name), sells
/// that cloud's catalog types, and sees only its own Nodes (label `quartermaster.dev/cloud`);
/// a controller serving NodePools of several clouds builds one per cloud, all sharing one
/// kubelet loop.
///
/// Launch latency, capacity limits and insufficient-capacity windows come from its
/// [`KwokConfig`], so fallback can be watched on a real cluster. `create` waits the launch
/// latency (a real timer) and then creates the Node; everything it decides reads the time from
/// the [`Clock`] it is given.
pub struct KwokCloud {
    cloud: Cloud,
    catalog: Catalog,
    config: KwokConfig,
    clock: Arc<dyn Clock>,
    /// When the provider was built: outage windows are offsets from it.
    start: DateTime<Utc>,
    nodes: Api<Node>,
    /// The ResourceSlices the Nodes' devices are published in.
    slices: Api<ResourceSlice>,
    /// Whether the API server was found not to serve `resource.k8s.io/v1` (said once; no
    /// slice is published after that).
    slices_unserved: std::sync::atomic::AtomicBool,
    /// This cloud's Nodes whose ResourceSlices this process has published (or that need
    /// none): `list` publishes those of the others, so Nodes launched before a restart (or
    /// before an upgrade that brought slices), and slices that failed, are published once.
    published: Mutex<BTreeSet<String>>,
    /// `quartermaster.dev/kwok=true,quartermaster.dev/cloud=<cloud>`.
    selector: String,
    /// Names of this cloud's Nodes seen alive and not deleted through this provider: a launch
    /// retry for one of them skips the capacity checks, and one that vanishes is reported
    /// terminated by `poll_events`.
    known: Mutex<BTreeSet<String>>,
    /// Launches accepted and waiting out their latency, counted against capacity limits.
    in_flight: Mutex<Vec<(u64, InFlight)>>,
    next_in_flight: AtomicU64,
    /// Serialises capacity-limit checks, so two launches cannot both take the last slot.
    limit_check: tokio::sync::Mutex<()>,
}

/// A launch in flight, as the capacity limits see it.
#[derive(Debug, Clone)]
struct InFlight {
    instance_type: String,
    family: String,
    zone: String,
    capacity_type: CapacityType,
}

impl InFlight {
    fn offering(&self) -> OfferingRef<'_> {
        OfferingRef {
            instance_type: &self.instance_type,
            family: &self.family,
            zone: &self.zone,
            capacity_type: self.capacity_type,
        }
    }
}

/// Removes its launch from the in-flight list when the launch ends (or is cancelled).
struct InFlightSlot<'a> {
    list: &'a Mutex<Vec<(u64, InFlight)>>,
    id: u64,
}

impl Drop for InFlightSlot<'_> {
    fn drop(&mut self) {
        lock(self.list).retain(|(id, _)| *id != self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The offering a kwok Node is, read from its labels.
fn node_offering(node: &Node) -> Option<OfferingRef<'_>> {
    Some(OfferingRef {
        instance_type: label(node, labels::INSTANCE_TYPE)?,
        family: label(node, labels::INSTANCE_FAMILY).unwrap_or(""),
        zone: label(node, labels::ZONE)?,
        capacity_type: label(node, labels::CAPACITY_TYPE)?.parse().ok()?,
    })
}

impl KwokCloud {
    /// A kwok cloud pretending to be `cloud`, selling `catalog`'s types of that cloud, creating
    /// Nodes through `client`, behaving as `config` says and reading the time from `clock`.
    /// Outage windows count from now (the clock's).
    pub fn new(
        client: kube::Client,
        cloud: Cloud,
        catalog: Catalog,
        config: KwokConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, KwokError> {
        config.validate()?;
        Ok(Self {
            cloud,
            catalog,
            config,
            start: clock.now(),
            clock,
            slices: Api::all(client.clone()),
            slices_unserved: std::sync::atomic::AtomicBool::new(false),
            published: Mutex::new(BTreeSet::new()),
            nodes: Api::all(client),
            selector: format!("{}=true,{}={}", keys::LABEL_KWOK, labels::CLOUD, cloud),
            known: Mutex::new(BTreeSet::new()),
            in_flight: Mutex::new(Vec::new()),
            next_in_flight: AtomicU64::new(0),
            limit_check: tokio::sync::Mutex::new(()),
        })
    }

    /// The config it runs with.
    pub fn config(&self) -> &KwokConfig {
        &self.config
    }

    /// Whether `node` is one of this cloud's kwok Nodes.
    fn is_ours(&self, node: &Node) -> bool {
        is_kwok(node) && label(node, labels::CLOUD) == Some(self.cloud.as_str())
    }

    /// The instance `node` is, remembered as alive.
    fn adopt(&self, node: &Node) -> Option<Instance> {
        let i = instance(node)?;
        if let Some(name) = &node.metadata.name {
            lock(&self.known).insert(name.clone());
        }
        Some(i)
    }

    fn not_found(provider_id: &str) -> CloudError {
        CloudError::NotFound {
            provider_id: provider_id.to_owned(),
        }
    }

    fn insufficient(ty: &InstanceType, offering: &Offering, why: &str) -> CloudError {
        CloudError::InsufficientCapacity {
            instance_type: ty.name.clone(),
            zone: offering.zone.clone(),
            capacity_type: offering.capacity_type,
            message: format!(
                "kwok: no {} capacity for {} in {} ({why})",
                offering.capacity_type, ty.name, offering.zone
            ),
        }
    }

    async fn create_node(&self, request: &LaunchRequest) -> Result<Instance, CloudError> {
        let accepted_at = self.clock.now();
        let invalid = |message: String| CloudError::InvalidRequest { message };
        let ty = self
            .catalog
            .get(self.cloud, &request.instance_type)
            .ok_or_else(|| {
                invalid(format!(
                    "unknown {} instance type {:?}",
                    self.cloud, request.instance_type
                ))
            })?;
        // A launch into a reservation is the type's offering in the zone, as capacity type
        // reserved and priced 0 (the reservation is paid whether used or not; the engine
        // keeps within its slots).
        let reserved;
        let offering = match request.capacity_type {
            CapacityType::Reserved => {
                let mut o = ty
                    .offerings
                    .iter()
                    .find(|o| o.zone == request.zone)
                    .cloned()
                    .ok_or_else(|| {
                        invalid(format!("{} is not offered in {}", ty.name, request.zone))
                    })?;
                o.capacity_type = CapacityType::Reserved;
                o.price_per_hour = 0.0;
                o.available = true;
                reserved = o;
                &reserved
            }
            _ => ty
                .offerings
                .iter()
                .find(|o| o.zone == request.zone && o.capacity_type == request.capacity_type)
                .ok_or_else(|| {
                    invalid(format!(
                        "{} is not offered as {} in {}",
                        ty.name, request.capacity_type, request.zone
                    ))
                })?,
        };
        let wanted = OfferingRef::new(ty, &offering.zone, offering.capacity_type);

        // A new launch into an outage fails at once, before any API call; a retry of a launch
        // that already made its Node finds it below.
        if !lock(&self.known).contains(&request.claim_name) {
            if !offering.available {
                return Err(Self::insufficient(
                    ty,
                    offering,
                    "offering unavailable in the catalog",
                ));
            }
            if let Some(i) = self.config.active_outage(&wanted, self.start, accepted_at) {
                return Err(Self::insufficient(
                    ty,
                    offering,
                    &format!("kwok config insufficientCapacity[{i}]"),
                ));
            }
        }

        // Idempotent on the claim name: the Node is named after it (its slices are published
        // again: a launch cut short may have made the Node and not them).
        match self.nodes.get_opt(&request.claim_name).await {
            Ok(Some(node)) => {
                let instance = self.existing(&node, &request.claim_name)?;
                self.publish_slices(&node).await;
                return Ok(instance);
            }
            Ok(None) => {}
            Err(e) => return Err(cloud_error("looking up the Node", e)),
        }

        let _slot = self.reserve(ty, offering).await?;
        let latency = self.config.launch_latency.for_family(&ty.family);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let launch = Launch::new(
            ty,
            offering,
            request,
            accepted_at,
            self.clock.now(),
            self.config.device_plugin_delay.for_family(&ty.family),
        );
        let created = match self
            .nodes
            .create(&PostParams::default(), &launch.node())
            .await
        {
            Ok(node) => node,
            Err(e) if is_conflict(&e) => {
                // Created meanwhile by a concurrent call for the same claim.
                return match self.nodes.get_opt(&launch.name).await {
                    Ok(Some(node)) => {
                        let instance = self.existing(&node, &launch.name)?;
                        self.publish_slices(&node).await;
                        Ok(instance)
                    }
                    Ok(None) => Err(CloudError::Transient {
                        message: format!("Node {} existed and vanished; retry", launch.name),
                    }),
                    Err(e) => Err(cloud_error("looking up the Node", e)),
                };
            }
            Err(e) => return Err(cloud_error("creating the Node", e)),
        };
        lock(&self.known).insert(launch.name.clone());

        // A kubelet-less API server takes node status through /status only. If this fails the
        // kubelet loop writes it on its next pass.
        let status = reported_status(&created, Some(&launch.machine), self.clock.now());
        let patch = serde_json::json!({ "status": status });
        if let Err(e) = self
            .nodes
            .patch_status(
                &launch.name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            tracing::warn!(node = %launch.name, error = %e, "kwok: writing the new Node's status failed; the kubelet loop will retry");
        }
        self.publish_slices(&created).await;
        self.adopt(&created).ok_or_else(|| CloudError::Transient {
            message: format!("Node {} was created without its kwok labels", launch.name),
        })
    }

    /// Publishes the ResourceSlices of `node` (its instance type's devices, see
    /// [`crate::slices`]) by server-side apply. Never fails the launch: a cluster that does not
    /// serve `resource.k8s.io/v1` is said once (INFO) and its Nodes publish nothing; any other
    /// failure is a WARN, and the next `list` (or launch attempt for the claim) publishes again.
    async fn publish_slices(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if self.slices_unserved.load(Ordering::Relaxed) {
            return;
        }
        let Some(ty) =
            label(node, labels::INSTANCE_TYPE).and_then(|t| self.catalog.get(self.cloud, t))
        else {
            return;
        };
        let mut done = true;
        for slice in resource_slices(node, ty) {
            let slice_name = slice["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let params = PatchParams::apply(FIELD_MANAGER).force();
            match self
                .slices
                .patch(&slice_name, &params, &Patch::Apply(&slice))
                .await
            {
                Ok(_) => {
                    tracing::debug!(
                        node = name,
                        slice = slice_name,
                        "kwok: ResourceSlice published"
                    );
                }
                Err(e) if is_not_found(&e) => {
                    if !self.slices_unserved.swap(true, Ordering::Relaxed) {
                        tracing::info!(
                            node = name,
                            "kwok: the API server does not serve resource.k8s.io/v1 ResourceSlices; kwok Nodes publish no DRA devices"
                        );
                    }
                    return;
                }
                Err(e) => {
                    done = false;
                    tracing::warn!(node = name, slice = slice_name, error = %e, "kwok: publishing a ResourceSlice failed; DRA claims cannot be allocated on this Node until it is published");
                }
            }
        }
        if done {
            lock(&self.published).insert(name.to_owned());
        }
    }

    /// The instance for an existing Node named after a claim, or why it is not one.
    fn existing(&self, node: &Node, name: &str) -> Result<Instance, CloudError> {
        if !self.is_ours(node) {
            return Err(CloudError::InvalidRequest {
                message: format!(
                    "a Node named {name} exists and is not a {} kwok node",
                    self.cloud
                ),
            });
        }
        self.adopt(node).ok_or_else(|| CloudError::InvalidRequest {
            message: format!(
                "kwok Node {name} lacks its instance-type, zone or capacity-type label"
            ),
        })
    }

    /// Takes a slot under every capacity limit the offering counts against, or fails with
    /// insufficient capacity when one is full. Lists the Nodes only when a limit applies.
    async fn reserve(
        &self,
        ty: &InstanceType,
        offering: &Offering,
    ) -> Result<Option<InFlightSlot<'_>>, CloudError> {
        let wanted = OfferingRef::new(ty, &offering.zone, offering.capacity_type);
        let limits = self.config.limits_for(&wanted);
        if limits.is_empty() {
            return Ok(None);
        }
        let _serial = self.limit_check.lock().await;
        let nodes = self
            .nodes
            .list(&ListParams::default().labels(&self.selector))
            .await
            .map_err(|e| cloud_error("listing kwok Nodes", e))?;
        let in_flight = lock(&self.in_flight).clone();
        for i in limits {
            let limit = &self.config.capacity[i];
            let counts = |o: &OfferingRef<'_>| self.config.counts_against(i, o);
            let live = nodes
                .items
                .iter()
                .filter_map(node_offering)
                .filter(|o| counts(o))
                .count()
                + in_flight
                    .iter()
                    .filter(|(_, f)| counts(&f.offering()))
                    .count();
            if live >= limit.max as usize {
                return Err(Self::insufficient(
                    ty,
                    offering,
                    &format!("kwok config capacity[{i}] of {} nodes reached", limit.max),
                ));
            }
        }
        let id = self.next_in_flight.fetch_add(1, Ordering::Relaxed);
        lock(&self.in_flight).push((
            id,
            InFlight {
                instance_type: ty.name.clone(),
                family: ty.family.clone(),
                zone: offering.zone.clone(),
                capacity_type: offering.capacity_type,
            },
        ));
        Ok(Some(InFlightSlot {
            list: &self.in_flight,
            id,
        }))
    }

    /// This cloud's Node for a provider id, or `None` when there is none.
    async fn find(&self, provider_id: &str) -> Result<Option<Node>, CloudError> {
        let Some(name) = keys::node_name(provider_id) else {
            return Ok(None);
        };
        match self.nodes.get_opt(name).await {
            Ok(node) => Ok(node.filter(|n| self.is_ours(n))),
            Err(e) => Err(cloud_error("looking up the Node", e)),
        }
    }

    async fn delete_node(&self, provider_id: &str) -> Result<(), CloudError> {
        let node = self
            .find(provider_id)
            .await?
            .ok_or_else(|| Self::not_found(provider_id))?;
        let name = node.metadata.name.clone().unwrap_or_default();
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: node.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let result = self.nodes.delete(&name, &params).await;
        match result {
            Ok(_) => {
                lock(&self.known).remove(&name);
                lock(&self.published).remove(&name);
                Ok(())
            }
            Err(e) if is_not_found(&e) => {
                lock(&self.known).remove(&name);
                Err(Self::not_found(provider_id))
            }
            // A 409 is the uid precondition failing (the Node was replaced by another of the
            // same name: ours is gone) or a conflict of the server's own; only a fresh look
            // tells which, and ours still standing is deleted on the next try.
            Err(e) if is_conflict(&e) => match self.find(provider_id).await? {
                Some(now) if now.metadata.uid == node.metadata.uid => Err(CloudError::Transient {
                    message: format!("deleting the Node {name}: {e}"),
                }),
                _ => {
                    lock(&self.known).remove(&name);
                    Err(Self::not_found(provider_id))
                }
            },
            Err(e) => Err(cloud_error("deleting the Node", e)),
        }
    }

    async fn get_instance(&self, provider_id: &str) -> Result<Instance, CloudError> {
        self.find(provider_id)
            .await?
            .and_then(|n| self.adopt(&n))
            .ok_or_else(|| Self::not_found(provider_id))
    }

    async fn list_nodes(&self) -> Result<Vec<Node>, CloudError> {
        self.nodes
            .list(&ListParams::default().labels(&self.selector))
            .await
            .map(|l| l.items)
            .map_err(|e| cloud_error("listing kwok Nodes", e))
    }

    async fn list_instances(&self) -> Result<Vec<Instance>, CloudError> {
        let nodes = self.list_nodes().await?;
        let instances = nodes
            .iter()
            .filter(|n| self.is_ours(n))
            .filter_map(|n| self.adopt(n))
            .collect();
        // Slices not yet published by this process (a restart, an upgrade, a failed publish).
        let unpublished: Vec<&Node> = {
            let published = lock(&self.published);
            nodes
                .iter()
                .filter(|n| self.is_ours(n) && n.metadata.deletion_timestamp.is_none())
                .filter(|n| {
                    n.metadata
                        .name
                        .as_ref()
                        .is_some_and(|name| !published.contains(name))
                })
                .collect()
        };
        for node in unpublished {
            self.publish_slices(node).await;
        }
        Ok(instances)
    }

    fn instance_types_now(&self) -> Vec<InstanceType> {
        let now = self.clock.now();
        self.catalog
            .for_cloud(self.cloud)
            .map(|ty| {
                let mut out = ty.clone();
                for o in &mut out.offerings {
                    let offering = OfferingRef::new(ty, &o.zone, o.capacity_type);
                    o.available = o.available
                        && self
                            .config
                            .active_outage(&offering, self.start, now)
                            .is_none();
                }
                out
            })
            .collect()
    }

    /// Nodes seen alive that are gone without being deleted through this provider.
    async fn vanished(&self) -> Result<Vec<CloudEvent>, CloudError> {
        // Only nodes known before the list was asked for can be missing from it: one created
        // while the list was on its way (thousands of Nodes take seconds to list) is not gone.
        let before: BTreeSet<String> = lock(&self.known).clone();
        if before.is_empty() {
            return Ok(Vec::new());
        }
        // Names are all it needs: metadata only, not every Node's status.
        let alive: BTreeSet<String> = self
            .nodes
            .list_metadata(&ListParams::default().labels(&self.selector))
            .await
            .map_err(|e| cloud_error("listing kwok Nodes", e))?
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        let mut known = lock(&self.known);
        let gone = vanished_names(&before, &alive, &known);
        for name in &gone {
            known.remove(name);
        }
        drop(known);
        lock(&self.published).retain(|name| alive.contains(name));
        Ok(gone
            .iter()
            .map(|name| CloudEvent::Terminated {
                provider_id: keys::provider_id(name),
            })
            .collect())
    }
}

/// The nodes gone: known before the list was asked for (`before`), missing from it (`alive`),
/// and not deleted through the provider meanwhile (still in `known_now`). A node created while
/// the list was on its way is in `known_now` only: not gone.
fn vanished_names(
    before: &BTreeSet<String>,
    alive: &BTreeSet<String>,
    known_now: &BTreeSet<String>,
) -> Vec<String> {
    before
        .difference(alive)
        .filter(|name| known_now.contains(*name))
        .cloned()
        .collect()
}

#[cfg(test)]
#[test]
fn a_node_created_while_the_list_was_on_its_way_is_not_gone() {
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    // a: listed; b: gone behind the provider's back; c: deleted through the provider meanwhile;
    // d: created after the list was asked for.
    let before = set(&["a", "b", "c"]);
    let alive = set(&["a"]);
    let known_now = set(&["a", "b", "d"]);
    assert_eq!(vanished_names(&before, &alive, &known_now), ["b"]);
}

impl CloudProvider for KwokCloud {
    fn cloud(&self) -> Cloud {
        self.cloud
    }

    fn create<'a>(&'a self, request: &'a LaunchRequest) -> CloudFuture<'a, Instance> {
        Box::pin(self.create_node(request))
    }

    fn delete<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        Box::pin(self.delete_node(provider_id))
    }

    fn get<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, Instance> {
        Box::pin(self.get_instance(provider_id))
    }

    fn list(&self) -> CloudFuture<'_, Vec<Instance>> {
        Box::pin(self.list_instances())
    }

    fn instance_types(&self) -> CloudFuture<'_, Vec<InstanceType>> {
        Box::pin(std::future::ready(Ok(self.instance_types_now())))
    }

    fn is_drifted<'a>(&'a self, _instance: &'a Instance) -> CloudFuture<'a, Option<String>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    fn poll_events(&self) -> CloudFuture<'_, Vec<CloudEvent>> {
        Box::pin(self.vanished())
    }
}
