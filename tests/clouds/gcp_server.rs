//! A small Compute Engine of ours on 127.0.0.1: the REST paths `google-cloud-compute-v1` calls
//! for the GCP provider (instances insert / get / aggregatedList / delete / reset,
//! reservations aggregatedList, zoneOperations get, zones get), holding instances (as inserted:
//! `scheduling`, `reservationAffinity` and all) and seeded reservations in memory, with
//! injectable faults: an insert whose operation finishes with `ZONE_RESOURCE_POOL_EXHAUSTED` for
//! a (machine type, zone), and HTTP errors (429, 500, ...) queued per call.
//!
//! Reservations are consumed as Compute Engine consumes them: an instance whose
//! `reservationAffinity` is `SPECIFIC_RESERVATION` takes a slot of the reservation it names (which
//! must exist in its zone, require specific targeting, hold its machine type and have a free
//! slot), and a standard (not spot, not flex-start) instance with `ANY_RESERVATION` or no
//! affinity takes a free slot of a matching reservation that VMs consume automatically; the
//! reservation's `inUseCount` counts them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use hyper::Method;
use serde_json::{Value, json};

use crate::local_server::{self, Api, LocalServer, Queued, Reply, Req};

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
    /// `instances.reset`.
    Reset,
    /// `reservations.aggregatedList`.
    Reservations,
}

/// A seeded reservation.
#[derive(Debug, Clone)]
struct SeededReservation {
    machine_type: String,
    count: i64,
    specific_required: bool,
    status: String,
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
    /// Every call, and the faults and raw answers queued per call.
    queued: Queued<Call, HttpFault>,
    /// Operations are `RUNNING` for this many polls before they are `DONE`.
    polls_before_done: u32,
    next_op: u64,
    /// (project, zone, name) -> reservation.
    reservations: BTreeMap<(String, String, String), SeededReservation>,
    /// (project, zone, instance) -> the reservation (in its zone) the instance consumes.
    consumed: BTreeMap<(String, String, String), String>,
    /// Reservations per page of `reservations.aggregatedList`.
    reservations_page_size: usize,
}

/// The running server; stops when dropped.
pub struct GcpServer(LocalServer<State>);

impl GcpServer {
    /// A server on a free port of 127.0.0.1; operations need one poll before they are done.
    pub async fn start() -> GcpServer {
        GcpServer(
            LocalServer::start(State {
                polls_before_done: 1,
                reservations_page_size: 500,
                ..State::default()
            })
            .await,
        )
    }

    /// `http://127.0.0.1:PORT`, for `with_endpoint`.
    pub fn endpoint(&self) -> String {
        self.0.endpoint()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state()
    }

    /// Inserts of `machine_type` in `zone` finish with `ZONE_RESOURCE_POOL_EXHAUSTED`.
    pub fn exhaust(&self, machine_type: &str, zone: &str) {
        self.state()
            .exhausted
            .insert((machine_type.to_owned(), zone.to_owned()));
    }

    /// The next `call` answers `fault`.
    pub fn fail_next(&self, call: Call, fault: HttpFault) {
        self.state().queued.fail_next(call, fault);
    }

