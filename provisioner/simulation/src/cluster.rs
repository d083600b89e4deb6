//! The in-memory cluster: Nodes as the kubelets register them, pods and where they run. It
//! plays the kube-scheduler (it carries out the engine's `Bind` actions, checking that the pod
//! fits and tolerates the node, which keeps the engine honest) and the kubelet (job pods finish
//! after their run time on a node; a drained pod stops, and restarts from scratch or resumes
//! when it is bound again). A gang's pods are held, bound but not started, until `minMember`
//! of them are bound (as Volcano or the coscheduling plugin do): their nodes are paid for and
//! their GPUs idle meanwhile.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_engine::{NodeView, TAINT_RETIRING};
use quartermaster_solver::pod::{Taint, TaintEffect, tolerates_all};
use quartermaster_solver::resources::ACCELERATORS;
use quartermaster_solver::{Pod, PodRef, Resources};

use crate::record::{PodRecord, Record, Segment};

/// A registered Node.
#[derive(Debug, Clone)]
pub struct Node {
    /// Index of its instance in the record.
    pub instance: usize,
    /// What the engine is told about it.
    pub view: NodeView,
    /// Startup taints still on it.
    pub startup_taints: Vec<Taint>,
    /// DaemonSet requests on it (taken from allocatable before pods).
    pub overhead: Resources,
    /// Sum of the requests of the pods running on it.
    pub used: Resources,
    /// Cordoned (interruption notice).
    pub cordoned: bool,
    /// Pods running on it.
    pub pods: BTreeSet<PodRef>,
}

/// A Job pod's progress.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobRun {
    /// Run time needed.
    pub run_time: TimeDelta,
    /// Run time done (kept across evictions only when checkpointed).
    pub done: TimeDelta,
    /// Whether an evicted pod resumes.
    pub checkpointed: bool,
}

/// A live pod.
#[derive(Debug, Clone)]
struct LivePod {
    record: usize,
    pod: Pod,
    /// Bound to this node (running, or held until its gang is complete).
    node: Option<String>,
    /// Started (bound, and its gang complete).
    running_since: Option<DateTime<Utc>>,
    job: Option<JobRun>,
    generation: u64,
}

/// Nodes, pods and pending job completions.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    nodes: BTreeMap<String, Node>,
    pods: BTreeMap<PodRef, LivePod>,
    /// `(due, generation, pod)`; stale entries (generation moved on) are skipped.
    completions: BinaryHeap<Reverse<(DateTime<Utc>, u64, PodRef)>>,
    next_generation: u64,
    /// Bumped by every change that may make room for a pod (pods stopped or deleted, nodes
    /// added, ready, uncordoned or gone).
    changes: u64,
    /// Pods created so far.
    created: u64,
    /// Pods bound to a node and pods taken off one so far: the set of bound pods changed when
    /// this did.
    placements: u64,
}

pub(crate) fn accelerators(r: &Resources) -> i64 {
    ACCELERATORS.map(|s| r.get(s)).sum()
}

impl Cluster {
    /// A pod is created (pending).
    pub fn create_pod(
        &mut self,
        now: DateTime<Utc>,
        pod: Pod,
        workload: usize,
        job: Option<JobRun>,
        rec: &mut Record,
    ) {
        rec.pods.push(PodRecord {
            id: pod.id.clone(),
            workload,
            requests: pod.requests,
            accelerators: accelerators(&pod.requests),
            created: now,
            first_bound: None,
            gone: None,
            completed: false,
            evictions: 0,
        });
        rec.pending.add(now, 1.0);
        self.created += 1;
        self.pods.insert(
            pod.id.clone(),
            LivePod {
                record: rec.pods.len() - 1,
                pod,
                node: None,
                running_since: None,
                job,
                generation: 0,
            },
        );
    }

    /// Whether the pod exists and runs on a node (a gang member held for its gang does not).
    pub fn is_running(&self, id: &PodRef) -> bool {
        self.pods.get(id).is_some_and(|p| p.running_since.is_some())
    }

    /// The node a pod runs on.
    pub fn node_of(&self, id: &PodRef) -> Option<&str> {
        self.pods.get(id)?.node.as_deref()
    }

