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

/// Where a NodeClaim is in its life, and what that stage has: the times of the steps it went
/// through (a step the engine did not see, after a restart, is dated when it learnt of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// A launch is outstanding; a throttled or failed one is retried at `retry_at`, after
    /// `attempts` tries of this offering.
    Launching {
        attempts: u32,
        retry_at: Option<DateTime<Utc>>,
    },
    /// The cloud accepted the launch.
    Launched { launched_at: DateTime<Utc> },
    /// Its node registered (before the launch's answer was seen, when `launched_at` is none).
    Registered {
        launched_at: Option<DateTime<Utc>>,
        registered_at: DateTime<Utc>,
    },
    /// Every requested extended resource is allocatable and startup taints are gone.
    Initialized {
        launched_at: Option<DateTime<Utc>>,
        registered_at: DateTime<Utc>,
        initialized_at: DateTime<Utc>,
    },
}

impl Lifecycle {
    /// A claim whose launch is about to be asked for.
    pub fn launching() -> Self {
        Self::Launching {
            attempts: 0,
            retry_at: None,
        }
    }

    /// Its stage, without the data (stages are ordered).
    pub fn phase(&self) -> Phase {
        match self {
            Self::Launching { .. } => Phase::Launching,
            Self::Launched { .. } => Phase::Launched,
            Self::Registered { .. } => Phase::Registered,
            Self::Initialized { .. } => Phase::Initialized,
        }
    }

    /// When the cloud accepted its launch.
    pub fn launched_at(&self) -> Option<DateTime<Utc>> {
        match *self {
            Self::Launching { .. } => None,
            Self::Launched { launched_at } => Some(launched_at),
            Self::Registered { launched_at, .. } | Self::Initialized { launched_at, .. } => {
                launched_at
            }
        }
    }

    /// When its node registered.
    pub fn registered_at(&self) -> Option<DateTime<Utc>> {
        match *self {
            Self::Launching { .. } | Self::Launched { .. } => None,
            Self::Registered { registered_at, .. } | Self::Initialized { registered_at, .. } => {
                Some(registered_at)
            }
        }
    }

    /// When its node was initialized.
    pub fn initialized_at(&self) -> Option<DateTime<Utc>> {
        match *self {
            Self::Initialized { initialized_at, .. } => Some(initialized_at),
            _ => None,
        }
    }

    /// When a throttled or failed launch is tried again.
    pub fn retry_at(&self) -> Option<DateTime<Utc>> {
        match *self {
            Self::Launching { retry_at, .. } => retry_at,
            _ => None,
        }
    }

    /// The cloud accepted the launch at `now`. A node that registered first keeps its stage.
    pub fn launched(&mut self, now: DateTime<Utc>) {
        match self {
            Self::Launching { .. } | Self::Launched { .. } => {
                *self = Self::Launched { launched_at: now }
            }
            Self::Registered { launched_at, .. } | Self::Initialized { launched_at, .. } => {
                *launched_at = Some(now)
            }
        }
    }

    /// Its node registered at `now` (a later registration changes nothing).
    pub fn registered(&mut self, now: DateTime<Utc>) {
        if let Some(launched_at) = match *self {
            Self::Launching { .. } => Some(None),
            Self::Launched { launched_at } => Some(Some(launched_at)),
            Self::Registered { .. } | Self::Initialized { .. } => None,
        } {
            *self = Self::Registered {
                launched_at,
                registered_at: now,
            };
        }
    }

    /// Its node was found initialized at `now`.
    pub fn initialized(&mut self, now: DateTime<Utc>) {
        *self = Self::Initialized {
            launched_at: self.launched_at(),
            registered_at: self.registered_at().unwrap_or(now),
            initialized_at: now,
        };
    }

