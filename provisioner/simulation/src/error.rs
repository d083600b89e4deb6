//! The crate's one error enum.

use chrono::{DateTime, Utc};

/// Why a simulation could not be loaded, run or reported.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimulationError {
    /// A file could not be read.
    #[error("{file}: {message}")]
    Read {
        /// The file as given.
        file: String,
        /// What went wrong.
        message: String,
    },
    /// The scenario is malformed or invalid. `path` is the field path as written in the file
    /// (`spec.workload[2].duration`).
    #[error("{file}: {path}: {reason}")]
    Scenario {
        /// The scenario file as given (`<embedded default>` for the built-in one).
        file: String,
        /// Field path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The discrete-event loop made no progress: the engine kept answering with actions at one
    /// instant, or a source kept scheduling events at the current time.
    #[error("simulation stuck at {at}: {what}")]
    Stuck {
        /// Simulated time.
        at: DateTime<Utc>,
        /// What kept the loop at that instant.
        what: String,
    },
    /// The driver could not carry out what the engine or a simulated cloud said (a bug in one of
    /// them or in the driver).
    #[error("simulation inconsistent at {at}: {what}")]
    Inconsistent {
        /// Simulated time.
        at: DateTime<Utc>,
        /// What happened.
        what: String,
    },
    /// A report file could not be written.
    #[error("writing {path}: {message}")]
    Write {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

impl SimulationError {
    /// A [`SimulationError::Scenario`] from its parts.
    pub(crate) fn scenario(file: &str, path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Scenario {
            file: file.to_owned(),
            path: path.into(),
            reason: reason.into(),
        }
    }
}
