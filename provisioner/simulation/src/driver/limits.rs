//! NodePool limits checked against the clouds' truth: after every launch the cloud accepted,
//! the pool's live instances (capacity, count and price in force) must be within its
//! `limits` (resources, `nodes`, `maxHourlyCost`). A launch that takes a pool over one of them
//! is a `limit_violations` of the summary, however briefly the excess lasted.
//!
//! Gangs are checked with the garbage collection (every [`super::GC_INTERVAL`]): a gang whose
//! NodeClaims are partly launched and partly not, past the gang launch timeout (plus one
//! collection interval of slack), is a `gangs_half_launched` of the summary.

use std::collections::BTreeMap;

use quartermaster_solver::{Resources, to_resources};

use super::Driver;

/// Slack on `maxHourlyCost` for rounding, dollars per hour.
const COST_SLACK: f64 = 1e-6;

/// A NodePool's live instances.
#[derive(Debug, Default)]
pub(super) struct LiveInPool {
    /// Their capacity, summed.
    capacity: Resources,
    /// Record index → capacity.
    instances: BTreeMap<usize, Resources>,
}

impl Driver<'_> {
    /// Record index `i` is a live instance: counted for its pool and the pool's limits checked.
    pub(super) fn live(&mut self, i: usize) {
        let inst = &self.rec.instances[i];
        let pool = inst.node_pool.clone();
        let capacity = self
            .world
            .pool(&pool)
            .and_then(|p| {
                let it = self.catalog.get(inst.cloud, &inst.instance_type)?;
                self.world.setup.pools[p].spec.node_shape.capacity(it)
            })
            .map_or(Resources::ZERO, |c| {
                to_resources(&self.world.setup.resources, &c)
            });
        let live = self.live_by_pool.entry(pool.clone()).or_default();
        if live.instances.insert(i, capacity).is_none() {
            live.capacity += capacity;
        }
        if self.over_limits(&pool) {
            self.limit_violations += 1;
        }
    }

    /// Record index `i` is no longer billed.
    pub(super) fn not_live(&mut self, i: usize) {
        let pool = &self.rec.instances[i].node_pool;
        if let Some(live) = self.live_by_pool.get_mut(pool)
            && let Some(capacity) = live.instances.remove(&i)
        {
            live.capacity -= capacity;
        }
    }

    /// Records the gangs left half-launched past their timeout now.
    pub(super) fn check_gangs(&mut self) {
        // Only gang launches can be half done (and the claims' views are not free to build).
        if !self.scenario.gang_aware || !self.scenario.has_gangs() {
            return;
        }
        let deadline = self.scenario.engine.gang_launch_timeout + super::GC_INTERVAL;
        // Per gang: the first claim's creation, and whether any is launched and any is not.
        let mut gangs: BTreeMap<String, (chrono::DateTime<chrono::Utc>, bool, bool)> =
            BTreeMap::new();
        for c in self.engine.claims() {
            let Some(gang) = c.gang else { continue };
            if c.deleting {
                continue;
            }
            let e = gangs.entry(gang).or_insert((c.created_at, false, false));
            e.0 = e.0.min(c.created_at);
            if c.provider_id.is_some() {
                e.1 = true;
            } else {
                e.2 = true;
            }
        }
        for (gang, (since, launched, waiting)) in gangs {
            if launched && waiting && self.now - since > deadline {
                self.half_launched_gangs.insert(gang);
            }
        }
    }

    /// Whether `pool`'s live instances exceed one of its limits now.
    fn over_limits(&self, pool: &str) -> bool {
        let (Some(p), Some(live)) = (self.world.pool(pool), self.live_by_pool.get(pool)) else {
            return false;
        };
        let limits = &self.world.setup.pools[p].spec.limits;
        if limits
            .nodes
            .is_some_and(|max| live.instances.len() as u64 > max)
        {
            return true;
        }
        if let Some(max) = limits.max_hourly_cost {
            let cost: f64 = live.instances.keys().map(|&i| self.instance_price(i)).sum();
            if cost > max + COST_SLACK {
                return true;
            }
        }
        !live.capacity.fits_in(&limits.resources)
    }
}
