//! Client-side rate limits per kind of EC2 call, so a burst of launches or a garbage
//! collection pass stays under EC2's request-rate buckets instead of being throttled.

use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

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

/// The limiters.
#[derive(Clone)]
pub struct RateLimits {
    describe: Arc<DefaultDirectRateLimiter>,
    mutate: Arc<DefaultDirectRateLimiter>,
}

impl RateLimits {
    /// Limiters with `settings` (bursts up to one second's worth).
    pub fn new(settings: RateLimitSettings) -> Self {
        Self {
            describe: Arc::new(RateLimiter::direct(Quota::per_second(
                settings.describe_per_second,
            ))),
            mutate: Arc::new(RateLimiter::direct(Quota::per_second(
                settings.mutate_per_second,
            ))),
        }
    }

    /// Waits for a Describe call's turn.
    pub async fn describe(&self) {
        self.describe.until_ready().await;
    }

    /// Waits for a mutating call's turn.
    pub async fn mutate(&self) {
        self.mutate.until_ready().await;
    }
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits").finish_non_exhaustive()
    }
}
