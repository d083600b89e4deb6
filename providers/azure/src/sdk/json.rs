//! The REST JSON shapes: a VM PUT's body, and VMs, capacity reservations, SKUs and operations read from ARM's answers.

use super::*;

/// An SDK model as its REST JSON.
pub(super) fn to_json(model: &impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(model).map_err(|e| ApiError::other(ApiErrorKind::Response, e.to_string()))
}

/// The request JSON of a VM PUT (API 2024-07-01).
pub fn vm_body(spec: &VmSpec) -> Value {
    let image = match &spec.image {
        ImageRef::Id(id) => json!({ "id": id }),
        ImageRef::Marketplace {
            publisher,
            offer,
            sku,
            version,
        } => json!({ "publisher": publisher, "offer": offer, "sku": sku, "version": version }),
    };
    let mut os_disk = json!({
        "createOption": "FromImage",
        "deleteOption": "Delete",
        "managedDisk": { "storageAccountType": "Premium_LRS" },
    });
    if let Some(gb) = spec.os_disk_size_gb {
        os_disk["diskSizeGB"] = json!(gb);
    }
    let mut linux = json!({ "disablePasswordAuthentication": true });
    if let Some(key) = &spec.ssh_public_key {
        linux["ssh"] = json!({ "publicKeys": [{
            "path": "/home/azureuser/.ssh/authorized_keys",
            "keyData": key,
        }]});
    }
    let mut os_profile = json!({
        "computerName": spec.name,
        "adminUsername": "azureuser",
        "linuxConfiguration": linux,
    });
    if let Some(data) = &spec.custom_data {
        os_profile["customData"] = json!(data);
    }
    let mut properties = json!({
        "hardwareProfile": { "vmSize": spec.size },
        "storageProfile": { "imageReference": image, "osDisk": os_disk },
        "osProfile": os_profile,
        "networkProfile": {
            "networkApiVersion": "2020-11-01",
            "networkInterfaceConfigurations": [{
                "name": format!("{}-nic", spec.name),
                "properties": {
                    "primary": true,
                    "deleteOption": "Delete",
                    "ipConfigurations": [{
                        "name": "ipconfig1",
                        "properties": { "primary": true, "subnet": { "id": spec.subnet_id } },
                    }],
                },
            }],
        },
    });
    if spec.spot {
        properties["priority"] = json!("Spot");
        properties["evictionPolicy"] = json!("Delete");
        properties["billingProfile"] = json!({ "maxPrice": -1 });
    } else {
        properties["priority"] = json!("Regular");
    }
    if let Some(group) = &spec.capacity_reservation_group {
        properties["capacityReservation"] = json!({ "capacityReservationGroup": { "id": group } });
    }
    let mut body = json!({
        "location": spec.location,
        "tags": spec.tags,
        "properties": properties,
    });
    if let Some(zone) = &spec.zone {
        body["zones"] = json!([zone]);
    }
    if !spec.identities.is_empty() {
        let ids: BTreeMap<&str, Value> = spec
            .identities
            .iter()
            .map(|id| (id.as_str(), json!({})))
            .collect();
        body["identity"] = json!({ "type": "UserAssigned", "userAssignedIdentities": ids });
    }
    body
}

