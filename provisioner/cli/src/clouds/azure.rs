//! `--cloud-provider azure`: the flags as `quartermaster_azure` settings, the connection (with
//! the bootstrap Secrets read through the controller's Kubernetes client), the Azure lines of
//! `doctor`, and live prices from the Retail Prices API.
//!
//! Credentials come only from azure_identity's default chain (Azure Workload Identity in the
//! cluster); a plain-`http://` `--azure-endpoint` (a local test server) gets a static test token.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use quartermaster_azure::{
    AzureCloud, AzureError, AzureSettings, BootstrapData, CallLimits, CredentialSource,
};
use quartermaster_cloud::{Check, Clock, CloudProvider};
use quartermaster_policies::AzureNodeClassSpec;
use quartermaster_policies::nodeclass::azure::AzureBootstrapSecretRef;
use quartermaster_pricing::{Catalog, Cloud, PriceQuote};

use crate::cli::{CloudAccessArgs, ControllerArgs};

/// How long `doctor` waits for one call.
const DOCTOR_TIMEOUT: Duration = Duration::from_secs(5);
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

/// The Azure lines of `doctor`: credentials (their source, never a secret), the subscription
/// and resource group, a VM list as the permission probe, the resource group, GPU sizes and
/// their family quotas in the location, the NodeClass's subnet, and the Retail Prices API.
#[allow(dead_code)] // `doctor --cloud azure` (clouds/mod.rs) calls it.
pub async fn doctor(
    access: &CloudAccessArgs,
    region: Option<&str>,
    node_class: Option<&AzureNodeClassSpec>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let pick = |flag: &Option<String>, of_class: Option<&str>| {
        flag.clone()
            .filter(|s| !s.is_empty())
            .or_else(|| of_class.filter(|s| !s.is_empty()).map(str::to_owned))
    };
    let subscription = pick(
        &access.azure_subscription_id,
        node_class.map(|n| n.subscription_id.as_str()),
    );
    let resource_group = pick(
        &access.azure_resource_group,
        node_class.map(|n| n.resource_group.as_str()),
    );
    let location = region
        .map(str::to_owned)
        .or_else(|| node_class.map(|n| n.location.clone()))
        .filter(|l| !l.is_empty());
    let mut settings = azure_settings(
        "doctor",
        access,
        subscription.clone().unwrap_or_default(),
        resource_group.clone().unwrap_or_default(),
        location.clone(),
    );
    settings.call_limits = CallLimits {
        connect_timeout: Duration::from_secs(3),
        request_timeout: DOCTOR_TIMEOUT,
        ..CallLimits::default()
    };

    let identity = quartermaster_azure::process_identity(&settings);
    checks.push(if identity.incomplete() {
        Check::warn(
            "identity",
            identity.to_string(),
            "AKS: annotate the controller's service account with azure.workload.identity/client-id and label its pods azure.workload.identity/use=true (the webhook sets AZURE_CLIENT_ID and AZURE_TENANT_ID); elsewhere set AZURE_CLIENT_ID and AZURE_TENANT_ID",
        )
    } else {
        Check::ok("identity", identity.to_string())
    });
    let source = identity.to_string();
    checks.push(
        match quartermaster_azure::probe_token(&settings, DOCTOR_TIMEOUT * 2).await {
            Ok(()) => Check::ok("credentials", format!("a Resource Manager token from {source}")),
            Err(e) => Check::fail(
                "credentials",
                format!("{e} (looked for {source})"),
                "AKS: enable workload identity, annotate the controller's service account with azure.workload.identity/client-id and label its pods azure.workload.identity/use=true; elsewhere set AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET",
            ),
        },
    );
    let (Some(subscription), Some(resource_group)) = (subscription, resource_group) else {
        checks.push(Check::fail(
            "subscription and resource group",
            "not given",
            "pass --azure-subscription-id and --azure-resource-group (AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP) or -f an AzureNodeClass",
        ));
        return checks;
    };
    checks.push(Check::ok(
        "subscription and resource group",
        format!("{subscription} / {resource_group}"),
    ));

    let cloud = match AzureCloud::connect(
        settings,
        Catalog::embedded(),
        Arc::new(quartermaster_cloud::SystemClock),
    ) {
        Ok(c) => c,
        Err(e) => {
            checks.push(Check::fail(
                "Resource Manager client",
                e.to_string(),
                "check --azure-endpoint (AZURE_ENDPOINT)",
            ));
            return checks;
        }
    };
    let arm = cloud.arm();
    let rbac = "assign the controller's identity Virtual Machine Contributor and Network Contributor on the node resource group, and Managed Identity Operator on the kubelet identity";
    match arm.list_vms().await {
        Ok(vms) => checks.push(Check::ok(
            "permission Microsoft.Compute/virtualMachines/read",
            format!("{} VMs listed in {resource_group}", vms.len()),
        )),
        Err(e) => {
            let unreachable = e.kind == quartermaster_azure::port::ApiErrorKind::Dispatch;
            checks.push(Check::fail(
                "permission Microsoft.Compute/virtualMachines/read",
                e.message.clone(),
                if unreachable {
                    "check --azure-endpoint (AZURE_ENDPOINT) and the network path to Resource Manager"
                } else {
                    rbac
                },
            ));
            if unreachable {
                return checks;
            }
        }
    }
    checks.push(match arm.resource_group_exists().await {
        Ok(true) => Check::ok("resource group", format!("{resource_group} exists")),
        Ok(false) => Check::fail(
            "resource group",
            format!("{resource_group} does not exist in {subscription}"),
            "AKS: use the cluster's node resource group (`az aks show --query nodeResourceGroup`)",
        ),
        Err(e) => Check::warn(
            "resource group",
            e.message,
            "grant Microsoft.Resources/subscriptions/resourceGroups/read (Reader on the resource group)",
        ),
    });

    if let Some(location) = &location {
        checks.extend(gpu_checks(arm.as_ref(), location).await);
    } else {
        checks.push(Check::warn(
            "GPU sizes",
            "no location",
            "pass --region (CLUSTER_REGION) or -f an AzureNodeClass with spec.location",
        ));
    }

    if let Some(class) = node_class {
        let lower = class.subnet_id.to_ascii_lowercase();
        checks.push(
            if lower.starts_with("/subscriptions/")
                && lower.contains("/providers/microsoft.network/virtualnetworks/")
                && lower.contains("/subnets/")
            {
                Check::ok("subnet", class.subnet_id.clone())
            } else {
                Check::fail(
                    "subnet",
                    format!("{:?} is not a subnet's ARM id", class.subnet_id),
                    "set spec.subnetId to /subscriptions/…/resourceGroups/…/providers/Microsoft.Network/virtualNetworks/…/subnets/…",
                )
            },
        );
        if class.bootstrap_secret_ref.is_none() {
            checks.push(Check::warn(
                "bootstrap",
                "no bootstrapSecretRef: VMs boot without custom data and do not join the cluster",
                "put the node bootstrap custom data in a Secret and name it in spec.bootstrapSecretRef",
            ));
        }
    }

    let endpoint = quartermaster_azure::prices::prices_endpoint();
    let probe_location = location.unwrap_or_else(|| "eastus".to_owned());
    checks.push(
        match quartermaster_azure::prices::fetch_quotes(
            &endpoint,
            &probe_location,
            &["Standard_NC24ads_A100_v4".to_owned()],
            chrono::Utc::now(),
            DOCTOR_TIMEOUT,
        )
        .await
        {
            Ok(q) => Check::ok(
                "price API",
                format!("Retail Prices at {endpoint} answers ({} quotes)", q.len()),
            ),
            Err(e) => Check::warn(
                "price API",
                e.to_string(),
                "allow egress to prices.azure.com (or set AZURE_PRICES_ENDPOINT); until then the embedded prices are used",
            ),
        },
    );
    checks
}

