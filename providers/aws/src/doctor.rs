//! `quartermaster doctor --cloud aws`: what a first install gets wrong, one [`Check`] each —
//! the region, credentials (which source of the SDK's default chain: environment keys, a
//! profile, IRSA, EKS Pod Identity, instance metadata — see [`identity_source`]) and whose they
//! are (STS `GetCallerIdentity`), the EC2 permissions
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

use crate::config::{AwsSettings, CredentialSource, config_region, sdk_config};
use crate::port::{ApiError, ApiErrorKind};
use crate::prices::{self, SOURCE_PRICING_API, SOURCE_SPOT_HISTORY};
use crate::rate::RateLimits;
use crate::resolve::{self, ResolveError};
use crate::sdk::{SdkEc2, api_error};
use crate::sdk_pricing::{SdkPrices, catalog_types};
use crate::sdk_ssm::SsmParameters;

const FIX_CREDENTIALS: &str = "give the controller credentials through the SDK's default chain: IRSA or EKS Pod Identity in the cluster, AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY elsewhere";
const FIX_IAM: &str = "add the action to the controller's IAM role (README: \"AWS IAM policy\")";

/// Which source of the SDK's default credential chain the environment points at, in the
/// chain's order: environment keys, a shared profile, IRSA (web identity), the container
/// credentials endpoint (EKS Pod Identity, ECS task roles), instance metadata. Read from
/// variable and file names only: never a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentitySource {
    /// Fixed keys from the settings (tests against emulators only).
    StaticKeys,
    /// `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`; `temporary` with `AWS_SESSION_TOKEN`.
    Environment {
        /// The last four characters of the access key id (it identifies; the rest is not shown).
        key_id_suffix: String,
        /// Whether a session token is set too.
        temporary: bool,
    },
    /// A profile of the shared config and credentials files.
    Profile {
        /// `AWS_PROFILE`, else `default`.
        name: String,
    },
    /// IRSA: `AWS_ROLE_ARN` assumed with the token in `AWS_WEB_IDENTITY_TOKEN_FILE`.
    Irsa {
        /// The role assumed.
        role_arn: String,
        /// The projected service account token's path.
        token_file: String,
    },
    /// EKS Pod Identity: `AWS_CONTAINER_CREDENTIALS_FULL_URI` with
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (the EKS Pod Identity Agent).
    PodIdentity {
        /// The agent's endpoint.
        uri: String,
    },
    /// Another container credentials endpoint (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`: an
    /// ECS task role, or a full URI without a token file).
    ContainerEndpoint,
    /// The instance metadata service (the node's instance profile).
    InstanceMetadata,
    /// Nothing: instance metadata is disabled (`AWS_EC2_METADATA_DISABLED`).
    None,
}

impl IdentitySource {
    /// The source in a few words (`IRSA`, `EKS Pod Identity`, …).
    pub fn short(&self) -> &'static str {
        match self {
            Self::StaticKeys => "static test keys",
            Self::Environment { .. } => "environment keys",
            Self::Profile { .. } => "a shared profile",
            Self::Irsa { .. } => "IRSA",
            Self::PodIdentity { .. } => "EKS Pod Identity",
            Self::ContainerEndpoint => "the container credentials endpoint",
            Self::InstanceMetadata => "instance metadata",
            Self::None => "no source",
        }
    }
}

