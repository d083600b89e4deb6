//! Pods read once per version. A pass looks at every pod the stores hold, but only a pod whose
//! `resourceVersion` changed since the last pass is read again (turned into the solver's pod):
//! the cost of a pass follows what changed, not how many pods there are.
//!
//! Only a pod that can be read on its own is kept here: one that names no PodGroup, consumes
//! no ProvisioningRequest and names no ResourceClaim (those are read with the objects they
//! refer to). A reading is made
//! against a resource table and a region; when either changes, every reading is dropped.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod as KubePod;
use quartermaster_cluster::provisioning_request::{CONSUME_ANNOTATION, CONSUME_ANNOTATION_CA};
use quartermaster_cluster::{ClusterError, Input, SnapshotOptions, snapshot};
use quartermaster_pricing::Catalog;
use quartermaster_solver::{Pod, PodRef, ResourceTable};
use serde_json::Value;

/// The pod annotation Volcano names a pod's PodGroup with.
const VOLCANO_GROUP: &str = "scheduling.k8s.io/group-name";
/// The pod label the coscheduling plugin names a pod's PodGroup with.
const COSCHEDULING_GROUP: &str = "scheduling.x-k8s.io/pod-group";

/// What reading one pod gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// The solver's pod.
    Pod(Arc<Pod>),
    /// Nothing to plan (scheduling gates, finished): the full read leaves it out as well.
    Skipped,
    /// The pod cannot be read: the object's name and why.
    Rejected {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// Why it was left out.
        reason: String,
    },
}

/// Readings of the pods seen, by pod, with the version each was read at.
#[derive(Debug, Default)]
pub struct PodReadings {
    /// The resource table's names and the region the readings were made against.
    context: String,
    entries: HashMap<PodRef, (String, Reading)>,
    /// Pods read (not taken from here) since this was made: a measure for tests and metrics.
    reads: u64,
    /// The last reading of the configuration (NodePools, NodeClasses, DaemonSets and the
    /// objects pods refer to) when no pod was read with it: what it was read from, and what
    /// reading it gave. Reading it prices every offering of every pool; it changes rarely.
    config: Option<(ConfigKey, ConfigReading)>,
    /// Configuration readings made (not taken from here): a measure for tests.
    config_reads: u64,
}

/// What a configuration reading was made from: the objects (without what the snapshot does
/// not read and changes all the time: `resourceVersion`, `managedFields`, the status of
/// NodePools and DaemonSets), the resource table, the region and the catalog.
#[derive(Debug, PartialEq)]
pub struct ConfigKey {
    objects: String,
    catalog: Catalog,
}

impl ConfigKey {
    /// The key of reading `objects` against `context` (the table's names and the region) and
    /// `catalog`.
    pub fn new(objects: &[Value], context: &str, catalog: &Catalog) -> Self {
        let mut text = String::from(context);
        for object in objects {
            let mut object = object.clone();
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
                meta.remove("managedFields");
            }
            if matches!(object["kind"].as_str(), Some("NodePool" | "DaemonSet"))
                && let Some(obj) = object.as_object_mut()
            {
                obj.remove("status");
            }
            text.push('\n');
            text.push_str(&object.to_string());
        }
        Self {
            objects: text,
            catalog: catalog.clone(),
        }
    }
}

/// What reading the configuration gave: the snapshot (pools, DaemonSets, resources, the pods
/// of ProvisioningRequests), the requests and buffers, and the objects left out with why.
#[derive(Debug, Clone)]
pub struct ConfigReading {
    /// The snapshot read.
    pub snapshot: quartermaster_solver::ClusterSnapshot,
    /// ProvisioningRequests with their pods.
    pub provisioning_requests: Vec<quartermaster_cluster::provisioning_request::RequestPods>,
    /// CapacityBuffers with their chunk and count.
    pub capacity_buffers: Vec<quartermaster_cluster::capacity_buffer::BufferPods>,
    /// Objects left out, with the reason.
    pub rejected: Vec<(String, String)>,
}

