//! Live AWS prices and `doctor --cloud aws` through the real SDKs: the Pricing API's
//! `GetProducts` and EC2's `DescribeSpotPriceHistory` served by a tiny price server of ours
//! (real response shapes, real-looking prices), and by moto (which has no Pricing API and
//! answers every spot price as 0.00001) behind the fault proxy; the doctor against moto and
//! against a dead endpoint.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use quartermaster_aws::{AwsSettings, CallLimits, CredentialSource};
use quartermaster_cloud::CheckOutcome;
use quartermaster_policies::AWSNodeClassSpec;
use quartermaster_pricing::live::RejectReason;
use quartermaster_pricing::{CapacityType, Catalog, Cloud};
use tokio::net::TcpListener;

use crate::fault_proxy::{Fault, FaultProxy};
use crate::moto::Moto;

const REGION: &str = "us-east-1";

fn settings(endpoint: String) -> AwsSettings {
    AwsSettings {
        region: Some(REGION.into()),
        endpoint_url: Some(endpoint),
        credentials: CredentialSource::Static {
            access_key_id: "testing".into(),
            secret_access_key: "testing".into(),
        },
        call_limits: CallLimits {
            connect_timeout: Duration::from_secs(2),
            attempt_timeout: Duration::from_secs(10),
            operation_timeout: Duration::from_secs(15),
            max_attempts: 1,
            ..CallLimits::default()
        },
        ..AwsSettings::default()
    }
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 3, 0, 0).unwrap()
}

/// One `priceList` document as the Pricing API returns it (a JSON string).
fn price_document(instance_type: &str, usd: &str) -> String {
    serde_json::json!({
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "instanceType": instance_type, "regionCode": REGION, "location": "US East (N. Virginia)",
                "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                "capacitystatus": "Used", "licenseModel": "No License required"
            },
            "sku": "TESTSKU"
        },
        "serviceCode": "AmazonEC2",
        "terms": { "OnDemand": { "TESTSKU.JRTCKXETXF": {
            "priceDimensions": { "TESTSKU.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "pricePerUnit": { "USD": usd },
                "description": format!("${usd} per On Demand Linux {instance_type} Instance Hour"),
                "beginRange": "0", "endRange": "Inf"
            } },
            "sku": "TESTSKU", "offerTermCode": "JRTCKXETXF", "effectiveDate": "2026-11-01T00:00:00Z"
        } } },
        "version": "20261120174155", "publicationDate": "2026-11-20T17:41:55Z"
    })
    .to_string()
}

/// The body of a `GetProducts` answer (`FormatVersion aws_v1`, one page).
fn get_products(documents: &[String]) -> String {
    serde_json::json!({ "FormatVersion": "aws_v1", "PriceList": documents }).to_string()
}

/// A tiny server answering `GetProducts` (JSON 1.1) with `products` and
/// `DescribeSpotPriceHistory` (EC2 query/XML) with `spot` (type, zone, price).
async fn price_server(
    products: String,
    spot: Vec<(&'static str, &'static str, &'static str)>,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let items: String = spot
        .iter()
        .map(|(ty, zone, price)| {
            format!("<item><instanceType>{ty}</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>{price}</spotPrice><timestamp>2026-11-30T10:00:00.000Z</timestamp><availabilityZone>{zone}</availabilityZone></item>")
        })
        .collect();
    let spot_xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeSpotPriceHistoryResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>price-server</requestId><spotPriceHistorySet>{items}</spotPriceHistorySet><nextToken></nextToken></DescribeSpotPriceHistoryResponse>"
    );
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (products, spot_xml) = (products.clone(), spot_xml.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let (products, spot_xml) = (products.clone(), spot_xml.clone());
                    async move {
                        let json = req.headers().contains_key("x-amz-target");
                        let _ = req.into_body().collect().await;
                        let (body, content_type) = if json {
                            (products, "application/x-amz-json-1.1")
                        } else {
                            (spot_xml, "text/xml")
                        };
                        let mut response = Response::new(Full::new(Bytes::from(body)));
                        response
                            .headers_mut()
                            .insert("content-type", http::HeaderValue::from_static(content_type));
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, task)
}

fn offering_price(c: &Catalog, name: &str, zone: &str, ct: CapacityType) -> (f64, String) {
    let o = c
        .get(Cloud::Aws, name)
        .unwrap_or_else(|| panic!("{name} missing"))
        .offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == ct)
        .unwrap_or_else(|| panic!("{name} {zone} {ct} missing"));
    (o.price_per_hour, o.price_source.clone())
}

