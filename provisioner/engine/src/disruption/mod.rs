//! What voluntary disruption must respect and what it reports: do-not-disrupt annotations,
//! PodDisruptionBudgets, and the commands (with their reason and expected saving) the engine
//! announces.

mod budgets;
mod candidates;
mod commands;
mod consolidation;
mod drift;
mod emptiness;
mod interruption;
pub(crate) mod methods;
pub(crate) mod refusals;
pub(crate) mod retirement;

pub use consolidation::binding::{SchedulerScoring, kube_scheduler_score};

use std::collections::{BTreeMap, BTreeSet};

use quartermaster_policies::Requirements;
use quartermaster_solver::{Pod, PodRef};

use crate::events::DeleteReason;

/// Pod, Node or NodeClaim annotation that blocks voluntary disruption (value `"true"`).
pub const DO_NOT_DISRUPT: &str = "quartermaster.dev/do-not-disrupt";
/// Karpenter's spelling of the same annotation, honoured for migrating users.
pub const KARPENTER_DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// Pod annotation (value `"true"`): the pod resumes from a checkpoint when restarted, so
/// voluntary disruption may move it although a run-to-completion workload owns it (see
/// [`RUN_TO_COMPLETION_KINDS`]). Without it such pods are never moved: their work would be lost.
pub const CHECKPOINTED: &str = "quartermaster.dev/checkpointed";
/// Kinds of the controllers whose pods run to completion (a batch Job; the Kubeflow training
/// operator's jobs, whose pods it owns directly): voluntary disruption never moves such a pod
/// unless it is annotated [`CHECKPOINTED`]. A JobSet's or a Volcano Job's pods are owned by a
/// `Job` too.
pub const RUN_TO_COMPLETION_KINDS: [&str; 8] = [
    "Job",
    "PyTorchJob",
    "TFJob",
    "MPIJob",
    "XGBoostJob",
    "PaddleJob",
    "JAXJob",
    "MXJob",
];
/// NodePool annotation: how many cheaper spot instance types must exist before a spot node is
/// replaced by another spot node (default [`crate::EngineConfig::spot_to_spot_min_types`]).
pub const SPOT_TO_SPOT_MIN_TYPES: &str = "quartermaster.dev/spot-to-spot-min-types";
/// NodePool annotation: retire a node (cordon it, let its pods finish, delete it once empty)
/// when its pods need capacity costing at most its price divided by this (default
/// [`crate::EngineConfig::retire_price_ratio`]; `0` turns retirement off).
pub const RETIRE_PRICE_RATIO: &str = "quartermaster.dev/retire-price-ratio";
/// The soft cordon's taint key (effect `PreferNoSchedule`): the node costs more than its pods
/// need, so the kube-scheduler should put new pods elsewhere when they fit elsewhere
/// ([`crate::EngineConfig::soft_cordon_price_ratio`]).
pub const TAINT_RETIRING: &str = "quartermaster.dev/retiring";
/// NodePool annotation: soft-cordon a node ([`TAINT_RETIRING`]) when it costs at least this
/// many times what its pods need (default [`crate::EngineConfig::soft_cordon_price_ratio`];
/// `0` turns it off; at or past the pool's retirement ratio it never applies).
pub const SOFT_CORDON_PRICE_RATIO: &str = "quartermaster.dev/soft-cordon-price-ratio";
/// NodeClaim (and node) label: the hash of the NodePool template and NodeClass spec the claim was
/// created from. A claim whose hash differs from its pool's current one has drifted.
pub const TEMPLATE_HASH_LABEL: &str = "quartermaster.dev/nodepool-hash";

/// Whether an object's annotations ask for no voluntary disruption.
pub fn do_not_disrupt(annotations: &BTreeMap<String, String>) -> bool {
    [DO_NOT_DISRUPT, KARPENTER_DO_NOT_DISRUPT]
        .iter()
        .any(|k| annotations.get(*k).is_some_and(|v| v == "true"))
}

/// Whether a pod's annotations say it resumes from a checkpoint ([`CHECKPOINTED`] is `"true"`).
pub fn checkpointed(annotations: &BTreeMap<String, String>) -> bool {
    annotations.get(CHECKPOINTED).is_some_and(|v| v == "true")
}

/// Whether a pod whose controller is `owner` (`Kind/namespace/name`, as [`Pod::owner`] holds
/// it) runs to completion: its controller's kind is one of [`RUN_TO_COMPLETION_KINDS`].
pub fn runs_to_completion(owner: &str) -> bool {
    let kind = owner.split('/').next().unwrap_or_default();
    RUN_TO_COMPLETION_KINDS.contains(&kind)
}

/// A PodDisruptionBudget as the engine uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodDisruptionBudgetView {
    /// Namespace (it only selects pods there).
    pub namespace: String,
    /// Name, for messages.
    pub name: String,
    /// The pod selector (an empty one selects every pod of the namespace).
    pub selector: Requirements,
    /// How many selected pods may be disrupted at once now (`status.disruptionsAllowed` in a
    /// cluster).
    pub disruptions_allowed: u32,
}

impl PodDisruptionBudgetView {
    /// Whether the budget covers `pod`.
    pub fn selects(&self, pod: &Pod) -> bool {
        pod.id.namespace == self.namespace && self.selector.matches(&pod.labels)
    }
}

