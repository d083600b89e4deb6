use std::collections::BTreeMap;

use quartermaster_pricing::CapacityType;
use quartermaster_solver::pod::{HOSTNAME, ZONE};
use quartermaster_solver::resources::{CPU, MEMORY, PODS};

use super::*;
use crate::common::{EFA, NVIDIA_GPU};

fn group_of(pod_name: &str) -> &'static str {
    karpenter::GROUPS
        .iter()
        .copied()
        .filter(|g| pod_name.starts_with(&format!("{g}-")))
        .max_by_key(|g| g.len())
        .unwrap()
}

#[test]
fn every_scenario_builds_with_exactly_the_pods_asked_for() {
    for name in scenario_names() {
        assert!(!default_sizes(name).is_empty(), "{name} has default sizes");
        for pods in [1, 7, 16, 64, 203, 1000] {
            let s = build(name, pods).unwrap();
            assert_eq!(s.name, *name);
            assert_eq!(s.snapshot.pending.len(), pods, "{name} at {pods} pods");
            assert!(!s.snapshot.node_pools.is_empty());
            assert!(
                admitted_instance_types(&s.snapshot, &s.catalog) > 0,
                "{name}: some pool admits some type"
            );
            let mut ids: Vec<_> = s.snapshot.pending.iter().map(|p| p.id.clone()).collect();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), pods, "{name}: pod names are unique");
            for p in &s.snapshot.pending {
                assert_eq!(p.requests.get(PODS), 1, "{}: one pod slot", p.id);
                assert!(
                    p.requests.get(CPU) > 0 && p.requests.get(MEMORY) > 0,
                    "{}",
                    p.id
                );
            }
        }
    }
}

#[test]
fn unknown_scenarios_and_zero_pods_are_errors_that_list_the_valid_names() {
    let err = build("karpenter", 10).unwrap_err();
    let msg = err.to_string();
    for name in scenario_names() {
        assert!(msg.contains(name), "{msg}");
    }
    assert!(msg.contains("`karpenter`"), "{msg}");
    assert_eq!(build("mixed", 0).unwrap_err(), BenchError::NoPods);
    assert_eq!(
        build("mixed", 2_000_000_000).unwrap_err(),
        BenchError::TooManyPods {
            pods: 2_000_000_000,
            max: MAX_PODS
        }
    );
    assert!(default_sizes("nope").is_empty());
    assert_eq!(default_sizes("karpenter-shape"), vec![1000, 5000, 20000]);
}

#[test]
fn generation_is_deterministic() {
    for name in scenario_names() {
        let a = build(name, 500).unwrap();
        let b = build(name, 500).unwrap();
        assert_eq!(a.snapshot.pending, b.snapshot.pending, "{name}");
        assert_eq!(a.snapshot.daemonsets, b.snapshot.daemonsets, "{name}");
        assert_eq!(a.catalog, b.catalog, "{name}");
        assert_eq!(
            format!("{:?}", a.snapshot.node_pools),
            format!("{:?}", b.snapshot.node_pools),
            "{name}"
        );
    }
}

#[test]
fn karpenter_shape_has_400_fake_types_priced_as_upstream() {
    let s = build("karpenter-shape", 1000).unwrap();
    assert_eq!(s.catalog.len(), 400);
    assert_eq!(admitted_instance_types(&s.snapshot, &s.catalog), 400);
    for (i, t) in s.catalog.instance_types().iter().enumerate() {
        let n = i as u64 + 1;
        assert_eq!(t.name, format!("fake-it-{i}"));
        assert_eq!(
            (u64::from(t.vcpu), t.memory_mib, u64::from(t.max_pods)),
            (n, 2048 * n, 10 * n)
        );
        let spot: Vec<_> = t
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Spot)
            .map(|o| o.zone.as_str())
            .collect();
        let od: Vec<_> = t
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::OnDemand)
            .map(|o| o.zone.as_str())
            .collect();
        assert_eq!(spot, ["test-zone-1", "test-zone-2"]);
        assert_eq!(od, ["test-zone-1", "test-zone-2", "test-zone-3"]);
        let price = 0.1 * n as f64 + 0.1 * (2 * n) as f64 * 1.073_741_824;
        assert!(
            t.offerings
                .iter()
                .all(|o| (o.price_per_hour - price).abs() < 1e-9)
        );
    }
    assert_eq!(s.snapshot.node_pools.len(), 1);
    assert!(s.snapshot.daemonsets.is_empty());
}

