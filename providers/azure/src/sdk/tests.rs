use super::*;

fn spec() -> VmSpec {
    VmSpec {
        name: "qm-default-abc12-0".into(),
        location: "eastus".into(),
        size: "Standard_NC24ads_A100_v4".into(),
        zone: Some("2".into()),
        spot: true,
        subnet_id: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes".into(),
        image: ImageRef::Id("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i/versions/1.0.0".into()),
        os_disk_size_gb: Some(128),
        custom_data: Some("IyFiYXNo".into()),
        ssh_public_key: Some("ssh-ed25519 AAAA".into()),
        identities: vec!["/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/kubelet".into()],
        capacity_reservation_group: None,
        tags: BTreeMap::from([("quartermaster.dev/nodeclaim".into(), "default-abc12".into())]),
    }
}

#[test]
fn a_spot_vm_body_is_spot_delete_with_no_price_cap_and_fills_the_sdk_model() {
    let body = vm_body(&spec());
    assert_eq!(body["properties"]["priority"], "Spot");
    assert_eq!(body["properties"]["evictionPolicy"], "Delete");
    assert_eq!(body["properties"]["billingProfile"]["maxPrice"], -1);
    assert_eq!(body["zones"], json!(["2"]));
    assert_eq!(body["properties"]["osProfile"]["customData"], "IyFiYXNo");
    let vm: models::VirtualMachine = serde_json::from_value(body.clone()).unwrap();
    let back = serde_json::to_value(&vm).unwrap();
    assert_eq!(back["properties"]["priority"], "Spot");
    assert_eq!(back["properties"]["billingProfile"]["maxPrice"], -1.0);
    assert_eq!(
        back["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]["ipConfigurations"]
            [0]["properties"]["subnet"]["id"],
        body["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]["ipConfigurations"]
            [0]["properties"]["subnet"]["id"]
    );
}

#[test]
fn a_vm_spec_never_prints_its_custom_data() {
    let printed = format!("{:?}", spec());
    assert!(!printed.contains("IyFiYXNo"), "{printed}");
    assert!(printed.contains("qm-default-abc12-0"));
}

#[test]
fn an_on_demand_vm_is_regular() {
    let body = vm_body(&VmSpec {
        spot: false,
        zone: None,
        ..spec()
    });
    assert_eq!(body["properties"]["priority"], "Regular");
    assert!(body.get("zones").is_none());
    assert!(body["properties"].get("billingProfile").is_none());
    assert!(body["properties"].get("capacityReservation").is_none());
}

#[test]
fn a_vm_in_a_capacity_reservation_group_names_it_and_reads_back_with_it() {
    let group = "/subscriptions/s/resourceGroups/capacity/providers/Microsoft.Compute/capacityReservationGroups/h100";
    let body = vm_body(&VmSpec {
        spot: false,
        capacity_reservation_group: Some(group.into()),
        ..spec()
    });
    assert_eq!(
        body["properties"]["capacityReservation"]["capacityReservationGroup"]["id"],
        group
    );
    // The SDK model keeps it, so the PUT sends it.
    let vm: models::VirtualMachine = serde_json::from_value(body).unwrap();
    let back = serde_json::to_value(&vm).unwrap();
    assert_eq!(
        vm_of(&back).capacity_reservation_group.as_deref(),
        Some(group)
    );
    assert_eq!(
        vm_of(&json!({"properties": {}})).capacity_reservation_group,
        None
    );
}

#[test]
fn capacity_reservations_read_size_zone_capacity_and_use_from_the_group_instance_view() {
    let group_id = "/subscriptions/s/resourceGroups/capacity/providers/Microsoft.Compute/capacityReservationGroups/h100";
    let vm = |n: &str| json!({"id": format!("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{n}")});
    let reservation = |name: &str, zone: &str, capacity: i64, associated: Vec<Value>| {
        json!({
            "id": format!("{group_id}/capacityReservations/{name}"), "name": name,
            "location": "eastus", "zones": [zone], "tags": {"team": "research"},
            "sku": {"name": "Standard_ND96isr_H100_v5", "capacity": capacity},
            "properties": {"provisioningState": "Succeeded", "virtualMachinesAssociated": associated}
        })
    };
    let listed = [
        reservation("z1", "1", 4, vec![vm("a"), vm("b"), vm("c")]),
        reservation("z2", "2", 2, vec![vm("d")]),
        // No size: not a reservation we can use.
        json!({"id": format!("{group_id}/capacityReservations/bad"), "name": "bad", "location": "eastus", "sku": {}}),
    ];
    // The group's instance view names z1 only: two of its three associated VMs are
    // allocated (the third is deallocated), and only 3 of the 4 are held now.
    let group = json!({
        "id": group_id, "name": "h100", "location": "eastus",
        "properties": {"instanceView": {"capacityReservations": [
            {"name": "Z1", "utilizationInfo": {"currentCapacity": 3,
             "virtualMachinesAllocated": [vm("a"), vm("b")]}}
        ]}}
    });
    let rs = capacity_reservations_of(group_id, &group, &listed);
    assert_eq!(rs.len(), 2, "{rs:?}");
    assert_eq!(rs[0].id, format!("{group_id}/capacityReservations/z1"));
    assert_eq!(rs[0].group_id, group_id);
    assert_eq!(rs[0].size, "Standard_ND96isr_H100_v5");
    assert_eq!(rs[0].zone.as_deref(), Some("1"));
    assert_eq!(rs[0].capacity, 4);
    assert_eq!(rs[0].current_capacity, Some(3));
    assert_eq!(rs[0].allocated, Some(2));
    assert_eq!(rs[0].associated, 3);
    assert_eq!(rs[0].tags["team"], "research");
    assert_eq!(rs[1].allocated, None);
    assert_eq!(rs[1].associated, 1);
    // The SDK's list model keeps what we read.
    let model: models::CapacityReservation = serde_json::from_value(listed[0].clone()).unwrap();
    let back = serde_json::to_value(&model).unwrap();
    assert_eq!(
        capacity_reservations_of(group_id, &group, &[back])[0],
        rs[0]
    );
}

#[test]
fn operations_read_status_and_error() {
    assert_eq!(
        operation_of(200, &json!({"status": "InProgress"})),
        OperationStatus::InProgress { retry_after: None }
    );
    assert_eq!(
        operation_of(200, &json!({"status": "Succeeded"})),
        OperationStatus::Succeeded
    );
    match operation_of(
        200,
        &json!({"status": "Failed", "error": {"code": "AllocationFailed", "message": "no"}}),
    ) {
        OperationStatus::Failed(e) => assert_eq!(e.code.as_deref(), Some("AllocationFailed")),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        operation_of(202, &Value::Null),
        OperationStatus::InProgress { retry_after: None }
    );
}

#[test]
fn skus_keep_vm_sizes_with_zones_and_restrictions() {
    let v = json!({
        "resourceType": "virtualMachines", "name": "Standard_NC24ads_A100_v4",
        "family": "standardNCADSA100v4Family", "locations": ["eastus"],
        "locationInfo": [{"location": "eastus", "zones": ["2", "3"]}],
        "capabilities": [{"name": "GPUs", "value": "1"}],
        "restrictions": [{"type": "Zone", "reasonCode": "NotAvailableForSubscription"}]
    });
    let sku = sku_of(&v).unwrap();
    assert_eq!(sku.zones, vec!["2", "3"]);
    assert_eq!(sku.capabilities["GPUs"], "1");
    assert_eq!(sku.restrictions, vec!["NotAvailableForSubscription"]);
    assert!(sku_of(&json!({"resourceType": "disks", "name": "x"})).is_none());
}
