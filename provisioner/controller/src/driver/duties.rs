//! Periodic cloud duties of a pass: capacity reservations read and told, the clouds' events
//! polled, leaked instances and orphan nodes collected, drift asked.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use quartermaster_engine::Event;

use super::{Driver, EVENTS_INTERVAL, GC_INTERVAL, Outcome, RESERVATIONS_INTERVAL, due};
use crate::sweep;

impl Driver {
    /// Each cloud's capacity reservations are read now and then; they reach the engine when
    /// they (or the pools that select them) change.
    pub(super) fn poll_reservations(&mut self, now: DateTime<Utc>) {
        if !due(&mut self.next_reservations, now, RESERVATIONS_INTERVAL) {
            return;
        }
        for provider in self.ctx.providers.values() {
            let provider = provider.clone();
            let tx = self.outcomes_tx.clone();
            self.ctx.spawn(async move {
                match provider.reservations().await {
                    Ok(reservations) => {
                        let _ = tx.send(Outcome::Reservations {
                            cloud: provider.cloud(),
                            reservations,
                        });
                    }
                    Err(e) => {
                        tracing::warn!(cloud = %provider.cloud(), error = %e, "could not read capacity reservations; the last ones read stand")
                    }
                }
            });
        }
    }

    /// Tells the engine the reservation offers when they changed.
    pub(super) fn tell_reservations(&mut self, now: DateTime<Utc>) {
        let Some(engine) = &mut self.engine else {
            return;
        };
        let all: Vec<quartermaster_pricing::Reservation> =
            self.reservations.values().flatten().cloned().collect();
        if all.is_empty() && self.reservations_told.is_none() {
            return;
        }
        let mut ours: BTreeMap<String, u32> = BTreeMap::new();
        for c in engine
            .claims()
            .filter(|c| c.provider_id.is_some() && !c.deleting)
        {
            if let Some(id) = c
                .labels
                .get(quartermaster_pricing::reservation::LABEL_RESERVATION_ID)
            {
                *ours.entry(id.clone()).or_default() += 1;
            }
        }
        let (aws, gcp, azure) = (
            self.ctx.stores.aws_node_classes.state(),
            self.ctx.stores.gcp_node_classes.state(),
            self.ctx.stores.azure_node_classes.state(),
        );
        let offers = crate::reservations::offers(
            &all,
            &self.ctx.stores.node_pools.state(),
            crate::reservations::NodeClasses {
                aws: &aws,
                gcp: &gcp,
                azure: &azure,
            },
            &ours,
        );
        if self.reservations_told.as_ref() != Some(&offers) {
            self.reservations_told = Some(offers.clone());
            engine.handle(now, Event::ReservationsChanged(offers));
        }
    }

    /// What the clouds announced (spot interruption notices, instances gone behind our back)
    /// goes to the engine; a claim whose instance is gone is deleted so its record goes too.
    pub(super) fn poll_cloud_events(&mut self, now: DateTime<Utc>) {
        if !due(&mut self.next_events, now, EVENTS_INTERVAL) {
            return;
        }
        for provider in self.ctx.providers.values() {
            self.ctx.spawn(sweep::forward_events(
                self.ctx.clone(),
                provider.clone(),
                self.outcomes_tx.clone(),
            ));
        }
    }

    /// Instances without a NodeClaim (a leak: a crash between launch and record, a claim
    /// removed by hand) are deleted.
    pub(super) fn collect_garbage(&mut self, now: DateTime<Utc>) {
        if !due(&mut self.next_gc, now, GC_INTERVAL) {
            return;
        }
        let known: BTreeSet<String> = self
            .ctx
            .stores
            .node_claims
            .state()
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .chain(self.launching.iter().cloned())
            .chain(self.claims().into_iter().map(|c| c.name))
            .collect();
        // The instance each claim recorded: another one of the same claim is a duplicate.
        let recorded: BTreeMap<String, String> = self
            .ctx
            .stores
            .node_claims
            .state()
            .iter()
            .filter_map(|c| {
                let id = c.status.as_ref()?.provider_id.clone()?;
                Some((c.metadata.name.clone()?, id))
            })
            .chain(
                self.claims()
                    .into_iter()
                    .filter_map(|c| Some((c.name, c.provider_id?))),
            )
            .collect();
        for provider in self.ctx.providers.values() {
            for (name, spec) in crate::launch::node_classes(&self.ctx, provider.cloud()) {
                provider.node_class_observed(&name, &spec);
            }
            self.ctx.spawn(sweep::delete_leaks(
                provider.clone(),
                known.clone(),
                recorded.clone(),
                now,
            ));
            self.ctx.spawn(sweep::report_drift(
                provider.clone(),
                known.clone(),
                self.outcomes_tx.clone(),
            ));
        }
        self.ctx
            .spawn(sweep::release_orphan_nodes(self.ctx.clone(), known, now));
    }
}
