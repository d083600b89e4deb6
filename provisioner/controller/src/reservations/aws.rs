//! Which reservations an AWSNodeClass selects: `capacityReservationSelectorTerms`, as
//! Karpenter's EC2NodeClass (a term names an id, or all of its tags are the reservation's).

use quartermaster_policies::AWSNodeClass;
use quartermaster_policies::nodeclass::aws::CapacityReservationSelectorTerm;
use quartermaster_pricing::Reservation;

/// Whether `class` selects `r`.
pub(super) fn selects(class: &AWSNodeClass, r: &Reservation) -> bool {
    class
        .spec
        .capacity_reservation_selector_terms
        .iter()
        .any(|t| term_selects(t, r))
}

/// Whether one selector term selects `r`.
fn term_selects(t: &CapacityReservationSelectorTerm, r: &Reservation) -> bool {
    if let Some(id) = &t.id {
        return *id == r.id;
    }
    !t.tags.is_empty()
        && t.tags
            .iter()
            .all(|(k, v)| r.tags.get(k) == Some(v) || (v == "*" && r.tags.contains_key(k)))
}
