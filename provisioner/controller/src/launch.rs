//! Carrying out the engine's `Launch`: the NodeClaim object is created with its finalizer
//! before the cloud is called, so no instance ever exists without a record that will delete it;
//! then the provider launches (idempotent on the claim name) and the outcome goes back to the
//! engine.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use quartermaster_cloud::{CloudError, LaunchRequest, NodeClassSpec};
use quartermaster_engine::Event;
use quartermaster_policies::labels::{
    LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_REGION, LABEL_ZONE,
};
use quartermaster_policies::{
    NodeClaim, NodeClaimSpec, NodePool, NodeSelectorRequirementWithMinValues,
};
use quartermaster_pricing::Cloud;
use serde_json::json;
use tokio::sync::mpsc;

use crate::context::Context;
use crate::driver::Outcome;
use crate::translate::{ANNOTATION_PRICE, FINALIZER, LABEL_NODEPOOL};

/// The NodeClaim object for a launch request of `pool`.
pub fn claim_object(request: &LaunchRequest, pool: &NodePool) -> NodeClaim {
    let template = &pool.spec.template;
    let mut labels: BTreeMap<String, String> = template.metadata.labels.clone();
    labels.insert(LABEL_NODEPOOL.to_owned(), request.node_pool.clone());
    labels.extend(offering_labels(request));
    // Labels the engine decided and reads back after a restart: the template hash the claim is
    // made from (drift is judged against it), the region, and a gang's name and placement group
    // (so a restarted controller still knows which claims launch together), and the
    // reservation a claim launched into (ours and Karpenter's keys).
    for key in [
        quartermaster_engine::TEMPLATE_HASH_LABEL,
        LABEL_REGION,
        quartermaster_engine::GANG_LABEL,
        quartermaster_engine::PLACEMENT_GROUP_LABEL,
        quartermaster_pricing::reservation::LABEL_RESERVATION_ID,
        quartermaster_pricing::reservation::LABEL_RESERVATION_TYPE,
        quartermaster_pricing::reservation::KARPENTER_RESERVATION_ID,
        quartermaster_pricing::reservation::KARPENTER_RESERVATION_TYPE,
    ] {
        if let Some(value) = request.labels.get(key) {
            labels.insert(key.to_owned(), value.clone());
        }
    }
    let mut annotations = template.metadata.annotations.clone();
    annotations.insert(
        ANNOTATION_PRICE.to_owned(),
        request.price_per_hour.to_string(),
    );
    let requirement = |key: &str, value: String| NodeSelectorRequirementWithMinValues {
        key: key.to_owned(),
        operator: "In".to_owned(),
        values: vec![value],
        min_values: None,
    };
    let spec = NodeClaimSpec {
        requirements: vec![
            requirement(LABEL_INSTANCE_TYPE, request.instance_type.clone()),
            requirement(LABEL_ZONE, request.zone.clone()),
            requirement(LABEL_CAPACITY_TYPE, request.capacity_type.to_string()),
        ],
        resources: None,
        taints: template.spec.taints.clone(),
        startup_taints: template.spec.startup_taints.clone(),
        node_class_ref: template.spec.node_class_ref.clone(),
        expire_after: template.spec.expire_after.clone(),
        termination_grace_period: template.spec.termination_grace_period.clone(),
    };
    let owner = pool.metadata.uid.as_ref().map(|uid| OwnerReference {
        api_version: "quartermaster.dev/v1".into(),
        kind: "NodePool".into(),
        name: request.node_pool.clone(),
        uid: uid.clone(),
        block_owner_deletion: Some(true),
        controller: None,
    });
    let mut claim = NodeClaim::new(&request.claim_name, spec);
    claim.metadata = ObjectMeta {
        name: Some(request.claim_name.clone()),
        labels: Some(labels),
        annotations: Some(annotations),
        finalizers: Some(vec![FINALIZER.to_owned()]),
        owner_references: owner.map(|o| vec![o]),
        ..ObjectMeta::default()
    };
    claim
}

/// The labels that record which offering a claim is launching.
fn offering_labels(request: &LaunchRequest) -> [(String, String); 3] {
    [
        (
            LABEL_INSTANCE_TYPE.to_owned(),
            request.instance_type.clone(),
        ),
        (LABEL_ZONE.to_owned(), request.zone.clone()),
        (
            LABEL_CAPACITY_TYPE.to_owned(),
            request.capacity_type.to_string(),
        ),
    ]
}

