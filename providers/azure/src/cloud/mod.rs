//! [`AzureCloud`]: the [`CloudProvider`] over the ARM port.

mod provider;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use base64::Engine as _;
use quartermaster_cloud::price::catalog_price;
use quartermaster_cloud::{
    Clock, CloudError, CloudEvent, CloudFuture, CloudProvider, Instance, InstanceState,
    LaunchOffering, LaunchRequest, NodeClassSpec, NodeClasses, exhausted,
};
use quartermaster_policies::AzureNodeClassSpec;
use quartermaster_policies::nodeclass::azure::AzureBootstrapSecretRef;
use quartermaster_pricing::{CapacityType, Catalog, Cloud, InstanceType};

use crate::config::AzureSettings;
use crate::errors::AzureError;
use crate::errors::map_api_error;
use crate::names::{image_tag, reservation_group, split_zone, vm_name};
use crate::port::{Arm, CapacityReservation, ImageRef, OperationStatus, Vm, VmSpec};
use crate::sdk::SdkArm;

/// The tag naming the cluster (Azure tag names cannot hold `/`, so `_` stands for it, as
/// Karpenter's Azure provider does).
pub const TAG_CLUSTER: &str = "quartermaster.dev_cluster";
/// The tag naming the NodePool.
pub const TAG_NODEPOOL: &str = "quartermaster.dev_nodepool";
/// The tag naming the NodeClaim a VM was launched for.
pub const TAG_NODECLAIM: &str = "quartermaster.dev_nodeclaim";
/// The tag naming the AzureNodeClass a VM was launched from.
pub const TAG_NODECLASS: &str = "quartermaster.dev_nodeclass";
/// The tag holding a hash of the VM's image (a change in the NodeClass marks it drifted).
pub const TAG_IMAGE: &str = "quartermaster.dev_image";

/// Reads a VM's bootstrap custom data from the Secret an AzureNodeClass names (the controller
/// implements it with its Kubernetes client; this crate stays kube-free).
pub trait BootstrapData: Send + Sync {
    /// The custom data (plain text) under the reference's key.
    fn custom_data<'a>(
        &'a self,
        secret: &'a AzureBootstrapSecretRef,
    ) -> Pin<Box<dyn Future<Output = Result<String, AzureError>> + Send + 'a>>;
}

/// The Azure cloud.
pub struct AzureCloud {
    arm: Arc<dyn Arm>,
    settings: AzureSettings,
    catalog: Catalog,
    clock: Arc<dyn Clock>,
    bootstrap: Option<Arc<dyn BootstrapData>>,
    /// The latest spec of each AzureNodeClass seen, by name (drift compares against it).
    node_classes: NodeClasses<AzureNodeClassSpec>,
}

impl std::fmt::Debug for AzureCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureCloud")
            .field("cluster", &self.settings.cluster_name)
            .field("resource_group", &self.settings.resource_group)
            .finish_non_exhaustive()
    }
}

impl AzureCloud {
    /// The Azure cloud through `azure_mgmt_compute`, configured by `settings` (credentials from
    /// azure_identity's default chain unless the settings say otherwise).
    pub fn connect(
        settings: AzureSettings,
        catalog: Catalog,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, AzureError> {
        let limits = settings.rate_limits.limits();
        let arm = SdkArm::new(&settings, limits).map_err(|e| AzureError::Settings(e.message))?;
        Ok(Self::with_port(Arc::new(arm), settings, catalog, clock))
    }

    /// The Azure cloud over any implementation of the port (tests fake it).
    pub fn with_port(
        arm: Arc<dyn Arm>,
        settings: AzureSettings,
        catalog: Catalog,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            arm,
            settings,
            catalog,
            clock,
            bootstrap: None,
            node_classes: NodeClasses::default(),
        }
    }

    /// Records the current spec of AzureNodeClass `name` (the controller calls this when the
    /// NodeClass changes; launches record it too), so `is_drifted` compares against it.
    pub fn set_node_class(&self, name: &str, spec: AzureNodeClassSpec) {
        self.node_classes.set(name.to_owned(), spec);
    }

    fn node_class(&self, name: &str) -> Option<AzureNodeClassSpec> {
        self.node_classes.get(name)
    }

    /// The same cloud reading bootstrap custom data through `bootstrap`.
    pub fn with_bootstrap(mut self, bootstrap: Option<Arc<dyn BootstrapData>>) -> Self {
        self.bootstrap = bootstrap;
        self
    }

    /// The port (doctor uses it for its probes).
    pub fn arm(&self) -> &Arc<dyn Arm> {
        &self.arm
    }