impl std::fmt::Display for IdentitySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::StaticKeys => f.write_str("static test keys from the settings"),
            Self::Environment {
                key_id_suffix,
                temporary,
            } => write!(
                f,
                "environment keys (AWS_ACCESS_KEY_ID …{key_id_suffix}{})",
                if *temporary {
                    ", with AWS_SESSION_TOKEN"
                } else {
                    ""
                }
            ),
            Self::Profile { name } => {
                write!(f, "shared profile {name:?} (AWS config / credentials files)")
            }
            Self::Irsa {
                role_arn,
                token_file,
            } => write!(
                f,
                "IRSA: role {role_arn} with the web identity token in {token_file} (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE)"
            ),
            Self::PodIdentity { uri } => write!(
                f,
                "EKS Pod Identity: the agent at {uri} (AWS_CONTAINER_CREDENTIALS_FULL_URI, AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE)"
            ),
            Self::ContainerEndpoint => f.write_str(
                "the container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI: an ECS task role)",
            ),
            Self::InstanceMetadata => f.write_str(
                "instance metadata: the node's instance profile (no AWS_* credential variables set)",
            ),
            Self::None => f.write_str(
                "nothing: no AWS_* credential variables, no profile, and AWS_EC2_METADATA_DISABLED is set",
            ),
        }
    }
}

/// Which source of the default chain `var` (environment variables) and `exists` (files)
/// point at; see [`IdentitySource`].
pub fn identity_source(
    var: impl Fn(&str) -> Option<String>,
    exists: impl Fn(&str) -> bool,
) -> IdentitySource {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    if let (Some(key_id), Some(_)) = (set("AWS_ACCESS_KEY_ID"), set("AWS_SECRET_ACCESS_KEY")) {
        let chars: Vec<char> = key_id.trim().chars().collect();
        return IdentitySource::Environment {
            key_id_suffix: chars[chars.len().saturating_sub(4)..].iter().collect(),
            temporary: set("AWS_SESSION_TOKEN").is_some(),
        };
    }
    let credentials_file = set("AWS_SHARED_CREDENTIALS_FILE")
        .or_else(|| set("HOME").map(|home| format!("{home}/.aws/credentials")));
    let profile = set("AWS_PROFILE");
    if profile.is_some() || credentials_file.is_some_and(|f| exists(&f)) {
        return IdentitySource::Profile {
            name: profile.unwrap_or_else(|| "default".to_owned()),
        };
    }
    if let (Some(token_file), Some(role_arn)) =
        (set("AWS_WEB_IDENTITY_TOKEN_FILE"), set("AWS_ROLE_ARN"))
    {
        return IdentitySource::Irsa {
            role_arn,
            token_file,
        };
    }
    let full_uri = set("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if let (Some(uri), Some(_)) = (&full_uri, set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) {
        return IdentitySource::PodIdentity { uri: uri.clone() };
    }
    if full_uri.is_some() || set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some() {
        return IdentitySource::ContainerEndpoint;
    }
    if set("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return IdentitySource::None;
    }
    IdentitySource::InstanceMetadata
}

