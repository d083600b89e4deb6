//! A registered node is initialized once every requested extended resource is allocatable,
//! its type's whole accelerators are advertised, and its startup taints are gone.

use chrono::{DateTime, Utc};
use quartermaster_solver::Resources;
use quartermaster_solver::resources::{ACCELERATORS, PODS};

use crate::engine::Engine;
use crate::events::Action;
use crate::state::{Phase, PodState};

impl Engine {
    pub(crate) fn check_initialized(&mut self, now: DateTime<Utc>, name: &str) {
        let Some(c) = self.claims.get(name) else {
            return;
        };
        if c.phase() == Phase::Initialized {
            return;
        }
        let Some(node) = c.node() else { return };
        let startup = &self.setup.pools[c.pool].spec.startup_taints;
        let startup_gone = !node.taints.iter().any(|t| {
            startup
                .iter()
                .any(|s| s.key == t.key && s.effect == t.effect)
        });
        // Every extended resource the claim's pods request must be allocatable.
        let mut requested = Resources::ZERO;
        for e in self.pods.values() {
            if let PodState::Nominated { claim } | PodState::Bound { claim } = &e.state
                && claim == name
            {
                requested += e.pod.requests;
            }
        }
        let extended_ready =
            (PODS + 1..quartermaster_solver::resources::MAX_RESOURCES).all(|slot| {
                requested.get(slot) == 0 || node.allocatable.get(slot) >= requested.get(slot)
            });
        // And the whole accelerators its type brings, whatever is nominated: a claim with no
        // pods yet (rebuilt after a restart, or emptied) whose GPUs never appeared is not a
        // node to nominate pods to; it waits, and the accelerator budget replaces it.
        let accelerators_ready = ACCELERATORS
            .clone()
            .all(|slot| c.room.get(slot) == 0 || node.allocatable.get(slot) > 0);
        let extended_ready = extended_ready && accelerators_ready;
        if !(startup_gone && extended_ready) {
            return;
        }
        let node_name = node.name.clone();
        // A replacement that comes up is where a move's pods go now: the move is checked again
        // first (pods may have become do-not-disrupt, a PDB may no longer allow it).
        self.revalidate_move(now, name);
        let c = self.claims.get_mut(name).expect("claim exists");
        c.life.initialized(now);
        c.last_change = now;
        self.retire_watch.insert(name.to_owned());
        let mut any = false;
        for (id, e) in &self.pods {
            match &e.state {
                PodState::Nominated { claim } if claim == name => {
                    self.actions.push(Action::Bind {
                        pod: id.clone(),
                        node: node_name.clone(),
                    });
                    any = true;
                }
                PodState::Bound { claim } if claim == name => any = true,
                _ => {}
            }
        }
        if !any {
            let c = self.claims.get_mut(name).expect("claim exists");
            c.empty_since = Some(now);
        }
    }
}
