//! # quartermaster-pricing
//!
//! Quartermaster's instance-type catalog: what each AWS, GCP and Azure instance type offers
//! (vCPU, memory, accelerators, local NVMe, network, interconnect, pod density), what it costs
//! per hour in which zone and capacity type, which node labels it carries, and how much of it
//! pods can actually use.
//!
//! The crate is pure: no network, no cloud SDK, no async. Its only I/O is reading a user
//! override file in [`Catalog::from_path`].
//!
//! ## Using it
//!
//! ```
//! use quartermaster_pricing::{Catalog, CapacityType, Cloud};
//!
//! let catalog = Catalog::embedded();
//! let p5 = catalog.get(Cloud::Aws, "p5.48xlarge").unwrap();
//! let on_demand = p5.cheapest_offering(Some(CapacityType::OnDemand)).unwrap();
//! assert_eq!(on_demand.price_per_hour, 55.04);
//! assert_eq!(p5.capacity()["nvidia.com/gpu"], 8);
//! ```
//!
//! A user file (`--catalog FILE`) is read with [`Catalog::from_path`] and applied with
//! [`Catalog::with_override`]: `mode = "extend"` (the default) replaces types with the same
//! `(cloud, name)` and adds new ones; `mode = "replace"` makes the file the whole catalog.
//!
//! ## Sources
//!
//! The compiled-in data lives in the curated facts files `data/aws.toml`, `data/gcp.toml` and
//! `data/azure.toml`, and in the generated offerings files `data/offerings/aws.csv` (accelerator
//! types) and `data/offerings/aws-cpu.csv` (CPU types next to GPUs, outside the default region),
//! written by `catalog-gen` ([`generate`]) from a dated SkyPilot catalog snapshot and the facts
//! files (refresh: `cargo run -p quartermaster-pricing --bin catalog-gen -- --skypilot DIR
//! --commit SHA --read-on YYYY-MM-DD`; it generates GCP and Azure the same way, writing
//! `offerings/<cloud>.csv` and `offerings/<cloud>-cpu.csv` for the types whose facts carry no
//! curated offerings). Each file's header lists its sources with repository, path, commit
//! and date, and says how zones were chosen. In short:
//!
//! * AWS prices: Karpenter's generated on-demand price table
//!   (`aws/karpenter-provider-aws`, `pkg/providers/pricing/zz_generated.pricing_aws.go`,
//!   generated 2026-07-20 for us-east-1) — e.g. p5.48xlarge 55.04 and p4d.24xlarge 21.957642,
//!   the prices after AWS's 2025 cut, not the older marketing figures. Specs: Karpenter's
//!   instance-type reference (from EC2 `DescribeInstanceTypes`). Per-AZ spot prices and AZ
//!   availability: `skypilot-org/skypilot-catalog` `catalogs/v8/aws/vms.csv`; the offerings of
//!   the generated types (g5, g6, g6e, g7e, p4d, p4de, p5, p5en, p6-b200, inf2, trn1, trn1n: every
//!   region and zone of the snapshot, on-demand and spot) come from it alone, as do those of the
//!   CPU types m7i, c7i (large, xlarge) and r7i.xlarge in every region but us-east-1.
//! * GCP prices: `cloudpilot-ai/karpenter-provider-gcp`'s `initial-prices.json` (us-central1,
//!   2026-08-03, on-demand and spot); zones and shapes: SkyPilot's `catalogs/v8/gcp/vms.csv`.
//! * Azure prices: `Azure/karpenter-provider-azure`'s generated price table (eastus, generated
//!   2026-06-18); specs: `MicrosoftDocs/azure-docs` size pages. No Azure spot prices are in the
//!   static sources, so none are listed.
//!
//! ## Regions
//!
//! Offerings carry their region; a catalog has several regions per cloud, and each cloud a
//! default region ([`Catalog::default_region`]: `us-east-1`, `us-central1`, `eastus` in the
//! embedded data). Where nodes are bought is decided by the caller: a NodeClass region, the
//! cluster's region, else the default region (`quartermaster-cluster` does this for NodePools).
//! [`Catalog::embedded_all_regions`] is the whole compiled-in catalog; [`Catalog::embedded`] is
//! its one-region view ([`Catalog::in_default_regions`]), which benchmarks, simulated clouds
//! and tests are pinned against.
//!
//! Every [`Offering`] carries its `price_source` key (defined in the file header) and
//! `price_as_of` date. Where a figure had no source it was left out rather than invented; an
//! estimated price would be flagged `estimate = true` together with the rule that produced it
//! (the embedded data has none).
//!
//! ## Data format
//!
//! TOML, one file per cloud, compact and meant to be edited by hand:
//!
//! ```toml
//! schema = 1              # optional; only 1 is understood
//! mode = "extend"         # override files only: "extend" (default) or "replace"
//! cloud = "aws"           # default cloud of the entries (an entry may set its own)
//! region = "us-east-1"    # region of the entries' zones / on_demand / spot (an entry may set its own)
//! default_region = "us-east-1"  # optional: where this cloud's machines are bought when nothing
//!                               # else says (needs `cloud`); see Catalog::default_region
//!
//! [[instance_type]]
//! name = "p5.48xlarge"
//! family = "p5"
//! vcpu = 192
//! memory_mib = 2097152
//! arch = "amd64"                      # amd64 | arm64
//! accelerator = { manufacturer = "nvidia", name = "h100", count = 8, memory_mib = 81920, resource = "nvidia.com/gpu" }
//! local_nvme_gb = 30400               # default 0
//! network_gbps = 3200.0               # default 0 = unknown
//! interconnect = "efa"                # efa | infiniband; omit for none
//! efa_count = 32                      # AWS only; required with interconnect = "efa"
//! max_pods = 100
//! spec_source = "K-AWS-IT"            # optional provenance keys, see the file header
//! zones = ["us-east-1a", "us-east-1b"]
//! zones_source = "SKY-AWS"
//! on_demand = { price = 55.04, source = "K-AWS-P", as_of = 2026-07-20 }
//! spot = [
//!   { zone = "us-east-1b", price = 19.2531, source = "SKY-AWS:use1-az2", as_of = 2026-11-30 },
//! ]
//! spot_interruption = { band = "<5%", source = "AWS-SA", as_of = 2026-11-30 }  # optional
//!
//! [[instance_type.regions]]           # the same type in more regions, each with its own prices
//! region = "us-west-2"
//! zones = ["us-west-2a", "us-west-2b"]
//! zones_source = "SKY-AWS"
//! on_demand = { price = 55.04, source = "SKY-AWS", as_of = 2026-11-30 }
//! spot = [{ zone = "us-west-2a", price = 20.1, source = "SKY-AWS:usw2-az1", as_of = 2026-11-30 }]
//! ```
//!
//! * `on_demand` applies to every zone in `zones`; a `spot` entry applies to its `zone`, or to
//!   every zone when `zone` is omitted (GCP spot prices are regional).
//! * `[[instance_type.regions]]` tables price the type in further regions (one table per region,
//!   each with `zones`, `on_demand`, `spot`, `spot_interruption`); a type may also have only
//!   such tables. Files without them (one region per file) read as before.
//! * `spot_interruption` gives the Spot Advisor interruption band (`<5%`, `5-10%`, `10-15%`,
//!   `15-20%`, `>20%`) of the spot offerings next to it, with its source; see [`interruption`].
//! * Any further offering, e.g. reserved capacity, goes in an explicit list:
//!   `offerings = [{ zone = "us-east-1a", capacity_type = "reserved", price = 30.0, source = "my-odcr", as_of = 2026-09-01 }]`
//!   (optional `region`, `available = false`, `estimate`).
//! * An estimated price needs `estimate = true` and `rule = "how it was derived"`.
//! * A fractional vGPU slice is `count = 0` with `fraction = 0.1667`; it does not advertise the
//!   device-plugin resource.
//! * `overhead = { cpu_millis = .., memory_mib = .. }` overrides the computed node overhead.
//! * Dates may be TOML dates (`2026-07-20`) or strings (`"2026-07-20"`).
//!
//! ## Validation
//!
//! [`Catalog::parse`] rejects unknown fields, unknown clouds, capacity types, architectures
//! and interconnects, non-finite or negative prices and prices above
//! [`MAX_PRICE_PER_HOUR`] ($10,000 per hour), duplicate `(cloud, name)` entries,
//! accelerators with `count = 0` that are not fractional, zero `vcpu` / `memory_mib` /
//! `max_pods`, zones that do not belong to the region, a zone priced twice for one capacity
//! type, and a few more consistency rules. Every error is one line naming the file, the entry
//! and the field:
//!
//! `my.toml: instance type "p5.48xlarge" (aws): offerings[2].price: must be a finite non-negative number, got NaN`
//!
//! ## Capacity, overhead and labels
//!
//! [`InstanceType::capacity`] and [`InstanceType::allocatable`] report Kubernetes resources;
//! the overhead between them follows each cloud's documented kube-reserved formula (see
//! [`overhead`]). [`InstanceType::labels`] and [`InstanceType::offering_labels`] produce the
//! node labels listed in [`labels`].

#![forbid(unsafe_code)]

mod catalog;
pub mod coverage;
pub mod derived;
pub mod devices;
mod error;
mod file;
pub mod flex_start;
pub mod generate;
pub mod generated;
pub mod interruption;
pub mod label_cache;
pub mod labels;
pub mod live;
mod model;
pub mod overhead;
pub mod reservation;
pub mod resources;
pub mod sharing;

pub use catalog::{Catalog, EMBEDDED_FILES, EMBEDDED_OFFERINGS};
pub use devices::{
    DeviceAttribute, PublishedDevice, published_devices, published_devices_with_mig,
};
pub use error::PricingError;
pub use file::{CatalogFile, CatalogMode, MAX_PRICE_PER_HOUR, OfferingKey, zone_matches_region};
pub use interruption::{InterruptionBand, SpotInterruption};
pub use live::PriceQuote;
pub use model::{
    Accelerator, Arch, CapacityType, Cloud, InstanceType, Interconnect, Offering, Overhead,
};
pub use reservation::{Reservation, ReservationKind};

#[cfg(test)]
mod generate_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod region_tests;
#[cfg(test)]
mod tests;
