//! Leader election on a `coordination.k8s.io/v1` Lease in the controller's namespace, with
//! client-go's semantics (`k8s.io/client-go/tools/leaderelection`):
//!
//! - The Lease names its holder (`holderIdentity`), how long a silent holder keeps it
//!   (`leaseDurationSeconds`), when it was acquired and last renewed, and how many times it
//!   changed hands (`leaseTransitions`).
//! - A missing Lease is created; a Lease whose holder is empty (released) is taken at once; a
//!   Lease held by another replica is taken only when it has not changed for its
//!   `leaseDurationSeconds`, measured on **our** clock from the moment we first saw its current
//!   content. Remote timestamps are never compared with ours, so clock skew between replicas
//!   does not matter (client-go's `observedTime`).
//! - Every write carries the `resourceVersion` it was based on: when two replicas race, the API
//!   server accepts one and answers the other 409 Conflict, which loses.
//! - The leader renews every retry period and stops being the leader (before anyone else may take
//!   over: renew deadline < lease duration) when it could not renew for the renew deadline.
//! - On shutdown the leader first stops claiming leadership, then releases the Lease (empty
//!   holder, 1 s duration) so another replica takes over at once.
//!
//! API failures (network, 429, 5xx) are logged and retried; nothing here panics.
//!
//! Time is an input: [`LeaderElector`] reads a [`Clock`] for every timestamp it writes and every
//! expiry it decides, so tests drive it with a `ManualClock`; the loop in [`LeaderElector::run`]
//! waits on tokio timers.
//!
//! Access used: `get`, `create`, `update` on `coordination.k8s.io` `leases` in the controller's
//! namespace ([`crate::rbac::NAMESPACE_RULES`]).

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

use crate::ControllerError;

/// The Lease's default name.
pub const DEFAULT_LEASE_NAME: &str = "quartermaster-leader";
/// How long a holder that stopped renewing keeps the Lease (client-go's default).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long the leader keeps leading without a successful renewal (client-go's default).
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often the leader renews and the others try to acquire (client-go's default).
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Where the Lease is, who we are, and the election's timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderSettings {
    /// The controller's namespace (the Lease lives there; `POD_NAMESPACE`).
    pub namespace: String,
    /// The Lease's name ([`DEFAULT_LEASE_NAME`]).
    pub lease_name: String,
    /// This replica's identity, unique among replicas (`POD_NAME`).
    pub identity: String,
    /// How long a holder that stopped renewing keeps the Lease: whole seconds, at least 1.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal; shorter than
    /// `lease_duration`, so it stops before anyone else may take over.
    pub renew_deadline: Duration,
    /// The pause between attempts; shorter than `renew_deadline`.
    pub retry_period: Duration,
}

impl LeaderSettings {
    /// Settings with the default Lease name and client-go's default timing.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: DEFAULT_LEASE_NAME.to_string(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// Checks the settings: names not empty; `0 < retry_period < renew_deadline <
    /// lease_duration`; `lease_duration` in whole seconds that fit the Lease.
    pub fn validate(&self) -> Result<(), ControllerError> {
        let setting =
            |name: &'static str, reason: String| ControllerError::Setting { name, reason };
        for (name, value) in [
            ("leader election namespace (POD_NAMESPACE)", &self.namespace),
            ("leader election lease name", &self.lease_name),
            ("leader election identity (POD_NAME)", &self.identity),
        ] {
            if value.trim().is_empty() {
                return Err(setting(name, "must not be empty".to_string()));
            }
        }
        let lease = self.lease_duration;
        if lease.subsec_nanos() != 0
            || lease.as_secs() == 0
            || i32::try_from(lease.as_secs()).is_err()
        {
            return Err(setting(
                "leader election lease duration",
                format!("must be a whole number of seconds, at least 1, got {lease:?}"),
            ));
        }
        if self.retry_period.is_zero() {
            return Err(setting(
                "leader election retry period",
                "must be longer than zero".to_string(),
            ));
        }
        if self.renew_deadline >= lease {
            return Err(setting(
                "leader election renew deadline",
                format!(
                    "must be shorter than the lease duration ({lease:?}), got {:?}",
                    self.renew_deadline
                ),
            ));
        }
        if self.retry_period >= self.renew_deadline {
            return Err(setting(
                "leader election retry period",
                format!(
                    "must be shorter than the renew deadline ({:?}), got {:?}",
                    self.renew_deadline, self.retry_period
                ),
            ));
        }
        Ok(())
    }