#[test]
fn karpenter_shape_has_five_equal_groups_with_upstream_constraints() {
    for pods in [1000, 1003] {
        let s = build("karpenter-shape", pods).unwrap();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &s.snapshot.pending {
            let g = group_of(&p.id.name);
            *counts.entry(g).or_default() += 1;
            assert!(
                [100, 250, 500, 1000, 1500].contains(&p.requests.get(CPU)),
                "{}",
                p.id
            );
            assert!(
                [100, 256, 512, 1024, 2048, 4096]
                    .map(|m| m << 20)
                    .contains(&p.requests.get(MEMORY))
            );
            match g {
                "generic" => assert!(
                    p.topology_spread.is_empty()
                        && p.affinity.is_empty()
                        && p.anti_affinity.is_empty()
                ),
                "zonal-spread" | "hostname-spread" => {
                    let [t] = p.topology_spread.as_slice() else {
                        panic!("{}: one spread", p.id)
                    };
                    assert_eq!(
                        t.topology_key,
                        if g == "zonal-spread" { ZONE } else { HOSTNAME }
                    );
                    assert_eq!(t.max_skew, 1);
                }
                "zonal-affinity" => {
                    let [a] = p.affinity.as_slice() else {
                        panic!("{}: one affinity term", p.id)
                    };
                    assert_eq!(a.topology_key, ZONE);
                    assert!(a.selector.matches(&p.labels), "{}: self-affinity", p.id);
                }
                _ => {
                    let [a] = p.anti_affinity.as_slice() else {
                        panic!("{}: one anti-affinity term", p.id)
                    };
                    assert_eq!(a.topology_key, HOSTNAME);
                    assert!(
                        a.selector.matches(&p.labels),
                        "{}: repels its own kind",
                        p.id
                    );
                }
            }
        }
        let each = pods / 5;
        assert_eq!(counts["generic"], each + pods % 5, "{counts:?}");
        for g in &karpenter::GROUPS[1..] {
            assert_eq!(counts[g], each, "{g}: {counts:?}");
        }
    }
}

#[test]
fn gpu_training_workers_take_whole_8_gpu_machines_and_stay_together() {
    let s = build("gpu-training", 64).unwrap();
    let clouds: Vec<_> = s.snapshot.node_pools.iter().map(|p| p.cloud).collect();
    assert_eq!(clouds.len(), 3, "a pool per cloud");
    assert!(s.snapshot.node_pools.iter().all(|p| !p.taints.is_empty()));
    let mut jobs: BTreeMap<&str, usize> = BTreeMap::new();
    let mut efa = 0;
    for p in &s.snapshot.pending {
        assert_eq!(p.requests.get(NVIDIA_GPU), 8);
        efa += usize::from(p.requests.get(EFA) > 0);
        assert_eq!(p.affinity.len(), 1);
        assert!(p.affinity[0].selector.matches(&p.labels));
        *jobs.entry(p.owner.as_deref().unwrap()).or_default() += 1;
    }
    assert!(
        efa > 0 && efa < 64,
        "some workers use EFA, some are portable ({efa})"
    );
    assert!(jobs.values().all(|w| (1..=16).contains(w)), "{jobs:?}");
    assert!(jobs.len() >= 4, "{jobs:?}");
    // The training pools admit the 8-GPU machines of all three clouds.
    assert!(admitted_instance_types(&s.snapshot, &s.catalog) >= 6);
}

#[test]
fn gpu_inference_uses_gpu_memory_selectors_and_small_gpu_counts() {
    let s = build("gpu-inference", 1000).unwrap();
    let mut gpu_counts = BTreeMap::new();
    for p in &s.snapshot.pending {
        *gpu_counts.entry(p.requests.get(NVIDIA_GPU)).or_insert(0) += 1;
        let [term] = p.node_terms.as_slice() else {
            panic!("{}: one node term", p.id)
        };
        assert!(
            term.has(quartermaster_pricing::labels::INSTANCE_GPU_MEMORY),
            "{}",
            p.id
        );
    }
    assert_eq!(
        gpu_counts.keys().copied().collect::<Vec<_>>(),
        [1, 2],
        "{gpu_counts:?}"
    );
    assert!(gpu_counts[&1] > gpu_counts[&2], "{gpu_counts:?}");
    assert_eq!(s.snapshot.daemonsets.len(), 3);
}

#[test]
fn mixed_has_cpu_and_gpu_pods_and_only_gpu_pods_tolerate_the_gpu_taint() {
    let s = build("mixed", 1000).unwrap();
    let (gpu, cpu): (Vec<_>, Vec<_>) = s
        .snapshot
        .pending
        .iter()
        .partition(|p| p.requests.get(NVIDIA_GPU) > 0);
    assert!(
        cpu.len() > gpu.len() && !gpu.is_empty(),
        "{} cpu, {} gpu",
        cpu.len(),
        gpu.len()
    );
    assert!(gpu.iter().all(|p| !p.tolerations.is_empty()));
    assert!(cpu.iter().all(|p| p.tolerations.is_empty()));
    assert!(cpu.iter().any(|p| !p.topology_spread.is_empty()));
    assert!(gpu.iter().any(|p| p.requests.get(NVIDIA_GPU) == 8));
    assert!(gpu.iter().any(|p| p.requests.get(NVIDIA_GPU) == 4));
}

