//! [`LeaderElector`]: one replica's side of the election (acquire, renew, release, the loop).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use quartermaster_cloud::Clock;
use tokio::sync::watch;

use super::{LeaderSettings, Leadership, holder_of, is_conflict, micro_time};
use crate::ControllerError;

/// The Lease as last read or written, and when (on our clock) its content last changed.
#[derive(Debug, Clone)]
struct Observed {
    lease: Lease,
    changed_at: DateTime<Utc>,
}

/// One replica's side of the election: [`LeaderElector::step`] makes one acquire-or-renew
/// attempt, [`LeaderElector::run`] loops until shutdown and then releases the Lease.
pub struct LeaderElector {
    leases: Api<Lease>,
    settings: LeaderSettings,
    clock: Arc<dyn Clock>,
    observed: Option<Observed>,
    /// When the last successful acquire or renew started; `Some` exactly while leading.
    renewed_at: Option<DateTime<Utc>>,
    leader: watch::Sender<bool>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("settings", &self.settings)
            .field("holder", &self.holder())
            .field("renewed_at", &self.renewed_at)
            .finish()
    }
}

impl LeaderElector {
    /// An elector for `settings` (checked) talking to the API through `client`, and the
    /// [`Leadership`] handle it drives (not leading until a [`step`](Self::step) succeeds).
    pub fn new(
        client: kube::Client,
        settings: LeaderSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<(Self, Leadership), ControllerError> {
        settings.validate()?;
        let (leader, rx) = watch::channel(false);
        let elector = Self {
            leases: Api::namespaced(client, &settings.namespace),
            settings,
            clock,
            observed: None,
            renewed_at: None,
            leader,
        };
        Ok((elector, Leadership { rx }))
    }

    /// Another handle on this elector's leadership.
    pub fn leadership(&self) -> Leadership {
        Leadership {
            rx: self.leader.subscribe(),
        }
    }

    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        self.renewed_at.is_some()
    }

    /// The holder named by the Lease as last seen (`None` when free or not seen yet).
    pub fn holder(&self) -> Option<&str> {
        self.observed.as_ref().and_then(|o| holder_of(&o.lease))
    }

    /// The settings.
    pub fn settings(&self) -> &LeaderSettings {
        &self.settings
    }

    /// One acquire-or-renew attempt: `Ok(true)` when this replica holds the Lease afterwards,
    /// `Ok(false)` when another replica does (or won a race), `Err` when the API failed. After a
    /// failure the leader keeps leading until the renew deadline has passed since its last
    /// successful renewal.
    pub async fn step(&mut self) -> Result<bool, ControllerError> {
        let now = self.clock.now();
        match self.try_acquire_or_renew(now).await {
            Ok(true) => {
                self.renewed_at = Some(now);
                self.set_leader(true);
                Ok(true)
            }
            Ok(false) => {
                self.renewed_at = None;
                self.set_leader(false);
                Ok(false)
            }
            Err(error) => {
                self.check_renew_deadline();
                Err(error)
            }
        }
    }

