//! Client-side rate limits per kind of ARM call, so a burst of launches or a garbage collection
//! pass stays under Resource Manager's per-subscription read and write buckets.

use std::num::NonZeroU32;

pub use quartermaster_cloud::rate::RateLimits;

/// Calls per second, per kind of call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitSettings {
    /// GET calls per second (VMs, operations, SKUs).
    pub read_per_second: NonZeroU32,
    /// PUT and DELETE calls per second.
    pub write_per_second: NonZeroU32,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        Self {
            read_per_second: NonZeroU32::new(10).expect("non-zero"),
            write_per_second: NonZeroU32::new(2).expect("non-zero"),
        }
    }
}

impl RateLimitSettings {
    /// The limiters these settings allow.
    pub fn limits(&self) -> RateLimits {
        RateLimits::new(self.read_per_second, self.write_per_second)
    }
}
