//! Well-known label keys, label syntax checks and restricted label domains.

pub mod aliases;

pub use aliases::{
    ANNOTATION_ALIAS_LABELS, AliasValues, LABEL_ALIASES, LabelAlias, alias_labels,
    alias_labels_enabled, label_alias,
};

/// The API group of every Quartermaster resource.
pub const GROUP: &str = "quartermaster.dev";
/// The API version of every Quartermaster resource.
pub const VERSION: &str = "v1";
/// `apiVersion` of every Quartermaster resource.
pub const API_VERSION: &str = "quartermaster.dev/v1";

/// The NodePool that owns a node (set by Quartermaster; may not be set by users).
pub const LABEL_NODEPOOL: &str = "quartermaster.dev/nodepool";
/// `on-demand` or `spot`.
pub const LABEL_CAPACITY_TYPE: &str = "quartermaster.dev/capacity-type";
/// Value of [`LABEL_CAPACITY_TYPE`] for on-demand capacity.
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
/// Value of [`LABEL_CAPACITY_TYPE`] for spot / preemptible capacity.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
/// The cloud: `aws`, `gcp` or `azure`.
pub const LABEL_CLOUD: &str = "quartermaster.dev/cloud";
/// Instance family (`p5`, `a3`, `ND_H100_v5`).
pub const LABEL_INSTANCE_FAMILY: &str = "quartermaster.dev/instance-family";
/// vCPUs of the instance type (integer).
pub const LABEL_INSTANCE_CPU: &str = "quartermaster.dev/instance-cpu";
/// Memory of the instance type in MiB (integer).
pub const LABEL_INSTANCE_MEMORY: &str = "quartermaster.dev/instance-memory";
/// Accelerator model (`h100`, `a100`, `l4`, `gaudi`, `trainium`).
pub const LABEL_INSTANCE_GPU_NAME: &str = "quartermaster.dev/instance-gpu-name";
/// Accelerator manufacturer (`nvidia`, `habana`, `aws`).
pub const LABEL_INSTANCE_GPU_MANUFACTURER: &str = "quartermaster.dev/instance-gpu-manufacturer";
/// Number of accelerators (integer).
pub const LABEL_INSTANCE_GPU_COUNT: &str = "quartermaster.dev/instance-gpu-count";
/// Memory per accelerator in MiB (integer).
pub const LABEL_INSTANCE_GPU_MEMORY: &str = "quartermaster.dev/instance-gpu-memory";
/// Network bandwidth in Mbps (integer).
pub const LABEL_INSTANCE_NETWORK_BANDWIDTH: &str = "quartermaster.dev/instance-network-bandwidth";
/// Accelerator interconnect (`efa`, `infiniband`).
pub const LABEL_INSTANCE_INTERCONNECT: &str = "quartermaster.dev/instance-interconnect";
/// Fraction of one accelerator for vGPU slices (e.g. `0.1667`).
pub const LABEL_INSTANCE_GPU_FRACTION: &str = "quartermaster.dev/instance-gpu-fraction";
/// Local NVMe in GB (integer).
pub const LABEL_INSTANCE_LOCAL_NVME: &str = "quartermaster.dev/instance-local-nvme";
/// Instance category: the family's letters before its generation (`p` for `p4d`).
pub const LABEL_INSTANCE_CATEGORY: &str = "quartermaster.dev/instance-category";
/// Instance generation: the digits after the category (`4` for `p4d`).
pub const LABEL_INSTANCE_GENERATION: &str = "quartermaster.dev/instance-generation";
/// Instance size: the part of an AWS type name after the dot (`24xlarge`).
pub const LABEL_INSTANCE_SIZE: &str = "quartermaster.dev/instance-size";
/// Hypervisor of an AWS type: `nitro` or `xen`.
pub const LABEL_INSTANCE_HYPERVISOR: &str = "quartermaster.dev/instance-hypervisor";
/// NVIDIA GPU product as GPU Feature Discovery names it (`NVIDIA-A10G`).
pub const LABEL_INSTANCE_GPU_PRODUCT: &str = "quartermaster.dev/instance-gpu-product";
/// NVIDIA GPU architecture as GPU Feature Discovery names it (`ampere`, `hopper`).
pub const LABEL_INSTANCE_GPU_FAMILY: &str = "quartermaster.dev/instance-gpu-family";

