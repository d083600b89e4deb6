//! `--cloud-provider gcp`: the flags as `quartermaster_gcp` settings, the connection, the GCP
//! lines of `doctor`, and live prices from the Cloud Billing Catalog.
//!
//! Credentials come only from Application Default Credentials (GKE Workload Identity in the
//! cluster); a plain-`http://` `--gcp-endpoint` (a local emulator) is called anonymously.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use quartermaster_cloud::{Check, Clock, CloudError, CloudProvider};
use quartermaster_gcp::billing::{self, Sku};
use quartermaster_gcp::port::{ApiErrorKind, Compute as _};
use quartermaster_gcp::sdk::SdkCompute;
use quartermaster_gcp::{GcpSettings, LABEL_CLUSTER};
use quartermaster_policies::GCPNodeClassSpec;
use quartermaster_pricing::{Catalog, PriceQuote};

use crate::cli::{CloudAccessArgs, ControllerArgs};

/// Where the Cloud Billing API is (a local server in tests); default the public one.
const BILLING_ENDPOINT_ENV: &str = "GCP_BILLING_ENDPOINT";
/// An API key for the Cloud Billing Catalog, sent as `X-Goog-Api-Key` (otherwise an ADC token).
const BILLING_API_KEY_ENV: &str = "GCP_BILLING_API_KEY";
/// Pages of SKUs read at most (Compute Engine has a few tens of thousands, 5000 a page).
const MAX_SKU_PAGES: usize = 40;
/// How long `doctor` waits for one call.
const DOCTOR_TIMEOUT: Duration = Duration::from_secs(5);

/// The GCP provider's settings from the flags.
pub struct Settings(Box<GcpSettings>);

/// Whether calls to `endpoint` go without credentials: a plain-`http://` endpoint is a local
/// emulator or test server.
fn anonymous(endpoint: Option<&str>) -> bool {
    endpoint.is_some_and(|e| e.starts_with("http://"))
}

fn gcp_settings(cluster: &str, access: &CloudAccessArgs) -> GcpSettings {
    GcpSettings {
        endpoint: access.gcp_endpoint.clone(),
        project: access.gcp_project.clone(),
        anonymous: anonymous(access.gcp_endpoint.as_deref()),
        ..GcpSettings::new(cluster)
    }
}

/// Reads the GCP flags: the project (required), the endpoint (optional).
pub fn settings(args: &ControllerArgs) -> anyhow::Result<Settings> {
    if args.access.gcp_project.as_deref().unwrap_or("").is_empty() {
        anyhow::bail!(
            "--cloud-provider gcp needs --gcp-project (GCP_PROJECT): the project instances are created in and listed for garbage collection"
        );
    }
    Ok(Settings(Box::new(gcp_settings(
        &args.cluster_name,
        &args.access,
    ))))
}