#[tokio::test]
async fn live_prices_replace_the_embedded_ones_when_the_apis_answer() {
    let products = get_products(&[
        price_document("p5.48xlarge", "54.0000000000"),
        price_document("g5.xlarge", "1.0100000000"),
        // A type the catalog does not have: counted, not invented.
        price_document("x9z.metal", "3.0000000000"),
    ]);
    let (addr, server) = price_server(
        products,
        vec![
            ("p5.48xlarge", "us-east-1b", "18.500000"),
            ("p5.48xlarge", "us-east-1f", "17.000000"),
        ],
    )
    .await;
    let catalog = Catalog::embedded_all_regions();
    let fetch = quartermaster_aws::live_prices(
        &settings(format!("http://{addr}")),
        REGION,
        &catalog,
        now(),
    )
    .await;
    server.abort();
    assert!(fetch.failures.is_empty(), "{:?}", fetch.failures);
    let merge = catalog.with_live_prices(&fetch.quotes, now());
    assert!(merge.rejected.is_empty(), "{:?}", merge.rejected);
    assert_eq!(merge.accepted, 4, "two on-demand, two spot quotes");
    for zone in ["us-east-1a", "us-east-1f"] {
        assert_eq!(
            offering_price(&merge.catalog, "p5.48xlarge", zone, CapacityType::OnDemand),
            (54.0, "aws-pricing-api".to_owned())
        );
    }
    assert_eq!(
        offering_price(
            &merge.catalog,
            "p5.48xlarge",
            "us-east-1b",
            CapacityType::Spot
        ),
        (18.5, "aws-spot-price-history".to_owned())
    );
    // Zones the spot history did not mention keep the embedded figure and its source.
    assert_eq!(
        offering_price(
            &merge.catalog,
            "p5.48xlarge",
            "us-east-1c",
            CapacityType::Spot
        ),
        (21.1543, "SKY-AWS:use1-az3".to_owned())
    );
    // Other regions are untouched.
    assert_eq!(
        offering_price(
            &merge.catalog,
            "p5.48xlarge",
            "us-east-2a",
            CapacityType::OnDemand
        )
        .1,
        "SKY-AWS"
    );
}

#[tokio::test]
async fn embedded_prices_stay_when_the_apis_fail_or_answer_nonsense() {
    let moto = Moto::lock().await;
    let proxy = FaultProxy::start(moto.addr).await;
    let catalog = Catalog::embedded_all_regions();

    // moto has no Pricing API: GetProducts fails; its spot history says 0.00001 everywhere.
    let fetch =
        quartermaster_aws::live_prices(&settings(proxy.url()), REGION, &catalog, now()).await;
    assert!(
        fetch.failures.iter().any(|f| f.starts_with("GetProducts")),
        "{:?}",
        fetch.failures
    );
    let merge = catalog.with_live_prices(&fetch.quotes, now());
    assert!(
        !merge.rejected.is_empty(),
        "moto's spot prices are nonsense"
    );
    assert!(
        merge
            .rejected
            .iter()
            .all(|r| matches!(r.reason, RejectReason::SpotFarBelowOnDemand { .. })),
        "{:?}",
        merge.rejected.first()
    );
    assert_eq!(
        offering_price(
            &merge.catalog,
            "p5.48xlarge",
            "us-east-1b",
            CapacityType::Spot
        ),
        (19.2531, "SKY-AWS:use1-az2".to_owned())
    );
    assert_eq!(
        offering_price(
            &merge.catalog,
            "p5.48xlarge",
            "us-east-1a",
            CapacityType::OnDemand
        ),
        // p5/g5 offerings are generated from SKY-AWS (pricing/data/offerings/aws.csv).
        (55.04, "SKY-AWS".to_owned())
    );

    // A Pricing API that answers zero and NaN.
    proxy.inject(
        "GetProducts",
        Fault::JsonReply(get_products(&[
            price_document("p5.48xlarge", "0.0000000000"),
            price_document("g5.xlarge", "NaN"),
        ])),
    );
    let fetch =
        quartermaster_aws::live_prices(&settings(proxy.url()), REGION, &catalog, now()).await;
    assert!(fetch.failures.is_empty(), "{:?}", fetch.failures);
    let merge = catalog.with_live_prices(&fetch.quotes, now());
    let reason = |name: &str| {
        merge
            .rejected
            .iter()
            .find(|r| {
                r.quote.instance_type == name && r.quote.capacity_type == CapacityType::OnDemand
            })
            .map(|r| r.reason.clone())
    };
    assert_eq!(reason("p5.48xlarge"), Some(RejectReason::NotPositive));
    assert_eq!(reason("g5.xlarge"), Some(RejectReason::NotFinite));
    assert_eq!(
        offering_price(
            &merge.catalog,
            "g5.xlarge",
            "us-east-1a",
            CapacityType::OnDemand
        ),
        (1.006, "SKY-AWS".to_owned())
    );
}

