//! An AWSNodeClass's selector terms -> subnets, security groups and AMIs. Terms are ORed;
//! within a term, every field must match (one Describe call per term).

use std::collections::{BTreeMap, BTreeSet};

use quartermaster_policies::nodeclass::aws::{
    AWSNodeClassSpec, AmiSelectorTerm, SecurityGroupSelectorTerm, SubnetSelectorTerm,
};

use crate::errors::AwsError;
use crate::port::{ApiError, Ec2, Filter, Image, Parameters, SecurityGroup, Subnet};

/// Why resolution failed: the NodeClass, or the call.
#[derive(Debug)]
pub enum ResolveError {
    /// The NodeClass asks for something unsupported.
    NodeClass(AwsError),
    /// An EC2 call failed.
    Api(ApiError),
}

impl From<ApiError> for ResolveError {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

/// Filters for a term's tags: `"*"` (or empty) matches any value of the key.
fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" || v.is_empty() {
                Filter::new("tag-key", [k.clone()])
            } else {
                Filter::new(format!("tag:{k}"), [v.clone()])
            }
        })
        .collect()
}

fn empty_term(what: &str) -> ResolveError {
    ResolveError::NodeClass(AwsError::NodeClass(format!(
        "a {what} selector term selects nothing (give an id, a name or tags)"
    )))
}

/// The subnets of the terms, one per id (deduplicated).
pub async fn subnets(
    ec2: &dyn Ec2,
    terms: &[SubnetSelectorTerm],
) -> Result<Vec<Subnet>, ResolveError> {
    let mut out = BTreeMap::new();
    for term in terms {
        let ids: Vec<String> = term.id.iter().cloned().collect();
        let filters = tag_filters(&term.tags);
        if ids.is_empty() && filters.is_empty() {
            return Err(empty_term("subnet"));
        }
        for s in ec2.describe_subnets(ids, filters).await? {
            out.insert(s.id.clone(), s);
        }
    }
    Ok(out.into_values().collect())
}

/// The security groups of the terms.
pub async fn security_groups(
    ec2: &dyn Ec2,
    terms: &[SecurityGroupSelectorTerm],
) -> Result<Vec<SecurityGroup>, ResolveError> {
    let mut out = BTreeMap::new();
    for term in terms {
        let ids: Vec<String> = term.id.iter().cloned().collect();
        let mut filters = tag_filters(&term.tags);
        if let Some(name) = &term.name {
            filters.push(Filter::new("group-name", [name.clone()]));
        }
        if ids.is_empty() && filters.is_empty() {
            return Err(empty_term("security group"));
        }
        for g in ec2.describe_security_groups(ids, filters).await? {
            out.insert(g.id.clone(), g);
        }
    }
    Ok(out.into_values().collect())
}

/// The variants of the EKS-optimized AMIs, by the accelerators of an instance type.
pub const VARIANTS: [&str; 3] = ["standard", "nvidia", "neuron"];

/// The AMI for each kind of node the launch needs: keys `ARCH/VARIANT` (`x86_64/nvidia`,
/// `arm64/standard`, `x86_64/neuron`) from `needed`. An `alias` term (`al2023@latest`,
/// `al2023@v20250101`) resolves the EKS-optimized AL2023 AMI of each key through SSM public
/// parameters for `kubernetes_version`; other terms select AMIs by id, SSM parameter, name or
/// tags, the newest of each architecture serving every variant. A key without an AMI is left
/// out (its offerings are skipped).
pub async fn amis(
    ec2: &dyn Ec2,
    parameters: &dyn Parameters,
    spec: &AWSNodeClassSpec,
    needed: &BTreeSet<String>,
    kubernetes_version: Option<&str>,
) -> Result<BTreeMap<String, Image>, ResolveError> {
    if spec.ami_selector_terms.is_empty() {
        return Err(ResolveError::NodeClass(AwsError::NodeClass(
            "amiSelectorTerms is empty: select AMIs by alias (al2023@latest), id, name, tags or ssmParameter"
                .into(),
        )));
    }
    if let Some(alias) = spec
        .ami_selector_terms
        .iter()
        .find_map(|t| t.alias.as_deref())
    {
        return alias_amis(parameters, alias, needed, kubernetes_version).await;
    }
    let mut images = BTreeMap::new();
    for term in &spec.ami_selector_terms {
        for image in term_images(ec2, parameters, term).await? {
            images.insert(image.id.clone(), image);
        }
    }
    let by_arch = newest_by_architecture(images.into_values().collect());
    Ok(needed
        .iter()
        .filter_map(|key| {
            let arch = key.split('/').next()?;
            Some((key.clone(), by_arch.get(arch)?.clone()))
        })
        .collect())
}

/// The SSM public parameter of the EKS-optimized AL2023 AMI for `key` (`ARCH/VARIANT`).
pub fn alias_parameter(kubernetes_version: &str, key: &str, version: &str) -> String {
    let (arch, variant) = key.split_once('/').unwrap_or((key, "standard"));
    let leaf = if version == "latest" {
        "recommended".to_owned()
    } else {
        format!("amazon-eks-node-al2023-{arch}-{variant}-{kubernetes_version}-{version}")
    };
    format!(
        "/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/{arch}/{variant}/{leaf}/image_id"
    )
}

