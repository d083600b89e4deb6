//! A small fault-injecting HTTP proxy of ours in front of moto, for what moto does not
//! simulate: insufficient capacity (as an HTTP 500, and inside a 200 `CreateFleet` response's
//! `errorSet`), throttling (`RequestLimitExceeded`, 503 with `Retry-After`), timeouts, and a
//! response lost after the call took effect. Faults are queued per EC2 action and each is
//! used by one call; calls without a queued fault pass through unchanged.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

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
    /// Hold the call this long before passing it on (client timeouts).
    Delay(Duration),
    /// Pass the call to moto (it takes effect), then answer 500 `InternalError` instead of
    /// moto's response: a crash or a lost connection after the cloud acted.
    LoseResponse,
    /// Answer 200 with this JSON body (`application/x-amz-json-1.1`) without calling moto: what
    /// moto cannot hold, such as SSM's reserved `/aws/service/...` parameters.
    JsonReply(String),
}

type Faults = Arc<Mutex<BTreeMap<String, VecDeque<Fault>>>>;

/// The running proxy.
pub struct FaultProxy {
    addr: SocketAddr,
    faults: Faults,
    calls: Arc<Mutex<Vec<(String, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// A proxy on a free port of 127.0.0.1 passing calls to `upstream`.
    pub async fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let faults: Faults = Arc::default();
        let calls: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let (f, c) = (faults.clone(), calls.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (f, c) = (f.clone(), c.clone());
                tokio::spawn(async move {
                    let service =
                        service_fn(move |req| handle(req, upstream, f.clone(), c.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FaultProxy {
            addr,
            faults,
            calls,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues `fault` for the next call of `action` (`CreateFleet`, `DescribeInstances`).
    pub fn inject(&self, action: &str, fault: Fault) {
        self.faults
            .lock()
            .expect("faults")
            .entry(action.to_owned())
            .or_default()
            .push_back(fault);
    }

    /// How many calls of `action` reached the proxy.
    pub fn calls(&self, action: &str) -> usize {
        self.calls
            .lock()
            .expect("calls")
            .iter()
            .filter(|(a, _)| a == action)
            .count()
    }

    /// The request bodies of the calls of `action`, in order.
    pub fn bodies(&self, action: &str) -> Vec<String> {
        self.calls
            .lock()
            .expect("calls")
            .iter()
            .filter(|(a, _)| a == action)
            .map(|(_, b)| b.clone())
            .collect()
    }
}

fn xml(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert("content-type", http::HeaderValue::from_static("text/xml"));
    response
}

fn ec2_error(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    xml(
        status,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>"
        ),
    )
}

/// A 200 CreateFleet response with one capacity error per override of the request.
fn fleet_errors(form: &BTreeMap<String, String>) -> Response<Full<Bytes>> {
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

async fn forward(
    upstream: SocketAddr,
    parts: http::request::Parts,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let Ok(stream) = TcpStream::connect(upstream).await else {
        return ec2_error(StatusCode::BAD_GATEWAY, "InternalError", "moto is down");
    };
    let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        return ec2_error(
            StatusCode::BAD_GATEWAY,
            "InternalError",
            "handshake with moto",
        );
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
            Response::from_parts(parts, Full::new(body))
        }
        Err(e) => ec2_error(StatusCode::BAD_GATEWAY, "InternalError", &e.to_string()),
    }
}

async fn handle(
    request: Request<Incoming>,
    upstream: SocketAddr,
    faults: Faults,
    calls: Arc<Mutex<Vec<(String, String)>>>,
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
    calls
        .lock()
        .expect("calls")
        .push((action.clone(), String::from_utf8_lossy(&body).into_owned()));
    let fault = faults
        .lock()
        .expect("faults")
        .get_mut(&action)
        .and_then(VecDeque::pop_front);
    Ok(match fault {
        None => forward(upstream, parts, body).await,
        Some(Fault::CapacityError500) => ec2_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InsufficientInstanceCapacity",
            "We currently do not have sufficient capacity in the Availability Zone you requested.",
        ),
        Some(Fault::CapacityInFleetResponse) => fleet_errors(&form),
        Some(Fault::Throttle { retry_after_secs }) => {
            let mut r = ec2_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "RequestLimitExceeded",
                "Request limit exceeded.",
            );
            r.headers_mut()
                .insert("retry-after", http::HeaderValue::from(retry_after_secs));
            r
        }
        Some(Fault::Delay(d)) => {
            tokio::time::sleep(d).await;
            forward(upstream, parts, body).await
        }
        Some(Fault::JsonReply(json)) => {
            let mut r = Response::new(Full::new(Bytes::from(json)));
            r.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("application/x-amz-json-1.1"),
            );
            r
        }
        Some(Fault::LoseResponse) => {
            let _ = forward(upstream, parts, body).await;
            ec2_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "An internal error has occurred.",
            )
        }
    })
}
