//! Client-side rate limits per kind of Compute Engine call, so a burst of launches or a
//! garbage collection pass stays under the project's API rate quotas instead of being
//! throttled (`rateLimitExceeded`).

use std::num::NonZeroU32;

pub use quartermaster_cloud::rate::RateLimits;

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

impl RateLimitSettings {
    /// The limiters these settings allow.
    pub fn limits(&self) -> RateLimits {
        RateLimits::new(self.read_per_second, self.mutate_per_second)
    }
}