    /// The next `call` is answered `status` with `body` verbatim (`application/json`, whatever
    /// it holds), without doing anything: malformed or surprising responses.
    pub fn reply_next(&self, call: Call, status: u16, body: impl Into<String>) {
        self.state().queued.reply_next(call, status, body.into());
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

    /// Holds a `READY` reservation of `count` `machine_type` in `zone`; with `specific_required`
    /// only instances naming it may consume it.
    pub fn put_reservation(
        &self,
        project: &str,
        zone: &str,
        name: &str,
        machine_type: &str,
        count: i64,
        specific_required: bool,
    ) {
        self.state().reservations.insert(
            (project.to_owned(), zone.to_owned(), name.to_owned()),
            SeededReservation {
                machine_type: machine_type.to_owned(),
                count,
                specific_required,
                status: "READY".to_owned(),
            },
        );
    }

    /// Sets a reservation's status (`CREATING`, `DELETING`).
    pub fn set_reservation_status(&self, project: &str, zone: &str, name: &str, status: &str) {
        if let Some(r) = self.state().reservations.get_mut(&(
            project.to_owned(),
            zone.to_owned(),
            name.to_owned(),
        )) {
            r.status = status.to_owned();
        }
    }

    /// `reservations.aggregatedList` answers at most `n` reservations a page.
    pub fn reservations_per_page(&self, n: usize) {
        self.state().reservations_page_size = n.max(1);
    }

    /// A reservation's `inUseCount`.
    pub fn in_use(&self, project: &str, zone: &str, name: &str) -> i64 {
        in_use(&self.state(), project, zone, name)
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
        self.state().queued.count(prefix)
    }
}

/// How many instances consume reservation `name` of `project` in `zone`.
fn in_use(st: &State, project: &str, zone: &str, name: &str) -> i64 {
    let n = st
        .consumed
        .iter()
        .filter(|((p, z, _), r)| p == project && z == zone && r.as_str() == name)
        .count();
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A reservation as `reservations.aggregatedList` shows it (int64 fields as strings).
fn reservation_json(st: &State, (project, zone, name): &(String, String, String)) -> Value {
    let r = &st.reservations[&(project.clone(), zone.clone(), name.clone())];
    let base = format!("https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}");
    json!({
        "kind": "compute#reservation",
        "name": name,
        "zone": base,
        "selfLink": format!("{base}/reservations/{name}"),
        "status": r.status,
        "specificReservationRequired": r.specific_required,
        "specificReservation": {
            "instanceProperties": {"machineType": r.machine_type},
            "count": r.count.to_string(),
            "inUseCount": in_use(st, project, zone, name).to_string(),
        },
    })
}

/// The reservation an instance inserted with `body` in `zone` consumes: `Ok(None)` for none,
/// `Err` (HTTP status, reason, message) when Compute Engine refuses the insert at once, and
/// `Ok(Some(Err(message)))` when the operation fails for want of a slot.
#[allow(clippy::type_complexity)]
fn consumption(
    st: &State,
    project: &str,
    zone: &str,
    machine_type: &str,
    body: &Value,
) -> Result<Option<Result<String, String>>, (u16, &'static str, String)> {
    let affinity = &body["reservationAffinity"];
    let kind = affinity["consumeReservationType"]
        .as_str()
        .unwrap_or("ANY_RESERVATION");
    let model = body["scheduling"]["provisioningModel"]
        .as_str()
        .unwrap_or("STANDARD");
    let free = |name: &str, r: &SeededReservation| {
        r.status == "READY"
            && r.machine_type == machine_type
            && in_use(st, project, zone, name) < r.count
    };
    match kind {
        "NO_RESERVATION" => Ok(None),
        "SPECIFIC_RESERVATION" => {
            let key = affinity["key"].as_str().unwrap_or_default();
            let name = affinity["values"][0].as_str().unwrap_or_default();
            if key != "compute.googleapis.com/reservation-name" || name.is_empty() {
                return Err((
                    400,
                    "invalid",
                    format!("Invalid value for field 'resource.reservationAffinity': key {key:?}"),
                ));
            }
            if model != "STANDARD" {
                return Err((
                    400,
                    "invalid",
                    format!("{model} instances cannot consume reservations"),
                ));
            }
            let Some(r) =
                st.reservations
                    .get(&(project.to_owned(), zone.to_owned(), name.to_owned()))
            else {
                return Err((
                    400,
                    "invalid",
                    format!("Could not find the given reservation with the following name: {name}"),
                ));
            };
            if !r.specific_required {
                return Err((
                    400,
                    "invalid",
                    format!(
                        "Specified reservations [projects/{project}/reservations/{name}] can not be targeted as specificReservationRequired is not set"
                    ),
                ));
            }
            if r.machine_type != machine_type {
                return Err((
                    400,
                    "invalid",
                    format!("Reservation {name} is incorrect for the requested resources"),
                ));
            }
            Ok(Some(if free(name, r) {
                Ok(name.to_owned())
            } else {
                Err(format!(
                    "Reservation {name} does not have sufficient capacity for the requested resources."
                ))
            }))
        }
        _ if model != "STANDARD" => Ok(None),
        _ => Ok(st
            .reservations
            .iter()
            .find(|((p, z, n), r)| p == project && z == zone && !r.specific_required && free(n, r))
            .map(|((_, _, n), _)| Ok(n.clone()))),
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

fn reply(status: u16, body: &Value, retry_after: Option<u64>) -> Reply {
    let headers: Vec<(&str, String)> = retry_after
        .map(|s| ("retry-after", s.to_string()))
        .into_iter()
        .collect();
    local_server::reply(status, body, &headers)
}

fn error(status: u16, reason: &str, message: &str, retry_after: Option<u64>) -> Reply {
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

impl Api for State {
    type Call = Call;
    type Fault = HttpFault;

    fn queued(&mut self) -> &mut Queued<Call, HttpFault> {
        &mut self.queued
    }

    fn call_of(&self, req: &Req) -> Result<Call, Box<Reply>> {
        let (method, path) = (&req.method, &req.path);
        let segments: Vec<&str> = path.trim_start_matches("/compute/v1/").split('/').collect();
        let call = match (method, segments.as_slice()) {
            (&Method::POST, ["projects", _, "zones", _, "instances"]) => Call::Insert,
            (&Method::GET, ["projects", _, "zones", _, "instances", _]) => Call::Get,
            (&Method::DELETE, ["projects", _, "zones", _, "instances", _]) => Call::Delete,
            (&Method::POST, ["projects", _, "zones", _, "instances", _, "reset"]) => Call::Reset,
            (&Method::GET, ["projects", _, "aggregated", "reservations"]) => Call::Reservations,
            (&Method::GET, ["projects", _, "aggregated", "instances"]) => Call::List,
            (&Method::GET, ["projects", _, "zones", _, "operations", _]) => Call::Operation,
            (&Method::GET, ["projects", _, "zones", _]) => Call::Zone,
            _ => {
                return Err(Box::new(error(
                    404,
                    "notFound",
                    &format!("no route {method} {path}"),
                    None,
                )));
            }
        };
        Ok(call)
    }

    fn fault(&self, f: &HttpFault) -> Reply {
        error(f.status, &f.reason, "injected fault", f.retry_after)
    }

    fn answer(&mut self, call: Call, req: Req, _addr: SocketAddr) -> Reply {
        let st = &mut *self;
        let (path, q, body) = (&req.path, &req.query, &req.body);
        let segments: Vec<&str> = path.trim_start_matches("/compute/v1/").split('/').collect();
        let project = segments[1].to_owned();
        match call {
            Call::Insert => {
                let zone = segments[3].to_owned();
                let Ok(instance) = serde_json::from_slice::<Value>(body) else {
                    return error(400, "invalid", "the body is not JSON", None);
                };
                insert(st, &project, &zone, q, instance)
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
                    return error(404, "notFound", "The resource was not found", None);
                }
                st.consumed.remove(&key);
                let op = new_operation(st, &project, &key.1, "delete", None);
                reply(200, &op, None)
            }
            Call::Reset => {
                let key = (
                    project.clone(),
                    segments[3].to_owned(),
                    segments[5].to_owned(),
                );
                if !st.instances.contains_key(&key) {
                    return error(
                        404,
                        "notFound",
                        &format!(
                            "The resource 'projects/{project}/zones/{}/instances/{}' was not found",
                            key.1, key.2
                        ),
                        None,
                    );
                }
                let op = new_operation(st, &project, &key.1, "reset", None);
                reply(200, &op, None)
            }
            Call::Reservations => {
                let keys: Vec<(String, String, String)> = st
                    .reservations
                    .keys()
                    .filter(|(p, _, _)| *p == project)
                    .cloned()
                    .collect();
                let start: usize = q.get("pageToken").and_then(|t| t.parse().ok()).unwrap_or(0);
                let end = (start + st.reservations_page_size).min(keys.len());
                let mut items: BTreeMap<String, Vec<Value>> = BTreeMap::new();
                for k in keys.get(start..end).unwrap_or_default() {
                    items
                        .entry(format!("zones/{}", k.1))
                        .or_default()
                        .push(reservation_json(st, k));
                }
                let mut items: BTreeMap<String, Value> = items
                    .into_iter()
                    .map(|(k, v)| (k, json!({"reservations": v})))
                    .collect();
                // A zone without reservations answers a warning instead, as Compute Engine does.
                items.insert(
                "zones/us-central1-f".to_owned(),
                json!({"warning": {"code": "NO_RESULTS_ON_PAGE",
                                   "message": "There are no results for scope 'zones/us-central1-f' on this page."}}),
            );
                let mut page = json!({"kind": "compute#reservationAggregatedList", "items": items});
                if end < keys.len() {
                    page["nextPageToken"] = json!(end.to_string());
                }
                reply(200, &page, None)
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
        }
    }
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
) -> Reply {
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
    let reservation = match consumption(st, project, zone, &machine_type, &body) {
        Ok(r) => r,
        Err((status, reason, message)) => return error(status, reason, &message, None),
    };
    let op = if let Some(Err(message)) = &reservation {
        // The code Compute Engine gives here is not documented; the provider reads the words.
        new_operation(
            st,
            project,
            zone,
            "insert",
            Some(("RESERVATION_UNAVAILABLE", message.as_str())),
        )
    } else if exhausted && reservation.is_none() {
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
        if let Some(Ok(r)) = reservation {
            st.consumed.insert(key.clone(), r);
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
