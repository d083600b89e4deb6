//! One simulated instance: its whole future, fixed at launch, and what of it has been told.
//!
//! Every moment of an instance's life is decided when the launch is accepted (running,
//! registered, accelerators ready, interruption notice, reclaim); state at any time is a pure
//! function of those moments and of when (if ever) it was deleted. An event "happens" only if
//! the instance is still there: not deleted before it (what is due at the very moment of a
//! delete call happened first: the caller acted on the world as of that moment) and not
//! reclaimed at or before it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quartermaster_cloud::{Instance, InstanceState};
use quartermaster_pricing::{CapacityType, Cloud};

use crate::events::SimNode;
use crate::schedule::Kind;

/// The moments of an instance's life.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Timeline {
    /// The launch call was accepted.
    pub(crate) launched_at: DateTime<Utc>,
    /// Billing starts: the accepted launch, or for flex-start the end of the queue wait
    /// (Compute Engine bills a flex-start VM from when it runs, not while it is queued).
    pub(crate) billed_from: DateTime<Utc>,
    /// Pending → Running.
    pub(crate) running_at: DateTime<Utc>,
    /// The Node registers.
    pub(crate) registered_at: DateTime<Utc>,
    /// The device plugin reports; `None`: never.
    pub(crate) accelerators_at: Option<DateTime<Utc>>,
    /// A GPU fails (`gpuFaultsPerHour`); `None`: never.
    pub(crate) gpu_fault_at: Option<DateTime<Utc>>,
    /// Whether that fault is one a reboot clears (`gpuFaultsResettable`).
    pub(crate) gpu_fault_resettable: bool,
    /// The interruption notice (spot only); `None`: never.
    pub(crate) notice_at: Option<DateTime<Utc>>,
    /// The cloud reclaims the instance, a notice period after `notice_at`.
    pub(crate) reclaim_at: Option<DateTime<Utc>>,
    /// Quartermaster deleted it.
    pub(crate) deleted_at: Option<DateTime<Utc>>,
}

impl Timeline {
    /// When the instance is gone, if it is or will be.
    pub(crate) fn gone_at(&self) -> Option<DateTime<Utc>> {
        match (self.deleted_at, self.reclaim_at) {
            (Some(d), Some(r)) => Some(d.min(r)),
            (d, r) => d.or(r),
        }
    }

    /// Whether a kubelet-side moment (running, registered, accelerators) due at `t` happens.
    pub(crate) fn happens(&self, t: DateTime<Utc>) -> bool {
        self.deleted_at.is_none_or(|d| t <= d) && self.reclaim_at.is_none_or(|r| t < r)
    }

    /// When the interruption notice is given, unless the instance was deleted first.
    pub(crate) fn noticed_at(&self) -> Option<DateTime<Utc>> {
        self.notice_at
            .filter(|n| self.deleted_at.is_none_or(|d| *n <= d))
    }

    /// When the cloud reclaims the instance, unless it was deleted first.
    pub(crate) fn reclaimed_at(&self) -> Option<DateTime<Utc>> {
        self.reclaim_at
            .filter(|r| self.deleted_at.is_none_or(|d| *r <= d))
    }

    /// Whether the instance is alive (pending or running) at `now`; it then counts against
    /// capacity.
    pub(crate) fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.gone_at().is_none_or(|gone| now < gone)
    }

    /// The state at `now`.
    pub(crate) fn state(&self, now: DateTime<Utc>) -> InstanceState {
        if !self.is_live(now) {
            InstanceState::Terminated
        } else if now >= self.running_at {
            InstanceState::Running
        } else {
            InstanceState::Pending
        }
    }

    /// Whether the moment `(t, kind)` of this instance occurs (see [`Timeline::happens`]).
    pub(crate) fn occurs(&self, t: DateTime<Utc>, kind: Kind) -> bool {
        match kind {
            Kind::Running
            | Kind::Registered
            | Kind::Accelerators
            | Kind::GpuFault
            | Kind::Rebooted => self.happens(t),
            Kind::Notice => self.noticed_at() == Some(t),
            Kind::Reclaim => self.reclaimed_at() == Some(t),
            Kind::OutageEdge => false,
        }
    }

    /// Calls off an interruption notice not given by `now`, with the reclaim that would have
    /// followed it (the world held still: [`crate::SimCloud::hold_interruptions`]).
    pub(crate) fn call_off_notice(&mut self, now: DateTime<Utc>) {
        if self.notice_at.is_some_and(|n| n > now) {
            self.notice_at = None;
            self.reclaim_at = None;
        }
    }

    /// Every moment of the instance's life, as known at launch.
    pub(crate) fn moments(&self) -> impl Iterator<Item = (DateTime<Utc>, Kind)> {
        [
            Some((self.running_at, Kind::Running)),
            Some((self.registered_at, Kind::Registered)),
            self.accelerators_at.map(|t| (t, Kind::Accelerators)),
            self.gpu_fault_at.map(|t| (t, Kind::GpuFault)),
            self.notice_at.map(|t| (t, Kind::Notice)),
            self.reclaim_at.map(|t| (t, Kind::Reclaim)),
        ]
        .into_iter()
        .flatten()
    }
}

