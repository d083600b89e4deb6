//! The leader election against a mocked API server (every request checked against the
//! chart's Role), driven by a manual clock or by tokio's paused time.

use http::{Method, Request, Response};
use kube::client::Body;
use quartermaster_cloud::ManualClock;
use serde_json::{Value, json};
use tower_test::mock::{Handle, SendResponse};

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::Clock;

use super::{LeaderElector, LeaderSettings, Leadership, micro_time};
use crate::ControllerError;
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
