//! A corpus of malformed and surprising cloud API responses, each with the exact outcome the
//! provider must give: AWS through the fault proxy in front of moto (canned XML, or moto's own
//! response truncated or rewritten after the call took effect), GCP and Azure through our
//! local servers' canned answers. Nothing may panic, and nothing may leak: a launch whose
//! response is bogus after the cloud acted finds its instance again by claim on the next try.
//!
//! Each table runs every case and reports every mismatch at once (`expected` / `got`).

use std::collections::BTreeSet;
use std::sync::Arc;

use quartermaster_cloud::{CloudError, CloudProvider, Instance};
use quartermaster_pricing::CapacityType;

use crate::aws::{World, instances_of, offering, request, world};
use crate::fault_proxy::Fault;

/// `i-` and a run of hex digits (an EC2 instance id) become `i-ID`: ids are moto's choice.
fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("i-") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let hex = from[2..]
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .count();
        if hex >= 8 {
            out.push_str("i-ID");
        } else {
            out.push_str(&from[..2 + hex]);
        }
        rest = &from[2 + hex..];
    }
    out.push_str(rest);
    out
}

fn outcome<T>(result: Result<T, CloudError>, ok: impl FnOnce(T) -> String) -> String {
    match result {
        Ok(v) => format!("ok: {}", ok(v)),
        Err(e) => format!("error: {e}"),
    }
}

fn described(i: &Instance) -> String {
    format!(
        "{} {:?} {} {} {:?} of {:?}",
        i.provider_id, i.state, i.instance_type, i.capacity_type, i.zone, i.claim_name
    )
}

