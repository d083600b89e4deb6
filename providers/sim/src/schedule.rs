//! The simulation's agenda: every future moment at which something happens, earliest first.
//!
//! Moments are scheduled when they become known (an instance's whole life at launch, outage
//! edges at construction) and processed in order of `(time, instance, kind)` as the clock
//! passes them. A moment that was scheduled but will not happen any more (its instance was
//! deleted or reclaimed first) stays in the heap and is skipped when it comes up.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use chrono::{DateTime, Utc};

/// What happens at a moment. The order breaks ties between moments of one instance at the
/// same time: an interruption notice comes before the reclaim it announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// The instance is running.
    Running,
    /// Its Node registers.
    Registered,
    /// Its device plugin reports.
    Accelerators,
    /// One of its GPUs fails (an XID error).
    GpuFault,
    /// A reboot asked for finished.
    Rebooted,
    /// Its interruption notice is given.
    Notice,
    /// The cloud reclaims it.
    Reclaim,
    /// An outage window opens or closes (no instance).
    OutageEdge,
}

/// One scheduled moment: when, which instance (launch order; `usize::MAX` for none), what.
pub(crate) type Moment = (DateTime<Utc>, usize, Kind);

/// A min-heap of moments.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    heap: BinaryHeap<Reverse<Moment>>,
}

impl Schedule {
    /// Schedules a moment.
    pub(crate) fn push(&mut self, moment: Moment) {
        self.heap.push(Reverse(moment));
    }

    /// The earliest moment at or before `now`, removed.
    pub(crate) fn pop_due(&mut self, now: DateTime<Utc>) -> Option<Moment> {
        match self.heap.peek() {
            Some(Reverse((at, ..))) if *at <= now => self.heap.pop().map(|Reverse(m)| m),
            _ => None,
        }
    }

    /// The time of the earliest moment for which `occurs` holds; earlier moments for which it
    /// does not are dropped (it must stay false for them forever).
    pub(crate) fn next(&mut self, occurs: impl Fn(&Moment) -> bool) -> Option<DateTime<Utc>> {
        while let Some(Reverse(m)) = self.heap.peek() {
            if occurs(m) {
                return Some(m.0);
            }
            self.heap.pop();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_come_out_in_time_instance_kind_order() {
        let at = |s| DateTime::from_timestamp(s, 0).unwrap();
        let mut s = Schedule::default();
        s.push((at(20), 0, Kind::Reclaim));
        s.push((at(20), 0, Kind::Notice));
        s.push((at(10), 1, Kind::Running));
        s.push((at(10), 0, Kind::Registered));
        s.push((at(30), usize::MAX, Kind::OutageEdge));
        assert_eq!(s.pop_due(at(5)), None);
        assert_eq!(s.pop_due(at(20)), Some((at(10), 0, Kind::Registered)));
        assert_eq!(s.pop_due(at(20)), Some((at(10), 1, Kind::Running)));
        assert_eq!(s.next(|m| m.2 != Kind::Notice), Some(at(20)));
        assert_eq!(s.pop_due(at(20)), Some((at(20), 0, Kind::Reclaim)));
        assert_eq!(s.pop_due(at(20)), None);
        assert_eq!(s.next(|_| false), None);
    }
}
