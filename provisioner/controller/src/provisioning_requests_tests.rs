use quartermaster_cluster::provisioning_request::{
    CLASS_BEST_EFFORT_ATOMIC, CLASS_CHECK_CAPACITY, ProvisioningClass,
};

use super::*;

fn t(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
}

fn request(class: &str) -> RequestPods {
    RequestPods {
        namespace: "team".into(),
        name: "job-prov".into(),
        generation: Some(1),
        created_at: Some(to_kube(t(0)).0),
        class: ProvisioningClass::parse(class),
        status: ProvisioningRequestStatus::default(),
        pending: Vec::new(),
        check: Vec::new(),
        consumed: 0,
        total: 2,
        problem: None,
        note: None,
    }
}

fn shown(conditions: &[Condition]) -> Vec<(String, String, String)> {
    conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

fn row(t: &str, s: &str, r: &str) -> (String, String, String) {
    (t.into(), s.into(), r.into())
}

#[test]
fn check_capacity_found_then_booking_expires_after_ten_minutes() {
    let mut r = request(CLASS_CHECK_CAPACITY);
    let found = desired_conditions(&r, Some(&RequestVerdict::Provisioned), t(5)).unwrap();
    assert_eq!(
        shown(&found),
        [
            row("Accepted", "True", "Accepted"),
            row("Provisioned", "True", "CapacityIsFound")
        ]
    );
    r.status.conditions = found;
    assert_eq!(
        desired_conditions(&r, Some(&RequestVerdict::Provisioned), t(60)),
        None,
        "nothing changed: nothing to write"
    );
    let expired = desired_conditions(&r, Some(&RequestVerdict::Provisioned), t(5 + 600)).unwrap();
    assert_eq!(
        shown(&expired)[2],
        row("BookingExpired", "True", "CapacityReservationTimeExpired")
    );
    assert_eq!(
        expired[1].last_transition_time,
        to_kube(t(5)),
        "Provisioned keeps its transition time"
    );
    r.status.conditions = expired;
    assert_eq!(
        desired_conditions(&r, None, t(2000)),
        None,
        "a finished request is left alone"
    );
}

#[test]
fn best_effort_atomic_not_found_then_provisioned() {
    let mut r = request(CLASS_BEST_EFFORT_ATOMIC);
    assert_eq!(
        shown(&desired_conditions(&r, Some(&RequestVerdict::InProgress), t(1)).unwrap()),
        [row("Accepted", "True", "Accepted")]
    );
    let not_found = desired_conditions(
        &r,
        Some(&RequestVerdict::NotFound(
            "gang team/provreq-job-prov (minMember 2): …".into(),
        )),
        t(1),
    )
    .unwrap();
    assert_eq!(
        shown(&not_found)[1],
        row("Provisioned", "False", "CapacityIsNotFound")
    );
    assert!(not_found[1].message.contains("gang team/provreq-job-prov"));
    r.status.conditions = not_found;
    let provisioned = desired_conditions(&r, Some(&RequestVerdict::Provisioned), t(90)).unwrap();
    assert_eq!(
        shown(&provisioned)[1],
        row("Provisioned", "True", "CapacityIsProvisioned")
    );
    assert_eq!(provisioned[1].last_transition_time, to_kube(t(90)));
    r.status.conditions = provisioned;
    let revoked = desired_conditions(
        &r,
        Some(&RequestVerdict::Revoked("its node is being deleted".into())),
        t(120),
    )
    .unwrap();
    assert_eq!(
        shown(&revoked)[2],
        row("CapacityRevoked", "True", "CapacityRevoked")
    );
}

#[test]
fn requests_that_cannot_be_served_fail_and_old_ones_expire() {
    let mut r = request("example.com/some-other-class");
    r.problem = Some("provisioningClassName … is not served".into());
    assert_eq!(
        shown(&desired_conditions(&r, None, t(1)).unwrap()),
        [row("Failed", "True", "UnsupportedProvisioningClass")]
    );
    let mut r = request(CLASS_BEST_EFFORT_ATOMIC);
    r.problem = Some("PodTemplate team/ppt-x not found".into());
    assert_eq!(
        shown(&desired_conditions(&r, None, t(1)).unwrap()),
        [row("Failed", "True", "FailedToCreatePods")]
    );
    let r = request(CLASS_BEST_EFFORT_ATOMIC);
    let week = 7 * 24 * 3600;
    let conditions = desired_conditions(&r, Some(&RequestVerdict::InProgress), t(week)).unwrap();
    assert_eq!(shown(&conditions)[1], row("Failed", "True", "Expired"));
}

#[test]
fn watched_requests_become_snapshot_objects() {
    let r: ProvisioningRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "job-prov", "namespace": "team"},
        "spec": {"provisioningClassName": CLASS_CHECK_CAPACITY,
                 "podSets": [{"podTemplateRef": {"name": "ppt-a"}, "count": 1}]}
    }))
    .unwrap();
    let values = objects(&[std::sync::Arc::new(r)], &[]);
    assert_eq!(values[0]["kind"], "ProvisioningRequest");
    assert_eq!(values[0]["apiVersion"], "autoscaling.x-k8s.io/v1");
    assert_eq!(values[0]["spec"]["podSets"][0]["count"], 1);
    use kube::Resource;
    assert_eq!(
        ProvisioningRequest::url_path(&(), Some("team")),
        "/apis/autoscaling.x-k8s.io/v1/namespaces/team/provisioningrequests"
    );
}

#[test]
fn a_queued_provisioning_request_without_flex_start_says_why_in_accepted() {
    let mut r = request(quartermaster_cluster::provisioning_request::CLASS_QUEUED_PROVISIONING);
    r.note = Some("no NodePool its pods may use opts in to flex-start".into());
    let conditions = desired_conditions(&r, Some(&RequestVerdict::InProgress), t(5)).unwrap();
    assert_eq!(shown(&conditions), [row("Accepted", "True", "Accepted")]);
    assert_eq!(
        conditions[0].message,
        "ProvisioningRequest is accepted by Quartermaster; no NodePool its pods may use opts in \
         to flex-start"
    );
}
