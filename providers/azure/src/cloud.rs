//! [`AzureCloud`]: the [`CloudProvider`] over the ARM port.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use quartermaster_cloud::{
    Clock, CloudError, CloudEvent, CloudFuture, CloudProvider, Instance, InstanceState,
    LaunchOffering, LaunchRequest, NodeClassSpec,
};
use quartermaster_policies::AzureNodeClassSpec;
use quartermaster_policies::nodeclass::azure::AzureBootstrapSecretRef;
use quartermaster_pricing::{CapacityType, Catalog, Cloud, InstanceType};

use crate::config::AzureSettings;
use crate::error::AzureError;
use crate::errors::map_api_error;
use crate::names::{image_tag, split_zone, vm_name};
use crate::port::{Arm, ImageRef, OperationStatus, Vm, VmSpec};
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
    node_classes: Mutex<BTreeMap<String, AzureNodeClassSpec>>,
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
            node_classes: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records the current spec of AzureNodeClass `name` (the controller calls this when the
    /// NodeClass changes; launches record it too), so `is_drifted` compares against it.
    pub fn set_node_class(&self, name: &str, spec: AzureNodeClassSpec) {
        self.node_classes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), spec);
    }

    fn node_class(&self, name: &str) -> Option<AzureNodeClassSpec> {
        self.node_classes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
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
        self.catalog
            .get(Cloud::Azure, instance_type)
            .and_then(|t| {
                t.offerings
                    .iter()
                    .find(|o| o.zone == zone && o.capacity_type == capacity_type)
                    .or_else(|| {
                        t.offerings
                            .iter()
                            .find(|o| o.capacity_type == capacity_type)
                    })
            })
            .map_or(0.0, |o| o.price_per_hour)
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
        let limits = self.settings.call_limits;
        let mut waited = std::time::Duration::ZERO;
        let mut delay = accepted.retry_after.unwrap_or(limits.poll_interval);
        loop {
            let done = match &accepted.operation_url {
                Some(url) => match self
                    .arm
                    .operation(url.clone())
                    .await
                    .map_err(|e| map_api_error(&e, Some(offering)))?
                {
                    OperationStatus::Succeeded => true,
                    OperationStatus::Failed(e) => return Err(map_api_error(&e, Some(offering))),
                    OperationStatus::InProgress { retry_after } => {
                        if let Some(r) = retry_after {
                            delay = r;
                        }
                        false
                    }
                },
                None => match self
                    .arm
                    .get_vm(name.clone())
                    .await
                    .map_err(|e| map_api_error(&e, Some(offering)))?
                {
                    Some(vm) if vm.provisioning_state.as_deref() == Some("Succeeded") => {
                        return Ok(vm);
                    }
                    Some(vm) if vm.provisioning_state.as_deref() == Some("Failed") => {
                        return Err(map_api_error(
                            &crate::port::ApiError::service(
                                "AllocationFailed",
                                "the VM's provisioning failed",
                            ),
                            Some(offering),
                        ));
                    }
                    _ => false,
                },
            };
            if done {
                break;
            }
            if waited >= limits.operation_timeout {
                return Err(CloudError::Transient {
                    message: format!(
                        "VM {name} was still being created after {}s; it is found by name on the next attempt",
                        waited.as_secs()
                    ),
                });
            }
            tokio::time::sleep(delay).await;
            waited += delay;
            delay = limits.poll_interval;
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

/// The error when every offering failed: capacity naming the last offering (so the engine
/// knows every offering of the request was tried), or quota when only quotas stopped it.
fn exhausted(offerings: &[LaunchOffering], failures: &[CloudError]) -> CloudError {
    let words: Vec<String> = failures.iter().map(ToString::to_string).collect();
    let message = if words.is_empty() {
        "no offering could be tried".to_owned()
    } else {
        words.join("; ")
    };
    if !failures.is_empty()
        && failures
            .iter()
            .all(|e| matches!(e, CloudError::QuotaExceeded { .. }))
    {
        return CloudError::QuotaExceeded { message };
    }
    match offerings.last() {
        Some(last) => CloudError::InsufficientCapacity {
            instance_type: last.instance_type.clone(),
            zone: last.zone.clone(),
            capacity_type: last.capacity_type,
            message,
        },
        None => CloudError::InvalidRequest { message },
    }
}

impl CloudProvider for AzureCloud {
    fn cloud(&self) -> Cloud {
        Cloud::Azure
    }

    fn create<'a>(&'a self, request: &'a LaunchRequest) -> CloudFuture<'a, Instance> {
        Box::pin(self.launch(request))
    }

    fn delete<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        Box::pin(async move {
            let vm = self.get_one(provider_id).await?;
            if vm.provisioning_state.as_deref() == Some("Deleting") {
                return Ok(());
            }
            self.arm
                .delete_vm(vm.name)
                .await
                .map_err(|e| match map_api_error(&e, None) {
                    CloudError::NotFound { .. } => CloudError::NotFound {
                        provider_id: provider_id.to_owned(),
                    },
                    other => other,
                })
        })
    }

    fn get<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, Instance> {
        Box::pin(async move {
            let vm = self.get_one(provider_id).await?;
            Ok(self.instance(&vm))
        })
    }

    fn list(&self) -> CloudFuture<'_, Vec<Instance>> {
        Box::pin(async move {
            let vms = self
                .arm
                .list_vms()
                .await
                .map_err(|e| map_api_error(&e, None))?;
            Ok(vms
                .iter()
                .filter(|vm| self.ours(vm))
                .map(|vm| self.instance(vm))
                .collect())
        })
    }

    fn instance_types(&self) -> CloudFuture<'_, Vec<InstanceType>> {
        Box::pin(async move {
            match &self.settings.location {
                Some(location) => self.types_in(location).await,
                None => Ok(self.catalog.for_cloud(Cloud::Azure).cloned().collect()),
            }
        })
    }

    fn node_class_observed(&self, name: &str, spec: &NodeClassSpec) {
        if let NodeClassSpec::Azure(spec) = spec {
            self.set_node_class(name, spec.as_ref().clone());
        }
    }

    fn is_drifted<'a>(&'a self, instance: &'a Instance) -> CloudFuture<'a, Option<String>> {
        Box::pin(async move {
            let (Some(class), Some(have)) = (
                instance.tags.get(TAG_NODECLASS),
                instance.tags.get(TAG_IMAGE),
            ) else {
                return Ok(None);
            };
            let Some(spec) = self.node_class(class) else {
                return Ok(None);
            };
            let Ok(want) = image(&spec) else {
                return Ok(None);
            };
            Ok((image_tag(&want) != *have)
                .then(|| format!("AzureNodeClass {class} now selects another image ({want:?})")))
        })
    }

    fn poll_events(&self) -> CloudFuture<'_, Vec<CloudEvent>> {
        // Azure announces spot evictions through each VM's Scheduled Events (IMDS), which only
        // the node itself can read; a node-side handler is not part of this provider yet.
        Box::pin(async { Ok(Vec::new()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_name_the_vm() {
        let p = "azure:///subscriptions/s/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachines/qm-a-0";
        assert_eq!(AzureCloud::vm_name_of(p).unwrap(), "qm-a-0");
        assert!(AzureCloud::vm_name_of("aws:///us-east-1a/i-1").is_err());
        assert!(AzureCloud::vm_name_of("azure:///subscriptions/s").is_err());
    }

    #[test]
    fn provisioning_states_map_to_instance_states() {
        assert_eq!(state(Some("Creating")), InstanceState::Pending);
        assert_eq!(state(Some("Succeeded")), InstanceState::Running);
        assert_eq!(state(Some("Deleting")), InstanceState::ShuttingDown);
        assert_eq!(state(Some("Failed")), InstanceState::Terminated);
    }

    #[test]
    fn exhausted_names_the_last_offering_or_quota() {
        let o = |t: &str| LaunchOffering {
            instance_type: t.into(),
            zone: "eastus-1".into(),
            capacity_type: CapacityType::Spot,
            price_per_hour: 1.0,
        };
        let quota = CloudError::QuotaExceeded {
            message: "OperationNotAllowed".into(),
        };
        assert!(matches!(
            exhausted(&[o("a"), o("b")], std::slice::from_ref(&quota)),
            CloudError::QuotaExceeded { .. }
        ));
        match exhausted(&[o("a"), o("b")], &[quota]) {
            CloudError::QuotaExceeded { .. } => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unknown_image_family_is_a_nodeclass_error() {
        let spec: AzureNodeClassSpec = serde_json::from_value(serde_json::json!({
            "subscriptionId": "s", "resourceGroup": "rg", "location": "eastus",
            "subnetId": "/x", "image": {"imageFamily": "Windows"}
        }))
        .unwrap();
        assert!(matches!(
            image(&spec),
            Err(CloudError::InvalidRequest { .. })
        ));
    }
}
