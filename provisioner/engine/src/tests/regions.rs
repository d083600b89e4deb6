//! The engine solves with the catalog restricted to the regions its pools may buy in.

use quartermaster_policies::labels::LABEL_REGION;
use quartermaster_policies::requirements::{Requirement, Requirements};
use quartermaster_pricing::Catalog;

use super::fixtures::*;
use crate::{Engine, EngineConfig, Event};

fn in_region(region: &str) -> Requirements {
    let mut only = Requirements::new();
    only.add(Requirement::in_values(LABEL_REGION, [region]));
    only
}

/// The AWS regions of the engine's catalog (clouds without pools keep theirs).
fn regions(engine: &Engine) -> std::collections::BTreeSet<String> {
    engine
        .setup
        .catalog
        .instance_types()
        .iter()
        .filter(|t| t.cloud == quartermaster_pricing::Cloud::Aws)
        .flat_map(|t| t.offerings.iter().map(|o| o.region.clone()))
        .collect()
}

#[test]
fn a_pool_in_one_region_solves_over_that_region_only_and_a_pool_change_brings_others_back() {
    let mut setup = setup("30s");
    setup.catalog = Catalog::embedded_all_regions();
    let all = regions(&Engine::new(setup.clone(), EngineConfig::default()));
    assert!(
        all.len() > 3,
        "the embedded catalog has many regions: {all:?}"
    );
    setup.pools[0].spec.requirements = setup.pools[0]
        .spec
        .requirements
        .intersect(&in_region("us-west-2"));
    let mut engine = Engine::new(setup.clone(), EngineConfig::default());
    assert_eq!(regions(&engine), ["us-west-2".to_owned()].into());
    let mut pools = setup.pools.clone();
    pools[0].spec.requirements = {
        let mut r = Requirements::new();
        for q in setup.pools[0]
            .spec
            .requirements
            .iter()
            .filter(|q| q.key() != LABEL_REGION)
        {
            r.add(q.clone());
        }
        r.intersect(&in_region("eu-west-1"))
    };
    engine.handle(t(0), Event::PoolsChanged(pools));
    assert_eq!(regions(&engine), ["eu-west-1".to_owned()].into());
}