#[test]
fn generation_is_fast_enough_for_20000_pods() {
    // Not a timing assertion: just make sure the biggest default size builds.
    let s = build("karpenter-shape", 20_000).unwrap();
    assert_eq!(s.snapshot.pending.len(), 20_000);
}

#[test]
fn peak_rss_is_read_from_proc() {
    if cfg!(target_os = "linux") {
        let peak = proc_status_mib("VmHWM:").expect("VmHWM on Linux");
        let now = proc_status_mib("VmRSS:").expect("VmRSS on Linux");
        assert!(now > 1.0 && peak >= now, "{peak} {now}");
    }
}

#[test]
fn the_packer_beats_the_greedy_baseline_on_karpenter_shape_and_stays_near_its_bound() {
    // Costs, not times: the improvement phase is bounded by a work budget, so the plan is the
    // same on every machine.
    let s = build("karpenter-shape", 1000).unwrap();
    let solve = |strategy| {
        quartermaster_solver::solve_with(
            &s.snapshot,
            &s.catalog,
            now(),
            &SolveOptions {
                strategy,
                ..SolveOptions::default()
            },
        )
    };
    let plan = solve(Strategy::CostOptimal);
    let greedy = solve(Strategy::KarpenterGreedy);
    assert!(plan.unschedulable.is_empty() && greedy.unschedulable.is_empty());
    // 200 pods repel each other by hostname: 200 nodes, each with room for other pods.
    assert_eq!(plan.new_nodes.len(), 200);
    assert!(
        plan.cost_per_hour <= 0.8 * greedy.cost_per_hour,
        "{} vs {}",
        plan.cost_per_hour,
        greedy.cost_per_hour
    );
    assert!(plan.gap() <= 0.15, "{}", plan.gap());
    assert_eq!(solve(Strategy::CostOptimal), plan, "deterministic");
}

#[test]
fn karpenter_shape_at_5000_pods_is_within_10_percent_of_its_bound() {
    // Issue 18's goal at this size (18.6% before the rebalance move): construction leaves a few
    // large nodes full in memory beside others full in CPU, and only trading pods between them
    // recovers what they waste.
    let s = build("karpenter-shape", 5000).unwrap();
    let plan = quartermaster_solver::solve(&s.snapshot, &s.catalog, now());
    assert!(plan.unschedulable.is_empty());
    assert!(plan.gap() <= 0.10, "gap {}", plan.gap());
}

#[test]
fn karpenter_shape_at_1000_pods_is_within_8_percent_of_its_bound() {
    // Issue 18's goal at this size (10.4% before): where growing any of several nodes costs the
    // same, growing the one with the most CPU free for a memory-heavy pod built one large node
    // full of memory with 50 vCPU idle; the least lopsided of them is grown now.
    let s = build("karpenter-shape", 1000).unwrap();
    let plan = quartermaster_solver::solve(&s.snapshot, &s.catalog, now());
    assert!(plan.unschedulable.is_empty());
    assert!(plan.gap() <= 0.08, "gap {}", plan.gap());
}

#[test]
fn karpenter_shape_at_20000_pods_is_within_1_10_of_its_bound() {
    // Issue 18's goal at this size (1.119x with the pairwise rebalance alone): a few large nodes
    // full of memory with CPU to spare, each of which needs several partners, and partners that
    // may grow, before it can drop a size.
    let s = build("karpenter-shape", 20_000).unwrap();
    let plan = quartermaster_solver::solve(&s.snapshot, &s.catalog, now());
    assert!(plan.unschedulable.is_empty());
    assert!(
        plan.cost_per_hour <= 1.10 * plan.lower_bound_per_hour,
        "{} against bound {}",
        plan.cost_per_hour,
        plan.lower_bound_per_hour
    );
}

#[test]
fn consolidation_converges_near_the_bound_in_a_few_passes() {
    // 2,000 pods on about 800 fragmented nodes; the budget allows every node, so only the
    // engine's own move size bounds a pass (at 100 nodes a move, this took 12 passes).
    let r = run(&build("consolidation", 2000).unwrap());
    let passes = r.passes.as_ref().expect("consolidation reports its passes");
    let last = passes.last().expect("at least one pass");
    assert_eq!(last.commands, 0, "converged: the last pass decides nothing");
    assert!(passes.len() <= 5, "{passes:?}");
    assert!(
        last.cost_per_hour <= 1.10 * r.lower_bound_per_hour,
        "{} against bound {}",
        last.cost_per_hour,
        r.lower_bound_per_hour
    );
    assert_eq!(r.unschedulable, 0);
}
