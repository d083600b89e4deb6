//! Deterministic VM names from NodeClaim names, AKS zone names (`eastus-1`) as ARM's location
//! and zone number, and capacity reservation groups from their reservations' ARM ids.

/// Longest VM name (Linux VMs and their computer names allow 64 characters).
const MAX_NAME: usize = 64;

/// The VM name of a NodeClaim's `attempt`-th offering: `qm-CLAIM-N`, only letters, digits and
/// hyphens; a claim too long for that keeps a prefix and a hash of the whole name. The same
/// claim and offering always give the same name, so a retried PUT finds its own VM.
pub fn vm_name(claim: &str, attempt: usize) -> String {
    let clean: String = claim
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let clean = clean.trim_matches('-');
    let suffix = format!("-{attempt}");
    let full = format!("qm-{clean}{suffix}");
    if full.len() <= MAX_NAME {
        return full;
    }
    let hash = format!("{:016x}", fnv1a(claim.as_bytes()));
    let room = MAX_NAME - "qm-".len() - 1 - 8 - suffix.len();
    let prefix = clean[..room].trim_end_matches('-');
    format!("qm-{prefix}-{}{suffix}", &hash[..8])
}

/// The `quartermaster.dev_image` tag value of an image reference: a short stable hash (ARM ids
/// of gallery image versions can outgrow a tag value).
pub fn image_tag(image: &crate::port::ImageRef) -> String {
    let key = match image {
        crate::port::ImageRef::Id(id) => id.to_ascii_lowercase(),
        crate::port::ImageRef::Marketplace {
            publisher,
            offer,
            sku,
            version,
        } => format!("{publisher}:{offer}:{sku}:{version}").to_ascii_lowercase(),
    };
    format!("{:016x}", fnv1a(key.as_bytes()))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `eastus-1` as (`eastus`, zone `1`); a name without a zone number (`eastus`, `eastus-0`, the
/// zone AKS gives non-zonal nodes) as (`eastus`, none); a bare zone number (`2`) in
/// `default_location`.
pub fn split_zone(zone: &str, default_location: &str) -> (String, Option<String>) {
    let zonal = |n: &str| !n.is_empty() && n != "0" && n.chars().all(|c| c.is_ascii_digit());
    if zonal(zone) {
        return (default_location.to_owned(), Some(zone.to_owned()));
    }
    match zone.rsplit_once('-') {
        Some((location, n)) if zonal(n) => (location.to_owned(), Some(n.to_owned())),
        Some((location, "0")) => (location.to_owned(), None),
        _ if zone.is_empty() || zone == "0" => (default_location.to_owned(), None),
        _ => (zone.to_owned(), None),
    }
}

/// The capacity reservation group of a capacity reservation's ARM id
/// (`…/capacityReservationGroups/G/capacityReservations/R` → `…/capacityReservationGroups/G`),
/// read case-insensitively as ARM ids are; `None` when `id` is not a capacity reservation's id.
pub fn reservation_group(id: &str) -> Option<&str> {
    const CHILD: &str = "/capacityreservations/";
    let lower = id.to_ascii_lowercase();
    let at = lower.rfind(CHILD)?;
    let name = &lower[at + CHILD.len()..];
    let group = &id[..at];
    (!name.is_empty() && !name.contains('/') && group_parts(group).is_some()).then_some(group)
}

/// A capacity reservation group's ARM id as (subscription, resource group, name); `None` for
/// anything else.
pub fn group_parts(group_id: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = group_id.split('/').collect();
    let eq = |i: usize, want: &str| parts[i].eq_ignore_ascii_case(want);
    let named = |i: usize| !parts[i].is_empty();
    (parts.len() == 9
        && parts[0].is_empty()
        && eq(1, "subscriptions")
        && named(2)
        && eq(3, "resourceGroups")
        && named(4)
        && eq(5, "providers")
        && eq(6, "Microsoft.Compute")
        && eq(7, "capacityReservationGroups")
        && named(8))
    .then(|| (parts[2], parts[4], parts[8]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_deterministic_and_valid() {
        assert_eq!(vm_name("default-abc12", 0), "qm-default-abc12-0");
        assert_eq!(vm_name("gpu.pool-x", 2), "qm-gpu-pool-x-2");
        let long = "a".repeat(100);
        let n = vm_name(&long, 1);
        assert!(n.len() <= 64, "{n}");
        assert_eq!(n, vm_name(&long, 1));
        assert_ne!(
            vm_name(&format!("{long}b"), 1),
            vm_name(&format!("{long}c"), 1)
        );
        assert!(n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }

    #[test]
    fn zones_split_into_location_and_number() {
        assert_eq!(
            split_zone("eastus-1", "x"),
            ("eastus".into(), Some("1".into()))
        );
        assert_eq!(split_zone("eastus", "x"), ("eastus".into(), None));
        assert_eq!(split_zone("eastus-0", "x"), ("eastus".into(), None));
        assert_eq!(
            split_zone("2", "westus3"),
            ("westus3".into(), Some("2".into()))
        );
        assert_eq!(split_zone("", "westus3"), ("westus3".into(), None));
    }

    #[test]
    fn a_capacity_reservation_id_names_its_group() {
        let group = "/subscriptions/s/resourceGroups/capacity/providers/Microsoft.Compute/capacityReservationGroups/h100";
        let id = format!("{group}/capacityReservations/eastus-1");
        assert_eq!(reservation_group(&id), Some(group));
        // ARM ids are case-insensitive: the group keeps the id's own spelling.
        let upper = id.replace("capacityReservations", "CAPACITYRESERVATIONS");
        assert_eq!(reservation_group(&upper), Some(group));
        assert_eq!(group_parts(group), Some(("s", "capacity", "h100")));
        assert_eq!(reservation_group(group), None);
        assert_eq!(
            reservation_group(&format!("{group}/capacityReservations/")),
            None
        );
        assert_eq!(
            reservation_group(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm/capacityReservations/x"
            ),
            None
        );
        assert_eq!(reservation_group("cr-0123"), None);
    }
}
