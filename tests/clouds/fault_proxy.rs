//! A small fault-injecting HTTP proxy of ours in front of moto, for what moto does not
//! simulate: insufficient capacity (as an HTTP 500, and inside a 200 `CreateFleet` response's
//! `errorSet`), throttling (`RequestLimitExceeded`, 503 with `Retry-After`), timeouts, and a
//! response lost after the call took effect, and malformed or surprising responses (canned,
//! or moto's own truncated or rewritten). Faults are queued per EC2 action and each is used by
//! one call; calls without a queued fault pass through unchanged.
//!
//! moto ignores `CreateFleet`'s `ClientToken`; [`FaultProxy::honour_client_tokens`] makes the
//! proxy answer a repeated token as EC2 does: with the response to the call with it that
//! succeeded (or that EC2 is still working on), without launching again.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::local_server::{Serving, bind, serve};

/// What to do to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer HTTP 500 `InsufficientInstanceCapacity` without calling moto.
    CapacityError500,
    /// Answer 200 with no instance and an `InsufficientInstanceCapacity` error for every
    /// override of the request (how an instant fleet reports it), without calling moto.
    CapacityInFleetResponse,
    /// Answer 503 `RequestLimitExceeded` with `Retry-After` seconds.
    Throttle {
        /// The `Retry-After` header.
        retry_after_secs: u64,
    },
    /// Hold the call this long before passing it on (client timeouts). The call reaches moto
    /// (and takes effect) even when the client gave up waiting.
    Delay(Duration),
    /// Pass the call to moto (it takes effect), then answer 500 `InternalError` instead of
    /// moto's response: a crash or a lost connection after the cloud acted.
    LoseResponse,
    /// Answer 200 with this JSON body (`application/x-amz-json-1.1`) without calling moto: what
    /// moto cannot hold, such as SSM's reserved `/aws/service/...` parameters.
    JsonReply(String),
    /// Answer `status` with this body (`text/xml`, whatever it holds) without calling moto.
    XmlReply {
        /// The HTTP status.
        status: u16,
        /// The body, verbatim.
        body: String,
    },
    /// Pass the call to moto (it takes effect), then answer only the first this many bytes of
    /// moto's response.
    Truncate(usize),
    /// Pass the call to moto (it takes effect), then answer moto's response with every
    /// occurrence of each `(from, to)` replaced, in order (`<instanceId>` renamed to an
    /// element the SDK ignores, a state name changed).
    Rewrite(Vec<(String, String)>),
}

type Faults = Arc<Mutex<BTreeMap<String, VecDeque<Fault>>>>;

/// A response from moto, as the proxy keeps it (replayed for a repeated client token).
#[derive(Debug, Clone)]
struct Upstream {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Upstream {
    fn response(&self) -> Response<Full<Bytes>> {
        self.with_body(self.body.clone())
    }

    fn with_body(&self, body: Bytes) -> Response<Full<Bytes>> {
        let mut r = Response::new(Full::new(body));
        *r.status_mut() = self.status;
        *r.headers_mut() = self.headers.clone();
        // The body may have changed length: hyper sets it again.
        r.headers_mut().remove(http::header::CONTENT_LENGTH);
        r
    }
}

/// `CreateFleet` responses by `ClientToken`, when the proxy honours tokens (`None` when not).
type Tokens = Arc<Mutex<Option<BTreeMap<String, Arc<tokio::sync::OnceCell<Upstream>>>>>>;

/// What every connection of the proxy shares.
#[derive(Clone)]
struct Shared {
    upstream: SocketAddr,
    faults: Faults,
    calls: Arc<Mutex<Vec<(String, String)>>>,
    tokens: Tokens,
    /// Faults taken off the queues.
    used: Arc<AtomicUsize>,
    /// Calls being held by a [`Fault::Delay`] (on their way to moto).
    held: Arc<AtomicUsize>,
}

/// The running proxy.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Shared,
    _serving: Serving,
}