/// Connects to Compute Engine.
pub async fn connect(
    settings: Settings,
    _client: &kube::Client,
    catalog: &Catalog,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<Arc<dyn CloudProvider>> {
    let project = settings.0.project.clone();
    let cloud = quartermaster_gcp::GcpCloud::connect(*settings.0, catalog.clone(), clock.clone())
        .await
        .context("connecting to Compute Engine")?;
    tracing::info!(project = ?project, "GCP cloud provider ready");
    Ok(Arc::new(cloud))
}

/// The GCP lines of `doctor`: credentials, the project, a list call as the permission probe,
/// the NodeClass's zones, and the Cloud Billing Catalog.
#[allow(dead_code)] // `doctor --cloud gcp` (clouds/mod.rs) calls it.
pub async fn doctor(
    access: &CloudAccessArgs,
    region: Option<&str>,
    node_class: Option<&GCPNodeClassSpec>,
) -> Vec<quartermaster_cloud::Check> {
    let mut checks = Vec::new();
    let endpoint = access.gcp_endpoint.as_deref();
    checks.push(identity_check().await);
    checks.push(credentials_check(endpoint).await);

    let project = access
        .gcp_project
        .clone()
        .filter(|p| !p.is_empty())
        .or_else(|| {
            node_class
                .map(|n| n.project.clone())
                .filter(|p| !p.is_empty())
        });
    let Some(project) = project else {
        checks.push(Check::fail(
            "project",
            "no project given",
            "pass --gcp-project (GCP_PROJECT) or set spec.project in the GCPNodeClass",
        ));
        return checks;
    };
    checks.push(Check::ok("project", project.clone()));

    let mut settings = gcp_settings("doctor", access);
    settings.attempt_timeout = DOCTOR_TIMEOUT;
    let compute = match SdkCompute::connect(&settings).await {
        Ok(c) => c,
        Err(e) => {
            checks.push(Check::fail(
                "Compute Engine client",
                e.to_string(),
                "check --gcp-endpoint (GCP_ENDPOINT)",
            ));
            return checks;
        }
    };
    let probe = compute
        .list(
            project.clone(),
            format!("labels.{LABEL_CLUSTER} = \"quartermaster-doctor\""),
        )
        .await;
    let reachable = match probe {
        Ok(_) => {
            checks.push(Check::ok(
                "permission compute.instances.list",
                format!("instances.aggregatedList in {project} answers"),
            ));
            true
        }
        Err(e) => {
            let unreachable = matches!(e.kind, ApiErrorKind::Dispatch | ApiErrorKind::Timeout);
            let fix = if unreachable {
                "check --gcp-endpoint (GCP_ENDPOINT) and the network path to Compute Engine"
            } else {
                "grant the controller's service account roles/compute.instanceAdmin.v1 and roles/iam.serviceAccountUser on the project (GKE: through Workload Identity)"
            };
            checks.push(Check::fail(
                "permission compute.instances.list",
                e.message.clone(),
                fix,
            ));
            !unreachable
        }
    };

    let zones: Vec<String> = node_class.map(|n| n.zones.clone()).unwrap_or_default();
    if reachable {
        for zone in &zones {
            checks.push(
                match compute.get_zone(project.clone(), zone.clone()).await {
                    Ok(status) if status == "UP" => Check::ok(format!("zone {zone}"), "UP"),
                    Ok(status) => Check::warn(
                        format!("zone {zone}"),
                        status,
                        "the zone is not UP; launches there will fail until it is",
                    ),
                    Err(e) => {
                        let mapped = quartermaster_gcp::errors::map_api_error(&e, None);
                        let fix = if matches!(mapped, CloudError::NotFound { .. }) {
                            "fix spec.zones in the GCPNodeClass (`gcloud compute zones list`)"
                        } else {
                            "check the permission compute.zones.get"
                        };
                        Check::fail(format!("zone {zone}"), e.message, fix)
                    }
                },
            );
        }
    }
    if let (Some(class_region), Some(region)) = (node_class.map(|n| n.region.as_str()), region)
        && !class_region.is_empty()
        && class_region != region
    {
        checks.push(Check::warn(
            "region",
            format!("the GCPNodeClass says {class_region}, --region says {region}"),
            "make spec.region and --region (CLUSTER_REGION) agree",
        ));
    }

    let billing = billing_endpoint();
    checks.push(match fetch_skus(&billing, 1).await {
        Ok(skus) => Check::ok(
            "price API",
            format!("Cloud Billing Catalog at {billing} answers ({} SKUs on the first page)", skus.len()),
        ),
        Err(e) => Check::warn(
            "price API",
            format!("{e:#}"),
            "enable the Cloud Billing API (cloudbilling.googleapis.com) or set GCP_BILLING_API_KEY; until then the embedded prices are used",
        ),
    });
    checks
}

/// Live prices of the catalog's GCP machine types in `region` from the Cloud Billing Catalog.
#[allow(dead_code)] // `catalog --live --cloud gcp` (clouds/mod.rs) calls it.
pub async fn live_quotes(
    _access: &CloudAccessArgs,
    region: &str,
    catalog: &Catalog,
) -> anyhow::Result<Vec<PriceQuote>> {
    let billing = billing_endpoint();
    let skus = fetch_skus(&billing, MAX_SKU_PAGES).await?;
    Ok(billing::quotes(&skus, catalog, region, chrono::Utc::now()))
}

fn billing_endpoint() -> String {
    std::env::var(BILLING_ENDPOINT_ENV)
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| billing::BILLING_ENDPOINT.to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// Where `GCE_METADATA_HOST` points the metadata server (tests, emulators); only then is it
/// asked for the service account's email (elsewhere off GCP it would not answer).
const METADATA_HOST_ENV: &str = "GCE_METADATA_HOST";

/// Which source of Application Default Credentials is used and whose they are: a key file's
/// `client_email`, the account a federation file impersonates, or — for the metadata server —
/// the email it answers when `GCE_METADATA_HOST` names it, else "unknown" (never a secret).
async fn identity_check() -> Check {
    use quartermaster_gcp::credentials::CredentialSource;
    let mut identity = quartermaster_gcp::credentials::process_identity();
    if identity.source == CredentialSource::MetadataServer
        && let Some(host) = std::env::var(METADATA_HOST_ENV)
            .ok()
            .filter(|h| !h.trim().is_empty())
    {
        identity.account = tokio::task::spawn_blocking(move || metadata_email(&host))
            .await
            .ok()
            .flatten();
    }
    let unreadable = identity.kind.is_none() && identity.source != CredentialSource::MetadataServer;
    if unreadable {
        Check::fail(
            "identity",
            identity.to_string(),
            "point GOOGLE_APPLICATION_CREDENTIALS at a readable credentials file (a service account key or a workload identity federation config), or unset it to use the metadata server (GKE Workload Identity)",
        )
    } else {
        Check::ok("identity", identity.to_string())
    }
}

/// The default service account's email from the metadata server at `host` (2 s at most).
fn metadata_email(host: &str) -> Option<String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(2)))
        .http_status_as_error(true)
        .build()
        .into();
    let host = host.trim_end_matches('/');
    let base = if host.starts_with("http://") || host.starts_with("https://") {
        host.to_owned()
    } else {
        format!("http://{host}")
    };
    let email = agent
        .get(format!(
            "{base}/computeMetadata/v1/instance/service-accounts/default/email"
        ))
        .header("Metadata-Flavor", "Google")
        .call()
        .ok()?
        .body_mut()
        .with_config()
        .limit(4096)
        .read_to_string()
        .ok()?;
    let email = email.trim().to_owned();
    email.contains('@').then_some(email)
}

