//! The pure readings, fed objects directly.

#[cfg(test)]
mod disruption_input_tests {

    use quartermaster_solver::Resources;

    use crate::translate::*;

    #[test]
    fn pdbs_and_do_not_disrupt_annotations_reach_the_engine_terms() {
        let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"maxUnavailable": 1, "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["canary"]}]
                }},
                "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}
            }))
            .expect("a PDB");
        let view = pdb_view(&pdb).expect("a view");
        assert_eq!(view.disruptions_allowed, 1);
        let mut pod = Pod::new(PodRef::new("shop", "web-1"), Resources::ZERO);
        pod.labels.insert("app".into(), "web".into());
        assert!(view.selects(&pod));
        pod.labels.insert("tier".into(), "canary".into());
        assert!(!view.selects(&pod));
        let elsewhere = Pod::new(PodRef::new("other", "web-1"), Resources::ZERO);
        assert!(!view.selects(&elsewhere));

        let meta = |k: &str, v: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            annotations: Some([(k.to_owned(), v.to_owned())].into()),
            ..Default::default()
        };
        assert!(annotated_do_not_disrupt(&meta(
            "karpenter.sh/do-not-disrupt",
            "true"
        )));
        assert!(annotated_do_not_disrupt(&meta(
            "quartermaster.dev/do-not-disrupt",
            "true"
        )));
        assert!(!annotated_do_not_disrupt(&meta(
            "quartermaster.dev/do-not-disrupt",
            "false"
        )));
        assert!(annotated_checkpointed(&meta(
            "quartermaster.dev/checkpointed",
            "true"
        )));
        assert!(!annotated_checkpointed(&meta(
            "quartermaster.dev/checkpointed",
            "yes"
        )));
        assert!(!annotated_checkpointed(&meta(
            "quartermaster.dev/do-not-disrupt",
            "true"
        )));
    }
}

#[cfg(test)]
mod node_condition_tests {
    use k8s_openapi::api::core::v1::Node;

    use quartermaster_solver::ResourceTable;

    use crate::translate::*;

    #[test]
    fn node_conditions_reach_repair_without_their_heartbeats() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "node-0"},
            "status": {"conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-04T10:00:00Z",
                 "lastTransitionTime": "2026-12-04T09:00:00Z"},
                {"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79Error",
                 "lastHeartbeatTime": "2026-12-04T10:00:00Z", "lastTransitionTime": "2026-12-04T09:55:00Z"}
            ]}
        }))
        .expect("a Node");
        let view = node_view(&node, &ResourceTable::default());
        assert_eq!(view.conditions.len(), 2);
        let gpu = &view.conditions[1];
        assert_eq!(gpu.kind, "AcceleratedHardwareReady");
        assert_eq!(gpu.status, "False");
        assert_eq!(gpu.reason.as_deref(), Some("NvidiaXID79Error"));
        assert_eq!(
            gpu.since.map(|t| t.to_rfc3339()),
            Some("2026-12-04T09:55:00+00:00".to_owned())
        );
        // A heartbeat alone is no change the engine hears of.
        let mut later = node.clone();
        for c in later
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .into_iter()
            .flatten()
        {
            c.last_heartbeat_time = None;
        }
        assert_eq!(node_view(&later, &ResourceTable::default()), view);
    }
}

#[cfg(test)]
mod region_tests {

    use quartermaster_policies::NodePool;
    use quartermaster_policies::labels::LABEL_INSTANCE_TYPE;
    use quartermaster_pricing::Catalog;
    use quartermaster_solver::ResourceTable;
    use serde_json::Value;

    use crate::translate::*;