#[tokio::test]
async fn a_dead_price_endpoint_leaves_every_price_as_it_was() {
    let catalog = Catalog::embedded_all_regions();
    let fetch = quartermaster_aws::live_prices(
        &settings("http://127.0.0.1:1".into()),
        REGION,
        &catalog,
        now(),
    )
    .await;
    assert!(fetch.all_failed(), "{fetch:?}");
    assert_eq!(fetch.failures.len(), 2);
    let merge = catalog.with_live_prices(&fetch.quotes, now());
    assert_eq!(merge.catalog, catalog);
}

fn node_class(spec: serde_json::Value) -> AWSNodeClassSpec {
    serde_json::from_value(spec).expect("AWSNodeClass spec")
}

/// A tagged subnet and security group in moto, and one of its x86_64 AMIs.
async fn moto_network(endpoint: &str) -> String {
    use aws_sdk_ec2::types as t;
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .load()
        .await;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let tagged = |resource| {
        t::TagSpecification::builder()
            .resource_type(resource)
            .tags(t::Tag::builder().key("discovery").value("doctor").build())
            .build()
    };
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("CreateVpc");
    let vpc = vpc
        .vpc()
        .and_then(|v| v.vpc_id())
        .expect("vpc id")
        .to_owned();
    ec2.create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.0.1.0/24")
        .availability_zone("us-east-1a")
        .tag_specifications(tagged(t::ResourceType::Subnet))
        .send()
        .await
        .expect("CreateSubnet");
    ec2.create_security_group()
        .group_name("nodes")
        .description("nodes")
        .vpc_id(&vpc)
        .tag_specifications(tagged(t::ResourceType::SecurityGroup))
        .send()
        .await
        .expect("CreateSecurityGroup");
    let images = ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .expect("DescribeImages");
    images
        .images()
        .iter()
        .find(|i| i.architecture() == Some(&t::ArchitectureValues::X8664))
        .and_then(|i| i.image_id())
        .expect("moto has an x86_64 AMI")
        .to_owned()
}

#[tokio::test]
async fn doctor_passes_against_moto() {
    let moto = Moto::lock().await;
    let endpoint = format!("http://{}", moto.addr);
    let ami = moto_network(&endpoint).await;
    let spec = node_class(serde_json::json!({
        "subnetSelectorTerms": [{"tags": {"discovery": "doctor"}}],
        "securityGroupSelectorTerms": [{"tags": {"discovery": "doctor"}}],
        "amiSelectorTerms": [{"id": ami}],
    }));
    let checks = quartermaster_aws::doctor::checks(
        &settings(endpoint),
        Some(&spec),
        &Catalog::embedded_all_regions(),
        now(),
    )
    .await;
    let failed: Vec<_> = checks
        .iter()
        .filter(|c| c.outcome == CheckOutcome::Fail)
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    let outcome = |name: &str| {
        checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name} check in {checks:#?}"))
            .outcome
    };
    assert_eq!(outcome("identity"), CheckOutcome::Ok);
    assert_eq!(outcome("permission ec2:RunInstances"), CheckOutcome::Ok);
    assert_eq!(
        outcome("permission ec2:TerminateInstances"),
        CheckOutcome::Ok
    );
    assert_eq!(outcome("subnets"), CheckOutcome::Ok);
    assert_eq!(outcome("security groups"), CheckOutcome::Ok);
    assert_eq!(outcome("amis"), CheckOutcome::Ok);
    // moto has no Pricing API: a warning (the embedded prices are used), not a failure.
    assert_eq!(outcome("prices GetProducts"), CheckOutcome::Warn);
}

#[tokio::test]
async fn doctor_fails_clearly_against_a_dead_endpoint() {
    let checks = quartermaster_aws::doctor::checks(
        &settings("http://127.0.0.1:1".into()),
        None,
        &Catalog::embedded_all_regions(),
        now(),
    )
    .await;
    let last = checks.last().expect("checks");
    assert_eq!(last.name, "identity");
    assert_eq!(last.outcome, CheckOutcome::Fail);
    assert!(last.detail.contains("GetCallerIdentity"), "{last:?}");
    assert!(
        last.fix
            .as_deref()
            .is_some_and(|f| f.contains("AWS_ENDPOINT_URL"))
    );
}
