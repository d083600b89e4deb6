//! What the engine is told ([`Event`]) and what it decides ([`Action`]). Decisions are values:
//! the driver (the simulator, or the in-cluster controller) carries them out and reports the
//! outcome back as events.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quartermaster_cloud::{CloudError, Instance, LaunchRequest};
use quartermaster_pricing::Catalog;
use quartermaster_solver::pod::Taint;
use quartermaster_solver::{OfferingChoice, Pod, PodRef, Resources};

use crate::disruption::{DisruptionCommand, PodDisruptionBudgetView};

/// A node as it registered with the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    /// Node name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Taints, startup taints included while they are on the node.
    pub taints: Vec<Taint>,
    /// Allocatable resources as the kubelet reports them now (accelerators appear late).
    pub allocatable: Resources,
    /// Its conditions (`Ready`, `AcceleratedHardwareReady`, …), for node repair. Heartbeat
    /// times are left out so a heartbeat is not a change.
    pub conditions: Vec<NodeCondition>,
}

/// A node condition as repair reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCondition {
    /// The condition type.
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `lastTransitionTime`.
    pub since: Option<DateTime<Utc>>,
    /// `reason`, when given (an XID code, for GPU conditions that carry one).
    pub reason: Option<String>,
}

/// Something that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A pod needs a place: created, or evicted and not yet placed again.
    PodPending(Pod),
    /// A pod finished or was deleted.
    PodGone(PodRef),
    /// The cloud accepted a launch.
    Launched {
        /// NodeClaim name.
        claim: String,
        /// The instance.
        instance: Instance,
    },
    /// A launch failed.
    LaunchFailed {
        /// NodeClaim name.
        claim: String,
        /// Why.
        error: CloudError,
    },
    /// The claim's node registered with the cluster.
    NodeRegistered {
        /// NodeClaim name.
        claim: String,
        /// The node.
        node: NodeView,
    },
    /// A node's allocatable or taints changed (device plugin reported GPUs, startup taint removed).
    NodeUpdated {
        /// The node as it is now.
        node: NodeView,
    },
    /// The cloud will reclaim an instance (spot interruption notice).
    Interruption {
        /// Provider id of the instance.
        provider_id: String,
        /// When it will be gone.
        terminates_at: DateTime<Utc>,
    },
    /// An instance is gone (reclaimed, or terminated outside Quartermaster).
    InstanceGone {
        /// Provider id.
        provider_id: String,
    },
    /// A delete the engine asked for finished (or the NodeClaim is gone from the cluster).
    Deleted {
        /// NodeClaim name.
        claim: String,
    },
    /// A NodeClaim that exists outside the engine's memory: found in the cluster by a
    /// restarted controller or a new leader. The engine adopts it as it stands; a claim that
    /// never launched is launched again (providers are idempotent on the claim name).
    ClaimFound(FoundClaim),
    /// A pod runs on a node (bound by the kube-scheduler, or found running after a restart).
    /// The engine records it on that node's claim, wherever it had nominated it; a pod on a node
    /// no claim owns is no longer tracked.
    PodBound {
        /// The pod.
        pod: Pod,
        /// Node name.
        node: String,
    },
    /// Someone else asked for a claim's deletion (a user deleted the NodeClaim or its Node):
    /// nothing more is placed on it and its pods need a place again.
    ClaimDeleting {
        /// NodeClaim name.
        claim: String,
    },
    /// A pod's `quartermaster.dev/do-not-disrupt` (or `karpenter.sh/do-not-disrupt`) annotation
    /// was set (`on`) or removed: while set, no voluntary disruption moves it or removes its node.
    PodDoNotDisrupt {
        /// The pod.
        pod: PodRef,
        /// Whether the annotation is set to `"true"`.
        on: bool,
    },
    /// A pod's `quartermaster.dev/checkpointed` annotation was set to `"true"` (`on`) or no
    /// longer is: while set, voluntary disruption may move the pod although a run-to-completion
    /// workload (a Job, a training job) owns it.
    PodCheckpointed {
        /// The pod.
        pod: PodRef,
        /// Whether the annotation is set to `"true"`.
        on: bool,
    },
    /// The do-not-disrupt annotation on a Node or NodeClaim (`node` is the node's or the
    /// claim's name).
    NodeDoNotDisrupt {
        /// Node or NodeClaim name.
        node: String,
        /// Whether the annotation is set to `"true"`.
        on: bool,
    },
    /// The PodDisruptionBudgets of the cluster, all of them (replaces what was known).
    DisruptionBudgets(Vec<PodDisruptionBudgetView>),
    /// New prices (a new catalog, live spot prices): running nodes are priced again and
    /// consolidation takes a look.
    CatalogChanged(Catalog),
    /// NodePools changed (template, NodeClass spec, budgets…): each is matched by name and
    /// replaces the one the engine has; new ones are added. Claims of a pool whose template
    /// hash changed have drifted.
    PoolsChanged(Vec<crate::PoolPolicy>),
    /// The reservations the pools may launch into, all of them (replaces what was known).
    ReservationsChanged(Vec<crate::ReservationOffer>),
    /// The CapacityBuffers of the cluster, all of them (replaces what was known): room for
    /// their chunks is kept after every real pod is placed.
    BuffersChanged(Vec<crate::headroom::Buffer>),
    /// A reboot node repair asked for (`Action::Reboot`) could not be done (the cloud cannot
    /// reboot, or the call failed for good): the node is replaced instead.
    RebootFailed {
        /// NodeClaim name.
        claim: String,
        /// Why (the cloud's words).
        error: String,
    },
    /// The cloud says an instance no longer matches its NodeClass (`CloudProvider::is_drifted`:
    /// its AMI, security groups or subnet): its claim has drifted and is replaced like one
    /// whose template changed.
    CloudDrifted {
        /// Provider id of the instance.
        provider_id: String,
        /// Why (`AMIDrift: …`).
        reason: String,
    },
}

