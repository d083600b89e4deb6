//! The user data that joins an EKS cluster: an Amazon Linux 2023 `nodeadm` NodeConfig (cluster
//! name, API endpoint, CA, service CIDR; kubelet settings of the NodeClass; the taint a node
//! registers with) as a MIME multi-part document, merged with the NodeClass's own `userData`.

use quartermaster_policies::nodeclass::aws::KubeletConfiguration;
use serde_json::{Map, Value, json};

use crate::errors::AwsError;

/// The MIME boundary of the documents we write.
const BOUNDARY: &str = "//";

/// The taint every node registers with; the controller removes it when it registers the node
/// (labels, taints and finalizer applied first).
pub const TAINT_UNREGISTERED: &str = "quartermaster.dev/unregistered";

/// What a node needs to know about the cluster it joins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The EKS cluster name.
    pub name: String,
    /// The API server endpoint (`https://…`).
    pub endpoint: String,
    /// The cluster's CA bundle, base64 (as `aws eks describe-cluster` prints it).
    pub ca_bundle: String,
    /// The service CIDR (`10.100.0.0/16`).
    pub cidr: String,
}

/// The NodeConfig document (YAML) for `cluster` with `kubelet` settings.
pub fn node_config(
    cluster: &ClusterInfo,
    kubelet: Option<&KubeletConfiguration>,
) -> Result<String, AwsError> {
    let mut config = Map::new();
    if let Some(k) = kubelet {
        if let Some(v) = k.max_pods {
            config.insert("maxPods".into(), json!(v));
        }
        if let Some(v) = k.pods_per_core {
            config.insert("podsPerCore".into(), json!(v));
        }
        if !k.cluster_dns.is_empty() {
            config.insert("clusterDNS".into(), json!(k.cluster_dns));
        }
        for (key, map) in [
            ("systemReserved", &k.system_reserved),
            ("kubeReserved", &k.kube_reserved),
            ("evictionHard", &k.eviction_hard),
            ("evictionSoft", &k.eviction_soft),
            ("evictionSoftGracePeriod", &k.eviction_soft_grace_period),
        ] {
            if !map.is_empty() {
                config.insert(key.into(), json!(map));
            }
        }
        if let Some(v) = k.eviction_max_pod_grace_period {
            config.insert("evictionMaxPodGracePeriod".into(), json!(v));
        }
        if let Some(v) = k.image_gc_high_threshold_percent {
            config.insert("imageGCHighThresholdPercent".into(), json!(v));
        }
        if let Some(v) = k.image_gc_low_threshold_percent {
            config.insert("imageGCLowThresholdPercent".into(), json!(v));
        }
        if let Some(v) = k.cpu_cfs_quota {
            config.insert("cpuCFSQuota".into(), json!(v));
        }
    }
    let mut kubelet_spec = Map::new();
    if !config.is_empty() {
        kubelet_spec.insert("config".into(), Value::Object(config));
    }
    // NoSchedule, not NoExecute: the kube-controller-manager's taint-eviction controller reads
    // taints from its own cache, which can lag the API server by seconds on a busy cluster. A
    // pod the scheduler binds right after registration removed the taint would be deleted
    // if the cache still showed it NoExecute (kubernetes/kubernetes#139992; seen at 10,000 pods).
    kubelet_spec.insert(
        "flags".into(),
        json!([format!(
            "--register-with-taints={TAINT_UNREGISTERED}=true:NoSchedule"
        )]),
    );
    let doc = json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": {
                "name": cluster.name,
                "apiServerEndpoint": cluster.endpoint,
                "certificateAuthority": cluster.ca_bundle,
                "cidr": cluster.cidr,
            },
            "kubelet": Value::Object(kubelet_spec),
        },
    });
    serde_norway::to_string(&doc).map_err(|e| AwsError::UserData(e.to_string()))
}

/// One part of a MIME multi-part document.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    content_type: String,
    body: String,
}

/// The parts of the NodeClass's `userData`: a MIME multi-part document as it is, otherwise
/// a NodeConfig (YAML with `kind: NodeConfig`) or a shell script.
fn custom_parts(user_data: &str) -> Result<Vec<Part>, AwsError> {
    let trimmed = user_data.trim_start();
    if trimmed.starts_with("MIME-Version:") || trimmed.starts_with("Content-Type: multipart") {
        return parse_mime(user_data);
    }
    let content_type = if trimmed.starts_with("#!") || !trimmed.contains("kind: NodeConfig") {
        "text/x-shellscript; charset=\"us-ascii\""
    } else {
        "application/node.eks.aws"
    };
    Ok(vec![Part {
        content_type: content_type.into(),
        body: user_data.to_owned(),
    }])
}