    fn pool(class_region: Option<&str>) -> (Vec<std::sync::Arc<NodePool>>, Vec<Value>) {
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
            "metadata": {"name": "gpu"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"},
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge"]}]
            }}}
        }))
        .expect("a NodePool");
        let mut class = serde_json::json!({"apiVersion": "quartermaster.dev/v1", "kind": "AWSNodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiFamily": "AL2023", "role": "KarpenterNodeRole",
                "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}});
        if let Some(r) = class_region {
            class["spec"]["region"] = Value::from(r);
        }
        (vec![std::sync::Arc::new(pool)], vec![class])
    }

    fn buys_in(observed: &Observed, region: &str) -> bool {
        let labels: std::collections::BTreeMap<String, String> = [
            (
                "topology.kubernetes.io/region".to_owned(),
                region.to_owned(),
            ),
            (LABEL_INSTANCE_TYPE.to_owned(), "g5.xlarge".to_owned()),
        ]
        .into();
        observed.setup.pools[0].spec.requirements.matches(&labels)
    }

    #[test]
    fn a_pool_whose_node_class_names_no_region_buys_in_the_cluster_region() {
        let catalog = Catalog::embedded_all_regions();
        let (pools, classes) = pool(None);
        let observed = observe(
            &[],
            &Default::default(),
            &pools,
            classes,
            Vec::new(),
            &catalog,
            &ResourceTable::default(),
            Some("us-west-2"),
        );
        assert!(observed.rejected.is_empty(), "{:?}", observed.rejected);
        assert!(buys_in(&observed, "us-west-2"));
        assert!(!buys_in(&observed, "us-east-1"));

        // The NodeClass's own region wins over the cluster's.
        let (pools, classes) = pool(Some("eu-west-1"));
        let observed = observe(
            &[],
            &Default::default(),
            &pools,
            classes,
            Vec::new(),
            &catalog,
            &ResourceTable::default(),
            Some("us-west-2"),
        );
        assert!(buys_in(&observed, "eu-west-1"));
        assert!(!buys_in(&observed, "us-west-2"));

        // No cluster region: the catalog's default region of the cloud.
        let (pools, classes) = pool(None);
        let observed = observe(
            &[],
            &Default::default(),
            &pools,
            classes,
            Vec::new(),
            &catalog,
            &ResourceTable::default(),
            None,
        );
        let default = catalog
            .default_region(quartermaster_pricing::Cloud::Aws)
            .expect("a default region");
        assert!(buys_in(&observed, default));
    }

    #[test]
    fn the_configuration_is_read_again_only_when_it_changed_and_reads_as_a_fresh_look() {
        let catalog = Catalog::embedded_all_regions();
        let table = ResourceTable::default();
        let mut readings = crate::pod_readings::PodReadings::default();
        let look = |pools: &[std::sync::Arc<NodePool>],
                    classes: Vec<Value>,
                    region: Option<&str>,
                    readings: &mut crate::pod_readings::PodReadings| {
            let kept = observe_with_readings(
                &[],
                &Default::default(),
                pools,
                classes.clone(),
                Vec::new(),
                Vec::new(),
                &catalog,
                &table,
                region,
                readings,
            );
            let fresh = observe(
                &[],
                &Default::default(),
                pools,
                classes,
                Vec::new(),
                &catalog,
                &table,
                region,
            );
            assert_eq!(format!("{kept:?}"), format!("{fresh:?}"));
            kept
        };
        let (pools, classes) = pool(None);
        look(&pools, classes.clone(), Some("us-west-2"), &mut readings);
        look(&pools, classes.clone(), Some("us-west-2"), &mut readings);
        assert_eq!(readings.config_reads(), 1);
        // A status written or a new resourceVersion: not read again.
        let mut written = pools[0].as_ref().clone();
        written.metadata.resource_version = Some("7".into());
        written.status = Some(Default::default());
        look(
            &[std::sync::Arc::new(written)],
            classes.clone(),
            Some("us-west-2"),
            &mut readings,
        );
        assert_eq!(readings.config_reads(), 1);
        // Another region, another NodeClass: read again, and what a fresh look sees.
        let observed = look(&pools, classes.clone(), Some("us-east-1"), &mut readings);
        assert!(buys_in(&observed, "us-east-1"));
        let (pools, classes) = pool(Some("eu-west-1"));
        let observed = look(&pools, classes, Some("us-east-1"), &mut readings);
        assert!(buys_in(&observed, "eu-west-1"));
        assert_eq!(readings.config_reads(), 3);
    }
}
