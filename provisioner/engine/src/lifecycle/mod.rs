//! A NodeClaim's life: launched, registered, initialized, deleted.

mod initialization;
mod launch;
mod termination;