/// [`identity_source`] of this process (or the settings' static keys).
fn process_identity_source(settings: &AwsSettings) -> IdentitySource {
    if matches!(settings.credentials, CredentialSource::Static { .. }) {
        return IdentitySource::StaticKeys;
    }
    identity_source(
        |name| std::env::var(name).ok(),
        |path| std::path::Path::new(path).exists(),
    )
}

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
    let source = process_identity_source(settings);
    if !credentials(&config, &source, &mut out).await {
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

async fn credentials(config: &SdkConfig, source: &IdentitySource, out: &mut Vec<Check>) -> bool {
    let Some(provider) = config.credentials_provider() else {
        out.push(Check::fail(
            "credentials",
            "no credential provider",
            FIX_CREDENTIALS,
        ));
        return false;
    };
    // `{e}` alone: the error's sources may quote what the provider read (the ECS provider
    // quotes an unusable token).
    if let Err(e) = provider.provide_credentials().await {
        out.push(Check::fail(
            "credentials",
            format!("none found from {source}: {e}"),
            FIX_CREDENTIALS,
        ));
        return false;
    }
    out.push(Check::ok(
        "credentials",
        format!("found (SDK default chain): {source}"),
    ));
    let sts = aws_sdk_sts::Client::new(config);
    match sts.get_caller_identity().send().await {
        Ok(id) => {
            out.push(Check::ok(
                "identity",
                format!(
                    "{} (account {}), credentials from {}",
                    id.arn().unwrap_or("?"),
                    id.account().unwrap_or("?"),
                    source.short()
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn source(vars: &[(&str, &str)], files: &[&str]) -> IdentitySource {
        let vars: BTreeMap<&str, &str> = vars.iter().copied().collect();
        identity_source(
            |name| vars.get(name).map(|v| v.to_string()),
            |path| files.contains(&path),
        )
    }

    const IRSA: [(&str, &str); 2] = [
        (
            "AWS_ROLE_ARN",
            "arn:aws:iam::111122223333:role/quartermaster",
        ),
        (
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
        ),
    ];
    const POD_IDENTITY: [(&str, &str); 2] = [
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "http://169.254.170.23/v1/credentials",
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token",
        ),
    ];

    #[test]
    fn irsa_is_the_web_identity_token_and_role() {
        let s = source(&IRSA, &[]);
        assert_eq!(s.short(), "IRSA");
        let text = s.to_string();
        assert!(
            text.contains("arn:aws:iam::111122223333:role/quartermaster"),
            "{text}"
        );
        assert!(
            text.contains("eks.amazonaws.com/serviceaccount/token"),
            "{text}"
        );
    }

    #[test]
    fn eks_pod_identity_is_the_agent_endpoint_with_its_token_file() {
        let s = source(&POD_IDENTITY, &[]);
        assert_eq!(
            s,
            IdentitySource::PodIdentity {
                uri: "http://169.254.170.23/v1/credentials".into()
            }
        );
        assert_eq!(s.short(), "EKS Pod Identity");
        // Without the token file: some other container endpoint (an ECS task role).
        assert_eq!(
            source(&POD_IDENTITY[..1], &[]),
            IdentitySource::ContainerEndpoint
        );
        assert_eq!(
            source(
                &[(
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                    "/v2/credentials/x"
                )],
                &[]
            ),
            IdentitySource::ContainerEndpoint
        );
    }

    #[test]
    fn environment_keys_come_first_and_show_only_the_last_four_characters_of_the_key_id() {
        let mut vars = vec![
            ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "CANARY-SECRET-wJalrXUtnFEMI"),
            ("AWS_SESSION_TOKEN", "CANARY-SECRET-session"),
        ];
        vars.extend(IRSA);
        vars.extend(POD_IDENTITY);
        let s = source(&vars, &[]);
        assert_eq!(
            s,
            IdentitySource::Environment {
                key_id_suffix: "MPLE".into(),
                temporary: true
            }
        );
        let text = s.to_string();
        assert!(text.contains("…MPLE"), "{text}");
        assert!(!text.contains("AKIAIOSFODNN7"), "{text}");
        assert!(!text.contains("CANARY"), "{text}");
        // A key id without its secret is not a source.
        assert_eq!(source(&[vars[0]], &[]), IdentitySource::InstanceMetadata);
    }

    #[test]
    fn a_profile_comes_before_irsa_and_pod_identity() {
        let mut vars = vec![("HOME", "/home/me")];
        vars.extend(IRSA);
        assert_eq!(
            source(&vars, &["/home/me/.aws/credentials"]),
            IdentitySource::Profile {
                name: "default".into()
            }
        );
        assert_eq!(source(&vars, &[]).short(), "IRSA");
        assert_eq!(
            source(&[("AWS_PROFILE", "admin")], &[]),
            IdentitySource::Profile {
                name: "admin".into()
            }
        );
    }

    #[test]
    fn nothing_set_is_instance_metadata_unless_it_is_disabled() {
        assert_eq!(source(&[], &[]), IdentitySource::InstanceMetadata);
        assert_eq!(
            source(&[("AWS_EC2_METADATA_DISABLED", "true")], &[]),
            IdentitySource::None
        );
        // IRSA needs both variables.
        assert_eq!(source(&IRSA[..1], &[]), IdentitySource::InstanceMetadata);
    }
}
