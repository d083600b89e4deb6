//! Disruption: N→M consolidation, GPU first, spot-to-spot, do-not-disrupt, PDBs, budgets,
//! re-validation, price changes, drift and expiry.

use quartermaster_policies::{Operator, Requirement, Requirements};
use quartermaster_pricing::CapacityType;
use quartermaster_solver::{Pod, PodRef};
use serde_json::json;

use super::fixtures::t;
use super::fleet::*;
use crate::{
    Action, CommandKind, DeleteReason, Engine, EngineConfig, Event, PodDisruptionBudgetView,
};

fn all_nodes() -> serde_json::Value {
    json!({"budgets": [{"nodes": "100%"}]})
}

/// Four on-demand c.xlarge nodes (4 vCPU) with one 1000m pod each, created at t(0).
fn fragmented(e: &mut Engine, labelled: bool) -> Vec<Pod> {
    let mut pods = Vec::new();
    for i in 0..4 {
        let mut p = pod(&format!("p{i}"), 1000, 0);
        if labelled {
            p.labels.insert("app".into(), "web".into());
        }
        pods.push(p.clone());
        node_with(
            e,
            &format!("n{i}"),
            "c.xlarge",
            CapacityType::OnDemand,
            vec![p],
            t(0),
            None,
        );
    }
    pods
}

#[test]
fn several_nodes_are_deleted_in_one_move() {
    let mut e = engine_with(
        pool("on-demand", all_nodes(), json!({})),
        EngineConfig::default(),
    );
    fragmented(&mut e, false);
    let actions = run(&mut e, 0, 600);
    let cmds = commands(&actions);
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    let c = &cmds[0];
    assert_eq!(c.kind, CommandKind::MultiDelete, "{c:?}");
    assert_eq!(c.reason, DeleteReason::Underutilized);
    assert_eq!(c.claims.len(), 3);
    assert!((c.saving_per_hour - 0.60).abs() < 1e-9, "{c:?}");
    assert_eq!(c.pods, 3);
    assert!(
        launches_of(&actions).is_empty(),
        "nothing bought: {actions:?}"
    );
    let gone = deleted(&actions);
    assert_eq!(gone.len(), 3, "{actions:?}");
    assert!(gone.iter().all(|(_, r)| *r == DeleteReason::Underutilized));
    assert_eq!(e.stats().consolidation_deletes, 3);
    assert_eq!(e.disruption_stats().commands["multi_delete"], 1);
    assert_eq!(e.claims().filter(|c| !c.deleting).count(), 1);
}

#[test]
fn the_default_budget_allows_one_node_of_four_at_a_time() {
    // 10% of 4 nodes rounds up to 1: one node per move, never two at once.
    let mut e = engine_with(
        pool("on-demand", json!({}), json!({})),
        EngineConfig::default(),
    );
    fragmented(&mut e, false);
    let actions = e.poll(t(120));
    let cmds = commands(&actions);
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    assert_eq!(cmds[0].claims.len(), 1);
}