/// `topology.kubernetes.io/zone`.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
/// `node.kubernetes.io/instance-type`.
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// `kubernetes.io/arch`.
pub const LABEL_ARCH: &str = "kubernetes.io/arch";
/// `kubernetes.io/os`.
pub const LABEL_OS: &str = "kubernetes.io/os";
/// `node.kubernetes.io/windows-build`.
pub const LABEL_WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// `kubernetes.io/hostname`.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";

/// Labels whose values every instance type / offering supplies. A pod may
/// require one of these even when a NodePool does not mention it (see
/// [`crate::Requirements::compatible_with_undefined`]).
pub const WELL_KNOWN_LABELS: &[&str] = &[
    LABEL_NODEPOOL,
    LABEL_CAPACITY_TYPE,
    LABEL_CLOUD,
    LABEL_INSTANCE_FAMILY,
    LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_MEMORY,
    LABEL_INSTANCE_GPU_NAME,
    LABEL_INSTANCE_GPU_MANUFACTURER,
    LABEL_INSTANCE_GPU_COUNT,
    LABEL_INSTANCE_GPU_MEMORY,
    LABEL_INSTANCE_NETWORK_BANDWIDTH,
    LABEL_INSTANCE_INTERCONNECT,
    LABEL_INSTANCE_GPU_FRACTION,
    LABEL_INSTANCE_LOCAL_NVME,
    LABEL_INSTANCE_CATEGORY,
    LABEL_INSTANCE_GENERATION,
    LABEL_INSTANCE_SIZE,
    LABEL_INSTANCE_HYPERVISOR,
    LABEL_INSTANCE_GPU_PRODUCT,
    LABEL_INSTANCE_GPU_FAMILY,
    LABEL_ZONE,
    LABEL_REGION,
    LABEL_INSTANCE_TYPE,
    LABEL_ARCH,
    LABEL_OS,
    LABEL_WINDOWS_BUILD,
];

/// Deprecated label keys and the keys they are normalised to.
pub const NORMALIZED_LABELS: &[(&str, &str)] = &[
    ("failure-domain.beta.kubernetes.io/zone", LABEL_ZONE),
    ("failure-domain.beta.kubernetes.io/region", LABEL_REGION),
    ("beta.kubernetes.io/instance-type", LABEL_INSTANCE_TYPE),
    ("beta.kubernetes.io/arch", LABEL_ARCH),
    ("beta.kubernetes.io/os", LABEL_OS),
];

/// Label domains that users may not set labels in (suffix match)...
pub const RESTRICTED_LABEL_DOMAINS: &[&str] = &["kubernetes.io", "k8s.io", GROUP];
/// ...except in these sub-domains.
pub const LABEL_DOMAIN_EXCEPTIONS: &[&str] = &[
    "node.kubernetes.io",
    "node-restriction.kubernetes.io",
    "kops.k8s.io",
];

/// Whether `key` is one of [`WELL_KNOWN_LABELS`].
pub fn is_well_known_label(key: &str) -> bool {
    WELL_KNOWN_LABELS.contains(&key)
}

/// The current key for a deprecated key or an alias ([`LABEL_ALIASES`]), or `key` itself.
pub fn normalize_label_key(key: &str) -> &str {
    if let Some(a) = label_alias(key) {
        return a.canonical;
    }
    NORMALIZED_LABELS
        .iter()
        .find(|(old, _)| *old == key)
        .map_or(key, |(_, new)| new)
}

/// The domain part of a label key (`"example.com"` for `"example.com/team"`), if any.
pub fn label_domain(key: &str) -> Option<&str> {
    key.split_once('/').map(|(domain, _)| domain)
}