    fn lease_duration_seconds(&self) -> i32 {
        // Validated to fit; saturate rather than panic if not.
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// Whether this replica leads: a cheap clonable handle on the elector's state. Writers check it
/// before every write ([`Leadership::ensure_leader`]) and stop the moment it is lost
/// ([`Leadership::lost`]).
#[derive(Debug, Clone)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
}

impl Leadership {
    /// Leadership that is always held and never lost (`--leader-elect=false`).
    pub fn always() -> Self {
        let (_, rx) = watch::channel(true);
        Self { rx }
    }

    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// `Ok` when this replica leads, [`ControllerError::NotLeader`] otherwise.
    pub fn ensure_leader(&self) -> Result<(), ControllerError> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(ControllerError::NotLeader)
        }
    }

    /// Waits for the next change and returns the new state; `None` once no change can come (the
    /// elector is gone, or leadership is [`Leadership::always`]).
    pub async fn changed(&mut self) -> Option<bool> {
        self.rx.changed().await.ok()?;
        Some(*self.rx.borrow_and_update())
    }

    /// Waits until this replica leads (at once if it does): `true`, or `false` when the elector
    /// stopped without leading.
    pub async fn acquired(&mut self) -> bool {
        self.rx.wait_for(|leader| *leader).await.is_ok()
    }

    /// Resolves once this replica does not lead (at once if it does not): the signal to stop all
    /// writes. Never resolves for [`Leadership::always`].
    pub async fn lost(&mut self) {
        if self.rx.wait_for(|leader| !*leader).await.is_err() {
            // The elector is gone while leading: only `always()` gets here (an elector
            // clears leadership when dropped).
            std::future::pending::<()>().await;
        }
    }

    /// A receiver of the state (`true` while leading), for `tokio::select!` loops.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }
}

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

