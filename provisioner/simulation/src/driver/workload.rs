//! The workload as the trace drives it: jobs submitted, Deployments scaled, pods created
//! (in the cluster and told to the engine).

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_engine::Event;
use quartermaster_solver::{Gang, PodRef};

use crate::cluster::JobRun;
use crate::scenario::WorkloadKind;
use crate::workload::TraceEvent;

use super::Driver;

impl Driver<'_> {
    pub(super) fn feed_workload(&mut self) -> bool {
        if self.frozen {
            return false;
        }
        let mut busy = false;
        while let Some((t, e)) = self.trace.events.get(self.cursor).cloned() {
            if t > self.now {
                break;
            }
            self.cursor += 1;
            busy = true;
            match e {
                TraceEvent::JobSubmitted {
                    workload,
                    job,
                    run_time,
                } => self.submit_job(workload, job, run_time),
                TraceEvent::Scaled { workload, replicas } => self.scale(workload, replicas),
            }
        }
        for id in self.cluster.due_completions(self.now) {
            busy = true;
            self.cluster.delete_pod(self.now, &id, true, &mut self.rec);
            self.forget(&id);
            self.engine.handle(self.now, Event::PodGone(id));
        }
        busy
    }

    pub(super) fn create(
        &mut self,
        workload: usize,
        name: String,
        job: Option<JobRun>,
        gang: Option<Gang>,
    ) {
        let w = &self.scenario.workloads[workload];
        let mut pod = self.world.templates[workload].clone();
        pod.id = PodRef::new(&w.namespace, name);
        pod.gang = gang;
        self.cluster
            .create_pod(self.now, pod.clone(), workload, job, &mut self.rec);
        // Without gang awareness the provisioner sees each pod on its own; the cluster still
        // starts the gang's pods only together.
        if !self.scenario.gang_aware {
            pod.gang = None;
        }
        self.workload_of.insert(pod.id.clone(), workload);
        if w.max_unavailable.is_some() {
            self.guarded
                .entry(workload)
                .or_default()
                .insert(pod.id.clone());
        }
        let id = pod.id.clone();
        self.engine.handle(self.now, Event::PodPending(pod));
        self.tell_annotations(self.now, id);
    }

    /// Tells the engine the disruption annotations of `pod`'s workload template (what the
    /// controller reads from the pod: do-not-disrupt, checkpointed).
    pub(super) fn tell_annotations(&mut self, now: DateTime<Utc>, pod: PodRef) {
        let Some(w) = self
            .workload_of
            .get(&pod)
            .map(|w| &self.scenario.workloads[*w])
        else {
            return;
        };
        let (protected, checkpointed) = (w.do_not_disrupt(), w.annotated_checkpointed());
        if checkpointed {
            let pod = pod.clone();
            self.engine
                .handle(now, Event::PodCheckpointed { pod, on: true });
        }
        if protected {
            self.engine
                .handle(now, Event::PodDoNotDisrupt { pod, on: true });
        }
    }

    fn submit_job(&mut self, workload: usize, job: u64, run_time: TimeDelta) {
        let w = &self.scenario.workloads[workload];
        let WorkloadKind::Job(spec) = &w.kind else {
            return;
        };
        let (parallelism, checkpointed) = (spec.parallelism, spec.checkpointed);
        let base = format!("{}-{job:05}", w.name);
        let gang = spec.gang.then(|| Gang {
            name: format!("{}/{base}", w.namespace),
            min_member: parallelism,
        });
        for i in 0..parallelism {
            let name = if parallelism == 1 {
                base.clone()
            } else {
                format!("{base}-{i}")
            };
            let run = JobRun {
                run_time,
                done: TimeDelta::zero(),
                checkpointed,
            };
            self.create(workload, name, Some(run), gang.clone());
        }
    }

    fn scale(&mut self, workload: usize, replicas: u32) {
        let replicas = replicas as usize;
        let name = self.scenario.workloads[workload].name.clone();
        let current = self.deployments.entry(workload).or_default().pods.len();
        if replicas > current {
            for _ in current..replicas {
                let d = self.deployments.entry(workload).or_default();
                let pod_name = format!("{name}-{:05}", d.next);
                d.next += 1;
                let ns = &self.scenario.workloads[workload].namespace;
                d.pods.push(PodRef::new(ns, &pod_name));
                self.create(workload, pod_name, None, None);
            }
            return;
        }
        // Scale down as the ReplicaSet controller does: pending pods first, then the newest.
        let d = self.deployments.entry(workload).or_default();
        let mut victims: Vec<PodRef> = Vec::new();
        let excess = current - replicas;
        for id in d.pods.iter().rev() {
            if victims.len() < excess && !self.cluster.is_running(id) {
                victims.push(id.clone());
            }
        }
        for id in d.pods.iter().rev() {
            if victims.len() < excess && !victims.contains(id) {
                victims.push(id.clone());
            }
        }
        d.pods.retain(|id| !victims.contains(id));
        for id in victims {
            self.cluster.delete_pod(self.now, &id, false, &mut self.rec);
            self.forget(&id);
            self.engine.handle(self.now, Event::PodGone(id));
        }
    }
}