    fn price(&self, instance_type: &str, zone: &str, capacity_type: CapacityType) -> f64 {
        catalog_price(
            &self.catalog,
            Cloud::Azure,
            instance_type,
            zone,
            capacity_type,
        )
    }

    fn provider_id(&self, vm: &Vm) -> String {
        if vm.id.is_empty() {
            format!(
                "azure:///subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines/{}",
                self.settings.subscription_id, self.settings.resource_group, vm.name
            )
        } else {
            format!("azure://{}", vm.id)
        }
    }

    fn instance(&self, vm: &Vm) -> Instance {
        let zone = match &vm.zone {
            Some(z) => format!("{}-{z}", vm.location),
            None => vm.location.clone(),
        };
        let capacity_type = if vm.priority.as_deref() == Some("Spot") {
            CapacityType::Spot
        } else if vm.capacity_reservation_group.is_some() {
            // Created in a capacity reservation group: it runs on the group's reserved capacity.
            CapacityType::Reserved
        } else {
            CapacityType::OnDemand
        };
        Instance {
            provider_id: self.provider_id(vm),
            claim_name: vm.tags.get(TAG_NODECLAIM).cloned().unwrap_or_default(),
            instance_type: vm.size.clone(),
            price_per_hour: self.price(&vm.size, &zone, capacity_type),
            zone,
            capacity_type,
            state: state(vm.provisioning_state.as_deref()),
            launched_at: vm.time_created.unwrap_or_else(|| self.clock.now()),
            tags: vm.tags.clone(),
        }
    }

    fn ours(&self, vm: &Vm) -> bool {
        vm.tags.get(TAG_CLUSTER) == Some(&self.settings.cluster_name)
            && vm.tags.contains_key(TAG_NODECLAIM)
    }

    /// The live VM already launched for `claim`, if any.
    async fn existing(&self, claim: &str) -> Result<Option<Vm>, CloudError> {
        let vms = self
            .arm
            .list_vms()
            .await
            .map_err(|e| map_api_error(&e, None))?;
        Ok(vms.into_iter().find(|vm| {
            self.ours(vm)
                && vm.tags.get(TAG_NODECLAIM).map(String::as_str) == Some(claim)
                && !matches!(
                    vm.provisioning_state.as_deref(),
                    Some("Failed" | "Deleting")
                )
        }))
    }

    fn tags(&self, request: &LaunchRequest, spec: &AzureNodeClassSpec) -> BTreeMap<String, String> {
        let mut tags: BTreeMap<String, String> = spec
            .tags
            .iter()
            .chain(request.tags.iter())
            .map(|(k, v)| (k.replace('/', "_"), v.clone()))
            .collect();
        tags.insert(TAG_CLUSTER.to_owned(), self.settings.cluster_name.clone());
        tags.insert(TAG_NODEPOOL.to_owned(), request.node_pool.clone());
        tags.insert(TAG_NODECLAIM.to_owned(), request.claim_name.clone());
        tags.insert(TAG_NODECLASS.to_owned(), request.node_class.clone());
        tags
    }

