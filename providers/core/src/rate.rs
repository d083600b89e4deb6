//! Client-side rate limits for one cloud API: a bucket for reads and one for writes, so a burst
//! of launches or a garbage-collection pass stays under the cloud's request-rate limits instead
//! of being throttled. Each cloud crate sets the rates its API allows.

use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// The two limiters (bursts up to one second's worth). Clones share the buckets.
#[derive(Clone)]
pub struct RateLimits {
    read: Arc<DefaultDirectRateLimiter>,
    write: Arc<DefaultDirectRateLimiter>,
}

impl RateLimits {
    /// Limiters allowing `read_per_second` reads and `write_per_second` writes.
    pub fn new(read_per_second: NonZeroU32, write_per_second: NonZeroU32) -> Self {
        Self {
            read: Arc::new(RateLimiter::direct(Quota::per_second(read_per_second))),
            write: Arc::new(RateLimiter::direct(Quota::per_second(write_per_second))),
        }
    }

    /// Waits for a read's turn (describe, get, list, operation polls).
    pub async fn read(&self) {
        self.read.until_ready().await;
    }

    /// Waits for a write's turn (launch, delete, templates).
    pub async fn write(&self) {
        self.write.until_ready().await;
    }
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits").finish_non_exhaustive()
    }
}
