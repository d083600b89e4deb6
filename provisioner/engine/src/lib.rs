//! The provisioning engine: a deterministic state machine that is told what happens
//! ([`Event`]) and the time, and answers with what to do ([`Action`]).
//!
//! It batches pending pods (idle window, maximum window), asks the solver for a plan, turns new
//! nodes into NodeClaims and launches them trying their offerings in order (an offering that
//! fails with insufficient capacity is marked unavailable for a while), follows each claim
//! through `Launched` → `Registered` → `Initialized` (every requested extended resource in
//! allocatable, startup taints gone), replaces nodes whose accelerators never appear, answers
//! spot interruption notices by cordoning and launching the replacement at once, and removes
//! nodes that stay empty past their pool's `consolidateAfter` within its disruption budgets.
//!
//! No I/O and no clock: the simulator and the in-cluster controller drive the same engine.

mod adopt;
mod claim_table;
mod config;
mod deadlines;
mod disruption;
mod engine;
mod events;
mod explain;
mod flex_start;
mod gangs;
mod headroom;
mod lifecycle;
mod pod_table;
mod pools;
mod prices;
mod provisioning;
mod provisioning_requests;
mod repair;
mod reservations;
mod state;
mod static_pools;
mod unavailable;

pub use config::EngineConfig;
pub use disruption::{
    CHECKPOINTED, CommandKind, DO_NOT_DISRUPT, DisruptionCommand, DisruptionStats,
    KARPENTER_DO_NOT_DISRUPT, PodDisruptionBudgetView, RETIRE_PRICE_RATIO, RUN_TO_COMPLETION_KINDS,
    SOFT_CORDON_PRICE_RATIO, SPOT_TO_SPOT_MIN_TYPES, SchedulerScoring, TAINT_RETIRING,
    TEMPLATE_HASH_LABEL, checkpointed, do_not_disrupt, kube_scheduler_score, runs_to_completion,
};
pub use engine::{ClaimView, Engine, EngineSetup, EngineStats};
pub use events::{Action, DeleteReason, Event, FoundClaim, NodeCondition, NodeView};
pub use gangs::{GANG_LABEL, PLACEMENT_GROUP_LABEL};
pub use headroom::{Buffer, HeadroomView};
pub use pools::{EngineError, PoolPolicy};
pub use prices::catalog_for_pools;
pub use provisioning_requests::{LABEL_PROVISIONING_REQUEST, RequestVerdict, check_capacity};
pub use repair::{RepairAction, RepairConfig, RepairOverride, RepairRule};
pub use reservations::{ReservationOffer, SlotShape, parse_stand_in, stand_in_name, stand_ins};
pub use unavailable::UnavailableOfferings;

#[cfg(test)]
mod tests;
