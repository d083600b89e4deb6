//! Every write the controller makes to the Kubernetes API goes through [`Writer`], which refuses
//! to write the moment this replica does not hold the leader lease. Reads go to the stores.

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client};
use quartermaster_policies::{NodeClaim, NodeClaimStatus, NodePool, NodePoolStatus};
use serde_json::json;
use tokio::sync::watch;

use crate::ControllerError;
use crate::client::LoopClients;

/// How many times [`Writer::edit_node`] tries a Node edit that keeps meeting a newer node.
pub const NODE_EDIT_ATTEMPTS: usize = 4;

/// The field manager of the controller's server-side applies.
pub const FIELD_MANAGER: &str = "quartermaster";

/// What an eviction came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Accepted: the pod is terminating.
    Evicted,
    /// Refused for now (429: a PodDisruptionBudget allows no disruption); try again later.
    Blocked,
    /// The pod is already gone.
    Gone,
}

/// The controller's writes, gated on leadership.
#[derive(Clone)]
pub struct Writer {
    client: Client,
    /// NodeClaim creates: a queue of their own within the same rate limit.
    launches: Client,
    leader: watch::Receiver<bool>,
    recorder: Recorder,
}

fn ignore_status(result: Result<(), kube::Error>, codes: &[u16]) -> Result<(), ControllerError> {
    match result {
        Err(kube::Error::Api(s)) if codes.contains(&s.code) => Ok(()),
        other => other.map_err(ControllerError::from),
    }
}

impl Writer {
    /// A writer that writes only while `leader` says true: NodeClaim creates through
    /// `clients.launches`, Events through `clients.events`, the rest through `clients.api`.
    pub fn new(
        clients: LoopClients,
        leader: watch::Receiver<bool>,
        instance: Option<String>,
    ) -> Self {
        let LoopClients {
            api: client,
            launches,
            events,
        } = clients;
        let recorder = Recorder::new(
            events,
            Reporter {
                controller: "quartermaster".into(),
                instance,
            },
        );
        Self {
            client,
            launches,
            leader,
            recorder,
        }
    }