async fn alias_amis(
    parameters: &dyn Parameters,
    alias: &str,
    needed: &BTreeSet<String>,
    kubernetes_version: Option<&str>,
) -> Result<BTreeMap<String, Image>, ResolveError> {
    let bad = |why: String| ResolveError::NodeClass(AwsError::NodeClass(why));
    let (family, version) = alias.split_once('@').ok_or_else(|| {
        bad(format!(
            "amiSelectorTerms alias {alias:?} is not FAMILY@VERSION"
        ))
    })?;
    if !family.eq_ignore_ascii_case("al2023") {
        return Err(bad(format!(
            "amiSelectorTerms alias {alias:?}: only al2023 aliases are resolved; select other AMIs by id, name or tags"
        )));
    }
    let kubernetes_version = kubernetes_version.ok_or_else(|| {
        bad(format!(
            "amiSelectorTerms alias {alias:?} needs the cluster's Kubernetes version, which is not known"
        ))
    })?;
    let mut out = BTreeMap::new();
    for key in needed {
        let name = alias_parameter(kubernetes_version, key, version);
        if let Some(id) = parameters.get_parameter(name.clone()).await? {
            let arch = key.split('/').next().unwrap_or("x86_64").to_owned();
            out.insert(
                key.clone(),
                Image {
                    id,
                    name,
                    architecture: arch,
                    creation_date: String::new(),
                },
            );
        }
    }
    Ok(out)
}

async fn term_images(
    ec2: &dyn Ec2,
    parameters: &dyn Parameters,
    term: &AmiSelectorTerm,
) -> Result<Vec<Image>, ResolveError> {
    if let Some(parameter) = &term.ssm_parameter {
        let id = parameters
            .get_parameter(parameter.clone())
            .await?
            .ok_or_else(|| {
                ResolveError::NodeClass(AwsError::NodeClass(format!(
                    "amiSelectorTerms ssmParameter {parameter:?} does not exist"
                )))
            })?;
        return Ok(ec2
            .describe_images(vec![id], Vec::new(), Vec::new())
            .await?);
    }
    let ids: Vec<String> = term.id.iter().cloned().collect();
    let mut filters = tag_filters(&term.tags);
    if let Some(name) = &term.name {
        filters.push(Filter::new("name", [name.clone()]));
    }
    if ids.is_empty() && filters.is_empty() {
        return Err(empty_term("AMI"));
    }
    // A name or tags without an owner: our own account's AMIs and Amazon's (as Karpenter).
    let owners = match (&term.owner, ids.is_empty()) {
        (Some(owner), _) => vec![owner.clone()],
        (None, true) => vec!["self".to_owned(), "amazon".to_owned()],
        (None, false) => Vec::new(),
    };
    Ok(ec2.describe_images(ids, owners, filters).await?)
}

/// The newest image of each architecture (`x86_64`, `arm64`).
pub fn newest_by_architecture(images: Vec<Image>) -> BTreeMap<String, Image> {
    let mut out: BTreeMap<String, Image> = BTreeMap::new();
    for image in images {
        let arch = if image.architecture.is_empty() {
            "x86_64".to_owned()
        } else {
            image.architecture.clone()
        };
        match out.get(&arch) {
            Some(have)
                if (have.creation_date.as_str(), have.id.as_str())
                    >= (image.creation_date.as_str(), image.id.as_str()) => {}
            _ => {
                out.insert(arch, image);
            }
        }
    }
    out
}

/// The subnet to use in each zone: the one with the most free addresses (ties: lowest id).
pub fn subnet_per_zone(subnets: &[Subnet]) -> BTreeMap<String, Subnet> {
    let mut out: BTreeMap<String, Subnet> = BTreeMap::new();
    for s in subnets {
        match out.get(&s.zone) {
            Some(have)
                if (have.available_ips, std::cmp::Reverse(&have.id))
                    >= (s.available_ips, std::cmp::Reverse(&s.id)) => {}
            _ => {
                out.insert(s.zone.clone(), s.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_parameters_are_the_eks_public_ones() {
        assert_eq!(
            alias_parameter("1.33", "x86_64/nvidia", "latest"),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
        );
        assert_eq!(
            alias_parameter("1.33", "arm64/standard", "v20250101"),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.33-v20250101/image_id"
        );
    }

    fn image(id: &str, arch: &str, date: &str) -> Image {
        Image {
            id: id.into(),
            name: id.into(),
            architecture: arch.into(),
            creation_date: date.into(),
        }
    }

    #[test]
    fn the_newest_image_of_each_architecture_wins() {
        let chosen = newest_by_architecture(vec![
            image("ami-1", "x86_64", "2025-01-01T00:00:00.000Z"),
            image("ami-2", "x86_64", "2025-06-01T00:00:00.000Z"),
            image("ami-3", "arm64", "2024-01-01T00:00:00.000Z"),
        ]);
        assert_eq!(chosen["x86_64"].id, "ami-2");
        assert_eq!(chosen["arm64"].id, "ami-3");
    }

    #[test]
    fn the_subnet_with_most_free_addresses_serves_its_zone() {
        let s = |id: &str, zone: &str, ips| Subnet {
            id: id.into(),
            zone: zone.into(),
            available_ips: ips,
        };
        let chosen = subnet_per_zone(&[
            s("subnet-a1", "us-east-1a", 10),
            s("subnet-a2", "us-east-1a", 200),
            s("subnet-b1", "us-east-1b", 5),
        ]);
        assert_eq!(chosen["us-east-1a"].id, "subnet-a2");
        assert_eq!(chosen["us-east-1b"].id, "subnet-b1");
    }

    #[test]
    fn wildcard_tags_filter_on_the_key() {
        let f = tag_filters(&BTreeMap::from([
            ("karpenter.sh/discovery".to_owned(), "prod".to_owned()),
            ("kubernetes.io/role/internal-elb".to_owned(), "*".to_owned()),
        ]));
        assert_eq!(
            f,
            vec![
                Filter::new("tag:karpenter.sh/discovery", ["prod"]),
                Filter::new("tag-key", ["kubernetes.io/role/internal-elb"]),
            ]
        );
    }
}
