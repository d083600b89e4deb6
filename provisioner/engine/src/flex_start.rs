//! Flex-start nodes (GCP's Dynamic Workload Scheduler) in the engine.
//!
//! A NodePool that names capacity type `flex-start` (see `quartermaster_solver::flex_start`)
//! is offered flex-start offerings: the engine's catalog gains them when some pool opts in
//! (at [`Engine::new`], and again when the catalog or the pools change), never otherwise.
//!
//! A flex-start request waits in Compute Engine's queue before its VM exists (at most
//! [`FLEX_START_MAX_WAIT`]), so a flex-start claim is given that much more time to register.
//! Its VM then runs at most [`FLEX_START_MAX_RUN`] and is deleted by the cloud at its end. The
//! engine counts the run from the accepted launch (never later than the VM's start, so it is
//! never late) and vacates the node [`FLEX_START_DRAIN_BEFORE`] before the end, as a Capacity
//! Block's: cordoned, its pods planned elsewhere at once, the node deleted when they run there
//! ([`DeleteReason::FlexStartEnding`]); a node still there when its run ends is deleted then.

use chrono::{DateTime, Utc};
use quartermaster_pricing::CapacityType;
use quartermaster_pricing::flex_start::{
    FLEX_START_DRAIN_BEFORE, FLEX_START_MAX_RUN, FLEX_START_MAX_WAIT,
};

use crate::engine::{Engine, EngineSetup};
use crate::events::DeleteReason;
use crate::state::Claim;

/// `setup` with its catalog's flex-start offerings when one of its pools opts in.
pub(crate) fn with_offerings(mut setup: EngineSetup) -> EngineSetup {
    setup.catalog = quartermaster_solver::flex_start::catalog_for(
        std::mem::take(&mut setup.catalog),
        setup.pools.iter().map(|p| &p.spec),
    );
    setup
}

/// Whether `c` is (to be) launched as flex-start capacity.
pub(crate) fn is_flex_start(c: &Claim) -> bool {
    c.offering.capacity_type == CapacityType::FlexStart
}

/// When the run of a launched flex-start claim ends (the cloud deletes its VM).
fn run_end(c: &Claim) -> Option<DateTime<Utc>> {
    is_flex_start(c)
        .then_some(c.life.launched_at()?)
        .map(|t| t + FLEX_START_MAX_RUN)
}

/// The next time the engine must act on flex-start claim `c` by itself: its drain, or, once it
/// is vacated, the end of its run. `None` for other claims.
pub(crate) fn deadline(c: &Claim) -> Option<DateTime<Utc>> {
    let end = run_end(c)?;
    Some(if c.interrupted_at.is_none() {
        end - FLEX_START_DRAIN_BEFORE
    } else {
        end
    })
}

impl Engine {
    /// The catalog gains flex-start offerings when a pool opts in (after a catalog or pool
    /// change).
    pub(crate) fn add_flex_start_offerings(&mut self) {
        let pools = self.setup.pools.iter().map(|p| &p.spec);
        if quartermaster_solver::flex_start::any_opts_in(pools) {
            self.flex_start_seen = true;
            self.setup.catalog = self.setup.catalog.with_flex_start_offerings();
        }
    }

    /// When launched claim `c` should have registered: the registration budget after its
    /// launch, plus the longest a flex-start request may wait in the cloud's queue.
    pub(crate) fn registration_due(&self, c: &Claim) -> Option<DateTime<Utc>> {
        let mut budget = self.config.registration_budget;
        if is_flex_start(c) {
            budget += FLEX_START_MAX_WAIT;
        }
        c.life.launched_at().map(|t| t + budget)
    }

    /// Flex-start nodes whose run ends within [`FLEX_START_DRAIN_BEFORE`] are vacated (their
    /// pods planned elsewhere at once, the node deleted when they run there); one still there
    /// when its run ends is deleted.
    pub(crate) fn drain_flex_start(&mut self, now: DateTime<Utc>) {
        if !self.flex_start_seen {
            return;
        }
        let mut drain = Vec::new();
        let mut delete = Vec::new();
        for c in self.claims.values().filter(|c| !c.deleting) {
            let Some(end) = run_end(c) else { continue };
            if c.interrupted_at.is_none() && now >= end - FLEX_START_DRAIN_BEFORE {
                drain.push((c.name.clone(), end));
            } else if now >= end {
                delete.push(c.name.clone());
            }
        }
        for (name, end) in drain {
            if self.vacate(now, &name, end) {
                self.stats.flex_start_drains += 1;
            }
        }
        for name in delete {
            self.delete(now, &name, DeleteReason::FlexStartEnding);
        }
    }

    /// Why a vacated claim goes once its pods run elsewhere, when it is a flex-start one.
    pub(crate) fn flex_start_vacated(c: &Claim) -> Option<DeleteReason> {
        (c.interrupted_at.is_some() && is_flex_start(c)).then_some(DeleteReason::FlexStartEnding)
    }
}
