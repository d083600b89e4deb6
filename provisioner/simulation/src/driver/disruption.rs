//! Voluntary disruption as the driver sees it: pods stopping on disrupted nodes, the
//! PodDisruptionBudgets told to the engine, pods forgotten.

use quartermaster_engine::Event;
use quartermaster_solver::PodRef;

use crate::disruption::pdb_view;

use super::Driver;

impl Driver<'_> {
    /// `pod` stops on `node` (moved or evicted): judged when the node is being disrupted.
    pub(super) fn stopping(&mut self, pod: &PodRef, node: &str) {
        let Some(&w) = self.workload_of.get(pod) else {
            return;
        };
        let unavailable = self.unavailable(w, Some(pod));
        self.tracker
            .pod_stopped(node, &self.scenario.workloads[w], unavailable);
    }

    /// Pods of workload `w` alive and not running (besides `except`).
    fn unavailable(&self, w: usize, except: Option<&PodRef>) -> u32 {
        self.guarded.get(&w).map_or(0, |pods| {
            pods.iter()
                .filter(|p| Some(*p) != except && !self.cluster.is_running(p))
                .count() as u32
        })
    }

    pub(super) fn forget(&mut self, id: &PodRef) {
        if let Some(w) = self.workload_of.remove(id)
            && let Some(pods) = self.guarded.get_mut(&w)
        {
            pods.remove(id);
        }
    }

    /// Tells the engine the PodDisruptionBudgets as the PDB controller would compute them now
    /// (only when they changed).
    pub(super) fn tell_pdbs(&mut self) {
        let views: Vec<_> = self
            .scenario
            .workloads
            .iter()
            .enumerate()
            .filter_map(|(i, w)| pdb_view(w, self.unavailable(i, None)))
            .collect();
        if views != self.tracker.told {
            self.tracker.told = views.clone();
            self.engine
                .handle(self.now, Event::DisruptionBudgets(views));
        }
    }
}
