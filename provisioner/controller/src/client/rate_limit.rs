//! The client-side rate limit: a token bucket (`governor`'s GCRA). `burst` requests may go out
//! at once, then one every `1 / qps` seconds. A request over the limit waits asynchronously (on
//! a tokio timer) for its token; none is ever rejected. The limiter reads tokio's clock, so
//! tests can run it under paused time.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use governor::clock::Clock as GovernorClock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tower::{Layer, Service};

use super::{BURST_FLAG, QPS_FLAG};
use crate::ControllerError;

/// The smallest accepted `--kube-client-qps` (one request every 1000 s).
const MIN_QPS: f64 = 0.001;
/// The largest accepted `--kube-client-qps`.
const MAX_QPS: f64 = 1_000_000.0;
/// The largest accepted `--kube-client-burst`.
const MAX_BURST: u32 = 1_000_000;
/// Tokio's clock for `governor`: real time in production, virtual under tokio's paused time.
#[derive(Debug, Clone, Copy, Default)]
struct TokioClock;

impl GovernorClock for TokioClock {
    type Instant = std::time::Instant;

    fn now(&self) -> Self::Instant {
        tokio::time::Instant::now().into_std()
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<std::time::Instant>>;

/// What the controller's client sent, for `/metrics`: every request that went through a
/// [`RateLimitLayer`] of this process, the time requests waited for a token, and the configured
/// rate (so `rate(requests) <= qps` can be checked from the outside).
#[derive(Debug, Clone, Default)]
pub struct ClientTraffic {
    /// Requests sent to the API server.
    pub requests: Counter,
    /// Seconds requests waited for a rate-limit token.
    pub throttled_seconds: Counter<f64, AtomicU64>,
    /// `--kube-client-qps` of the last layer built.
    pub qps_limit: Gauge<f64, AtomicU64>,
}

/// The process's client traffic (one controller per process; the counters are shared handles).
pub fn client_traffic() -> &'static ClientTraffic {
    static TRAFFIC: OnceLock<ClientTraffic> = OnceLock::new();
    TRAFFIC.get_or_init(ClientTraffic::default)
}

/// A tower layer that lets requests through at `qps` per second with bursts of `burst`. Every
/// service it wraps (and every clone of the layer) draws from the same bucket.
#[derive(Clone)]
pub struct RateLimitLayer {
    /// The buckets a request takes a token from, in order (a cap of its own first, then the
    /// shared one).
    buckets: Arc<[Arc<Limiter>]>,
    /// Prioritized requests waiting for a token of the shared bucket (the last of `buckets`):
    /// while there are any, the others do not take one.
    priority_waiting: Arc<AtomicUsize>,
    /// Whether this layer's requests go first ([`RateLimitLayer::prioritized`]).
    priority: bool,
    /// The shared bucket's refill period: how long a request that gives way waits to look again.
    shared_period: Duration,
    qps: f64,
    burst: u32,
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .field("priority", &self.priority)
            .finish()
    }
}

impl RateLimitLayer {
    /// A full bucket of `burst` tokens refilled at `qps` per second. `qps` must be finite and
    /// between 0.001 and 1,000,000; `burst` between 1 and 1,000,000 (errors name
    /// `--kube-client-qps` and `--kube-client-burst`).
    pub fn new(qps: f64, burst: u32) -> Result<Self, ControllerError> {
        if !qps.is_finite() || qps <= 0.0 {
            return Err(ControllerError::Setting {
                name: QPS_FLAG,
                reason: format!("must be a positive number of requests per second, got {qps}"),
            });
        }
        if !(MIN_QPS..=MAX_QPS).contains(&qps) {
            return Err(ControllerError::Setting {
                name: QPS_FLAG,
                reason: format!("must be between {MIN_QPS} and {MAX_QPS}, got {qps}"),
            });
        }
        client_traffic().qps_limit.set(qps);
        Ok(Self {
            buckets: Arc::from([Arc::new(bucket(qps, burst)?)]),
            priority_waiting: Arc::new(AtomicUsize::new(0)),
            priority: false,
            shared_period: Duration::from_secs_f64(1.0 / qps),
            qps,
            burst,
        })
    }

