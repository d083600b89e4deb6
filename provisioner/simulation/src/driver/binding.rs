//! Binding: the kube-scheduler stand-in's cycle (the engine's planned binds are `Action::Bind`,
//! carried out in `actions.rs`) and what the engine is told of pods bound and unbound.

use quartermaster_engine::Event;
use quartermaster_solver::{PodRef, Resources};

use crate::error::SimulationError;
use crate::scheduler;

use super::Driver;

impl Driver<'_> {
    /// The kube-scheduler stand-in's cycle ([`crate::scheduler::Binder::Scheduler`]): every unbound pod, oldest
    /// first, goes to the best node that passes the filters, whatever the engine planned. Runs
    /// only when the cluster changed since the last cycle. Returns whether it bound any.
    pub(super) fn schedule(&mut self) -> Result<bool, SimulationError> {
        let seen = (self.cluster.changes(), self.cluster.created());
        if !self.scenario.binder.is_scheduler() || self.scheduled_at_change == Some(seen) {
            return Ok(false);
        }
        // Without new room only the pods created since the last cycle can be bound now (the
        // others did not fit then and nothing freed up since).
        let from = match self.scheduled_at_change {
            Some((changes, created)) if changes == seen.0 => created as usize,
            _ => 0,
        };
        let mut bound = false;
        let pending: Vec<PodRef> = self
            .cluster
            .unbound_pods(from)
            .into_iter()
            .map(|p| p.id.clone())
            .collect();
        let mut anti_affine = self
            .cluster
            .running_pods()
            .any(scheduler::has_required_anti_affinity);
        // Once a pod found no node, the most any node has free is worked out (one pass over
        // the nodes), and pods that ask for more are not offered to every node.
        let mut most_free: Option<Option<Resources>> = None;
        for id in pending {
            let Some(pod) = self.cluster.pod(&id) else {
                continue;
            };
            if most_free.is_some_and(|free| {
                free.is_none_or(|free| pod.requests.first_excess(&free).is_some())
            }) {
                continue;
            }
            let Some(node) =
                scheduler::choose(&self.cluster, pod, anti_affine, self.scenario.binder)
                    .map(str::to_owned)
            else {
                if most_free.is_none() {
                    most_free = Some(scheduler::most_free(&self.cluster));
                }
                continue;
            };
            anti_affine |= scheduler::has_required_anti_affinity(pod);
            self.cluster
                .bind(self.now, &id, &node, &mut self.rec)
                .map_err(|e| self.inconsistent(format!("the scheduler stand-in: {e}")))?;
            self.report_bound(&id, &node);
            bound = true;
        }
        self.scheduled_at_change = Some((self.cluster.changes(), self.cluster.created()));
        Ok(bound)
    }

    /// The stand-in's cycle for one unbound pod; returns whether it bound it.
    pub(super) fn schedule_one(&mut self, id: &PodRef) -> Result<bool, SimulationError> {
        let anti_affine = self
            .cluster
            .running_pods()
            .any(scheduler::has_required_anti_affinity);
        let Some(pod) = self.cluster.pod(id) else {
            return Ok(false);
        };
        if self.cluster.node_of(id).is_some() {
            return Ok(false);
        }
        let Some(node) = scheduler::choose(&self.cluster, pod, anti_affine, self.scenario.binder)
            .map(str::to_owned)
        else {
            return Ok(false);
        };
        self.cluster
            .bind(self.now, id, &node, &mut self.rec)
            .map_err(|e| self.inconsistent(format!("the scheduler stand-in: {e}")))?;
        self.report_bound(id, &node);
        Ok(true)
    }

    /// Tells the engine the cluster bound `pod` to `node`, as the controller's watch would.
    pub(super) fn report_bound(&mut self, pod: &PodRef, node: &str) {
        let Some(mut pod) = self.cluster.pod(pod).cloned() else {
            return;
        };
        if !self.scenario.gang_aware {
            pod.gang = None;
        }
        self.engine.handle(
            self.now,
            Event::PodBound {
                pod,
                node: node.to_owned(),
            },
        );
    }

    /// Pods a drained or lost node left unbound are pending again: with the scheduler
    /// stand-in the engine hears of them as the controller would (a pod it already placed
    /// again keeps its place).
    pub(super) fn report_unbound(&mut self, pods: &[PodRef]) {
        if !self.scenario.binder.is_scheduler() {
            return;
        }
        for id in pods {
            let Some(mut pod) = self.cluster.pod(id).cloned() else {
                continue;
            };
            if !self.scenario.gang_aware {
                pod.gang = None;
            }
            self.engine.handle(self.now, Event::PodPending(pod));
        }
    }
}
