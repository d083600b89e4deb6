//! A small Compute Engine of ours on 127.0.0.1: the REST paths `google-cloud-compute-v1` calls
//! for the GCP provider (instances insert / get / aggregatedList / delete, zoneOperations get,
//! zones get), holding instances in memory, with injectable faults: an insert whose operation
//! finishes with `ZONE_RESOURCE_POOL_EXHAUSTED` for a (machine type, zone), and HTTP errors
//! (429, 500, ...) queued per call.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The kinds of call faults can be queued for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Call {
    /// `instances.insert`.
    Insert,
    /// `instances.get`.
    Get,
    /// `instances.aggregatedList`.
    List,
    /// `instances.delete`.
    Delete,
    /// `zoneOperations.get`.
    Operation,
    /// `zones.get`.
    Zone,
}

/// An HTTP error answered instead of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpFault {
    /// HTTP status.
    pub status: u16,
    /// The `errors[].reason` / `ErrorInfo.reason` (`rateLimitExceeded`).
    pub reason: String,
    /// A `Retry-After` header, seconds.
    pub retry_after: Option<u64>,
}

impl HttpFault {
    /// 429 `rateLimitExceeded` with `Retry-After: 3`.
    pub fn throttled() -> Self {
        Self {
            status: 429,
            reason: "rateLimitExceeded".into(),
            retry_after: Some(3),
        }
    }

    /// 500 `backendError`.
    pub fn internal() -> Self {
        Self {
            status: 500,
            reason: "backendError".into(),
            retry_after: None,
        }
    }
}

#[derive(Default)]
struct State {
    /// (project, zone, name) -> instance JSON.
    instances: BTreeMap<(String, String, String), Value>,
    /// Operation name -> (operation JSON when done, polls left before it is done).
    operations: BTreeMap<String, (Value, u32)>,
    /// requestId -> operation name (Compute Engine deduplicates inserts by it).
    request_ids: BTreeMap<String, String>,
    /// (machine type, zone) without capacity.
    exhausted: BTreeSet<(String, String)>,
    /// Queued faults per call.
    faults: BTreeMap<Call, VecDeque<HttpFault>>,
    /// Queued raw answers per call: (status, body), answered instead of the call.
    canned: BTreeMap<Call, VecDeque<(u16, String)>>,
    /// Every call, `METHOD path`.
    calls: Vec<String>,
    /// Operations are `RUNNING` for this many polls before they are `DONE`.
    polls_before_done: u32,
    next_op: u64,
}

/// The running server; stops when dropped.
pub struct GcpServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GcpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GcpServer {
    /// A server on a free port of 127.0.0.1; operations need one poll before they are done.
    pub async fn start() -> GcpServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the GCP server");
        let addr = listener.local_addr().expect("server address");
        let state = Arc::new(Mutex::new(State {
            polls_before_done: 1,
            ..State::default()
        }));
        let s = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let s = s.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, s.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        GcpServer { addr, state, task }
    }

    /// `http://127.0.0.1:PORT`, for `with_endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Inserts of `machine_type` in `zone` finish with `ZONE_RESOURCE_POOL_EXHAUSTED`.
    pub fn exhaust(&self, machine_type: &str, zone: &str) {
        self.state()
            .exhausted
            .insert((machine_type.to_owned(), zone.to_owned()));
    }

    /// The next `call` answers `fault`.
    pub fn fail_next(&self, call: Call, fault: HttpFault) {
        self.state()
            .faults
            .entry(call)
            .or_default()
            .push_back(fault);
    }

    /// The next `call` is answered `status` with `body` verbatim (`application/json`, whatever
    /// it holds), without doing anything: malformed or surprising responses.
    pub fn reply_next(&self, call: Call, status: u16, body: impl Into<String>) {
        self.state()
            .canned
            .entry(call)
            .or_default()
            .push_back((status, body.into()));
    }

    /// Puts an instance in place, as if launched earlier (or by someone else).
    pub fn put_instance(
        &self,
        project: &str,
        zone: &str,
        name: &str,
        machine_type: &str,
        labels: &[(&str, &str)],
    ) {
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        let body = json!({
            "name": name,
            "machineType": format!("zones/{zone}/machineTypes/{machine_type}"),
            "labels": labels,
        });
        let instance = stored_instance(project, zone, &body, "RUNNING");
        self.state().instances.insert(
            (project.to_owned(), zone.to_owned(), name.to_owned()),
            instance,
        );
    }

    /// Sets an instance's status (`STOPPING` for a preempted spot instance) and, with it,
    /// `lastStopTimestamp`.
    pub fn set_status(&self, project: &str, zone: &str, name: &str, status: &str) {
        let mut st = self.state();
        if let Some(i) =
            st.instances
                .get_mut(&(project.to_owned(), zone.to_owned(), name.to_owned()))
        {
            i["status"] = json!(status);
            i["lastStopTimestamp"] = json!("2026-12-01T00:00:00.000-08:00");
        }
    }

    /// The instances held, `zone/name`.
    pub fn instances(&self) -> Vec<String> {
        self.state()
            .instances
            .keys()
            .map(|(_, z, n)| format!("{z}/{n}"))
            .collect()
    }

    /// One instance's JSON, as stored.
    pub fn instance(&self, project: &str, zone: &str, name: &str) -> Option<Value> {
        self.state()
            .instances
            .get(&(project.to_owned(), zone.to_owned(), name.to_owned()))
            .cloned()
    }

    /// How many calls started with `prefix` (`POST`, `GET /compute/v1/...`).
    pub fn calls(&self, prefix: &str) -> usize {
        self.state()
            .calls
            .iter()
            .filter(|c| c.starts_with(prefix))
            .count()
    }
}