/// The shape of a disruption command, as counted in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CommandKind {
    /// An empty node removed.
    Empty,
    /// One node removed, its pods onto other nodes.
    Delete,
    /// Several nodes removed at once, their pods onto the others.
    MultiDelete,
    /// One node replaced by one cheaper node.
    Replace,
    /// One node replaced by several smaller ones that cost less together.
    Split,
    /// Several nodes replaced by fewer or cheaper ones (N→M).
    MultiReplace,
    /// A drifted node replaced.
    Drift,
    /// An expired node replaced.
    Expire,
}

impl CommandKind {
    /// The kind from the reason and the node counts (`n` removed, `m` launched).
    pub fn of(reason: DeleteReason, n: usize, m: usize) -> Self {
        match reason {
            DeleteReason::Empty => Self::Empty,
            DeleteReason::Drifted => Self::Drift,
            DeleteReason::Expired => Self::Expire,
            _ => match (n, m) {
                (1, 0) => Self::Delete,
                (_, 0) => Self::MultiDelete,
                (1, 1) => Self::Replace,
                (1, _) => Self::Split,
                _ => Self::MultiReplace,
            },
        }
    }

    /// The name reports use (`consolidation_commands` keys).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::Delete => "delete",
            Self::MultiDelete => "multi_delete",
            Self::Replace => "replace",
            Self::Split => "split",
            Self::MultiReplace => "multi_replace",
            Self::Drift => "drift",
            Self::Expire => "expire",
        }
    }
}

impl std::fmt::Display for CommandKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A voluntary disruption the engine decided.
#[derive(Debug, Clone, PartialEq)]
pub struct DisruptionCommand {
    /// Its shape.
    pub kind: CommandKind,
    /// Why.
    pub reason: DeleteReason,
    /// NodeClaims that go.
    pub claims: Vec<String>,
    /// Their nodes.
    pub nodes: Vec<String>,
    /// NodeClaims launched to replace them.
    pub replacements: Vec<String>,
    /// Pods that move.
    pub pods: usize,
    /// Expected saving in $/hour (removed nodes' price minus the replacements'; may be negative
    /// for drift and expiry).
    pub saving_per_hour: f64,
}

impl std::fmt::Display for DisruptionCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {} node(s) [{}] -> {} replacement(s), {} pod(s) moved, saving ${:.4}/hour",
            self.kind,
            self.reason,
            self.claims.len(),
            self.claims.join(", "),
            self.replacements.len(),
            self.pods,
            self.saving_per_hour
        )
    }
}

/// Disruption counters for reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DisruptionStats {
    /// Commands decided, by kind ([`CommandKind::as_str`]).
    pub commands: BTreeMap<String, u64>,
    /// Sum of the commands' expected savings, $/hour.
    pub saving_per_hour: f64,
    /// Pods the commands moved.
    pub pods_disrupted: u64,
    /// Moves called off before they ran (a replacement could not launch cheaper, or a pod
    /// became do-not-disrupt or a PDB stopped allowing the move).
    pub called_off: u64,
}

impl DisruptionStats {
    pub(crate) fn record(&mut self, c: &DisruptionCommand) {
        *self.commands.entry(c.kind.as_str().to_owned()).or_default() += 1;
        self.saving_per_hour += c.saving_per_hour;
        self.pods_disrupted += c.pods as u64;
    }
}

/// What the engine knows for disruption besides pods and claims.
#[derive(Debug, Clone, Default)]
pub(crate) struct DisruptionState {
    /// Pods annotated do-not-disrupt.
    pub protected_pods: BTreeSet<PodRef>,
    /// Run-to-completion pods annotated checkpointed (voluntary disruption may move them).
    pub checkpointed_pods: BTreeSet<PodRef>,
    /// Nodes or claims annotated do-not-disrupt (by either name).
    pub protected_nodes: BTreeSet<String>,
    /// The cluster's PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudgetView>,
    /// Claims whose instance the cloud says drifted from its NodeClass, with the reason.
    pub cloud_drifted: BTreeMap<String, String>,
    /// The next move's id.
    pub next_move: u64,
    /// Offerings a move's replacement could not get, kept out of moves for a while.
    pub refusals: refusals::MoveRefusals,
    /// Counters.
    pub stats: DisruptionStats,
}

/// FNV-1a 64 over `bytes`, as 16 hex digits: a hash that is the same on every build and
/// platform (claims carry it across controller versions).
pub(crate) fn stable_hash(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_reason_and_counts() {
        assert_eq!(
            CommandKind::of(DeleteReason::Underutilized, 1, 0),
            CommandKind::Delete
        );
        assert_eq!(
            CommandKind::of(DeleteReason::Underutilized, 3, 0),
            CommandKind::MultiDelete
        );
        assert_eq!(
            CommandKind::of(DeleteReason::Underutilized, 1, 2),
            CommandKind::Split
        );
        assert_eq!(
            CommandKind::of(DeleteReason::Underutilized, 4, 2),
            CommandKind::MultiReplace
        );
        assert_eq!(
            CommandKind::of(DeleteReason::Drifted, 1, 1),
            CommandKind::Drift
        );
    }

    #[test]
    fn annotations_and_hash() {
        let mut a = BTreeMap::new();
        assert!(!do_not_disrupt(&a));
        a.insert(KARPENTER_DO_NOT_DISRUPT.to_owned(), "true".to_owned());
        assert!(do_not_disrupt(&a));
        assert_eq!(stable_hash(b""), "cbf29ce484222325");
        assert_ne!(stable_hash(b"a"), stable_hash(b"b"));
    }
}
