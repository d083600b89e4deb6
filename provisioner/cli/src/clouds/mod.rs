//! The real clouds behind `--cloud-provider aws|gcp|azure`: each in its own file, each behind
//! its Cargo feature (the SDKs are large), each turning the flags into its crate's settings and
//! connecting. `kwok` is wired in `commands::controller`. `doctor` and `catalog --live` reach
//! each cloud's checks and price APIs through [`doctor`] and [`live_quotes`].

#[cfg(feature = "aws")]
mod aws;
#[cfg(feature = "aws")]
pub mod aws_spot_advisor;
#[cfg(feature = "azure")]
mod azure;
#[cfg(feature = "gcp")]
mod gcp;

use std::sync::Arc;

use quartermaster_cloud::{Check, Clock, CloudProvider};
use quartermaster_pricing::{Catalog, Cloud, PriceQuote};

use crate::cli::{CloudAccessArgs, CloudProviderArg, ControllerArgs};

/// One cloud's settings, checked before anything starts (a missing flag fails at once, before
/// the controller connects to the cluster).
pub enum Settings {
    /// `--cloud-provider kwok`: nothing to connect here.
    Kwok,
    /// `--cloud-provider aws`.
    #[cfg(feature = "aws")]
    Aws(Box<quartermaster_aws::AwsSettings>),
    /// `--cloud-provider gcp`.
    #[cfg(feature = "gcp")]
    Gcp(gcp::Settings),
    /// `--cloud-provider azure`.
    #[cfg(feature = "azure")]
    Azure(azure::Settings),
}

impl Settings {
    /// Reads the chosen cloud's flags; an error names the missing flag and its variable.
    pub fn from_args(args: &ControllerArgs) -> anyhow::Result<Settings> {
        match args.cloud_provider {
            CloudProviderArg::Kwok => Ok(Settings::Kwok),
            #[cfg(feature = "aws")]
            CloudProviderArg::Aws => Ok(Settings::Aws(Box::new(aws::settings(args)?))),
            #[cfg(feature = "gcp")]
            CloudProviderArg::Gcp => Ok(Settings::Gcp(gcp::settings(args)?)),
            #[cfg(feature = "azure")]
            CloudProviderArg::Azure => Ok(Settings::Azure(azure::settings(args)?)),
            #[allow(unreachable_patterns)]
            other => {
                let name = format!("{other:?}").to_lowercase();
                anyhow::bail!(
                    "--cloud-provider {name}: this build has no {name} support (the default features leave the \
                     cloud SDKs out; build with `--features {name}`, or `--features clouds` for all three)"
                )
            }
        }
    }
}