    /// Gives up leadership at once (writers see it before any request goes out), then releases
    /// the Lease if it still names this replica: empty holder, 1 s duration, so another replica
    /// takes over at its next attempt. `Ok(true)` when released.
    pub async fn release(&mut self) -> Result<bool, ControllerError> {
        if self.renewed_at.take().is_some() {
            tracing::info!(
                lease = %self.lease_ref(),
                identity = %self.settings.identity,
                "leader election: releasing leadership"
            );
        }
        self.set_leader(false);
        let Some(current) = self.leases.get_opt(&self.settings.lease_name).await? else {
            return Ok(false);
        };
        if holder_of(&current).is_none_or(|holder| holder != self.settings.identity) {
            self.observe(current, self.clock.now());
            return Ok(false);
        }
        let now = self.clock.now();
        let stamp = micro_time(now, &self.lease_ref())?;
        let mut released = current;
        let spec = released.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(String::new());
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time = Some(stamp.clone());
        spec.renew_time = Some(stamp);
        match self
            .leases
            .replace(&self.settings.lease_name, &PostParams::default(), &released)
            .await
        {
            Ok(lease) => {
                self.observe(lease, now);
                tracing::info!(lease = %self.lease_ref(), "leader election: lease released");
                Ok(true)
            }
            Err(error) if is_conflict(&error) => {
                tracing::info!(
                    lease = %self.lease_ref(),
                    "leader election: lease changed while releasing it; left as it is"
                );
                Ok(false)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Runs the election until `shutdown` resolves: an attempt every retry period (each bounded
    /// by the time left before the renew deadline while leading), then [`release`](Self::release).
    /// Errors are logged and retried.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        tracing::info!(
            lease = %self.lease_ref(),
            identity = %self.settings.identity,
            "leader election: started"
        );
        loop {
            self.check_renew_deadline();
            let leading = self.is_leader();
            let limit = self
                .time_to_renew_deadline()
                .unwrap_or(self.settings.renew_deadline);
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                attempt = tokio::time::timeout(limit, self.step()) => match attempt {
                    Ok(Ok(_)) => {}
                    Ok(Err(error)) => tracing::warn!(
                        lease = %self.lease_ref(),
                        %error,
                        "leader election: lease request failed; retrying"
                    ),
                    Err(_) if leading => {
                        self.lose("no answer from the API before the renew deadline")
                    }
                    Err(_) => tracing::warn!(
                        lease = %self.lease_ref(),
                        timeout = ?limit,
                        "leader election: lease request timed out; retrying"
                    ),
                },
            }
            let pause = match self.time_to_renew_deadline() {
                Some(left) => self.settings.retry_period.min(left),
                None => self.settings.retry_period,
            };
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
        let lease = self.lease_ref();
        match tokio::time::timeout(self.settings.renew_deadline, self.release()).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!(%lease, %error, "leader election: could not release the lease")
            }
            Err(_) => tracing::warn!(%lease, "leader election: releasing the lease timed out"),
        }
        tracing::info!(%lease, "leader election: stopped");
    }

