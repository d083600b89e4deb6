//! Engine behaviour, driven event by event.

mod fixtures;
mod lifecycle;
