//! What the engine remembers: pods and NodeClaims.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use quartermaster_pricing::Cloud;
use quartermaster_solver::{OfferingChoice, Pod, Resources};

use crate::events::NodeView;

/// Where a pod stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PodState {
    /// Needs a place. `reason` is set when the last solve could not place it.
    Waiting {
        since: DateTime<Utc>,
        reason: Option<String>,
    },
    /// Expected on a claim: planned there by the engine, not bound there by the cluster (yet).
    /// A hint only: the kube-scheduler may bind the pod elsewhere, or other pods may take the
    /// room (see `Engine::check_nominations`).
    Nominated { claim: String },
    /// Bound to a claim's node, as the cluster reported it (`Event::PodBound`).
    Bound { claim: String },
}

/// A pod the engine tracks.
#[derive(Debug, Clone)]
pub(crate) struct PodEntry {
    /// Shared with every snapshot that holds it.
    pub pod: Arc<Pod>,
    pub state: PodState,
}

/// Where a NodeClaim is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    /// A launch is outstanding (or waiting for `retry_at`).
    Launching,
    /// The cloud accepted the launch.
    Launched,
    /// Its node registered.
    Registered,
    /// Every requested extended resource is allocatable and startup taints are gone.
    Initialized,
}

/// A NodeClaim.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub name: String,
    pub pool: usize,
    pub cloud: Cloud,
    pub offering: OfferingChoice,
    pub alternatives: VecDeque<OfferingChoice>,
    /// Its node's labels, and the Node once it registered.
    pub facts: NodeFacts,
    /// Capacity of the instance type (what limits count).
    pub capacity: Resources,
    /// Room for pods: allocatable minus DaemonSet overhead.
    pub room: Resources,
    pub phase: Phase,
    pub provider_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub launched_at: Option<DateTime<Utc>>,
    pub registered_at: Option<DateTime<Utc>>,
    pub initialized_at: Option<DateTime<Utc>>,
    /// Since when it holds no pod (initialized claims only).
    pub empty_since: Option<DateTime<Utc>>,
    /// When a pod was last nominated to it (the kube-scheduler may not have bound it yet).
    pub nominated_at: Option<DateTime<Utc>>,
    /// A throttled or failed launch is retried at this time.
    pub retry_at: Option<DateTime<Utc>>,
    pub attempts: u32,
    /// Set when the cloud announced its reclamation.
    pub interrupted_at: Option<DateTime<Utc>>,
    /// Pods that ran on it when the interruption notice came; once all of them run elsewhere
    /// (or are gone) the node is deleted without waiting for the reclaim.
    pub displaced: Vec<quartermaster_solver::PodRef>,
    /// A delete was asked for.
    pub deleting: bool,
    /// Being replaced by consolidation: cordoned, its pods moving elsewhere.
    pub consolidating: bool,
    /// The consolidation in progress launched a replacement (rather than only moving pods).
    pub consolidation_replaced: bool,
    /// A consolidation of this node was called off: not tried again before this time.
    pub consolidation_backoff: Option<DateTime<Utc>>,
    /// For a consolidation replacement: a node of the move it belongs to (the first it
    /// replaces). Its offerings are limited to those that keep the move cheaper; if none can
    /// launch, the whole move is called off.
    pub replaces: Option<String>,
    /// The disruption move this claim is part of (a node that goes, or a replacement).
    pub move_id: Option<u64>,
    /// Why it is being vacated (the reason its Delete will carry).
    pub disruption_reason: Option<crate::events::DeleteReason>,
    /// Hash of the NodePool template and NodeClass spec it was created from (drift).
    pub template_hash: String,
    /// An expired node is deleted at this time whatever still runs on it
    /// (`terminationGracePeriod` after its expiry).
    pub forced_at: Option<DateTime<Utc>>,
    /// When a pod last started or stopped running on it (consolidation waits `consolidateAfter`
    /// from here).
    pub last_change: DateTime<Utc>,
    /// The gang launch it is part of (its gang's name), with the labels that say so.
    pub gang: Option<GangMember>,
    /// The MIG layout the solver chose for its node (`nvidia.com/mig.config`), when its pool
    /// leaves the layout to the solver; its capacity and room count that layout.
    pub mig_config: Option<String>,
    /// The reservation it launched into (id), if any.
    pub reservation: Option<String>,
}

