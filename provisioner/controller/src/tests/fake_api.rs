//! A mocked API server behind a real `kube::Client` (`tower_test::mock::pair`): it keeps the
//! objects it is given and written, answers GET / LIST (label selectors) / POST / PATCH (merge
//! and apply, `resourceVersion` preconditions; an apply creates a missing object) / PUT / DELETE (finalizers hold objects with a
//! `deletionTimestamp`) and evictions, and logs every request so tests can check their order
//! and that each is allowed by the RBAC tables.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Logged {
    /// HTTP method.
    pub method: String,
    /// API group (`""` for core).
    pub group: String,
    /// Resource plural, with `/subresource`.
    pub resource: String,
    /// Object name, if any.
    pub name: Option<String>,
    /// The JSON body, if any.
    pub body: Value,
}

impl Logged {
    /// The RBAC verb of this request.
    pub fn verb(&self) -> &'static str {
        match (self.method.as_str(), self.name.is_some()) {
            ("GET", true) => "get",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PATCH", _) => "patch",
            ("PUT", _) => "update",
            ("DELETE", _) => "delete",
            _ => "unknown",
        }
    }

    /// `VERB resource/name`, for readable assertions.
    pub fn short(&self) -> String {
        format!(
            "{} {}{}",
            self.verb(),
            self.resource,
            self.name
                .as_deref()
                .map(|n| format!("/{n}"))
                .unwrap_or_default()
        )
    }
}

#[derive(Default)]
struct State {
    /// (group, resource) → name (namespaced: "ns/name") → object.
    objects: BTreeMap<(String, String), BTreeMap<String, Value>>,
    log: Vec<Logged>,
    version: u64,
    /// Answers to give instead of the usual ones: `(method, resource, code, reason)`, each used
    /// by the first request that matches it.
    faults: Vec<(String, String, u16, String)>,
}

/// The server. Cheap to clone; clones share state.
#[derive(Clone, Default)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

struct Target {
    group: String,
    resource: String,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn parse(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match *parts.first()? {
        "api" => (String::new(), &parts[2..]),
        "apis" => (parts.get(1)?.to_string(), &parts[3..]),
        _ => return None,
    };
    let (namespace, rest) = if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        (Some(rest[1].to_owned()), &rest[2..])
    } else {
        (None, rest)
    };
    Some(Target {
        group,
        resource: rest.first()?.to_string(),
        namespace,
        name: rest.get(1).map(|s| s.to_string()),
        sub: rest.get(2).map(|s| s.to_string()),
    })
}

fn key(namespace: &Option<String>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn status(code: u16, reason: &str, message: String) -> Response<Body> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        .expect("a response")
}

fn ok(code: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .body(Body::from(serde_json::to_vec(body).unwrap_or_default()))
        .expect("a response")
}

fn selector_matches(object: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let labels = &object["metadata"]["labels"];
        match term.split_once('=') {
            Some((k, v)) => labels[k.trim_end_matches('=')].as_str() == Some(v),
            None => !labels[term].is_null(),
        }
    })
}

impl FakeApi {
    /// The next `method` request on `resource` (plural, e.g. `nodeclaims`) is answered with
    /// `code` and `reason` and changes nothing.
    pub fn fail_next(&self, method: &str, resource: &str, code: u16, reason: &str) {
        self.state.lock().unwrap().faults.push((
            method.to_owned(),
            resource.to_owned(),
            code,
            reason.to_owned(),
        ));
    }

