//! [`CloudProvider`] for [`GcpCloud`]: the seam's calls over the launch, look-up, reservation and preemption code of the parent module.

use super::*;

impl CloudProvider for GcpCloud {
    fn cloud(&self) -> Cloud {
        Cloud::Gcp
    }

    fn create<'a>(&'a self, request: &'a LaunchRequest) -> CloudFuture<'a, Instance> {
        Box::pin(async move {
            // A rejected launch may quote the request (user data, metadata) in the cloud's
            // words; those words become logs, Events and NodeClaim conditions.
            let secrets = request.secrets();
            self.launch(request).await.map_err(|e| e.scrubbed(&secrets))
        })
    }

    fn delete<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        Box::pin(async move {
            let (project, zone, name) = parsed_provider_id(provider_id)?;
            self.compute
                .delete(project.to_owned(), zone.to_owned(), name.to_owned())
                .await
                .map_err(|e| map_api_error(&e, None).not_found_as(provider_id))?;
            Ok(())
        })
    }

    fn get<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, Instance> {
        Box::pin(async move {
            let (project, i) = self.get_one(provider_id).await?;
            Ok(self.instance(&project, &i))
        })
    }

    fn list(&self) -> CloudFuture<'_, Vec<Instance>> {
        Box::pin(async move {
            let project = self.list_project()?;
            let found = self
                .compute
                .list(project.clone(), self.cluster_filter())
                .await
                .map_err(|e| map_api_error(&e, None))?;
            Ok(found
                .iter()
                .filter(|i| i.labels.contains_key(LABEL_NODECLAIM))
                .map(|i| self.instance(&project, i))
                .collect())
        })
    }

    /// The reservations of the configured project (`--gcp-project`) that take launches, priced
    /// at the catalog's on-demand rate of their machine type and zone (what a reservation is
    /// billed, used or not; committed-use discounts are the bill's business).
    fn reservations(&self) -> CloudFuture<'_, Vec<Reservation>> {
        Box::pin(async move {
            let Some(project) = self.project.clone() else {
                return Ok(Vec::new());
            };
            let found = self.list_reservations(&project).await?;
            Ok(found
                .iter()
                .filter_map(|r| {
                    let on_demand = r
                        .machine_type
                        .as_deref()
                        .map_or(0.0, |t| self.price(t, &r.zone, CapacityType::OnDemand));
                    reservation(r, on_demand)
                })
                .collect())
        })
    }

    /// `instances.reset`: a hard reset in place (same instance, disks and reservation), waited
    /// for like a launch.
    fn reboot<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        Box::pin(async move {
            let (project, zone, name) = parsed_provider_id(provider_id)?;
            let op = self
                .compute
                .reset(project.to_owned(), zone.to_owned(), name.to_owned())
                .await
                .map_err(|e| map_api_error(&e, None).not_found_as(provider_id))?;
            self.wait(project, zone, op, None)
                .await
                .map_err(|e| e.not_found_as(provider_id))
        })
    }

    fn instance_types(&self) -> CloudFuture<'_, Vec<InstanceType>> {
        Box::pin(async move { Ok(self.catalog.for_cloud(Cloud::Gcp).cloned().collect()) })
    }

    fn node_class_observed(&self, name: &str, spec: &NodeClassSpec) {
        if let NodeClassSpec::Gcp(spec) = spec {
            self.set_node_class(name, spec.as_ref().clone());
        }
    }

    fn is_drifted<'a>(&'a self, instance: &'a Instance) -> CloudFuture<'a, Option<String>> {
        Box::pin(async move {
            let Some(class) = instance.tags.get(LABEL_NODECLASS) else {
                return Ok(None);
            };
            Ok(self
                .node_class(class)
                .and_then(|spec| drift_reason(instance, &spec)))
        })
    }

    fn poll_events(&self) -> CloudFuture<'_, Vec<CloudEvent>> {
        Box::pin(async move {
            let Some(project) = self.project.clone() else {
                return Ok(Vec::new());
            };
            let found = self
                .compute
                .list(project, self.cluster_filter())
                .await
                .map_err(|e| map_api_error(&e, None))?;
            Ok(self.preemptions(&found, self.clock.now()))
        })
    }
}
