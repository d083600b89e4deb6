//! Gang launches: the NodeClaims the solver planned for one gang go out as a group, stay in the
//! gang's zone, and are all launched before a deadline or all deleted.
//!
//! The solver already places a gang whole, in one zone, or not at all. What can still go wrong
//! is the cloud: one member's offering runs out of capacity mid-launch. A member first tries its
//! fallback offerings in the gang's zone (the others are dropped from its list: EFA and
//! InfiniBand only reach within one zone). When a member is given up (no offering left) or the
//! gang is not launched whole by `gang_launch_timeout`, every member still there is deleted
//! ([`DeleteReason::GangRollback`]) instead of idling while it waits for the missing one. The
//! failed offering is already marked unavailable, and the gang's pods wait again, so the next
//! solve places the whole gang elsewhere (another zone or type).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::engine::Engine;
use crate::events::DeleteReason;
use crate::state::{GangLaunch, GangMember, Phase};

/// Node label naming the gang a node was launched for (the gang's `namespace/name`, as a label
/// value: `namespace.name`).
pub const GANG_LABEL: &str = "quartermaster.dev/gang";
/// Node label naming the placement group of a gang's nodes: one per gang and zone, so
/// topology-aware schedulers (and clouds' cluster placement) can keep the gang together.
pub const PLACEMENT_GROUP_LABEL: &str = "quartermaster.dev/placement-group";

/// The longest label value Kubernetes accepts.
const MAX_LABEL_VALUE: usize = 63;

/// `s` as a label value: `/` becomes `.`, other characters a label value cannot hold become
/// `-`, ends are alphanumeric, and a value longer than 63 characters keeps its first 54 and a
/// hash of the whole (names stay distinct).
pub(crate) fn label_value(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| match c {
            '/' => '.',
            c if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') => c,
            _ => '-',
        })
        .collect();
    let mut v = if mapped.len() > MAX_LABEL_VALUE {
        // FNV-1a: stable across runs and platforms.
        let hash = s.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("{}-{:08x}", &mapped[..54], hash as u32)
    } else {
        mapped
    };
    while v.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        v.pop();
    }
    v.trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// The labels of a gang's nodes in `zone`.
pub(crate) fn gang_labels(gang: &str, zone: &str) -> BTreeMap<String, String> {
    [
        (GANG_LABEL.to_owned(), label_value(gang)),
        (
            PLACEMENT_GROUP_LABEL.to_owned(),
            label_value(&format!("{gang}-{zone}")),
        ),
    ]
    .into()
}

impl Engine {
    /// Makes gang launches of the claims just `created` whose pods include gang members: each
    /// claim joins the launch of the gang of its first member (a gang whose launch is still in
    /// progress gets the new claims too), keeps only the fallback offerings in the gang's zone
    /// and carries the gang's labels. Called before the claims are launched.
    pub(crate) fn group_gangs(&mut self, now: DateTime<Utc>, created: &[(String, Option<String>)]) {
        for (name, gang) in created {
            let Some(gang) = gang else { continue };
            let Some(zone) = self.claims.get(name).map(|c| c.offering.zone.clone()) else {
                continue;
            };
            if !self.gangs.contains_key(gang) {
                self.stats.gang_launches += 1;
            }
            let deadline = now + self.config.gang_launch_timeout;
            let launch = self.gangs.entry(gang.clone()).or_insert(GangLaunch {
                zone,
                claims: Vec::new(),
                deadline,
            });
            launch.claims.push(name.clone());
            let zone = launch.zone.clone();
            if let Some(c) = self.claims.get_mut(name) {
                c.alternatives.retain(|o| o.zone == zone);
                c.gang = Some(GangMember {
                    gang: gang.clone(),
                    labels: gang_labels(gang, &zone),
                });
            }
        }
    }

    /// Puts a claim adopted after a restart back into its gang's launch (keyed by the gang's
    /// label value), with the deadline it had: `created_at` + `gang_launch_timeout`. A gang
    /// whose members are all launched completes at the next tick; one that was half launched
    /// when the controller stopped is completed or rolled back as if nothing had happened.
    pub(crate) fn rejoin_gang(&mut self, created_at: DateTime<Utc>, name: &str, gang: &str) {
        let Some(zone) = self.claims.get(name).map(|c| c.offering.zone.clone()) else {
            return;
        };
        let deadline = created_at + self.config.gang_launch_timeout;
        let launch = self.gangs.entry(gang.to_owned()).or_insert(GangLaunch {
            zone: zone.clone(),
            claims: Vec::new(),
            deadline,
        });
        launch.deadline = launch.deadline.min(deadline);
        if !launch.claims.iter().any(|c| c == name) {
            launch.claims.push(name.to_owned());
        }
        if let Some(c) = self.claims.get_mut(name) {
            c.alternatives.retain(|o| o.zone == zone);
            let labels = gang_labels(gang, &zone);
            c.facts.labels_mut().extend(labels.clone());
            c.gang = Some(GangMember {
                gang: gang.to_owned(),
                labels,
            });
        }
    }

    /// Gang launches that are complete (every member launched) are done; those with a member
    /// given up or deleted, or past their deadline, are rolled back.
    pub(crate) fn gang_progress(&mut self, now: DateTime<Utc>) {
        let mut done = Vec::new();
        let mut failed = Vec::new();
        for (gang, launch) in &self.gangs {
            let members: Vec<_> = launch.claims.iter().map(|c| self.claims.get(c)).collect();
            let broken = members.iter().any(|m| m.is_none_or(|c| c.deleting));
            let launched = members
                .iter()
                .all(|m| m.is_some_and(|c| c.phase() >= Phase::Launched));
            if broken || (!launched && now >= launch.deadline) {
                failed.push(gang.clone());
            } else if launched {
                done.push(gang.clone());
            }
        }
        for gang in done {
            self.gangs.remove(&gang);
        }
        for gang in failed {
            self.roll_back_gang(now, &gang);
        }
    }

    /// Deletes every member of a gang launch still there; their pods wait again.
    fn roll_back_gang(&mut self, now: DateTime<Utc>, gang: &str) {
        let Some(launch) = self.gangs.remove(gang) else {
            return;
        };
        self.stats.gang_rollbacks += 1;
        for name in &launch.claims {
            if self.claims.get(name).is_some_and(|c| !c.deleting) {
                self.stats.gang_claims_rolled_back += 1;
                self.delete(now, name, DeleteReason::GangRollback);
            }
        }
    }

    /// Deadlines of the gang launches in progress.
    pub(crate) fn gang_deadlines(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        self.gangs.values().map(|g| g.deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gang_names_become_valid_label_values() {
        assert_eq!(label_value("default/train-0"), "default.train-0");
        assert_eq!(label_value("ns/a b:c"), "ns.a-b-c");
        assert_eq!(label_value("/x/"), "x");
        let long = format!("ns/{}", "a".repeat(100));
        let v = label_value(&long);
        assert_eq!(v.len(), 63);
        assert_ne!(v, label_value(&format!("ns/{}", "a".repeat(101))));
        let labels = gang_labels("default/train", "us-east-1a");
        assert_eq!(labels[GANG_LABEL], "default.train");
        assert_eq!(labels[PLACEMENT_GROUP_LABEL], "default.train-us-east-1a");
    }
}
