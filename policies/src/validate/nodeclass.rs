//! Semantic checks of the cloud NodeClasses.

use std::collections::BTreeMap;

use super::FieldError;
use super::fields::{self, field, index, key, push};
use crate::nodeclass::aws::{AMI_ALIAS_FAMILIES, AmiFamily};
use crate::nodeclass::gcp::{
    ConsumeReservationType, GcpReservationAffinity, RESERVATION_NAME_KEY,
    RESERVATION_NAME_KEY_SHORT,
};
use crate::nodeclass::{AWSNodeClass, AzureNodeClass, GCPNodeClass};
use crate::quantity::parse_quantity;

fn required(value: &str, path: &str, errs: &mut Vec<FieldError>) -> bool {
    if value.trim().is_empty() {
        push(errs, path, "must not be empty");
        false
    } else {
        true
    }
}

fn non_empty_opt(value: &Option<String>, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(v) = value
        && v.trim().is_empty()
    {
        push(errs, path, "must not be empty when set");
    }
}

fn selector_tags(tags: &BTreeMap<String, String>, path: &str, errs: &mut Vec<FieldError>) {
    for (k, v) in tags {
        if k.is_empty() || v.is_empty() {
            push(errs, key(path, k), "tag keys and values must not be empty");
        }
    }
}

