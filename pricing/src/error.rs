//! The crate's single error type.

use std::path::PathBuf;

/// Everything that can go wrong in this crate.
///
/// Every message is a single line. Errors about a catalog file name the file, and, where the
/// problem sits inside one instance-type entry, the entry and the field, for example
/// `my.toml: instance type "p5.48xlarge" (aws): offerings[2].price: must be a finite
/// non-negative number, got NaN`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PricingError {
    /// A catalog file could not be read from disk.
    #[error("{}: cannot read catalog file: {message}", path.display())]
    Io {
        /// The file that was being read.
        path: PathBuf,
        /// The operating system's description of the failure.
        message: String,
    },

    /// A catalog file is not well-formed TOML.
    #[error("{file}: line {line}, column {column}: {message}")]
    Syntax {
        /// The file name as given to [`crate::Catalog::parse`].
        file: String,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What is wrong.
        message: String,
    },

    /// A field of a catalog file has a wrong, missing, unknown or out-of-range value.
    #[error("{file}: {entry}{field}: {message}")]
    Invalid {
        /// The file name as given to [`crate::Catalog::parse`].
        file: String,
        /// The entry, rendered with a trailing `": "`, e.g. `instance type "g5.xlarge" (aws): `;
        /// empty for file-level fields.
        entry: String,
        /// Path of the field inside the entry (or the file), e.g. `offerings[2].price`.
        field: String,
        /// What is wrong with it.
        message: String,
    },

    /// The same `(cloud, name)` appears twice in one catalog file.
    #[error(
        "{file}: instance type \"{name}\" ({cloud}): duplicate instance type; an entry with the same cloud and name appears earlier in the file"
    )]
    Duplicate {
        /// The file name as given to [`crate::Catalog::parse`].
        file: String,
        /// The cloud of the duplicated entry.
        cloud: crate::Cloud,
        /// The duplicated instance-type name.
        name: String,
    },

    /// A line of tabular offering data is malformed: a generated offerings file
    /// (`data/offerings/*.csv`) or a SkyPilot `vms.csv` read by the catalog generator.
    #[error("{file}: line {line}: {message}")]
    Data {
        /// The file name.
        file: String,
        /// 1-based line of the problem (0 for the file as a whole).
        line: usize,
        /// What is wrong.
        message: String,
    },

    /// A string is not one of the known clouds (`aws`, `gcp`, `azure`).
    #[error("unknown cloud \"{0}\"; expected one of aws, gcp, azure")]
    UnknownCloud(String),

    /// A string is not one of the known capacity types (`on-demand`, `spot`, `reserved`).
    #[error("unknown capacity type \"{0}\"; expected one of on-demand, spot, reserved")]
    UnknownCapacityType(String),

    /// A string is not one of the known CPU architectures (`amd64`, `arm64`).
    #[error("unknown architecture \"{0}\"; expected one of amd64, arm64")]
    UnknownArch(String),

    /// A string is not one of the known interconnects (`efa`, `infiniband`).
    #[error("unknown interconnect \"{0}\"; expected one of efa, infiniband")]
    UnknownInterconnect(String),

    /// A string is not one of the Spot Advisor interruption bands.
    #[error("unknown interruption band \"{0}\"; expected one of <5%, 5-10%, 10-15%, 15-20%, >20%")]
    UnknownInterruptionBand(String),
}

/// Collapses a message onto one line (TOML and serde messages may contain newlines).
pub(crate) fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
