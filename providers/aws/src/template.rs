//! Launch templates: one per NodeClass and AMI (and everything else it holds), named after a
//! hash of its content so a changed NodeClass gets a new template instead of editing one that
//! running fleets use.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use quartermaster_policies::nodeclass::aws::{AWSNodeClassSpec, BlockDeviceMapping};
use quartermaster_policies::parse_quantity;
use sha2::{Digest, Sha256};

use crate::errors::AwsError;
use crate::port::{BlockDevice, LaunchTemplateSpec};
use crate::userdata::{ClusterInfo, al2023_user_data};

/// The tag naming the cluster on everything Quartermaster creates.
pub const TAG_CLUSTER: &str = "quartermaster.dev/cluster";
/// The tag naming the NodeClass a launch template is for.
pub const TAG_NODECLASS: &str = "quartermaster.dev/nodeclass";

const GIB: i128 = 1 << 30;

fn block_device(b: &BlockDeviceMapping) -> Result<BlockDevice, AwsError> {
    let ebs = b.ebs.clone().unwrap_or_default();
    let size = match &ebs.volume_size {
        Some(q) => {
            let millis = parse_quantity(&q.0)
                .map_err(|e| AwsError::NodeClass(format!("blockDeviceMappings volumeSize: {e}")))?;
            let bytes = millis.to_whole_ceil();
            let gib = (bytes + GIB - 1) / GIB;
            Some(i32::try_from(gib).map_err(|_| {
                AwsError::NodeClass(format!(
                    "blockDeviceMappings volumeSize {} is too large",
                    q.0
                ))
            })?)
        }
        None => None,
    };
    let small = |what: &str, v: Option<i64>| -> Result<Option<i32>, AwsError> {
        v.map(|v| {
            i32::try_from(v).map_err(|_| {
                AwsError::NodeClass(format!("blockDeviceMappings {what} {v} is out of range"))
            })
        })
        .transpose()
    };
    Ok(BlockDevice {
        device_name: b.device_name.clone(),
        volume_size_gib: size,
        volume_type: ebs.volume_type.clone(),
        iops: small("iops", ebs.iops)?,
        throughput: small("throughput", ebs.throughput)?,
        encrypted: ebs.encrypted,
        delete_on_termination: ebs.delete_on_termination,
        kms_key_id: ebs.kms_key_id.clone(),
        snapshot_id: ebs.snapshot_id.clone(),
    })
}

/// The launch template for `node_class` (named `class_name`) with `image_id`.
pub fn launch_template(
    cluster: &ClusterInfo,
    class_name: &str,
    spec: &AWSNodeClassSpec,
    image_id: &str,
    security_group_ids: Vec<String>,
    capacity_reservation: Option<crate::port::ReservationTarget>,
) -> Result<LaunchTemplateSpec, AwsError> {
    if spec.instance_profile.is_none() && spec.role.is_some() {
        return Err(AwsError::NodeClass(
            "`role` needs an instance profile managed by Quartermaster, which is not built \
             yet; create an instance profile for the role and set `instanceProfile`"
                .into(),
        ));
    }
    let user_data = al2023_user_data(cluster, spec.kubelet.as_ref(), spec.user_data.as_deref())?;
    let metadata = spec.metadata_options.clone().unwrap_or_default();
    let hop_limit = metadata.http_put_response_hop_limit.unwrap_or(1);
    let mut template = LaunchTemplateSpec {
        name: String::new(),
        image_id: image_id.to_owned(),
        user_data: STANDARD.encode(user_data),
        instance_profile: spec.instance_profile.clone(),
        security_group_ids,
        http_tokens: metadata.http_tokens.unwrap_or_else(|| "required".into()),
        http_put_response_hop_limit: i32::try_from(hop_limit).map_err(|_| {
            AwsError::NodeClass(format!(
                "httpPutResponseHopLimit {hop_limit} is out of range"
            ))
        })?,
        http_endpoint: metadata.http_endpoint.unwrap_or_else(|| "enabled".into()),
        block_devices: spec
            .block_device_mappings
            .iter()
            .map(block_device)
            .collect::<Result<_, _>>()?,
        monitoring: spec.detailed_monitoring.unwrap_or(false),
        tags: BTreeMap::from([
            (TAG_CLUSTER.to_owned(), cluster.name.clone()),
            (TAG_NODECLASS.to_owned(), class_name.to_owned()),
        ]),
        capacity_reservation,
    };
    template.name = format!(
        "quartermaster/{}/{}/{}",
        cluster.name,
        class_name,
        content_hash(&template)
    );
    Ok(template)
}