fn domain_within(domain: &str, parent: &str) -> bool {
    domain == parent
        || domain
            .strip_suffix(parent)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// Why a user may not set `key` as a node label in a NodePool template, or
/// `None` if it is allowed.
///
/// Well-known labels are allowed (except [`LABEL_NODEPOOL`], which
/// Quartermaster sets); other keys in `kubernetes.io`, `k8s.io` and
/// `quartermaster.dev` (and their sub-domains) are restricted, except in
/// `node.kubernetes.io`, `node-restriction.kubernetes.io` and `kops.k8s.io`.
pub fn restricted_label_reason(key: &str) -> Option<String> {
    if key == LABEL_NODEPOOL {
        return Some(format!("label {key:?} is set by Quartermaster"));
    }
    if is_well_known_label(key) {
        return None;
    }
    let domain = label_domain(key)?;
    if LABEL_DOMAIN_EXCEPTIONS
        .iter()
        .any(|d| domain_within(domain, d))
    {
        return None;
    }
    RESTRICTED_LABEL_DOMAINS
        .iter()
        .find(|d| domain_within(domain, d))
        .map(|d| {
            format!("label domain {domain:?} is restricted ({d}); use a well-known label or a custom domain")
        })
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
}

/// Checks the name part of a qualified name / a label value (non-empty).
fn check_label_name(s: &str, what: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err(format!("{what} must be no more than 63 characters"));
    }
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| is_name_char(c));
    if ok {
        return Ok(());
    }
    // `<<AZ>>`, `${CLUSTER_NAME}`, `{{ .Values.x }}`: a template's placeholder left unfilled.
    let placeholder = ["<", "${", "{{"].iter().any(|p| s.contains(p));
    Err(format!(
        "{what} must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character{}",
        if placeholder {
            format!(" ({s:?} looks like a placeholder to fill in)")
        } else {
            String::new()
        }
    ))
}

/// Checks a DNS-1123 subdomain (lowercase, `.`-separated labels, at most 253 characters).
pub fn validate_dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.len() > 253 {
        return Err("must be no more than 253 characters".into());
    }
    let ok = s.split('.').all(|part| {
        let b = part.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    });
    if ok {
        Ok(())
    } else {
        Err(
            "must be a lowercase RFC 1123 subdomain: lowercase alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character"
                .into(),
        )
    }
}

/// Checks a label key (a Kubernetes "qualified name": `[prefix/]name`).
pub fn validate_label_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("label key must not be empty".into());
    }
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        validate_dns_subdomain(prefix).map_err(|e| format!("label key prefix {e}"))?;
    }
    check_label_name(name, "label key name")
}

/// Checks a label value (empty, or at most 63 name characters).
pub fn validate_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    check_label_name(value, "label value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys() {
        for ok in [
            "team",
            "example.com/team",
            "a.b-c.d/x_y.z-1",
            "nvidia.com/gpu",
            LABEL_ZONE,
        ] {
            assert_eq!(validate_label_key(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "/team",
            "Example.com/team",
            "example.com/",
            "a/b/c",
            "-team",
            "team-",
            "te am",
            "example..com/x",
            &"x".repeat(64),
        ] {
            assert!(validate_label_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "us-east-1a", "A_b.c-1", &"x".repeat(63)] {
            assert_eq!(validate_label_value(ok), Ok(()), "{ok}");
        }
        for bad in ["-a", "a-", "a b", "a/b", &"x".repeat(64)] {
            assert!(validate_label_value(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn restricted_domains() {
        assert!(restricted_label_reason("team").is_none());
        assert!(restricted_label_reason("example.com/team").is_none());
        assert!(restricted_label_reason(LABEL_ZONE).is_none());
        assert!(restricted_label_reason(LABEL_INSTANCE_GPU_NAME).is_none());
        assert!(restricted_label_reason("node.kubernetes.io/exclude-from-lb").is_none());
        assert!(restricted_label_reason("node-restriction.kubernetes.io/x").is_none());
        assert!(restricted_label_reason("notkubernetes.io/x").is_none());
        assert!(restricted_label_reason(LABEL_NODEPOOL).is_some());
        assert!(restricted_label_reason("kubernetes.io/hostname").is_some());
        assert!(restricted_label_reason("foo.kubernetes.io/x").is_some());
        assert!(restricted_label_reason("k8s.io/x").is_some());
        assert!(restricted_label_reason("quartermaster.dev/anything").is_some());
    }

    #[test]
    fn normalisation() {
        assert_eq!(
            normalize_label_key("failure-domain.beta.kubernetes.io/zone"),
            LABEL_ZONE
        );
        assert_eq!(normalize_label_key("beta.kubernetes.io/arch"), LABEL_ARCH);
        assert_eq!(normalize_label_key("team"), "team");
    }
}
