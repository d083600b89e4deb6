//! Spot volatility: how often spot capacity of a type is reclaimed, and what that is expected to
//! cost per hour.
//!
//! AWS publishes the *frequency of interruption* of each instance type per region and OS in its
//! Spot Instance Advisor as one of five bands: the share of spot instances of that type that AWS
//! reclaimed over the trailing month. The catalog carries the band of each spot offering where a
//! source gives it (`spot_interruption` in the data files); unknown is `None`, never a guess.
//!
//! The expected cost of an hour on a spot offering is its price plus the expected cost of being
//! interrupted during that hour: [`InterruptionBand::hourly_rate`] × the restart cost (the work
//! lost and redone, the time to get a new node: what a NodePool says an interruption costs it).
//! See [`Offering::expected_cost_per_hour`]. On-demand and reserved capacity is never interrupted
//! by the cloud, so its expected cost is its price.

use std::fmt;
use std::str::FromStr;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::{CapacityType, Offering, PricingError};

/// Hours in the month the Spot Advisor bands are measured over (365 × 24 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// An AWS Spot Instance Advisor "frequency of interruption" band: the share of a type's spot
/// instances in a region that were interrupted over the trailing month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum InterruptionBand {
    /// `<5%`.
    #[serde(rename = "<5%")]
    Under5,
    /// `5-10%`.
    #[serde(rename = "5-10%")]
    From5To10,
    /// `10-15%`.
    #[serde(rename = "10-15%")]
    From10To15,
    /// `15-20%`.
    #[serde(rename = "15-20%")]
    From15To20,
    /// `>20%`.
    #[serde(rename = ">20%")]
    Over20,
}

impl InterruptionBand {
    /// All bands, least volatile first.
    pub const ALL: [InterruptionBand; 5] = [
        InterruptionBand::Under5,
        InterruptionBand::From5To10,
        InterruptionBand::From10To15,
        InterruptionBand::From15To20,
        InterruptionBand::Over20,
    ];

    /// The band as the Spot Advisor writes it: `<5%`, `5-10%`, `10-15%`, `15-20%`, `>20%`.
    pub const fn as_str(self) -> &'static str {
        match self {
            InterruptionBand::Under5 => "<5%",
            InterruptionBand::From5To10 => "5-10%",
            InterruptionBand::From10To15 => "10-15%",
            InterruptionBand::From15To20 => "15-20%",
            InterruptionBand::Over20 => ">20%",
        }
    }

    /// The share of instances interrupted per month that the band stands for: its upper edge
    /// (a pessimistic reading: 0.05, 0.10, 0.15, 0.20), and 0.25 for the open `>20%` band.
    pub const fn monthly_rate(self) -> f64 {
        match self {
            InterruptionBand::Under5 => 0.05,
            InterruptionBand::From5To10 => 0.10,
            InterruptionBand::From10To15 => 0.15,
            InterruptionBand::From15To20 => 0.20,
            InterruptionBand::Over20 => 0.25,
        }
    }

    /// Expected interruptions per instance-hour: [`InterruptionBand::monthly_rate`] spread over
    /// [`HOURS_PER_MONTH`].
    pub fn hourly_rate(self) -> f64 {
        self.monthly_rate() / HOURS_PER_MONTH
    }
}

impl fmt::Display for InterruptionBand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for InterruptionBand {
    type Err = PricingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        InterruptionBand::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| PricingError::UnknownInterruptionBand(s.to_string()))
    }
}

/// The interruption band of one spot offering, with where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpotInterruption {
    /// The band.
    pub band: InterruptionBand,
    /// Source key (see the header of the data file it came from).
    pub source: String,
    /// The date the band is known to hold.
    pub as_of: NaiveDate,
}

impl Offering {
    /// The expected cost of an hour on this offering: the price, plus for spot capacity with a
    /// known interruption band the expected cost of interruptions in that hour,
    /// `band.hourly_rate() × restart_cost` (`restart_cost` in USD: what one interruption costs,
    /// e.g. a few minutes of the node's price plus the work lost). Without a band (unknown
    /// volatility) or for on-demand and reserved capacity it is the price. A negative or
    /// non-finite restart cost counts as zero.
    ///
    /// The band comes from [`crate::Catalog::spot_interruption`].
    pub fn expected_cost_per_hour(&self, band: Option<InterruptionBand>, restart_cost: f64) -> f64 {
        let restart_cost = if restart_cost.is_finite() {
            restart_cost.max(0.0)
        } else {
            0.0
        };
        match (self.capacity_type, band) {
            (CapacityType::Spot, Some(b)) => self.price_per_hour + b.hourly_rate() * restart_cost,
            _ => self.price_per_hour,
        }
    }

    /// The cost of `minutes` of this offering's price: the usual restart cost of an interrupted
    /// node (the minutes a replacement takes to launch, join and warm up).
    pub fn minutes_of_price(&self, minutes: f64) -> f64 {
        self.price_per_hour * minutes / 60.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offering(capacity_type: CapacityType, price: f64) -> Offering {
        Offering {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            capacity_type,
            price_per_hour: price,
            available: true,
            price_source: "test".into(),
            price_as_of: NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
            estimate: false,
        }
    }

    #[test]
    fn bands_round_trip_and_order_by_volatility() {
        for b in InterruptionBand::ALL {
            assert_eq!(b.to_string().parse::<InterruptionBand>(), Ok(b));
            assert_eq!(
                serde_json::to_string(&b).unwrap(),
                format!("\"{}\"", b.as_str())
            );
        }
        assert!(InterruptionBand::Under5 < InterruptionBand::Over20);
        assert!(matches!(
            "7%".parse::<InterruptionBand>(),
            Err(PricingError::UnknownInterruptionBand(_))
        ));
        let rates: Vec<f64> = InterruptionBand::ALL
            .iter()
            .map(|b| b.monthly_rate())
            .collect();
        assert!(rates.windows(2).all(|w| w[0] < w[1]), "{rates:?}");
    }

    #[test]
    fn expected_cost_adds_the_interruption_cost_to_spot_only() {
        let spot = offering(CapacityType::Spot, 10.0);
        // >20% a month: 0.25 / 730 interruptions an hour; a restart costing $730 adds $0.25.
        let e = spot.expected_cost_per_hour(Some(InterruptionBand::Over20), 730.0);
        assert!((e - 10.25).abs() < 1e-9, "{e}");
        let e = spot.expected_cost_per_hour(Some(InterruptionBand::Under5), 730.0);
        assert!((e - 10.05).abs() < 1e-9, "{e}");
        assert_eq!(spot.expected_cost_per_hour(None, 730.0), 10.0);
        assert_eq!(
            spot.expected_cost_per_hour(Some(InterruptionBand::Over20), f64::NAN),
            10.0
        );
        assert_eq!(
            spot.expected_cost_per_hour(Some(InterruptionBand::Over20), -5.0),
            10.0
        );
        let od = offering(CapacityType::OnDemand, 10.0);
        assert_eq!(
            od.expected_cost_per_hour(Some(InterruptionBand::Over20), 730.0),
            10.0
        );
        assert!((spot.minutes_of_price(6.0) - 1.0).abs() < 1e-12);
    }
}
