//! The controller's Kubernetes client: configuration from `--kubeconfig` or the standard
//! inference (in-cluster service account, `KUBECONFIG`, `~/.kube/config`), kube's stack (auth,
//! base URI, retries, timeouts) over HTTP/2, behind a client-side rate limit
//! (`--kube-client-qps`, `--kube-client-burst`; see [`rate_limit`]).

mod rate_limit;

use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

pub use rate_limit::{ClientTraffic, RateLimitLayer, RateLimited, client_traffic};

use crate::ControllerError;

/// The flag that sets the sustained request rate.
pub const QPS_FLAG: &str = "--kube-client-qps";
/// The flag that sets the burst size.
pub const BURST_FLAG: &str = "--kube-client-burst";
/// Karpenter's default sustained rate (requests per second).
pub const DEFAULT_QPS: f64 = 200.0;
/// Karpenter's default burst.
pub const DEFAULT_BURST: u32 = 300;

/// How the controller reaches the Kubernetes API.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientSettings {
    /// `--kubeconfig`: a kubeconfig file; `None` infers the configuration (in-cluster service
    /// account, `KUBECONFIG`, `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// `--kube-client-qps`: sustained requests per second (> 0).
    pub qps: f64,
    /// `--kube-client-burst`: requests that may go out at once (≥ 1).
    pub burst: u32,
}

impl Default for ClientSettings {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
        }
    }
}

/// Builds the controller's client: the configuration from `settings.kubeconfig` (or inferred),
/// kube's default HTTP stack, and the client-side rate limit outermost. Settings are checked
/// before anything is read.
pub async fn build_client(settings: &ClientSettings) -> Result<kube::Client, ControllerError> {
    let rate_limit = RateLimitLayer::new(settings.qps, settings.burst)?;
    let config = load_config(settings).await?;
    client_behind(config, &rate_limit)
}

/// The provisioning loop's clients, built like [`build_client`] and drawing from one bucket of
/// `--kube-client-qps`: together they never exceed it. Each has a queue of its own, and the
/// NodeClaim creates' queue goes first: while a create waits for a token, the others wait
/// behind it, so a burst of launches is not slowed by the status writes, nominations and Events
/// of the nodes before it (which wait a few seconds longer instead).
pub async fn build_loop_clients(settings: &ClientSettings) -> Result<LoopClients, ControllerError> {
    let rate_limit = RateLimitLayer::new(settings.qps, settings.burst)?;
    let events_limit = rate_limit.capped(EVENTS_SHARE)?;
    let config = load_config(settings).await?;
    Ok(LoopClients {
        api: client_behind(config.clone(), &rate_limit)?,
        launches: client_behind(config.clone(), &rate_limit.prioritized())?,
        events: client_behind(config, &events_limit)?,
    })
}

/// The clients [`build_loop_clients`] builds: one rate limit, three queues.
#[derive(Clone)]
pub struct LoopClients {
    /// Watches, reads and every write but the two below.
    pub api: kube::Client,
    /// NodeClaim creates: the first write of a launch, the one the batch window waits for; it
    /// takes the shared bucket's tokens before the other two.
    pub launches: kube::Client,
    /// Events, at most [`EVENTS_SHARE`] of the rate and burst (a bucket of their own first).
    pub events: kube::Client,
}

impl LoopClients {
    /// One client in all three roles (tests).
    pub fn shared(client: kube::Client) -> Self {
        Self {
            api: client.clone(),
            launches: client.clone(),
            events: client,
        }
    }
}

/// The share of `--kube-client-qps` and `--kube-client-burst` the Events' client may use.
pub const EVENTS_SHARE: f64 = 0.25;

fn client_behind(
    config: kube::Config,
    rate_limit: &RateLimitLayer,
) -> Result<kube::Client, ControllerError> {
    http2_client(config, rate_limit).map_err(|e| ControllerError::ClientConfig(error_chain(&e)))
}

