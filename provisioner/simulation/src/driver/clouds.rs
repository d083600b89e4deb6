//! The simulated clouds: their node and cloud events fed to the cluster and the engine, instances
//! gone, delete calls (retried while the cloud throttles) and the garbage collection of
//! instances without a NodeClaim.

use chrono::TimeDelta;
use quartermaster_cloud::{CloudError, CloudEvent, CloudProvider};
use quartermaster_engine::{Event, NodeView};
use quartermaster_pricing::{CapacityType, Cloud};
use quartermaster_sim::SimNodeEvent;
use quartermaster_solver::{PodRef, daemonset_overhead, to_resources};

use crate::error::SimulationError;
use crate::record::{EndReason, InstanceRecord};

use super::{DeleteRetry, Driver, GC_GRACE, GC_INTERVAL, ready};

impl Driver<'_> {
    pub(super) fn feed_clouds(&mut self) -> Result<bool, SimulationError> {
        let mut busy = false;
        let clouds: Vec<Cloud> = self.clouds.keys().copied().collect();
        for cloud in clouds {
            let node_events = self.clouds[&cloud].node_events();
            for e in node_events {
                busy = true;
                self.node_event(e);
            }
            let events = ready("poll_events", self.now, self.clouds[&cloud].poll_events())?;
            let events =
                events.map_err(|e| self.inconsistent(format!("poll_events failed: {e}")))?;
            for e in events {
                busy = true;
                self.cloud_event(e);
            }
        }
        Ok(busy)
    }

    pub(super) fn node_event(&mut self, e: SimNodeEvent) {
        let table = &self.world.setup.resources;
        match e {
            SimNodeEvent::Registered {
                ref provider_id, ..
            }
            | SimNodeEvent::AcceleratorsReady {
                ref provider_id, ..
            } if self.rec.instance(provider_id).is_none() => {
                // The Node of an instance whose launch answer was lost: it waits, as a Node
                // no NodeClaim names yet waits in a cluster, until the launch is found again.
                self.stashed.entry(provider_id.clone()).or_default().push(e);
            }
            SimNodeEvent::Registered {
                provider_id,
                claim_name,
                node,
            } => {
                let Some(i) = self.rec.instance(&provider_id) else {
                    return;
                };
                if self.rec.instances[i].end.is_some() {
                    return;
                }
                let Some(pool) = self.world.pool(&self.rec.instances[i].node_pool) else {
                    return;
                };
                let spec = &self.world.setup.pools[pool].spec;
                let mut taints = spec.taints.clone();
                taints.extend(spec.startup_taints.iter().cloned());
                let view = NodeView {
                    name: node.name.clone(),
                    labels: node.labels.clone(),
                    taints,
                    allocatable: to_resources(table, &node.allocatable),
                    conditions: Vec::new(),
                };
                let overhead = daemonset_overhead(&self.world.setup.daemonsets, &node.labels, spec);
                self.rec.instances[i].node = Some(node.name.clone());
                self.cluster
                    .add_node(i, view.clone(), spec.startup_taints.clone(), overhead);
                self.engine.handle(
                    self.now,
                    Event::NodeRegistered {
                        claim: claim_name,
                        node: view,
                    },
                );
            }
            SimNodeEvent::GpuFailed {
                provider_id,
                node_name,
                allocatable,
                reason,
            } => {
                if let Some(i) = self.rec.instance(&provider_id)
                    && self.rec.instances[i].end.is_none()
                {
                    self.rec.instances[i].gpu_fault_at.get_or_insert(self.now);
                }
                let allocatable = to_resources(table, &allocatable);
                if let Some(view) =
                    self.cluster
                        .gpu_failed(self.now, &node_name, allocatable, reason)
                {
                    self.engine
                        .handle(self.now, Event::NodeUpdated { node: view });
                }
            }
            SimNodeEvent::Rebooted {
                provider_id,
                node_name,
                allocatable,
                healthy,
            } => {
                if healthy
                    && let Some(i) = self.rec.instance(&provider_id)
                    && self.rec.instances[i].gpu_fault_at.is_some()
                {
                    self.rec.instances[i].gpu_cleared_at.get_or_insert(self.now);
                }
                let allocatable = to_resources(table, &allocatable);
                if let Some(view) =
                    self.cluster
                        .rebooted(self.now, &node_name, allocatable, healthy)
                {
                    self.engine
                        .handle(self.now, Event::NodeUpdated { node: view });
                }
            }
            SimNodeEvent::AcceleratorsReady {
                node_name,
                allocatable,
                ..
            } => {
                let allocatable = to_resources(table, &allocatable);
                if let Some(view) = self.cluster.node_ready(&node_name, allocatable) {
                    self.engine
                        .handle(self.now, Event::NodeUpdated { node: view });
                }
            }
        }
    }

    fn cloud_event(&mut self, e: CloudEvent) {
        match e {
            CloudEvent::Interruption {
                provider_id,
                terminates_at,
            } => {
                if let Some(i) = self.rec.instance(&provider_id) {
                    self.rec.instances[i].interrupted = true;
                }
                self.engine.handle(
                    self.now,
                    Event::Interruption {
                        provider_id,
                        terminates_at,
                    },
                );
            }
            CloudEvent::Terminated { provider_id } => {
                if let Some(i) = self.rec.instance(&provider_id) {
                    self.gone(i, EndReason::Reclaimed);
                }
                self.engine
                    .handle(self.now, Event::InstanceGone { provider_id });
            }
        }
    }

    /// An instance stops being billed; its node (if any) leaves the cluster.
    fn gone(&mut self, instance: usize, reason: EndReason) {
        self.rec.ended(instance, self.now, reason);
        self.not_live(instance);
        if let Some(node) = self.rec.instances[instance].node.clone() {
            let on: Vec<PodRef> = self
                .cluster
                .node(&node)
                .map(|n| n.pods.iter().cloned().collect())
                .unwrap_or_default();
            // Pods still there are evicted first (with the kube-scheduler stand-in a
            // consolidated node's pods move only now), one at a time and each placed again
            // before the next goes, as termination's evictions wait for the budget.
            if self.scenario.binder.is_scheduler() && !on.is_empty() {
                self.cluster.cordon(&node);
                for pod in &on {
                    self.stopping(pod, &node);
                    self.cluster.evict(self.now, pod, &mut self.rec);
                    self.report_unbound(std::slice::from_ref(pod));
                    // A pod with no room anywhere waits for the engine, as in a cluster.
                    let _ = self.schedule_one(pod);
                }
            }
            for pod in &on {
                if self.cluster.node_of(pod) == Some(node.as_str()) {
                    self.stopping(pod, &node);
                }
            }
            self.cluster.remove_node(self.now, &node, &mut self.rec);
            self.report_unbound(&on);
        }
        // A claim whose instance is gone (deleted, reclaimed) no longer counts as disrupting.
        let claim = self.rec.instances[instance].claim.clone();
        self.tracker.ended(&claim);
    }

    pub(super) fn feed_retries(&mut self) -> Result<bool, SimulationError> {
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retries)
            .into_iter()
            .partition(|r| r.at <= now);
        self.retries = later;
        let busy = !due.is_empty();
        for r in due {
            self.delete(r.claim, r.provider_id)?;
        }
        Ok(busy)
    }

    pub(super) fn delete(
        &mut self,
        claim: String,
        provider_id: String,
    ) -> Result<(), SimulationError> {
        let Some(i) = self.rec.instance(&provider_id) else {
            self.tracker.ended(&claim);
            self.engine.handle(self.now, Event::Deleted { claim });
            return Ok(());
        };
        let cloud = self.rec.instances[i].cloud;
        let result = ready("delete", self.now, self.clouds[&cloud].delete(&provider_id))?;
        match result {
            Ok(()) | Err(CloudError::NotFound { .. }) => {
                self.gone(i, EndReason::Deleted);
                self.engine.handle(self.now, Event::Deleted { claim });
            }
            Err(e) if e.is_retryable() => {
                let wait = match e {
                    CloudError::Throttled {
                        retry_after: Some(d),
                    } => TimeDelta::from_std(d).unwrap_or(TimeDelta::seconds(1)),
                    _ => TimeDelta::seconds(1),
                };
                self.retries.push(DeleteRetry {
                    at: self.now + wait.max(TimeDelta::milliseconds(1)),
                    claim,
                    provider_id,
                });
            }
            Err(e) => {
                return Err(self.inconsistent(format!("delete of {provider_id} failed: {e}")));
            }
        }
        Ok(())
    }

    /// Instances without a claim the engine knows (older than [`GC_GRACE`]) are recorded (they
    /// were billed) and deleted, as the controller's garbage collection does. Runs at the
    /// instants that happen anyway, every [`GC_INTERVAL`]; a failed list waits for the next.
    pub(super) fn collect_garbage(&mut self) -> Result<(), SimulationError> {
        if self.now < self.next_gc {
            return Ok(());
        }
        self.next_gc = self.now + GC_INTERVAL;
        self.check_gangs();
        let clouds: Vec<Cloud> = self.clouds.keys().copied().collect();
        for cloud in clouds {
            // The list the controller's collection makes, less the instances it would skip
            // at once for having a claim (not copied: this runs every GC_INTERVAL).
            let engine = &self.engine;
            let Ok(instances) = self.clouds[&cloud].list_where(|claim| !engine.has_claim(claim))
            else {
                continue;
            };
            for inst in instances {
                if self.engine.has_claim(&inst.claim_name) || self.now - inst.launched_at < GC_GRACE
                {
                    continue;
                }
                let i = match self.rec.instance(&inst.provider_id) {
                    Some(i) => i,
                    None => {
                        let pool = inst
                            .tags
                            .get("quartermaster.dev/nodepool")
                            .cloned()
                            .unwrap_or_default();
                        let record = self.instance_record(cloud, &inst.claim_name, &pool, &inst);
                        let i = self.rec.launched(record);
                        self.live(i);
                        i
                    }
                };
                self.stashed.remove(&inst.provider_id);
                match ready(
                    "delete",
                    self.now,
                    self.clouds[&cloud].delete(&inst.provider_id),
                )? {
                    Ok(()) | Err(CloudError::NotFound { .. }) => {
                        self.collected += 1;
                        self.gone(i, EndReason::Deleted);
                    }
                    // Tried again at the next collection.
                    Err(_) => {}
                }
            }
        }
        Ok(())
    }

    pub(super) fn instance_record(
        &self,
        cloud: Cloud,
        claim: &str,
        node_pool: &str,
        instance: &quartermaster_cloud::Instance,
    ) -> InstanceRecord {
        let catalog = &self.catalog;
        let it = catalog.get(cloud, &instance.instance_type);
        let offering = it.and_then(|it| {
            it.offerings
                .iter()
                .find(|o| o.zone == instance.zone && o.capacity_type == instance.capacity_type)
        });
        let list = it
            .and_then(|it| {
                it.offerings
                    .iter()
                    .find(|o| o.zone == instance.zone && o.capacity_type == CapacityType::OnDemand)
                    .or_else(|| it.cheapest_offering(Some(CapacityType::OnDemand)))
            })
            .map_or(instance.price_per_hour, |o| o.price_per_hour);
        let accelerator = it.and_then(|it| it.accelerator.as_ref());
        let queued = match it {
            Some(it) if instance.capacity_type == CapacityType::FlexStart => {
                TimeDelta::from_std(self.scenario.cloud.flex_start.wait.for_family(&it.family))
                    .unwrap_or_default()
            }
            _ => TimeDelta::zero(),
        };
        InstanceRecord {
            provider_id: instance.provider_id.clone(),
            cloud,
            claim: claim.to_owned(),
            node_pool: node_pool.to_owned(),
            node: None,
            instance_type: instance.instance_type.clone(),
            zone: instance.zone.clone(),
            region: offering.map(|o| o.region.clone()).unwrap_or_default(),
            capacity_type: instance.capacity_type,
            // The price in force (after the scenario's price changes).
            price_per_hour: offering.map_or(instance.price_per_hour, |o| o.price_per_hour),
            list_price_per_hour: list.max(instance.price_per_hour),
            price_source: offering.map(|o| o.price_source.clone()).unwrap_or_default(),
            accelerator_model: accelerator.map(|a| a.name.clone()).unwrap_or_default(),
            accelerators: it.map_or(0, |it| it.accelerator_count()),
            allocatable: it.map_or_else(Default::default, |it| {
                to_resources(&self.world.setup.resources, &it.allocatable())
            }),
            // When the cloud accepted it (earlier than now for a launch whose answer was lost
            // and that was found again); a flex-start request is billed once its queue wait
            // ends, as Compute Engine bills from when the VM runs.
            start: instance.launched_at.min(self.now) + queued,
            end: None,
            end_reason: None,
            interrupted: false,
            gpu_fault_at: None,
            gpu_cleared_at: None,
        }
    }
}
