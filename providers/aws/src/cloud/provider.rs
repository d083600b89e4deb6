//! [`CloudProvider`] for [`AwsCloud`]: the seam's calls over the launch, look-up and interruption code of the parent module.

use super::*;

impl CloudProvider for AwsCloud {
    fn cloud(&self) -> Cloud {
        Cloud::Aws
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
            let instance = self.describe_one(provider_id).await?;
            if instance.state == "shutting-down" {
                return Ok(());
            }
            self.ec2
                .terminate_instances(vec![instance.id])
                .await
                .map_err(|e| map_api_error(&e, None).not_found_as(provider_id))
        })
    }

    fn reboot<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        Box::pin(async move {
            let instance = self.describe_one(provider_id).await?;
            if instance.state == "shutting-down" {
                return Err(CloudError::NotFound {
                    provider_id: provider_id.to_owned(),
                });
            }
            self.ec2
                .reboot_instances(vec![instance.id])
                .await
                .map_err(|e| map_api_error(&e, None).not_found_as(provider_id))
        })
    }

    fn get<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, Instance> {
        Box::pin(async move {
            let i = self.describe_one(provider_id).await?;
            Ok(self.instance(&i))
        })
    }

    fn list(&self) -> CloudFuture<'_, Vec<Instance>> {
        Box::pin(async move {
            let found = self
                .ec2
                .describe_instances(vec![
                    self.cluster_filter(),
                    Filter::new("tag-key", [TAG_NODECLAIM]),
                    Self::live_filter(),
                ])
                .await
                .map_err(|e| map_api_error(&e, None))?;
            // The filters asked for these tags; an instance answered without them (a response
            // missing its tagSet) would look like a leak of no claim to the sweep, which would
            // terminate it. Only instances that show they are ours are listed.
            Ok(found
                .iter()
                .filter(|i| {
                    i.tags.get(TAG_CLUSTER) == Some(&self.cluster.name)
                        && i.tags.contains_key(TAG_NODECLAIM)
                })
                .map(|i| self.instance(i))
                .collect())
        })
    }

    fn instance_types(&self) -> CloudFuture<'_, Vec<InstanceType>> {
        Box::pin(async move {
            let types = self
                .ec2
                .describe_instance_types()
                .await
                .map_err(|e| map_api_error(&e, None))?;
            let offerings = self
                .ec2
                .describe_instance_type_offerings()
                .await
                .map_err(|e| map_api_error(&e, None))?;
            Ok(crate::instance_types::merge(
                &self.catalog,
                self.region.as_deref(),
                &types,
                &offerings,
            ))
        })
    }

    fn reservations(&self) -> CloudFuture<'_, Vec<quartermaster_pricing::Reservation>> {
        Box::pin(async move {
            self.ec2
                .describe_capacity_reservations()
                .await
                .map_err(|e| map_api_error(&e, None))
        })
    }

    fn node_class_observed(&self, name: &str, spec: &NodeClassSpec) {
        if let NodeClassSpec::Aws(spec) = spec {
            self.set_node_class(name, spec.as_ref().clone());
        }
    }

    fn is_drifted<'a>(&'a self, instance: &'a Instance) -> CloudFuture<'a, Option<String>> {
        Box::pin(async move {
            // The NodeClass it was launched from, as known (launched or set since the start).
            let Some(spec) = instance
                .tags
                .get(crate::drift::TAG_NODECLASS)
                .and_then(|name| self.node_class(name))
            else {
                return Ok(None);
            };
            let running = self.describe_one(&instance.provider_id).await?;
            let facts = crate::drift::InstanceFacts {
                image_id: running.image_id.clone(),
                subnet_id: running.subnet_id.clone(),
                security_group_ids: running.security_group_ids.iter().cloned().collect(),
            };
            let no_parameters = NoParameters;
            let parameters: &dyn Parameters = match &self.parameters {
                Some(p) => p.as_ref(),
                None => &no_parameters,
            };
            let wanted = crate::drift::resolve_wanted(
                self.ec2.as_ref(),
                parameters,
                &spec,
                &self.image_key(&running.instance_type),
                self.kubernetes_version.as_deref(),
            )
            .await
            .map_err(|e| match e {
                ResolveError::NodeClass(e) => CloudError::from(e),
                ResolveError::Api(e) => map_api_error(&e, None),
            })?;
            Ok(crate::drift::compare(&facts, &wanted).map(|d| d.to_string()))
        })
    }

    fn poll_events(&self) -> CloudFuture<'_, Vec<CloudEvent>> {
        Box::pin(async move {
            let Some(queue) = &self.queue else {
                return Ok(Vec::new());
            };
            self.interruption_events(queue.as_ref()).await
        })
    }
}
