//! Engine behaviour, driven event by event.

mod adopt;
mod alias_labels;
mod consolidation;
mod disruption;
mod explain;
mod fixtures;
mod fleet;
mod flex_start;
mod gangs;
mod headroom;
mod lifecycle;
mod mig;
mod node_shape;
mod nominations;
mod provider_fallback;
mod provisioning_requests;
mod regions;
mod repair;
mod reservations;
mod retirement;
mod static_pools;