/// A claim's part in a gang launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GangMember {
    /// The gang (`namespace/name`), the key of [`GangLaunch`]es.
    pub gang: String,
    /// `quartermaster.dev/gang` and `quartermaster.dev/placement-group`.
    pub labels: BTreeMap<String, String>,
}

/// The NodeClaims the solver planned for one gang, launched as a group: all of them are
/// launched (accepted by the cloud) before `deadline`, in `zone`, or every one is deleted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GangLaunch {
    /// The zone the gang was placed in; fallbacks stay in it.
    pub zone: String,
    /// Its claims.
    pub claims: Vec<String>,
    /// When the gang must be complete.
    pub deadline: DateTime<Utc>,
}

/// What a claim's node is: the labels it is launched with (offering, pool template, nodepool,
/// gang) and the Node once it registered. The two merged, as pods see them, are computed once
/// and shared by every snapshot until either changes (building them on every solve was half of
/// a simulation's time).
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeFacts {
    labels: Arc<BTreeMap<String, String>>,
    node: Option<NodeView>,
    merged: OnceLock<Arc<BTreeMap<String, String>>>,
}

impl NodeFacts {
    /// Facts of a node about to be launched with `labels`.
    pub fn new(labels: BTreeMap<String, String>) -> Self {
        Self {
            labels: Arc::new(labels),
            node: None,
            merged: OnceLock::new(),
        }
    }

    /// The labels the claim launches its node with.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// The launch labels, to change.
    pub fn labels_mut(&mut self) -> &mut BTreeMap<String, String> {
        self.merged.take();
        Arc::make_mut(&mut self.labels)
    }

    /// The launch labels, shared.
    pub fn shared_labels(&self) -> Arc<BTreeMap<String, String>> {
        self.labels.clone()
    }

    /// The Node, once registered.
    pub fn node(&self) -> Option<&NodeView> {
        self.node.as_ref()
    }

    /// Records the Node as the cluster reports it now.
    pub fn set_node(&mut self, node: Option<NodeView>) {
        self.merged.take();
        self.node = node;
    }

    /// The labels pods see: the launch labels, overridden by the Node's own.
    pub fn merged_labels(&self) -> Arc<BTreeMap<String, String>> {
        self.merged
            .get_or_init(|| {
                let mut labels = (*self.labels).clone();
                if let Some(node) = &self.node {
                    labels.extend(node.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                Arc::new(labels)
            })
            .clone()
    }
}

impl Claim {
    /// The labels its node carries: the offering's and the pool's, and its gang's.
    pub fn node_labels(&self) -> Arc<BTreeMap<String, String>> {
        let Some(g) = &self.gang else {
            return self.facts.shared_labels();
        };
        let mut labels = self.facts.labels().clone();
        labels.extend(g.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        Arc::new(labels)
    }

    /// The Node, once registered.
    pub fn node(&self) -> Option<&NodeView> {
        self.facts.node()
    }

    /// The name pods are placed under: the node's once registered, the claim's before.
    pub fn target_name(&self) -> &str {
        self.node().map_or(self.name.as_str(), |n| n.name.as_str())
    }

    /// Whether new pods may be placed on it.
    pub fn schedulable(&self) -> bool {
        self.interrupted_at.is_none() && !self.deleting && !self.consolidating
    }

    /// Whether its pods are being moved off it (spot interruption or consolidation).
    pub fn vacating(&self) -> bool {
        self.interrupted_at.is_some() || self.consolidating
    }
}