/// Lowercase letters, digits and hyphens, starting with a letter and ending
/// with a letter or digit.
fn is_lower_dashed(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Whether `s` looks like an AWS region: a two-letter area, an optional partition
/// (`-gov`, `-iso`, `-isob`), a compass direction and a number (`us-east-1`, `ap-southeast-4`,
/// `us-gov-west-1`).
fn is_aws_region(s: &str) -> bool {
    const DIRECTIONS: [&str; 9] = [
        "north",
        "south",
        "east",
        "west",
        "central",
        "northeast",
        "northwest",
        "southeast",
        "southwest",
    ];
    let mut parts: Vec<&str> = s.split('-').collect();
    if parts.len() == 4 && ["gov", "iso", "isob", "isoe", "isof"].contains(&parts[1]) {
        parts.remove(1);
    }
    parts.len() == 3
        && parts[0].len() == 2
        && parts[0].bytes().all(|c| c.is_ascii_lowercase())
        && DIRECTIONS.contains(&parts[1])
        && !parts[2].is_empty()
        && parts[2].bytes().all(|c| c.is_ascii_digit())
}

/// Checks an AMI alias: `family@version` with a known family and a version of `latest` or a
/// pinned release (Windows aliases only take `latest`).
fn ami_alias(alias: &str, path: &str, errs: &mut Vec<FieldError>) {
    let Some((family, version)) = alias.split_once('@') else {
        push(
            errs,
            path,
            format!(
                "{alias:?} is not an alias of the form family@version (e.g. \"al2023@latest\"); families: {}",
                AMI_ALIAS_FAMILIES.join(", ")
            ),
        );
        return;
    };
    if !AMI_ALIAS_FAMILIES.contains(&family) {
        push(
            errs,
            path,
            format!(
                "unknown AMI family {family:?} in alias {alias:?}: expected one of {}{}",
                AMI_ALIAS_FAMILIES.join(", "),
                super::suggest::did_you_mean(family, AMI_ALIAS_FAMILIES.iter().copied())
            ),
        );
    } else if version.is_empty() {
        push(
            errs,
            path,
            format!("alias {alias:?} has no version: use \"{family}@latest\" or a pinned version"),
        );
    } else if family.starts_with("windows") && version != "latest" {
        push(
            errs,
            path,
            format!("Windows aliases do not support pinning: use \"{family}@latest\""),
        );
    }
}

/// Every semantic problem of an AWSNodeClass (empty when valid).
pub fn validate_aws_node_class(nc: &AWSNodeClass) -> Vec<FieldError> {
    let mut errs = Vec::new();
    fields::metadata_name(&nc.metadata, false, &mut errs);
    let s = &nc.spec;
    if let Some(region) = &s.region
        && required(region, "spec.region", &mut errs)
        && !is_aws_region(region)
    {
        push(
            &mut errs,
            "spec.region",
            format!(
                "{region:?} is not an AWS region name such as \"us-east-1\" (omit it to use the cluster's region)"
            ),
        );
    }

    if s.subnet_selector_terms.is_empty() {
        push(
            &mut errs,
            "spec.subnetSelectorTerms",
            "at least one subnet selector term is required",
        );
    }
    for (i, t) in s.subnet_selector_terms.iter().enumerate() {
        let p = index("spec.subnetSelectorTerms", i);
        match (&t.id, t.tags.is_empty()) {
            (None, true) => push(&mut errs, &p, "must specify id or tags"),
            (Some(_), false) => push(&mut errs, &p, "id is mutually exclusive with tags"),
            _ => {}
        }
        non_empty_opt(&t.id, &field(&p, "id"), &mut errs);
        selector_tags(&t.tags, &field(&p, "tags"), &mut errs);
    }

    if s.security_group_selector_terms.is_empty() {
        push(
            &mut errs,
            "spec.securityGroupSelectorTerms",
            "at least one security group selector term is required",
        );
    }
    for (i, t) in s.security_group_selector_terms.iter().enumerate() {
        let p = index("spec.securityGroupSelectorTerms", i);
        let others = !t.tags.is_empty() || t.name.is_some();
        if t.id.is_none() && !others {
            push(&mut errs, &p, "must specify id, name or tags");
        } else if t.id.is_some() && others {
            push(&mut errs, &p, "id is mutually exclusive with name and tags");
        }
        non_empty_opt(&t.id, &field(&p, "id"), &mut errs);
        non_empty_opt(&t.name, &field(&p, "name"), &mut errs);
        selector_tags(&t.tags, &field(&p, "tags"), &mut errs);
    }

    match (s.ami_family, s.ami_selector_terms.is_empty()) {
        (None, true) => push(
            &mut errs,
            "spec.amiFamily",
            "amiFamily or amiSelectorTerms is required",
        ),
        (Some(AmiFamily::Custom), true) => push(
            &mut errs,
            "spec.amiSelectorTerms",
            "required when amiFamily is Custom",
        ),
        _ => {}
    }
    for (i, t) in s.ami_selector_terms.iter().enumerate() {
        let p = index("spec.amiSelectorTerms", i);
        let others = !t.tags.is_empty()
            || t.id.is_some()
            || t.name.is_some()
            || t.owner.is_some()
            || t.ssm_parameter.is_some();
        if t.alias.is_none() && !others {
            push(
                &mut errs,
                &p,
                "must specify alias, id, name, ssmParameter or tags",
            );
        } else if t.alias.is_some() && others {
            push(
                &mut errs,
                &p,
                "alias is mutually exclusive with id, name, owner and tags",
            );
        } else if t.id.is_some() && (!t.tags.is_empty() || t.name.is_some() || t.owner.is_some()) {
            push(
                &mut errs,
                &p,
                "id is mutually exclusive with name, owner and tags",
            );
        }
        non_empty_opt(&t.alias, &field(&p, "alias"), &mut errs);
        if let Some(alias) = &t.alias
            && !alias.trim().is_empty()
        {
            ami_alias(alias, &field(&p, "alias"), &mut errs);
        }
        non_empty_opt(&t.id, &field(&p, "id"), &mut errs);
        selector_tags(&t.tags, &field(&p, "tags"), &mut errs);
    }

    match (&s.role, &s.instance_profile) {
        (None, None) => push(
            &mut errs,
            "spec.role",
            "role or instanceProfile is required",
        ),
        (Some(_), Some(_)) => push(
            &mut errs,
            "spec.instanceProfile",
            "mutually exclusive with role",
        ),
        _ => {}
    }
    non_empty_opt(&s.role, "spec.role", &mut errs);
    non_empty_opt(&s.instance_profile, "spec.instanceProfile", &mut errs);
    fields::cloud_tags(&s.tags, "spec.tags", &mut errs);

    let mut roots = 0;
    for (i, m) in s.block_device_mappings.iter().enumerate() {
        let p = index("spec.blockDeviceMappings", i);
        required(&m.device_name, &field(&p, "deviceName"), &mut errs);
        if m.root_volume == Some(true) {
            roots += 1;
            if roots > 1 {
                push(
                    &mut errs,
                    field(&p, "rootVolume"),
                    "only one block device mapping may be the root volume",
                );
            }
        }
        if let Some(size) = m.ebs.as_ref().and_then(|e| e.volume_size.as_ref()) {
            let vp = field(&p, "ebs.volumeSize");
            match parse_quantity(&size.0) {
                Err(e) => push(&mut errs, vp, e.to_string()),
                Ok(v) if v.millis() <= 0 => push(&mut errs, vp, "must be positive"),
                Ok(_) => {}
            }
        }
    }

    if s.ami_selector_terms.iter().any(|t| t.alias.is_some()) && s.ami_selector_terms.len() > 1 {
        push(
            &mut errs,
            "spec.amiSelectorTerms",
            "a term with an alias must be the only term",
        );
    }
    for (i, t) in s.capacity_reservation_selector_terms.iter().enumerate() {
        let p = index("spec.capacityReservationSelectorTerms", i);
        if t.id.is_none() && t.tags.is_empty() && t.instance_match_criteria.is_none() {
            push(
                &mut errs,
                &p,
                "must specify id, tags or instanceMatchCriteria",
            );
        } else if t.id.is_some() && (!t.tags.is_empty() || t.owner_id.is_some()) {
            push(
                &mut errs,
                &p,
                "id is mutually exclusive with tags and ownerID",
            );
        }
        non_empty_opt(&t.id, &field(&p, "id"), &mut errs);
        selector_tags(&t.tags, &field(&p, "tags"), &mut errs);
        if let Some(c) = &t.instance_match_criteria
            && !["open", "targeted"].contains(&c.as_str())
        {
            push(
                &mut errs,
                field(&p, "instanceMatchCriteria"),
                format!("unsupported value {c:?}: expected one of open, targeted"),
            );
        }
    }
    if let Some(pg) = &s.placement_group_selector {
        match (&pg.name, &pg.id) {
            (None, None) => push(
                &mut errs,
                "spec.placementGroupSelector",
                "must specify name or id",
            ),
            (Some(_), Some(_)) => push(
                &mut errs,
                "spec.placementGroupSelector",
                "name and id are mutually exclusive",
            ),
            _ => {}
        }
    }
    for (i, n) in s.network_interfaces.iter().enumerate() {
        let p = index("spec.networkInterfaces", i);
        if !["interface", "efa-only"].contains(&n.interface_type.as_str()) {
            push(
                &mut errs,
                field(&p, "interfaceType"),
                format!(
                    "unsupported value {:?}: expected one of interface, efa-only",
                    n.interface_type
                ),
            );
        }
        if n.network_card_index < 0 || n.device_index < 0 {
            push(
                &mut errs,
                &p,
                "networkCardIndex and deviceIndex must not be negative",
            );
        }
    }

    if let Some(m) = &s.metadata_options {
        let one_of =
            |v: &Option<String>, allowed: &[&str], path: &str, errs: &mut Vec<FieldError>| {
                if let Some(v) = v
                    && !allowed.contains(&v.as_str())
                {
                    push(
                        errs,
                        path,
                        format!(
                            "unsupported value {v:?}: expected one of {}",
                            allowed.join(", ")
                        ),
                    );
                }
            };
        one_of(
            &m.http_endpoint,
            &["enabled", "disabled"],
            "spec.metadataOptions.httpEndpoint",
            &mut errs,
        );
        one_of(
            &m.http_protocol_ipv6,
            &["enabled", "disabled"],
            "spec.metadataOptions.httpProtocolIPv6",
            &mut errs,
        );
        one_of(
            &m.http_tokens,
            &["required", "optional"],
            "spec.metadataOptions.httpTokens",
            &mut errs,
        );
        if let Some(h) = m.http_put_response_hop_limit
            && !(1..=64).contains(&h)
        {
            push(
                &mut errs,
                "spec.metadataOptions.httpPutResponseHopLimit",
                format!("must be between 1 and 64, got {h}"),
            );
        }
    }
    errs
}

/// A GCE label key (`[a-z][a-z0-9_-]{0,62}`) or value (`[a-z0-9_-]{0,63}`).
fn is_gce_label(s: &str, is_key: bool) -> bool {
    s.len() <= 63
        && (!is_key || s.as_bytes().first().is_some_and(u8::is_ascii_lowercase))
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

/// Every semantic problem of a GCPNodeClass (empty when valid).
pub fn validate_gcp_node_class(nc: &GCPNodeClass) -> Vec<FieldError> {
    let mut errs = Vec::new();
    fields::metadata_name(&nc.metadata, false, &mut errs);
    let s = &nc.spec;
    if required(&s.project, "spec.project", &mut errs)
        && !(is_lower_dashed(&s.project) && (6..=30).contains(&s.project.len()))
    {
        push(
            &mut errs,
            "spec.project",
            format!(
                "{:?} is not a project id (6-30 lowercase letters, digits or hyphens, starting with a letter)",
                s.project
            ),
        );
    }
    let region_ok = required(&s.region, "spec.region", &mut errs);
    if region_ok && !is_lower_dashed(&s.region) {
        push(
            &mut errs,
            "spec.region",
            format!(
                "{:?} is not a region name such as \"us-central1\"",
                s.region
            ),
        );
    }
    for (i, z) in s.zones.iter().enumerate() {
        let in_region = z
            .strip_prefix(s.region.as_str())
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|suffix| !suffix.is_empty());
        if region_ok && !in_region {
            push(
                &mut errs,
                index("spec.zones", i),
                format!("zone {z:?} is not in region {:?}", s.region),
            );
        }
    }
    if let Some(img) = &s.image {
        match (&img.family, &img.self_link) {
            (None, None) => push(&mut errs, "spec.image", "family or selfLink is required"),
            (Some(_), Some(_)) => push(
                &mut errs,
                "spec.image",
                "family and selfLink are mutually exclusive",
            ),
            _ => {}
        }
        non_empty_opt(&img.family, "spec.image.family", &mut errs);
        non_empty_opt(&img.self_link, "spec.image.selfLink", &mut errs);
        if img.self_link.is_some() && img.project.is_some() {
            push(&mut errs, "spec.image.project", "only used with family");
        }
    }
    non_empty_opt(&s.network, "spec.network", &mut errs);
    non_empty_opt(&s.subnetwork, "spec.subnetwork", &mut errs);
    if let Some(sa) = &s.service_account
        && sa != "default"
        && !sa
            .split_once('@')
            .is_some_and(|(user, domain)| !user.is_empty() && domain.contains('.'))
    {
        push(
            &mut errs,
            "spec.serviceAccount",
            format!("{sa:?} is not a service account email (or \"default\")"),
        );
    }
    for (k, v) in &s.labels {
        let p = key("spec.labels", k);
        if !is_gce_label(k, true) {
            push(
                &mut errs,
                &p,
                "GCE label keys must start with a lowercase letter and contain only lowercase letters, digits, '_' or '-' (at most 63)",
            );
        } else if !is_gce_label(v, false) {
            push(
                &mut errs,
                &p,
                format!(
                    "invalid value {v:?}: GCE label values contain only lowercase letters, digits, '_' or '-' (at most 63)"
                ),
            );
        } else if k.starts_with("quartermaster") {
            push(
                &mut errs,
                &p,
                "labels starting with \"quartermaster\" are set by Quartermaster",
            );
        }
    }
    for (i, t) in s.tags.iter().enumerate() {
        if !(is_lower_dashed(t) && t.len() <= 63) {
            push(
                &mut errs,
                index("spec.tags", i),
                format!(
                    "network tag {t:?} must be 1-63 lowercase letters, digits or hyphens, starting with a letter"
                ),
            );
        }
    }
    if let Some(size) = s.disk.as_ref().and_then(|d| d.size_gib)
        && size < 10
    {
        push(
            &mut errs,
            "spec.disk.sizeGiB",
            format!("must be at least 10, got {size}"),
        );
    }
    if let Some(a) = &s.reservation_affinity {
        gcp_reservation_affinity(a, &mut errs);
    }
    errs
}

/// Checks a GCPNodeClass's `reservationAffinity`: `SPECIFIC_RESERVATION` names reservations
/// (by the reservation-name key), `ANY_RESERVATION` and `NO_RESERVATION` take no key or values.
fn gcp_reservation_affinity(a: &GcpReservationAffinity, errs: &mut Vec<FieldError>) {
    const PATH: &str = "spec.reservationAffinity";
    // Compute Engine's default, so a class that names reservations but no type reads as ANY.
    let defaulted = |kind: ConsumeReservationType| {
        if kind == ConsumeReservationType::default() {
            " (consumeReservationType defaults to ANY_RESERVATION)"
        } else {
            ""
        }
    };
    let kind = a.consume_reservation_type;
    if kind != ConsumeReservationType::SpecificReservation {
        if !a.values.is_empty() {
            push(
                errs,
                field(PATH, "values"),
                format!(
                    "{} takes no values: only SPECIFIC_RESERVATION names reservations{}",
                    kind.as_str(),
                    defaulted(kind)
                ),
            );
        }
        if a.key.is_some() {
            push(
                errs,
                field(PATH, "key"),
                format!(
                    "{} takes no key: only SPECIFIC_RESERVATION names reservations{}",
                    kind.as_str(),
                    defaulted(kind)
                ),
            );
        }
        return;
    }
    if let Some(k) = &a.key
        && k != RESERVATION_NAME_KEY
        && k != RESERVATION_NAME_KEY_SHORT
    {
        push(
            errs,
            field(PATH, "key"),
            format!(
                "unsupported key {k:?}: Compute Engine reservations are named by {RESERVATION_NAME_KEY:?} (the default)"
            ),
        );
    }
    if a.values.is_empty() {
        push(
            errs,
            field(PATH, "values"),
            "SPECIFIC_RESERVATION needs values: the names of the reservations to launch into",
        );
    }
    for (i, v) in a.values.iter().enumerate() {
        let p = index(&field(PATH, "values"), i);
        if v.starts_with("projects/") {
            push(
                errs,
                &p,
                format!(
                    "{v:?} names a reservation of another project: only reservations of spec.project (by name) can be used"
                ),
            );
        } else if !(is_lower_dashed(v) && v.len() <= 63) {
            push(
                errs,
                &p,
                format!(
                    "{v:?} is not a reservation name (1-63 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen)"
                ),
            );
        } else if a.values[..i].contains(v) {
            push(errs, &p, format!("reservation {v:?} is listed twice"));
        }
    }
}

/// Whether `s` is a GUID (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`).
fn is_guid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|c| c.is_ascii_hexdigit()))
}

