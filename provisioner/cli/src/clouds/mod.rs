//! The real clouds behind `--cloud-provider aws|gcp|azure`: each in its own file, each behind
//! its Cargo feature (the SDKs are large), each turning the flags into its crate's settings and
//! connecting. `kwok` is wired in `commands::controller`.

#[cfg(feature = "aws")]
mod aws;
#[cfg(feature = "azure")]
mod azure;
#[cfg(feature = "gcp")]
mod gcp;

use std::sync::Arc;

use quartermaster_cloud::{Clock, CloudProvider};
use quartermaster_pricing::{Catalog, Cloud};

use crate::cli::{CloudProviderArg, ControllerArgs};

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
                    "--cloud-provider {name}: this build has no {name} support (built without the `{name}` feature)"
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