impl FaultProxy {
    /// A proxy on a free port of 127.0.0.1 passing calls to `upstream`.
    pub async fn start(upstream: SocketAddr) -> FaultProxy {
        let (listener, addr) = bind().await;
        let shared = Shared {
            upstream,
            faults: Arc::default(),
            calls: Arc::default(),
            tokens: Arc::default(),
            used: Arc::default(),
            held: Arc::default(),
        };
        let s = shared.clone();
        let serving = serve(listener, move |req| handle(req, s.clone()));
        FaultProxy {
            addr,
            shared,
            _serving: serving,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues `fault` for the next call of `action` (`CreateFleet`, `DescribeInstances`).
    pub fn inject(&self, action: &str, fault: Fault) {
        self.shared
            .faults
            .lock()
            .expect("faults")
            .entry(action.to_owned())
            .or_default()
            .push_back(fault);
    }

    /// How many calls of `action` reached the proxy.
    pub fn calls(&self, action: &str) -> usize {
        self.shared
            .calls
            .lock()
            .expect("calls")
            .iter()
            .filter(|(a, _)| a == action)
            .count()
    }

    /// The request bodies of the calls of `action`, in order.
    pub fn bodies(&self, action: &str) -> Vec<String> {
        self.shared
            .calls
            .lock()
            .expect("calls")
            .iter()
            .filter(|(a, _)| a == action)
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// How many calls reached the proxy, every action together.
    pub fn total_calls(&self) -> usize {
        self.shared.calls.lock().expect("calls").len()
    }

    /// How many queued faults were used by a call.
    pub fn faults_used(&self) -> usize {
        self.shared.used.load(Ordering::SeqCst)
    }

    /// Drops every fault still queued.
    pub fn clear_faults(&self) {
        self.shared.faults.lock().expect("faults").clear();
    }

    /// How many calls a [`Fault::Delay`] still holds on their way to moto.
    pub fn held(&self) -> usize {
        self.shared.held.load(Ordering::SeqCst)
    }

    /// From now on a `CreateFleet` whose `ClientToken` EC2 already has a call for gets that
    /// call's response (waiting for it when it is still being worked on, a [`Fault::Delay`]),
    /// without calling moto again: EC2's idempotency, which moto does not implement. A call
    /// that failed is forgotten (EC2 promises idempotency for successful calls only).
    pub fn honour_client_tokens(&self) {
        self.shared
            .tokens
            .lock()
            .expect("tokens")
            .get_or_insert_with(BTreeMap::new);
    }
}

fn xml(status: StatusCode, body: String) -> Upstream {
    Upstream {
        status,
        headers: http::HeaderMap::from_iter([(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/xml"),
        )]),
        body: Bytes::from(body),
    }
}

fn ec2_error(status: StatusCode, code: &str, message: &str) -> Upstream {
    xml(
        status,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>"
        ),
    )
}

/// A 200 CreateFleet response with one capacity error per override of the request.
fn fleet_errors(form: &BTreeMap<String, String>) -> Upstream {
    let mut items = String::new();
    for config in 1.. {
        let prefix = format!("LaunchTemplateConfigs.{config}.");
        let Some(template) = form.get(&format!(
            "{prefix}LaunchTemplateSpecification.LaunchTemplateId"
        )) else {
            break;
        };
        for n in 1.. {
            let o = format!("{prefix}Overrides.{n}.");
            let Some(instance_type) = form.get(&format!("{o}InstanceType")) else {
                break;
            };
            let subnet = form
                .get(&format!("{o}SubnetId"))
                .cloned()
                .unwrap_or_default();
            items.push_str(&format!(
                "<item><launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateId>{template}</launchTemplateId><version>1</version></launchTemplateSpecification><overrides><instanceType>{instance_type}</instanceType><subnetId>{subnet}</subnetId></overrides></launchTemplateAndOverrides><lifecycle>spot</lifecycle><errorCode>InsufficientInstanceCapacity</errorCode><errorMessage>We currently do not have sufficient {instance_type} capacity in the Availability Zone you requested.</errorMessage></item>"
            ));
        }
    }
    xml(
        StatusCode::OK,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>fault-proxy</requestId><fleetId>fleet-fault-proxy</fleetId><errorSet>{items}</errorSet><fleetInstanceSet/></CreateFleetResponse>"
        ),
    )
}

/// A proxy-made error.
fn upstream_error(message: &str) -> Upstream {
    ec2_error(StatusCode::BAD_GATEWAY, "InternalError", message)
}

async fn forward(upstream: SocketAddr, parts: http::request::Parts, body: Bytes) -> Upstream {
    let Ok(stream) = TcpStream::connect(upstream).await else {
        return upstream_error("moto is down");
    };
    let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        return upstream_error("handshake with moto");
    };
    tokio::spawn(conn);
    let request = Request::from_parts(parts, Full::new(body));
    match sender.send_request(request).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Upstream {
                status: parts.status,
                headers: parts.headers,
                body,
            }
        }
        Err(e) => upstream_error(&e.to_string()),
    }
}

/// A `CreateFleet` client token EC2 has (or is working on) a call for, when tokens are honoured.
struct Token {
    token: String,
    answer: Arc<tokio::sync::OnceCell<Upstream>>,
}

/// The client token of a `CreateFleet` call, when tokens are honoured.
fn token_of(shared: &Shared, action: &str, form: &BTreeMap<String, String>) -> Option<String> {
    let honoured = shared.tokens.lock().expect("tokens").is_some();
    (honoured && action == "CreateFleet")
        .then(|| form.get("ClientToken").cloned())
        .flatten()
}

/// Whether EC2 has (or is working on) a call with `token`.
fn known(shared: &Shared, token: Option<&String>) -> bool {
    token.is_some_and(|t| {
        shared
            .tokens
            .lock()
            .expect("tokens")
            .as_ref()
            .is_some_and(|tokens| tokens.contains_key(t))
    })
}

