use quartermaster_solver::EphemeralStorage;

use super::*;
use crate::testing::objects;

#[test]
fn node_classes_say_where_ephemeral_storage_lives() {
    let storage = node_class_storage(&objects(
        "apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata: {name: raid}
spec: {instanceStorePolicy: RAID0}
---
apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata: {name: big-root}
spec:
  blockDeviceMappings:
  - {deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 200Gi}}
  - {deviceName: /dev/xvdb, ebs: {volumeSize: 1Ti}}
---
apiVersion: quartermaster.dev/v1
kind: GCPNodeClass
metadata: {name: gke}
spec: {disk: {sizeGiB: 300}}
---
apiVersion: quartermaster.dev/v1
kind: AzureNodeClass
metadata: {name: aks}
spec: {osDiskSizeGB: 256}
---
apiVersion: quartermaster.dev/v1
kind: GCPNodeClass
metadata: {name: silent}
spec: {}
",
    ));
    let get = |k: &str, n: &str| storage.get(&(k.to_owned(), n.to_owned())).copied();
    assert_eq!(
        get(KIND_AWS, "raid"),
        Some(EphemeralStorage {
            root_volume_bytes: None,
            local_nvme: true
        })
    );
    assert_eq!(
        get(KIND_AWS, "big-root"),
        Some(EphemeralStorage {
            root_volume_bytes: Some(200 << 30),
            local_nvme: false
        })
    );
    assert_eq!(
        get(KIND_GCP, "gke").unwrap().root_volume_bytes,
        Some(300 << 30)
    );
    assert_eq!(
        get(KIND_AZURE, "aks").unwrap().root_volume_bytes,
        Some(256 << 30)
    );
    assert_eq!(get(KIND_GCP, "silent"), None);
}