    /// Acquire or renew; `Ok(true)` when we hold the Lease afterwards.
    async fn try_acquire_or_renew(&mut self, now: DateTime<Utc>) -> Result<bool, ControllerError> {
        let name = self.settings.lease_name.clone();
        let stamp = micro_time(now, &self.lease_ref())?;

        // Fast path: the leader renews the Lease it last wrote, without reading it first.
        if self.is_leader()
            && self.observed_is_valid(now)
            && let Some(observed) = self.observed.as_ref().filter(|o| self.is_ours(&o.lease))
        {
            let mut renewed = observed.lease.clone();
            self.fill_spec(&mut renewed, &stamp, true);
            match self
                .leases
                .replace(&name, &PostParams::default(), &renewed)
                .await
            {
                Ok(lease) => {
                    self.observe(lease, now);
                    return Ok(true);
                }
                Err(error) if is_conflict(&error) => tracing::info!(
                    lease = %self.lease_ref(),
                    "leader election: lease changed since our last renewal; reading it"
                ),
                Err(error) => return Err(error.into()),
            }
        }

        // Read (or create) the Lease.
        let Some(current) = self.leases.get_opt(&name).await? else {
            let mut lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(self.settings.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: None,
            };
            self.fill_spec(&mut lease, &stamp, false);
            if let Some(spec) = lease.spec.as_mut() {
                spec.lease_transitions = Some(0);
            }
            return match self.leases.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created, now);
                    Ok(true)
                }
                Err(error) if is_conflict(&error) => {
                    tracing::info!(
                        lease = %self.lease_ref(),
                        "leader election: another replica created the lease first"
                    );
                    Ok(false)
                }
                Err(error) => Err(error.into()),
            };
        };
        self.observe(current.clone(), now);
        let ours = self.is_ours(&current);
        if !ours && holder_of(&current).is_some() && self.observed_is_valid(now) {
            return Ok(false);
        }

        // Ours to renew (keeping acquireTime and leaseTransitions), or free/expired to take.
        let mut next = current;
        self.fill_spec(&mut next, &stamp, ours);
        match self
            .leases
            .replace(&name, &PostParams::default(), &next)
            .await
        {
            Ok(lease) => {
                self.observe(lease, now);
                Ok(true)
            }
            Err(error) if is_conflict(&error) => {
                tracing::info!(
                    lease = %self.lease_ref(),
                    "leader election: another replica updated the lease first"
                );
                Ok(false)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Names us as the holder in `lease`, renewed at `stamp`; a renewal keeps the acquire time
    /// and transition count, a take-over starts a new term (`leaseTransitions` + 1).
    fn fill_spec(&self, lease: &mut Lease, stamp: &MicroTime, renewal: bool) {
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let transitions = spec.lease_transitions.unwrap_or(0).max(0);
        spec.holder_identity = Some(self.settings.identity.clone());
        spec.lease_duration_seconds = Some(self.settings.lease_duration_seconds());
        spec.renew_time = Some(stamp.clone());
        if renewal {
            spec.acquire_time = spec.acquire_time.take().or_else(|| Some(stamp.clone()));
            spec.lease_transitions = Some(transitions);
        } else {
            spec.acquire_time = Some(stamp.clone());
            spec.lease_transitions = Some(transitions.saturating_add(1));
        }
    }

    /// Remembers `lease`; its content counts as changed at `now` unless it is what we saw last.
    fn observe(&mut self, lease: Lease, now: DateTime<Utc>) {
        let changed_at = match &self.observed {
            Some(previous) if previous.lease.spec == lease.spec => previous.changed_at,
            _ => now,
        };
        self.observed = Some(Observed { lease, changed_at });
    }

    /// Whether the Lease as last seen is still within its duration (on our clock, since its
    /// content last changed).
    fn observed_is_valid(&self, now: DateTime<Utc>) -> bool {
        let Some(observed) = &self.observed else {
            return false;
        };
        let seconds = observed
            .lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .unwrap_or_else(|| self.settings.lease_duration_seconds())
            .max(0);
        match observed
            .changed_at
            .checked_add_signed(TimeDelta::seconds(i64::from(seconds)))
        {
            Some(expiry) => expiry > now,
            None => true,
        }
    }

    fn is_ours(&self, lease: &Lease) -> bool {
        holder_of(lease) == Some(self.settings.identity.as_str())
    }

    /// Time left before the renew deadline while leading (`None` when not leading).
    fn time_to_renew_deadline(&self) -> Option<Duration> {
        let renewed_at = self.renewed_at?;
        let deadline = TimeDelta::from_std(self.settings.renew_deadline)
            .ok()
            .and_then(|d| renewed_at.checked_add_signed(d))?;
        Some(
            (deadline - self.clock.now())
                .to_std()
                .unwrap_or(Duration::ZERO),
        )
    }

    /// Stops leading when the renew deadline has passed since the last successful renewal.
    fn check_renew_deadline(&mut self) {
        if self.time_to_renew_deadline() == Some(Duration::ZERO) {
            self.lose("could not renew the lease within the renew deadline");
        }
    }

    fn lose(&mut self, why: &str) {
        if self.renewed_at.take().is_some() {
            tracing::warn!(
                lease = %self.lease_ref(),
                identity = %self.settings.identity,
                "leader election: leadership lost: {why}"
            );
        }
        self.set_leader(false);
    }

    fn set_leader(&self, leading: bool) {
        let changed = self.leader.send_if_modified(|state| {
            let changed = *state != leading;
            *state = leading;
            changed
        });
        if changed {
            if leading {
                tracing::info!(
                    lease = %self.lease_ref(),
                    identity = %self.settings.identity,
                    "leader election: became the leader"
                );
            } else {
                tracing::info!(
                    lease = %self.lease_ref(),
                    identity = %self.settings.identity,
                    holder = self.holder().unwrap_or(""),
                    "leader election: not the leader"
                );
            }
        }
    }

    fn lease_ref(&self) -> String {
        format!(
            "Lease {}/{}",
            self.settings.namespace, self.settings.lease_name
        )
    }
}

impl Drop for LeaderElector {
    /// An elector that stops (task ended or aborted) leads no more.
    fn drop(&mut self) {
        self.leader.send_replace(false);
    }
}
