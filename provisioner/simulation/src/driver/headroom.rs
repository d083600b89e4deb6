//! CapacityBuffers in the simulation: the engine is told each buffer's chunks as the workload
//! they follow scales (as a buffer controller would), and the room the engine holds for them
//! is recorded per instance, so cost reports count it as headroom (the workload
//! `CapacityBuffer/<name>` in `cost.csv`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quartermaster_cluster::capacity_buffer::{MAX_CHUNKS, chunk_count};
use quartermaster_engine::{Buffer, Event};
use quartermaster_solver::PodRef;

use super::Driver;
use crate::record::HeadroomSegment;

/// What the driver remembers about buffers between instants.
#[derive(Debug, Clone, Default)]
pub(super) struct BufferState {
    /// The buffers last told to the engine (`None`: never told, or told to an engine that is
    /// gone).
    pub told: Option<Vec<Buffer>>,
    /// Placeholders holding room on a billed instance now: (buffer, instance, since).
    pub open: BTreeMap<PodRef, (String, usize, DateTime<Utc>)>,
}

impl Driver<'_> {
    /// Tells the engine the buffers as they are now (only when they changed).
    pub(super) fn tell_buffers(&mut self) {
        if self.scenario.buffers.is_empty() {
            return;
        }
        let buffers: Vec<Buffer> = self
            .scenario
            .buffers
            .iter()
            .zip(&self.world.buffer_chunks)
            .map(|(b, chunk)| {
                let replicas = self
                    .deployments
                    .get(&b.workload)
                    .map_or(0, |d| u32::try_from(d.pods.len()).unwrap_or(u32::MAX));
                let count = chunk_count(
                    &b.spec,
                    &chunk.requests,
                    &self.world.setup.resources,
                    Some(replicas),
                    &b.name,
                )
                .unwrap_or(0)
                .min(MAX_CHUNKS);
                Buffer {
                    key: format!("{}/{}", b.namespace, b.name),
                    chunk: chunk.clone(),
                    replicas: count,
                }
            })
            .collect();
        if self.buffers.told.as_ref() != Some(&buffers) {
            self.buffers.told = Some(buffers.clone());
            self.engine.handle(self.now, Event::BuffersChanged(buffers));
        }
    }

    /// The placeholder pods of the buffers as last told (hindsight counts their room as part
    /// of what the fleet must hold).
    pub(super) fn buffer_placeholders(&self) -> Vec<quartermaster_solver::Pod> {
        let mut out = Vec::new();
        for b in self.buffers.told.iter().flatten() {
            for i in 0..b.replicas {
                let mut pod = b.chunk.clone();
                pod.id = PodRef::new(&b.chunk.id.namespace, format!("{}-{i}", b.chunk.id.name));
                out.push(pod);
            }
        }
        out
    }

    /// Records where the engine holds buffer room now: a placeholder on a claim whose instance
    /// is billed holds a share of it until it moves or goes.
    pub(super) fn record_headroom(&mut self) {
        if self.scenario.buffers.is_empty() {
            return;
        }
        let mut now_held: BTreeMap<PodRef, (String, usize)> = BTreeMap::new();
        for h in self.engine.headroom() {
            let Some(instance) = h.claim.and_then(|c| self.rec.live_instance_of_claim(c)) else {
                continue;
            };
            now_held.insert(h.pod.id.clone(), (h.buffer.to_owned(), instance));
        }
        let now = self.now;
        let open = std::mem::take(&mut self.buffers.open);
        for (id, (buffer, instance, since)) in open {
            match now_held.get(&id) {
                Some((_, i)) if *i == instance => {
                    now_held.remove(&id);
                    self.buffers.open.insert(id, (buffer, instance, since));
                }
                _ => self.close_headroom_segment(id, buffer, instance, since, now),
            }
        }
        for (id, (buffer, instance)) in now_held {
            self.buffers.open.insert(id, (buffer, instance, now));
        }
    }

    /// Closes every open headroom segment at `end`.
    pub(super) fn close_headroom(&mut self, end: DateTime<Utc>) {
        for (id, (buffer, instance, since)) in std::mem::take(&mut self.buffers.open) {
            self.close_headroom_segment(id, buffer, instance, since, end);
        }
    }

    fn close_headroom_segment(
        &mut self,
        pod: PodRef,
        buffer: String,
        instance: usize,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) {
        if end <= start {
            return;
        }
        let requests = self
            .world
            .buffer_chunks
            .iter()
            .zip(&self.scenario.buffers)
            .find(|(_, b)| format!("{}/{}", b.namespace, b.name) == buffer)
            .map(|(c, _)| c.requests)
            .unwrap_or_default();
        self.rec.headroom.push(HeadroomSegment {
            buffer,
            pod,
            requests,
            instance,
            start,
            end,
        });
    }
}
