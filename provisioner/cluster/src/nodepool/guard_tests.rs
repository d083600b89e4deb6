use crate::testing::ingest;

const POOL: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: x}
      maxGpuOvershoot: 2
";

#[test]
fn max_gpu_overshoot_becomes_a_pool_limit() {
    let ingested = ingest(POOL);
    assert_eq!(
        ingested.snapshot.node_pools[0].limits.max_gpu_overshoot,
        Some(2)
    );
    let ingested = ingest(&POOL.replace("      maxGpuOvershoot: 2\n", ""));
    assert_eq!(
        ingested.snapshot.node_pools[0].limits.max_gpu_overshoot,
        None
    );
}