    /// A client talking to this server (serves requests in a task on the current runtime).
    pub fn client(&self) -> kube::Client {
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let me = self.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let (parts, body) = request.into_parts();
                let bytes = http_body_util::BodyExt::collect(body)
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let response = me.answer(parts.method.as_str(), &parts.uri, body);
                send.send_response(response);
            }
        });
        kube::Client::new(svc, "default")
    }

    /// Puts an object in (as if created by someone else); no log entry.
    pub fn insert(&self, group: &str, resource: &str, mut object: Value) {
        let mut s = self.state.lock().unwrap();
        s.version += 1;
        let rv = s.version.to_string();
        let meta = &mut object["metadata"];
        meta["resourceVersion"] = json!(rv);
        if meta["uid"].is_null() {
            meta["uid"] = json!(format!("uid-{rv}"));
        }
        if meta["creationTimestamp"].is_null() {
            meta["creationTimestamp"] = json!("2027-01-15T08:00:00Z");
        }
        let name = meta["name"].as_str().unwrap_or_default().to_owned();
        let ns = meta["namespace"].as_str().map(str::to_owned);
        s.objects
            .entry((group.to_owned(), resource.to_owned()))
            .or_default()
            .insert(key(&ns, &name), object);
    }

    /// Changes an object in place (as if another component did); no log entry.
    pub fn modify(&self, group: &str, resource: &str, name: &str, patch: Value) {
        let mut s = self.state.lock().unwrap();
        s.version += 1;
        let rv = s.version.to_string();
        if let Some(o) = s
            .objects
            .get_mut(&(group.to_owned(), resource.to_owned()))
            .and_then(|m| m.get_mut(name))
        {
            merge(o, &patch);
            o["metadata"]["resourceVersion"] = json!(rv);
        }
    }

    /// Removes an object (as if deleted behind the controller's back); no log entry.
    pub fn remove(&self, group: &str, resource: &str, name: &str) {
        let mut s = self.state.lock().unwrap();
        if let Some(m) = s.objects.get_mut(&(group.to_owned(), resource.to_owned())) {
            m.remove(name);
        }
    }

    /// Every object of a resource.
    pub fn list(&self, group: &str, resource: &str) -> Vec<Value> {
        let s = self.state.lock().unwrap();
        s.objects
            .get(&(group.to_owned(), resource.to_owned()))
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// One object.
    pub fn get(&self, group: &str, resource: &str, name: &str) -> Option<Value> {
        let s = self.state.lock().unwrap();
        s.objects
            .get(&(group.to_owned(), resource.to_owned()))?
            .get(name)
            .cloned()
    }

    /// The requests so far.
    pub fn log(&self) -> Vec<Logged> {
        self.state.lock().unwrap().log.clone()
    }

    /// Forgets the requests so far.
    pub fn clear_log(&self) {
        self.state.lock().unwrap().log.clear();
    }

    fn answer(&self, method: &str, uri: &http::Uri, body: Value) -> Response<Body> {
        let Some(t) = parse(uri.path()) else {
            return status(404, "NotFound", format!("no route {}", uri.path()));
        };
        let query: BTreeMap<String, String> = uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| {
                (
                    k.to_owned(),
                    v.replace("%3D", "=")
                        .replace("%2C", ",")
                        .replace("%2F", "/"),
                )
            })
            .collect();
        if std::env::var("FAKE_API_TRACE").is_ok() {
            eprintln!("{method} {uri} {body}");
        }
        let mut s = self.state.lock().unwrap();
        let resource = match &t.sub {
            Some(sub) => format!("{}/{sub}", t.resource),
            None => t.resource.clone(),
        };
        s.log.push(Logged {
            method: method.to_owned(),
            group: t.group.clone(),
            resource,
            name: t.name.clone(),
            body: body.clone(),
        });
        if let Some(i) = s
            .faults
            .iter()
            .position(|(m, r, _, _)| m == method && *r == t.resource)
        {
            let (_, _, code, reason) = s.faults.remove(i);
            return status(code, &reason, "injected by the test".into());
        }
        s.version += 1;
        let rv = s.version.to_string();
        let coll = (t.group.clone(), t.resource.clone());
        let objects = s.objects.entry(coll).or_default();
        match (method, &t.name, t.sub.as_deref()) {
            ("GET", None, _) => {
                let selector = query.get("labelSelector").cloned().unwrap_or_default();
                let items: Vec<Value> = objects
                    .iter()
                    .filter(|(k, _)| {
                        t.namespace
                            .as_ref()
                            .is_none_or(|ns| k.starts_with(&format!("{ns}/")))
                    })
                    .map(|(_, v)| v.clone())
                    .filter(|v| selector_matches(v, &selector))
                    .collect();
                ok(
                    200,
                    &json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": items}),
                )
            }
            ("GET", Some(name), _) => match objects.get(&key(&t.namespace, name)) {
                Some(o) => ok(200, o),
                None => status(404, "NotFound", format!("{} {name} not found", t.resource)),
            },
            ("POST", Some(name), Some("eviction")) => {
                let k = key(&t.namespace, name);
                match objects.get_mut(&k) {
                    Some(pod) => {
                        pod["metadata"]["deletionTimestamp"] = json!("2027-01-15T09:00:00Z");
                        ok(
                            201,
                            &json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}}),
                        )
                    }
                    None => status(404, "NotFound", format!("pod {name} not found")),
                }
            }
            ("POST", None, _) => {
                let mut object = body;
                let name = object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let k = key(&t.namespace, &name);
                if objects.contains_key(&k) {
                    return status(
                        409,
                        "AlreadyExists",
                        format!("{} {name} already exists", t.resource),
                    );
                }
                let meta = &mut object["metadata"];
                meta["resourceVersion"] = json!(rv);
                meta["uid"] = json!(format!("uid-{rv}"));
                meta["creationTimestamp"] = json!("2027-01-15T08:00:00Z");
                if let Some(ns) = &t.namespace {
                    meta["namespace"] = json!(ns);
                }
                objects.insert(k, object.clone());
                ok(201, &object)
            }
            // A server-side apply of an object that does not exist creates it (not so for a
            // subresource: the object must exist).
            ("PATCH", Some(name), None)
                if query.contains_key("fieldManager")
                    && !objects.contains_key(&key(&t.namespace, name)) =>
            {
                let mut object = body;
                let meta = &mut object["metadata"];
                meta["name"] = json!(name);
                meta["resourceVersion"] = json!(rv);
                meta["uid"] = json!(format!("uid-{rv}"));
                meta["creationTimestamp"] = json!("2027-01-15T08:00:00Z");
                if let Some(ns) = &t.namespace {
                    meta["namespace"] = json!(ns);
                }
                objects.insert(key(&t.namespace, name), object.clone());
                ok(201, &object)
            }
            ("PATCH" | "PUT", Some(name), sub) => {
                let k = key(&t.namespace, name);
                let Some(object) = objects.get_mut(&k) else {
                    return status(404, "NotFound", format!("{} {name} not found", t.resource));
                };
                if let Some(want) = body["metadata"]["resourceVersion"].as_str()
                    && object["metadata"]["resourceVersion"].as_str() != Some(want)
                {
                    return status(409, "Conflict", "the object has been modified".into());
                }
                if method == "PUT" {
                    let keep = object["metadata"].clone();
                    *object = body;
                    object["metadata"]["uid"] = keep["uid"].clone();
                    object["metadata"]["creationTimestamp"] = keep["creationTimestamp"].clone();
                } else if sub == Some("status") {
                    merge(&mut object["status"], &body["status"]);
                } else {
                    let mut patch = body;
                    if let Some(m) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("resourceVersion");
                    }
                    merge(object, &patch);
                }
                object["metadata"]["resourceVersion"] = json!(rv);
                let result = object.clone();
                let finalizers_gone = result["metadata"]["finalizers"]
                    .as_array()
                    .is_none_or(|f| f.is_empty());
                if !result["metadata"]["deletionTimestamp"].is_null() && finalizers_gone {
                    objects.remove(&k);
                }
                ok(200, &result)
            }
            ("DELETE", Some(name), _) => {
                let k = key(&t.namespace, name);
                let Some(object) = objects.get_mut(&k) else {
                    return status(404, "NotFound", format!("{} {name} not found", t.resource));
                };
                let held = object["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| !f.is_empty());
                if held {
                    if object["metadata"]["deletionTimestamp"].is_null() {
                        object["metadata"]["deletionTimestamp"] = json!("2027-01-15T09:00:00Z");
                        object["metadata"]["resourceVersion"] = json!(rv);
                    }
                    let o = object.clone();
                    ok(200, &o)
                } else {
                    let o = objects.remove(&k).unwrap_or(Value::Null);
                    ok(200, &o)
                }
            }
            _ => status(405, "MethodNotAllowed", format!("{method} {}", uri.path())),
        }
    }
}
