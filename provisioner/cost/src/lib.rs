//! Quartermaster's cost allocation, shared by `quartermaster simulate` (`cost.csv`), the
//! controller (`/cost`, cost metrics) and `quartermaster report`.
//!
//! Pure: no Kubernetes client, no HTTP, no async runtime, no clock — every function takes the
//! instant it computes for.
//!
//! # Inputs
//!
//! A driver describes what ran: [`NodeUsage`] intervals (a node billed at a price from `start`
//! to `end`, `None` while it runs) and [`PodUsage`] intervals (a pod on a named node, with its
//! [`PodShare`]: requests, or an hourly cost already allocated).
//!
//! # The rule
//!
//! [`allocate`] cuts node intervals at clock hours and splits each node-hour's cost over the
//! pods that ran on the node in that hour by their share of the node — requests' dominant share,
//! accelerators first (see [`dominant_share`]) — weighted by how long they ran; shares adding
//! up to more than 1 are scaled down to 1, and what no pod took is idle. Rows of one node-hour
//! sum to its cost. [`split_at`] is the same rule for one instant (dollars per hour per pod).
//!
//! # Outputs
//!
//! - FOCUS 1.2 rows ([`FocusRow`], [`COLUMNS`]) written with the `csv` crate by
//!   [`write_csv`] / [`write_rows`]: one row per pod per node per clock hour plus one idle row per
//!   node-hour; `BilledCost` sums to the cost of the nodes.
//! - [`FleetCost`] from [`fleet_cost`], the JSON of `/cost` and `report -o json`. Its keys:
//!   - `at`: the instant the figures are for (RFC 3339);
//!   - `from`: the earliest node start covered (`null` without nodes);
//!   - `currency`: `"USD"`;
//!   - `cost_per_hour`: dollars per hour of the nodes running at `at`;
//!   - `cost_since_start`: dollars billed by every node from its start (or `from`) up to `at`;
//!   - `idle`: `{cost_per_hour, cost_since_start}` of the part no pod took;
//!   - `by_node_pool`, `by_namespace` (idle excluded), `by_capacity_type`: objects keyed by
//!     name, each `{cost_per_hour, cost_since_start}`;
//!   - `nodes`: an array of `{name, nodeclaim, nodepool, cloud, zone, instance_type,
//!     capacity_type, accelerator, accelerator_count, price_per_hour, started_at, ended_at,
//!     cost_since_start, idle_per_hour}` (`ended_at` is `null` while the node runs).
//!
//!   `cost_since_start` = sum of `by_namespace` + `idle` = sum of `by_node_pool` = sum of
//!   `by_capacity_type` = sum of the nodes' (and the same holds for `cost_per_hour`). Keys are
//!   only ever added.
//!
//! # Prometheus
//!
//! [`prometheus`] names the controller's two gauges and their labels (the metrics contract) and
//! turns `/api/v1/query_range` answers into usage intervals.

mod allocate;
mod error;
mod fleet;
mod focus;
mod list_price;
pub mod prometheus;
mod usage;

pub use allocate::{Allocation, NodeSplit, allocate, dominant_share, hour_floor, hours, split_at};
pub use error::CostError;
pub use fleet::{CostLine, FleetCost, NodeCost, fleet_cost};
pub use focus::{
    Billing, COLUMNS, FocusRow, format_decimal, month, pricing_category, provider, row, write_csv,
    write_rows,
};
pub use list_price::{catalog_list_price, fill_list_prices};
pub use usage::{Amounts, NodeUsage, PodShare, PodUsage};