fn launches_of(actions: &[Action]) -> Vec<(String, String, CapacityType)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Launch { claim, request } => Some((
                claim.clone(),
                request.instance_type.clone(),
                request.capacity_type,
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn a_large_node_is_split_into_smaller_ones_that_cost_less_together() {
    // c.2xlarge made dear: two c.xlarge ($0.40) beat one c.4xlarge ($0.80) for two 3000m pods.
    let mut setup_pool = pool("on-demand", all_nodes(), json!({}));
    setup_pool.spec.name = "cpu".into();
    let mut e = Engine::new(
        crate::EngineSetup {
            resources: Default::default(),
            pools: vec![setup_pool],
            daemonsets: Vec::new(),
            catalog: catalog_priced(|n| if n == "c.2xlarge" { 1.6 } else { 1.0 }),
        },
        EngineConfig::default(),
    );
    node_with(
        &mut e,
        "big",
        "c.4xlarge",
        CapacityType::OnDemand,
        vec![pod("a", 3000, 0), pod("b", 3000, 0)],
        t(0),
        None,
    );
    let actions = run(&mut e, 0, 600);
    let cmds = commands(&actions);
    assert_eq!(cmds.len(), 1, "{actions:?}");
    assert_eq!(cmds[0].kind, CommandKind::Split);
    assert!((cmds[0].saving_per_hour - 0.40).abs() < 1e-9, "{cmds:?}");
    let launched = launches_of(&actions);
    assert_eq!(launched.len(), 2);
    assert!(launched.iter().all(|l| l.1 == "c.xlarge"), "{launched:?}");
    assert!(
        deleted(&actions).is_empty(),
        "the big node stays until its pods run on the new ones"
    );
    assert!(actions.contains(&Action::Cordon { node: "big".into() }));
    bring_up(&mut e, &actions, t(700));
    let actions = run(&mut e, 700, 800);
    assert_eq!(
        deleted(&actions),
        vec![("big".to_owned(), DeleteReason::Underutilized)]
    );
    assert_eq!(e.stats().consolidation_replacements, 1);
}

#[test]
fn a_gpu_node_is_not_kept_alive_by_cpu_pods() {
    let mut e = engine_with(
        pool("on-demand", json!({}), json!({})),
        EngineConfig::default(),
    );
    // The GPU node's GPU pods finished; a 500m CPU pod is left. A CPU node has room for it.
    node_with(
        &mut e,
        "gpu-node",
        "g.xlarge",
        CapacityType::OnDemand,
        vec![pod("cpu-left", 500, 0)],
        t(0),
        None,
    );
    node_with(
        &mut e,
        "cpu-node",
        "c.xlarge",
        CapacityType::OnDemand,
        vec![pod("web", 2000, 0)],
        t(0),
        None,
    );
    let actions = run(&mut e, 0, 600);
    let cmds = commands(&actions);
    assert_eq!(cmds.len(), 1, "{actions:?}");
    assert_eq!(cmds[0].claims, vec!["gpu-node".to_owned()]);
    assert!((cmds[0].saving_per_hour - 1.0).abs() < 1e-9);
    assert_eq!(
        e.placement(&PodRef::new("default", "cpu-left")),
        Some("cpu-node")
    );
}

fn spot_engine(annotations: serde_json::Value) -> (Engine, Vec<Action>) {
    let mut e = engine_with(
        pool_annotated("spot", json!({}), json!({}), annotations),
        EngineConfig::default(),
    );
    node_with(
        &mut e,
        "n0",
        "c.4xlarge",
        CapacityType::Spot,
        vec![pod("a", 500, 0)],
        t(0),
        None,
    );
    let actions = run(&mut e, 0, 600);
    (e, actions)
}

#[test]
fn spot_is_replaced_by_spot_only_when_enough_cheaper_types_exist() {
    // Three instance types have a cheaper spot offering that fits: fewer than the default 15.
    let (_, actions) = spot_engine(json!({}));
    assert!(commands(&actions).is_empty(), "{actions:?}");
    // The NodePool lowers the bar to 3: replaced by the cheapest.
    let (_, actions) = spot_engine(json!({"quartermaster.dev/spot-to-spot-min-types": "3"}));
    let cmds = commands(&actions);
    assert_eq!(cmds.len(), 1, "{actions:?}");
    assert_eq!(cmds[0].kind, CommandKind::Replace);
    assert_eq!(
        launches_of(&actions)[0].1,
        "c.large",
        "the cheapest spot type"
    );
    // 4 would be more than exist.
    let (_, actions) = spot_engine(json!({"quartermaster.dev/spot-to-spot-min-types": "4"}));
    assert!(commands(&actions).is_empty(), "{actions:?}");
}

#[test]
fn do_not_disrupt_pods_and_nodes_are_never_moved() {
    // Every pod do-not-disrupt: nothing moves.
    let mut e = engine_with(
        pool("on-demand", all_nodes(), json!({})),
        EngineConfig::default(),
    );
    for p in fragmented(&mut e, false) {
        e.handle(
            t(0),
            Event::PodDoNotDisrupt {
                pod: p.id,
                on: true,
            },
        );
    }
    let actions = run(&mut e, 0, 3600);
    assert!(commands(&actions).is_empty(), "{actions:?}");
    assert!(deleted(&actions).is_empty());

    // Nodes n0..n2 do-not-disrupt: only n3 may go (its pod onto another node).
    let mut e = engine_with(
        pool("on-demand", all_nodes(), json!({})),
        EngineConfig::default(),
    );
    fragmented(&mut e, false);
    for n in ["n0", "n1", "n2"] {
        e.handle(
            t(0),
            Event::NodeDoNotDisrupt {
                node: n.into(),
                on: true,
            },
        );
    }
    let actions = run(&mut e, 0, 3600);
    let gone = deleted(&actions);
    assert_eq!(gone, vec![("n3".to_owned(), DeleteReason::Underutilized)]);

    // An empty node annotated do-not-disrupt stays.
    let mut e = engine_with(
        pool("on-demand", all_nodes(), json!({})),
        EngineConfig::default(),
    );
    node_with(
        &mut e,
        "idle",
        "c.xlarge",
        CapacityType::OnDemand,
        vec![],
        t(0),
        None,
    );
    e.handle(
        t(0),
        Event::NodeDoNotDisrupt {
            node: "idle".into(),
            on: true,
        },
    );
    let actions = run(&mut e, 0, 3600);
    assert!(deleted(&actions).is_empty(), "{actions:?}");
    e.handle(
        t(3600),
        Event::NodeDoNotDisrupt {
            node: "idle".into(),
            on: false,
        },
    );
    let actions = run(&mut e, 3600, 7200);
    assert_eq!(
        deleted(&actions),
        vec![("idle".to_owned(), DeleteReason::Empty)]
    );
    assert_eq!(commands(&actions)[0].kind, CommandKind::Empty);
}

fn web_pdb(allowed: u32) -> PodDisruptionBudgetView {
    let mut selector = Requirements::default();
    selector.add(Requirement::new("app", Operator::In, ["web"]).expect("valid"));
    PodDisruptionBudgetView {
        namespace: "default".into(),
        name: "web".into(),
        selector,
        disruptions_allowed: allowed,
    }
}

#[test]
fn a_pdb_that_allows_no_disruption_stops_every_move_of_its_pods() {
    // No disruption allowed: nothing moves.
    let mut e = engine_with(
        pool("on-demand", all_nodes(), json!({})),
        EngineConfig::default(),
    );
    fragmented(&mut e, true);
    e.handle(t(0), Event::DisruptionBudgets(vec![web_pdb(0)]));
    let actions = run(&mut e, 0, 3600);
    assert!(commands(&actions).is_empty(), "{actions:?}");
    // Once it allows one (a pod came back healthy), the spare nodes go.
    e.handle(t(3600), Event::DisruptionBudgets(vec![web_pdb(1)]));
    let actions = run(&mut e, 3600, 7200);
    assert_eq!(deleted(&actions).len(), 3, "{actions:?}");
    // Another namespace's PDB does not apply.
    let mut e = engine_with(
        pool("on-demand", all_nodes(), json!({})),
        EngineConfig::default(),
    );
    fragmented(&mut e, true);
    let mut other = web_pdb(0);
    other.namespace = "other".into();
    e.handle(t(0), Event::DisruptionBudgets(vec![other]));
    assert_eq!(commands(&run(&mut e, 0, 3600)).len(), 1);
}

#[test]
fn a_cron_budget_of_zero_stops_all_voluntary_disruption_in_its_window() {
    // t(0) is Friday 2027-01-15 08:00 UTC; the window is 09:00-17:00 on weekdays.
    let budgets = json!({"budgets": [
        {"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"},
        {"nodes": "100%"}
    ]});
    let mut e = engine_with(
        pool("on-demand", budgets, json!({})),
        EngineConfig::default(),
    );
    fragmented(&mut e, false);
    node_with(
        &mut e,
        "idle",
        "c.xlarge",
        CapacityType::OnDemand,
        vec![],
        t(3600),
        None,
    );
    let mut all = Vec::new();
    for s in (3600..9 * 3600).step_by(600) {
        let a = e.poll(t(s));
        assert!(a.is_empty(), "at {s}: {a:?}");
        all.extend(a);
    }
    assert!(commands(&all).is_empty(), "{all:?}");
    assert!(deleted(&all).is_empty(), "{all:?}");
    // The window closes at 17:00 (t = 9h): the empty node and the spare nodes go.
    let after = run(&mut e, 9 * 3600 + 1, 10 * 3600);
    assert!(deleted(&after).len() >= 4, "{after:?}");
    // A Drifted-only budget of 0 does not stop consolidation.
    let budgets = json!({"budgets": [{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "100%"}]});
    let mut e = engine_with(
        pool("on-demand", budgets, json!({})),
        EngineConfig::default(),
    );
    fragmented(&mut e, false);
    assert_eq!(commands(&run(&mut e, 0, 600)).len(), 1);
}

#[test]
fn a_move_is_checked_again_before_its_pods_move() {
    let mut e = engine_with(
        pool("on-demand", json!({}), json!({})),
        EngineConfig::default(),
    );
    node_with(
        &mut e,
        "big",
        "c.4xlarge",
        CapacityType::OnDemand,
        vec![pod("a", 500, 0)],
        t(0),
        None,
    );
    let actions = run(&mut e, 0, 600);
    assert_eq!(commands(&actions)[0].kind, CommandKind::Replace);
    // The pod became do-not-disrupt while the replacement launched: the move is called off.
    e.handle(
        t(650),
        Event::PodDoNotDisrupt {
            pod: PodRef::new("default", "a"),
            on: true,
        },
    );
    bring_up(&mut e, &actions, t(700));
    let later = run(&mut e, 700, 5000);
    assert!(
        later.contains(&Action::Uncordon { node: "big".into() }),
        "{later:?}"
    );
    assert!(
        !later.iter().any(|a| matches!(a, Action::Bind { .. })),
        "{later:?}"
    );
    assert!(
        !deleted(&later).iter().any(|(c, _)| c == "big"),
        "{later:?}"
    );
    assert_eq!(e.placement(&PodRef::new("default", "a")), Some("big"));
    assert_eq!(e.disruption_stats().called_off, 1);
}

#[test]
fn a_price_change_triggers_a_look_and_prices_running_nodes_again() {
    let mut e = engine_with(
        pool("on-demand", json!({}), json!({})),
        EngineConfig::default(),
    );
    node_with(
        &mut e,
        "n0",
        "c.xlarge",
        CapacityType::OnDemand,
        vec![pod("a", 3000, 0)],
        t(0),
        None,
    );
    assert!(commands(&run(&mut e, 0, 3600)).is_empty());
    // c.xlarge doubles; c.2xlarge drops to $0.15.
    let catalog = catalog_priced(|n| match n {
        "c.xlarge" => 2.0,
        "c.2xlarge" => 0.375,
        _ => 1.0,
    });
    e.handle(t(3600), Event::CatalogChanged(catalog));
    let actions = run(&mut e, 3600, 7200);
    let cmds = commands(&actions);
    assert_eq!(cmds.len(), 1, "{actions:?}");
    assert!((cmds[0].saving_per_hour - 0.25).abs() < 1e-9, "{cmds:?}");
    assert_eq!(launches_of(&actions)[0].1, "c.2xlarge");
}

#[test]
fn drifted_nodes_are_replaced_and_their_pods_moved_first() {
    let mut e = engine_with(
        pool("on-demand", json!({}), json!({})),
        EngineConfig::default(),
    );
    // n0 was made from an older template; n1 records none (taken as current).
    node_with(
        &mut e,
        "n0",
        "c.xlarge",
        CapacityType::OnDemand,
        vec![pod("a", 3000, 0)],
        t(0),
        Some("0000000000000000"),
    );
    node_with(
        &mut e,
        "n1",
        "c.xlarge",
        CapacityType::OnDemand,
        vec![pod("b", 3000, 0)],
        t(0),
        None,
    );
    let actions = run(&mut e, 0, 600);
    let cmds = commands(&actions);
    assert_eq!(cmds.len(), 1, "{actions:?}");
    assert_eq!(cmds[0].kind, CommandKind::Drift);
    assert_eq!(cmds[0].claims, vec!["n0".to_owned()]);
    assert!(deleted(&actions).is_empty());
    let new = bring_up(&mut e, &actions, t(700));
    let actions = run(&mut e, 700, 800);
    assert_eq!(
        deleted(&actions),
        vec![("n0".to_owned(), DeleteReason::Drifted)]
    );
    let hash = e
        .claims()
        .find(|c| c.name == new[0])
        .map(|c| c.template_hash)
        .expect("the replacement");
    assert_eq!(
        e.claims().find(|c| c.name == "n1").map(|c| c.template_hash),
        Some(hash.clone()),
        "the replacement records the pool's current hash"
    );
    assert_eq!(
        e.claims().find(|c| c.name == new[0]).unwrap().labels[crate::TEMPLATE_HASH_LABEL],
        hash
    );

    // A template change (new labels) drifts every node of the pool.
    let changed = pool("on-demand", json!({}), json!({"expireAfter": "Never"}));
    assert_ne!(changed.template_hash, hash);
    e.handle(t(900), Event::PoolsChanged(vec![changed]));
    let actions = run(&mut e, 900, 1000);
    assert_eq!(
        commands(&actions)[0].kind,
        CommandKind::Drift,
        "{actions:?}"
    );
}

#[test]
fn expired_nodes_are_replaced_and_forced_out_after_the_grace_period() {
    let template = json!({"expireAfter": "1h", "terminationGracePeriod": "10m"});
    let mut e = engine_with(
        pool("on-demand", json!({}), template),
        EngineConfig::default(),
    );
    node_with(
        &mut e,
        "old",
        "c.xlarge",
        CapacityType::OnDemand,
        vec![pod("a", 3000, 0)],
        t(0),
        None,
    );
    // Expiry is forceful: a do-not-disrupt pod does not hold it.
    e.handle(
        t(0),
        Event::PodDoNotDisrupt {
            pod: PodRef::new("default", "a"),
            on: true,
        },
    );
    let actions = run(&mut e, 0, 3600 + 5);
    let cmds = commands(&actions);
    assert_eq!(cmds.len(), 1, "{actions:?}");
    assert_eq!(cmds[0].kind, CommandKind::Expire);
    assert!(actions.contains(&Action::Cordon { node: "old".into() }));
    assert_eq!(
        launches_of(&actions).len(),
        1,
        "the replacement is launched at once"
    );
    assert!(deleted(&actions).is_empty());
    // The replacement never comes up: after the grace period the node goes anyway.
    let actions = run(&mut e, 3600 + 5, 3600 + 700);
    assert_eq!(
        deleted(&actions),
        vec![("old".to_owned(), DeleteReason::Expired)]
    );
}

#[test]
fn one_pass_asks_the_solver_a_bounded_number_of_questions() {
    let config = EngineConfig {
        max_move_nodes: 64,
        max_single_candidates: 5,
        // Fewer places offered than nodes: the roomiest are kept.
        max_target_nodes: 16,
        ..EngineConfig::default()
    };
    let mut e = engine_with(pool("on-demand", all_nodes(), json!({})), config);
    for i in 0..120 {
        node_with(
            &mut e,
            &format!("n{i:03}"),
            "c.xlarge",
            CapacityType::OnDemand,
            vec![pod(&format!("p{i}"), 700 + (i % 5) * 100, 0)],
            t(0),
            None,
        );
    }
    let before = e.stats().solves;
    let actions = e.poll(t(120));
    let asked = e.stats().solves - before;
    // Prefixes 64, 63, 32, 16, 8, 4, 2 and five single nodes; and for each move the
    // kube-scheduler's replay leaves pods over from, one solve for those pods.
    assert!(asked <= 24, "{asked} solves");
    let cmds = commands(&actions);
    assert_eq!(cmds.len(), 1);
    assert!(cmds[0].claims.len() >= 32, "{:?}", cmds[0]);
}

#[test]
fn a_node_the_cloud_says_drifted_is_replaced_like_a_template_change() {
    let mut e = engine_with(
        pool("on-demand", json!({}), json!({})),
        EngineConfig::default(),
    );
    for (name, p) in [("n0", "a"), ("n1", "b")] {
        node_with(
            &mut e,
            name,
            "c.xlarge",
            CapacityType::OnDemand,
            vec![pod(p, 3000, 0)],
            t(0),
            None,
        );
    }
    assert!(commands(&run(&mut e, 0, 600)).is_empty(), "nothing drifted");
    // The AMI alias of n1's NodeClass moved to a newer image.
    e.handle(
        t(650),
        Event::CloudDrifted {
            provider_id: "sim:///us-east-1a/n1".into(),
            reason: "AMIDrift: the instance runs ami-1; amiSelectorTerms now select ami-2".into(),
        },
    );
    // An instance no claim owns is ignored.
    e.handle(
        t(650),
        Event::CloudDrifted {
            provider_id: "sim:///us-east-1a/gone".into(),
            reason: "SubnetDrift".into(),
        },
    );
    let actions = run(&mut e, 650, 900);
    let cmds = commands(&actions);
    assert_eq!(cmds.len(), 1, "{actions:?}");
    assert_eq!(cmds[0].kind, CommandKind::Drift);
    assert_eq!(cmds[0].claims, vec!["n1".to_owned()]);
    bring_up(&mut e, &actions, t(950));
    let actions = run(&mut e, 950, 1100);
    assert_eq!(
        deleted(&actions),
        vec![("n1".to_owned(), DeleteReason::Drifted)]
    );
    // Once it is gone nothing else drifts.
    assert!(commands(&run(&mut e, 1100, 2000)).is_empty());
}
