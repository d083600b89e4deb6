//! What the kubelet does for one pod bound to a kwok Node, and the statuses it reports.
//!
//! A pod is started when it is bound (`Pending` → `Running`, every container running and
//! ready), finished when its `kwok.quartermaster.dev/run-for` time is up (`Succeeded`, every
//! container exited 0), and its deletion is completed when it is deleted (no containers to
//! stop).

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    Pod, PodCondition, PodIP, PodStatus,
};
use quartermaster_policies::duration::parse_duration;

use crate::keys;
use crate::time::{from_time, to_time};

/// The next thing the kubelet does for a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PodStep {
    /// Complete its deletion (delete with grace period 0).
    Delete,
    /// Report it running.
    Start,
    /// Report it succeeded; it started at the given time.
    Finish(DateTime<Utc>),
}

/// What to do for `pod` at `now`, if anything; an error names a bad `run-for` annotation
/// (the pod then runs until deleted).
pub(crate) fn next_step(pod: &Pod, now: DateTime<Utc>) -> Result<Option<PodStep>, String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(Some(PodStep::Delete));
    }
    let status = pod.status.as_ref();
    match status.and_then(|s| s.phase.as_deref()) {
        None | Some("Pending") => Ok(Some(PodStep::Start)),
        Some("Running") => {
            let Some(run_for) = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys::ANNOTATION_RUN_FOR))
            else {
                return Ok(None);
            };
            let run_for = parse_duration(run_for)
                .map_err(|e| format!("annotation {}: {e}", keys::ANNOTATION_RUN_FOR))?;
            let Some(started) = status
                .and_then(|s| s.start_time.as_ref())
                .or(pod.metadata.creation_timestamp.as_ref())
                .map(from_time)
            else {
                return Ok(None);
            };
            let ends = TimeDelta::from_std(run_for)
                .ok()
                .and_then(|d| started.checked_add_signed(d));
            Ok(ends
                .is_some_and(|end| end <= now)
                .then_some(PodStep::Finish(started)))
        }
        Some(_) => Ok(None),
    }
}

fn condition(kind: &str, status: bool, reason: Option<&str>, now: DateTime<Utc>) -> PodCondition {
    PodCondition {
        type_: kind.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.map(str::to_owned),
        last_transition_time: Some(to_time(now)),
        ..PodCondition::default()
    }
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

fn running(c: &Container, since: DateTime<Utc>) -> ContainerStatus {
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        ready: true,
        started: Some(true),
        state: Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(to_time(since)),
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

fn completed(
    c: &Container,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    ready: bool,
) -> ContainerStatus {
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        ready,
        started: Some(false),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 0,
                reason: Some("Completed".to_owned()),
                started_at: Some(to_time(from)),
                finished_at: Some(to_time(to)),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

/// A made-up pod IP in 198.18.0.0/15 (the benchmarking range of RFC 2544, which no real
/// network uses), the same for the same pod every time.
pub(crate) fn fake_pod_ip(pod: &Pod) -> String {
    let key = pod
        .metadata
        .uid
        .clone()
        .unwrap_or_else(|| format!("{:?}/{:?}", pod.metadata.namespace, pod.metadata.name));
    // FNV-1a: small, stable across platforms and releases.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let host = 1 + (hash % 131_070) as u32; // skip .0.0 and the last address
    let ip = (198u32 << 24) | (18 << 16) | host;
    std::net::Ipv4Addr::from(ip).to_string()
}

/// The status of `pod` running from `now`: every container running and ready, init
/// containers done (sidecars running).
pub(crate) fn running_status(pod: &Pod, now: DateTime<Utc>) -> PodStatus {
    let spec = pod.spec.as_ref();
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let ip = (!host_network).then(|| fake_pod_ip(pod));
    PodStatus {
        phase: Some("Running".to_owned()),
        start_time: Some(to_time(now)),
        pod_ip: ip.clone(),
        pod_ips: ip.map(|ip| vec![PodIP { ip }]),
        conditions: Some(vec![
            condition("PodReadyToStartContainers", true, None, now),
            condition("Initialized", true, None, now),
            condition("ContainersReady", true, None, now),
            condition("Ready", true, None, now),
        ]),
        init_container_statuses: (!init.is_empty()).then(|| {
            init.iter()
                .map(|c| {
                    if is_sidecar(c) {
                        running(c, now)
                    } else {
                        completed(c, now, now, true)
                    }
                })
                .collect()
        }),
        container_statuses: Some(containers.iter().map(|c| running(c, now)).collect()),
        ..PodStatus::default()
    }
}

/// The status of `pod`, started at `started`, having succeeded at `now`: every container
/// exited 0.
pub(crate) fn succeeded_status(pod: &Pod, started: DateTime<Utc>, now: DateTime<Utc>) -> PodStatus {
    let spec = pod.spec.as_ref();
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    PodStatus {
        phase: Some("Succeeded".to_owned()),
        conditions: Some(vec![
            condition("PodReadyToStartContainers", false, None, now),
            condition("ContainersReady", false, Some("PodCompleted"), now),
            condition("Ready", false, Some("PodCompleted"), now),
        ]),
        init_container_statuses: (!init.is_empty()).then(|| {
            init.iter()
                .map(|c| {
                    let until = if is_sidecar(c) { now } else { started };
                    completed(c, started, until, false)
                })
                .collect()
        }),
        container_statuses: Some(
            containers
                .iter()
                .map(|c| completed(c, started, now, false))
                .collect(),
        ),
        ..PodStatus::default()
    }
}
