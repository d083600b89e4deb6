//! `--cloud-provider aws`: the flags as `quartermaster_aws` settings, and the connection.

use std::sync::Arc;

use anyhow::Context as _;
use quartermaster_cloud::{Clock, CloudProvider};
use quartermaster_pricing::Catalog;

use crate::cli::ControllerArgs;

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