    /// The same limit, whose requests go first: while one of them waits for a token of the
    /// shared bucket, requests of the layer's other (unprioritized) clones and caps wait too,
    /// and the next token is its. Together they still never exceed the rate.
    pub fn prioritized(&self) -> Self {
        Self {
            priority: true,
            ..self.clone()
        }
    }

    /// A layer whose requests take a token from this layer's bucket and, before it, from a
    /// bucket of their own at `share` (in (0, 1]) of this layer's rate and burst (at least one
    /// token): its traffic counts against this layer's limit and never exceeds its share.
    pub fn capped(&self, share: f64) -> Result<Self, ControllerError> {
        if !(share > 0.0 && share <= 1.0) {
            return Err(ControllerError::Setting {
                name: QPS_FLAG,
                reason: format!("a share of the rate must be in (0, 1], got {share}"),
            });
        }
        let qps = self.qps * share;
        // Rounded down, at least one: a share never bursts past its part of the bucket.
        let burst = ((f64::from(self.burst) * share) as u32).max(1);
        let mut buckets = vec![Arc::new(bucket(qps.max(MIN_QPS), burst)?)];
        buckets.extend(self.buckets.iter().cloned());
        Ok(Self {
            buckets: Arc::from(buckets),
            qps,
            burst,
            ..self.clone()
        })
    }

    /// Sustained requests per second.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    /// Requests that may go out at once.
    pub fn burst(&self) -> u32 {
        self.burst
    }
}

/// A full bucket of `burst` tokens refilled at `qps` per second (both already checked).
fn bucket(qps: f64, burst: u32) -> Result<Limiter, ControllerError> {
    let burst_tokens = NonZeroU32::new(burst)
        .filter(|b| b.get() <= MAX_BURST)
        .ok_or_else(|| ControllerError::Setting {
            name: BURST_FLAG,
            reason: format!("must be between 1 and {MAX_BURST} requests, got {burst}"),
        })?;
    // In range, so the period is between 1 µs and 1000 s: never zero, never overflowing.
    let quota = Duration::try_from_secs_f64(1.0 / qps)
        .ok()
        .and_then(Quota::with_period)
        .ok_or_else(|| ControllerError::Setting {
            name: QPS_FLAG,
            reason: format!("{qps} requests per second is not a usable rate"),
        })?
        .allow_burst(burst_tokens);
    Ok(RateLimiter::direct_with_clock(quota, TokioClock))
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited::holding_nothing(
            inner,
            &self.buckets,
            &self.priority_waiting,
            self.priority,
            self.shared_period,
        )
    }
}

/// A service behind [`RateLimitLayer`]: `poll_ready` is pending until a token is available
/// (then until the inner service is ready), so callers (kube's request buffer) wait in order.
pub struct RateLimited<S> {
    inner: S,
    buckets: Arc<[Arc<Limiter>]>,
    priority_waiting: Arc<AtomicUsize>,
    priority: bool,
    shared_period: Duration,
    /// Whether this (prioritized) service counts in `priority_waiting` now.
    counted_waiting: bool,
    /// How many of `buckets` gave a token for the next `call` (all of them: ready).
    taken: usize,
    /// The timer to wait on before asking for a token again.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S: Clone> Clone for RateLimited<S> {
    fn clone(&self) -> Self {
        // A clone shares the bucket but not a token already taken.
        Self::holding_nothing(
            self.inner.clone(),
            &self.buckets,
            &self.priority_waiting,
            self.priority,
            self.shared_period,
        )
    }
}

impl<S> RateLimited<S> {
    /// A service over `inner` drawing from `buckets`, with no token taken and not waiting.
    fn holding_nothing(
        inner: S,
        buckets: &Arc<[Arc<Limiter>]>,
        priority_waiting: &Arc<AtomicUsize>,
        priority: bool,
        shared_period: Duration,
    ) -> Self {
        Self {
            inner,
            buckets: Arc::clone(buckets),
            priority_waiting: Arc::clone(priority_waiting),
            priority,
            shared_period,
            counted_waiting: false,
            taken: 0,
            sleep: None,
        }
    }

