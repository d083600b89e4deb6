//! Engine behaviour, driven event by event.

mod adopt;
mod alias_labels;
mod consolidation;
mod fixtures;
mod lifecycle;
mod static_pools;