async fn credentials_check(endpoint: Option<&str>) -> Check {
    if anonymous(endpoint) {
        return Check::ok(
            "credentials",
            format!(
                "anonymous (plain-http endpoint {})",
                endpoint.unwrap_or_default()
            ),
        );
    }
    let source = quartermaster_gcp::credentials::credentials_source();
    match tokio::time::timeout(
        DOCTOR_TIMEOUT * 2,
        quartermaster_gcp::credentials::access_token(),
    )
    .await
    {
        Ok(Ok(_)) => Check::ok(
            "credentials",
            format!("Application Default Credentials from {source}"),
        ),
        Ok(Err(e)) => Check::fail(
            "credentials",
            format!("{e} (looked in {source})"),
            "GKE: bind the controller's Kubernetes service account to a Google service account (Workload Identity); elsewhere set GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth application-default login`",
        ),
        Err(_) => Check::fail(
            "credentials",
            format!(
                "no token from {source} within {}s",
                (DOCTOR_TIMEOUT * 2).as_secs()
            ),
            "check that the metadata server is reachable, or set GOOGLE_APPLICATION_CREDENTIALS",
        ),
    }
}

/// How Cloud Billing calls authenticate: an API key, a bearer token, or nothing (a plain-http
/// endpoint: a local server).
enum BillingAuth {
    None,
    ApiKey(String),
    Bearer(String),
}

/// Up to `max_pages` pages of Compute Engine SKUs.
async fn fetch_skus(billing: &str, max_pages: usize) -> anyhow::Result<Vec<Sku>> {
    let auth = if let Ok(key) = std::env::var(BILLING_API_KEY_ENV) {
        BillingAuth::ApiKey(key)
    } else if billing.starts_with("http://") {
        BillingAuth::None
    } else {
        let token = tokio::time::timeout(
            DOCTOR_TIMEOUT * 2,
            quartermaster_gcp::credentials::access_token(),
        )
        .await
        .context("no credentials for the Cloud Billing API in time")??;
        BillingAuth::Bearer(token)
    };
    let billing = billing.to_owned();
    tokio::task::spawn_blocking(move || fetch_skus_blocking(&billing, &auth, max_pages))
        .await
        .context("the Cloud Billing fetch stopped")?
}

fn fetch_skus_blocking(
    billing: &str,
    auth: &BillingAuth,
    max_pages: usize,
) -> anyhow::Result<Vec<Sku>> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{billing}/v1/{}/skus", billing::COMPUTE_SERVICE);
    let mut skus = Vec::new();
    let mut token = String::new();
    for _ in 0..max_pages {
        let mut request = agent
            .get(&url)
            .query("currencyCode", "USD")
            .query("pageSize", "5000");
        if !token.is_empty() {
            request = request.query("pageToken", &token);
        }
        request = match auth {
            BillingAuth::None => request,
            BillingAuth::ApiKey(key) => request.header("x-goog-api-key", key),
            BillingAuth::Bearer(t) => request.header("authorization", format!("Bearer {t}")),
        };
        let mut response = request.call().with_context(|| format!("calling {url}"))?;
        let status = response.status();
        let body = response
            .body_mut()
            .with_config()
            .limit(1 << 28)
            .read_to_string()
            .with_context(|| format!("reading the answer of {url}"))?;
        if !status.is_success() {
            anyhow::bail!(
                "{url} answered {status}: {}",
                body.chars().take(300).collect::<String>()
            );
        }
        let page = billing::parse_page(&body)?;
        skus.extend(page.skus);
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    Ok(skus)
}