/// Every mismatch of a table, or a pass.
fn report(cloud: &str, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{cloud}: {} case(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

// ---------------------------------------------------------------------------------------------
// AWS

/// The provider call a case makes.
#[derive(Debug, Clone, Copy)]
enum AwsCall {
    /// Launches the case's claim.
    Launch,
    /// Gets the case's instance (launched first, without faults).
    Get,
    /// Deletes the case's instance.
    Delete,
    /// Lists the instances (the case's is launched first).
    List,
    /// Instance types.
    InstanceTypes,
    /// The leak sweep, the case's claim known, the grace period passed.
    Sweep,
}

/// What must hold after the call (checked in moto directly).
#[derive(Debug, Clone, Copy)]
enum AwsAfter {
    /// No instance for the claim; launching again (no fault) launches exactly one.
    NothingLaunched,
    /// The call took effect: launching again (no fault) finds that instance, calls no
    /// CreateFleet, and it stays the only one.
    FoundAgain,
    /// The claim's instance still runs.
    Running,
}

struct AwsCase {
    name: &'static str,
    call: AwsCall,
    faults: Vec<(&'static str, Fault)>,
    expected: &'static str,
    after: AwsAfter,
}

fn xml(status: u16, body: &str) -> Fault {
    Fault::XmlReply {
        status,
        body: body.to_owned(),
    }
}

/// `from` -> `to` replacements of moto's response.
fn rewrite(pairs: &[(&str, &str)]) -> Fault {
    Fault::Rewrite(
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect(),
    )
}

/// An element renamed to one the SDK does not know (so it reads as missing).
fn hide(element: &str) -> Fault {
    rewrite(&[
        (&format!("<{element}>"), &format!("<hidden{element}>")),
        (&format!("</{element}>"), &format!("</hidden{element}>")),
    ])
}

/// The text of `element` replaced by `value` (the original kept in an unknown element).
fn garble(element: &str, value: &str) -> Fault {
    rewrite(&[
        (&format!("</{element}>"), "</hidden>"),
        (
            &format!("<{element}>"),
            &format!("<{element}>{value}</{element}><hidden>"),
        ),
    ])
}

/// A 200 `CreateFleet` with neither an instance nor an error.
const EMPTY_FLEET: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r-1</requestId><fleetId>fleet-1</fleetId><errorSet/><fleetInstanceSet/></CreateFleetResponse>"#;

/// A 200 `CreateFleet` whose one error has no `errorCode`.
const FLEET_ERROR_WITHOUT_CODE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r-1</requestId><fleetId>fleet-1</fleetId><errorSet><item><lifecycle>on-demand</lifecycle><errorMessage>Something went wrong.</errorMessage></item></errorSet><fleetInstanceSet/></CreateFleetResponse>"#;

/// An EC2 error document without a `Code`.
const ERROR_WITHOUT_CODE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Message>Something broke.</Message></Error></Errors><RequestID>r-1</RequestID></Response>"#;

/// What a load balancer in front of the API might answer.
const HTML: &str = "<html><body><h1>502 Bad Gateway</h1></body></html>";

fn aws_cases() -> Vec<AwsCase> {
    use AwsAfter::*;
    use AwsCall::*;
    vec![
        AwsCase {
            name: "CreateFleet took effect, its 200 truncated mid-element",
            call: Launch,
            faults: vec![("CreateFleet", Fault::Truncate(300))],
            expected: "error: cloud API error: CreateFleet returned neither an instance nor an error",
            after: FoundAgain,
        },
        AwsCase {
            name: "CreateFleet took effect, its 200 with an empty body",
            call: Launch,
            faults: vec![("CreateFleet", Fault::Truncate(0))],
            expected: "error: cloud API error: AWS answered HTTP 200 with a response that could not be read: error parsing XML: no root element",
            after: FoundAgain,
        },
        AwsCase {
            name: "CreateFleet took effect, its instance listed without instanceIds",
            call: Launch,
            faults: vec![("CreateFleet", hide("instanceIds"))],
            expected: "error: cloud API error: CreateFleet returned neither an instance nor an error",
            after: FoundAgain,
        },
        AwsCase {
            name: "CreateFleet 200 with neither an instance nor an error",
            call: Launch,
            faults: vec![("CreateFleet", xml(200, EMPTY_FLEET))],
            expected: "error: cloud API error: CreateFleet returned neither an instance nor an error",
            after: NothingLaunched,
        },
        AwsCase {
            name: "CreateFleet 200 with an error without errorCode",
            call: Launch,
            faults: vec![("CreateFleet", xml(200, FLEET_ERROR_WITHOUT_CODE))],
            expected: "error: cloud API error: Unknown: Something went wrong.",
            after: NothingLaunched,
        },
        AwsCase {
            name: "CreateFleet 200 whose body is not XML",
            call: Launch,
            faults: vec![("CreateFleet", xml(200, "OK"))],
            expected: "error: cloud API error: AWS answered HTTP 200 with a response that could not be read: error parsing XML: no root element",
            after: NothingLaunched,
        },
        AwsCase {
            name: "DescribeInstances: an instance without instanceId",
            call: Get,
            faults: vec![("DescribeInstances", hide("instanceId"))],
            expected: "error: cloud API error: DescribeInstances answered an instance without an instanceId",
            after: Running,
        },
        AwsCase {
            name: "DescribeInstances: an unknown instance state name",
            call: Get,
            faults: vec![(
                "DescribeInstances",
                rewrite(&[("<name>running</name>", "<name>hibernating</name>")]),
            )],
            expected: r#"ok: aws:///us-east-1a/i-ID ShuttingDown g5.xlarge on-demand "us-east-1a" of "bad-7""#,
            after: Running,
        },
        AwsCase {
            name: "DescribeInstances: launchTime is not a time",
            call: Get,
            faults: vec![("DescribeInstances", garble("launchTime", "yesterday"))],
            expected: "error: cloud API error: AWS answered HTTP 200 with a response that could not be read: error parsing XML: expected (timestamp: `com.amazonaws.ec2#DateTime`)",
            after: Running,
        },
        AwsCase {
            name: "DescribeInstances: 200 with an empty body",
            call: Get,
            faults: vec![("DescribeInstances", xml(200, ""))],
            expected: "error: cloud API error: AWS answered HTTP 200 with a response that could not be read: error parsing XML: no root element",
            after: Running,
        },
        AwsCase {
            name: "DescribeInstances: 200 with an HTML body",
            call: Get,
            faults: vec![("DescribeInstances", xml(200, HTML))],
            expected: r#"error: cloud API error: AWS answered HTTP 200 with a response that could not be read: error parsing XML: invalid root, expected DescribeInstancesResponse got StartEl { name: Name { prefix: "", local: "html" }, attributes: [], closed: false, depth: 0 }"#,
            after: Running,
        },
        AwsCase {
            name: "DescribeInstances: 500 error documents without a Code, every attempt",
            call: Get,
            faults: vec![
                ("DescribeInstances", xml(500, ERROR_WITHOUT_CODE)),
                ("DescribeInstances", xml(500, ERROR_WITHOUT_CODE)),
                ("DescribeInstances", xml(500, ERROR_WITHOUT_CODE)),
            ],
            expected: "error: cloud API error: AWS answered HTTP 500 without an error code: Something broke.",
            after: Running,
        },
        AwsCase {
            name: "DescribeInstances: an instance without availabilityZone",
            call: List,
            faults: vec![("DescribeInstances", hide("availabilityZone"))],
            expected: r#"ok: aws:////i-ID Running g5.xlarge on-demand "" of "bad-12""#,
            after: Running,
        },
        AwsCase {
            name: "DescribeInstances (the sweep's list): instances without tagSet",
            call: Sweep,
            faults: vec![("DescribeInstances", hide("tagSet"))],
            expected: "ok: swept",
            after: Running,
        },
        AwsCase {
            name: "TerminateInstances 200 with an empty body, nothing terminated",
            call: Delete,
            faults: vec![("TerminateInstances", xml(200, ""))],
            expected: "error: cloud API error: AWS answered HTTP 200 with a response that could not be read: error parsing XML: no root element",
            after: Running,
        },
        AwsCase {
            name: "DescribeInstanceTypes: defaultVCpus is not a number",
            call: InstanceTypes,
            faults: vec![("DescribeInstanceTypes", garble("defaultVCpus", "four"))],
            expected: "error: cloud API error: AWS answered HTTP 200 with a response that could not be read: error parsing XML: expected (integer: `com.amazonaws.ec2#VCpuCount`)",
            after: NothingLaunched,
        },
    ]
}

/// Runs one AWS case in its own (reset) moto; `Err` says what differed.
async fn run_aws_case(n: usize, case: &AwsCase) -> Result<(), String> {
    let w: World = world().await;
    let claim = format!("bad-{n}");
    let r = request(
        &w,
        &claim,
        &[offering("g5.xlarge", "us-east-1a", CapacityType::OnDemand)],
    );
    let launched = match case.call {
        AwsCall::Launch | AwsCall::InstanceTypes => None,
        _ => Some(
            w.cloud
                .create(&r)
                .await
                .expect("the launch before the case"),
        ),
    };
    let id = launched.map(|i| i.provider_id).unwrap_or_default();
    for (action, fault) in &case.faults {
        w.proxy.inject(action, fault.clone());
    }
    let got = match case.call {
        AwsCall::Launch => outcome(w.cloud.create(&r).await, |i| described(&i)),
        AwsCall::Get => outcome(w.cloud.get(&id).await, |i| described(&i)),
        AwsCall::Delete => outcome(w.cloud.delete(&id).await, |()| "deleted".into()),
        AwsCall::List => outcome(w.cloud.list().await, |l| {
            l.iter().map(described).collect::<Vec<_>>().join("; ")
        }),
        AwsCall::InstanceTypes => outcome(w.cloud.instance_types().await, |t| {
            format!("{} instance types", t.len())
        }),
        AwsCall::Sweep => {
            let later = chrono::Utc::now() + chrono::TimeDelta::minutes(10);
            let known = BTreeSet::from([claim.clone()]);
            quartermaster_controller::sweep::delete_leaks(
                w.cloud.clone(),
                known,
                Default::default(),
                later,
            )
            .await;
            "ok: swept".to_owned()
        }
    };
    let left = w.proxy.faults_used() < case.faults.len();
    w.proxy.clear_faults();
    let got = normalize(&got);
    let mut wrong = Vec::new();
    if got != case.expected {
        wrong.push(format!("expected: {}\n     got: {got}", case.expected));
    }
    if left {
        wrong.push("a queued fault was never used".to_owned());
    }
    let fleets = w.proxy.calls("CreateFleet");
    match case.after {
        AwsAfter::NothingLaunched => {
            let found = instances_of(&w, &claim).await;
            if !found.is_empty() {
                wrong.push(format!("{} instance(s) launched", found.len()));
            }
            if matches!(case.call, AwsCall::Launch) {
                let again = w.cloud.create(&r).await;
                let found = instances_of(&w, &claim).await;
                if again.is_err() || found.len() != 1 {
                    wrong.push(format!(
                        "launching again: {again:?}, {} instance(s)",
                        found.len()
                    ));
                }
            }
        }
        AwsAfter::FoundAgain => {
            let found = instances_of(&w, &claim).await;
            let again = w.cloud.create(&r).await;
            let after = instances_of(&w, &claim).await;
            let same = match (&again, found.first().and_then(|i| i.instance_id())) {
                (Ok(i), Some(id)) => i.provider_id.ends_with(id),
                _ => false,
            };
            if found.len() != 1 || after.len() != 1 || !same {
                wrong.push(format!(
                    "launching again: {again:?}; {} instance(s) before, {} after",
                    found.len(),
                    after.len()
                ));
            }
            if w.proxy.calls("CreateFleet") != fleets {
                wrong.push("launching again called CreateFleet".to_owned());
            }
        }
        AwsAfter::Running => {
            let found = instances_of(&w, &claim).await;
            if found.len() != 1 {
                wrong.push(format!(
                    "{} live instance(s) for the claim, not 1",
                    found.len()
                ));
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}

#[tokio::test]
async fn aws_malformed_responses_give_exact_errors_and_leak_nothing() {
    let mut failures = Vec::new();
    for (n, case) in aws_cases().iter().enumerate() {
        if let Err(why) = run_aws_case(n, case).await {
            failures.push(format!("[{n}] {}\n{why}", case.name));
        }
    }
    report("AWS", failures);
}

// ---------------------------------------------------------------------------------------------
// GCP

mod gcp_cases {
    use super::*;
    use crate::gcp::{PROJECT, ZONE_A, cloud, offering, request};
    use crate::gcp_server::{Call, GcpServer};

    const CLAIM: &str = "gpu-bad";
    const NAME: &str = "qm-gpu-bad";

    #[derive(Debug, Clone, Copy)]
    enum Do {
        /// Launches the claim.
        Launch,
        /// Launches the claim (no fault), then launches it again with the canned answers.
        Relaunch,
        /// Gets the launched instance.
        Get,
        /// Lists the instances (the claim's launched first).
        List,
    }

    #[derive(Debug, Clone, Copy)]
    enum After {
        /// No instance; launching again launches one.
        NothingLaunched,
        /// The insert took effect: launching again finds that instance, inserting nothing.
        FoundAgain,
        /// The claim's instance is still there.
        Remains,
    }

    struct Case {
        name: &'static str,
        call: Do,
        canned: Vec<(Call, u16, String)>,
        expected: &'static str,
        after: After,
    }

    fn instance_json(zone: Option<&str>, status: &str) -> String {
        let mut i = serde_json::json!({
            "kind": "compute#instance",
            "name": NAME,
            "machineType": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE_A}/machineTypes/a2-highgpu-1g"),
            "status": status,
            "creationTimestamp": "2026-12-01T00:00:00.000-08:00",
            "labels": {"quartermaster-cluster": "test-cluster", "quartermaster-nodeclaim": CLAIM},
        });
        if let Some(z) = zone {
            i["zone"] = serde_json::json!(format!(
                "https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{z}"
            ));
        }
        i.to_string()
    }

    fn cases() -> Vec<Case> {
        let done_with_error = |code: &str, message: &str| {
            serde_json::json!({
                "kind": "compute#operation",
                "name": "operation-canned",
                "operationType": "insert",
                "status": "DONE",
                "zone": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE_A}"),
                "error": {"errors": [{"code": code, "message": message}]},
                "httpErrorStatusCode": 500,
            })
            .to_string()
        };
        vec![
            Case {
                name: "insert answered by an operation DONE carrying an error",
                call: Do::Launch,
                canned: vec![(
                    Call::Insert,
                    200,
                    done_with_error("INTERNAL_ERROR", "Internal error. Please try again."),
                )],
                expected: "error: cloud API error: Internal error. Please try again.",
                after: After::NothingLaunched,
            },
            Case {
                name: "the insert took effect, its operation polled DONE carrying an error",
                call: Do::Launch,
                canned: vec![(
                    Call::Operation,
                    200,
                    done_with_error("UNEXPECTED_FAILURE", "The operation failed oddly."),
                )],
                expected: "error: cloud API error: The operation failed oddly.",
                after: After::FoundAgain,
            },
            Case {
                name: "an instance without a zone",
                call: Do::Get,
                canned: vec![(Call::Get, 200, instance_json(None, "RUNNING"))],
                expected: r#"ok: gce://test-project/us-central1-a/qm-gpu-bad Running a2-highgpu-1g on-demand "us-central1-a" of "gpu-bad""#,
                after: After::Remains,
            },
            Case {
                name: "an instance listed without a zone",
                call: Do::List,
                canned: vec![(
                    Call::List,
                    200,
                    format!(
                        r#"{{"kind":"compute#instanceAggregatedList","items":{{"zones/{ZONE_A}":{{"instances":[{}]}}}}}}"#,
                        instance_json(None, "RUNNING")
                    ),
                )],
                expected: r#"ok: gce://test-project/us-central1-a/qm-gpu-bad Running a2-highgpu-1g on-demand "us-central1-a" of "gpu-bad""#,
                after: After::Remains,
            },
            Case {
                name: "an instance with an unknown status",
                call: Do::Get,
                canned: vec![(Call::Get, 200, instance_json(Some(ZONE_A), "HIBERNATING"))],
                expected: r#"ok: gce://test-project/us-central1-a/qm-gpu-bad ShuttingDown a2-highgpu-1g on-demand "us-central1-a" of "gpu-bad""#,
                after: After::Remains,
            },
            Case {
                name: "a 200 whose body is not JSON",
                call: Do::Get,
                canned: vec![(Call::Get, 200, HTML.to_owned())],
                expected: "error: cloud API error: cannot deserialize the response expected value at line 1 column 1",
                after: After::Remains,
            },
            Case {
                name: "the look-up before a retried launch: a 200 with an empty body",
                call: Do::Relaunch,
                canned: vec![(Call::List, 200, String::new())],
                expected: "error: cloud API error: cannot deserialize the response EOF while parsing a value at line 1 column 0",
                after: After::Remains,
            },
        ]
    }

    async fn run(case: &Case) -> Result<(), String> {
        let server = GcpServer::start().await;
        let cloud = cloud(server.endpoint()).await;
        let r = request(
            CLAIM,
            offering("a2-highgpu-1g", ZONE_A, CapacityType::OnDemand),
            vec![],
        );
        let launched = match case.call {
            Do::Launch => None,
            _ => Some(cloud.create(&r).await.expect("the launch before the case")),
        };
        let id = launched.map(|i| i.provider_id).unwrap_or_default();
        for (call, status, body) in &case.canned {
            server.reply_next(*call, *status, body.clone());
        }
        let got = match case.call {
            Do::Launch | Do::Relaunch => outcome(cloud.create(&r).await, |i| described(&i)),
            Do::Get => outcome(cloud.get(&id).await, |i| described(&i)),
            Do::List => outcome(cloud.list().await, |l| {
                l.iter().map(described).collect::<Vec<_>>().join("; ")
            }),
        };
        let mut wrong = Vec::new();
        if got != case.expected {
            wrong.push(format!("expected: {}\n     got: {got}", case.expected));
        }
        let inserts = server.calls("POST");
        match case.after {
            After::NothingLaunched => {
                if !server.instances().is_empty() {
                    wrong.push(format!("launched {:?}", server.instances()));
                }
                let again = cloud.create(&r).await;
                if again.is_err() || server.instances().len() != 1 {
                    wrong.push(format!(
                        "launching again: {again:?}, {:?}",
                        server.instances()
                    ));
                }
            }
            After::FoundAgain => {
                let again = cloud.create(&r).await;
                if again.is_err() || server.instances().len() != 1 {
                    wrong.push(format!(
                        "launching again: {again:?}, {:?}",
                        server.instances()
                    ));
                }
                if server.calls("POST") != inserts {
                    wrong.push("launching again inserted".to_owned());
                }
            }
            After::Remains => {
                if server.instances() != [format!("{ZONE_A}/{NAME}")] {
                    wrong.push(format!("instances {:?}", server.instances()));
                }
            }
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("\n"))
        }
    }

    #[tokio::test]
    async fn gcp_malformed_responses_give_exact_errors_and_leak_nothing() {
        let mut failures = Vec::new();
        for (n, case) in cases().iter().enumerate() {
            if let Err(why) = run(case).await {
                failures.push(format!("[{n}] {}\n{why}", case.name));
            }
        }
        report("GCP", failures);
    }
}

// ---------------------------------------------------------------------------------------------
// Azure

mod azure_cases {
    use super::*;
    use crate::azure::{A100, FixedBootstrap, offering, request, settings};
    use crate::azure_server::{AzureServer, Call};
    use quartermaster_azure::AzureCloud;
    use quartermaster_cloud::SystemClock;
    use quartermaster_pricing::Catalog;

    const CLAIM: &str = "gpu-bad";
    const VM: &str = "qm-gpu-bad-0";

    #[derive(Debug, Clone, Copy)]
    enum Do {
        /// Launches the claim.
        Launch,
        /// Gets the launched VM.
        Get,
        /// Lists the VMs (the claim's launched first).
        List,
    }

    #[derive(Debug, Clone, Copy)]
    enum After {
        /// No VM; launching again launches one.
        NothingLaunched,
        /// The PUT took effect: launching again finds that VM, creating none.
        FoundAgain,
        /// The claim's VM is still there.
        Remains,
    }

    struct Case {
        name: &'static str,
        call: Do,
        canned: Vec<(Call, u16, String)>,
        expected: &'static str,
        after: After,
    }

    fn vm_json(properties: serde_json::Value) -> String {
        serde_json::json!({
            "id": format!("/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{VM}"),
            "name": VM,
            "type": "Microsoft.Compute/virtualMachines",
            "location": "eastus",
            "zones": ["1"],
            "tags": {"quartermaster.dev_cluster": "test-cluster", "quartermaster.dev_nodeclaim": CLAIM},
            "properties": properties,
        })
        .to_string()
    }

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "a VM without provisioningState",
                call: Do::Get,
                canned: vec![(
                    Call::Get,
                    200,
                    vm_json(
                        serde_json::json!({"hardwareProfile": {"vmSize": A100}, "priority": "Regular"}),
                    ),
                )],
                expected: r#"ok: azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/qm-gpu-bad-0 Pending Standard_NC24ads_A100_v4 on-demand "eastus-1" of "gpu-bad""#,
                after: After::Remains,
            },
            Case {
                name: "a VM with an unknown powerState",
                call: Do::Get,
                canned: vec![(
                    Call::Get,
                    200,
                    vm_json(serde_json::json!({
                        "hardwareProfile": {"vmSize": A100},
                        "priority": "Regular",
                        "provisioningState": "Succeeded",
                        "instanceView": {"statuses": [
                            {"code": "ProvisioningState/succeeded"},
                            {"code": "PowerState/hibernating", "displayStatus": "VM hibernating"},
                        ]},
                    })),
                )],
                expected: r#"ok: azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/qm-gpu-bad-0 Running Standard_NC24ads_A100_v4 on-demand "eastus-1" of "gpu-bad""#,
                after: After::Remains,
            },
            Case {
                name: "a 200 whose body is not JSON",
                call: Do::Get,
                canned: vec![(Call::Get, 200, HTML.to_owned())],
                expected: "error: cloud API error: the VM qm-gpu-bad-0 was answered with a body that is not JSON: expected value at line 1 column 1",
                after: After::Remains,
            },
            Case {
                name: "the VM list: a 200 with an empty body",
                call: Do::List,
                canned: vec![(Call::List, 200, String::new())],
                expected: "error: cloud API error: EOF while parsing a value at line 1 column 0",
                after: After::Remains,
            },
            Case {
                name: "the PUT took effect, its operation Failed without an error",
                call: Do::Launch,
                canned: vec![(Call::Operation, 200, r#"{"status":"Failed"}"#.to_owned())],
                expected: "error: cloud API error: Failed: the operation Failed",
                after: After::FoundAgain,
            },
            Case {
                name: "a PUT answered 201 without provisioningState or an operation to follow",
                call: Do::Launch,
                canned: vec![(
                    Call::Put,
                    201,
                    vm_json(serde_json::json!({"hardwareProfile": {"vmSize": A100}})),
                )],
                expected: "error: cloud API error: VM qm-gpu-bad-0 was still being created after 1s; it is found by name on the next attempt",
                after: After::NothingLaunched,
            },
        ]
    }

    async fn run(case: &Case) -> Result<(), String> {
        let server = AzureServer::start("rg").await;
        let mut s = settings(server.endpoint());
        // A PUT with nothing to follow is given up on after a second.
        s.call_limits.operation_timeout = std::time::Duration::from_secs(1);
        let cloud = AzureCloud::connect(s, Catalog::embedded(), Arc::new(SystemClock))
            .expect("the Azure client builds")
            .with_bootstrap(Some(Arc::new(FixedBootstrap)));
        let r = request(CLAIM, &[offering(A100, "eastus-1", CapacityType::OnDemand)]);
        let launched = match case.call {
            Do::Launch => None,
            _ => Some(cloud.create(&r).await.expect("the launch before the case")),
        };
        let id = launched.map(|i| i.provider_id).unwrap_or_default();
        for (call, status, body) in &case.canned {
            server.reply_next(*call, *status, body.clone());
        }
        let got = match case.call {
            Do::Launch => outcome(cloud.create(&r).await, |i| described(&i)),
            Do::Get => outcome(cloud.get(&id).await, |i| described(&i)),
            Do::List => outcome(cloud.list().await, |l| {
                l.iter().map(described).collect::<Vec<_>>().join("; ")
            }),
        };
        let mut wrong = Vec::new();
        if got != case.expected {
            wrong.push(format!("expected: {}\n     got: {got}", case.expected));
        }
        let creates = server.creates();
        match case.after {
            After::NothingLaunched => {
                if !server.vm_names().is_empty() {
                    wrong.push(format!("launched {:?}", server.vm_names()));
                }
                let again = cloud.create(&r).await;
                if again.is_err() || server.vm_names().len() != 1 {
                    wrong.push(format!(
                        "launching again: {again:?}, {:?}",
                        server.vm_names()
                    ));
                }
            }
            After::FoundAgain => {
                let again = cloud.create(&r).await;
                if again.is_err() || server.vm_names() != [VM] {
                    wrong.push(format!(
                        "launching again: {again:?}, {:?}",
                        server.vm_names()
                    ));
                }
                if server.creates() != creates {
                    wrong.push("launching again created a VM".to_owned());
                }
            }
            After::Remains => {
                if server.vm_names() != [VM] {
                    wrong.push(format!("VMs {:?}", server.vm_names()));
                }
            }
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("\n"))
        }
    }

    #[tokio::test]
    async fn azure_malformed_responses_give_exact_errors_and_leak_nothing() {
        let mut failures = Vec::new();
        for (n, case) in cases().iter().enumerate() {
            if let Err(why) = run(case).await {
                failures.push(format!("[{n}] {}\n{why}", case.name));
            }
        }
        report("Azure", failures);
    }
}

#[test]
fn instance_ids_are_normalized() {
    assert_eq!(
        normalize("aws:///us-east-1a/i-0abc12345def67890 and i-x"),
        "aws:///us-east-1a/i-ID and i-x"
    );
}
