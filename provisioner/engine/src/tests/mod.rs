//! Engine behaviour, driven event by event.

mod consolidation;
mod fixtures;
mod lifecycle;