/// How often an HTTP/2 connection with nothing to read is pinged (client-go's `ReadIdleTimeout`).
const HTTP2_PING_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before the connection is dropped (client-go's `PingTimeout`).
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(15);

/// A client on the stack kube's default client has, but speaking HTTP/2 where the server offers it
/// (ALPN `h2`; the API server does): all requests of a client, watches included, share one
/// connection, as client-go's do. kube's own stack is HTTP/1.1 only, which opens a connection
/// (and a TLS handshake) per request in flight and keeps it open: a burst of 500 NodeClaim
/// creates left 1,767 connections to the API server. The rest is kube's: the configured
/// server, credentials, extra headers, its retry of 429/503/504, and its connect, read and write
/// timeouts; idle HTTP/2 connections are pinged and dropped when the ping is not answered.
/// `rate_limit` is outermost: a request waits for its token before anything else.
fn http2_client(
    config: kube::Config,
    rate_limit: &RateLimitLayer,
) -> Result<kube::Client, kube::Error> {
    use kube::client::ConfigExt as _;
    use tower::ServiceBuilder;

    if let Some(proxy) = &config.proxy_url {
        // As kube's own client built without its proxy features.
        return Err(kube::Error::ProxyProtocolUnsupported {
            proxy_url: Box::new(proxy.clone()),
        });
    }

    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let mut tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        // The kubeconfig's `tls-server-name`: the name the server's certificate is checked for.
        let name = name.clone().try_into().map_err(|e| {
            kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
        })?;
        tls = tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = tls.enable_http1().enable_http2().wrap_connector(http);
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_keep_alive_interval(HTTP2_PING_INTERVAL)
        .http2_keep_alive_timeout(HTTP2_PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .timer(hyper_util::rt::TokioTimer::new())
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(rate_limit.clone())
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| {
            tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry())
        }))
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(client);
    Ok(kube::Client::new(service, config.default_namespace))
}

async fn load_config(settings: &ClientSettings) -> Result<kube::Config, ControllerError> {
    let config = match &settings.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| {
                ControllerError::ClientConfig(format!(
                    "--kubeconfig {}: {}",
                    path.display(),
                    error_chain(&e)
                ))
            })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| {
                    ControllerError::ClientConfig(format!(
                        "--kubeconfig {}: {}",
                        path.display(),
                        error_chain(&e)
                    ))
                })?
        }
        None => kube::Config::infer().await.map_err(|e| {
            ControllerError::ClientConfig(format!(
                "no --kubeconfig given and none could be inferred (in-cluster, KUBECONFIG, \
                 ~/.kube/config): {}",
                error_chain(&e)
            ))
        })?,
    };
    Ok(config)
}

/// An error and its sources, outermost first, joined with `: `.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn build_client_checks_settings_before_reading_anything() {
        let settings = ClientSettings {
            kubeconfig: Some(PathBuf::from("/nonexistent/kubeconfig")),
            qps: 0.0,
            burst: 10,
        };
        match build_client(&settings).await {
            Err(ControllerError::Setting { name, .. }) => assert_eq!(name, "--kube-client-qps"),
            Err(other) => panic!("expected the qps error, got {other:?}"),
            Ok(_) => panic!("expected the qps error, got a client"),
        }
    }

    #[tokio::test]
    async fn build_client_names_a_missing_kubeconfig() {
        let settings = ClientSettings {
            kubeconfig: Some(PathBuf::from("/nonexistent/quartermaster/kubeconfig")),
            ..ClientSettings::default()
        };
        match build_client(&settings).await {
            Err(ControllerError::ClientConfig(message)) => {
                assert!(message.contains("--kubeconfig"), "{message}");
                assert!(
                    message.contains("/nonexistent/quartermaster/kubeconfig"),
                    "{message}"
                );
            }
            Err(other) => panic!("expected a configuration error, got {other:?}"),
            Ok(_) => panic!("expected a configuration error, got a client"),
        }
    }

    #[tokio::test]
    async fn build_client_reads_the_given_kubeconfig() {
        let dir = std::env::temp_dir().join(format!(
            "quartermaster-controller-client-test-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: test\n  cluster:\n    server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true\n\
             users:\n\
             - name: test\n  user:\n    token: not-a-real-token\n\
             contexts:\n\
             - name: test\n  context:\n    cluster: test\n    user: test\n    namespace: quartermaster\n\
             current-context: test\n",
        )
        .expect("write kubeconfig");
        let settings = ClientSettings {
            kubeconfig: Some(path),
            ..ClientSettings::default()
        };
        let client = build_client(&settings).await;
        let _ = std::fs::remove_dir_all(&dir);
        let client = match client {
            Ok(client) => client,
            Err(e) => panic!("a client: {e}"),
        };
        assert_eq!(client.default_namespace(), "quartermaster");
    }

    #[test]
    fn error_chain_includes_sources_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("reading file")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let error = Outer(std::io::Error::other("disk on fire"));
        assert_eq!(error_chain(&error), "reading file: disk on fire");
    }
}