    /// Counts this prioritized service as waiting for the shared bucket (`true`) or not.
    fn set_waiting(&mut self, waiting: bool) {
        if self.priority && self.counted_waiting != waiting {
            if waiting {
                self.priority_waiting.fetch_add(1, Ordering::AcqRel);
            } else {
                self.priority_waiting.fetch_sub(1, Ordering::AcqRel);
            }
            self.counted_waiting = waiting;
        }
    }

    /// Waits `wait` (at least 1 ms) before asking again, counted as throttled time.
    fn wait(&mut self, wait: Duration) {
        // Never a zero-length timer: a token due "now" is retried after 1 ms.
        let wait = wait.max(Duration::from_millis(1));
        client_traffic()
            .throttled_seconds
            .inc_by(wait.as_secs_f64());
        tracing::trace!(?wait, "kube client rate limit: waiting for a token");
        self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
    }
}

impl<S> Drop for RateLimited<S> {
    fn drop(&mut self) {
        // A prioritized request given up while waiting must not hold the others back.
        self.set_waiting(false);
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for RateLimited<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimited")
            .field("inner", &self.inner)
            .field("ready", &(self.taken == self.buckets.len()))
            .field("waiting", &self.sleep.is_some())
            .finish()
    }
}

impl<S, Request> Service<Request> for RateLimited<S>
where
    S: Service<Request>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while self.taken < self.buckets.len() {
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            let shared = self.taken + 1 == self.buckets.len();
            if shared && !self.priority && self.priority_waiting.load(Ordering::Acquire) > 0 {
                // A prioritized request waits for the shared bucket: the next token is its.
                self.wait(self.shared_period);
                continue;
            }
            match self.buckets[self.taken].check() {
                Ok(()) => {
                    if shared {
                        self.set_waiting(false);
                    }
                    self.taken += 1;
                }
                Err(not_until) => {
                    if shared {
                        self.set_waiting(true);
                    }
                    self.wait(not_until.wait_time_from(TokioClock.now()));
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // `poll_ready` returned ready, so a token was taken from every bucket for this call.
        self.taken = 0;
        client_traffic().requests.inc();
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use futures::future::poll_fn;
    use http::{Request, Response};
    use kube::client::Body;
    use tokio::time::Instant;
    use tower::{Layer, Service};

    use super::*;
    use crate::client::DEFAULT_QPS;

    fn setting_error(result: Result<RateLimitLayer, ControllerError>) -> (&'static str, String) {
        match result {
            Err(ControllerError::Setting { name, reason }) => (name, reason),
            other => panic!("expected a setting error, got {other:?}"),
        }
    }

    #[test]
    fn qps_must_be_positive_finite_and_in_range() {
        for qps in [
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e-9,
            2e6,
        ] {
            let (name, reason) = setting_error(RateLimitLayer::new(qps, 10));
            assert_eq!(name, "--kube-client-qps", "qps {qps}");
            assert!(!reason.is_empty(), "qps {qps}");
        }
        for qps in [MIN_QPS, 0.5, DEFAULT_QPS, MAX_QPS] {
            let layer = RateLimitLayer::new(qps, 1).expect("a valid rate");
            assert_eq!(layer.qps(), qps);
        }
    }

    #[test]
    fn burst_must_be_at_least_one() {
        for burst in [0, MAX_BURST + 1, u32::MAX] {
            let (name, reason) = setting_error(RateLimitLayer::new(DEFAULT_QPS, burst));
            assert_eq!(name, "--kube-client-burst", "burst {burst}");
            assert!(reason.contains(&burst.to_string()), "{reason}");
        }
        assert_eq!(RateLimitLayer::new(1.0, 1).expect("valid").burst(), 1);
    }

    /// Whether the service is ready when polled once now (no waiting).
    async fn ready_now<S: Service<()>>(svc: &mut S) -> bool
    where
        S::Error: std::fmt::Debug,
    {
        match futures::poll!(poll_fn(|cx| svc.poll_ready(cx))) {
            Poll::Ready(result) => {
                result.expect("inner service never fails");
                true
            }
            Poll::Pending => false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn requests_and_their_wait_for_tokens_are_counted() {
        // The counters are the process's: other tests add to them too, so compare deltas.
        let traffic = client_traffic();
        let (sent, waited) = (traffic.requests.get(), traffic.throttled_seconds.get());
        let layer = RateLimitLayer::new(10.0, 2).expect("valid");
        let mut svc = layer.layer(tower::service_fn(|()| async { Ok::<_, Infallible>(()) }));
        for _ in 0..4 {
            poll_fn(|cx| svc.poll_ready(cx)).await.expect("infallible");
            svc.call(()).await.expect("infallible");
        }
        assert!(traffic.requests.get() - sent >= 4);
        // Two went at once, two waited about 100 ms each for their tokens.
        assert!(traffic.throttled_seconds.get() - waited >= 0.19);
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_burst_the_next_request_waits_for_a_token() {
        // 10 per second: one token every 100 ms, 3 at once.
        let layer = RateLimitLayer::new(10.0, 3).expect("valid");
        let mut svc = layer.layer(tower::service_fn(|()| async { Ok::<_, Infallible>(()) }));
        for i in 0..3 {
            assert!(
                ready_now(&mut svc).await,
                "request {i} of the burst goes at once"
            );
            svc.call(()).await.expect("infallible");
        }
        assert!(!ready_now(&mut svc).await, "the 4th waits");
        tokio::time::advance(Duration::from_millis(99)).await;
        assert!(
            !ready_now(&mut svc).await,
            "still waiting 1 ms before its token"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(ready_now(&mut svc).await, "released when the token is due");
        svc.call(()).await.expect("infallible");
        // The bucket is empty again: the 5th waits a full period.
        assert!(!ready_now(&mut svc).await, "the 5th waits");
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(ready_now(&mut svc).await);
        svc.call(()).await.expect("infallible");
    }

    #[tokio::test(start_paused = true)]
    async fn clones_of_the_layer_share_one_bucket() {
        let layer = RateLimitLayer::new(1.0, 1).expect("valid");
        let mut a = layer.layer(tower::service_fn(|()| async { Ok::<_, Infallible>(()) }));
        let mut b = layer
            .clone()
            .layer(tower::service_fn(|()| async { Ok::<_, Infallible>(()) }));
        assert!(ready_now(&mut a).await);
        a.call(()).await.expect("infallible");
        assert!(!ready_now(&mut b).await, "the one token is spent");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(ready_now(&mut b).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_capped_layer_spends_the_shared_bucket_and_never_more_than_its_share() {
        // 100 per second, 10 at once; the capped layer: 10 per second, 1 at once.
        let layer = RateLimitLayer::new(100.0, 10).expect("valid");
        let capped = layer.capped(0.1).expect("valid share");
        assert_eq!((capped.qps(), capped.burst()), (10.0, 1));
        let mut loop_svc = layer.layer(tower::service_fn(|()| async { Ok::<_, Infallible>(()) }));
        let mut events = capped.layer(tower::service_fn(|()| async { Ok::<_, Infallible>(()) }));
        // Its own bucket holds one token: the second Event waits 100 ms however full the
        // shared bucket is.
        assert!(ready_now(&mut events).await);
        events.call(()).await.expect("infallible");
        assert!(!ready_now(&mut events).await, "its share is spent");
        // The Event took one of the shared bucket's 10: the loop has 9 left.
        for i in 0..9 {
            assert!(ready_now(&mut loop_svc).await, "loop request {i}");
            loop_svc.call(()).await.expect("infallible");
        }
        assert!(
            !ready_now(&mut loop_svc).await,
            "the Event counted against the loop's burst"
        );
        // When its own token is due, the Event still needs one from the shared bucket.
        tokio::time::advance(Duration::from_millis(100)).await;
        for _ in 0..10 {
            if ready_now(&mut loop_svc).await {
                loop_svc.call(()).await.expect("infallible");
            }
        }
        assert!(
            !ready_now(&mut events).await,
            "the loop spent the shared tokens first"
        );
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(ready_now(&mut events).await, "both buckets gave a token");
        events.call(()).await.expect("infallible");
        for share in [0.0, -0.5, 1.5, f64::NAN] {
            let (name, reason) = setting_error(layer.capped(share));
            assert_eq!(name, QPS_FLAG);
            assert!(reason.contains("share"), "{reason}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_prioritized_request_takes_the_next_token_and_a_dropped_one_stops_holding_back() {
        // 10 per second, one at once: a token every 100 ms.
        let layer = RateLimitLayer::new(10.0, 1).expect("valid");
        let service = || tower::service_fn(|()| async { Ok::<_, Infallible>(()) });
        let mut writes = layer.layer(service());
        let mut events = layer.capped(1.0).expect("valid share").layer(service());
        let mut creates = layer.prioritized().layer(service());
        assert!(ready_now(&mut writes).await);
        writes.call(()).await.expect("infallible");
        // All three wait; the create asked last.
        assert!(!ready_now(&mut writes).await);
        assert!(!ready_now(&mut events).await);
        assert!(!ready_now(&mut creates).await);
        tokio::time::advance(Duration::from_millis(100)).await;
        // The token is due, and the others look first: they give way to the create.
        assert!(!ready_now(&mut writes).await, "a write gives way");
        assert!(!ready_now(&mut events).await, "an Event gives way");
        assert!(ready_now(&mut creates).await, "the create takes the token");
        creates.call(()).await.expect("infallible");
        // No create waits now: the next token goes to whoever asks.
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(ready_now(&mut writes).await, "the write goes next");
        writes.call(()).await.expect("infallible");
        // A create that waits and is then dropped (its request given up) holds nobody back.
        let mut given_up = layer.prioritized().layer(service());
        assert!(!ready_now(&mut given_up).await);
        drop(given_up);
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(
            ready_now(&mut events).await,
            "nothing waits ahead of the Event"
        );
    }

    /// A kube client over a mocked API, rate limited: the times (tokio's virtual time) at which
    /// the API sees requests.
    #[tokio::test(start_paused = true)]
    async fn kube_client_requests_are_spaced_after_the_burst() {
        let (mock, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let layer = RateLimitLayer::new(10.0, 2).expect("valid");
        let client = kube::Client::new(layer.layer(mock), "default");
        let start = Instant::now();
        let api = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some((request, reply)) = handle.next_request().await {
                seen.push((request.uri().path().to_string(), start.elapsed()));
                reply.send_response(
                    Response::builder()
                        .body(Body::from(b"ok".to_vec()))
                        .expect("a response"),
                );
            }
            seen
        });
        let requests = (0..5).map(|i| {
            let client = client.clone();
            async move {
                let request = Request::get(format!("/r/{i}"))
                    .body(Vec::new())
                    .expect("a request");
                client.request_text(request).await.expect("answered")
            }
        });
        let answers = futures::future::join_all(requests).await;
        assert!(answers.iter().all(|a| a == "ok"));
        drop(client);
        let seen = api.await.expect("api task");
        assert_eq!(seen.len(), 5);
        let offsets: Vec<u128> = seen.iter().map(|(_, at)| at.as_millis()).collect();
        // Two at once, then one every 100 ms (virtual time; tokio timers round up to 1 ms).
        for (i, expected) in [0u128, 0, 100, 200, 300].into_iter().enumerate() {
            assert!(
                (expected..=expected + 1).contains(&offsets[i]),
                "request {i} at {} ms, expected {expected} ms: {offsets:?}",
                offsets[i]
            );
        }
    }
}