/// Runs one launch to its outcome and reports it on `outcomes`.
pub async fn launch(
    ctx: Arc<Context>,
    cloud: Cloud,
    request: LaunchRequest,
    pool: Option<Arc<NodePool>>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    decided: std::time::Instant,
) {
    let claim = request.claim_name.clone();
    let result = launch_inner(&ctx, cloud, &request, pool.as_deref(), decided).await;
    let event = match result {
        Ok(instance) => {
            // In the launch's span (the driver's): the claim and its pods.
            tracing::debug!(instance = %instance.provider_id, "launch finished");
            Event::Launched {
                claim: claim.clone(),
                instance,
            }
        }
        Err(error) => Event::LaunchFailed {
            claim: claim.clone(),
            error,
        },
    };
    let _ = outcomes.send(Outcome::Engine(Box::new(event)));
    let _ = outcomes.send(Outcome::LaunchDone { claim });
}

async fn launch_inner(
    ctx: &Context,
    cloud: Cloud,
    request: &LaunchRequest,
    pool: Option<&NodePool>,
    decided: std::time::Instant,
) -> Result<quartermaster_cloud::Instance, CloudError> {
    let transient = |e: crate::ControllerError| CloudError::Transient {
        message: format!("recording NodeClaim {}: {e}", request.claim_name),
    };
    let existing = ctx.stores.node_claim(&request.claim_name);
    match existing {
        None => {
            let pool = pool.ok_or_else(|| CloudError::InvalidRequest {
                message: format!("NodePool {} no longer exists", request.node_pool),
            })?;
            ctx.writer
                .create_claim(&claim_object(request, pool))
                .await
                .map_err(transient)?;
            ctx.metrics
                .nodeclaim_create_seconds
                .observe(decided.elapsed().as_secs_f64());
        }
        Some(existing) => {
            if existing.metadata.deletion_timestamp.is_some() {
                return Err(CloudError::InvalidRequest {
                    message: format!("NodeClaim {} is being deleted", request.claim_name),
                });
            }
            // A fallback to another offering: record it before launching it.
            let labels: BTreeMap<String, String> = offering_labels(request).into();
            let current = existing.metadata.labels.clone().unwrap_or_default();
            if labels.iter().any(|(k, v)| current.get(k) != Some(v)) {
                let patch = json!({"metadata": {
                    "labels": labels,
                    "annotations": {ANNOTATION_PRICE: request.price_per_hour.to_string()},
                }});
                ctx.writer
                    .patch_claim_metadata(&request.claim_name, patch)
                    .await
                    .map_err(transient)?;
            }
        }
    }
    let provider = ctx
        .provider(cloud)
        .ok_or_else(|| CloudError::InvalidRequest {
            message: format!("no cloud provider for {cloud} is configured"),
        })?;
    let mut request = request.clone();
    request.node_class_spec = node_class_spec(ctx, cloud, &request.node_class);
    // Whatever the provider, an error never carries the NodeClass's secrets (user data,
    // metadata) or the environment's credentials into logs, Events or the NodeClaim's
    // conditions.
    let secrets = request
        .secrets()
        .with(&quartermaster_cloud::Secrets::of_process());
    let instance = provider
        .create(&request)
        .await
        .map_err(|e| e.scrubbed(&secrets))?;
    // The provider fell back to another of the claim's offerings within the launch: the
    // NodeClaim records the offering the instance runs on.
    if !request.primary().matches(&instance) {
        let price = request
            .offerings()
            .into_iter()
            .find(|o| o.matches(&instance))
            .map_or(instance.price_per_hour, |o| o.price_per_hour);
        let patch = json!({"metadata": {
            "labels": {
                LABEL_INSTANCE_TYPE: instance.instance_type,
                LABEL_ZONE: instance.zone,
                LABEL_CAPACITY_TYPE: instance.capacity_type.to_string(),
            },
            "annotations": {ANNOTATION_PRICE: price.to_string()},
        }});
        if let Err(e) = ctx
            .writer
            .patch_claim_metadata(&request.claim_name, patch)
            .await
        {
            tracing::warn!(nodeclaim = %request.claim_name, error = %e, "could not record the offering the instance was launched on");
        }
    }
    Ok(instance)
}

