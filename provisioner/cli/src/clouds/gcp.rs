//! `--cloud-provider gcp`: the flags as `quartermaster_gcp` settings, the connection, and the
//! calls of `doctor` and of live prices (both in `quartermaster_gcp`).
//!
//! Credentials come only from Application Default Credentials (GKE Workload Identity in the
//! cluster); a plain-`http://` `--gcp-endpoint` (a local emulator) is called anonymously.

use std::sync::Arc;

use anyhow::Context as _;
use quartermaster_cloud::{Clock, CloudProvider};
use quartermaster_gcp::GcpSettings;
use quartermaster_gcp::billing::{
    self,
    fetch::{MAX_SKU_PAGES, billing_endpoint, fetch_skus},
};
use quartermaster_policies::GCPNodeClassSpec;
use quartermaster_pricing::{Catalog, PriceQuote};

use crate::cli::{CloudAccessArgs, ControllerArgs};

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

/// The GCP lines of `doctor` (`quartermaster_gcp::doctor`).
#[allow(dead_code)] // `doctor --cloud gcp` (clouds/mod.rs) calls it.
pub async fn doctor(
    access: &CloudAccessArgs,
    region: Option<&str>,
    node_class: Option<&GCPNodeClassSpec>,
) -> Vec<quartermaster_cloud::Check> {
    quartermaster_gcp::doctor::checks(&gcp_settings("doctor", access), region, node_class).await
}

/// Live prices of the catalog's GCP machine types in `region` from the Cloud Billing Catalog.
#[allow(dead_code)] // `catalog --live --cloud gcp` (clouds/mod.rs) calls it.
pub async fn live_quotes(
    _access: &CloudAccessArgs,
    region: &str,
    catalog: &Catalog,
) -> anyhow::Result<Vec<PriceQuote>> {
    let skus = fetch_skus(&billing_endpoint(), MAX_SKU_PAGES).await?;
    Ok(billing::quotes(&skus, catalog, region, chrono::Utc::now()))
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

    #[test]
    fn plain_http_endpoints_are_anonymous() {
        assert!(anonymous(Some("http://127.0.0.1:8080")));
        assert!(!anonymous(Some("https://compute.example.com")));
        assert!(!anonymous(None));
    }
}
