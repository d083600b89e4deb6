//! A mocked API server: a `kube::Client` over `tower_test`'s mock service, answering a script
//! of expected requests in order (method, path, body checked). Every request is also checked
//! against [`crate::API_ACCESS`], so no test passes while the code uses access the RBAC tables
//! do not grant.

use std::pin::pin;

use http::{Request, Response};
use kube::client::Body;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

type Check = Box<dyn FnOnce(&Value) + Send>;
type Reply = Box<dyn FnOnce(&Value) -> (u16, Value) + Send>;

/// One expected request and its answer.
pub(crate) struct Exchange {
    method: &'static str,
    path: String,
    query: Vec<String>,
    check: Check,
    reply: Reply,
}

/// Expects `method` on `path` (the URI path, without the query).
pub(crate) fn expect(method: &'static str, path: impl Into<String>) -> Exchange {
    Exchange {
        method,
        path: path.into(),
        query: Vec::new(),
        check: Box::new(|_| {}),
        reply: Box::new(|_| (200, json!({}))),
    }
}

impl Exchange {
    /// The query must contain this text (URL-encoded as sent).
    pub(crate) fn query(mut self, part: &str) -> Self {
        self.query.push(part.to_owned());
        self
    }

    /// Checks the request body (JSON; `null` when empty).
    pub(crate) fn body(mut self, check: impl FnOnce(&Value) + Send + 'static) -> Self {
        self.check = Box::new(check);
        self
    }

    /// Answers with `status` and `body`.
    pub(crate) fn respond(self, status: u16, body: Value) -> Self {
        self.reply_with(move |_| (status, body))
    }

    /// Answers from the request body.
    pub(crate) fn reply_with(
        mut self,
        reply: impl FnOnce(&Value) -> (u16, Value) + Send + 'static,
    ) -> Self {
        self.reply = Box::new(reply);
        self
    }

    /// Answers with the request body itself, plus a uid and resourceVersion (a create or update).
    pub(crate) fn echo(self) -> Self {
        self.reply_with(|body| {
            let mut b = body.clone();
            b["metadata"]["uid"] = json!("uid-created");
            b["metadata"]["resourceVersion"] = json!("1");
            (200, b)
        })
    }

    /// Answers 404 Not Found.
    pub(crate) fn not_found(self) -> Self {
        self.respond(404, status(404, "NotFound"))
    }
}

/// An API error body.
pub(crate) fn status(code: u16, reason: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": format!("mocked {reason}"), "reason": reason, "code": code,
    })
}

/// The `(group, resource, verb)` a request needs.
pub(crate) fn access(method: &str, path: &str, query: &str) -> (String, String, String) {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => panic!("unexpected API path {path}"),
    };
    let rest = match rest {
        ["namespaces", _ns, rest @ ..] if !rest.is_empty() => rest,
        other => other,
    };
    let (resource, named) = match rest {
        [resource] => (resource.to_string(), false),
        [resource, _name] => (resource.to_string(), true),
        [resource, _name, sub] => (format!("{resource}/{sub}"), true),
        _ => panic!("unexpected API path {path}"),
    };
    let verb = match (method, named) {
        ("GET", false) if query.contains("watch=true") => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => panic!("unexpected method {method}"),
    };
    (group.to_owned(), resource, verb.to_owned())
}

/// Panics unless the request is covered by [`crate::API_ACCESS`].
pub(crate) fn assert_allowed(method: &str, path: &str, query: &str) {
    let (group, resource, verb) = access(method, path, query);
    assert!(
        crate::API_ACCESS.contains(&(group.as_str(), resource.as_str(), verb.as_str())),
        "{method} {path} needs {verb} on {group:?}/{resource}, which API_ACCESS does not list"
    );
}

/// A request as the server saw it.
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) body: Value,
}

/// Reads one request off the mock.
pub(crate) async fn read(request: Request<Body>) -> Seen {
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or("").to_owned();
    let bytes = request
        .into_body()
        .collect_bytes()
        .await
        .expect("request body");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).expect("request body is JSON")
    };
    assert_allowed(&method, &path, &query);
    Seen {
        method,
        path,
        query,
        body,
    }
}

/// A response with a JSON body.
pub(crate) fn response(status: u16, body: &Value) -> Response<Body> {
    let mut r = Response::new(Body::from(serde_json::to_vec(body).expect("JSON")));
    *r.status_mut() = http::StatusCode::from_u16(status).expect("status code");
    r
}

/// A client whose API server answers `script` in order, and the server task: awaiting it
/// (after dropping every holder of the client) fails the test if a request was missing,
/// unexpected, or not as expected.
pub(crate) fn serve(script: Vec<Exchange>) -> (kube::Client, JoinHandle<()>) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let task = tokio::spawn(async move {
        let mut handle = pin!(handle);
        for (i, ex) in script.into_iter().enumerate() {
            let Some((request, send)) = handle.next_request().await else {
                panic!("request #{i} ({} {}) was never made", ex.method, ex.path);
            };
            let seen = read(request).await;
            assert_eq!(
                (seen.method.as_str(), seen.path.as_str()),
                (ex.method, ex.path.as_str()),
                "request #{i}"
            );
            for part in &ex.query {
                assert!(
                    seen.query.contains(part.as_str()),
                    "request #{i} {} {}: query {:?} lacks {part:?}",
                    seen.method,
                    seen.path,
                    seen.query
                );
            }
            (ex.check)(&seen.body);
            let (status, body) = (ex.reply)(&seen.body);
            send.send_response(response(status, &body));
        }
        if let Some((request, _)) = handle.next_request().await {
            let seen = read(request).await;
            panic!("unexpected request {} {}", seen.method, seen.path);
        }
    });
    (kube::Client::new(service, "default"), task)
}

/// Waits for the server task (the client must be dropped first), failing on its panics.
pub(crate) async fn finish(task: JoinHandle<()>) {
    match tokio::time::timeout(std::time::Duration::from_secs(60), task).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => std::panic::resume_unwind(e.into_panic()),
        Err(_) => panic!("the mocked API server did not finish (is a client still alive?)"),
    }
}
