//! The crate's one error enum. Cloud calls fail with [`quartermaster_cloud::CloudError`] like
//! any provider's; this is only for a simulation that cannot be set up.

/// Why a simulated cloud cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// A [`crate::SimConfig`] value is out of range or inconsistent. `field` is the path as
    /// written in a scenario file (camelCase), e.g. `acceleratorsNeverReady` or
    /// `capacity[1].max`.
    #[error("simulation config: {field}: {reason}")]
    InvalidConfig {
        /// Where the bad value is.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl SimError {
    pub(crate) fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidConfig {
            field: field.into(),
            reason: reason.into(),
        }
    }
}