impl PodReadings {
    /// Whether `pod` can be read on its own (names no PodGroup, consumes no ProvisioningRequest,
    /// names no ResourceClaim or ResourceClaimTemplate: its reading depends on the claims,
    /// templates, DeviceClasses and ResourceSlices, see [`crate::dra`]).
    pub fn standalone(pod: &KubePod) -> bool {
        if crate::dra::names_claims(pod) {
            return false;
        }
        let meta = &pod.metadata;
        let annotated = meta.annotations.as_ref().is_some_and(|a| {
            a.contains_key(VOLCANO_GROUP)
                || a.contains_key(CONSUME_ANNOTATION)
                || a.contains_key(CONSUME_ANNOTATION_CA)
        });
        let labelled = meta
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(COSCHEDULING_GROUP));
        !annotated && !labelled
    }

    /// Drops every reading unless they were made against `context` (the table's names and the
    /// region); then readings are made against it.
    pub fn use_context(&mut self, context: String) {
        if self.context != context {
            self.entries.clear();
            self.context = context;
        }
    }

    /// The reading of pod `id` at `version` (its uid and `resourceVersion`; empty means
    /// unknown, and such a pod is read every time): the one kept, or `pod` (a pod: typically
    /// [`Input::Unplaced`]) read now against `resources`. `None` when reading it needs a
    /// resource the table lacks: the caller reads every pod with the others then, so that the
    /// table grows in one order.
    pub fn read(
        &mut self,
        id: &PodRef,
        version: &str,
        pod: Input<'_>,
        catalog: &Catalog,
        resources: &ResourceTable,
        region: Option<&str>,
    ) -> Option<Reading> {
        if !version.is_empty()
            && let Some((v, reading)) = self.entries.get(id)
            && v == version
        {
            return Some(reading.clone());
        }
        self.reads += 1;
        let reading = read_alone(pod, catalog, resources, region)?;
        if version.is_empty() {
            self.entries.remove(id);
        } else {
            self.entries
                .insert(id.clone(), (version.to_owned(), reading.clone()));
        }
        Some(reading)
    }

    /// Forgets the pods not in `seen` (gone, bound elsewhere, no longer wanted).
    pub fn retain(&mut self, seen: &BTreeSet<PodRef>) {
        if self.entries.len() > seen.len() {
            self.entries.retain(|id, _| seen.contains(id));
        }
    }

    /// How many pods were read rather than taken from here.
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// The configuration reading made from `key`, if it is the last one kept.
    pub fn config(&self, key: &ConfigKey) -> Option<&ConfigReading> {
        self.config
            .as_ref()
            .filter(|(k, _)| k == key)
            .map(|(_, reading)| reading)
    }

    /// Keeps `reading`, made from `key` (replacing the one kept).
    pub fn keep_config(&mut self, key: ConfigKey, reading: ConfigReading) {
        self.config_reads += 1;
        self.config = Some((key, reading));
    }

    /// How many configuration readings were made rather than taken from here.
    pub fn config_reads(&self) -> u64 {
        self.config_reads
    }
}

/// The version a pod is read at: its uid and `resourceVersion` (empty when it has none).
pub fn version(pod: &KubePod) -> String {
    match (&pod.metadata.uid, &pod.metadata.resource_version) {
        (Some(uid), Some(rv)) => format!("{uid}/{rv}"),
        _ => String::new(),
    }
}

