//! [`CloudProvider`] for [`AzureCloud`]: the seam's calls over the launch, look-up and reservation code of the parent module.

use super::*;

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
                .map_err(|e| map_api_error(&e, None).not_found_as(provider_id))
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

    fn reservations(&self) -> CloudFuture<'_, Vec<quartermaster_pricing::Reservation>> {
        Box::pin(async move {
            let reservations = self
                .arm
                .capacity_reservations()
                .await
                .map_err(|e| map_api_error(&e, None))?;
            Ok(reservations
                .iter()
                // Being created, deleted or failed: nothing to launch into.
                .filter(|r| {
                    r.provisioning_state
                        .as_deref()
                        .is_none_or(|s| s == "Succeeded" || s == "Updating")
                })
                .filter(|r| {
                    self.settings
                        .location
                        .as_deref()
                        .is_none_or(|l| r.location.eq_ignore_ascii_case(l))
                })
                .map(|r| {
                    let price = self.price(&r.size, &reservation_zone(r), CapacityType::OnDemand);
                    reservation_of(r, price)
                })
                .collect())
        })
    }

    fn reboot<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        Box::pin(async move {
            let name = Self::vm_name_of(provider_id)?;
            let started = self
                .arm
                .restart_vm(name.to_owned())
                .await
                .map_err(|e| map_api_error(&e, None).not_found_as(provider_id))?;
            let Some(url) = started.operation_url else {
                return Ok(());
            };
            self.follow(&url, started.retry_after, None, |secs| {
                format!("VM {name} was still restarting after {secs}s")
            })
            .await
            .map_err(|e| e.not_found_as(provider_id))
        })
    }

    fn poll_events(&self) -> CloudFuture<'_, Vec<CloudEvent>> {
        // Azure announces spot evictions through each VM's Scheduled Events (IMDS), which only
        // the node itself can read; a node-side handler is not part of this provider yet.
        Box::pin(async { Ok(Vec::new()) })
    }
}
