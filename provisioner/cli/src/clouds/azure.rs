//! `--cloud-provider azure`: the flags as `quartermaster_azure` settings, and the connection.

use std::sync::Arc;

use quartermaster_cloud::{Clock, CloudProvider};
use quartermaster_pricing::Catalog;

use crate::cli::ControllerArgs;

/// The Azure provider's settings from the flags.
pub struct Settings;

/// Reads the Azure flags.
pub fn settings(_args: &ControllerArgs) -> anyhow::Result<Settings> {
    anyhow::bail!("--cloud-provider azure: not wired yet")
}

/// Connects to Azure.
pub async fn connect(
    _settings: Settings,
    _client: &kube::Client,
    _catalog: &Catalog,
    _clock: &Arc<dyn Clock>,
) -> anyhow::Result<Arc<dyn CloudProvider>> {
    anyhow::bail!("--cloud-provider azure: not wired yet")
}
