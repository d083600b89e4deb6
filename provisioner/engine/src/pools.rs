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
        Ok(Self {
            node_class: node_pool.node_class_ref().name.clone(),
            replicas,
            consolidate_after,
            spec,
            node_pool,
        })
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
