//! Flex-start capacity: GCP's Dynamic Workload Scheduler (DWS) flex-start provisioning model.
//!
//! A flex-start VM is asked for like any other (`scheduling.provisioningModel: FLEX_START` with
//! a `maxRunDuration`), waits in a queue until Compute Engine has the capacity (at most
//! [`FLEX_START_MAX_WAIT`]; the request fails after that), then runs uninterrupted for at most
//! [`FLEX_START_MAX_RUN`] and is deleted at its end. In exchange the A4, A3 and A2 machine types
//! (vCPUs, memory and GPUs) are billed on discounted SKUs. The GKE ProvisioningRequest class
//! `queued-provisioning.gke.io` is served with it.
//!
//! Facts, read 2026-12-04:
//! * Google Cloud documentation, "About Flex-start VMs"
//!   (cloud.google.com/compute/docs/instances/about-flex-start-vms): flex-start supports every
//!   accelerator-optimized machine type except A4X and G4 (and H4D); A4, A3, A2 and H4D are
//!   billed at a discounted price; VMs run for up to seven days, then are stopped or deleted.
//! * Google Cloud blog, "GPUs when you need them: Introducing Flex-start VMs" (2025-09-25): a
//!   request may wait in the queue for up to two hours; flex-start consumes preemptible quota.
//! * Google Cloud Japan, "DWS Flex-Start 新料金プラン" (zenn.dev/google_cloud_jp, 2025): the
//!   flex-start SKUs of the high-end GPU machine types cost "up to about half" of on-demand.
//!
//! No per-SKU flex-start price list was read, so the embedded flex-start prices are estimates
//! (`estimate = true`): [`FLEX_START_PRICE_FRACTION`] of the type's on-demand price in the same
//! zone for the discounted families, the on-demand price for the others. A catalog file or the
//! live price feed may state real ones (capacity type `flex-start`).

use chrono::TimeDelta;

use crate::{CapacityType, Catalog, Cloud, InstanceType};

/// How long a flex-start VM runs at most (GCP: seven days).
pub const FLEX_START_MAX_RUN: TimeDelta = TimeDelta::days(7);
/// How long a flex-start request waits for capacity at most (GCP: two hours).
pub const FLEX_START_MAX_WAIT: TimeDelta = TimeDelta::hours(2);
/// How long before a flex-start VM's run ends its node is drained (as a Capacity Block's), so
/// its pods run elsewhere before Compute Engine deletes it.
pub const FLEX_START_DRAIN_BEFORE: TimeDelta = TimeDelta::minutes(40);
/// The estimated flex-start price of a discounted family, as a fraction of on-demand.
pub const FLEX_START_PRICE_FRACTION: f64 = 0.5;
/// The GCP families billed on discounted flex-start SKUs.
pub const DISCOUNTED_FAMILIES: &[&str] = &["a2", "a3", "a4"];
/// The GCP families flex-start serves at the on-demand price (accelerator-optimized, not
/// discounted; A4X and G4 are not served).
pub const UNDISCOUNTED_FAMILIES: &[&str] = &["g2"];
/// The `price_source` of an estimated flex-start offering.
pub const ESTIMATE_SOURCE: &str = "flex-start estimate (see pricing/src/flex_start.rs)";

/// The fraction of on-demand a flex-start offering of `it` is estimated at, when flex-start
/// serves its family.
pub fn price_fraction(it: &InstanceType) -> Option<f64> {
    if it.cloud != Cloud::Gcp {
        return None;
    }
    let family = it.family.as_str();
    if DISCOUNTED_FAMILIES.contains(&family) {
        Some(FLEX_START_PRICE_FRACTION)
    } else if UNDISCOUNTED_FAMILIES.contains(&family) {
        Some(1.0)
    } else {
        None
    }
}

impl Catalog {
    /// The catalog with a `flex-start` offering for every zone where a type flex-start serves
    /// has an on-demand offering and no flex-start one yet (priced by [`price_fraction`], an
    /// estimate). The solver offers them only to pools that name capacity type `flex-start`.
    pub fn with_flex_start_offerings(&self) -> Catalog {
        let mut changed: Vec<InstanceType> = Vec::new();
        for t in self.for_cloud(Cloud::Gcp) {
            let Some(fraction) = price_fraction(t) else {
                continue;
            };
            let mut offerings = t.offerings.clone();
            for o in &t.offerings {
                if o.capacity_type != CapacityType::OnDemand
                    || t.offerings
                        .iter()
                        .any(|f| f.zone == o.zone && f.capacity_type == CapacityType::FlexStart)
                {
                    continue;
                }
                let mut flex = o.clone();
                flex.capacity_type = CapacityType::FlexStart;
                flex.price_per_hour = o.price_per_hour * fraction;
                flex.estimate = true;
                flex.price_source = ESTIMATE_SOURCE.to_owned();
                offerings.push(flex);
            }
            if offerings.len() != t.offerings.len() {
                changed.push(t.with_offerings(offerings));
            }
        }
        let mut out = self.clone();
        if !changed.is_empty() {
            out.merge(changed);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discounted_gcp_gpu_types_get_estimated_flex_start_offerings_per_on_demand_zone() {
        let catalog = Catalog::embedded().with_flex_start_offerings();
        let a3 = catalog.get(Cloud::Gcp, "a3-highgpu-8g").unwrap();
        for o in a3
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::OnDemand)
        {
            let flex = a3
                .offerings
                .iter()
                .find(|f| f.zone == o.zone && f.capacity_type == CapacityType::FlexStart)
                .expect("a flex-start offering in every on-demand zone");
            assert!((flex.price_per_hour - 0.5 * o.price_per_hour).abs() < 1e-9);
            assert!(flex.estimate);
        }
        // g2 is served at on-demand; CPU types and other clouds are not served.
        let g2 = catalog.get(Cloud::Gcp, "g2-standard-4").unwrap();
        assert!(
            g2.offerings
                .iter()
                .any(|o| o.capacity_type == CapacityType::FlexStart)
        );
        assert!(catalog.instance_types().iter().all(|t| {
            price_fraction(t).is_some()
                || t.offerings
                    .iter()
                    .all(|o| o.capacity_type != CapacityType::FlexStart)
        }));
        // Idempotent.
        assert_eq!(catalog.with_flex_start_offerings(), catalog);
    }
}
