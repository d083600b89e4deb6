//! What NodePools read from their NodeClasses: the cloud of a NodeClass kind, each NodeClass's
//! region and its root volume (for a node's ephemeral-storage).

use std::collections::BTreeMap;

use quartermaster_policies::labels::API_VERSION;
use quartermaster_policies::nodeclass::{KIND_AWS, KIND_AZURE, KIND_GCP};
use quartermaster_policies::quantity::{Millis, parse_quantity};
use quartermaster_pricing::Cloud;
use quartermaster_solver::EphemeralStorage;
use serde_json::Value;

/// The cloud a NodeClass kind belongs to.
pub(crate) fn cloud_of(kind: &str) -> Option<Cloud> {
    match kind {
        KIND_AWS => Some(Cloud::Aws),
        KIND_GCP => Some(Cloud::Gcp),
        KIND_AZURE => Some(Cloud::Azure),
        _ => None,
    }
}

/// The NodeClasses given, by `(kind, name)`, with their region (`spec.region`, or an
/// AzureNodeClass's `spec.location`); `None` when unset.
pub(crate) fn node_class_regions<'a>(
    objects: impl IntoIterator<Item = &'a Value>,
) -> BTreeMap<(String, String), Option<String>> {
    let mut out = BTreeMap::new();
    for o in objects {
        if o.get("apiVersion").and_then(Value::as_str) != Some(API_VERSION) {
            continue;
        }
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
        let field = match kind {
            KIND_AWS | KIND_GCP => "region",
            KIND_AZURE => "location",
            _ => continue,
        };
        let name = o.pointer("/metadata/name").and_then(Value::as_str);
        let region = o
            .get("spec")
            .and_then(|s| s.get(field))
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map(str::to_owned);
        if let Some(name) = name {
            out.insert((kind.to_owned(), name.to_owned()), region);
        }
    }
    out
}

/// What the NodeClasses given say about their nodes' ephemeral storage, by `(kind, name)`:
/// the root volume (AWSNodeClass: the `blockDeviceMappings` entry with `rootVolume: true`, else
/// the only one; GCPNodeClass `disk.sizeGiB`; AzureNodeClass `osDiskSizeGB`) and, for AWS,
/// whether local NVMe holds it (`instanceStorePolicy: RAID0`), as Karpenter computes a node's
/// ephemeral-storage. A NodeClass that says nothing is left out (the type's default stands).
pub(crate) fn node_class_storage<'a>(
    objects: impl IntoIterator<Item = &'a Value>,
) -> BTreeMap<(String, String), EphemeralStorage> {
    const GIB: u64 = 1 << 30;
    let mut out = BTreeMap::new();
    for o in objects {
        if o.get("apiVersion").and_then(Value::as_str) != Some(API_VERSION) {
            continue;
        }
        let (Some(kind), Some(name)) = (
            o.get("kind").and_then(Value::as_str),
            o.pointer("/metadata/name").and_then(Value::as_str),
        ) else {
            continue;
        };
        let spec = o.get("spec");
        let storage = match kind {
            KIND_AWS => {
                let mappings = spec
                    .and_then(|s| s.get("blockDeviceMappings"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let root = mappings
                    .iter()
                    .find(|m| m.get("rootVolume").and_then(Value::as_bool) == Some(true))
                    .or_else(|| (mappings.len() == 1).then(|| &mappings[0]));
                let root_volume_bytes = root
                    .and_then(|m| m.pointer("/ebs/volumeSize"))
                    .and_then(|q| match q {
                        Value::String(t) => parse_quantity(t).ok(),
                        Value::Number(n) => n
                            .as_i64()
                            .map(|g| Millis::from_whole(g.saturating_mul(GIB as i64))),
                        _ => None,
                    })
                    .and_then(|m| u64::try_from(m.to_whole_floor()).ok());
                let raid0 = spec
                    .and_then(|s| s.get("instanceStorePolicy"))
                    .and_then(Value::as_str)
                    == Some("RAID0");
                (root_volume_bytes.is_some() || raid0 || spec.is_some()).then_some(
                    EphemeralStorage {
                        root_volume_bytes,
                        local_nvme: raid0,
                    },
                )
            }
            KIND_GCP => spec
                .and_then(|s| s.pointer("/disk/sizeGiB"))
                .and_then(Value::as_u64)
                .map(|g| EphemeralStorage {
                    root_volume_bytes: Some(g * GIB),
                    local_nvme: false,
                }),
            KIND_AZURE => spec
                .and_then(|s| s.get("osDiskSizeGB"))
                .and_then(Value::as_u64)
                .map(|g| EphemeralStorage {
                    root_volume_bytes: Some(g * GIB),
                    local_nvme: false,
                }),
            _ => None,
        };
        if let Some(storage) = storage {
            out.insert((kind.to_owned(), name.to_owned()), storage);
        }
    }
    out
}
