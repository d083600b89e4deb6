//! An AWSNodeClass's selector terms -> subnets, security groups and AMIs. Terms are ORed;
//! within a term, every field must match (one Describe call per term).

use std::collections::BTreeMap;

use quartermaster_policies::nodeclass::aws::{
    AWSNodeClassSpec, AmiSelectorTerm, SecurityGroupSelectorTerm, SubnetSelectorTerm,
};

use crate::error::AwsError;
use crate::port::{ApiError, Ec2, Filter, Image, SecurityGroup, Subnet};

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

/// The AMIs of the terms. Aliases and SSM parameters are not resolved yet: such a term is a
/// clear error naming what to use instead.
pub async fn images(ec2: &dyn Ec2, spec: &AWSNodeClassSpec) -> Result<Vec<Image>, ResolveError> {
    if spec.ami_selector_terms.is_empty() {
        return Err(ResolveError::NodeClass(AwsError::NodeClass(
            "amiSelectorTerms is empty: AMIs by amiFamily alone are not resolved yet; select \
             the EKS-optimized AL2023 AMI by id, name or tags"
                .into(),
        )));
    }
    let mut out = BTreeMap::new();
    for term in &spec.ami_selector_terms {
        for image in term_images(ec2, term).await? {
            out.insert(image.id.clone(), image);
        }
    }
    Ok(out.into_values().collect())
}

async fn term_images(ec2: &dyn Ec2, term: &AmiSelectorTerm) -> Result<Vec<Image>, ResolveError> {
    if let Some(alias) = &term.alias {
        return Err(ResolveError::NodeClass(AwsError::NodeClass(format!(
            "amiSelectorTerms alias {alias:?} is not resolved yet (SSM public parameters); \
             select the AMI by id, name or tags"
        ))));
    }
    if let Some(parameter) = &term.ssm_parameter {
        return Err(ResolveError::NodeClass(AwsError::NodeClass(format!(
            "amiSelectorTerms ssmParameter {parameter:?} is not resolved yet; select the AMI by \
             id, name or tags"
        ))));
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
