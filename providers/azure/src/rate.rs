//! Client-side rate limits per kind of ARM call, so a burst of launches or a garbage collection
//! pass stays under Resource Manager's per-subscription read and write buckets.

use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

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

/// The limiters.
#[derive(Clone)]
pub(crate) struct RateLimits {
    read: Arc<DefaultDirectRateLimiter>,
    write: Arc<DefaultDirectRateLimiter>,
}

impl RateLimits {
    /// Limiters with `settings` (bursts up to one second's worth).
    pub(crate) fn new(settings: RateLimitSettings) -> Self {
        Self {
            read: Arc::new(RateLimiter::direct(Quota::per_second(
                settings.read_per_second,
            ))),
            write: Arc::new(RateLimiter::direct(Quota::per_second(
                settings.write_per_second,
            ))),
        }
    }

    /// Waits for a read's turn.
    pub(crate) async fn read(&self) {
        self.read.until_ready().await;
    }

    /// Waits for a write's turn.
    pub(crate) async fn write(&self) {
        self.write.until_ready().await;
    }
}
