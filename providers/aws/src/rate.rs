//! Client-side rate limits per kind of EC2 call, so a burst of launches or a garbage
//! collection pass stays under EC2's request-rate buckets instead of being throttled.

use std::num::NonZeroU32;

pub use quartermaster_cloud::rate::RateLimits;

/// Calls per second, per kind of call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitSettings {
    /// Describe* calls per second (EC2's non-mutating bucket refills at 20/s).
    pub describe_per_second: NonZeroU32,
    /// Mutating calls per second: CreateFleet, TerminateInstances, CreateLaunchTemplate (EC2's
    /// bucket refills at 5/s).
    pub mutate_per_second: NonZeroU32,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        Self {
            describe_per_second: NonZeroU32::new(20).expect("non-zero"),
            mutate_per_second: NonZeroU32::new(5).expect("non-zero"),
        }
    }
}

impl RateLimitSettings {
    /// The limiters these settings allow.
    pub fn limits(&self) -> RateLimits {
        RateLimits::new(self.describe_per_second, self.mutate_per_second)
    }
}
