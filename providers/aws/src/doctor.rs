//! `quartermaster doctor --cloud aws`: what a first install gets wrong, one [`Check`] each —
//! the region, credentials and whose they are (STS `GetCallerIdentity`), the EC2 permissions
//! the controller needs (`DryRun` calls), the AWSNodeClass's subnets, security groups and AMIs,
//! GPU quotas, and the price APIs.
//!
//! A dead endpoint fails at the identity check and stops there, so it costs one connect
//! timeout, not one per check.

use std::collections::BTreeSet;

use aws_config::SdkConfig;
use aws_sdk_ec2::config::ProvideCredentials;
use aws_sdk_ec2::types as t;
use chrono::{DateTime, Utc};
use quartermaster_cloud::{Check, CheckOutcome};
use quartermaster_policies::nodeclass::aws::AWSNodeClassSpec;
use quartermaster_pricing::Catalog;

use crate::config::{AwsSettings, config_region, sdk_config};
use crate::port::{ApiError, ApiErrorKind};
use crate::prices::{self, SOURCE_PRICING_API, SOURCE_SPOT_HISTORY};
use crate::rate::RateLimits;
use crate::resolve::{self, ResolveError};
use crate::sdk::{SdkEc2, api_error};
use crate::sdk_pricing::{SdkPrices, catalog_types};
use crate::sdk_ssm::SsmParameters;

const FIX_CREDENTIALS: &str = "give the controller credentials through the SDK's default chain: IRSA or EKS Pod Identity in the cluster, AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY elsewhere";
const FIX_IAM: &str = "add the action to the controller's IAM role (README: \"AWS IAM policy\")";

/// Every check, in the order printed. `node_class` adds the subnet, security group and AMI
/// checks; `catalog` gives the instance types whose prices are asked for.
pub async fn checks(
    settings: &AwsSettings,
    node_class: Option<&AWSNodeClassSpec>,
    catalog: &Catalog,
    now: DateTime<Utc>,
) -> Vec<Check> {
    let mut out = Vec::new();
    let config = sdk_config(settings).await;
    let Some(region) = config_region(&config) else {
        out.push(Check::fail(
            "region",
            "no region: not in --region, AWS_REGION or the profile",
            "pass --region (CLUSTER_REGION) or set AWS_REGION",
        ));
        return out;
    };
    out.push(Check::ok("region", region.clone()));
    if !credentials(&config, &mut out).await {
        return out;
    }
    permissions(&config, node_class, &mut out).await;
    let limits = settings.rate_limits.limits();
    match node_class {
        Some(spec) => node_class_checks(&config, &limits, spec, &mut out).await,
        None => out.push(Check::warn(
            "nodeclass",
            "not checked",
            "pass -f AWSNODECLASS.yaml to check its subnets, security groups and AMIs",
        )),
    }
    out.push(Check::warn(
        "gpu quotas",
        "not checked (EC2 limits GPU instances by vCPUs per family, in Service Quotas)",
        "aws service-quotas get-service-quota --service-code ec2 --quota-code L-417A185B (Running On-Demand P instances), L-DB2E81BA (G and VT); spot: L-7212CCBC (P), L-3819A6DF (G and VT)",
    ));
    price_checks(&config, &limits, &region, catalog, now, &mut out).await;
    out
}

/// True when the transport reached an AWS endpoint (later checks are worth running).
fn reached(e: &ApiError) -> bool {
    !matches!(e.kind, ApiErrorKind::Dispatch | ApiErrorKind::Timeout)
}

async fn credentials(config: &SdkConfig, out: &mut Vec<Check>) -> bool {
    let Some(provider) = config.credentials_provider() else {
        out.push(Check::fail(
            "credentials",
            "no credential provider",
            FIX_CREDENTIALS,
        ));
        return false;
    };
    if let Err(e) = provider.provide_credentials().await {
        out.push(Check::fail(
            "credentials",
            format!("none found: {e}"),
            FIX_CREDENTIALS,
        ));
        return false;
    }
    out.push(Check::ok("credentials", "found (SDK default chain)"));
    let sts = aws_sdk_sts::Client::new(config);
    match sts.get_caller_identity().send().await {
        Ok(id) => {
            out.push(Check::ok(
                "identity",
                format!(
                    "{} (account {})",
                    id.arn().unwrap_or("?"),
                    id.account().unwrap_or("?")
                ),
            ));
            true
        }
        Err(e) => {
            let e = api_error(e);
            let reached = reached(&e);
            let fix = if reached {
                FIX_CREDENTIALS.to_owned()
            } else {
                "check the network path to AWS, or AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_STS when using a private endpoint or an emulator".to_owned()
            };
            out.push(Check::fail(
                "identity",
                format!("sts:GetCallerIdentity failed: {}", prices::describe(&e)),
                fix,
            ));
            reached
        }
    }
}

