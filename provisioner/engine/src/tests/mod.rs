//! Engine behaviour, driven event by event.

mod adopt;
mod consolidation;
mod fixtures;
mod lifecycle;
