//! # quartermaster-sim
//!
//! The simulated cloud: a [`CloudProvider`](quartermaster_cloud::CloudProvider) for what-if
//! runs, demos and end-to-end tests. It is a product feature, not a test double: it behaves
//! like a cloud, and the same engine code drives it as drives AWS, GCP or Azure.
//!
//! * **Time is given.** [`SimCloud`] reads "now" from the [`Clock`](quartermaster_cloud::Clock)
//!   it is handed (a `ManualClock` in simulations) and never blocks: every trait method returns
//!   a ready future. [`SimCloud::next_event_at`] tells an event loop where to jump the clock.
//! * **Deterministic.** The same [`SimConfig`], seed and sequence of calls give the same
//!   instances, ids, names, events and errors. Randomness comes from `rand`'s ChaCha8 (portable:
//!   the same numbers on every platform), with one stream of the seed for API behaviour and
//!   one per instance, so enabling throttling does not move any instance's interruption.
//! * **An instance's life** is fixed when its launch is accepted: Pending, Running after the
//!   launch latency, its Node registered after the registration delay (a
//!   [`SimNodeEvent::Registered`] without accelerators in allocatable), the device plugin
//!   reporting after its delay ([`SimNodeEvent::AcceleratorsReady`], or never, with
//!   [`SimConfig::accelerators_never_ready`]), and for spot an exponentially distributed
//!   interruption: [`CloudEvent::Interruption`](quartermaster_cloud::CloudEvent::Interruption)
//!   with the cloud's notice (AWS 2 min, GCP and Azure 30 s), then
//!   [`CloudEvent::Terminated`](quartermaster_cloud::CloudEvent::Terminated) at the reclaim.
//!   A flex-start launch waits in a queue before it boots ([`FlexStartConfig::wait`]) and is
//!   reclaimed (`Terminated`) at the end of its seven-day run.
//! * **Failures are the real ones, typed.** Capacity limits and outage windows give
//!   `InsufficientCapacity` (worded as each cloud words it), unknown types or offerings
//!   `InvalidRequest`, throttling `Throttled { retry_after: 1s }`, deleting or getting an
//!   instance that is gone `NotFound`. `create` is idempotent on the claim name.
//!
//! ```
//! use std::sync::Arc;
//! use chrono::{DateTime, TimeDelta};
//! use quartermaster_cloud::ManualClock;
//! use quartermaster_pricing::{Catalog, Cloud};
//! use quartermaster_sim::{SimCloud, SimConfig};
//!
//! let start = DateTime::from_timestamp(1_767_225_600, 0).unwrap();
//! let clock = Arc::new(ManualClock::new(start));
//! let sim = SimCloud::new(Cloud::Aws, Catalog::embedded(), SimConfig::default(), clock.clone(), start, 7);
//! // ... drive it through the CloudProvider trait; between steps:
//! while let Some(next) = sim.next_event_at() {
//!     clock.set(next);
//!     for _event in sim.node_events() { /* feed the in-memory cluster */ }
//! }
//! # assert!(sim.node_events().is_empty());
//! ```

#![forbid(unsafe_code)]

mod cloud;
mod config;
mod duration;
mod error;
mod events;
mod instance;
mod rng;
mod schedule;
mod stats;

pub use cloud::SimCloud;
pub use config::{
    ApiBehaviour, CapacityLimit, CapacityOutage, FlexStartConfig, InterruptionConfig, LatencyTable,
    SimConfig,
};
pub use error::SimError;
pub use events::{SimNode, SimNodeEvent};
pub use stats::{OfferingStats, SimStats};

#[cfg(test)]
mod tests;
