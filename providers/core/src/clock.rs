//! Time as an input: the engine and the simulated cloud read "now" from a [`Clock`] they are
//! given, real in the cluster and virtual in simulations.

use std::sync::Mutex;

use chrono::{DateTime, TimeDelta, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to (simulations, tests).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    /// Moves the clock to `to` (never backwards).
    pub fn set(&self, to: DateTime<Utc>) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        if to > *now {
            *now = to;
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: TimeDelta) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_forward() {
        let start = DateTime::from_timestamp(1_000, 0).unwrap();
        let clock = ManualClock::new(start);
        clock.advance(TimeDelta::seconds(5));
        assert_eq!(clock.now(), start + TimeDelta::seconds(5));
        clock.set(start);
        assert_eq!(clock.now(), start + TimeDelta::seconds(5));
    }
}
