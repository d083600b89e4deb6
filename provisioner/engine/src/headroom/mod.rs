//! Headroom: the room CapacityBuffers keep warm, as placeholder pods the engine places but no
//! one ever binds.
//!
//! A placeholder is placed only after every real pod: the provisioning solve does not see
//! placeholders at all, so a real pod takes buffer room first (the kube-scheduler does the same
//! in a cluster: it sees free room, nothing else). Then the placeholders that no longer fit
//! next to the real pods of their claim let go of it, and one more solve places every loose
//! placeholder in the room that is left, buying nodes for the rest: the buffer refills behind
//! the pods that used it. Consolidation and empty-node removal see placeholders as residents,
//! so the room a buffer holds is never taken away as waste; consolidation may still move it to
//! a cheaper shape.
//!
//! A plain index: the engine feeds it buffers ([`Headroom::set`]) and placements; the solving
//! is the engine's.

mod keep;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use quartermaster_solver::{Pod, PodRef};

/// A buffer as the engine keeps it: one chunk's pod and how many copies.
#[derive(Debug, Clone, PartialEq)]
pub struct Buffer {
    /// `namespace/name` of the CapacityBuffer.
    pub key: String,
    /// One chunk (its id names the buffer; copies are numbered `-0`, `-1`, …).
    pub chunk: Pod,
    /// Copies to keep.
    pub replicas: u32,
}

impl Buffer {
    /// The placeholder pods of this buffer.
    fn placeholders(&self) -> impl Iterator<Item = Pod> + '_ {
        (0..self.replicas).map(|i| {
            let mut pod = self.chunk.clone();
            pod.id = PodRef::new(
                &self.chunk.id.namespace,
                format!("{}-{i}", self.chunk.id.name),
            );
            pod
        })
    }
}

/// One placeholder and the claim it holds room on.
#[derive(Debug, Clone)]
pub(crate) struct Placeholder {
    /// The pod it stands for.
    pub pod: Arc<Pod>,
    /// The buffer (`namespace/name`).
    pub buffer: String,
    /// The claim whose room it holds, once placed.
    pub claim: Option<String>,
}

/// A placeholder as reports see it.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadroomView<'a> {
    /// The buffer (`namespace/name`).
    pub buffer: &'a str,
    /// The placeholder pod.
    pub pod: &'a Pod,
    /// The NodeClaim whose room it holds, if placed.
    pub claim: Option<&'a str>,
}

/// Every placeholder, and whether they must be solved again.
#[derive(Debug, Clone, Default)]
pub(crate) struct Headroom {
    pub placeholders: BTreeMap<PodRef, Placeholder>,
    /// Some placeholder lost its place (or the buffers changed): solve them.
    pub dirty: bool,
    /// When placeholders the last solve could not place are tried again.
    pub retry_at: Option<DateTime<Utc>>,
}

impl Headroom {
    /// Replaces the buffers. Placeholders that stay (same id, same pod) keep their place.
    /// Returns whether anything changed.
    pub fn set(&mut self, buffers: &[Buffer]) -> bool {
        let mut next = BTreeMap::new();
        for b in buffers {
            for pod in b.placeholders() {
                let claim = self
                    .placeholders
                    .get(&pod.id)
                    .filter(|p| *p.pod == pod)
                    .and_then(|p| p.claim.clone());
                next.insert(
                    pod.id.clone(),
                    Placeholder {
                        pod: Arc::new(pod),
                        buffer: b.key.clone(),
                        claim,
                    },
                );
            }
        }
        let changed = next.len() != self.placeholders.len()
            || next.iter().any(|(id, p)| {
                self.placeholders
                    .get(id)
                    .is_none_or(|old| old.claim != p.claim || old.pod != p.pod)
            });
        self.placeholders = next;
        if changed {
            self.dirty = true;
            self.retry_at = None;
        }
        changed
    }

    /// No buffer at all (every engine path skips headroom work then).
    pub fn is_empty(&self) -> bool {
        self.placeholders.is_empty()
    }

    /// Placed placeholders by claim.
    pub fn by_claim(&self) -> BTreeMap<&str, Vec<&Arc<Pod>>> {
        let mut out: BTreeMap<&str, Vec<&Arc<Pod>>> = BTreeMap::new();
        for p in self.placeholders.values() {
            if let Some(c) = &p.claim {
                out.entry(c.as_str()).or_default().push(&p.pod);
            }
        }
        out
    }

    /// Placeholders with no place.
    pub fn loose(&self) -> impl Iterator<Item = &Placeholder> {
        self.placeholders.values().filter(|p| p.claim.is_none())
    }

    /// Whether loose placeholders should be solved at `now`.
    pub fn due(&self, now: DateTime<Utc>) -> bool {
        self.dirty || (self.loose().next().is_some() && self.retry_at.is_some_and(|t| t <= now))
    }

    /// Lets go of the places of `ids` (they no longer fit, or their claim is going).
    pub fn release(&mut self, ids: &[PodRef]) {
        for id in ids {
            if let Some(p) = self.placeholders.get_mut(id) {
                p.claim = None;
                self.dirty = true;
            }
        }
    }

    /// Places `pod` on `claim`; false when `pod` is no placeholder.
    pub fn place(&mut self, pod: &PodRef, claim: &str) -> bool {
        match self.placeholders.get_mut(pod) {
            Some(p) => {
                p.claim = Some(claim.to_owned());
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use quartermaster_solver::Resources;

    use super::*;

    fn buffer(replicas: u32, cpu: i64) -> Buffer {
        Buffer {
            key: "ml/warm".into(),
            chunk: Pod::new(
                PodRef::new("ml", "capacitybuffer-warm"),
                Resources::single(0, cpu),
            ),
            replicas,
        }
    }

    #[test]
    fn placeholders_keep_their_place_while_their_buffer_is_unchanged() {
        let mut h = Headroom::default();
        assert!(h.set(&[buffer(2, 1000)]));
        let id = PodRef::new("ml", "capacitybuffer-warm-1");
        assert!(h.place(&id, "gpu-00001"));
        h.dirty = false;
        assert!(!h.set(&[buffer(2, 1000)]), "same buffers: nothing to solve");
        assert_eq!(h.placeholders[&id].claim.as_deref(), Some("gpu-00001"));
        assert!(h.by_claim().contains_key("gpu-00001"));
        // Growing keeps the placed one and adds a loose one.
        assert!(h.set(&[buffer(3, 1000)]));
        assert_eq!(h.placeholders[&id].claim.as_deref(), Some("gpu-00001"));
        assert_eq!(h.loose().count(), 2);
        // A new shape is a new pod: placed again.
        assert!(h.set(&[buffer(3, 2000)]));
        assert!(!h.by_claim().contains_key("gpu-00001"));
        assert!(h.set(&[]));
        assert!(h.is_empty());
    }
}