    /// Whether this replica may write now.
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    fn check(&self) -> Result<(), ControllerError> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(ControllerError::NotLeader)
        }
    }

    fn claims(&self) -> Api<NodeClaim> {
        Api::all(self.client.clone())
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Creates a NodeClaim; one that already exists counts as created.
    pub async fn create_claim(&self, claim: &NodeClaim) -> Result<(), ControllerError> {
        self.check()?;
        let r = Api::<NodeClaim>::all(self.launches.clone())
            .create(&PostParams::default(), claim)
            .await
            .map(|_| ());
        // Only `AlreadyExists` means it is there (a retried create); any other 409 is a failed
        // write, and launching for a NodeClaim that does not exist would leak the instance.
        match r {
            Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => Ok(()),
            other => other.map_err(ControllerError::from),
        }
    }

    /// Merges labels and annotations into a NodeClaim's metadata.
    pub async fn patch_claim_metadata(
        &self,
        name: &str,
        patch: serde_json::Value,
    ) -> Result<(), ControllerError> {
        self.check()?;
        self.claims()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// Writes a NodeClaim's whole status (server-side apply, owned by the controller).
    pub async fn apply_claim_status(
        &self,
        name: &str,
        status: &NodeClaimStatus,
    ) -> Result<(), ControllerError> {
        self.apply_status(
            self.claims(),
            ("quartermaster.dev/v1", "NodeClaim"),
            name,
            status,
        )
        .await
    }

    /// Writes a NodePool's status (server-side apply).
    pub async fn apply_pool_status(
        &self,
        name: &str,
        status: &NodePoolStatus,
    ) -> Result<(), ControllerError> {
        self.apply_status(
            Api::<NodePool>::all(self.client.clone()),
            ("quartermaster.dev/v1", "NodePool"),
            name,
            status,
        )
        .await
    }

    /// Writes a ProvisioningRequest's status (server-side apply on the status subresource).
    pub async fn apply_provisioning_request_status(
        &self,
        namespace: &str,
        name: &str,
        status: &quartermaster_cluster::provisioning_request::ProvisioningRequestStatus,
    ) -> Result<(), ControllerError> {
        use quartermaster_cluster::provisioning_request::{API_VERSION, KIND};
        let api: Api<crate::provisioning_requests::ProvisioningRequest> =
            Api::namespaced(self.client.clone(), namespace);
        self.apply_status(api, (API_VERSION, KIND), name, status)
            .await
    }

    /// Writes a CapacityBuffer's status (server-side apply on the status subresource).
    pub async fn apply_capacity_buffer_status(
        &self,
        namespace: &str,
        name: &str,
        status: &serde_json::Value,
    ) -> Result<(), ControllerError> {
        use quartermaster_cluster::capacity_buffer::{API_VERSION, KIND};
        let api: Api<crate::capacity_buffers::CapacityBuffer> =
            Api::namespaced(self.client.clone(), namespace);
        self.apply_status(api, (API_VERSION, KIND), name, status)
            .await
    }

    /// Server-side apply of `status` on `name`'s status subresource (`kind` in `api_version`);
    /// an object already gone is no error.
    async fn apply_status<K, S>(
        &self,
        api: Api<K>,
        (api_version, kind): (&str, &str),
        name: &str,
        status: &S,
    ) -> Result<(), ControllerError>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
        S: serde::Serialize,
    {
        self.check()?;
        let body = json!({
            "apiVersion": api_version,
            "kind": kind,
            "status": status,
        });
        let r = api
            .patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map(|_| ());
        ignore_status(r, &[404])
    }

    /// Asks for a NodeClaim's deletion (its finalizer holds it until the instance is gone).
    pub async fn delete_claim(&self, name: &str) -> Result<(), ControllerError> {
        self.check()?;
        let r = self
            .claims()
            .delete(name, &DeleteParams::background())
            .await
            .map(|_| ());
        ignore_status(r, &[404])
    }

    /// Removes the controller's finalizer from a NodeClaim, guarded by its resourceVersion.
    pub async fn remove_claim_finalizer(
        &self,
        claim: &NodeClaim,
        finalizer: &str,
    ) -> Result<(), ControllerError> {
        self.check()?;
        let Some(name) = claim.metadata.name.as_deref() else {
            return Ok(());
        };
        let rest: Vec<&String> = claim
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != finalizer)
            .collect();
        let patch = json!({"metadata": {
            "finalizers": rest,
            "resourceVersion": claim.metadata.resource_version,
        }});
        let r = self
            .claims()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ());
        ignore_status(r, &[404])
    }

    /// Edits a Node by the merge patch `edit` computes from it (`None`: nothing to change),
    /// guarded by the `resourceVersion` it was computed from. `base` is the store's copy, which
    /// may be behind the server: on a conflict the node is read again and the patch computed
    /// again (up to [`NODE_EDIT_ATTEMPTS`] times), so that a list a patch replaces whole
    /// (taints, finalizers) never drops what another component added meanwhile, nor brings back
    /// what it removed (a startup taint the GPU operator lifted). A node that is gone counts as
    /// edited. Without a copy (`None`), the node is read first.
    pub async fn edit_node(
        &self,
        name: &str,
        base: Option<&Node>,
        edit: impl Fn(&Node) -> Option<serde_json::Value>,
    ) -> Result<(), ControllerError> {
        self.check()?;
        let mut fresh: Option<Node> = None;
        if base.is_none() {
            match self.nodes().get_opt(name).await? {
                Some(node) => fresh = Some(node),
                None => return Ok(()),
            }
        }
        for attempt in 1..=NODE_EDIT_ATTEMPTS {
            let Some(node) = fresh.as_ref().or(base) else {
                return Ok(());
            };
            let Some(mut patch) = edit(node) else {
                return Ok(());
            };
            if let Some(rv) = &node.metadata.resource_version {
                patch["metadata"]["resourceVersion"] = json!(rv);
            }
            let r = self
                .nodes()
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            match r {
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < NODE_EDIT_ATTEMPTS => {
                    self.check()?;
                    match self.nodes().get_opt(name).await? {
                        Some(node) => fresh = Some(node),
                        None => return Ok(()),
                    }
                }
                r => return ignore_status(r.map(|_| ()), &[404]),
            }
        }
        Ok(())
    }

    /// Removes `finalizer` from a Node, keeping the others as the server has them
    /// ([`Writer::edit_node`]).
    pub async fn remove_node_finalizer(
        &self,
        node: &Node,
        finalizer: &str,
    ) -> Result<(), ControllerError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.edit_node(name, Some(node), |n| {
            let finalizers = n.metadata.finalizers.as_deref().unwrap_or_default();
            finalizers.iter().any(|f| f == finalizer).then(|| {
                let rest: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
                json!({"metadata": {"finalizers": rest}})
            })
        })
        .await
    }

    /// Deletes a Node; one that is gone counts as deleted.
    pub async fn delete_node(&self, name: &str) -> Result<(), ControllerError> {
        self.check()?;
        let r = self
            .nodes()
            .delete(name, &DeleteParams::background())
            .await
            .map(|_| ());
        ignore_status(r, &[404])
    }

    /// Evicts a pod through the Eviction API (PodDisruptionBudgets are honoured by the server).
    pub async fn evict(&self, namespace: &str, name: &str) -> Result<Eviction, ControllerError> {
        self.check()?;
        match Api::<Pod>::namespaced(self.client.clone(), namespace)
            .evict(name, &EvictParams::default())
            .await
        {
            Ok(_) => Ok(Eviction::Evicted),
            Err(kube::Error::Api(s)) if s.code == 429 => Ok(Eviction::Blocked),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Eviction::Gone),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes a pod with `grace_seconds` (a node's termination grace period is over: no
    /// PodDisruptionBudget is consulted). One that is gone counts as deleted.
    pub async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace_seconds: i64,
    ) -> Result<(), ControllerError> {
        self.check()?;
        let params = DeleteParams {
            grace_period_seconds: Some(u32::try_from(grace_seconds.max(0)).unwrap_or(u32::MAX)),
            ..DeleteParams::default()
        };
        let r = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .delete(name, &params)
            .await
            .map(|_| ());
        ignore_status(r, &[404])
    }

    /// Sets a pending pod's `status.nominatedNodeName`: where the provisioner expects it
    /// (Kubernetes 1.34+ keeps the room on that node for it, KEP-5278; older schedulers may
    /// clear it). A pod that is gone is no error.
    pub async fn nominate_pod(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> Result<(), ControllerError> {
        self.check()?;
        let patch = serde_json::json!({"status": {"nominatedNodeName": node}});
        let r = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ());
        ignore_status(r, &[404])
    }

    /// Publishes a Kubernetes Event about `regarding`. Failures are logged, never fatal.
    pub async fn event(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        note: String,
    ) {
        if self.check().is_err() {
            return;
        }
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            // The last guard before an Event leaves: no credential of the process environment
            // in its text, whatever error it quotes.
            note: Some(quartermaster_cloud::Secrets::of_process().scrub(&note)),
            action: reason.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, regarding).await {
            tracing::debug!(reason, error = %e, "could not publish an event");
        }
    }
}
