//! A pool's node shape (shared GPUs, overlays, root volume) sizes the engine's claims as it
//! sizes the solver's nodes.

use quartermaster_solver::PodRef;

use super::fixtures::*;
use crate::{Engine, EngineConfig, Event};

#[test]
fn a_time_sliced_pool_launches_one_node_for_four_gpu_pods() {
    // The engine counts a node's room as the solver does: four time-sliced GPUs on g5.xlarge.
    let mut setup = setup("1m");
    setup.pools[0].spec.node_shape.gpu_sharing =
        Some(quartermaster_pricing::sharing::GpuSharing::TimeSlicing {
            replicas: 4,
            rename_by_default: false,
        });
    let mut e = Engine::new(setup, EngineConfig::default());
    for name in ["a", "b", "c", "d"] {
        let mut pod = gpu_pod(name);
        pod.requests.set(quartermaster_solver::resources::CPU, 500);
        pod.requests
            .set(quartermaster_solver::resources::MEMORY, 1 << 30);
        e.handle(t(0), Event::PodPending(pod));
    }
    let deadline = e.next_deadline().expect("a batch deadline");
    let actions = e.poll(deadline);
    assert_eq!(launches(&actions).len(), 1, "{actions:?}");
    let claim = e.claims().next().expect("one claim");
    assert_eq!(claim.name, launches(&actions)[0].0);
    for p in ["a", "b", "c", "d"] {
        assert_eq!(
            e.placement(&PodRef::new("default", p)),
            Some(claim.name.as_str())
        );
    }
}