/// A launched instance.
#[derive(Debug, Clone)]
pub(crate) struct SimInstance {
    /// `sim:///<zone>/<id>`.
    pub(crate) provider_id: String,
    pub(crate) claim_name: String,
    pub(crate) instance_type: String,
    pub(crate) zone: String,
    pub(crate) capacity_type: CapacityType,
    pub(crate) price_per_hour: f64,
    pub(crate) tags: BTreeMap<String, String>,
    /// The Node as it registers (without accelerators).
    pub(crate) node: SimNode,
    /// The full allocatable, reported when the device plugin is ready.
    pub(crate) full_allocatable: BTreeMap<String, u64>,
    pub(crate) timeline: Timeline,
    /// Indices of the `SimConfig::capacity` limits it counts against.
    pub(crate) limits: Vec<usize>,
    /// Index of the `SimConfig::reservations` entry it was launched into.
    pub(crate) reservation: Option<usize>,
}

impl SimInstance {
    /// The instance as the cloud reports it at `now`.
    pub(crate) fn view(&self, now: DateTime<Utc>) -> Instance {
        Instance {
            provider_id: self.provider_id.clone(),
            claim_name: self.claim_name.clone(),
            instance_type: self.instance_type.clone(),
            zone: self.zone.clone(),
            capacity_type: self.capacity_type,
            price_per_hour: self.price_per_hour,
            state: self.timeline.state(now),
            launched_at: self.timeline.launched_at,
            tags: self.tags.clone(),
        }
    }
}

/// The Node name of the `seq`-th instance (from 0), as `cloud` would name it.
///
/// * AWS: the private DNS name, `ip-10-0-0-4.ec2.internal` in us-east-1 and
///   `ip-10-0-0-4.<region>.compute.internal` elsewhere; addresses are handed out in order from
///   10.0.0.4 (the first four addresses of an AWS subnet are reserved), skipping .255.
/// * GCP: the instance name, which the simulated cloud takes from the NodeClaim.
/// * Azure: `aks-<NodeClaim name>`, as Karpenter's Azure provider names its VMs.
pub(crate) fn node_name(cloud: Cloud, region: &str, claim_name: &str, seq: u64) -> String {
    match cloud {
        Cloud::Aws => {
            // 251 host addresses (.4 ..= .254) per /24.
            let host = 4 + seq % 251;
            let third = (seq / 251) % 256;
            let second = (seq / (251 * 256)) % 256;
            let ip = format!("ip-10-{second}-{third}-{host}");
            if region == "us-east-1" {
                format!("{ip}.ec2.internal")
            } else {
                format!("{ip}.{region}.compute.internal")
            }
        }
        Cloud::Gcp => claim_name.to_owned(),
        Cloud::Azure => format!("aks-{claim_name}"),
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(s, 0).unwrap()
    }

    #[test]
    fn aws_names_are_unique_private_dns_names() {
        assert_eq!(
            node_name(Cloud::Aws, "us-east-1", "c", 0),
            "ip-10-0-0-4.ec2.internal"
        );
        assert_eq!(
            node_name(Cloud::Aws, "us-east-1", "c", 250),
            "ip-10-0-0-254.ec2.internal"
        );
        assert_eq!(
            node_name(Cloud::Aws, "us-east-1", "c", 251),
            "ip-10-0-1-4.ec2.internal"
        );
        assert_eq!(
            node_name(Cloud::Aws, "us-west-2", "c", 3),
            "ip-10-0-0-7.us-west-2.compute.internal"
        );
        let names: std::collections::BTreeSet<_> = (0..200_000)
            .map(|s| node_name(Cloud::Aws, "us-east-1", "c", s))
            .collect();
        assert_eq!(names.len(), 200_000);
        assert_eq!(node_name(Cloud::Gcp, "us-central1", "gpu-x1", 0), "gpu-x1");
        assert_eq!(node_name(Cloud::Azure, "eastus", "gpu-x1", 0), "aks-gpu-x1");
    }

    #[test]
    fn deletion_cuts_the_timeline() {
        let mut t = Timeline {
            launched_at: at(0),
            billed_from: at(0),
            running_at: at(40),
            registered_at: at(70),
            accelerators_at: Some(at(115)),
            gpu_fault_at: None,
            gpu_fault_resettable: false,
            notice_at: Some(at(100)),
            reclaim_at: Some(at(220)),
            deleted_at: None,
        };
        assert_eq!(t.state(at(10)), InstanceState::Pending);
        assert_eq!(t.state(at(40)), InstanceState::Running);
        assert_eq!(t.state(at(220)), InstanceState::Terminated);
        assert_eq!(t.reclaimed_at(), Some(at(220)));
        assert_eq!(t.moments().count(), 5);
        assert!(t.moments().all(|(at, kind)| t.occurs(at, kind)));
        t.deleted_at = Some(at(110));
        assert!(!t.happens(at(115)));
        assert!(t.happens(at(110)), "due at the delete: happened first");
        assert_eq!(t.noticed_at(), Some(at(100)));
        assert_eq!(t.reclaimed_at(), None);
        assert_eq!(t.state(at(110)), InstanceState::Terminated);
        assert!(t.is_live(at(110) - TimeDelta::seconds(1)));
        let occurring: Vec<_> = t.moments().filter(|(at, k)| t.occurs(*at, *k)).collect();
        assert_eq!(
            occurring,
            [
                (at(40), Kind::Running),
                (at(70), Kind::Registered),
                (at(100), Kind::Notice)
            ]
        );
        t.deleted_at = Some(at(100));
        assert_eq!(t.noticed_at(), Some(at(100)));
        t.deleted_at = Some(at(99));
        assert_eq!(t.noticed_at(), None);
        t.deleted_at = None;
        assert!(
            !t.happens(at(220)),
            "nothing happens on a reclaimed instance"
        );
    }
}