/// Reads one pod on its own; `None` when it needs a resource `resources` lacks.
fn read_alone(
    pod: Input<'_>,
    catalog: &Catalog,
    resources: &ResourceTable,
    region: Option<&str>,
) -> Option<Reading> {
    match snapshot(
        &[pod],
        SnapshotOptions::priced(catalog)
            .with_resources(resources.clone())
            .in_region(region),
    ) {
        Ok(ingested) => {
            if ingested.snapshot.resources.len() != resources.len() {
                return None;
            }
            Some(match ingested.snapshot.pending.into_iter().next() {
                Some(pod) => Reading::Pod(Arc::new(pod)),
                None => Reading::Skipped,
            })
        }
        Err(e) => {
            let object = match &e {
                ClusterError::Invalid { object, .. }
                | ClusterError::TooManyResources { object, .. } => object.clone(),
                ClusterError::Unidentified { index, .. } => format!("object {index}"),
            };
            Some(Reading::Rejected {
                object,
                reason: e.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod as KubePod;
    use quartermaster_pricing::Catalog;
    use quartermaster_solver::ResourceTable;

    use super::PodReadings;
    use crate::tests::pending_pod;
    use crate::translate::{observe_with_readings, observe_with_requests};

    fn table(names: &[&str]) -> ResourceTable {
        let mut t = ResourceTable::default();
        for n in names {
            t.slot_or_insert(n);
        }
        t
    }

    fn pod(name: &str, gpus: u32, version: &str) -> Arc<KubePod> {
        let mut v = pending_pod(name, gpus);
        v["metadata"]["uid"] = format!("uid-{name}").into();
        v["metadata"]["resourceVersion"] = version.into();
        Arc::new(serde_json::from_value(v).expect("a pod"))
    }

    fn look(pods: &[Arc<KubePod>], table: &ResourceTable, readings: &mut PodReadings) -> String {
        let observed = observe_with_readings(
            pods,
            &BTreeSet::new(),
            &[],
            Vec::new(),
            Vec::new(),
            Vec::new(),
            &Catalog::embedded(),
            table,
            None,
            readings,
        );
        format!("{:?}|{:?}", observed.pods, observed.rejected)
    }

    fn fresh(pods: &[Arc<KubePod>], table: &ResourceTable) -> String {
        let observed = observe_with_requests(
            pods,
            &BTreeSet::new(),
            &[],
            Vec::new(),
            Vec::new(),
            Vec::new(),
            &Catalog::embedded(),
            table,
            None,
        );
        format!("{:?}|{:?}", observed.pods, observed.rejected)
    }

    #[test]
    fn a_pass_reads_only_the_pods_that_changed_and_sees_what_a_full_read_sees() {
        let table = table(&["nvidia.com/gpu"]);
        let mut readings = PodReadings::default();
        let mut pods: Vec<_> = (0..50).map(|i| pod(&format!("p{i}"), 1, "1")).collect();
        assert_eq!(look(&pods, &table, &mut readings), fresh(&pods, &table));
        assert_eq!(readings.reads(), 50);
        // Nothing changed: nothing is read again.
        assert_eq!(look(&pods, &table, &mut readings), fresh(&pods, &table));
        assert_eq!(readings.reads(), 50);
        // One pod changed (a new version asking for more), one is new, one went.
        pods[3] = pod("p3", 4, "2");
        pods.push(pod("new", 2, "1"));
        pods.remove(10);
        assert_eq!(look(&pods, &table, &mut readings), fresh(&pods, &table));
        assert_eq!(readings.reads(), 52);
        // A pod without a version is read every time.
        let mut bare = pending_pod("bare", 1);
        bare["metadata"]["uid"] = "u".into();
        pods.push(Arc::new(serde_json::from_value(bare).unwrap()));
        look(&pods, &table, &mut readings);
        look(&pods, &table, &mut readings);
        assert_eq!(readings.reads(), 54);
    }

    #[test]
    fn a_pod_needing_a_resource_the_table_lacks_is_read_with_the_others() {
        let table = table(&["nvidia.com/gpu"]);
        let mut readings = PodReadings::default();
        let mut v = pending_pod("gaudi", 0);
        v["metadata"]["uid"] = "g".into();
        v["metadata"]["resourceVersion"] = "1".into();
        v["spec"]["containers"][0]["resources"] = serde_json::json!({"requests": {"example.com/fpga": "8"}, "limits": {"example.com/fpga": "8"}});
        let pods = vec![
            pod("a", 1, "1"),
            Arc::new(serde_json::from_value(v).unwrap()),
        ];
        let seen = look(&pods, &table, &mut readings);
        assert_eq!(seen, fresh(&pods, &table));
        assert!(
            seen.contains(r#"name: "gaudi""#) && seen.contains(r#"name: "a""#),
            "{seen}"
        );
    }

    #[test]
    fn readings_made_against_another_table_are_dropped() {
        let mut readings = PodReadings::default();
        let pods = vec![pod("a", 1, "1")];
        let one = table(&["nvidia.com/gpu"]);
        let two = table(&["nvidia.com/gpu", "example.com/fpga"]);
        look(&pods, &one, &mut readings);
        assert_eq!(look(&pods, &two, &mut readings), fresh(&pods, &two));
        assert_eq!(readings.reads(), 2);
    }

    #[test]
    fn pods_naming_a_pod_group_or_consuming_a_request_are_not_read_alone() {
        let mut v = pending_pod("m", 1);
        v["metadata"]["labels"] = serde_json::json!({"scheduling.x-k8s.io/pod-group": "g"});
        let grouped: KubePod = serde_json::from_value(v).unwrap();
        assert!(!PodReadings::standalone(&grouped));
        let mut v = pending_pod("c", 1);
        v["metadata"]["annotations"] = serde_json::json!(
            {"autoscaling.x-k8s.io/consume-provisioning-request": "r"});
        let consumer: KubePod = serde_json::from_value(v).unwrap();
        assert!(!PodReadings::standalone(&consumer));
        assert!(PodReadings::standalone(&pod("plain", 1, "1")));
    }
}