    /// Pods running now.
    pub fn running_pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods
            .values()
            .filter(|p| p.node.is_some())
            .map(|p| &p.pod)
    }

    /// Pods alive and not bound to a node (pending), with their record index.
    pub fn waiting_pods(&self) -> impl Iterator<Item = (&Pod, usize)> {
        self.pods
            .values()
            .filter(|p| p.node.is_none())
            .map(|p| (&p.pod, p.record))
    }

    /// Every live pod with the node it is bound to, if any.
    pub fn all_pods(&self) -> impl Iterator<Item = (&Pod, Option<&str>)> {
        self.pods.values().map(|p| (&p.pod, p.node.as_deref()))
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// Unbinds a pod: a running one closes its segment and updates job progress; a held gang
    /// member only leaves its node.
    fn stop(&mut self, now: DateTime<Utc>, id: &PodRef, evicted: bool, rec: &mut Record) {
        let Some(p) = self.pods.get_mut(id) else {
            return;
        };
        let Some(node) = p.node.take() else {
            return;
        };
        let since = p.running_since.take();
        self.changes += 1;
        self.placements += 1;
        self.next_generation += 1;
        p.generation = self.next_generation;
        if let Some(n) = self.nodes.get_mut(&node) {
            n.pods.remove(id);
            n.used = n.used.saturating_sub(&p.pod.requests);
            if let Some(since) = since {
                rec.segments.push(Segment {
                    pod: p.record,
                    instance: n.instance,
                    start: since,
                    end: now,
                });
            }
        }
        let Some(since) = since else {
            return;
        };
        rec.gpus_requested
            .add(now, -(rec.pods[p.record].accelerators as f64));
        if evicted {
            rec.pods[p.record].evictions += 1;
            rec.pending.add(now, 1.0);
            if let Some(job) = &mut p.job {
                job.done = if job.checkpointed {
                    job.done + (now - since)
                } else {
                    TimeDelta::zero()
                };
            }
        }
    }

    /// Binds a pod to a node (moving it if it ran elsewhere). Checks what the kube-scheduler
    /// would: the node exists, the pod tolerates its taints, matches its labels and fits.
    pub fn bind(
        &mut self,
        now: DateTime<Utc>,
        id: &PodRef,
        node: &str,
        rec: &mut Record,
    ) -> Result<(), String> {
        let Some(p) = self.pods.get(id) else {
            // Gone at this very instant (finished or scaled down): nothing to bind.
            return Ok(());
        };
        if p.node.as_deref() == Some(node) {
            return Ok(());
        }
        let Some(n) = self.nodes.get(node) else {
            return Err(format!(
                "Bind of {id} to node {node}, which is not registered"
            ));
        };
        if let Err(t) = tolerates_all(&p.pod.tolerations, &n.view.taints) {
            return Err(format!(
                "Bind of {id} to node {node}, whose taint {t} it does not tolerate"
            ));
        }
        if !p.pod.node_terms.is_empty()
            && !p.pod.node_terms.iter().any(|t| t.matches(&n.view.labels))
        {
            return Err(format!(
                "Bind of {id} to node {node}, whose labels its node selector / affinity does not match"
            ));
        }
        let need = n.used + n.overhead + p.pod.requests;
        if let Some(slot) = need.first_excess(&n.view.allocatable) {
            return Err(format!(
                "Bind of {id} to node {node} overcommits resource slot {slot}: {} needed, {} allocatable",
                need.get(slot),
                n.view.allocatable.get(slot)
            ));
        }
        if p.node.is_some() {
            self.stop(now, id, true, rec);
        }
        let p = self.pods.get_mut(id).expect("checked above");
        let n = self.nodes.get_mut(node).expect("checked above");
        n.pods.insert(id.clone());
        n.used += p.pod.requests;
        p.node = Some(node.to_owned());
        self.placements += 1;
        let gang = p.pod.gang.clone();
        // A gang member starts once minMember of its gang are bound, and starts the others.
        let start: Vec<PodRef> = match &gang {
            None => vec![id.clone()],
            Some(g) => {
                let bound: Vec<&PodRef> = self
                    .pods
                    .iter()
                    .filter(|(_, q)| {
                        q.node.is_some() && q.pod.gang.as_ref().is_some_and(|h| h.name == g.name)
                    })
                    .map(|(q, _)| q)
                    .collect();
                if bound.len() >= g.min_member as usize {
                    bound
                        .into_iter()
                        .filter(|q| self.pods[*q].running_since.is_none())
                        .cloned()
                        .collect()
                } else {
                    Vec::new()
                }
            }
        };
        for q in start {
            self.start(now, &q, rec);
        }
        Ok(())
    }

    /// A bound pod starts running.
    fn start(&mut self, now: DateTime<Utc>, id: &PodRef, rec: &mut Record) {
        let Some(p) = self.pods.get_mut(id) else {
            return;
        };
        p.running_since = Some(now);
        let r = &mut rec.pods[p.record];
        r.first_bound.get_or_insert(now);
        rec.pending.add(now, -1.0);
        rec.gpus_requested.add(now, r.accelerators as f64);
        if let Some(job) = p.job {
            self.next_generation += 1;
            p.generation = self.next_generation;
            let remaining = (job.run_time - job.done).max(TimeDelta::zero());
            self.completions
                .push(Reverse((now + remaining, p.generation, id.clone())));
        }
    }

    /// Evicts one pod from its node (it waits to be placed again).
    pub fn evict(&mut self, now: DateTime<Utc>, id: &PodRef, rec: &mut Record) {
        self.stop(now, id, true, rec);
    }

    /// Stops every pod on a node (they wait for the engine to place them again).
    pub fn drain(&mut self, now: DateTime<Utc>, node: &str, rec: &mut Record) {
        let pods: Vec<PodRef> = self
            .nodes
            .get(node)
            .map(|n| n.pods.iter().cloned().collect())
            .unwrap_or_default();
        for id in pods {
            self.stop(now, &id, true, rec);
        }
    }

    /// Deletes a pod (finished or scaled down). Returns whether it existed.
    pub fn delete_pod(
        &mut self,
        now: DateTime<Utc>,
        id: &PodRef,
        completed: bool,
        rec: &mut Record,
    ) -> bool {
        let running = self.is_running(id);
        if self.node_of(id).is_some() {
            self.stop(now, id, false, rec);
        }
        let Some(p) = self.pods.remove(id) else {
            return false;
        };
        self.changes += 1;
        if !running {
            rec.pending.add(now, -1.0);
        }
        let r = &mut rec.pods[p.record];
        r.gone = Some(now);
        r.completed = completed;
        true
    }

    /// The earliest pending job completion.
    pub fn next_completion(&mut self) -> Option<DateTime<Utc>> {
        while let Some(Reverse((at, generation, id))) = self.completions.peek() {
            if self
                .pods
                .get(id)
                .is_some_and(|p| p.generation == *generation)
            {
                return Some(*at);
            }
            self.completions.pop();
        }
        None
    }

    /// Job pods whose run time is done at `now`.
    pub fn due_completions(&mut self, now: DateTime<Utc>) -> Vec<PodRef> {
        let mut due = Vec::new();
        while let Some(at) = self.next_completion() {
            if at > now {
                break;
            }
            if let Some(Reverse((_, _, id))) = self.completions.pop() {
                due.push(id);
            }
        }
        due
    }

    /// A node registers. Startup taints are on it until [`Cluster::node_ready`].
    pub fn add_node(
        &mut self,
        instance: usize,
        view: NodeView,
        startup_taints: Vec<Taint>,
        overhead: Resources,
    ) {
        let name = view.name.clone();
        self.changes += 1;
        self.nodes.insert(
            name,
            Node {
                instance,
                view,
                startup_taints,
                overhead,
                used: Resources::ZERO,
                cordoned: false,
                pods: BTreeSet::new(),
            },
        );
    }

    /// The device plugin reported: allocatable is complete and the startup taints come off.
    /// Returns the node as the engine should now see it.
    pub fn node_ready(&mut self, name: &str, allocatable: Resources) -> Option<NodeView> {
        let n = self.nodes.get_mut(name)?;
        self.changes += 1;
        n.view.allocatable = allocatable;
        let startup = std::mem::take(&mut n.startup_taints);
        n.view.taints.retain(|t| {
            !startup
                .iter()
                .any(|s| s.key == t.key && s.effect == t.effect)
        });
        Some(n.view.clone())
    }

    /// One of `name`'s GPUs failed at `now`: the node agent reports
    /// `AcceleratedHardwareReady=False` and the device plugin withdraws the accelerators
    /// (`allocatable` is what is left). Pods already there keep running (and are lost with the
    /// node); nothing new needing an accelerator fits any more.
    pub fn gpu_failed(
        &mut self,
        now: DateTime<Utc>,
        name: &str,
        allocatable: Resources,
        reason: String,
    ) -> Option<NodeView> {
        self.set_gpu_health(now, name, allocatable, Some(reason))
    }

    /// A node came back from a reboot: its GPUs work again (`healthy`) or still do not.
    pub fn rebooted(
        &mut self,
        now: DateTime<Utc>,
        name: &str,
        allocatable: Resources,
        healthy: bool,
    ) -> Option<NodeView> {
        if !healthy {
            // Still broken: the condition keeps its transition time (node repair replaces it
            // a toleration after the reboot).
            return self.nodes.get(name).map(|n| n.view.clone());
        }
        self.set_gpu_health(now, name, allocatable, None)
    }

    /// Sets a node's allocatable and its `AcceleratedHardwareReady` condition: `False` with
    /// `fault` as its reason, or `True` without one.
    fn set_gpu_health(
        &mut self,
        now: DateTime<Utc>,
        name: &str,
        allocatable: Resources,
        fault: Option<String>,
    ) -> Option<NodeView> {
        let n = self.nodes.get_mut(name)?;
        self.changes += 1;
        n.view.allocatable = allocatable;
        n.view
            .conditions
            .retain(|c| c.kind != "AcceleratedHardwareReady");
        n.view.conditions.push(quartermaster_engine::NodeCondition {
            kind: "AcceleratedHardwareReady".into(),
            status: if fault.is_some() { "False" } else { "True" }.into(),
            since: Some(now),
            reason: fault,
        });
        Some(n.view.clone())
    }

    /// Makes a cordoned node schedulable again, without its soft cordon.
    pub fn uncordon(&mut self, name: &str) {
        if let Some(n) = self.nodes.get_mut(name) {
            self.changes += 1;
            n.cordoned = false;
            n.view
                .taints
                .retain(|t| t.key != "node.kubernetes.io/unschedulable" && t.key != TAINT_RETIRING);
        }
    }

    /// Puts on (`on`) or takes off the soft cordon, the taint
    /// `quartermaster.dev/retiring:PreferNoSchedule`: the scheduler prefers other nodes.
    pub fn soft_cordon(&mut self, name: &str, on: bool) {
        if let Some(n) = self.nodes.get_mut(name) {
            n.view.taints.retain(|t| t.key != TAINT_RETIRING);
            if on {
                n.view.taints.push(Taint {
                    key: TAINT_RETIRING.into(),
                    value: String::new(),
                    effect: TaintEffect::PreferNoSchedule,
                });
            }
        }
    }

    /// The nodes that carry the soft cordon.
    pub fn soft_cordoned(&self) -> impl Iterator<Item = &str> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.view.taints.iter().any(|t| t.key == TAINT_RETIRING))
            .map(|(name, _)| name.as_str())
    }

    /// Cordons a node: nothing new is placed there (the engine already knows).
    pub fn cordon(&mut self, name: &str) {
        if let Some(n) = self.nodes.get_mut(name) {
            n.cordoned = true;
            let unschedulable = Taint {
                key: "node.kubernetes.io/unschedulable".into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            };
            if !n.view.taints.contains(&unschedulable) {
                n.view.taints.push(unschedulable);
            }
        }
    }

    /// The node is gone: its pods stop, it leaves the cluster.
    pub fn remove_node(&mut self, now: DateTime<Utc>, name: &str, rec: &mut Record) {
        self.drain(now, name, rec);
        self.nodes.remove(name);
        self.changes += 1;
    }

    /// A counter that moves whenever room for pods may have appeared.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// How many pods were created so far (a pod's creation index is its record index).
    pub fn created(&self) -> u64 {
        self.created
    }

    /// A counter that moves whenever a pod is bound to a node or taken off one: the pods
    /// [`Cluster::running_pods`] yields changed when this did (pods created pending or deleted
    /// while pending leave it alone).
    pub fn placements(&self) -> u64 {
        self.placements
    }

    /// Every registered node, by name.
    pub fn nodes(&self) -> impl Iterator<Item = (&String, &Node)> {
        self.nodes.iter()
    }

    /// A live pod.
    pub fn pod(&self, id: &PodRef) -> Option<&Pod> {
        self.pods.get(id).map(|p| &p.pod)
    }

    /// Pods bound to no node created as the `from`-th pod or later, oldest first (the
    /// kube-scheduler's queue order for pods of one priority).
    pub fn unbound_pods(&self, from: usize) -> Vec<&Pod> {
        let mut pods: Vec<(usize, &Pod)> = self
            .pods
            .values()
            .filter(|p| p.node.is_none() && p.record >= from)
            .map(|p| (p.record, &p.pod))
            .collect();
        pods.sort_by_key(|(record, _)| *record);
        pods.into_iter().map(|(_, p)| p).collect()
    }

    /// Closes every running segment at the end of the run.
    pub fn finish(&mut self, end: DateTime<Utc>, rec: &mut Record) {
        let running: Vec<PodRef> = self
            .pods
            .iter()
            .filter(|(_, p)| p.node.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        for id in running {
            self.stop(end, &id, false, rec);
        }
    }
}
