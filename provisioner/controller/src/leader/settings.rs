//! Where the Lease is, who we are, and the election's timing.

use std::time::Duration;

use crate::ControllerError;

/// The Lease's default name.
pub const DEFAULT_LEASE_NAME: &str = "quartermaster-leader";
/// How long a holder that stopped renewing keeps the Lease (client-go's default).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long the leader keeps leading without a successful renewal (client-go's default).
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often the leader renews and the others try to acquire (client-go's default).
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Where the Lease is, who we are, and the election's timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderSettings {
    /// The controller's namespace (the Lease lives there; `POD_NAMESPACE`).
    pub namespace: String,
    /// The Lease's name ([`DEFAULT_LEASE_NAME`]).
    pub lease_name: String,
    /// This replica's identity, unique among replicas (`POD_NAME`).
    pub identity: String,
    /// How long a holder that stopped renewing keeps the Lease: whole seconds, at least 1.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal; shorter than
    /// `lease_duration`, so it stops before anyone else may take over.
    pub renew_deadline: Duration,
    /// The pause between attempts; shorter than `renew_deadline`.
    pub retry_period: Duration,
}

impl LeaderSettings {
    /// Settings with the default Lease name and client-go's default timing.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: DEFAULT_LEASE_NAME.to_string(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// Checks the settings: names not empty; `0 < retry_period < renew_deadline <
    /// lease_duration`; `lease_duration` in whole seconds that fit the Lease.
    pub fn validate(&self) -> Result<(), ControllerError> {
        let setting =
            |name: &'static str, reason: String| ControllerError::Setting { name, reason };
        for (name, value) in [
            ("leader election namespace (POD_NAMESPACE)", &self.namespace),
            ("leader election lease name", &self.lease_name),
            ("leader election identity (POD_NAME)", &self.identity),
        ] {
            if value.trim().is_empty() {
                return Err(setting(name, "must not be empty".to_string()));
            }
        }
        let lease = self.lease_duration;
        if lease.subsec_nanos() != 0
            || lease.as_secs() == 0
            || i32::try_from(lease.as_secs()).is_err()
        {
            return Err(setting(
                "leader election lease duration",
                format!("must be a whole number of seconds, at least 1, got {lease:?}"),
            ));
        }
        if self.retry_period.is_zero() {
            return Err(setting(
                "leader election retry period",
                "must be longer than zero".to_string(),
            ));
        }
        if self.renew_deadline >= lease {
            return Err(setting(
                "leader election renew deadline",
                format!(
                    "must be shorter than the lease duration ({lease:?}), got {:?}",
                    self.renew_deadline
                ),
            ));
        }
        if self.retry_period >= self.renew_deadline {
            return Err(setting(
                "leader election retry period",
                format!(
                    "must be shorter than the renew deadline ({:?}), got {:?}",
                    self.renew_deadline, self.retry_period
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn lease_duration_seconds(&self) -> i32 {
        // Validated to fit; saturate rather than panic if not.
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}