/// What a DryRun call said, as a check of `action`.
fn dry_run_check<O>(action: &str, result: Result<O, ApiError>) -> Check {
    let name = format!("permission ec2:{action}");
    match result {
        Err(e) if e.code.as_deref() == Some("DryRunOperation") => {
            Check::ok(name, "allowed (DryRun)")
        }
        Err(e)
            if e.code
                .as_deref()
                .is_some_and(|c| c == "UnauthorizedOperation" || c.starts_with("AccessDenied")) =>
        {
            Check::fail(
                name,
                format!("denied: {}", prices::describe(&e)),
                format!("{FIX_IAM}: ec2:{action}"),
            )
        }
        Err(e) if !reached(&e) => Check::fail(
            name,
            format!("no answer: {}", prices::describe(&e)),
            "check the network path to EC2 (AWS_ENDPOINT_URL_EC2 for a private endpoint)",
        ),
        Err(e) => Check::warn(
            name,
            format!("not conclusive: {}", prices::describe(&e)),
            "the DryRun call failed for another reason than permissions; check the AWSNodeClass with -f",
        ),
        Ok(_) => Check::warn(
            name,
            "the endpoint ignored DryRun (an emulator?)",
            "nothing to do against an emulator; against AWS report a bug",
        ),
    }
}

async fn permissions(config: &SdkConfig, spec: Option<&AWSNodeClassSpec>, out: &mut Vec<Check>) {
    let ec2 = aws_sdk_ec2::Client::new(config);
    let image = spec
        .and_then(|s| s.ami_selector_terms.iter().find_map(|t| t.id.clone()))
        .unwrap_or_else(|| "ami-00000000000000000".to_owned());
    let run = ec2
        .run_instances()
        .dry_run(true)
        .image_id(image)
        .instance_type(t::InstanceType::from("g5.xlarge"))
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .map_err(api_error);
    out.push(dry_run_check("RunInstances", run));
    let fleet = ec2
        .create_fleet()
        .dry_run(true)
        .r#type(t::FleetType::Instant)
        .launch_template_configs(
            t::FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    t::FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_name("quartermaster-doctor")
                        .version("$Latest")
                        .build(),
                )
                .build(),
        )
        .target_capacity_specification(
            t::TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(1)
                .default_target_capacity_type(t::DefaultTargetCapacityType::OnDemand)
                .build(),
        )
        .send()
        .await
        .map_err(api_error);
    out.push(dry_run_check("CreateFleet", fleet));
    let template = ec2
        .create_launch_template()
        .dry_run(true)
        .launch_template_name("quartermaster-doctor")
        .launch_template_data(
            t::RequestLaunchTemplateData::builder()
                .instance_type(t::InstanceType::from("g5.xlarge"))
                .build(),
        )
        .send()
        .await
        .map_err(api_error);
    out.push(dry_run_check("CreateLaunchTemplate", template));
    let terminate = ec2
        .terminate_instances()
        .dry_run(true)
        .instance_ids("i-00000000000000000")
        .send()
        .await
        .map_err(api_error);
    // The documented policy allows TerminateInstances only on instances tagged for the
    // cluster: a denial for the untagged placeholder is expected, not a failure.
    let check = dry_run_check("TerminateInstances", terminate);
    out.push(if check.outcome == CheckOutcome::Fail && check.detail.starts_with("denied") {
        Check::warn(
            check.name,
            format!("{} (for an untagged placeholder instance)", check.detail),
            "fine when the policy allows ec2:TerminateInstances on instances tagged quartermaster.dev/cluster; otherwise add it",
        )
    } else {
        check
    });
}

