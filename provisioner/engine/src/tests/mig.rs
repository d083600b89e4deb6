//! A MIG pool without `migConfig`: the engine launches the node the solver planned, in the
//! layout it chose, and labels it with that layout.

use quartermaster_policies::{Operator, Requirement};
use quartermaster_pricing::Catalog;
use quartermaster_pricing::sharing::GpuSharing;
use quartermaster_solver::resources::{CPU, MEMORY, PODS};
use quartermaster_solver::{MIG_CONFIG_LABEL, Pod, PodRef, Resources};

use super::fixtures::*;
use crate::{Action, Engine, EngineConfig, Event};

#[test]
fn a_mig_pool_without_a_layout_launches_one_balanced_p4d_for_a_mix_of_slices() {
    let mut setup = setup("5m");
    setup.catalog = Catalog::embedded();
    let spec = &mut setup.pools[0].spec;
    spec.node_shape.gpu_sharing = Some(GpuSharing::MigAuto);
    spec.requirements.add(
        Requirement::new(
            quartermaster_solver::INSTANCE_TYPE_LABEL,
            Operator::In,
            ["p4d.24xlarge"],
        )
        .expect("valid"),
    );
    spec.requirements.add(
        Requirement::new(
            "quartermaster.dev/capacity-type",
            Operator::In,
            ["on-demand"],
        )
        .expect("valid"),
    );
    let mut pods = Vec::new();
    for (n, profile) in [(16, "1g.5gb"), (8, "3g.20gb")] {
        let slot = setup
            .resources
            .slot_or_insert(&format!("nvidia.com/mig-{profile}"))
            .expect("a spare slot");
        for i in 0..n {
            let mut r = Resources::ZERO;
            r.set(CPU, 500);
            r.set(MEMORY, 2 << 30);
            r.set(PODS, 1);
            r.set(slot, 1);
            pods.push(Pod::new(
                PodRef::new("default", format!("{profile}-{i}")),
                r,
            ));
        }
    }
    let mut e = Engine::new(setup, EngineConfig::default());
    for pod in pods {
        e.handle(t(0), Event::PodPending(pod));
    }
    let deadline = e.next_deadline().expect("a batch deadline");
    let actions = e.poll(deadline);
    let launched = launches(&actions);
    assert_eq!(launched.len(), 1, "{actions:?}");
    assert_eq!(launched[0].1, "p4d.24xlarge");
    let labels = actions
        .iter()
        .find_map(|a| match a {
            Action::Launch { request, .. } => Some(request.labels.clone()),
            _ => None,
        })
        .expect("a launch");
    assert_eq!(
        labels.get(MIG_CONFIG_LABEL).map(String::as_str),
        Some("all-balanced")
    );
    let claim = e.claims().next().expect("one claim");
    assert_eq!(
        claim.labels.get(MIG_CONFIG_LABEL).map(String::as_str),
        Some("all-balanced")
    );
}
