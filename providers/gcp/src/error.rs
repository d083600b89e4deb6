//! The GCP crate's one error type: what can go wrong before any Compute Engine call (settings,
//! NodeClass content). Compute call failures are [`quartermaster_cloud::CloudError`]s.

/// A setup or NodeClass problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GcpError {
    /// The settings cannot work (a bad endpoint URL, a client that cannot be built).
    #[error("GCP settings: {0}")]
    Settings(String),
    /// The GCPNodeClass asks for something this provider cannot do.
    #[error("GCPNodeClass: {0}")]
    NodeClass(String),
    /// No usable credentials (the reason, never the credentials).
    #[error("GCP credentials: {0}")]
    Credentials(String),
    /// The Cloud Billing Catalog answered something that is not a SKU list.
    #[error("Cloud Billing Catalog: {0}")]
    Prices(String),
}

impl From<GcpError> for quartermaster_cloud::CloudError {
    fn from(e: GcpError) -> Self {
        quartermaster_cloud::CloudError::InvalidRequest {
            message: e.to_string(),
        }
    }
}
