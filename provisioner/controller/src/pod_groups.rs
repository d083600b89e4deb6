//! Gang PodGroups as the controller watches them: Volcano's (`scheduling.volcano.sh/v1beta1`,
//! pods name it in annotation `scheduling.k8s.io/group-name`) and the coscheduling plugin's
//! (`scheduling.x-k8s.io/v1alpha1`, pod label `scheduling.x-k8s.io/pod-group`).
//!
//! Only `metadata` and `spec` are kept, as JSON; `quartermaster-cluster` reads `spec.minMember`
//! from the objects [`objects`] makes, exactly as `plan -f` does, so the pending pods of a group
//! are one gang of the group's size. Either CRD may be missing: the stores read it as empty.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Implements `kube::Resource` for a PodGroup kind of one API group and version.
macro_rules! pod_group_kind {
    ($name:ident, $group:literal, $version:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Default, Serialize, Deserialize)]
        pub struct $name {
            /// Metadata.
            pub metadata: ObjectMeta,
            /// `spec` (`minMember` is what is read).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub spec: Option<Value>,
        }

        impl kube::Resource for $name {
            type DynamicType = ();
            type Scope = NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("PodGroup")
            }

            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($group)
            }

            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }

            fn api_version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(concat!($group, "/", $version))
            }

            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("podgroups")
            }

            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

pod_group_kind!(
    VolcanoPodGroup,
    "scheduling.volcano.sh",
    "v1beta1",
    "A Volcano PodGroup (`scheduling.volcano.sh/v1beta1`)."
);
pod_group_kind!(
    CoschedulingPodGroup,
    "scheduling.x-k8s.io",
    "v1alpha1",
    "A coscheduling plugin PodGroup (`scheduling.x-k8s.io/v1alpha1`)."
);

/// The PodGroups of both kinds as objects for the snapshot (with `apiVersion` and `kind`).
pub fn objects(
    volcano: &[Arc<VolcanoPodGroup>],
    coscheduling: &[Arc<CoschedulingPodGroup>],
) -> Vec<Value> {
    let volcano = volcano
        .iter()
        .filter_map(|g| with_type(g.as_ref(), "scheduling.volcano.sh/v1beta1"));
    let coscheduling = coscheduling
        .iter()
        .filter_map(|g| with_type(g.as_ref(), "scheduling.x-k8s.io/v1alpha1"));
    volcano.chain(coscheduling).collect()
}

fn with_type<T: Serialize>(group: &T, api_version: &str) -> Option<Value> {
    let mut v = serde_json::to_value(group).ok()?;
    v["apiVersion"] = Value::from(api_version);
    v["kind"] = Value::from("PodGroup");
    Some(v)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod as KubePod;
    use quartermaster_pricing::Catalog;
    use quartermaster_solver::{PodRef, ResourceTable};
    use serde_json::json;

    use super::*;
    use crate::translate::observe_with_requests;

    /// A pending pod in `ml` the scheduler gave up on, with `labels`.
    fn pending(name: &str, labels: Value) -> Arc<KubePod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ml", "labels": labels},
                "spec": {"containers": [{"name": "main", "image": "trainer",
                    "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
            }))
            .expect("a pod"),
        )
    }

    #[test]
    fn a_coscheduling_pod_group_makes_its_pending_pods_a_gang_of_its_min_member() {
        let label = json!({"scheduling.x-k8s.io/pod-group": "train"});
        let pods = vec![
            pending("train-0", label.clone()),
            pending("train-1", label.clone()),
            pending("train-2", label),
            pending("solo", json!({})),
        ];
        let group: CoschedulingPodGroup = serde_json::from_value(json!({
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"minMember": 4, "scheduleTimeoutSeconds": 60}
        }))
        .expect("a PodGroup");
        let objects = objects(&[], &[Arc::new(group)]);
        assert_eq!(objects[0]["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
        let observed = observe_with_requests(
            &pods,
            &Default::default(),
            &[],
            Vec::new(),
            Vec::new(),
            objects,
            &Catalog::embedded(),
            &ResourceTable::default(),
            None,
        );
        assert!(observed.rejected.is_empty(), "{:?}", observed.rejected);
        for i in 0..3 {
            let pod = &observed.pods[&PodRef::new("ml", format!("train-{i}"))].pod;
            let gang = pod.gang.as_ref().expect("a gang member");
            assert_eq!(gang.name, "ml/train");
            // The PodGroup's size, not the three pods pending now.
            assert_eq!(gang.min_member, 4);
        }
        assert!(observed.pods[&PodRef::new("ml", "solo")].pod.gang.is_none());
    }

    #[test]
    fn volcano_pod_groups_are_typed_as_volcano_objects() {
        let group: VolcanoPodGroup = serde_json::from_value(json!({
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"minMember": 4}
        }))
        .expect("a PodGroup");
        let objects = objects(&[Arc::new(group)], &[]);
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0]["apiVersion"], "scheduling.volcano.sh/v1beta1");
        assert_eq!(objects[0]["kind"], "PodGroup");
        assert_eq!(objects[0]["spec"]["minMember"], 4);
    }
}
