//! Client-side rate limits per kind of Compute Engine call, so a burst of launches or a
//! garbage collection pass stays under the project's API rate quotas instead of being
//! throttled (`rateLimitExceeded`).

use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// Calls per second, per kind of call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitSettings {
    /// Read calls per second (get, list, operation polls).
    pub read_per_second: NonZeroU32,
    /// Mutating calls per second (insert, delete).
    pub mutate_per_second: NonZeroU32,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        Self {
            read_per_second: NonZeroU32::new(20).expect("non-zero"),
            mutate_per_second: NonZeroU32::new(5).expect("non-zero"),
        }
    }
}

/// The limiters.
#[derive(Clone)]
pub struct RateLimits {
    read: Arc<DefaultDirectRateLimiter>,
    mutate: Arc<DefaultDirectRateLimiter>,
}

impl RateLimits {
    /// Limiters with `settings` (bursts up to one second's worth).
    pub fn new(settings: RateLimitSettings) -> Self {
        Self {
            read: Arc::new(RateLimiter::direct(Quota::per_second(
                settings.read_per_second,
            ))),
            mutate: Arc::new(RateLimiter::direct(Quota::per_second(
                settings.mutate_per_second,
            ))),
        }
    }

    /// Waits for a read call's turn.
    pub async fn read(&self) {
        self.read.until_ready().await;
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
