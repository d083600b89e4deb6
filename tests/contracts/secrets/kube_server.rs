//! A small Kubernetes API server on 127.0.0.1 for the real `quartermaster` binary: it keeps the
//! objects it is given and written, answers LIST (every object of a resource, selectors
//! ignored), GET, POST, PUT, PATCH (a JSON merge into the stored object), DELETE and
//! `/version`, holds WATCH requests open without events, and records every request with its
//! `Authorization` header and body so tests can check what reached it.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `GET`, `POST`, …
    pub method: String,
    /// Path and query.
    pub target: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The body, as text.
    pub body: String,
}

#[derive(Default)]
struct State {
    /// (API prefix `/api/v1` or `/apis/G/V`, resource) → `ns/name` or `name` → object.
    objects: BTreeMap<(String, String), BTreeMap<String, Value>>,
    seen: Vec<Seen>,
    version: u64,
}

/// The server; it runs until the test process ends.
pub struct KubeServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

/// Where a request goes: `/api/v1/namespaces/NS/RESOURCE/NAME/SUB?query`.
struct Target {
    prefix: String,
    namespace: Option<String>,
    resource: String,
    name: Option<String>,
    watch: bool,
}

fn parse(target: &str) -> Option<Target> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (prefix, rest) = match *parts.first()? {
        "api" => (format!("/api/{}", parts.get(1)?), &parts[2..]),
        "apis" => (
            format!("/apis/{}/{}", parts.get(1)?, parts.get(2)?),
            &parts[3..],
        ),
        _ => return None,
    };
    let (namespace, rest) = if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        (Some(rest[1].to_owned()), &rest[2..])
    } else {
        (None, rest)
    };
    Some(Target {
        prefix,
        namespace,
        resource: rest.first()?.to_string(),
        name: rest.get(1).map(|s| s.to_string()),
        watch: query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1"),
    })
}

fn key(namespace: Option<&str>, name: &str) -> String {
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

impl KubeServer {
    /// Starts serving `objects`: (API prefix, resource plural, object).
    pub fn start(objects: Vec<(&str, &str, Value)>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("an address");
        let state = Arc::new(Mutex::new(State::default()));
        let server = KubeServer {
            addr,
            state: state.clone(),
        };
        for (prefix, resource, object) in objects {
            server.store(prefix, resource, object);
        }
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let state = state.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &state);
                });
            }
        });
        server
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    fn store(&self, prefix: &str, resource: &str, object: Value) {
        let mut s = self.state.lock().unwrap();
        put(&mut s, prefix, resource, object);
    }
}

/// Stores `object` with a new resourceVersion (and a uid and creation time when it has none).
fn put(s: &mut State, prefix: &str, resource: &str, mut object: Value) -> Value {
    s.version += 1;
    let meta = &mut object["metadata"];
    if meta["name"].is_null()
        && let Some(generate) = meta["generateName"].as_str()
    {
        meta["name"] = json!(format!("{generate}{}", s.version));
    }
    meta["resourceVersion"] = json!(s.version.to_string());
    if meta["uid"].is_null() {
        meta["uid"] = json!(format!("uid-{}", s.version));
    }
    if meta["creationTimestamp"].is_null() {
        meta["creationTimestamp"] = json!("2027-01-15T08:00:00Z");
    }
    let name = meta["name"].as_str().unwrap_or_default().to_owned();
    let namespace = meta["namespace"].as_str().map(str::to_owned);
    s.objects
        .entry((prefix.to_owned(), resource.to_owned()))
        .or_default()
        .insert(key(namespace.as_deref(), &name), object.clone());
    object
}

fn respond(stream: &mut TcpStream, status: u16, body: &Value) -> std::io::Result<()> {
    let text = body.to_string();
    write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    )?;
    stream.flush()
}

fn not_found(what: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{what} not found"), "reason": "NotFound", "code": 404})
}

fn serve(mut stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if line.trim().is_empty() {
        // A connection closed before it sent a request (the controller stopped while opening
        // it): nothing was asked, so nothing is recorded as seen.
        return Ok(());
    }
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default().to_owned();
    let target = words.next().unwrap_or_default().to_owned();
    let mut length = 0usize;
    let mut authorization = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "authorization" => authorization = Some(value.trim().to_owned()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let body_text = String::from_utf8_lossy(&body).into_owned();
    state.lock().unwrap().seen.push(Seen {
        method: method.clone(),
        target: target.clone(),
        authorization,
        body: body_text.clone(),
    });
    if target.starts_with("/version") {
        return respond(
            &mut stream,
            200,
            &json!({"major": "1", "minor": "34", "gitVersion": "v1.34.0"}),
        );
    }
    let Some(t) = parse(&target) else {
        return respond(&mut stream, 404, &not_found(&target));
    };
    if t.watch {
        // Held open without events until the client goes away.
        write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        )?;
        stream.flush()?;
        let mut sink = [0u8; 256];
        while reader.read(&mut sink)? > 0 {}
        return Ok(());
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let collection = (t.prefix.clone(), t.resource.clone());
    let mut s = state.lock().unwrap();
    let (status, answer) = match (method.as_str(), &t.name) {
        ("GET", None) => {
            let items: Vec<Value> = s
                .objects
                .get(&collection)
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| {
                            t.namespace
                                .as_ref()
                                .is_none_or(|ns| k.starts_with(&format!("{ns}/")))
                        })
                        .map(|(_, v)| v.clone())
                        .collect()
                })
                .unwrap_or_default();
            let version = s.version.to_string();
            (
                200,
                json!({"apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": version}, "items": items}),
            )
        }
        ("GET", Some(name)) => {
            match s
                .objects
                .get(&collection)
                .and_then(|m| m.get(&key(t.namespace.as_deref(), name)))
            {
                Some(o) => (200, o.clone()),
                None => (404, not_found(name)),
            }
        }
        ("POST", _) => {
            let mut object = body;
            if let Some(ns) = &t.namespace {
                object["metadata"]["namespace"] = json!(ns);
            }
            (201, put(&mut s, &t.prefix, &t.resource, object))
        }
        ("PUT" | "PATCH", Some(name)) => {
            let k = key(t.namespace.as_deref(), name);
            let mut object = s
                .objects
                .get(&collection)
                .and_then(|m| m.get(&k))
                .cloned()
                .unwrap_or_else(|| json!({"metadata": {"name": name}}));
            if method == "PUT" {
                object = body;
            } else {
                merge(&mut object, &body);
            }
            object["metadata"]["name"] = json!(name);
            if let Some(ns) = &t.namespace {
                object["metadata"]["namespace"] = json!(ns);
            }
            (200, put(&mut s, &t.prefix, &t.resource, object))
        }
        ("DELETE", Some(name)) => {
            let k = key(t.namespace.as_deref(), name);
            match s.objects.get_mut(&collection).and_then(|m| m.remove(&k)) {
                Some(o) => (200, o),
                None => (404, not_found(name)),
            }
        }
        _ => (405, not_found(&target)),
    };
    drop(s);
    respond(&mut stream, status, &answer)
}
