//! The cloud seam. Every cloud (AWS, GCP, Azure, and the simulated one) implements
//! [`CloudProvider`]; the engine only ever sees these types. SDK types stop at
//! `providers/<cloud>`.
//!
//! The trait is deliberately small, as Karpenter's is: create, delete, get, list, instance
//! types, drift, and the interruption events the cloud announces. Errors are typed so the
//! engine can branch on them: insufficient capacity marks an offering unavailable and falls
//! back to the next one, throttling waits and retries, not-found means already gone.

mod clock;
mod doctor;
mod error;
mod node_classes;
pub mod price;
pub mod rate;
pub mod redact;
mod types;

pub use clock::{Clock, ManualClock, SystemClock};
pub use doctor::{Check, CheckOutcome};
pub use error::api::{
    self as api_error, ApiError, ApiErrorKind, ErrorTable, KindWords, StatusRules,
};
pub use error::{CloudError, exhausted};
pub use node_classes::NodeClasses;
pub use redact::{REDACTED, Secrets, Sensitive};
pub use types::{
    CloudEvent, Instance, InstanceState, LaunchOffering, LaunchRequest, NodeClassSpec,
};

use std::future::Future;
use std::pin::Pin;

use quartermaster_pricing::{Cloud, InstanceType};

/// What every provider method returns: a boxed future, so providers can be used as
/// `dyn CloudProvider` and looked up by NodeClass kind.
pub type CloudFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, CloudError>> + Send + 'a>>;

/// One cloud behind a narrow port.
pub trait CloudProvider: Send + Sync {
    /// Which cloud this is.
    fn cloud(&self) -> Cloud;

    /// Launches one instance for a NodeClaim. Idempotent on `request.claim_name`: a retry of a
    /// request that already launched returns the same instance, never a second one.
    fn create<'a>(&'a self, request: &'a LaunchRequest) -> CloudFuture<'a, Instance>;

    /// Terminates an instance. Deleting an instance that is already gone is
    /// [`CloudError::NotFound`], which callers treat as success.
    fn delete<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()>;

    /// One instance by provider id.
    fn get<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, Instance>;

    /// Every instance this provider launched for Quartermaster (for garbage collection of leaks).
    fn list(&self) -> CloudFuture<'_, Vec<Instance>>;

    /// The instance types this provider can launch, with offerings and their availability.
    fn instance_types(&self) -> CloudFuture<'_, Vec<InstanceType>>;

    /// Why an instance no longer matches what its NodeClaim asks for, if it does not.
    fn is_drifted<'a>(&'a self, instance: &'a Instance) -> CloudFuture<'a, Option<String>>;

    /// Events the cloud announced since the last call: spot interruption notices, terminations.
    fn poll_events(&self) -> CloudFuture<'_, Vec<CloudEvent>>;

    /// The current spec of the NodeClass `name`, as the cluster has it now. Drivers call this
    /// before asking [`is_drifted`](Self::is_drifted), so a provider that judges drift against
    /// what a NodeClass selects knows every NodeClass, including after a restart and before
    /// any launch from it. Providers that do not need it ignore it.
    fn node_class_observed(&self, _name: &str, _spec: &NodeClassSpec) {}

    /// The capacity reservations (ODCRs, Capacity Blocks) the account holds and may launch
    /// into, active or scheduled. Providers without them have none.
    fn reservations(&self) -> CloudFuture<'_, Vec<quartermaster_pricing::Reservation>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Reboots an instance in place (node repair's `reboot` action: AWS `RebootInstances`, GCP
    /// `instances.reset`, Azure `virtualMachines/restart`). The instance keeps its id, disks
    /// and reservation. A cloud that cannot reboot answers [`CloudError::InvalidRequest`], and
    /// the node is replaced instead; an instance already gone is [`CloudError::NotFound`].
    fn reboot<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        Box::pin(async move {
            Err(CloudError::InvalidRequest {
                message: format!(
                    "{} cannot reboot {provider_id} in place",
                    self.cloud().as_str()
                ),
            })
        })
    }
}