/// Tags from a resource's REST JSON (string values only).
pub(super) fn tags_of(v: &Value) -> BTreeMap<String, String> {
    v.get("tags")
        .and_then(Value::as_object)
        .map(|t| {
            t.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// A VM from its REST JSON.
pub fn vm_of(v: &Value) -> Vm {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let props = v.get("properties").unwrap_or(&Value::Null);
    Vm {
        id: text(v, "id").unwrap_or_default(),
        name: text(v, "name").unwrap_or_default(),
        size: props
            .get("hardwareProfile")
            .and_then(|h| text(h, "vmSize"))
            .unwrap_or_default(),
        location: text(v, "location").unwrap_or_default(),
        zone: v
            .get("zones")
            .and_then(Value::as_array)
            .and_then(|z| z.first())
            .and_then(Value::as_str)
            .map(str::to_owned),
        priority: text(props, "priority"),
        provisioning_state: text(props, "provisioningState"),
        time_created: text(props, "timeCreated")
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| t.with_timezone(&chrono::Utc)),
        capacity_reservation_group: props
            .pointer("/capacityReservation/capacityReservationGroup/id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_owned),
        tags: tags_of(v),
    }
}

/// The capacity reservations of the group `group_id` from their REST JSON (`reservations`, as
/// listed) and the group's (`group`, read with `$expand=instanceView`). What a reservation's
/// use is comes from the group's instance view (`capacityReservations[].utilizationInfo`, by
/// reservation name): `virtualMachinesAllocated` and `currentCapacity`; a reservation the
/// instance view does not name has only its `virtualMachinesAssociated`. Entries without an
/// id, a size or a capacity are left out.
pub fn capacity_reservations_of(
    group_id: &str,
    group: &Value,
    reservations: &[Value],
) -> Vec<CapacityReservation> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let count = |v: Option<&Value>| v.and_then(Value::as_array).map_or(0, Vec::len);
    let to_u32 = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
    let views: BTreeMap<String, &Value> = group
        .pointer("/properties/instanceView/capacityReservations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            Some((
                text(v, "name")?.to_ascii_lowercase(),
                v.get("utilizationInfo").unwrap_or(&Value::Null),
            ))
        })
        .collect();
    reservations
        .iter()
        .filter_map(|r| {
            let props = r.get("properties").unwrap_or(&Value::Null);
            let name = text(r, "name").unwrap_or_default();
            let use_of = views.get(&name.to_ascii_lowercase());
            Some(CapacityReservation {
                id: text(r, "id").filter(|id| !id.is_empty())?,
                group_id: group_id.to_owned(),
                location: text(r, "location").unwrap_or_default(),
                zone: r
                    .get("zones")
                    .and_then(Value::as_array)
                    .and_then(|z| z.first())
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                size: r.pointer("/sku/name").and_then(Value::as_str)?.to_owned(),
                capacity: to_u32(r.pointer("/sku/capacity").and_then(Value::as_i64)?),
                current_capacity: use_of
                    .and_then(|u| u.get("currentCapacity"))
                    .and_then(Value::as_i64)
                    .map(to_u32),
                allocated: use_of.map(|u| {
                    u32::try_from(count(u.get("virtualMachinesAllocated"))).unwrap_or(u32::MAX)
                }),
                associated: u32::try_from(count(props.get("virtualMachinesAssociated")))
                    .unwrap_or(u32::MAX),
                provisioning_state: text(props, "provisioningState"),
                tags: tags_of(r),
                name,
            })
        })
        .collect()
}

/// A resource SKU from its REST JSON; `None` for anything but virtual machines.
pub fn sku_of(v: &Value) -> Option<Sku> {
    if v.get("resourceType").and_then(Value::as_str) != Some("virtualMachines") {
        return None;
    }
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let location = v
        .get("locations")
        .and_then(Value::as_array)
        .and_then(|l| l.first())
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_default();
    let zones = v
        .get("locationInfo")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|i| {
            i.get("zones")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(|z| z.as_str().map(str::to_owned))
        .collect();
    let capabilities = v
        .get("capabilities")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| Some((text(c, "name")?, text(c, "value")?)))
        .collect();
    let restrictions = v
        .get("restrictions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| text(r, "reasonCode").or_else(|| text(r, "type")))
        .collect();
    Some(Sku {
        name: text(v, "name")?,
        family: text(v, "family"),
        location,
        zones,
        capabilities,
        restrictions,
    })
}

/// Where an operation is, from its GET: the `Azure-AsyncOperation` body's `status`, else the
/// `Location` protocol's 202-while-running.
pub fn operation_of(status: u16, body: &Value) -> OperationStatus {
    match body.get("status").and_then(Value::as_str) {
        Some(s) if s.eq_ignore_ascii_case("Succeeded") => OperationStatus::Succeeded,
        Some(s) if s.eq_ignore_ascii_case("Failed") || s.eq_ignore_ascii_case("Canceled") => {
            let (code, message) = error_of(body);
            OperationStatus::Failed(ApiError {
                kind: ApiErrorKind::Service,
                code: code.or_else(|| Some(s.to_owned())),
                message: message.unwrap_or_else(|| format!("the operation {s}")),
                status: None,
                retry_after: None,
            })
        }
        Some(_) => OperationStatus::InProgress { retry_after: None },
        None if status == 202 => OperationStatus::InProgress { retry_after: None },
        None => OperationStatus::Succeeded,
    }
}
