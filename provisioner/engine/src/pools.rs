//! NodePools as the engine uses them: the solver's view plus what governs disruption.

use std::time::Duration;

use chrono::{DateTime, Utc};
use quartermaster_policies::{DisruptionReason, NodePool};
use quartermaster_solver::NodePoolSpec;

/// Why the engine cannot be set up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// A NodePool's disruption settings do not parse.
    #[error("NodePool {pool}: {reason}")]
    InvalidPool {
        /// Pool name.
        pool: String,
        /// What is wrong.
        reason: String,
    },
}

/// A NodePool: the solver's spec and the disruption policy the engine enforces.
#[derive(Debug, Clone)]
pub struct PoolPolicy {
    /// What the solver plans with (`usage` is recomputed by the engine).
    pub spec: NodePoolSpec,
    /// `nodeClassRef.name`, passed to the provider.
    pub node_class: String,
    /// `disruption.consolidateAfter`; `None` for `Never`.
    pub consolidate_after: Option<Duration>,
    /// The NodePool object, for its disruption budgets.
    pub node_pool: NodePool,
    /// `spec.replicas` of a static NodePool: the node count the engine keeps, whatever the pods
    /// need. `None` for the usual, pod-driven pools.
    pub replicas: Option<u64>,
    /// Hash of the template (and NodeClass spec, see [`PoolPolicy::with_node_class_spec`]):
    /// claims created from another hash have drifted.
    pub template_hash: String,
    /// `template.spec.expireAfter`; `None` for `Never`.
    pub expire_after: Option<Duration>,
    /// `template.spec.terminationGracePeriod`: how long an expired node's pods may take to move.
    pub termination_grace_period: Option<Duration>,
    /// `spec.repair`: what this pool changes about node repair.
    pub repair: crate::repair::RepairOverride,
}

/// Two policies are equal when they come from the same NodePool object, NodeClass and template
/// hash (the solver's spec is derived from them).
impl PartialEq for PoolPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.spec.name == other.spec.name
            && self.node_pool == other.node_pool
            && self.node_class == other.node_class
            && self.template_hash == other.template_hash
    }
}

impl PoolPolicy {
    /// Builds the policy from the solver's spec and the NodePool object it came from.
    pub fn new(spec: NodePoolSpec, node_pool: NodePool) -> Result<Self, EngineError> {
        let consolidate_after =
            node_pool
                .consolidate_after()
                .map_err(|e| EngineError::InvalidPool {
                    pool: spec.name.clone(),
                    reason: e.to_string(),
                })?;
        let replicas = match node_pool.spec.replicas {
            Some(r) if r < 0 => {
                return Err(EngineError::InvalidPool {
                    pool: spec.name.clone(),
                    reason: format!("spec.replicas: must be 0 or more, not {r}"),
                });
            }
            r => r.map(|r| r as u64),
        };
        let invalid = |e: quartermaster_policies::PolicyError| EngineError::InvalidPool {
            pool: spec.name.clone(),
            reason: e.to_string(),
        };
        let expire_after = node_pool.expire_after().map_err(invalid)?;
        let termination_grace_period = node_pool.termination_grace_period().map_err(invalid)?;
        let template_hash = template_hash(&node_pool, None);
        let repair = crate::repair::RepairOverride::from_spec(node_pool.spec.repair.as_ref())
            .map_err(|reason| EngineError::InvalidPool {
                pool: spec.name.clone(),
                reason,
            })?;
        Ok(Self {
            repair,
            template_hash,
            expire_after,
            termination_grace_period,
            node_class: node_pool.node_class_ref().name.clone(),
            replicas,
            consolidate_after,
            spec,
            node_pool,
        })
    }

    /// The same pool, with its NodeClass spec (any JSON form) counted in the template hash: a
    /// NodeClass change drifts the pool's claims too.
    pub fn with_node_class_spec(mut self, spec: &serde_json::Value) -> Self {
        self.template_hash = template_hash(&self.node_pool, Some(spec));
        self
    }

    /// How many cheaper spot instance types a spot-to-spot replacement in this pool needs
    /// (the `SPOT_TO_SPOT_MIN_TYPES` annotation, else `default`: Karpenter's flexibility rule).
    pub fn spot_to_spot_min_types(&self, default: usize) -> usize {
        self.node_pool
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::disruption::SPOT_TO_SPOT_MIN_TYPES))
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(default)
    }

    /// The price ratio past which this pool's nodes are retired (the `RETIRE_PRICE_RATIO`
    /// annotation, else `default`); `None` when retirement is off (a ratio of 0, or a pool
    /// that never removes empty nodes).
    pub fn retire_price_ratio(&self, default: f64) -> Option<f64> {
        self.consolidate_after?;
        self.price_ratio(crate::disruption::RETIRE_PRICE_RATIO, default)
    }

    /// The price ratio past which this pool's nodes are soft-cordoned (the
    /// `SOFT_CORDON_PRICE_RATIO` annotation, else `default`); `None` when it is off (`0`).
    pub fn soft_cordon_price_ratio(&self, default: f64) -> Option<f64> {
        self.price_ratio(crate::disruption::SOFT_CORDON_PRICE_RATIO, default)
    }

    /// The price ratio the pool's annotation `key` gives (else `default`; a value that is not
    /// a non-negative number counts as absent): `None` for 0, at least 1 otherwise.
    fn price_ratio(&self, key: &str, default: f64) -> Option<f64> {
        let ratio = self
            .node_pool
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|r| r.is_finite() && *r >= 0.0)
            .unwrap_or(default);
        (ratio > 0.0).then_some(ratio.max(1.0))
    }

    /// How many of `total` nodes may be disrupted for `reason` at `now` (disruption budgets).
    pub fn allowed_disruptions(
        &self,
        reason: DisruptionReason,
        total: usize,
        now: DateTime<Utc>,
    ) -> usize {
        self.node_pool.allowed_disruptions(reason, total, now)
    }
}

/// The hash of a pool's template (requirements, labels, taints, NodeClass reference, …) and
/// NodeClass spec, stable across builds.
fn template_hash(node_pool: &NodePool, node_class_spec: Option<&serde_json::Value>) -> String {
    let mut bytes = serde_json::to_vec(&node_pool.spec.template).unwrap_or_default();
    if let Some(spec) = node_class_spec {
        bytes.push(0);
        bytes.extend(serde_json::to_vec(spec).unwrap_or_default());
    }
    crate::disruption::stable_hash(&bytes)
}
