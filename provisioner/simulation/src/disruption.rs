//! What voluntary disruption did in a run, and whether it broke a rule: the engine's commands
//! (by kind, with their expected saving), the pods they moved, and violations of
//! PodDisruptionBudgets, NodePool disruption budgets and do-not-disrupt annotations, judged by
//! the driver from what actually happened (not from what the engine meant to do).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use quartermaster_engine::{DeleteReason, DisruptionCommand, PodDisruptionBudgetView, PoolPolicy};
use quartermaster_policies::{DisruptionReason, Operator, Requirement, Requirements};

use crate::scenario::Workload;

/// The disruption figures of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DisruptionRecord {
    /// Commands by kind (`delete`, `multi_delete`, `replace`, `split`, `multi_replace`,
    /// `empty`, `drift`, `expire`).
    pub commands: BTreeMap<String, u64>,
    /// Sum of the commands' expected savings, $/hour.
    pub saving_per_hour: f64,
    /// Pods moved or evicted by voluntary disruption (and expiry).
    pub pods_disrupted: u64,
    /// Voluntary evictions a PodDisruptionBudget did not allow at that moment.
    pub pdb_violations: u64,
    /// Commands that disrupted more nodes of a pool than its budgets allowed.
    pub budget_violations: u64,
    /// Voluntary moves of pods annotated do-not-disrupt (expiry, which is forceful, excepted).
    pub do_not_disrupt_violations: u64,
    /// Fleet cost when the achievable saving was measured, $/hour.
    pub fleet_cost_at_measure: f64,
    /// Cost of the plan for every pod running then, solved from scratch, $/hour.
    pub from_scratch_cost_at_measure: f64,
    /// When it was measured.
    pub measured_at: Option<DateTime<Utc>>,
    /// Fleet cost at the end of the run (prices in force then), $/hour.
    pub fleet_cost_at_end: f64,
    /// Fleet cost once consolidation had done all it would on the workload of the measure
    /// point held still (the settle), $/hour; `None` for a run without measures.
    pub fleet_cost_after_settle: Option<f64>,
    /// How long the settle ran, simulated seconds.
    pub settle_seconds: f64,
}

/// Follows disruption through a run.
#[derive(Debug, Default)]
pub struct Tracker {
    /// The figures.
    pub record: DisruptionRecord,
    /// Claims being disrupted voluntarily, with their pool and reason.
    disrupting: BTreeMap<String, (String, DeleteReason)>,
    /// Node name -> claim, for nodes of claims being disrupted.
    nodes: BTreeMap<String, String>,
    /// The PDB views last told to the engine.
    pub told: Vec<PodDisruptionBudgetView>,
}

