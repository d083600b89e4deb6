//! Test helpers: objects from YAML, snapshots from YAML.

use serde::Deserialize;
use serde_json::Value;

use crate::{ClusterError, Ingested, SnapshotOptions, snapshot};

/// Every document of a multi-document YAML text.
pub(crate) fn objects(yaml: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(yaml)
        .map(|de| Value::deserialize(de).expect("test YAML parses"))
        .filter(|v| !v.is_null())
        .collect()
}

/// Ingests a multi-document YAML text, panicking on error.
pub(crate) fn ingest(yaml: &str) -> Ingested {
    snapshot(&objects(yaml), SnapshotOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Ingests a multi-document YAML text that must fail.
pub(crate) fn ingest_err(yaml: &str) -> ClusterError {
    match snapshot(&objects(yaml), SnapshotOptions::default()) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

/// A pod with these spec lines (indented under `spec:`).
pub(crate) fn pod(name: &str, spec: &str) -> String {
    let spec: String = spec.lines().map(|l| format!("  {l}\n")).collect();
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ns, labels: {{app: {name}}}}}\nspec:\n{spec}"
    )
}