/// The Lease's holder, `None` when empty (free or released).
fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// `now` as a Lease timestamp.
fn micro_time(now: DateTime<Utc>, lease: &str) -> Result<MicroTime, ControllerError> {
    // chrono counts a leap second as nanoseconds past 1e9; a Lease cannot hold it.
    let nanos = i32::try_from(now.timestamp_subsec_nanos().min(999_999_999)).unwrap_or(0);
    k8s_openapi::jiff::Timestamp::new(now.timestamp(), nanos)
        .map(MicroTime)
        .map_err(|e| ControllerError::InvalidObject {
            object: lease.to_string(),
            reason: format!("the clock reads {now}, which a Lease cannot hold: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use http::{Method, Request, Response};
    use kube::client::Body;
    use quartermaster_cloud::ManualClock;
    use serde_json::{Value, json};
    use tower_test::mock::{Handle, SendResponse};

    use super::*;
    use crate::rbac;

    type ApiHandle = Handle<Request<Body>, Response<Body>>;

    const NS: &str = "quartermaster";
    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/quartermaster/leases";
    const LEASE: &str =
        "/apis/coordination.k8s.io/v1/namespaces/quartermaster/leases/quartermaster-leader";

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_750_000_000, 0).expect("a valid time")
    }

    fn secs(s: i64) -> TimeDelta {
        TimeDelta::seconds(s)
    }

    /// A Lease timestamp as the API carries it.
    fn stamp(t: DateTime<Utc>) -> Value {
        serde_json::to_value(micro_time(t, "test").expect("in range")).expect("serializable")
    }

    fn client() -> (kube::Client, ApiHandle) {
        let (svc, api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        (kube::Client::new(svc, "default"), api)
    }

    fn elector(identity: &str, clock: Arc<dyn Clock>) -> (LeaderElector, Leadership, ApiHandle) {
        let (client, api) = client();
        let (elector, leadership) =
            LeaderElector::new(client, LeaderSettings::new(NS, identity), clock)
                .expect("valid settings");
        (elector, leadership, api)
    }

    fn manual() -> (LeaderElector, Leadership, ApiHandle, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(t0()));
        let (elector, leadership, api) = elector("me", clock.clone());
        (elector, leadership, api, clock)
    }

    /// The next request: its method and path, allowed by the chart's Role; its JSON body
    /// (`Null` when empty) and the way to answer it.
    async fn expect(
        api: &mut ApiHandle,
        method: Method,
        path: &str,
    ) -> (Value, SendResponse<Response<Body>>) {
        let (request, reply) = api.next_request().await.expect("a request");
        assert_eq!(
            (request.method(), request.uri().path()),
            (&method, path),
            "unexpected request"
        );
        let verb = match (request.method().as_str(), path == LEASES) {
            ("GET", false) => "get",
            ("POST", true) => "create",
            ("PUT", false) => "update",
            other => panic!("a request outside the RBAC contract: {other:?}"),
        };
        assert!(
            rbac::allows(rbac::NAMESPACE_RULES, "coordination.k8s.io", "leases", verb),
            "the chart's Role does not allow {verb} on leases"
        );
        let bytes = request
            .into_body()
            .collect_bytes()
            .await
            .expect("a request body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("a JSON body")
        };
        (body, reply)
    }

    fn respond(reply: SendResponse<Response<Body>>, code: u16, body: &Value) {
        reply.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(serde_json::to_vec(body).expect("serializable")))
                .expect("a response"),
        );
    }

    fn failure(code: u16, reason: &str) -> Value {
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("{reason} (test)"), "reason": reason, "code": code,
        })
    }

    /// What the API server stores for a write: the object with a new resourceVersion.
    fn stored(mut body: Value, resource_version: &str) -> Value {
        body["metadata"]["resourceVersion"] = json!(resource_version);
        body
    }

    fn lease(holder: &str, renewed: DateTime<Utc>, transitions: i32, rv: &str) -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "quartermaster-leader", "namespace": NS, "resourceVersion": rv},
            "spec": {
                "holderIdentity": holder, "leaseDurationSeconds": 15,
                "acquireTime": stamp(renewed - secs(60)), "renewTime": stamp(renewed),
                "leaseTransitions": transitions,
            },
        })
    }

    /// Asserts a write names `holder`, renewed at `renewed`, acquired at `acquired`, with
    /// `transitions`, based on `resource_version`.
    fn assert_spec(
        body: &Value,
        holder: &str,
        acquired: DateTime<Utc>,
        renewed: DateTime<Utc>,
        transitions: i64,
        resource_version: Option<&str>,
    ) {
        let spec = &body["spec"];
        assert_eq!(spec["holderIdentity"], holder, "{body}");
        assert_eq!(spec["leaseDurationSeconds"], 15, "{body}");
        assert_eq!(spec["acquireTime"], stamp(acquired), "{body}");
        assert_eq!(spec["renewTime"], stamp(renewed), "{body}");
        assert_eq!(spec["leaseTransitions"], transitions, "{body}");
        assert_eq!(
            body["metadata"]["resourceVersion"].as_str(),
            resource_version,
            "{body}"
        );
    }

    /// No request is waiting (the client may be gone).
    async fn assert_idle(api: &mut ApiHandle) {
        if let std::task::Poll::Ready(Some((request, _))) =
            futures::poll!(std::pin::pin!(api.next_request()))
        {
            panic!(
                "an unexpected request: {} {}",
                request.method(),
                request.uri()
            );
        }
    }

    /// GET 404, POST 201: the elector creates the Lease and leads.
    async fn acquire_missing(elector: &mut LeaderElector, api: &mut ApiHandle) {
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(api, Method::GET, LEASE).await;
            respond(reply, 404, &failure(404, "NotFound"));
            let (body, reply) = expect(api, Method::POST, LEASES).await;
            respond(reply, 201, &stored(body, "1"));
        });
        assert!(result.expect("acquired"));
    }

    #[tokio::test]
    async fn acquires_a_missing_lease_by_creating_it() {
        let (mut elector, leadership, mut api, _clock) = manual();
        assert!(
            !leadership.is_leader(),
            "nobody leads before the first step"
        );
        assert!(matches!(
            leadership.ensure_leader(),
            Err(ControllerError::NotLeader)
        ));
        let (result, ()) = tokio::join!(elector.step(), async {
            let (body, reply) = expect(&mut api, Method::GET, LEASE).await;
            assert_eq!(body, Value::Null);
            respond(reply, 404, &failure(404, "NotFound"));
            let (body, reply) = expect(&mut api, Method::POST, LEASES).await;
            assert_eq!(body["metadata"]["name"], "quartermaster-leader");
            assert_eq!(body["metadata"]["namespace"], NS);
            assert_spec(&body, "me", t0(), t0(), 0, None);
            respond(reply, 201, &stored(body, "1"));
        });
        assert!(result.expect("no API error"));
        assert!(leadership.is_leader());
        leadership.ensure_leader().expect("leading");
        assert_eq!(elector.holder(), Some("me"));
        assert_idle(&mut api).await;
    }

    #[tokio::test]
    async fn the_leader_renews_its_lease_with_a_put() {
        let (mut elector, leadership, mut api, clock) = manual();
        acquire_missing(&mut elector, &mut api).await;
        for (i, rv) in ["1", "2", "3"].into_iter().enumerate() {
            clock.advance(secs(2));
            let now = clock.now();
            let (result, ()) = tokio::join!(elector.step(), async {
                // No read first: the leader writes over the version it wrote last.
                let (body, reply) = expect(&mut api, Method::PUT, LEASE).await;
                assert_spec(&body, "me", t0(), now, 0, Some(rv));
                respond(reply, 200, &stored(body, &(i + 2).to_string()));
            });
            assert!(result.expect("renewed"));
            assert!(leadership.is_leader());
        }
        assert_idle(&mut api).await;
    }

    #[tokio::test]
    async fn does_not_take_a_lease_another_replica_keeps_renewing() {
        let (mut elector, leadership, mut api, clock) = manual();
        // The holder's clock may be far off ours: only changes we observe count.
        let holders_time = t0() - secs(3600);
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            respond(reply, 200, &lease("other", holders_time, 3, "7"));
        });
        assert!(!result.expect("no API error"));
        assert_eq!(elector.holder(), Some("other"));
        clock.advance(secs(10));
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            respond(reply, 200, &lease("other", holders_time + secs(10), 3, "8"));
        });
        assert!(!result.expect("no API error"));
        // 14 s after the last change we saw (24 s after the first): still held.
        clock.advance(secs(14));
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            respond(reply, 200, &lease("other", holders_time + secs(10), 3, "8"));
        });
        assert!(!result.expect("no API error"));
        assert!(!leadership.is_leader());
        assert_idle(&mut api).await;
    }

    #[tokio::test]
    async fn takes_over_a_lease_unchanged_for_its_duration() {
        let (mut elector, leadership, mut api, clock) = manual();
        let stale = lease("other", t0() - secs(3600), 4, "5");
        // First sight: whatever its renewTime says, the holder gets a full duration from now.
        for advance in [0, 14] {
            clock.advance(secs(advance));
            let (result, ()) = tokio::join!(elector.step(), async {
                let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
                respond(reply, 200, &stale);
            });
            assert!(!result.expect("no API error"), "after {advance} s");
        }
        clock.advance(secs(1));
        let now = clock.now();
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            respond(reply, 200, &stale);
            let (body, reply) = expect(&mut api, Method::PUT, LEASE).await;
            assert_spec(&body, "me", now, now, 5, Some("5"));
            respond(reply, 200, &stored(body, "6"));
        });
        assert!(result.expect("taken over"));
        assert!(leadership.is_leader());
        assert_eq!(elector.holder(), Some("me"));
    }

    #[tokio::test]
    async fn takes_a_released_lease_at_once() {
        let (mut elector, leadership, mut api, _clock) = manual();
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            respond(reply, 200, &lease("", t0(), 2, "9"));
            let (body, reply) = expect(&mut api, Method::PUT, LEASE).await;
            assert_spec(&body, "me", t0(), t0(), 3, Some("9"));
            respond(reply, 200, &stored(body, "10"));
        });
        assert!(result.expect("acquired"));
        assert!(leadership.is_leader());
    }

    #[tokio::test]
    async fn losing_a_race_is_a_conflict_not_an_error() {
        let (mut elector, leadership, mut api, _clock) = manual();
        // Another replica creates the Lease between our read and our create.
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            respond(reply, 404, &failure(404, "NotFound"));
            let (_, reply) = expect(&mut api, Method::POST, LEASES).await;
            respond(reply, 409, &failure(409, "AlreadyExists"));
        });
        assert!(!result.expect("a lost race is no error"));
        // Another replica takes a released Lease between our read and our update.
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            respond(reply, 200, &lease("", t0(), 2, "9"));
            let (_, reply) = expect(&mut api, Method::PUT, LEASE).await;
            respond(reply, 409, &failure(409, "Conflict"));
        });
        assert!(!result.expect("a lost race is no error"));
        assert!(!leadership.is_leader());
    }

    #[tokio::test]
    async fn a_leader_loses_when_its_renewal_conflicts_with_a_new_holder() {
        let (mut elector, mut leadership, mut api, clock) = manual();
        acquire_missing(&mut elector, &mut api).await;
        assert_eq!(leadership.changed().await, Some(true));
        clock.advance(secs(2));
        let now = clock.now();
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::PUT, LEASE).await;
            respond(reply, 409, &failure(409, "Conflict"));
            // Conflict: read the Lease to see who holds it.
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            respond(reply, 200, &lease("other", now, 1, "4"));
        });
        assert!(!result.expect("no API error"));
        assert!(!leadership.is_leader());
        assert_eq!(leadership.changed().await, Some(false));
        leadership.lost().await;
        assert_eq!(elector.holder(), Some("other"));
        assert_idle(&mut api).await;
    }

    #[tokio::test]
    async fn a_renewal_conflict_from_an_edit_of_our_own_lease_keeps_leading() {
        let (mut elector, leadership, mut api, clock) = manual();
        acquire_missing(&mut elector, &mut api).await;
        clock.advance(secs(2));
        let now = clock.now();
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::PUT, LEASE).await;
            respond(reply, 409, &failure(409, "Conflict"));
            // Someone labelled the Lease: still ours, renewed over the new version.
            let mut edited = lease("me", t0(), 0, "3");
            edited["spec"]["acquireTime"] = stamp(t0());
            edited["metadata"]["labels"] = json!({"team": "infra"});
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            respond(reply, 200, &edited);
            let (body, reply) = expect(&mut api, Method::PUT, LEASE).await;
            assert_spec(&body, "me", t0(), now, 0, Some("3"));
            assert_eq!(body["metadata"]["labels"]["team"], "infra");
            respond(reply, 200, &stored(body, "4"));
        });
        assert!(result.expect("renewed"));
        assert!(leadership.is_leader());
    }

    #[tokio::test]
    async fn a_leader_that_cannot_renew_leads_until_the_renew_deadline() {
        let (mut elector, leadership, mut api, clock) = manual();
        acquire_missing(&mut elector, &mut api).await;
        // Server errors, throttling, a broken connection: logged, retried, still leading…
        for (at, failure_code) in [(2, 500), (6, 429), (9, 0)] {
            clock.set(t0() + secs(at));
            let (result, ()) = tokio::join!(elector.step(), async {
                let (_, reply) = expect(&mut api, Method::PUT, LEASE).await;
                if failure_code == 0 {
                    reply.send_error(std::io::Error::other("connection reset"));
                } else {
                    respond(reply, failure_code, &failure(failure_code, "InternalError"));
                }
            });
            assert!(result.is_err(), "at {at} s");
            assert!(
                leadership.is_leader(),
                "at {at} s: within the renew deadline"
            );
        }
        // …until 10 s after the last renewal.
        clock.set(t0() + secs(10));
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::PUT, LEASE).await;
            respond(reply, 503, &failure(503, "ServiceUnavailable"));
        });
        assert!(matches!(result, Err(ControllerError::Kube(_))));
        assert!(!leadership.is_leader(), "the renew deadline passed");
        // The API comes back and the Lease still names us: read it, renew it, lead again.
        clock.set(t0() + secs(12));
        let now = clock.now();
        let (result, ()) = tokio::join!(elector.step(), async {
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            let mut ours = lease("me", t0(), 0, "1");
            ours["spec"]["acquireTime"] = stamp(t0());
            respond(reply, 200, &ours);
            let (body, reply) = expect(&mut api, Method::PUT, LEASE).await;
            assert_spec(&body, "me", t0(), now, 0, Some("1"));
            respond(reply, 200, &stored(body, "2"));
        });
        assert!(result.expect("renewed"));
        assert!(leadership.is_leader());
    }

    #[tokio::test]
    async fn release_stops_leading_before_it_frees_the_lease() {
        let (mut elector, leadership, mut api, clock) = manual();
        acquire_missing(&mut elector, &mut api).await;
        clock.advance(secs(3));
        let now = clock.now();
        let (result, ()) = tokio::join!(elector.release(), async {
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            assert!(
                !leadership.is_leader(),
                "writers stop before the release goes out"
            );
            let mut ours = lease("me", t0(), 0, "2");
            ours["spec"]["acquireTime"] = stamp(t0());
            respond(reply, 200, &ours);
            let (body, reply) = expect(&mut api, Method::PUT, LEASE).await;
            assert_eq!(body["spec"]["holderIdentity"], "", "{body}");
            assert_eq!(body["spec"]["leaseDurationSeconds"], 1, "{body}");
            assert_eq!(body["spec"]["renewTime"], stamp(now), "{body}");
            assert_eq!(body["spec"]["acquireTime"], stamp(now), "{body}");
            assert_eq!(body["spec"]["leaseTransitions"], 0, "{body}");
            assert_eq!(body["metadata"]["resourceVersion"], "2", "{body}");
            respond(reply, 200, &stored(body, "3"));
        });
        assert!(result.expect("released"));
        assert!(!leadership.is_leader());
        assert_eq!(elector.holder(), None);
    }

    #[tokio::test]
    async fn release_leaves_a_lease_held_by_another_replica_alone() {
        let (mut elector, _leadership, mut api, _clock) = manual();
        let (result, ()) = tokio::join!(elector.release(), async {
            let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
            respond(reply, 200, &lease("other", t0(), 1, "4"));
        });
        assert!(!result.expect("no API error"));
        assert_idle(&mut api).await;
    }

    #[tokio::test]
    async fn dropping_the_elector_ends_leadership() {
        let (mut elector, mut leadership, mut api, _clock) = manual();
        acquire_missing(&mut elector, &mut api).await;
        assert!(leadership.is_leader());
        drop(elector);
        assert!(!leadership.is_leader());
        leadership.lost().await;
        assert!(!leadership.acquired().await, "the election is over");
    }

    #[tokio::test]
    async fn leadership_without_election_is_always_held() {
        let mut leadership = Leadership::always();
        assert!(leadership.is_leader());
        leadership.ensure_leader().expect("leading");
        assert!(leadership.acquired().await);
        assert_eq!(leadership.changed().await, None, "nothing will ever change");
        assert!(
            futures::poll!(std::pin::pin!(leadership.lost())).is_pending(),
            "never lost"
        );
        assert!(*leadership.subscribe().borrow());
    }

    #[test]
    fn settings_are_checked() {
        let good = LeaderSettings::new(NS, "me");
        good.validate().expect("client-go's defaults");
        assert_eq!(good.lease_name, "quartermaster-leader");
        type Change = fn(&mut LeaderSettings);
        let bad: [(&str, Change); 8] = [
            ("empty identity", |s| s.identity = String::new()),
            ("empty namespace", |s| s.namespace = " ".to_string()),
            ("empty lease name", |s| s.lease_name = String::new()),
            ("zero lease", |s| s.lease_duration = Duration::ZERO),
            ("fractional lease", |s| {
                s.lease_duration = Duration::from_millis(15_500)
            }),
            ("deadline not shorter than lease", |s| {
                s.renew_deadline = Duration::from_secs(15)
            }),
            ("retry not shorter than deadline", |s| {
                s.retry_period = Duration::from_secs(10)
            }),
            ("zero retry", |s| s.retry_period = Duration::ZERO),
        ];
        for (case, change) in bad {
            let mut settings = good.clone();
            change(&mut settings);
            match settings.validate() {
                Err(ControllerError::Setting { name, reason }) => {
                    assert!(name.starts_with("leader election"), "{case}: {name}");
                    assert!(!reason.is_empty(), "{case}");
                }
                other => panic!("{case}: expected a setting error, got {other:?}"),
            }
        }
        let (client, _api) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(async { client() });
        let mut settings = good;
        settings.identity = String::new();
        assert!(
            LeaderElector::new(client, settings, Arc::new(ManualClock::new(t0()))).is_err(),
            "the elector checks its settings"
        );
    }

    /// A clock that moves with tokio's (paused) time, for the loop.
    struct TokioTime {
        start: tokio::time::Instant,
    }

    impl Clock for TokioTime {
        fn now(&self) -> DateTime<Utc> {
            t0() + TimeDelta::from_std(self.start.elapsed()).expect("short")
        }
    }

    fn tokio_elector() -> (LeaderElector, Leadership, ApiHandle, tokio::time::Instant) {
        let start = tokio::time::Instant::now();
        let (elector, leadership, api) = elector("me", Arc::new(TokioTime { start }));
        (elector, leadership, api, start)
    }

    #[tokio::test(start_paused = true)]
    async fn run_acquires_renews_every_retry_period_and_releases_on_shutdown() {
        let (elector, mut leadership, mut api, start) = tokio_elector();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(elector.run(async {
            let _ = stopped.await;
        }));
        let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
        respond(reply, 404, &failure(404, "NotFound"));
        let (body, reply) = expect(&mut api, Method::POST, LEASES).await;
        respond(reply, 201, &stored(body, "1"));
        assert!(leadership.acquired().await);
        for (i, rv) in ["1", "2"].into_iter().enumerate() {
            let (body, reply) = expect(&mut api, Method::PUT, LEASE).await;
            let at = start.elapsed();
            assert_eq!(at, Duration::from_secs(2 * (i as u64 + 1)), "renewal {i}");
            assert_eq!(body["metadata"]["resourceVersion"], rv);
            respond(reply, 200, &stored(body, &(i + 2).to_string()));
        }
        stop.send(()).expect("the loop is running");
        let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
        assert!(!leadership.is_leader(), "writers stop before the release");
        let mut ours = lease("me", t0(), 0, "3");
        ours["spec"]["acquireTime"] = stamp(t0());
        respond(reply, 200, &ours);
        let (body, reply) = expect(&mut api, Method::PUT, LEASE).await;
        assert_eq!(body["spec"]["holderIdentity"], "");
        respond(reply, 200, &stored(body, "4"));
        run.await.expect("the loop ends");
        assert!(!leadership.is_leader());
        assert_eq!(leadership.changed().await, Some(false));
        assert_eq!(leadership.changed().await, None, "the elector is gone");
    }

    #[tokio::test(start_paused = true)]
    async fn run_stops_leading_at_the_renew_deadline_when_renewals_fail() {
        let (elector, mut leadership, mut api, start) = tokio_elector();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(elector.run(async {
            let _ = stopped.await;
        }));
        let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
        respond(reply, 404, &failure(404, "NotFound"));
        let (body, reply) = expect(&mut api, Method::POST, LEASES).await;
        respond(reply, 201, &stored(body, "1"));
        assert!(leadership.acquired().await);
        // Renewals at 2, 4, 6 s fail; the one at 8 s never gets an answer.
        for at in [2, 4, 6] {
            let (_, reply) = expect(&mut api, Method::PUT, LEASE).await;
            assert_eq!(start.elapsed(), Duration::from_secs(at));
            respond(reply, 500, &failure(500, "InternalError"));
            assert!(leadership.is_leader(), "at {at} s");
        }
        let (_, hung) = expect(&mut api, Method::PUT, LEASE).await;
        assert_eq!(start.elapsed(), Duration::from_secs(8));
        leadership.lost().await;
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(10),
            "leadership ends at the renew deadline, not when the request gives up"
        );
        drop(hung);
        // Not leading: the next attempt reads the Lease.
        let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
        assert_eq!(start.elapsed(), Duration::from_secs(12));
        respond(reply, 200, &lease("other", t0() + secs(11), 1, "5"));
        assert!(!leadership.is_leader());
        stop.send(()).expect("the loop is running");
        // Release reads the Lease, sees another holder, writes nothing.
        let (_, reply) = expect(&mut api, Method::GET, LEASE).await;
        respond(reply, 200, &lease("other", t0() + secs(12), 1, "6"));
        run.await.expect("the loop ends");
        assert_idle(&mut api).await;
    }
}