/// GPU sizes of the catalog in `location`: offered to the subscription, and their families'
/// vCPU quotas.
async fn gpu_checks(arm: &dyn quartermaster_azure::port::Arm, location: &str) -> Vec<Check> {
    let catalog = Catalog::embedded();
    let gpu: Vec<&str> = catalog
        .for_cloud(Cloud::Azure)
        .filter(|t| t.accelerator.is_some())
        .map(|t| t.name.as_str())
        .collect();
    let skus = match arm.resource_skus(location.to_owned()).await {
        Ok(s) => s,
        Err(e) => {
            return vec![Check::fail(
                "GPU sizes",
                e.message,
                "grant Microsoft.Compute/skus/read (Virtual Machine Contributor has it)",
            )];
        }
    };
    let offered: Vec<&quartermaster_azure::port::Sku> = skus
        .iter()
        .filter(|s| gpu.contains(&s.name.as_str()))
        .collect();
    let open: Vec<&&quartermaster_azure::port::Sku> = offered
        .iter()
        .filter(|s| s.restrictions.is_empty())
        .collect();
    let mut checks = vec![if open.is_empty() {
        Check::warn(
            format!("GPU sizes in {location}"),
            format!(
                "none of the catalog's {} GPU sizes is open to this subscription ({} listed with restrictions)",
                gpu.len(),
                offered.len()
            ),
            "pick another location, or ask Azure support to open the sizes for the subscription",
        )
    } else {
        Check::ok(
            format!("GPU sizes in {location}"),
            format!("{} of the catalog's GPU sizes are open", open.len()),
        )
    }];
    let families: BTreeMap<String, ()> = open
        .iter()
        .filter_map(|s| s.family.clone())
        .map(|f| (f.to_ascii_lowercase(), ()))
        .collect();
    match arm.usages(location.to_owned()).await {
        Ok(usages) => {
            for u in usages
                .iter()
                .filter(|u| families.contains_key(&u.name.to_ascii_lowercase()))
            {
                let name = format!("quota {}", u.name);
                let detail = format!("{} of {} vCPUs in use", u.current, u.limit);
                checks.push(if u.limit - u.current <= 0 {
                    Check::warn(
                        name,
                        detail,
                        "request a vCPU quota increase for the family (Azure portal: Quotas)",
                    )
                } else {
                    Check::ok(name, detail)
                });
            }
        }
        Err(e) => checks.push(Check::warn(
            "GPU quotas",
            e.message,
            "grant Microsoft.Compute/locations/usages/read",
        )),
    }
    checks
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