impl Tracker {
    /// A command was decided: counted, and its nodes checked against their pools' budgets.
    /// `pool_of` gives a claim's pool policy and how many live claims that pool has. A command
    /// may take nodes from several pools (a multi-node replace): each pool is judged by its own
    /// budget, counting only its own nodes.
    pub fn command<'p>(
        &mut self,
        now: DateTime<Utc>,
        c: &DisruptionCommand,
        pool_of: impl Fn(&str) -> Option<(&'p PoolPolicy, usize)>,
    ) {
        *self
            .record
            .commands
            .entry(c.kind.as_str().to_owned())
            .or_default() += 1;
        self.record.saving_per_hour += c.saving_per_hour;
        let mut pools: BTreeMap<String, (&'p PoolPolicy, usize)> = BTreeMap::new();
        for (claim, node) in c
            .claims
            .iter()
            .zip(c.nodes.iter().map(Some).chain(std::iter::repeat(None)))
        {
            let pool = pool_of(claim);
            let pool_name = pool.map(|(p, _)| p.spec.name.clone()).unwrap_or_default();
            if let Some(p) = pool {
                pools.insert(pool_name.clone(), p);
            }
            self.disrupting.insert(claim.clone(), (pool_name, c.reason));
            if let Some(node) = node {
                self.nodes.insert(node.clone(), claim.clone());
            }
        }
        let reason = match c.reason {
            DeleteReason::Empty => DisruptionReason::Empty,
            DeleteReason::Drifted => DisruptionReason::Drifted,
            DeleteReason::Underutilized => DisruptionReason::Underutilized,
            // Expiry is forceful: no budget applies.
            _ => return,
        };
        for (pool_name, (policy, total)) in pools {
            let disrupting = self
                .disrupting
                .values()
                .filter(|(p, r)| *p == pool_name && *r != DeleteReason::Expired)
                .count();
            if disrupting > policy.allowed_disruptions(reason, total, now) {
                self.record.budget_violations += 1;
            }
        }
    }

    /// A claim is gone (deleted) or its disruption was called off (its node uncordoned).
    pub fn ended(&mut self, claim: &str) {
        self.disrupting.remove(claim);
        self.nodes.retain(|_, c| c != claim);
    }

    /// A node was uncordoned: a move was called off.
    pub fn uncordoned(&mut self, node: &str) {
        if let Some(claim) = self.nodes.remove(node) {
            self.disrupting.remove(&claim);
        }
    }

    /// Why `node` is being disrupted voluntarily, if it is.
    pub fn reason_of(&self, node: &str) -> Option<DeleteReason> {
        let claim = self.nodes.get(node)?;
        self.disrupting.get(claim).map(|(_, r)| *r)
    }

    /// A pod of `workload` stopped on `node` (moved or evicted) at `now`, with `unavailable`
    /// other pods of its workload not running. Counted when the node is being disrupted
    /// voluntarily, and judged.
    pub fn pod_stopped(&mut self, node: &str, workload: &Workload, unavailable: u32) {
        let Some(reason) = self.reason_of(node) else {
            return;
        };
        self.record.pods_disrupted += 1;
        if reason == DeleteReason::Expired {
            return;
        }
        if workload.do_not_disrupt() {
            self.record.do_not_disrupt_violations += 1;
        }
        // The eviction API refuses an eviction while the budget allows none: pods not running
        // (pending, or evicted and not yet running again) use it up. A pod moved in the
        // simulation runs again at once, so moves at one instant do not add up.
        if let Some(max) = workload.max_unavailable
            && unavailable >= max
        {
            self.record.pdb_violations += 1;
        }
    }

    /// Nodes being disrupted now.
    pub fn disrupted_nodes(&self) -> BTreeSet<&str> {
        self.nodes.keys().map(String::as_str).collect()
    }
}

/// The PodDisruptionBudget of a workload with `maxUnavailable`, as the PDB controller would
/// report it: `disruptionsAllowed = maxUnavailable - pods not running`.
pub fn pdb_view(workload: &Workload, unavailable: u32) -> Option<PodDisruptionBudgetView> {
    let max = workload.max_unavailable?;
    let mut selector = Requirements::default();
    for (k, v) in &workload.metadata.labels {
        if let Ok(r) = Requirement::new(k.as_str(), Operator::In, [v.as_str()]) {
            selector.add(r);
        }
    }
    Some(PodDisruptionBudgetView {
        namespace: workload.namespace.clone(),
        name: workload.name.clone(),
        selector,
        disruptions_allowed: max.saturating_sub(unavailable),
    })
}

#[cfg(test)]
mod tests {
    use quartermaster_engine::CommandKind;

    use super::*;
    use crate::testing::scenario_text;

    /// Two pools, `gpu` and `cpu`, each of ten nodes under the default budget (10%: one node).
    fn pools() -> crate::scenario::world::World {
        let text = scenario_text(
            "1h",
            "[on-demand]",
            "{}",
            "    - name: web
      kind: Deployment
      replicas: 1
      template:
        spec:
          containers: [{name: c, resources: {requests: {cpu: '1', memory: 1Gi}}}]
",
        )
        .replace(
            "  cloud:",
            "    - apiVersion: quartermaster.dev/v1
      kind: NodePool
      metadata: {name: cpu}
      spec:
        template:
          spec:
            nodeClassRef: {group: quartermaster.dev, kind: GCPNodeClass, name: default}
            requirements:
              - {key: quartermaster.dev/instance-family, operator: In, values: [n2]}
        disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 2m}
  cloud:",
        );
        let s = crate::scenario::Scenario::parse("two-pools.yaml", &text, None)
            .unwrap_or_else(|e| panic!("{e}"));
        crate::scenario::world::build(&s).unwrap_or_else(|e| panic!("{e}"))
    }

    fn command(claims: &[&str]) -> DisruptionCommand {
        DisruptionCommand {
            kind: CommandKind::MultiReplace,
            reason: DeleteReason::Underutilized,
            claims: claims.iter().map(|c| (*c).to_owned()).collect(),
            nodes: claims.iter().map(|c| format!("node-{c}")).collect(),
            replacements: vec!["new".into()],
            pods: 2,
            saving_per_hour: 1.0,
        }
    }

    #[test]
    fn a_command_across_pools_is_judged_by_each_pools_own_budget() {
        let world = pools();
        let pool_of = |claim: &str| {
            let name = claim.split('-').next().unwrap_or_default();
            Some((&world.setup.pools[world.pool(name)?], 10))
        };
        let mut t = Tracker::default();
        let now = Utc::now();
        // One node of each pool: within both budgets (one node each).
        t.command(now, &command(&["gpu-1", "cpu-1"]), pool_of);
        assert_eq!(t.record.budget_violations, 0);
        // A second gpu node while the first is still going: the gpu pool's budget is broken.
        t.command(now, &command(&["gpu-2"]), pool_of);
        assert_eq!(t.record.budget_violations, 1);
        // Once they are gone, the budget is free again.
        for c in ["gpu-1", "gpu-2", "cpu-1"] {
            t.ended(c);
        }
        t.command(now, &command(&["gpu-3", "cpu-3"]), pool_of);
        assert_eq!(t.record.budget_violations, 1);
    }
}