fn resolve_failure(what: &str, e: ResolveError, fix: &str) -> Check {
    match e {
        ResolveError::NodeClass(e) => Check::fail(what, e.to_string(), fix),
        ResolveError::Api(e) => Check::fail(
            what,
            format!("lookup failed: {}", prices::describe(&e)),
            format!("{FIX_IAM} (ec2:Describe*), then {fix}"),
        ),
    }
}

async fn node_class_checks(
    config: &SdkConfig,
    limits: &RateLimits,
    spec: &AWSNodeClassSpec,
    out: &mut Vec<Check>,
) {
    let ec2 = SdkEc2::new(aws_sdk_ec2::Client::new(config), limits.clone());
    const FIX_SUBNETS: &str = "tag the cluster's subnets as subnetSelectorTerms select them (e.g. karpenter.sh/discovery: CLUSTER) or select them by id";
    out.push(
        match resolve::subnets(&ec2, &spec.subnet_selector_terms).await {
            Ok(s) if s.is_empty() => Check::fail(
                "subnets",
                "no subnet matches subnetSelectorTerms",
                FIX_SUBNETS,
            ),
            Ok(s) => Check::ok(
                "subnets",
                s.iter()
                    .map(|s| format!("{} ({})", s.id, s.zone))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            Err(e) => resolve_failure("subnets", e, FIX_SUBNETS),
        },
    );
    const FIX_GROUPS: &str = "tag the node security group as securityGroupSelectorTerms select it, or select it by id or name";
    out.push(
        match resolve::security_groups(&ec2, &spec.security_group_selector_terms).await {
            Ok(g) if g.is_empty() => Check::fail(
                "security groups",
                "no security group matches securityGroupSelectorTerms",
                FIX_GROUPS,
            ),
            Ok(g) => Check::ok(
                "security groups",
                g.iter()
                    .map(|g| g.id.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            Err(e) => resolve_failure("security groups", e, FIX_GROUPS),
        },
    );
    const FIX_AMIS: &str = "select existing AMIs in amiSelectorTerms (id, name, tags, ssmParameter) or use alias: al2023@latest";
    if let Some(alias) = spec.ami_selector_terms.iter().find_map(|t| t.alias.clone()) {
        out.push(Check::ok(
            "amis",
            format!("alias {alias}: resolved by the controller from SSM public parameters for the cluster's Kubernetes version"),
        ));
        return;
    }
    let parameters = SsmParameters::new(aws_sdk_ssm::Client::new(config), limits.clone());
    let needed: BTreeSet<String> = ["x86_64/standard", "x86_64/nvidia", "arm64/standard"]
        .map(str::to_owned)
        .into();
    out.push(
        match resolve::amis(&ec2, &parameters, spec, &needed, None).await {
            Ok(found) if found.is_empty() => {
                Check::fail("amis", "no AMI matches amiSelectorTerms", FIX_AMIS)
            }
            Ok(found) => Check::ok(
                "amis",
                found
                    .iter()
                    .map(|(key, image)| format!("{key}: {}", image.id))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            Err(e) => resolve_failure("amis", e, FIX_AMIS),
        },
    );
}

async fn price_checks(
    config: &SdkConfig,
    limits: &RateLimits,
    region: &str,
    catalog: &Catalog,
    now: DateTime<Utc>,
    out: &mut Vec<Check>,
) {
    let api = SdkPrices::new(config, limits.clone());
    let fetch = prices::fetch(&api, region, &catalog_types(catalog, region), now).await;
    let count = |source: &str| fetch.quotes.iter().filter(|q| q.source == source).count();
    let fix = "allow pricing:GetProducts and ec2:DescribeSpotPriceHistory (AWS_ENDPOINT_URL_PRICING for a private endpoint); meanwhile the embedded prices are used";
    for (api, source) in [
        ("GetProducts", SOURCE_PRICING_API),
        ("DescribeSpotPriceHistory", SOURCE_SPOT_HISTORY),
    ] {
        let name = format!("prices {api}");
        match fetch.failures.iter().find(|f| f.starts_with(api)) {
            Some(failure) => out.push(Check::warn(name, failure.clone(), fix)),
            None => out.push(Check::ok(
                name,
                format!(
                    "{} prices for the catalog's types in {region}",
                    count(source)
                ),
            )),
        }
    }
}