/// 16 hex digits of SHA-256 over everything the template holds.
fn content_hash(t: &LaunchTemplateSpec) -> String {
    let mut h = Sha256::new();
    h.update(format!("{t:?}"));
    let digest = h.finalize();
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use quartermaster_policies::nodeclass::aws::EbsVolume;

    use super::*;

    fn spec() -> AWSNodeClassSpec {
        serde_json::from_value(serde_json::json!({
            "subnetSelectorTerms": [{"tags": {"k": "v"}}],
            "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
            "amiSelectorTerms": [{"id": "ami-1"}],
            "instanceProfile": "nodes",
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}}],
        }))
        .unwrap()
    }

    #[test]
    fn imds_v2_is_required_by_default_and_the_volume_is_in_gib() {
        let t = launch_template(
            &ClusterInfo::default(),
            "gpu",
            &spec(),
            "ami-1",
            vec!["sg-1".into()],
            None,
        )
        .unwrap();
        assert_eq!(t.http_tokens, "required");
        assert_eq!(t.http_put_response_hop_limit, 1);
        assert_eq!(t.block_devices[0].volume_size_gib, Some(100));
        assert_eq!(t.instance_profile.as_deref(), Some("nodes"));
        assert!(t.name.starts_with("quartermaster//gpu/"), "{}", t.name);
    }

    #[test]
    fn another_ami_is_another_template() {
        let a = launch_template(
            &ClusterInfo::default(),
            "gpu",
            &spec(),
            "ami-1",
            vec![],
            None,
        )
        .unwrap();
        let b = launch_template(
            &ClusterInfo::default(),
            "gpu",
            &spec(),
            "ami-2",
            vec![],
            None,
        )
        .unwrap();
        assert_ne!(a.name, b.name);
        let again = launch_template(
            &ClusterInfo::default(),
            "gpu",
            &spec(),
            "ami-1",
            vec![],
            None,
        )
        .unwrap();
        assert_eq!(a.name, again.name);
    }

    #[test]
    fn a_role_without_an_instance_profile_is_a_clear_error() {
        let mut s = spec();
        s.instance_profile = None;
        s.role = Some("KarpenterNodeRole".into());
        let err =
            launch_template(&ClusterInfo::default(), "gpu", &s, "ami-1", vec![], None).unwrap_err();
        assert!(err.to_string().contains("instanceProfile"), "{err}");
    }

    #[test]
    fn a_bad_volume_size_is_an_error() {
        let mut s = spec();
        s.block_device_mappings[0].ebs = Some(EbsVolume {
            volume_size: Some(Quantity("lots".into())),
            ..EbsVolume::default()
        });
        assert!(
            launch_template(&ClusterInfo::default(), "gpu", &s, "ami-1", vec![], None).is_err()
        );
    }

    #[test]
    fn a_reserved_launch_gets_a_template_of_its_own_targeting_the_reservation() {
        let target = crate::port::ReservationTarget {
            id: "cr-0h100block".into(),
            capacity_block: true,
        };
        let plain = launch_template(
            &ClusterInfo::default(),
            "gpu",
            &spec(),
            "ami-1",
            vec![],
            None,
        )
        .unwrap();
        let reserved = launch_template(
            &ClusterInfo::default(),
            "gpu",
            &spec(),
            "ami-1",
            vec![],
            Some(target.clone()),
        )
        .unwrap();
        assert_eq!(reserved.capacity_reservation, Some(target));
        assert_ne!(plain.name, reserved.name, "templates are cached by name");
    }
}
