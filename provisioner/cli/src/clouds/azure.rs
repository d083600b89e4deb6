//! `--cloud-provider azure`: the flags as `quartermaster_azure` settings, the connection (with
//! the bootstrap Secrets read through the controller's Kubernetes client), the call of `doctor`
//! (in `quartermaster_azure`), and live prices from the Retail Prices API.
//!
//! Credentials come only from azure_identity's default chain (Azure Workload Identity in the
//! cluster); a plain-`http://` `--azure-endpoint` (a local test server) gets a static test token.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use quartermaster_azure::{AzureCloud, AzureError, AzureSettings, BootstrapData, CredentialSource};
use quartermaster_cloud::{Check, Clock, CloudProvider};
use quartermaster_policies::AzureNodeClassSpec;
use quartermaster_policies::nodeclass::azure::AzureBootstrapSecretRef;
use quartermaster_pricing::{Catalog, Cloud, PriceQuote};

use crate::cli::{CloudAccessArgs, ControllerArgs};

/// How long one Retail Prices request may take.
const PRICES_TIMEOUT: Duration = Duration::from_secs(30);

/// The Azure provider's settings from the flags, and the namespace bootstrap Secrets default to.
pub struct Settings {
    azure: Box<AzureSettings>,
    namespace: String,
}

/// A plain-`http://` endpoint is a local test server: it gets a static test token.
fn credentials_for(endpoint: Option<&str>) -> CredentialSource {
    if endpoint.is_some_and(|e| e.starts_with("http://")) {
        CredentialSource::StaticToken("quartermaster-local-test".to_owned())
    } else {
        CredentialSource::DefaultChain
    }
}

fn azure_settings(
    cluster: &str,
    access: &CloudAccessArgs,
    subscription: String,
    resource_group: String,
    location: Option<String>,
) -> AzureSettings {
    AzureSettings {
        cluster_name: cluster.to_owned(),
        subscription_id: subscription,
        resource_group,
        location,
        endpoint: access.azure_endpoint.clone(),
        credentials: credentials_for(access.azure_endpoint.as_deref()),
        ..AzureSettings::default()
    }
}

/// Reads the Azure flags: the subscription and resource group (required), the endpoint and
/// region (optional).
pub fn settings(args: &ControllerArgs) -> anyhow::Result<Settings> {
    let subscription = args
        .access
        .azure_subscription_id
        .clone()
        .filter(|s| !s.is_empty())
        .context("--cloud-provider azure needs --azure-subscription-id (AZURE_SUBSCRIPTION_ID): the subscription VMs are created in")?;
    let resource_group = args
        .access
        .azure_resource_group
        .clone()
        .filter(|s| !s.is_empty())
        .context("--cloud-provider azure needs --azure-resource-group (AZURE_RESOURCE_GROUP): the resource group VMs are created in (AKS: the node resource group, MC_…)")?;
    Ok(Settings {
        azure: Box::new(azure_settings(
            &args.cluster_name,
            &args.access,
            subscription,
            resource_group,
            args.region.clone(),
        )),
        namespace: args.leader_election_namespace.clone(),
    })
}

/// Reads bootstrap custom data from Secrets (the controller's namespace unless the reference
/// names one).
struct SecretBootstrap {
    client: kube::Client,
    namespace: String,
}

impl BootstrapData for SecretBootstrap {
    fn custom_data<'a>(
        &'a self,
        secret: &'a AzureBootstrapSecretRef,
    ) -> Pin<Box<dyn Future<Output = Result<String, AzureError>> + Send + 'a>> {
        Box::pin(async move {
            let namespace = secret.namespace.as_deref().unwrap_or(&self.namespace);
            let api: kube::Api<Secret> = kube::Api::namespaced(self.client.clone(), namespace);
            let found = api.get(&secret.name).await.map_err(|e| {
                AzureError::Bootstrap(format!("reading Secret {namespace}/{}: {e}", secret.name))
            })?;
            let key = secret.key_or_default();
            let value = found
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| b.0.clone())
                .or_else(|| {
                    found
                        .string_data
                        .as_ref()
                        .and_then(|d| d.get(key))
                        .map(|s| s.clone().into_bytes())
                })
                .ok_or_else(|| {
                    AzureError::Bootstrap(format!(
                        "Secret {namespace}/{} has no key {key}",
                        secret.name
                    ))
                })?;
            String::from_utf8(value).map_err(|_| {
                AzureError::Bootstrap(format!(
                    "Secret {namespace}/{} key {key} is not UTF-8 text",
                    secret.name
                ))
            })
        })
    }
}

