//! `Engine::explain`: the solver's reasons for a waiting pod, on the engine's own snapshot.

use quartermaster_solver::PodRef;

use super::fixtures::*;
use crate::{Engine, EngineConfig, Event};

#[test]
fn a_waiting_pod_is_explained_on_the_engines_own_snapshot() {
    let mut setup = setup("1m");
    setup.pools[0]
        .spec
        .taints
        .push(quartermaster_solver::pod::Taint {
            key: "nvidia.com/gpu".into(),
            value: String::new(),
            effect: quartermaster_solver::pod::TaintEffect::NoSchedule,
        });
    let mut e = Engine::new(setup, EngineConfig::default());
    e.handle(t(0), Event::PodPending(gpu_pod("a")));
    let explanation = e
        .explain(t(1), &PodRef::new("default", "a"))
        .expect("a waiting pod");
    let top = quartermaster_solver::explain::top_reasons(&explanation, 1);
    assert_eq!(top, "4 × taint nvidia.com/gpu:NoSchedule not tolerated");
    assert!(e.explain(t(1), &PodRef::new("default", "nope")).is_none());
}