/// Whether `id` is an ARM id of the form
/// `/subscriptions/<guid>/resourceGroups/<rg>/providers/<namespace>/<type>/<name>[/<child type>/<child name>]`
/// with the given provider path (`["Microsoft.Network", "virtualNetworks", "subnets"]`).
fn is_arm_id(id: &str, provider: &[&str]) -> bool {
    let parts: Vec<&str> = id.split('/').collect();
    // "", subscriptions, <sub>, resourceGroups, <rg>, providers, <namespace>, then type/name pairs.
    let types = &provider[1..];
    if parts.len() != 7 + 2 * types.len() {
        return false;
    }
    let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    parts[0].is_empty()
        && eq(parts[1], "subscriptions")
        && is_guid(parts[2])
        && eq(parts[3], "resourceGroups")
        && !parts[4].is_empty()
        && eq(parts[5], "providers")
        && eq(parts[6], provider[0])
        && types
            .iter()
            .enumerate()
            .all(|(i, t)| eq(parts[7 + 2 * i], t) && !parts[8 + 2 * i].is_empty())
}

/// Every semantic problem of an AzureNodeClass (empty when valid).
pub fn validate_azure_node_class(nc: &AzureNodeClass) -> Vec<FieldError> {
    let mut errs = Vec::new();
    fields::metadata_name(&nc.metadata, false, &mut errs);
    let s = &nc.spec;
    if required(&s.subscription_id, "spec.subscriptionId", &mut errs)
        && !is_guid(&s.subscription_id)
    {
        push(
            &mut errs,
            "spec.subscriptionId",
            format!("{:?} is not a subscription id (a GUID)", s.subscription_id),
        );
    }
    required(&s.resource_group, "spec.resourceGroup", &mut errs);
    if required(&s.location, "spec.location", &mut errs)
        && !s
            .location
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        push(
            &mut errs,
            "spec.location",
            format!("{:?} is not a location name such as \"eastus\"", s.location),
        );
    }
    if required(&s.subnet_id, "spec.subnetId", &mut errs)
        && !is_arm_id(
            &s.subnet_id,
            &["Microsoft.Network", "virtualNetworks", "subnets"],
        )
    {
        push(
            &mut errs,
            "spec.subnetId",
            "must be a subnet resource id: /subscriptions/<subscription>/resourceGroups/<group>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>",
        );
    }
    if let Some(img) = &s.image {
        match (&img.image_family, &img.id) {
            (None, None) => push(&mut errs, "spec.image", "imageFamily or id is required"),
            (Some(_), Some(_)) => push(
                &mut errs,
                "spec.image",
                "imageFamily and id are mutually exclusive",
            ),
            _ => {}
        }
        non_empty_opt(&img.image_family, "spec.image.imageFamily", &mut errs);
        if let Some(id) = &img.id
            && !id.to_ascii_lowercase().starts_with("/subscriptions/")
        {
            push(
                &mut errs,
                "spec.image.id",
                "must be an image resource id starting with /subscriptions/",
            );
        }
    }
    for (i, id) in s.managed_identities.iter().enumerate() {
        if !is_arm_id(id, &["Microsoft.ManagedIdentity", "userAssignedIdentities"]) {
            push(
                &mut errs,
                index("spec.managedIdentities", i),
                "must be a user-assigned identity resource id: /subscriptions/<subscription>/resourceGroups/<group>/providers/Microsoft.ManagedIdentity/userAssignedIdentities/<name>",
            );
        }
    }
    if let Some(id) = &s.capacity_reservation_group_id
        && !is_arm_id(id, &["Microsoft.Compute", "capacityReservationGroups"])
    {
        push(
            &mut errs,
            "spec.capacityReservationGroupID",
            format!(
                "{id:?} is not a capacity reservation group resource id: /subscriptions/<subscription>/resourceGroups/<group>/providers/Microsoft.Compute/capacityReservationGroups/<name>"
            ),
        );
    }
    fields::cloud_tags(&s.tags, "spec.tags", &mut errs);
    for k in s.tags.keys() {
        let restricted =
            k.starts_with("quartermaster.dev/") || k.starts_with("kubernetes.io/cluster/");
        if !restricted && k.contains(['<', '>', '%', '&', '\\', '?', '/']) {
            push(
                &mut errs,
                key("spec.tags", k),
                "Azure tag names may not contain <, >, %, &, \\, ? or /",
            );
        }
    }
    if let Some(size) = s.os_disk_size_gb
        && size < 1
    {
        push(
            &mut errs,
            "spec.osDiskSizeGB",
            format!("must be positive, got {size}"),
        );
    }
    errs
}
