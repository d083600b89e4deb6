//! `--cloud-provider aws`: the flags as `quartermaster_aws` settings, and the connection;
//! `doctor --cloud aws` and `catalog --live --cloud aws`.

use std::sync::Arc;

use anyhow::Context as _;
use quartermaster_cloud::{Check, Clock, CloudProvider};
use quartermaster_policies::AWSNodeClassSpec;
use quartermaster_pricing::{Catalog, PriceQuote};

use crate::cli::{CloudAccessArgs, ControllerArgs};

/// Connects to EC2 (and SQS, SSM) through the SDK's default chain.
pub async fn connect(
    mut settings: quartermaster_aws::AwsSettings,
    client: &kube::Client,
    catalog: &Catalog,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<Arc<dyn CloudProvider>> {
    settings.kubernetes_version = kubernetes_version(client).await;
    let cloud =
        quartermaster_aws::AwsCloud::connect(settings, catalog.clone(), clock.clone()).await;
    tracing::info!(region = ?cloud.region(), "AWS cloud provider ready");
    Ok(Arc::new(cloud))
}

/// The API server's `MAJOR.MINOR` (`1.33`; EKS reports minors such as `33+`), for the AWS
/// provider's AMI aliases; `None` (with a warning) when the server does not say.
async fn kubernetes_version(client: &kube::Client) -> Option<String> {
    match client.apiserver_version().await {
        Ok(info) => {
            let digits = |s: &str| s.chars().filter(char::is_ascii_digit).collect::<String>();
            Some(format!("{}.{}", digits(&info.major), digits(&info.minor)))
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read the Kubernetes version; AMI aliases will not resolve");
            None
        }
    }
}

/// The AWS provider's settings from the flags: the cluster nodes join, the region (else the
/// SDK's chain); the endpoint comes from the SDK's `AWS_ENDPOINT_URL(_EC2)` and credentials
/// only from its default chain.
pub fn settings(args: &ControllerArgs) -> anyhow::Result<quartermaster_aws::AwsSettings> {
    let endpoint = args.join.cluster_endpoint.clone().with_context(|| {
        "--cloud-provider aws needs --cluster-endpoint (CLUSTER_ENDPOINT): the API server nodes join"
    })?;
    let ca_bundle = args.join.cluster_ca_bundle.clone().with_context(|| {
        "--cloud-provider aws needs --cluster-ca-bundle (CLUSTER_CA_BUNDLE): the cluster's CA, base64"
    })?;
    Ok(quartermaster_aws::AwsSettings {
        cluster: quartermaster_aws::ClusterInfo {
            name: args.cluster_name.clone(),
            endpoint,
            ca_bundle,
            cidr: args
                .join
                .cluster_cidr
                .clone()
                .unwrap_or_else(|| "10.100.0.0/16".to_owned()),
        },
        region: args.region.clone(),
        interruption_queue: args.interruption_queue.clone(),
        ..quartermaster_aws::AwsSettings::default()
    })
}

/// Settings for `doctor` and `catalog --live`: no cluster, the region given (else the SDK's),
/// and short timeouts without retries so a dead endpoint fails in seconds.
fn quick_settings(region: Option<&str>) -> quartermaster_aws::AwsSettings {
    quick_settings_at(region, None)
}

/// [`quick_settings`] with `catalog --aws-endpoint`: a plain-`http://` endpoint is a local test
/// server, called with static test credentials (no secret to find on the machine).
fn quick_settings_at(
    region: Option<&str>,
    endpoint: Option<&str>,
) -> quartermaster_aws::AwsSettings {
    let credentials = match endpoint {
        Some(e) if e.starts_with("http://") => quartermaster_aws::CredentialSource::Static {
            access_key_id: "quartermaster-local-test".to_owned(),
            secret_access_key: "quartermaster-local-test".to_owned(),
        },
        _ => quartermaster_aws::CredentialSource::default(),
    };
    quartermaster_aws::AwsSettings {
        region: region.map(str::to_owned),
        endpoint_url: endpoint.map(str::to_owned),
        credentials,
        call_limits: quartermaster_aws::CallLimits {
            connect_timeout: std::time::Duration::from_secs(2),
            attempt_timeout: std::time::Duration::from_secs(10),
            operation_timeout: std::time::Duration::from_secs(15),
            max_attempts: 1,
            ..quartermaster_aws::CallLimits::default()
        },
        ..quartermaster_aws::AwsSettings::default()
    }
}

/// `doctor --cloud aws`: region, credentials and identity, DryRun permissions, the
/// AWSNodeClass's subnets, security groups and AMIs, GPU quotas, the price APIs. Endpoints come
/// from the SDK's `AWS_ENDPOINT_URL(_EC2, _STS, _PRICING)`.
pub async fn doctor(
    _access: &CloudAccessArgs,
    region: Option<&str>,
    node_class: Option<&AWSNodeClassSpec>,
) -> Vec<Check> {
    quartermaster_aws::doctor::checks(
        &quick_settings(region),
        node_class,
        &Catalog::embedded_all_regions(),
        chrono::Utc::now(),
    )
    .await
}

/// On-demand prices from the Pricing API and spot prices from the spot price history for the
/// catalog's AWS types in `region`. Fails only when both calls fail; one failing is logged and
/// the other's quotes are returned.
pub async fn live_quotes(
    access: &CloudAccessArgs,
    region: &str,
    catalog: &Catalog,
) -> anyhow::Result<Vec<PriceQuote>> {
    let (quotes, failures) = live_quotes_and_failures(access, region, None, catalog).await?;
    for failure in &failures {
        tracing::warn!(%failure, "an AWS price API failed; its prices stay as the catalog has them");
    }
    Ok(quotes)
}

/// [`live_quotes`], with the failed call of the two (if one failed) returned rather than
/// logged.
pub async fn live_quotes_and_failures(
    _access: &CloudAccessArgs,
    region: &str,
    endpoint: Option<&str>,
    catalog: &Catalog,
) -> anyhow::Result<(Vec<PriceQuote>, Vec<String>)> {
    let fetch = quartermaster_aws::live_prices(
        &quick_settings_at(Some(region), endpoint),
        region,
        catalog,
        chrono::Utc::now(),
    )
    .await;
    if fetch.all_failed() {
        anyhow::bail!("AWS price APIs failed: {}", fetch.failures.join("; "));
    }
    Ok((fetch.quotes, fetch.failures))
}

/// The capacity reservations (ODCRs, Capacity Blocks) the account holds in `region`, active or
/// scheduled: `DescribeCapacityReservations` through the provider the controller uses.
pub async fn reservations(
    region: &str,
    endpoint: Option<&str>,
    catalog: &Catalog,
) -> anyhow::Result<Vec<quartermaster_pricing::Reservation>> {
    let clock: Arc<dyn Clock> = Arc::new(quartermaster_cloud::SystemClock);
    let cloud = quartermaster_aws::AwsCloud::connect(
        quick_settings_at(Some(region), endpoint),
        catalog.clone(),
        clock,
    )
    .await;
    cloud
        .reservations()
        .await
        .map_err(|e| anyhow::anyhow!("DescribeCapacityReservations: {e}"))
}
