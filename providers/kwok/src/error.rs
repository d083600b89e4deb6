//! The crate's one error enum. Cloud calls fail with [`quartermaster_cloud::CloudError`] like
//! any provider's, and the kubelet loop logs and retries; this is only for a kwok cloud that
//! cannot be set up (a bad `--kwok-config` file).

/// Why a kwok cloud cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KwokError {
    /// The config file cannot be read.
    #[error("{file}: {message}")]
    Read {
        /// The file.
        file: String,
        /// What went wrong.
        message: String,
    },
    /// The config text is not a valid config (syntax, unknown field, bad duration).
    #[error("{file}: {message}")]
    Parse {
        /// The file (or `<text>`).
        file: String,
        /// The parser's words, with the line and column.
        message: String,
    },
    /// A config value is out of range or inconsistent. `field` is the path as written in the
    /// file (camelCase), e.g. `insufficientCapacity[0].until`.
    #[error("kwok config: {field}: {reason}")]
    InvalidConfig {
        /// Where the bad value is.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl KwokError {
    pub(crate) fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidConfig {
            field: field.into(),
            reason: reason.into(),
        }
    }
}
