//! `--cloud-provider gcp`: the flags as `quartermaster_gcp` settings, and the connection.

use std::sync::Arc;

use quartermaster_cloud::{Clock, CloudProvider};
use quartermaster_pricing::Catalog;

use crate::cli::ControllerArgs;

/// The GCP provider's settings from the flags.
pub struct Settings;

/// Reads the GCP flags.
pub fn settings(_args: &ControllerArgs) -> anyhow::Result<Settings> {
    anyhow::bail!("--cloud-provider gcp: not wired yet")
}

/// Connects to GCP.
pub async fn connect(
    _settings: Settings,
    _client: &kube::Client,
    _catalog: &Catalog,
    _clock: &Arc<dyn Clock>,
) -> anyhow::Result<Arc<dyn CloudProvider>> {
    anyhow::bail!("--cloud-provider gcp: not wired yet")
}
