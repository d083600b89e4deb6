//! `quartermaster doctor --cloud azure`: what a first install gets wrong, one [`Check`] each.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use quartermaster_cloud::Check;
use quartermaster_policies::AzureNodeClassSpec;
use quartermaster_pricing::{Catalog, Cloud};

use crate::{AzureCloud, AzureSettings, CallLimits};

/// How long `doctor` waits for one call.
const DOCTOR_TIMEOUT: Duration = Duration::from_secs(5);

/// The Azure lines of `doctor`: credentials (their source, never a secret), the subscription
/// and resource group, a VM list as the permission probe, the resource group, GPU sizes and
/// their family quotas in the location, the NodeClass's subnet, and the Retail Prices API.
///
/// `settings` are the flags' (`--azure-endpoint`, `--azure-subscription-id`,
/// `--azure-resource-group`, credentials); the subscription, the resource group and (without
/// `region`) the location may also come from the NodeClass.
pub async fn checks(
    settings: AzureSettings,
    region: Option<&str>,
    node_class: Option<&AzureNodeClassSpec>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let pick = |flag: &str, of_class: Option<&str>| {
        Some(flag.to_owned())
            .filter(|s| !s.is_empty())
            .or_else(|| of_class.filter(|s| !s.is_empty()).map(str::to_owned))
    };
    let subscription = pick(
        &settings.subscription_id,
        node_class.map(|n| n.subscription_id.as_str()),
    );
    let resource_group = pick(
        &settings.resource_group,
        node_class.map(|n| n.resource_group.as_str()),
    );
    let location = region
        .map(str::to_owned)
        .or_else(|| node_class.map(|n| n.location.clone()))
        .filter(|l| !l.is_empty());
    let mut settings = AzureSettings {
        subscription_id: subscription.clone().unwrap_or_default(),
        resource_group: resource_group.clone().unwrap_or_default(),
        location: location.clone(),
        ..settings
    };
    settings.call_limits = CallLimits {
        connect_timeout: Duration::from_secs(3),
        request_timeout: DOCTOR_TIMEOUT,
        ..CallLimits::default()
    };

    let identity = crate::process_identity(&settings);
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
        match crate::probe_token(&settings, DOCTOR_TIMEOUT * 2).await {
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
            let unreachable = e.kind == crate::port::ApiErrorKind::Dispatch;
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

    let endpoint = crate::prices::prices_endpoint();
    let probe_location = location.unwrap_or_else(|| "eastus".to_owned());
    checks.push(
        match crate::prices::fetch_quotes(
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
async fn gpu_checks(arm: &dyn crate::port::Arm, location: &str) -> Vec<Check> {
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
    let offered: Vec<&crate::port::Sku> = skus
        .iter()
        .filter(|s| gpu.contains(&s.name.as_str()))
        .collect();
    let open: Vec<&&crate::port::Sku> = offered
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