/// The reservations of the project (`--gcp-project`) through the provider the controller uses.
pub async fn reservations(
    access: &CloudAccessArgs,
    catalog: &Catalog,
) -> anyhow::Result<Vec<quartermaster_pricing::Reservation>> {
    if access.gcp_project.as_deref().unwrap_or("").is_empty() {
        anyhow::bail!("pass --gcp-project (GCP_PROJECT) to list its reservations");
    }
    let clock: Arc<dyn Clock> = Arc::new(quartermaster_cloud::SystemClock);
    let cloud = quartermaster_gcp::GcpCloud::connect(
        gcp_settings("quartermaster", access),
        catalog.clone(),
        clock,
    )
    .await
    .context("connecting to Compute Engine")?;
    cloud
        .reservations()
        .await
        .map_err(|e| anyhow::anyhow!("listing reservations: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-thread HTTP server answering each request with the next of `pages` (status, body),
    /// recording the request lines.
    fn serve(pages: Vec<(u16, String)>) -> (String, std::sync::mpsc::Receiver<String>) {
        use std::io::{BufRead as _, BufReader, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for (status, body) in pages {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                reader.read_line(&mut head).unwrap();
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok() && line.trim() != "" {
                    line.clear();
                }
                let _ = tx.send(head.trim().to_owned());
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (format!("http://{addr}"), rx)
    }

    fn sku(description: &str, usage: &str, nanos: i64) -> String {
        format!(
            r#"{{"description": "{description} running in Americas", "category": {{"resourceFamily": "Compute", "usageType": "{usage}"}}, "serviceRegions": ["us-central1"], "pricingInfo": [{{"pricingExpression": {{"usageUnit": "h", "tieredRates": [{{"startUsageAmount": 0, "unitPrice": {{"currencyCode": "USD", "units": "0", "nanos": {nanos}}}}}]}}}}]}}"#
        )
    }

    #[test]
    fn skus_are_read_page_by_page_and_priced() {
        let page1 = format!(
            r#"{{"skus": [{}, {}], "nextPageToken": "p2"}}"#,
            sku("G2 Instance Core", "OnDemand", 25_000_000),
            sku("G2 Instance Ram", "OnDemand", 3_000_000)
        );
        let page2 = format!(
            r#"{{"skus": [{}], "nextPageToken": ""}}"#,
            sku("Nvidia L4 GPU", "OnDemand", 500_000_000)
        );
        let (base, requests) = serve(vec![(200, page1), (200, page2)]);
        let skus = fetch_skus_blocking(&base, &BillingAuth::None, MAX_SKU_PAGES).unwrap();
        assert_eq!(skus.len(), 3);
        let first = requests.recv().unwrap();
        assert!(
            first.starts_with("GET /v1/services/6F81-5844-456A/skus?"),
            "{first}"
        );
        assert!(requests.recv().unwrap().contains("pageToken=p2"));
        let now = chrono::DateTime::from_timestamp(1_764_547_200, 0).unwrap();
        let quotes = billing::quotes(&skus, &Catalog::embedded(), "us-central1", now);
        let g2 = quotes
            .iter()
            .find(|q| q.instance_type == "g2-standard-4")
            .expect("g2-standard-4 priced");
        assert!((g2.price_per_hour - (4.0 * 0.025 + 16.0 * 0.003 + 0.5)).abs() < 1e-9);
    }

    #[test]
    fn an_error_answer_or_a_dead_endpoint_is_an_error() {
        let (base, _requests) = serve(vec![(403, r#"{"error": {"code": 403}}"#.into())]);
        let e = fetch_skus_blocking(&base, &BillingAuth::None, 1).unwrap_err();
        assert!(format!("{e:#}").contains("403"), "{e:#}");
        assert!(fetch_skus_blocking("http://127.0.0.1:1", &BillingAuth::None, 1).is_err());
    }

    #[test]
    fn the_metadata_servers_email_is_read_when_its_host_is_given() {
        let (base, requests) = serve(vec![(200, "qm@p.iam.gserviceaccount.com\n".into())]);
        let host = base.trim_start_matches("http://");
        assert_eq!(
            metadata_email(host).as_deref(),
            Some("qm@p.iam.gserviceaccount.com")
        );
        assert_eq!(
            requests.recv().unwrap(),
            "GET /computeMetadata/v1/instance/service-accounts/default/email HTTP/1.1"
        );
        // Nothing listening: no email, at once.
        assert_eq!(metadata_email("127.0.0.1:1"), None);
    }

    #[test]
    fn plain_http_endpoints_are_anonymous() {
        assert!(anonymous(Some("http://127.0.0.1:8080")));
        assert!(!anonymous(Some("https://compute.example.com")));
        assert!(!anonymous(None));
    }
}
