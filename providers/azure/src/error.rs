//! The Azure crate's one error type: what can go wrong before any ARM call (settings, the
//! NodeClass, the bootstrap data). ARM call failures are [`quartermaster_cloud::CloudError`]s.

/// A setup or NodeClass problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AzureError {
    /// The settings cannot work (a bad endpoint URL, no credential source).
    #[error("Azure settings: {0}")]
    Settings(String),
    /// The AzureNodeClass asks for something this provider cannot do.
    #[error("AzureNodeClass: {0}")]
    NodeClass(String),
    /// The bootstrap custom data could not be read.
    #[error("bootstrap data: {0}")]
    Bootstrap(String),
    /// The Retail Prices API failed or answered something unreadable.
    #[error("Azure Retail Prices API: {0}")]
    Prices(String),
}

impl From<AzureError> for quartermaster_cloud::CloudError {
    fn from(e: AzureError) -> Self {
        match e {
            AzureError::Prices(message) => quartermaster_cloud::CloudError::Transient { message },
            other => quartermaster_cloud::CloudError::InvalidRequest {
                message: other.to_string(),
            },
        }
    }
}