/// The call with `token` has reached EC2: later calls with it get its answer.
fn arrive(shared: &Shared, token: Option<String>) -> Option<Token> {
    let token = token?;
    let answer = shared
        .tokens
        .lock()
        .expect("tokens")
        .as_mut()?
        .entry(token.clone())
        .or_default()
        .clone();
    Some(Token { token, answer })
}

/// The call passed to moto — or, for a token EC2 already has a call for, that call's answer
/// (waiting for it). Only success is remembered: EC2's idempotency is for calls that completed
/// successfully, so a call with the token of a failed one is processed anew.
async fn upstream(
    shared: &Shared,
    token: Option<Token>,
    parts: http::request::Parts,
    body: Bytes,
) -> Upstream {
    let Some(Token { token, answer }) = token else {
        return forward(shared.upstream, parts, body).await;
    };
    let got = answer
        .get_or_init(|| forward(shared.upstream, parts, body))
        .await
        .clone();
    if !got.status.is_success() {
        let mut tokens = shared.tokens.lock().expect("tokens");
        if let Some(tokens) = tokens.as_mut()
            && tokens.get(&token).is_some_and(|a| Arc::ptr_eq(a, &answer))
        {
            tokens.remove(&token);
        }
    }
    got
}

/// Counts a call held by a [`Fault::Delay`] until it is done (or dropped).
struct Held(Arc<AtomicUsize>);

impl Held {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn handle(
    request: Request<Incoming>,
    shared: Shared,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let form: BTreeMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
    // Query protocol (EC2): the `Action` form field; JSON protocols (SQS, SSM): the operation
    // after the `.` of `X-Amz-Target`.
    let target = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.rsplit('.').next())
        .map(str::to_owned);
    let action = form.get("Action").cloned().or(target).unwrap_or_default();
    shared
        .calls
        .lock()
        .expect("calls")
        .push((action.clone(), String::from_utf8_lossy(&body).into_owned()));
    let fault = shared
        .faults
        .lock()
        .expect("faults")
        .get_mut(&action)
        .and_then(VecDeque::pop_front);
    if fault.is_some() {
        shared.used.fetch_add(1, Ordering::SeqCst);
    }
    let token = token_of(&shared, &action, &form);
    // EC2 answers a call whose token it already has (or is working on) as it answered that
    // call: not with a capacity error of its own.
    let fault = match fault {
        Some(Fault::CapacityError500 | Fault::CapacityInFleetResponse)
            if known(&shared, token.as_ref()) =>
        {
            None
        }
        other => other,
    };
    Ok(match fault {
        None => upstream(&shared, arrive(&shared, token), parts, body)
            .await
            .response(),
        Some(Fault::CapacityError500) => ec2_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InsufficientInstanceCapacity",
            "We currently do not have sufficient capacity in the Availability Zone you requested.",
        )
        .response(),
        Some(Fault::CapacityInFleetResponse) => fleet_errors(&form).response(),
        Some(Fault::Throttle { retry_after_secs }) => {
            let mut r = ec2_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "RequestLimitExceeded",
                "Request limit exceeded.",
            )
            .response();
            r.headers_mut()
                .insert("retry-after", http::HeaderValue::from(retry_after_secs));
            r
        }
        Some(Fault::Delay(d)) => {
            // EC2 has the call (a retry with its token waits for it) but is slow. A task of its
            // own: the call takes effect even if the client stopped waiting (and hyper dropped
            // this handler).
            let held = Held::new(&shared.held);
            let token = arrive(&shared, token);
            let late = tokio::spawn(async move {
                let _held = held;
                tokio::time::sleep(d).await;
                upstream(&shared, token, parts, body).await
            });
            match late.await {
                Ok(answer) => answer.response(),
                Err(_) => upstream_error("the delayed call failed").response(),
            }
        }
        Some(Fault::JsonReply(json)) => {
            let mut r = Response::new(Full::new(Bytes::from(json)));
            r.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("application/x-amz-json-1.1"),
            );
            r
        }
        Some(Fault::XmlReply { status, body }) => xml(
            StatusCode::from_u16(status).expect("a valid HTTP status"),
            body,
        )
        .response(),
        Some(Fault::LoseResponse) => {
            let _ = upstream(&shared, arrive(&shared, token), parts, body).await;
            ec2_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "An internal error has occurred.",
            )
            .response()
        }
        Some(Fault::Truncate(keep)) => {
            let answer = upstream(&shared, arrive(&shared, token), parts, body).await;
            let keep = keep.min(answer.body.len());
            answer.with_body(answer.body.slice(..keep))
        }
        Some(Fault::Rewrite(replacements)) => {
            let answer = upstream(&shared, arrive(&shared, token), parts, body).await;
            let mut text = String::from_utf8_lossy(&answer.body).into_owned();
            for (from, to) in &replacements {
                text = text.replace(from.as_str(), to);
            }
            answer.with_body(Bytes::from(text))
        }
    })
}
