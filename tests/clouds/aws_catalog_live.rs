//! `catalog --live --cloud aws` lists the account's capacity reservations through the same
//! provider the controller uses (`CloudProvider::reservations`: DescribeCapacityReservations),
//! against moto behind the fault proxy (moto holds no reservations: the proxy answers in EC2's
//! shape). `--aws-endpoint` points the command at the proxy, with test credentials.

use crate::fault_proxy::{Fault, FaultProxy};
use crate::moto::Moto;

/// `quartermaster catalog --live --cloud aws --region us-east-1 --aws-endpoint PROXY ARGS...`
/// in-process (on a thread of its own: the command runs its own runtime).
async fn catalog_live(proxy: &FaultProxy, args: &[&str]) -> quartermaster_tests::Output {
    proxy.inject(
        "DescribeCapacityReservations",
        Fault::XmlReply {
            status: 200,
            body: crate::aws::capacity_reservations_xml(
                "scheduled",
                "2099-01-11T11:30:00.000Z",
                "2099-01-14T11:30:00.000Z",
            ),
        },
    );
    let mut argv: Vec<String> = [
        "catalog",
        "--live",
        "--cloud",
        "aws",
        "--region",
        "us-east-1",
        "--aws-endpoint",
        &proxy.url(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    argv.extend(args.iter().map(|s| (*s).to_owned()));
    tokio::task::spawn_blocking(move || {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        quartermaster_tests::quartermaster(&argv)
    })
    .await
    .expect("catalog ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_live_lists_the_reservations_the_account_holds() {
    let moto = Moto::lock().await;
    let proxy = FaultProxy::start(moto.addr).await;

    let out = catalog_live(&proxy, &["-o", "json"]).await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert!(
        out.stderr
            .contains("reservations for aws us-east-1: 2 reported"),
        "{}",
        out.stderr
    );
    let types = out.json();
    let row = |name: &str| {
        types
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in the catalog"))
            .clone()
    };
    let p5 = row("p5.48xlarge");
    let block = &p5["reservations"][0];
    for key in [
        "id",
        "cloud",
        "type",
        "instance_type",
        "zone",
        "count",
        "free",
        "end",
    ] {
        assert!(block.get(key).is_some(), "{key}: {block:#}");
    }
    assert_eq!(block["id"], "cr-0h100block");
    assert_eq!(block["type"], "capacity-block");
    assert_eq!(block["zone"], "us-east-1a");
    assert_eq!(
        (block["count"].clone(), block["free"].clone()),
        (4.into(), 3.into())
    );
    assert_eq!(block["end"], "2099-01-14T11:30:00Z");
    assert_eq!(block["status"], "not-open");
    assert_eq!(block["tags"]["team"], "research");
    let g5 = row("g5.xlarge");
    assert_eq!(g5["reservations"][0]["id"], "cr-0odcr");
    assert_eq!(g5["reservations"][0]["end"], serde_json::Value::Null);
    // A type without one says so with an empty list.
    assert_eq!(row("g5.2xlarge")["reservations"], serde_json::json!([]));
    assert_eq!(proxy.calls("DescribeCapacityReservations"), 1);

    let out = catalog_live(&proxy, &["--gpu", "h100"]).await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let text = &out.stdout;
    assert!(text.contains("\nReservations:\n"), "{text}");
    let line = |id: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("no {id} line: {text}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        line("cr-0h100block")[..6],
        [
            "cr-0h100block",
            "capacity-block",
            "us-east-1a",
            "p5.48xlarge",
            "4",
            "3"
        ]
    );
    assert_eq!(
        line("cr-0odcr")[..6],
        ["cr-0odcr", "default", "us-east-1b", "g5.xlarge", "2", "2"]
    );

    // A cloud that does not answer: no reservations, the reason on standard error.
    proxy.inject(
        "DescribeCapacityReservations",
        Fault::XmlReply {
            status: 403,
            body: "<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>no</Message></Error></Errors></Response>".into(),
        },
    );
    let out = tokio::task::spawn_blocking({
        let url = proxy.url();
        move || {
            quartermaster_tests::quartermaster(&[
                "catalog",
                "--live",
                "--cloud",
                "aws",
                "--region",
                "us-east-1",
                "--aws-endpoint",
                &url,
                "--gpu",
                "h100",
            ])
        }
    })
    .await
    .expect("catalog ran");
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert!(
        out.stderr
            .contains("warning: reservations for aws us-east-1 unavailable"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("\nReservations:\nnone\n"),
        "{}",
        out.stdout
    );
}