/// Connects to Azure Resource Manager.
pub async fn connect(
    settings: Settings,
    client: &kube::Client,
    catalog: &Catalog,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<Arc<dyn CloudProvider>> {
    let resource_group = settings.azure.resource_group.clone();
    let cloud = AzureCloud::connect(*settings.azure, catalog.clone(), clock.clone())
        .context("connecting to Azure Resource Manager")?
        .with_bootstrap(Some(Arc::new(SecretBootstrap {
            client: client.clone(),
            namespace: settings.namespace,
        })));
    tracing::info!(resource_group = %resource_group, "Azure cloud provider ready");
    Ok(Arc::new(cloud))
}

/// The Azure lines of `doctor` (`quartermaster_azure::doctor`).
#[allow(dead_code)] // `doctor --cloud azure` (clouds/mod.rs) calls it.
pub async fn doctor(
    access: &CloudAccessArgs,
    region: Option<&str>,
    node_class: Option<&AzureNodeClassSpec>,
) -> Vec<Check> {
    let settings = azure_settings(
        "doctor",
        access,
        access.azure_subscription_id.clone().unwrap_or_default(),
        access.azure_resource_group.clone().unwrap_or_default(),
        None,
    );
    quartermaster_azure::doctor::checks(settings, region, node_class).await
}

/// Live prices of the catalog's Azure sizes in `region` from the Retail Prices API.
#[allow(dead_code)] // `catalog --live --cloud azure` (clouds/mod.rs) calls it.
pub async fn live_quotes(
    _access: &CloudAccessArgs,
    region: &str,
    catalog: &Catalog,
) -> anyhow::Result<Vec<PriceQuote>> {
    let sizes: Vec<String> = catalog
        .for_cloud(Cloud::Azure)
        .filter(|t| t.offerings.iter().any(|o| o.region == region))
        .map(|t| t.name.clone())
        .collect();
    if sizes.is_empty() {
        anyhow::bail!("the catalog has no Azure size in {region}");
    }
    let endpoint = quartermaster_azure::prices::prices_endpoint();
    Ok(quartermaster_azure::prices::fetch_quotes(
        &endpoint,
        region,
        &sizes,
        chrono::Utc::now(),
        PRICES_TIMEOUT,
    )
    .await?)
}

/// The capacity reservations of the subscription's resource group (`--azure-subscription-id`,
/// `--azure-resource-group`) in `region`, through the provider the controller uses.
pub async fn reservations(
    access: &CloudAccessArgs,
    region: &str,
    catalog: &Catalog,
) -> anyhow::Result<Vec<quartermaster_pricing::Reservation>> {
    let (Some(subscription), Some(resource_group)) = (
        access
            .azure_subscription_id
            .clone()
            .filter(|s| !s.is_empty()),
        access
            .azure_resource_group
            .clone()
            .filter(|s| !s.is_empty()),
    ) else {
        anyhow::bail!(
            "pass --azure-subscription-id and --azure-resource-group to list capacity reservations"
        );
    };
    let clock: Arc<dyn Clock> = Arc::new(quartermaster_cloud::SystemClock);
    let cloud = AzureCloud::connect(
        azure_settings(
            "quartermaster",
            access,
            subscription,
            resource_group,
            Some(region.to_owned()),
        ),
        catalog.clone(),
        clock,
    )
    .context("connecting to Azure Resource Manager")?;
    cloud
        .reservations()
        .await
        .map_err(|e| anyhow::anyhow!("listing capacity reservations: {e}"))
}
