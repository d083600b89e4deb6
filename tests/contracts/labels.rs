//! The labels the catalog puts on nodes are the labels the API knows as well-known, so a pod or
//! NodePool requirement on any of them is accepted and matched.

#[test]
fn every_catalog_label_is_well_known_to_the_api() {
    for key in quartermaster_pricing::labels::ALL {
        assert!(
            quartermaster_policies::labels::is_well_known_label(key),
            "pricing labels nodes with {key}, which policies does not know"
        );
    }
}