    async fn custom_data(&self, spec: &AzureNodeClassSpec) -> Result<Option<String>, CloudError> {
        let Some(secret) = &spec.bootstrap_secret_ref else {
            return Ok(None);
        };
        let Some(source) = &self.bootstrap else {
            return Err(AzureError::Bootstrap(format!(
                "bootstrapSecretRef {} is set but this controller cannot read Secrets",
                secret.name
            ))
            .into());
        };
        Ok(Some(source.custom_data(secret).await?))
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, CloudError> {
        let spec = match &request.node_class_spec {
            Some(NodeClassSpec::Azure(spec)) => spec,
            Some(_) => {
                return Err(CloudError::InvalidRequest {
                    message: format!(
                        "NodeClass {} is not an AzureNodeClass; the Azure cloud cannot launch it",
                        request.node_class
                    ),
                });
            }
            None => {
                return Err(CloudError::InvalidRequest {
                    message: format!("AzureNodeClass {} was not found", request.node_class),
                });
            }
        };
        if !spec
            .subscription_id
            .eq_ignore_ascii_case(&self.settings.subscription_id)
            || !spec
                .resource_group
                .eq_ignore_ascii_case(&self.settings.resource_group)
        {
            return Err(CloudError::InvalidRequest {
                message: format!(
                    "AzureNodeClass {} asks for subscription {} resource group {}, but the controller manages {} / {} (--azure-subscription-id, --azure-resource-group)",
                    request.node_class,
                    spec.subscription_id,
                    spec.resource_group,
                    self.settings.subscription_id,
                    self.settings.resource_group
                ),
            });
        }
        self.set_node_class(&request.node_class, spec.as_ref().clone());
        // A retried or restarted launch finds the VM it already has: never a second one.
        if let Some(vm) = self.existing(&request.claim_name).await? {
            tracing::info!(nodeclaim = %request.claim_name, vm = %vm.name, "VM already launched");
            return Ok(self.instance(&vm));
        }
        let plain_custom_data = self.custom_data(spec).await?;
        // The bootstrap data is a secret: an error that quotes the request never shows it.
        let mut secrets = quartermaster_cloud::Secrets::new();
        let custom_data = plain_custom_data.map(|plain| {
            let encoded = base64::engine::general_purpose::STANDARD.encode(&plain);
            secrets.add(&plain);
            secrets.add(&encoded);
            encoded
        });
        let image = image(spec)?;
        let mut tags = self.tags(request, spec);
        tags.insert(TAG_IMAGE.to_owned(), image_tag(&image));
        let group = reserved_group(request)?;
        let offerings = request.offerings();
        let mut failures: Vec<CloudError> = Vec::new();
        for (i, offering) in offerings.iter().enumerate() {
            let (location, zone) = split_zone(&offering.zone, &spec.location);
            let vm_spec = VmSpec {
                name: vm_name(&request.claim_name, i),
                location,
                size: offering.instance_type.clone(),
                zone,
                spot: offering.capacity_type == CapacityType::Spot,
                subnet_id: spec.subnet_id.clone(),
                image: image.clone(),
                os_disk_size_gb: spec.os_disk_size_gb,
                custom_data: custom_data.clone(),
                ssh_public_key: spec.ssh_public_key.clone(),
                identities: spec.managed_identities.clone(),
                // Only a reserved offering goes into the group: other VMs of the class are not
                // reserved (a VM of a size or zone the group does not reserve fails in it).
                capacity_reservation_group: group
                    .filter(|_| offering.capacity_type == CapacityType::Reserved)
                    .map(str::to_owned),
                tags: tags.clone(),
            };
            let name = vm_spec.name.clone();
            match self.create_one(vm_spec, offering).await {
                Ok(vm) => {
                    let mut instance = self.instance(&vm);
                    instance.price_per_hour = offering.price_per_hour;
                    return Ok(instance);
                }
                Err(
                    e
                    @ (CloudError::InsufficientCapacity { .. } | CloudError::QuotaExceeded { .. }),
                ) => {
                    let e = e.scrubbed(&secrets);
                    tracing::info!(nodeclaim = %request.claim_name, vm = %name, error = %e, "no capacity; trying the next offering");
                    // The failed VM resource holds nothing billable; remove it so it does not linger.
                    if let Err(d) = self.arm.delete_vm(name).await {
                        tracing::warn!(error = %d.message, "could not delete a failed VM");
                    }
                    failures.push(e);
                }
                Err(e) => return Err(e.scrubbed(&secrets)),
            }
        }
        Err(exhausted(&offerings, &failures))
    }

    /// PUTs one VM and follows its operation to the end.
    async fn create_one(&self, spec: VmSpec, offering: &LaunchOffering) -> Result<Vm, CloudError> {
        let name = spec.name.clone();
        let accepted = self
            .arm
            .put_vm(spec)
            .await
            .map_err(|e| map_api_error(&e, Some(offering)))?;
        let timed_out = |secs: u64| {
            format!(
                "VM {name} was still being created after {secs}s; it is found by name on the next attempt"
            )
        };
        match &accepted.operation_url {
            Some(url) => {
                self.follow(url, accepted.retry_after, Some(offering), timed_out)
                    .await?;
            }
            None => {
                // No operation to follow: the VM's own provisioning state says when it is done.
                return self
                    .wait(accepted.retry_after, timed_out, || async {
                        match self
                            .arm
                            .get_vm(name.clone())
                            .await
                            .map_err(|e| map_api_error(&e, Some(offering)))?
                        {
                            Some(vm) if vm.provisioning_state.as_deref() == Some("Succeeded") => {
                                Ok(Step::Done(vm))
                            }
                            Some(vm) if vm.provisioning_state.as_deref() == Some("Failed") => {
                                Err(map_api_error(
                                    &crate::port::ApiError::service(
                                        "AllocationFailed",
                                        "the VM's provisioning failed",
                                    ),
                                    Some(offering),
                                ))
                            }
                            _ => Ok(Step::Wait(None)),
                        }
                    })
                    .await;
            }
        }
        match self
            .arm
            .get_vm(name.clone())
            .await
            .map_err(|e| map_api_error(&e, Some(offering)))?
        {
            Some(vm) => Ok(vm),
            None => Ok(accepted.vm),
        }
    }

    /// Follows the operation at `url` until it succeeds (`Ok`) or fails (its error, about
    /// `offering` when it is a launch's).
    async fn follow(
        &self,
        url: &str,
        retry_after: Option<std::time::Duration>,
        offering: Option<&LaunchOffering>,
        timed_out: impl Fn(u64) -> String,
    ) -> Result<(), CloudError> {
        self.wait(retry_after, timed_out, || async {
            match self
                .arm
                .operation(url.to_owned())
                .await
                .map_err(|e| map_api_error(&e, offering))?
            {
                OperationStatus::Succeeded => Ok(Step::Done(())),
                OperationStatus::Failed(e) => Err(map_api_error(&e, offering)),
                OperationStatus::InProgress { retry_after } => Ok(Step::Wait(retry_after)),
            }
        })
        .await
    }

    /// Asks `step` until it is done: at once, then after ARM's `Retry-After` (`first`, else the
    /// poll interval) and every poll interval after that (or as a step's answer asks); after
    /// the operation timeout the call fails as transient with `timed_out(seconds waited)`.
    async fn wait<T, F>(
        &self,
        first: Option<std::time::Duration>,
        timed_out: impl Fn(u64) -> String,
        mut step: impl FnMut() -> F,
    ) -> Result<T, CloudError>
    where
        F: Future<Output = Result<Step<T>, CloudError>>,
    {
        let limits = self.settings.call_limits;
        let mut waited = std::time::Duration::ZERO;
        let mut delay = first.unwrap_or(limits.poll_interval);
        loop {
            match step().await? {
                Step::Done(done) => return Ok(done),
                Step::Wait(Some(asked)) => delay = asked,
                Step::Wait(None) => {}
            }
            if waited >= limits.operation_timeout {
                return Err(CloudError::Transient {
                    message: timed_out(waited.as_secs()),
                });
            }
            tokio::time::sleep(delay).await;
            waited += delay;
            delay = limits.poll_interval;
        }
    }

    fn vm_name_of(provider_id: &str) -> Result<&str, CloudError> {
        provider_id
            .strip_prefix("azure://")
            .and_then(|rest| {
                let lower = rest.to_ascii_lowercase();
                let at = lower.rfind("/virtualmachines/")?;
                Some(&rest[at + "/virtualmachines/".len()..])
            })
            .filter(|n| !n.is_empty() && !n.contains('/'))
            .ok_or_else(|| CloudError::InvalidRequest {
                message: format!(
                    "{provider_id:?} is not an Azure VM provider id (azure:///subscriptions/…/virtualMachines/NAME)"
                ),
            })
    }

    async fn get_one(&self, provider_id: &str) -> Result<Vm, CloudError> {
        let name = Self::vm_name_of(provider_id)?;
        let vm = self
            .arm
            .get_vm(name.to_owned())
            .await
            .map_err(|e| map_api_error(&e, None))?;
        vm.ok_or_else(|| CloudError::NotFound {
            provider_id: provider_id.to_owned(),
        })
    }

    /// The catalog's Azure types in `location`, with offerings the Resource SKUs API does not
    /// allow (unknown size, restricted, zone not offered) marked unavailable.
    async fn types_in(&self, location: &str) -> Result<Vec<InstanceType>, CloudError> {
        let skus = self
            .arm
            .resource_skus(location.to_owned())
            .await
            .map_err(|e| map_api_error(&e, None))?;
        let by_name: BTreeMap<&str, &crate::port::Sku> =
            skus.iter().map(|s| (s.name.as_str(), s)).collect();
        Ok(self
            .catalog
            .for_cloud(Cloud::Azure)
            .filter(|t| t.offerings.iter().any(|o| o.region == location))
            .map(|t| {
                let mut t = t.clone();
                t.offerings.retain(|o| o.region == location);
                let sku = by_name.get(t.name.as_str());
                for o in &mut t.offerings {
                    let (_, zone) = split_zone(&o.zone, location);
                    o.available = o.available
                        && sku.is_some_and(|s| {
                            s.restrictions.is_empty()
                                && zone.as_ref().is_none_or(|z| s.zones.contains(z))
                        });
                }
                t
            })
            .collect())
    }
}

/// A capacity reservation as the engine sees it: its ARM id, the VM size, the zone in our
/// naming (`eastus-1`; the location alone for a regional one, as regional VMs are named), free
/// slots = what it holds now (`currentCapacity`, else `sku.capacity`) − the VMs allocated
/// against it, priced `price_per_hour` (Azure bills a capacity reservation at the pay-as-you-go
/// rate of its size, used or not), tagged with its group's ARM id
/// ([`TAG_RESERVATION_GROUP`](quartermaster_pricing::reservation::TAG_RESERVATION_GROUP)).
fn reservation_of(
    r: &CapacityReservation,
    price_per_hour: f64,
) -> quartermaster_pricing::Reservation {
    // Allocated VMs when the group's instance view names the reservation; else the VMs
    // associated with it (deallocated ones included: never more free than there is).
    let used = r.allocated.unwrap_or(r.associated);
    let held = r.current_capacity.map_or(r.capacity, |c| c.min(r.capacity));
    let mut tags = r.tags.clone();
    tags.insert(
        quartermaster_pricing::reservation::TAG_RESERVATION_GROUP.to_owned(),
        r.group_id.clone(),
    );
    quartermaster_pricing::Reservation {
        id: r.id.clone(),
        cloud: Cloud::Azure,
        instance_type: r.size.clone(),
        zone: reservation_zone(r),
        count: r.capacity,
        available: Some(held.saturating_sub(used)),
        kind: quartermaster_pricing::ReservationKind::Default,
        price_per_hour,
        start: None,
        end: None,
        tags,
    }
}

/// A capacity reservation's zone in our naming (`eastus-1`; `eastus` when regional).
fn reservation_zone(r: &CapacityReservation) -> String {
    match &r.zone {
        Some(z) => format!("{}-{z}", r.location),
        None => r.location.clone(),
    }
}

/// What one poll of a long-running operation found.
enum Step<T> {
    /// Done, with this.
    Done(T),
    /// Not yet; ARM asked to wait this long before the next poll, when it said.
    Wait(Option<std::time::Duration>),
}

/// The capacity reservation group a reserved launch goes into: the group of the capacity
/// reservation its NodeClaim names ([`LABEL_RESERVATION_ID`]); `None` for other launches.
///
/// [`LABEL_RESERVATION_ID`]: quartermaster_pricing::reservation::LABEL_RESERVATION_ID
fn reserved_group(request: &LaunchRequest) -> Result<Option<&str>, CloudError> {
    if request.capacity_type != CapacityType::Reserved {
        return Ok(None);
    }
    let label = quartermaster_pricing::reservation::LABEL_RESERVATION_ID;
    let Some(id) = request.labels.get(label) else {
        return Err(CloudError::InvalidRequest {
            message: format!(
                "NodeClaim {}: a reserved launch names no capacity reservation (label {label})",
                request.claim_name
            ),
        });
    };
    reservation_group(id).map(Some).ok_or_else(|| CloudError::InvalidRequest {
        message: format!(
            "NodeClaim {}: {id:?} (label {label}) is not an Azure capacity reservation id (/subscriptions/…/capacityReservationGroups/<group>/capacityReservations/<name>)",
            request.claim_name
        ),
    })
}

/// The image of a NodeClass: its id, or a family's marketplace image (Ubuntu 22.04 by default).
fn image(spec: &AzureNodeClassSpec) -> Result<ImageRef, CloudError> {
    let family = match &spec.image {
        Some(i) => {
            if let Some(id) = &i.id {
                return Ok(ImageRef::Id(id.clone()));
            }
            i.image_family.as_deref().unwrap_or("Ubuntu2204")
        }
        None => "Ubuntu2204",
    };
    let (publisher, offer, sku) = match family {
        "Ubuntu2204" => (
            "Canonical",
            "0001-com-ubuntu-server-jammy",
            "22_04-lts-gen2",
        ),
        "Ubuntu2404" => ("Canonical", "ubuntu-24_04-lts", "server"),
        "AzureLinux" => ("MicrosoftCBLMariner", "azure-linux-3", "azure-linux-3-gen2"),
        other => {
            return Err(AzureError::NodeClass(format!(
                "image family {other:?} is not known (Ubuntu2204, Ubuntu2404, AzureLinux; or set image.id)"
            ))
            .into());
        }
    };
    Ok(ImageRef::Marketplace {
        publisher: publisher.to_owned(),
        offer: offer.to_owned(),
        sku: sku.to_owned(),
        version: "latest".to_owned(),
    })
}

fn state(provisioning_state: Option<&str>) -> InstanceState {
    match provisioning_state {
        Some("Succeeded") => InstanceState::Running,
        Some("Deleting") => InstanceState::ShuttingDown,
        Some("Failed") => InstanceState::Terminated,
        _ => InstanceState::Pending,
    }
}

#[cfg(test)]
mod tests;