    /// A claim rebuilt from the cluster at `now`: its stage from what exists (an instance, a
    /// Node, an initialized Node), its times from the NodeClaim's status where it has them.
    pub fn found(
        now: DateTime<Utc>,
        launched: bool,
        registered: bool,
        initialized_at: Option<DateTime<Utc>>,
        launched_at: Option<DateTime<Utc>>,
        registered_at: Option<DateTime<Utc>>,
    ) -> Self {
        match (launched, registered, initialized_at) {
            (false, _, _) => Self::launching(),
            (true, false, _) => Self::Launched {
                launched_at: launched_at.unwrap_or(now),
            },
            (true, true, None) => Self::Registered {
                launched_at: Some(launched_at.unwrap_or(now)),
                registered_at: registered_at.unwrap_or(now),
            },
            (true, true, Some(initialized_at)) => Self::Initialized {
                launched_at: Some(launched_at.unwrap_or(now)),
                registered_at: registered_at.unwrap_or(now),
                initialized_at,
            },
        }
    }
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
    /// Where it is in its life, with what that stage has.
    pub life: Lifecycle,
    pub provider_id: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Since when it holds no pod (initialized claims only).
    pub empty_since: Option<DateTime<Utc>>,
    /// When a pod was last nominated to it (the kube-scheduler may not have bound it yet).
    pub nominated_at: Option<DateTime<Utc>>,
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
    /// When it was retired: its pods need a small part of what it costs, so no new pod is
    /// placed on it (it is cordoned, nothing is evicted) and it goes once they finish
    /// (`disruption/retirement.rs`).
    pub retired_at: Option<DateTime<Utc>>,
    /// When retirement last asked about it (and left it open): it asks again `consolidateAfter`
    /// later at the soonest, as consolidation waits as long after a change.
    pub retire_checked: Option<DateTime<Utc>>,
    /// Whether its node carries the soft cordon (`quartermaster.dev/retiring:PreferNoSchedule`):
    /// dear for what it holds, but not enough to be retired.
    pub soft_cordoned: bool,
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
    /// Its stage in its life.
    pub fn phase(&self) -> Phase {
        self.life.phase()
    }

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
        self.interrupted_at.is_none()
            && !self.deleting
            && !self.consolidating
            && self.retired_at.is_none()
    }

    /// Whether it is retired and would take new pods again if reopened (nothing else keeps
    /// them off it).
    pub fn reopenable(&self) -> bool {
        self.retired_at.is_some()
            && self.interrupted_at.is_none()
            && !self.deleting
            && !self.consolidating
            && self.phase() == Phase::Initialized
    }

    /// Whether its pods are being moved off it (spot interruption or consolidation).
    pub fn vacating(&self) -> bool {
        self.interrupted_at.is_some() || self.consolidating
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + minutes * 60, 0).expect("valid time")
    }

    #[test]
    fn a_claim_goes_through_its_stages_keeping_each_steps_time() {
        let mut life = Lifecycle::launching();
        assert_eq!(life.phase(), Phase::Launching);
        life.launched(at(1));
        life.registered(at(2));
        life.registered(at(3));
        assert_eq!(
            life.registered_at(),
            Some(at(2)),
            "a second registration changes nothing"
        );
        life.initialized(at(4));
        assert_eq!(
            life,
            Lifecycle::Initialized {
                launched_at: Some(at(1)),
                registered_at: at(2),
                initialized_at: at(4),
            }
        );
        assert_eq!(life.retry_at(), None);
    }

    #[test]
    fn a_node_that_registers_before_the_launch_answer_keeps_its_stage() {
        let mut life = Lifecycle::launching();
        life.registered(at(2));
        assert_eq!(life.launched_at(), None);
        life.launched(at(3));
        assert_eq!(life.phase(), Phase::Registered);
        assert_eq!(life.launched_at(), Some(at(3)));
    }

    #[test]
    fn a_claim_found_after_a_restart_is_dated_when_its_times_are_unknown() {
        let life = Lifecycle::found(at(9), true, true, None, Some(at(1)), None);
        assert_eq!(
            life,
            Lifecycle::Registered {
                launched_at: Some(at(1)),
                registered_at: at(9),
            }
        );
        assert_eq!(
            Lifecycle::found(at(9), false, true, Some(at(5)), None, None),
            Lifecycle::launching(),
            "no instance: the launch is asked for again"
        );
    }
}
