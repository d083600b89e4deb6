//! Live prices reaching the running controller (`--price-refresh-interval`): while this
//! replica leads, the configured cloud's price APIs are asked every interval, their quotes
//! merged into the catalog the controller started with
//! ([`Catalog::with_live_prices`]), and when any price differs from the catalog in use the new
//! catalog goes to the provisioning loop, which hands it to the engine as its
//! [`CatalogChanged`](quartermaster_engine::Event::CatalogChanged) event: running nodes are
//! priced again and consolidation takes a look.
//!
//! The controller crate has no cloud SDK: the fetch is a boxed function the binary passes in.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use quartermaster_cloud::Clock;
use quartermaster_pricing::{CapacityType, Catalog, Cloud, PriceQuote};
use tokio::sync::mpsc;

/// Asks a cloud's price APIs for quotes of the catalog's types (an error is one line).
pub type FetchQuotes =
    Arc<dyn Fn(Catalog) -> BoxFuture<'static, Result<Vec<PriceQuote>, String>> + Send + Sync>;

/// The periodic price refresh.
#[derive(Clone)]
pub struct PriceRefresh {
    /// Time between two refreshes (the first one runs when leading starts).
    pub interval: Duration,
    /// The fetch.
    pub fetch: FetchQuotes,
}

impl std::fmt::Debug for PriceRefresh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PriceRefresh")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

type Prices = BTreeMap<(Cloud, String, String, CapacityType), u64>;

/// Every offering's price (bits of the f64, so NaN compares equal to itself).
fn prices(catalog: &Catalog) -> Prices {
    catalog
        .instance_types()
        .iter()
        .flat_map(|t| {
            t.offerings.iter().map(move |o| {
                (
                    (t.cloud, t.name.clone(), o.zone.clone(), o.capacity_type),
                    o.price_per_hour.to_bits(),
                )
            })
        })
        .collect()
}

/// `base` merged with `quotes`, when any price of the result differs from `current`'s;
/// `None` when nothing changed. Quotes are always merged into `base` (the catalog the
/// controller started with), so a quote rejected now brings back the base price rather than
/// keeping an older live one.
pub fn refreshed(
    base: &Catalog,
    current: &Catalog,
    quotes: &[PriceQuote],
    now: DateTime<Utc>,
) -> Option<Catalog> {
    let merge = base.with_live_prices(quotes, now);
    tracing::info!(
        accepted = merge.accepted,
        rejected = merge.rejected.len(),
        unknown = merge.unknown,
        "live prices merged"
    );
    for r in merge.rejected.iter().take(5) {
        tracing::warn!(
            instance_type = %r.quote.instance_type,
            zone = ?r.quote.zone,
            capacity_type = %r.quote.capacity_type,
            price = r.quote.price_per_hour,
            reason = %r.reason,
            "live price rejected; the catalog's price stays"
        );
    }
    (prices(&merge.catalog) != prices(current)).then_some(merge.catalog)
}

