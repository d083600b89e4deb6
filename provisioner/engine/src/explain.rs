//! Why a waiting pod is where it is: the solver's [`explain`] on the engine's own snapshot, for
//! the controller's `Unschedulable` events.

use chrono::{DateTime, Utc};
use quartermaster_solver::PodRef;
use quartermaster_solver::explain::{Explanation, explain};

use crate::engine::Engine;

impl Engine {
    /// Every candidate offering for a waiting pod with the reason it was not chosen; `None` when
    /// the pod is not waiting.
    pub fn explain(&self, now: DateTime<Utc>, pod: &PodRef) -> Option<Explanation> {
        let (snapshot, _) = self.snapshot(now);
        explain(&snapshot, &self.setup.catalog, now, pod)
    }
}