/// Connects the chosen real cloud; `None` for kwok.
pub async fn connect(
    settings: Settings,
    client: &kube::Client,
    catalog: &Catalog,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<Option<(Cloud, Arc<dyn CloudProvider>)>> {
    let _ = (client, catalog, clock);
    match settings {
        Settings::Kwok => Ok(None),
        #[cfg(feature = "aws")]
        Settings::Aws(aws) => Ok(Some((
            Cloud::Aws,
            aws::connect(*aws, client, catalog, clock).await?,
        ))),
        #[cfg(feature = "gcp")]
        Settings::Gcp(gcp) => Ok(Some((
            Cloud::Gcp,
            gcp::connect(gcp, client, catalog, clock).await?,
        ))),
        #[cfg(feature = "azure")]
        Settings::Azure(azure) => Ok(Some((
            Cloud::Azure,
            azure::connect(azure, client, catalog, clock).await?,
        ))),
    }
}

/// The cloud a `--cloud` flag names.
pub fn cloud_of(arg: crate::cli::CloudArg) -> Cloud {
    match arg {
        crate::cli::CloudArg::Aws => Cloud::Aws,
        crate::cli::CloudArg::Gcp => Cloud::Gcp,
        crate::cli::CloudArg::Azure => Cloud::Azure,
    }
}

fn not_built(cloud: Cloud) -> anyhow::Error {
    anyhow::anyhow!(
        "--cloud {cloud}: this build has no {cloud} support (the default features leave the cloud \
         SDKs out; build with `--features {cloud}`, or `--features clouds` for all three)"
    )
}

/// What `cloud`'s price APIs say now about the catalog's types in `region`.
pub async fn live_quotes(
    cloud: Cloud,
    access: &CloudAccessArgs,
    region: &str,
    catalog: &Catalog,
) -> anyhow::Result<Vec<PriceQuote>> {
    let _ = (access, region, catalog);
    match cloud {
        #[cfg(feature = "aws")]
        Cloud::Aws => aws::live_quotes(access, region, catalog).await,
        #[cfg(feature = "gcp")]
        Cloud::Gcp => gcp::live_quotes(access, region, catalog).await,
        #[cfg(feature = "azure")]
        Cloud::Azure => azure::live_quotes(access, region, catalog).await,
        #[allow(unreachable_patterns)]
        other => Err(not_built(other)),
    }
}

/// [`live_quotes`], with the price calls that failed while others answered (AWS: one of its
/// two APIs), so `catalog --live` can say which prices stay as the catalog has them.
pub async fn live_quotes_and_failures(
    cloud: Cloud,
    access: &CloudAccessArgs,
    region: &str,
    aws_endpoint: Option<&str>,
    catalog: &Catalog,
) -> anyhow::Result<(Vec<PriceQuote>, Vec<String>)> {
    let _ = aws_endpoint;
    match cloud {
        #[cfg(feature = "aws")]
        Cloud::Aws => aws::live_quotes_and_failures(access, region, aws_endpoint, catalog).await,
        _ => Ok((
            live_quotes(cloud, access, region, catalog).await?,
            Vec::new(),
        )),
    }
}

/// The capacity reservations `cloud` reports (`CloudProvider::reservations`, through the
/// provider the controller uses), for `catalog --live`.
pub async fn live_reservations(
    cloud: Cloud,
    access: &CloudAccessArgs,
    region: &str,
    aws_endpoint: Option<&str>,
    catalog: &Catalog,
) -> anyhow::Result<Vec<quartermaster_pricing::Reservation>> {
    let _ = (access, region, aws_endpoint, catalog);
    match cloud {
        #[cfg(feature = "aws")]
        Cloud::Aws => aws::reservations(region, aws_endpoint, catalog).await,
        #[cfg(feature = "gcp")]
        Cloud::Gcp => gcp::reservations(access, catalog).await,
        #[cfg(feature = "azure")]
        Cloud::Azure => azure::reservations(access, region, catalog).await,
        #[allow(unreachable_patterns)]
        other => Err(not_built(other)),
    }
}

/// The `doctor` checks of `cloud`, with the NodeClass of `node_class` (YAML) when given.
pub async fn doctor(
    cloud: Cloud,
    access: &CloudAccessArgs,
    region: Option<&str>,
    node_class: Option<&str>,
) -> anyhow::Result<Vec<Check>> {
    let _ = (access, region, node_class);
    match cloud {
        #[cfg(feature = "aws")]
        Cloud::Aws => {
            let spec = node_class_spec::<quartermaster_policies::AWSNodeClassSpec>(
                node_class,
                quartermaster_policies::nodeclass::KIND_AWS,
            )?;
            Ok(aws::doctor(access, region, spec.as_ref()).await)
        }
        #[cfg(feature = "gcp")]
        Cloud::Gcp => {
            let spec = node_class_spec::<quartermaster_policies::GCPNodeClassSpec>(
                node_class,
                quartermaster_policies::nodeclass::KIND_GCP,
            )?;
            Ok(gcp::doctor(access, region, spec.as_ref()).await)
        }
        #[cfg(feature = "azure")]
        Cloud::Azure => {
            let spec = node_class_spec::<quartermaster_policies::AzureNodeClassSpec>(
                node_class,
                quartermaster_policies::nodeclass::KIND_AZURE,
            )?;
            Ok(azure::doctor(access, region, spec.as_ref()).await)
        }
        #[allow(unreachable_patterns)]
        other => Err(not_built(other)),
    }
}

/// The `spec` of the one document of `yaml` whose kind is `kind`.
#[allow(dead_code)] // unused when built without any cloud
fn node_class_spec<T: serde::de::DeserializeOwned>(
    yaml: Option<&str>,
    kind: &str,
) -> anyhow::Result<Option<T>> {
    use serde::Deserialize as _;
    let Some(yaml) = yaml else {
        return Ok(None);
    };
    let mut found = None;
    for document in serde_norway::Deserializer::from_str(yaml) {
        let value = serde_norway::Value::deserialize(document)
            .map_err(|e| anyhow::anyhow!("the NodeClass file is not YAML: {e}"))?;
        if value.get("kind").and_then(|k| k.as_str()) == Some(kind) {
            let spec = value
                .get("spec")
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("the {kind} has no spec"))?;
            found = Some(
                serde_norway::from_value(spec)
                    .map_err(|e| anyhow::anyhow!("the {kind}'s spec: {e}"))?,
            );
            break;
        }
    }
    match found {
        Some(spec) => Ok(Some(spec)),
        None => anyhow::bail!("the NodeClass file holds no {kind}"),
    }
}

/// Runs `future` on a runtime of its own, on a thread of its own (callers may be async).
pub fn block_on<T: Send>(
    future: impl std::future::Future<Output = anyhow::Result<T>> + Send,
) -> anyhow::Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| anyhow::anyhow!("starting the async runtime: {e}"))?
                    .block_on(future)
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the cloud call panicked")))
    })
}

/// `--price-refresh-interval` for the chosen cloud: `None` for kwok or `0`.
pub fn price_refresh(
    args: &ControllerArgs,
) -> anyhow::Result<Option<quartermaster_controller::price_refresh::PriceRefresh>> {
    let text = args.price_refresh_interval.trim();
    if text == "0" {
        return Ok(None);
    }
    let interval = quartermaster_policies::duration::parse_duration(text)
        .map_err(|e| anyhow::anyhow!("--price-refresh-interval {text:?}: {e}"))?;
    if interval.is_zero() {
        return Ok(None);
    }
    let cloud = match args.cloud_provider {
        CloudProviderArg::Kwok => return Ok(None),
        CloudProviderArg::Aws => Cloud::Aws,
        CloudProviderArg::Gcp => Cloud::Gcp,
        CloudProviderArg::Azure => Cloud::Azure,
    };
    let access = args.access.clone();
    let region = args.region.clone();
    let fetch: quartermaster_controller::price_refresh::FetchQuotes =
        Arc::new(move |catalog: Catalog| {
            let access = access.clone();
            let region = region.clone();
            Box::pin(async move {
                let region = region
                    .or_else(|| catalog.default_region(cloud).map(str::to_owned))
                    .ok_or_else(|| format!("no region for {cloud} live prices: pass --region"))?;
                live_quotes(cloud, &access, &region, &catalog)
                    .await
                    .map_err(|e| format!("{e:#}"))
            })
        });
    Ok(Some(
        quartermaster_controller::price_refresh::PriceRefresh { interval, fetch },
    ))
}
