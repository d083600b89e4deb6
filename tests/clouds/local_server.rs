//! The HTTP plumbing our local cloud servers share (the GCP and the Azure one): a hyper server
//! on a free port of 127.0.0.1 that stops when dropped, every request read whole and answered
//! under the state's lock, each call recorded as `METHOD path`, and answers queued per call —
//! an injected fault or a canned `(status, body)` — answered before the call is served. Each
//! server keeps only its REST shapes: which call a request is ([`Api::call_of`]), what a fault
//! looks like in its error format ([`Api::fault`]), and the answer ([`Api::answer`]). The fault
//! proxy in front of moto serves its requests through [`serve`] too.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;

/// What a handler answers.
pub type Reply = Response<Full<Bytes>>;

/// A request, read whole.
pub struct Req {
    /// The method.
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    /// The query's pairs.
    pub query: BTreeMap<String, String>,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// The calls a server got, and the answers queued per kind of call.
pub struct Queued<C, F> {
    /// Every call, `METHOD path`.
    pub calls: Vec<String>,
    faults: BTreeMap<C, VecDeque<F>>,
    canned: BTreeMap<C, VecDeque<(u16, String)>>,
}

impl<C, F> Default for Queued<C, F> {
    fn default() -> Self {
        Self {
            calls: Vec::new(),
            faults: BTreeMap::new(),
            canned: BTreeMap::new(),
        }
    }
}

impl<C: Ord, F> Queued<C, F> {
    /// The next `call` answers `fault`.
    pub fn fail_next(&mut self, call: C, fault: F) {
        self.faults.entry(call).or_default().push_back(fault);
    }

    /// The next `call` is answered `status` with `body` verbatim (`application/json`, whatever
    /// it holds), without doing anything.
    pub fn reply_next(&mut self, call: C, status: u16, body: String) {
        self.canned
            .entry(call)
            .or_default()
            .push_back((status, body));
    }

    /// How many calls started with `prefix` (`POST /compute/v1/…`).
    pub fn count(&self, prefix: &str) -> usize {
        self.calls.iter().filter(|c| c.starts_with(prefix)).count()
    }
}

/// One cloud's REST shapes over its in-memory state.
pub trait Api: Send + 'static {
    /// The kinds of call faults can be queued for.
    type Call: Ord + Copy;
    /// A fault as the tests queue it.
    type Fault;
    /// The calls and queued answers.
    fn queued(&mut self) -> &mut Queued<Self::Call, Self::Fault>;
    /// Which call `req` is, or the answer to a request that is none (an unknown route, a
    /// missing token).
    fn call_of(&self, req: &Req) -> Result<Self::Call, Box<Reply>>;
    /// `fault` in the cloud's error format.
    fn fault(&self, fault: &Self::Fault) -> Reply;
    /// The answer to `call`; `addr` is the server's own address (for URLs in answers).
    fn answer(&mut self, call: Self::Call, req: Req, addr: SocketAddr) -> Reply;
}

/// Requests served by a task of their own until this is dropped.
pub struct Serving(tokio::task::JoinHandle<()>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A listener on a free port of 127.0.0.1, and its address.
pub async fn bind() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local server");
    let addr = listener.local_addr().expect("server address");
    (listener, addr)
}

/// Serves every connection `listener` accepts with `handle` (HTTP/1.1).
pub fn serve<H, F>(listener: TcpListener, handle: H) -> Serving
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Reply, Infallible>> + Send + 'static,
{
    Serving(tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let handle = handle.clone();
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(handle))
                    .await;
            });
        }
    }))
}

/// A running server; stops when dropped.
pub struct LocalServer<A> {
    addr: SocketAddr,
    state: Arc<Mutex<A>>,
    _serving: Serving,
}

impl<A: Api> LocalServer<A> {
    /// Serves `api` on a free port of 127.0.0.1.
    pub async fn start(api: A) -> LocalServer<A> {
        let (listener, addr) = bind().await;
        let state = Arc::new(Mutex::new(api));
        let s = state.clone();
        let serving = serve(listener, move |req| answer(req, s.clone(), addr));
        LocalServer {
            addr,
            state,
            _serving: serving,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The state, locked.
    pub fn state(&self) -> MutexGuard<'_, A> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn answer<A: Api>(
    req: Request<Incoming>,
    state: Arc<Mutex<A>>,
    addr: SocketAddr,
) -> Result<Reply, Infallible> {
    let (parts, body) = req.into_parts();
    let query = parts
        .uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let req = Req {
        method: parts.method,
        path: parts.uri.path().to_owned(),
        query,
        headers: parts.headers,
        body,
    };
    let mut api = state.lock().unwrap_or_else(|e| e.into_inner());
    let queued = api.queued();
    queued.calls.push(format!("{} {}", req.method, req.path));
    let call = match api.call_of(&req) {
        Ok(call) => call,
        Err(reply) => return Ok(*reply),
    };
    let queued = api.queued();
    if let Some(f) = queued.faults.get_mut(&call).and_then(VecDeque::pop_front) {
        return Ok(api.fault(&f));
    }
    if let Some((status, body)) = queued.canned.get_mut(&call).and_then(VecDeque::pop_front) {
        return Ok(raw(status, body));
    }
    Ok(api.answer(call, req, addr))
}

/// `body` as JSON with `status` and `headers`.
pub fn reply(status: u16, body: &Value, headers: &[(&str, String)]) -> Reply {
    raw_with(status, body.to_string(), headers)
}

/// `body` verbatim as `application/json` with `status`.
pub fn raw(status: u16, body: String) -> Reply {
    raw_with(status, body, &[])
}

fn raw_with(status: u16, body: String, headers: &[(&str, String)]) -> Reply {
    let mut r = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json");
    for (k, v) in headers {
        r = r.header(*k, v);
    }
    r.body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}