/// A NodeClaim as the cluster records it (the durable memory of what was decided and launched).
#[derive(Debug, Clone, PartialEq)]
pub struct FoundClaim {
    /// NodeClaim name.
    pub name: String,
    /// NodePool that owns it.
    pub node_pool: String,
    /// The offering it launched with (or was launching with).
    pub offering: OfferingChoice,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Provider id, once launched.
    pub provider_id: Option<String>,
    /// When the launch was accepted.
    pub launched_at: Option<DateTime<Utc>>,
    /// Its node, once registered.
    pub node: Option<NodeView>,
    /// When it registered.
    pub registered_at: Option<DateTime<Utc>>,
    /// When it became initialized, if it did.
    pub initialized_at: Option<DateTime<Utc>>,
    /// Whether its deletion was already asked for.
    pub deleting: bool,
    /// The template hash it records (label `quartermaster.dev/nodepool-hash`); `None` when it
    /// has none (created before drift detection: taken as the pool's current one).
    pub template_hash: Option<String>,
    /// The gang it was launched for (label `quartermaster.dev/gang`), if any: a restarted engine
    /// still launches a gang's claims together or rolls them back.
    pub gang: Option<String>,
}

/// Why the engine deletes a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeleteReason {
    /// Empty for longer than its pool's `consolidateAfter`.
    Empty,
    /// Its accelerators did not appear in allocatable within the readiness budget.
    AcceleratorsNotReady,
    /// It never registered with the cluster within the registration budget.
    RegistrationTimeout,
    /// Spot interruption: the replacement is launched, the old node goes.
    Interrupted,
    /// Consolidation: its pods fit on other nodes, or on one cheaper replacement.
    Underutilized,
    /// A static NodePool's `replicas` went down and this node is one too many.
    ScaledDown,
    /// Its NodePool template (or NodeClass spec) changed since it was created.
    Drifted,
    /// Older than its pool's `expireAfter` (forceful: after `terminationGracePeriod` its pods
    /// go too, do-not-disrupt or not).
    Expired,
    /// A member of its gang could not be launched in the gang's zone in time: the gang's
    /// launched members go too, and the gang is planned again whole.
    GangRollback,
    /// A node condition said it was broken for longer than its repair rule tolerates
    /// (forceful, like an interruption: its pods are planned again at once).
    Unhealthy,
    /// Its Capacity Block ends: drained before the cloud reclaims it, its pods placed
    /// elsewhere first.
    ReservationEnding,
    /// Its flex-start run ends (GCP deletes a flex-start VM at its maximum run duration):
    /// drained before, its pods placed elsewhere first.
    FlexStartEnding,
}

impl std::fmt::Display for DeleteReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Empty => "empty",
            Self::AcceleratorsNotReady => "accelerators not ready",
            Self::RegistrationTimeout => "registration timeout",
            Self::Interrupted => "interrupted",
            Self::Underutilized => "underutilized",
            Self::ScaledDown => "scaled down",
            Self::Drifted => "drifted",
            Self::Expired => "expired",
            Self::GangRollback => "gang rollback",
            Self::Unhealthy => "unhealthy",
            Self::ReservationEnding => "reservation ending",
            Self::FlexStartEnding => "flex-start run ending",
        })
    }
}

/// Something the engine wants done.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Launch an instance for a NodeClaim (report back `Launched` or `LaunchFailed`).
    Launch {
        /// NodeClaim name.
        claim: String,
        /// What to launch.
        request: LaunchRequest,
    },
    /// Terminate a NodeClaim's instance (report back `Deleted`).
    Delete {
        /// NodeClaim name.
        claim: String,
        /// Provider id, when it launched.
        provider_id: Option<String>,
        /// Why.
        reason: DeleteReason,
    },
    /// The pod is expected to run on this node now. In a cluster the kube-scheduler binds it
    /// (the controller only records the nomination); the simulator binds it.
    Bind {
        /// The pod.
        pod: PodRef,
        /// Node name.
        node: String,
    },
    /// Mark a node unschedulable.
    Cordon {
        /// Node name.
        node: String,
    },
    /// Make a cordoned node schedulable again (a consolidation that could not be completed, a
    /// retired node reopened), without its soft cordon.
    Uncordon {
        /// Node name.
        node: String,
    },
    /// Put on (`on`) or take off a node the soft cordon, the taint
    /// `quartermaster.dev/retiring:PreferNoSchedule`: the kube-scheduler prefers other nodes.
    SoftCordon {
        /// Node name.
        node: String,
        /// Whether the taint goes on.
        on: bool,
    },
    /// A voluntary disruption was decided (what, why, and what it saves): for events, logs and
    /// metrics. The work itself follows as `Cordon`, `Launch`, `Bind` and `Delete` actions.
    Disrupt(DisruptionCommand),
    /// Evict the pods still on a node that is going away (they come back as `PodPending`
    /// unless already placed elsewhere).
    Drain {
        /// Node name.
        node: String,
    },
    /// Node repair: reboot a broken node's instance in place (`CloudProvider::reboot`); its
    /// pods stay bound. Report back `RebootFailed` when it cannot be done.
    Reboot {
        /// NodeClaim name.
        claim: String,
        /// Provider id of the instance.
        provider_id: String,
        /// Why (`AcceleratedHardwareReady=False (NvidiaXID48Error) for 10m`).
        reason: String,
    },
}