/// Every NodeClass of `cloud`'s kind with its spec, from the watched objects.
pub fn node_classes(ctx: &Context, cloud: Cloud) -> Vec<(String, NodeClassSpec)> {
    fn named<S>(
        objects: Vec<std::sync::Arc<S>>,
        spec: impl Fn(&S) -> NodeClassSpec,
    ) -> Vec<(String, NodeClassSpec)>
    where
        S: kube::Resource,
    {
        objects
            .iter()
            .filter_map(|c| Some((c.meta().name.clone()?, spec(c))))
            .collect()
    }
    match cloud {
        Cloud::Aws => named(ctx.stores.aws_node_classes.state(), |c| {
            NodeClassSpec::Aws(Box::new(c.spec.clone()))
        }),
        Cloud::Gcp => named(ctx.stores.gcp_node_classes.state(), |c| {
            NodeClassSpec::Gcp(Box::new(c.spec.clone()))
        }),
        Cloud::Azure => named(ctx.stores.azure_node_classes.state(), |c| {
            NodeClassSpec::Azure(Box::new(c.spec.clone()))
        }),
    }
}

/// The spec of the NodeClass `name` of `cloud`'s kind, from the watched objects.
fn node_class_spec(ctx: &Context, cloud: Cloud, name: &str) -> Option<NodeClassSpec> {
    match cloud {
        Cloud::Aws => ctx
            .stores
            .aws_node_class(name)
            .map(|c| NodeClassSpec::Aws(Box::new(c.spec.clone()))),
        Cloud::Gcp => ctx
            .stores
            .gcp_node_class(name)
            .map(|c| NodeClassSpec::Gcp(Box::new(c.spec.clone()))),
        Cloud::Azure => ctx
            .stores
            .azure_node_class(name)
            .map(|c| NodeClassSpec::Azure(Box::new(c.spec.clone()))),
    }
}

/// The label value of a cloud error's kind (`launch_failures` metric, conditions' reasons).
pub fn error_kind(error: &CloudError) -> &'static str {
    match error {
        CloudError::InsufficientCapacity { .. } => "InsufficientCapacity",
        CloudError::QuotaExceeded { .. } => "QuotaExceeded",
        CloudError::Throttled { .. } => "Throttled",
        CloudError::NotFound { .. } => "NotFound",
        CloudError::InvalidRequest { .. } => "InvalidRequest",
        CloudError::Transient { .. } => "Transient",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use quartermaster_pricing::CapacityType;

    use super::*;

    /// A restarted controller reads a launch's gang, placement group, region and template hash
    /// back from its NodeClaim: they must be on the object, not only on the node.
    #[test]
    fn the_claim_keeps_the_labels_the_engine_reads_back() {
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
            "metadata": {"name": "train"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"},
                "requirements": []
            }}}
        }))
        .expect("a NodePool");
        let labels: BTreeMap<String, String> = [
            (quartermaster_engine::GANG_LABEL, "default.train"),
            (
                quartermaster_engine::PLACEMENT_GROUP_LABEL,
                "default.train-us-east-1a",
            ),
            (LABEL_REGION, "us-east-1"),
            (quartermaster_engine::TEMPLATE_HASH_LABEL, "abc"),
            ("unrelated.example/label", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let request = LaunchRequest {
            claim_name: "train-00001".to_owned(),
            node_pool: "train".to_owned(),
            node_class: "default".to_owned(),
            instance_type: "p5.48xlarge".to_owned(),
            zone: "us-east-1a".to_owned(),
            capacity_type: CapacityType::OnDemand,
            price_per_hour: 55.04,
            labels,
            tags: BTreeMap::new(),
            fallbacks: Vec::new(),
            node_class_spec: None,
        };
        let claim = claim_object(&request, &pool);
        let got = claim.metadata.labels.expect("labels");
        assert_eq!(got[quartermaster_engine::GANG_LABEL], "default.train");
        assert_eq!(
            got[quartermaster_engine::PLACEMENT_GROUP_LABEL],
            "default.train-us-east-1a"
        );
        assert_eq!(got[LABEL_REGION], "us-east-1");
        assert_eq!(got[quartermaster_engine::TEMPLATE_HASH_LABEL], "abc");
        assert_eq!(got[LABEL_ZONE], "us-east-1a");
        assert!(!got.contains_key("unrelated.example/label"));
    }
}
