//! The one error type of this crate.

/// What can go wrong allocating costs or reading Prometheus series.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// Writing the CSV failed (the writer's error, e.g. a closed pipe, is the source).
    #[error("cannot write the FOCUS CSV")]
    Io(#[from] std::io::Error),
    /// A row could not be encoded as CSV.
    #[error("cannot write the FOCUS CSV: {0}")]
    Write(String),
    /// A Prometheus API answer is not what `/api/v1/query_range` returns.
    #[error("Prometheus answer is not a query_range matrix: {0}")]
    PrometheusResponse(String),
    /// Prometheus answered with an error.
    #[error("Prometheus error ({kind}): {message}")]
    PrometheusError {
        /// `errorType` of the answer.
        kind: String,
        /// `error` of the answer.
        message: String,
    },
    /// A series carries a label value we cannot use.
    #[error("series {metric}{{{labels}}}: label {label}={value:?}: {reason}")]
    Label {
        /// Metric name.
        metric: String,
        /// The series' labels, `k="v"` comma-separated.
        labels: String,
        /// The label.
        label: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A sample value we cannot use (negative cost).
    #[error("series {metric}{{{labels}}}: value {value} is not a cost in dollars per hour")]
    Value {
        /// Metric name.
        metric: String,
        /// The series' labels, `k="v"` comma-separated.
        labels: String,
        /// The value.
        value: f64,
    },
}

impl From<csv::Error> for CostError {
    fn from(e: csv::Error) -> Self {
        if e.is_io_error() {
            if let csv::ErrorKind::Io(io) = e.into_kind() {
                return CostError::Io(io);
            }
            return CostError::Write("I/O error".to_owned());
        }
        CostError::Write(e.to_string())
    }
}
