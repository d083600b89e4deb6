//! `quartermaster doctor --cloud gcp`: what a first install gets wrong, one [`Check`] each —
//! whose credentials (their source, never a secret), the project, an instance list as the
//! permission probe, the GCPNodeClass's zones and region, and the Cloud Billing Catalog.

use std::time::Duration;

use quartermaster_cloud::{Check, CloudError};
use quartermaster_policies::GCPNodeClassSpec;

use crate::billing::fetch::{billing_endpoint, fetch_skus};
use crate::port::{ApiErrorKind, Compute as _};
use crate::sdk::SdkCompute;
use crate::{GcpSettings, LABEL_CLUSTER};

/// How long `doctor` waits for one call.
const DOCTOR_TIMEOUT: Duration = Duration::from_secs(5);

/// The GCP lines of `doctor`: credentials, the project, a list call as the permission probe,
/// the NodeClass's zones, and the Cloud Billing Catalog.
///
/// `settings` are the flags' (`--gcp-endpoint`, `--gcp-project`); the project may also come
/// from the NodeClass.
pub async fn checks(
    settings: &GcpSettings,
    region: Option<&str>,
    node_class: Option<&GCPNodeClassSpec>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let endpoint = settings.endpoint.as_deref();
    checks.push(identity_check().await);
    checks.push(credentials_check(endpoint, settings.anonymous).await);

    let project = settings
        .project
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

    let mut settings = settings.clone();
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
                        let mapped = crate::errors::map_api_error(&e, None);
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
            e.to_string(),
            "enable the Cloud Billing API (cloudbilling.googleapis.com) or set GCP_BILLING_API_KEY; until then the embedded prices are used",
        ),
    });
    checks
}

/// Where `GCE_METADATA_HOST` points the metadata server (tests, emulators); only then is it
/// asked for the service account's email (elsewhere off GCP it would not answer).
const METADATA_HOST_ENV: &str = "GCE_METADATA_HOST";

/// Which source of Application Default Credentials is used and whose they are: a key file's
/// `client_email`, the account a federation file impersonates, or — for the metadata server —
/// the email it answers when `GCE_METADATA_HOST` names it, else "unknown" (never a secret).
async fn identity_check() -> Check {
    use crate::credentials::CredentialSource;
    let mut identity = crate::credentials::process_identity();
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

async fn credentials_check(endpoint: Option<&str>, anonymous: bool) -> Check {
    if anonymous {
        return Check::ok(
            "credentials",
            format!(
                "anonymous (plain-http endpoint {})",
                endpoint.unwrap_or_default()
            ),
        );
    }
    let source = crate::credentials::credentials_source();
    match tokio::time::timeout(DOCTOR_TIMEOUT * 2, crate::credentials::access_token()).await {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::billing::fetch::serve;

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
}
