//! New prices: claims are priced again (what they cost now is what removing them saves).

use quartermaster_pricing::Catalog;

use crate::engine::Engine;

impl Engine {
    /// New prices: claims are priced again (what they cost now is what removing them saves).
    pub(crate) fn catalog_changed(&mut self, catalog: Catalog) {
        let reservations: Vec<quartermaster_pricing::Reservation> = self
            .reservations
            .iter()
            .map(|o| o.reservation.clone())
            .collect();
        self.setup.catalog = catalog.with_reserved_offerings(&reservations);
        self.add_flex_start_offerings();
        for c in self.claims.values_mut() {
            let price = |o: &quartermaster_solver::OfferingChoice| {
                self.setup
                    .catalog
                    .get(c.cloud, &o.instance_type)?
                    .offerings
                    .iter()
                    .find(|x| x.zone == o.zone && x.capacity_type == o.capacity_type)
                    .map(|x| x.price_per_hour)
            };
            if let Some(p) = price(&c.offering) {
                c.offering.price_per_hour = p;
            }
            let updated: Vec<Option<f64>> = c.alternatives.iter().map(&price).collect();
            for (o, p) in c.alternatives.iter_mut().zip(updated) {
                if let Some(p) = p {
                    o.price_per_hour = p;
                }
            }
        }
    }
}
