//! What happened in the simulated cloud, for reports.

use quartermaster_pricing::CapacityType;
use serde::Serialize;

/// Counters over a simulated cloud's life, as of the clock's now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimStats {
    /// Instances launched (idempotent repeats not counted).
    pub launches: u64,
    /// `create` calls answered with an existing instance for the same claim.
    pub idempotent_creates: u64,
    /// `create` calls that failed with insufficient capacity.
    pub capacity_errors: u64,
    /// `create` calls that failed as invalid requests.
    pub invalid_requests: u64,
    /// Calls that were throttled.
    pub throttles: u64,
    /// Calls that failed with a server error (`api.errorProbability`).
    pub server_errors: u64,
    /// Calls that did their work but whose answer was lost (`api.lostResponseProbability`).
    pub lost_responses: u64,
    /// Instances whose Node never registers (`nodesNeverRegister`).
    pub never_registered: u64,
    /// Spot interruption notices given so far.
    pub interruptions: u64,
    /// Instances the cloud reclaimed so far.
    pub reclaims: u64,
    /// Flex-start instances launched (after their queue's wait).
    pub flex_start_launches: u64,
    /// Of the reclaims, flex-start instances deleted at the end of their maximum run (the
    /// engine drains them before: should stay 0).
    pub flex_start_reclaims: u64,
    /// GPU faults (`gpuFaultsPerHour`) so far.
    pub gpu_faults: u64,
    /// Instances rebooted (`CloudProvider::reboot`) so far.
    pub reboots: u64,
    /// Successful `delete` calls.
    pub deletes: u64,
    /// Instances alive (pending or running) now.
    pub live: u64,
    /// Per offering, sorted by instance type, zone and capacity type; only offerings that saw
    /// a launch or a capacity error.
    pub offerings: Vec<OfferingStats>,
}

/// Counters of one offering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OfferingStats {
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
    /// Instances launched.
    pub launches: u64,
    /// Launches refused for insufficient capacity.
    pub capacity_errors: u64,
    /// Interruption notices given so far.
    pub interruptions: u64,
    /// Instances alive now.
    pub live: u64,
}