fn stored_instance(project: &str, zone: &str, body: &Value, status: &str) -> Value {
    let mut i = body.clone();
    let base = format!("https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}");
    let machine_type = body["machineType"]
        .as_str()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    i["kind"] = json!("compute#instance");
    i["zone"] = json!(base);
    i["machineType"] = json!(format!("{base}/machineTypes/{machine_type}"));
    i["status"] = json!(status);
    i["creationTimestamp"] = json!("2026-12-01T00:00:00.000-08:00");
    i["selfLink"] = json!(format!(
        "{base}/instances/{}",
        body["name"].as_str().unwrap_or_default()
    ));
    i
}

fn reply(status: u16, body: &Value, retry_after: Option<u64>) -> Response<Full<Bytes>> {
    let mut r = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json");
    if let Some(s) = retry_after {
        r = r.header("retry-after", s.to_string());
    }
    r.body(Full::new(Bytes::from(body.to_string())))
        .expect("a valid response")
}

fn raw(status: u16, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

fn error(
    status: u16,
    reason: &str,
    message: &str,
    retry_after: Option<u64>,
) -> Response<Full<Bytes>> {
    let rpc_status = match status {
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        429 => "RESOURCE_EXHAUSTED",
        400 => "INVALID_ARGUMENT",
        _ => "INTERNAL",
    };
    let body = json!({"error": {
        "code": status,
        "message": message,
        "status": rpc_status,
        "errors": [{"message": message, "domain": "global", "reason": reason}],
        "details": [{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "compute.googleapis.com",
        }],
    }});
    reply(status, &body, retry_after)
}

/// The `labels.KEY = "VALUE"` terms of a filter (joined by AND).
fn label_terms(filter: &str) -> Vec<(String, String)> {
    filter
        .split("labels.")
        .skip(1)
        .filter_map(|term| {
            let (key, rest) = term.split_once('=')?;
            let value = rest.split('"').nth(1)?;
            Some((key.trim().to_owned(), value.to_owned()))
        })
        .collect()
}

fn query(req: &Request<Incoming>) -> BTreeMap<String, String> {
    req.uri()
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let q = query(&req);
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    st.calls.push(format!("{method} {path}"));
    let segments: Vec<&str> = path.trim_start_matches("/compute/v1/").split('/').collect();
    let call = match (&method, segments.as_slice()) {
        (&Method::POST, ["projects", _, "zones", _, "instances"]) => Call::Insert,
        (&Method::GET, ["projects", _, "zones", _, "instances", _]) => Call::Get,
        (&Method::DELETE, ["projects", _, "zones", _, "instances", _]) => Call::Delete,
        (&Method::GET, ["projects", _, "aggregated", "instances"]) => Call::List,
        (&Method::GET, ["projects", _, "zones", _, "operations", _]) => Call::Operation,
        (&Method::GET, ["projects", _, "zones", _]) => Call::Zone,
        _ => {
            return Ok(error(
                404,
                "notFound",
                &format!("no route {method} {path}"),
                None,
            ));
        }
    };
    if let Some(f) = st.faults.get_mut(&call).and_then(VecDeque::pop_front) {
        return Ok(error(f.status, &f.reason, "injected fault", f.retry_after));
    }
    if let Some((status, body)) = st.canned.get_mut(&call).and_then(VecDeque::pop_front) {
        return Ok(raw(status, body));
    }
    let project = segments[1].to_owned();
    Ok(match call {
        Call::Insert => {
            let zone = segments[3].to_owned();
            let Ok(instance) = serde_json::from_slice::<Value>(&body) else {
                return Ok(error(400, "invalid", "the body is not JSON", None));
            };
            insert(&mut st, &project, &zone, &q, instance)
        }
        Call::Get => match st.instances.get(&(
            project.clone(),
            segments[3].to_owned(),
            segments[5].to_owned(),
        )) {
            Some(i) => reply(200, i, None),
            None => error(404, "notFound", "The resource was not found", None),
        },
        Call::Delete => {
            let key = (
                project.clone(),
                segments[3].to_owned(),
                segments[5].to_owned(),
            );
            if st.instances.remove(&key).is_none() {
                return Ok(error(404, "notFound", "The resource was not found", None));
            }
            let op = new_operation(&mut st, &project, &key.1, "delete", None);
            reply(200, &op, None)
        }
        Call::List => {
            let terms = label_terms(q.get("filter").map(String::as_str).unwrap_or_default());
            let mut items: BTreeMap<String, Vec<Value>> = BTreeMap::new();
            for ((p, zone, _), i) in &st.instances {
                let matches = terms
                    .iter()
                    .all(|(k, v)| i["labels"][k].as_str() == Some(v.as_str()));
                if *p == project && matches {
                    items
                        .entry(format!("zones/{zone}"))
                        .or_default()
                        .push(i.clone());
                }
            }
            let items: BTreeMap<String, Value> = items
                .into_iter()
                .map(|(k, v)| (k, json!({"instances": v})))
                .collect();
            reply(
                200,
                &json!({"kind": "compute#instanceAggregatedList", "items": items}),
                None,
            )
        }
        Call::Operation => match st.operations.get_mut(segments[5]) {
            Some((op, polls_left)) => {
                let mut op = op.clone();
                if *polls_left > 0 {
                    *polls_left -= 1;
                    op["status"] = json!("RUNNING");
                    if let Some(o) = op.as_object_mut() {
                        o.remove("error");
                        o.remove("httpErrorStatusCode");
                    }
                }
                reply(200, &op, None)
            }
            None => error(404, "notFound", "no such operation", None),
        },
        Call::Zone => {
            let zone = segments[3];
            if zone.starts_with("us-central1-") || zone.starts_with("europe-west4-") {
                reply(
                    200,
                    &json!({"kind": "compute#zone", "name": zone, "status": "UP"}),
                    None,
                )
            } else {
                error(
                    404,
                    "notFound",
                    &format!("The resource 'projects/{project}/zones/{zone}' was not found"),
                    None,
                )
            }
        }
    })
}

fn new_operation(
    st: &mut State,
    project: &str,
    zone: &str,
    kind: &str,
    failure: Option<(&str, &str)>,
) -> Value {
    st.next_op += 1;
    let name = format!("operation-{}-{kind}", st.next_op);
    let mut done = json!({
        "kind": "compute#operation",
        "name": name,
        "operationType": kind,
        "status": "DONE",
        "zone": format!("https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"),
    });
    if let Some((code, message)) = failure {
        done["error"] = json!({"errors": [{"code": code, "message": message}]});
        done["httpErrorStatusCode"] = json!(503);
    }
    let polls = st.polls_before_done;
    st.operations.insert(name, (done.clone(), polls));
    let mut first = done;
    if polls > 0 {
        first["status"] = json!("RUNNING");
        if let Some(o) = first.as_object_mut() {
            o.remove("error");
            o.remove("httpErrorStatusCode");
        }
    }
    first
}

fn insert(
    st: &mut State,
    project: &str,
    zone: &str,
    q: &BTreeMap<String, String>,
    body: Value,
) -> Response<Full<Bytes>> {
    if let Some(op) = q
        .get("requestId")
        .and_then(|id| st.request_ids.get(id))
        .and_then(|name| st.operations.get(name))
    {
        // The same requestId again: the same operation.
        return reply(200, &op.0, None);
    }
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    if name.is_empty() {
        return error(
            400,
            "required",
            "Required field 'resource.name' not specified",
            None,
        );
    }
    let key = (project.to_owned(), zone.to_owned(), name.clone());
    if st.instances.contains_key(&key) {
        return error(
            409,
            "alreadyExists",
            &format!(
                "The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists"
            ),
            None,
        );
    }
    let machine_type = body["machineType"]
        .as_str()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let exhausted = st
        .exhausted
        .contains(&(machine_type.clone(), zone.to_owned()));
    let op = if exhausted {
        let message = format!(
            "The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill the request. Try a different zone, or try again later."
        );
        new_operation(
            st,
            project,
            zone,
            "insert",
            Some(("ZONE_RESOURCE_POOL_EXHAUSTED", &message)),
        )
    } else {
        let mut body = body;
        if let Some(t) = q.get("sourceInstanceTemplate") {
            body["sourceInstanceTemplate"] = json!(t);
        }
        st.instances
            .insert(key, stored_instance(project, zone, &body, "PROVISIONING"));
        new_operation(st, project, zone, "insert", None)
    };
    if let Some(id) = q.get("requestId") {
        let op_name = op["name"].as_str().unwrap_or_default().to_owned();
        st.request_ids.insert(id.clone(), op_name);
    }
    reply(200, &op, None)
}