/// Refreshes every `refresh.interval` until `stop` resolves, sending each changed catalog on
/// `tx`. A failed fetch keeps the catalog in use and is logged.
pub async fn run(
    refresh: PriceRefresh,
    base: Catalog,
    clock: Arc<dyn Clock>,
    tx: mpsc::UnboundedSender<Catalog>,
    stop: impl Future<Output = ()>,
) {
    let mut stop = std::pin::pin!(stop);
    let mut current = base.clone();
    loop {
        let fetched = tokio::select! {
            () = &mut stop => return,
            fetched = (refresh.fetch)(base.clone()) => fetched,
        };
        match fetched {
            Ok(quotes) => {
                if let Some(catalog) = refreshed(&base, &current, &quotes, clock.now()) {
                    tracing::info!("prices changed: the engine gets the new catalog");
                    current = catalog.clone();
                    if tx.send(catalog).is_err() {
                        return;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "live prices unavailable; the catalog in use stays")
            }
        }
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(refresh.interval) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn quote(price: f64) -> PriceQuote {
        PriceQuote {
            cloud: Cloud::Aws,
            instance_type: "g5.xlarge".into(),
            region: "us-east-1".into(),
            zone: None,
            capacity_type: CapacityType::OnDemand,
            price_per_hour: price,
            source: "test-api".into(),
            fetched_at: Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap(),
        }
    }

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 1, 0, 0).unwrap()
    }

    fn on_demand(c: &Catalog) -> f64 {
        c.get(Cloud::Aws, "g5.xlarge")
            .unwrap()
            .cheapest_offering(Some(CapacityType::OnDemand))
            .unwrap()
            .price_per_hour
    }

    #[test]
    fn a_changed_price_yields_the_new_catalog_and_the_same_prices_nothing() {
        let base = Catalog::embedded();
        let old = on_demand(&base);
        let new = refreshed(&base, &base, &[quote(old * 1.1)], now()).expect("changed");
        assert!((on_demand(&new) - old * 1.1).abs() < 1e-9);
        assert_eq!(refreshed(&base, &new, &[quote(old * 1.1)], now()), None);
        // Nonsense is rejected: nothing changes.
        assert_eq!(refreshed(&base, &base, &[quote(f64::NAN)], now()), None);
        // The quote gone: back to the base price.
        let back = refreshed(&base, &new, &[], now()).expect("back to base");
        assert_eq!(on_demand(&back), old);
    }

    #[tokio::test]
    async fn the_loop_sends_a_changed_catalog_once_and_stops() {
        let base = Catalog::embedded();
        let price = on_demand(&base) * 0.9;
        let fetch: FetchQuotes = Arc::new(move |_| Box::pin(async move { Ok(vec![quote(price)]) }));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(run(
            PriceRefresh {
                interval: Duration::from_millis(10),
                fetch,
            },
            base,
            Arc::new(quartermaster_cloud::SystemClock),
            tx,
            async move {
                let _ = stop_rx.await;
            },
        ));
        let catalog = rx.recv().await.expect("a changed catalog");
        assert!((on_demand(&catalog) - price).abs() < 1e-9);
        // Later refreshes give the same prices: nothing more is sent.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err());
        let _ = stop_tx.send(());
        task.await.unwrap();
    }

    /// The driver hands a changed catalog to the engine: the running claim is priced again.
    #[tokio::test(start_paused = true)]
    async fn a_changed_catalog_reaches_the_engine_through_the_driver() {
        let mut env = crate::tests::Env::new(crate::tests::cluster_with_gpu_pool(&[("llm-0", 1)]));
        env.passes(0, 3).await;
        let engine = env.driver.engine().expect("engine built");
        let claim = engine.claims().next().expect("one claim");
        let offering = claim.offering.clone();
        let quote = PriceQuote {
            cloud: claim.cloud,
            instance_type: offering.instance_type.clone(),
            region: env
                .ctx
                .catalog
                .get(claim.cloud, &offering.instance_type)
                .and_then(|t| t.offerings.iter().find(|o| o.zone == offering.zone))
                .map(|o| o.region.clone())
                .expect("the offering's region"),
            zone: Some(offering.zone.clone()),
            capacity_type: offering.capacity_type,
            price_per_hour: offering.price_per_hour * 1.25,
            source: "test-api".into(),
            fetched_at: crate::tests::t0(),
        };
        let base = env.ctx.catalog.clone();
        let catalog = refreshed(&base, &base, &[quote], crate::tests::t0()).expect("a change");
        env.driver.catalog_changed(crate::tests::t0(), catalog);
        let engine = env.driver.engine().expect("engine");
        let repriced = engine.claims().next().expect("one claim");
        assert!(
            (repriced.offering.price_per_hour - offering.price_per_hour * 1.25).abs() < 1e-9,
            "{} -> {}",
            offering.price_per_hour,
            repriced.offering.price_per_hour
        );
    }
}