/// The parts of a MIME multi-part document (the boundary from its Content-Type header).
fn parse_mime(doc: &str) -> Result<Vec<Part>, AwsError> {
    let bad = |why: &str| AwsError::UserData(format!("userData is not valid MIME: {why}"));
    let (headers, body) = split_headers(doc).ok_or_else(|| bad("no blank line after headers"))?;
    let content_type = header(headers, "content-type").ok_or_else(|| bad("no Content-Type"))?;
    let boundary = content_type
        .split(';')
        .filter_map(|p| p.trim().strip_prefix("boundary="))
        .next()
        .map(|b| b.trim_matches('"').to_owned())
        .ok_or_else(|| bad("no boundary in Content-Type"))?;
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    for chunk in body.split(&delimiter).skip(1) {
        if chunk.starts_with("--") {
            break;
        }
        let chunk = chunk.trim_start_matches(['\r', '\n']);
        let (headers, body) = split_headers(chunk).ok_or_else(|| bad("a part has no headers"))?;
        let content_type = header(headers, "content-type")
            .unwrap_or("text/x-shellscript")
            .to_owned();
        parts.push(Part {
            content_type,
            body: body.trim_end_matches(['\r', '\n']).to_owned(),
        });
    }
    if parts.is_empty() {
        return Err(bad("no parts"));
    }
    Ok(parts)
}

fn split_headers(doc: &str) -> Option<(&str, &str)> {
    doc.split_once("\r\n\r\n")
        .or_else(|| doc.split_once("\n\n"))
}

fn header<'a>(headers: &'a str, name: &str) -> Option<&'a str> {
    headers.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The whole user data: the NodeClass's own parts first (nodeadm merges NodeConfigs in order,
/// so ours, last, decides the cluster), then our NodeConfig.
pub fn al2023_user_data(
    cluster: &ClusterInfo,
    kubelet: Option<&KubeletConfiguration>,
    custom: Option<&str>,
) -> Result<String, AwsError> {
    let mut parts = match custom {
        Some(c) if !c.trim().is_empty() => custom_parts(c)?,
        _ => Vec::new(),
    };
    parts.push(Part {
        content_type: "application/node.eks.aws".into(),
        body: node_config(cluster, kubelet)?,
    });
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for p in parts {
        out.push_str(&format!(
            "--{BOUNDARY}\nContent-Type: {}\n\n{}\n\n",
            p.content_type,
            p.body.trim_end()
        ));
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> ClusterInfo {
        ClusterInfo {
            name: "prod".into(),
            endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com".into(),
            ca_bundle: "LS0tLS1CRUdJTg==".into(),
            cidr: "10.100.0.0/16".into(),
        }
    }

    #[test]
    fn the_node_config_names_the_cluster_and_registers_tainted() {
        let doc = al2023_user_data(&cluster(), None, None).unwrap();
        assert!(doc.starts_with("MIME-Version: 1.0\n"));
        let parts = parse_mime(&doc).unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].content_type, "application/node.eks.aws");
        let config: Value = serde_norway::from_str(&parts[0].body).unwrap();
        assert_eq!(config["kind"], "NodeConfig");
        assert_eq!(config["spec"]["cluster"]["name"], "prod");
        assert_eq!(config["spec"]["cluster"]["cidr"], "10.100.0.0/16");
        assert_eq!(
            config["spec"]["cluster"]["certificateAuthority"],
            "LS0tLS1CRUdJTg=="
        );
        assert_eq!(
            config["spec"]["kubelet"]["flags"][0],
            "--register-with-taints=quartermaster.dev/unregistered=true:NoSchedule"
        );
    }

    #[test]
    fn kubelet_settings_go_into_the_config() {
        let kubelet = KubeletConfiguration {
            max_pods: Some(110),
            cluster_dns: vec!["10.100.0.10".into()],
            ..KubeletConfiguration::default()
        };
        let doc = al2023_user_data(&cluster(), Some(&kubelet), None).unwrap();
        let parts = parse_mime(&doc).unwrap();
        let config: Value = serde_norway::from_str(&parts[0].body).unwrap();
        assert_eq!(config["spec"]["kubelet"]["config"]["maxPods"], 110);
        assert_eq!(
            config["spec"]["kubelet"]["config"]["clusterDNS"][0],
            "10.100.0.10"
        );
    }

    #[test]
    fn a_script_of_the_node_class_runs_before_our_config() {
        let doc = al2023_user_data(&cluster(), None, Some("#!/bin/bash\necho hello\n")).unwrap();
        let parts = parse_mime(&doc).unwrap();
        assert_eq!(parts.len(), 2);
        assert!(parts[0].content_type.starts_with("text/x-shellscript"));
        assert_eq!(parts[0].body, "#!/bin/bash\necho hello");
        assert_eq!(parts[1].content_type, "application/node.eks.aws");
    }

    #[test]
    fn mime_user_data_keeps_its_parts() {
        let custom = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUND\"\n\n--BOUND\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n--BOUND\nContent-Type: text/x-shellscript\n\n#!/bin/sh\ntrue\n--BOUND--\n";
        let doc = al2023_user_data(&cluster(), None, Some(custom)).unwrap();
        let parts = parse_mime(&doc).unwrap();
        assert_eq!(parts.len(), 3);
        assert!(parts[0].body.contains("shutdownGracePeriod"));
        assert_eq!(parts[1].body, "#!/bin/sh\ntrue");
    }

    #[test]
    fn a_bare_node_config_is_a_node_config_part() {
        let custom = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n";
        let doc = al2023_user_data(&cluster(), None, Some(custom)).unwrap();
        let parts = parse_mime(&doc).unwrap();
        assert_eq!(parts[0].content_type, "application/node.eks.aws");
    }

    #[test]
    fn broken_mime_is_a_clear_error() {
        let err = al2023_user_data(
            &cluster(),
            None,
            Some("MIME-Version: 1.0\nContent-Type: multipart/mixed\n\nbody"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("no boundary"), "{err}");
    }
}
