//! The engine's actions carried out against the simulated clouds and the cluster, each outcome
//! reported back as an event.

use std::collections::BTreeMap;

use quartermaster_cloud::{CloudError, CloudProvider};
use quartermaster_engine::{Action, Event};
use quartermaster_solver::PodRef;

use crate::error::SimulationError;

use super::{Driver, ready, restart};

impl Driver<'_> {
    /// Carries out `action`; `Some` when the driver crashed doing it (see [`restart`]).
    pub(super) fn execute(
        &mut self,
        action: Action,
    ) -> Result<Option<restart::CrashPoint>, SimulationError> {
        use restart::CrashPoint;
        let crash = self.crash_due();
        match action {
            Action::Launch { claim, request } => {
                // The controller's launch task creates the NodeClaim before it calls the cloud.
                self.created_claims.insert(claim.clone());
                let lose_answer = crash && self.crashes.as_mut().is_some_and(|c| c.coin());
                if crash && !lose_answer {
                    return Ok(Some(CrashPoint::BeforeLaunch));
                }
                let Some(pool) = self.world.pool(&request.node_pool) else {
                    return Err(self.inconsistent(format!(
                        "Launch for claim {claim} names unknown NodePool {}",
                        request.node_pool
                    )));
                };
                let cloud = self.world.setup.pools[pool].spec.cloud;
                let result = ready("create", self.now, self.clouds[&cloud].create(&request))?;
                if lose_answer {
                    return Ok(Some(CrashPoint::LaunchUnrecorded));
                }
                match result {
                    Ok(instance) => {
                        let record =
                            self.instance_record(cloud, &claim, &request.node_pool, &instance);
                        let i = self.rec.launched(record);
                        self.live(i);
                        let early = self.stashed.remove(&instance.provider_id);
                        self.engine
                            .handle(self.now, Event::Launched { claim, instance });
                        for e in early.unwrap_or_default() {
                            self.node_event(e);
                        }
                    }
                    Err(error) => self
                        .engine
                        .handle(self.now, Event::LaunchFailed { claim, error }),
                }
            }
            Action::Disrupt(_) if crash => return Ok(Some(CrashPoint::BeforeDisruption)),
            Action::Delete { .. } if crash => return Ok(Some(CrashPoint::BeforeDelete)),
            Action::Disrupt(command) => {
                // One look at the claims: each pool's size, and the pool of each claim moved.
                let mut sizes: BTreeMap<String, usize> = BTreeMap::new();
                let mut pool_of: BTreeMap<&str, String> = BTreeMap::new();
                for v in self.engine.claims() {
                    *sizes.entry(v.node_pool.clone()).or_default() += 1;
                    if let Some(c) = command.claims.iter().find(|c| **c == v.name) {
                        pool_of.insert(c.as_str(), v.node_pool);
                    }
                }
                let world = &self.world;
                let lookup = |claim: &str| {
                    let name = pool_of.get(claim)?;
                    Some((&world.setup.pools[world.pool(name)?], sizes[name]))
                };
                self.tracker.command(self.now, &command, lookup);
            }
            Action::Delete {
                claim, provider_id, ..
            } => {
                self.deletes_asked.insert(claim.clone());
                match provider_id {
                    Some(id) => self.delete(claim, id)?,
                    // The engine may delete a claim before it heard of the launch's outcome (a
                    // replacement called off in the poll that launched it): whatever the cloud
                    // launched for it goes too, or it would be billed for good.
                    None => match self.rec.live_instance_of_claim(&claim) {
                        Some(i) => {
                            let id = self.rec.instances[i].provider_id.clone();
                            self.delete(claim, id)?;
                        }
                        None => {
                            self.tracker.ended(&claim);
                            self.engine.handle(self.now, Event::Deleted { claim });
                        }
                    },
                }
            }
            // The kube-scheduler does not read nominations: its stand-in binds in `schedule`.
            Action::Bind { .. } if self.scenario.binder.is_scheduler() => {}
            Action::Bind { pod, node } => {
                if self.cluster.node(&node).is_some_and(|n| n.cordoned) {
                    return Err(self
                        .inconsistent(format!("Bind of {pod} to node {node}, which is cordoned")));
                }
                if let Some(from) = self.cluster.node_of(&pod).map(str::to_owned)
                    && from != node
                {
                    self.stopping(&pod, &from);
                }
                self.cluster
                    .bind(self.now, &pod, &node, &mut self.rec)
                    .map_err(|e| self.inconsistent(e))?;
                self.report_bound(&pod, &node);
            }
            Action::Reboot {
                claim, provider_id, ..
            } => {
                // As the controller does: a few tries through throttling and transient errors,
                // then the node is replaced instead.
                let Some(i) = self.rec.instance(&provider_id) else {
                    return Ok(None);
                };
                let cloud = self.rec.instances[i].cloud;
                let mut result = Ok(());
                for _ in 0..4 {
                    result = ready("reboot", self.now, self.clouds[&cloud].reboot(&provider_id))?;
                    if !result.as_ref().is_err_and(CloudError::is_retryable) {
                        break;
                    }
                }
                match result {
                    Ok(()) | Err(CloudError::NotFound { .. }) => {}
                    Err(e) => self.engine.handle(
                        self.now,
                        Event::RebootFailed {
                            claim,
                            error: e.to_string(),
                        },
                    ),
                }
            }
            Action::Cordon { node } => self.cluster.cordon(&node),
            Action::SoftCordon { node, on } => self.cluster.soft_cordon(&node, on),
            Action::Uncordon { node } => {
                self.tracker.uncordoned(&node);
                self.cluster.uncordon(&node);
            }
            Action::Drain { node } => {
                let on: Vec<PodRef> = self
                    .cluster
                    .node(&node)
                    .map(|n| n.pods.iter().cloned().collect())
                    .unwrap_or_default();
                for pod in &on {
                    self.stopping(pod, &node);
                }
                self.cluster.drain(self.now, &node, &mut self.rec);
                self.report_unbound(&on);
                if crash {
                    return Ok(Some(CrashPoint::MidDrain));
                }
            }
        }
        Ok(None)
    }
}
