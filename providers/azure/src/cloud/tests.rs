use super::*;

#[test]
fn provider_ids_name_the_vm() {
    let p = "azure:///subscriptions/s/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachines/qm-a-0";
    assert_eq!(AzureCloud::vm_name_of(p).unwrap(), "qm-a-0");
    assert!(AzureCloud::vm_name_of("aws:///us-east-1a/i-1").is_err());
    assert!(AzureCloud::vm_name_of("azure:///subscriptions/s").is_err());
}

#[test]
fn provisioning_states_map_to_instance_states() {
    assert_eq!(state(Some("Creating")), InstanceState::Pending);
    assert_eq!(state(Some("Succeeded")), InstanceState::Running);
    assert_eq!(state(Some("Deleting")), InstanceState::ShuttingDown);
    assert_eq!(state(Some("Failed")), InstanceState::Terminated);
}

fn reservation() -> CapacityReservation {
    let group = "/subscriptions/s/resourceGroups/capacity/providers/Microsoft.Compute/capacityReservationGroups/h100";
    CapacityReservation {
        id: format!("{group}/capacityReservations/z2"),
        name: "z2".into(),
        group_id: group.into(),
        location: "eastus".into(),
        zone: Some("2".into()),
        size: "Standard_ND96isr_H100_v5".into(),
        capacity: 4,
        current_capacity: Some(4),
        allocated: Some(1),
        associated: 3,
        provisioning_state: Some("Succeeded".into()),
        tags: BTreeMap::from([("team".into(), "research".into())]),
    }
}

#[test]
fn a_capacity_reservation_is_a_reservation_of_its_size_zone_and_group() {
    let r = reservation_of(&reservation(), 98.32);
    assert_eq!(r.zone, "eastus-2");
    assert_eq!((r.count, r.available), (4, Some(3)));
    assert_eq!(r.price_per_hour, 98.32);
    assert_eq!(r.kind, quartermaster_pricing::ReservationKind::Default);
    assert_eq!(
        r.tags[quartermaster_pricing::reservation::TAG_RESERVATION_GROUP],
        reservation().group_id
    );
    assert_eq!(r.tags["team"], "research");
}

#[test]
fn free_slots_count_what_is_held_now_and_fall_back_to_associated_vms() {
    // Not all of it held yet (a capacity increase under way): only what is held is free.
    let held = CapacityReservation {
        current_capacity: Some(2),
        ..reservation()
    };
    assert_eq!(reservation_of(&held, 0.0).available, Some(1));
    // Without the instance view: every associated VM (deallocated ones too) counts.
    let unviewed = CapacityReservation {
        current_capacity: None,
        allocated: None,
        ..reservation()
    };
    assert_eq!(reservation_of(&unviewed, 0.0).available, Some(1));
    // Overallocated (more VMs associated than reserved): none free, never negative.
    let over = CapacityReservation {
        allocated: Some(6),
        ..reservation()
    };
    assert_eq!(reservation_of(&over, 0.0).available, Some(0));
    let regional = CapacityReservation {
        zone: None,
        ..reservation()
    };
    assert_eq!(reservation_of(&regional, 0.0).zone, "eastus");
}

#[test]
fn a_reserved_launch_goes_into_the_group_of_the_reservation_it_names() {
    let o = LaunchOffering {
        instance_type: "Standard_ND96isr_H100_v5".into(),
        zone: "eastus-2".into(),
        capacity_type: CapacityType::Reserved,
        price_per_hour: 0.0,
    };
    let mut request = LaunchRequest {
        claim_name: "gpu-abc12".into(),
        node_pool: "gpu".into(),
        node_class: "default".into(),
        instance_type: o.instance_type.clone(),
        zone: o.zone.clone(),
        capacity_type: o.capacity_type,
        price_per_hour: 0.0,
        labels: BTreeMap::from([(
            quartermaster_pricing::reservation::LABEL_RESERVATION_ID.to_owned(),
            reservation().id,
        )]),
        tags: BTreeMap::new(),
        fallbacks: Vec::new(),
        node_class_spec: None,
    };
    assert_eq!(
        reserved_group(&request).unwrap(),
        Some(reservation().group_id.as_str())
    );
    request.capacity_type = CapacityType::OnDemand;
    assert_eq!(reserved_group(&request).unwrap(), None);
}

#[test]
fn an_unknown_image_family_is_a_nodeclass_error() {
    let spec: AzureNodeClassSpec = serde_json::from_value(serde_json::json!({
        "subscriptionId": "s", "resourceGroup": "rg", "location": "eastus",
        "subnetId": "/x", "image": {"imageFamily": "Windows"}
    }))
    .unwrap();
    assert!(matches!(
        image(&spec),
        Err(CloudError::InvalidRequest { .. })
    ));
}
