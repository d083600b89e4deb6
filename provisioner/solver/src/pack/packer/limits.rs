//! What a new or resized node must satisfy: its NodePool's limits (resources, nodes,
//! maxHourlyCost) and the guards (maxGpuOvershoot, minValues).

use crate::pack::bins::BinKind;
use crate::pack::guard;
use crate::pack::shapes::Shape;
use crate::resources::Resources;

use super::Packer;

impl Packer<'_> {
    /// Whether pool `p` may add a node of `shape` at `price` without passing its limits.
    pub fn within_limits(&self, p: usize, shape: &Shape, price: f64) -> Result<(), String> {
        let pool = &self.snapshot.node_pools[p];
        let usage = &self.usage[p];
        let table = &self.snapshot.resources;
        for slot in 0..table.len() {
            let limit = pool.limits.resources.get(slot);
            if limit != i64::MAX
                && usage
                    .resources
                    .get(slot)
                    .saturating_add(shape.capacity.get(slot))
                    > limit
            {
                return Err(format!(
                    "NodePool {}: limit {}={} reached",
                    pool.name,
                    table.name(slot),
                    table.format(slot, limit)
                ));
            }
        }
        if let Some(nodes) = pool.limits.nodes
            && usage.nodes + 1 > nodes
        {
            return Err(format!(
                "NodePool {}: limit nodes={nodes} reached",
                pool.name
            ));
        }
        if let Some(max) = pool.limits.max_hourly_cost
            && usage.hourly_cost + price > max + 1e-9
        {
            return Err(format!(
                "NodePool {}: limit maxHourlyCost=${max}/h reached",
                pool.name
            ));
        }
        Ok(())
    }

    /// Whether a new node of `shape` at `offering`, opened for class `c` and holding
    /// `requests`, passes its pool's guards: `maxGpuOvershoot` (unless no offering within the
    /// bound that class `c` may use is cheaper per accelerator) and `minValues` (enough distinct
    /// values among the offerings that hold the pods). The reason when it does not.
    pub fn guards(
        &self,
        c: usize,
        shape: usize,
        offering: usize,
        requests: &Resources,
    ) -> Result<(), String> {
        let class = &self.classes[c];
        let zone = self.shapes[shape].offerings[offering].zone;
        self.guards_with(shape, offering, requests, |s2, o2| {
            class.allows(s2, o2)
                && (!class.zone_sensitive || self.shapes[s2].offerings[o2].zone == zone)
        })
    }

    /// [`Self::guards`] for new bin `b` as it is: the offerings every class on it allows.
    pub fn bin_guards(&self, b: usize) -> Result<(), String> {
        let bin = &self.bins[b];
        let BinKind::New { shape, offering } = bin.kind else {
            return Ok(());
        };
        if bin.pods.is_empty() {
            return Ok(());
        }
        let zone_fixed = bin
            .classes
            .iter()
            .any(|&(c, _)| self.classes[c as usize].zone_sensitive);
        self.guards_with(shape, offering, &bin.requests, |s2, o2| {
            bin.classes
                .iter()
                .all(|&(c, _)| self.classes[c as usize].allows(s2, o2))
                && (!zone_fixed || self.shapes[s2].offerings[o2].zone == bin.zone)
        })
    }

    fn guards_with(
        &self,
        shape: usize,
        offering: usize,
        requests: &Resources,
        allows: impl Fn(usize, usize) -> bool,
    ) -> Result<(), String> {
        let pool_index = self.shapes[shape].pool;
        let pool = &self.snapshot.node_pools[pool_index];
        if !guard::guarded(pool) {
            return Ok(());
        }
        let fitting = || {
            guard::fitting(
                self.shapes,
                &self.pool_shapes[pool_index],
                requests,
                &allows,
            )
        };
        let price = self.shapes[shape].offerings[offering].price;
        guard::check_overshoot(pool, self.shapes, shape, price, requests, fitting)
            .map_err(|o| o.to_string())?;
        if !guard::min_values(pool).is_empty() {
            let mut found = fitting();
            guard::within_overshoot(pool, self.shapes, requests, &mut found);
            guard::check_min_values(pool, self.shapes, &found)?;
        }
        Ok(())
    }
}
