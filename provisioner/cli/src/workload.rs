//! Reading workload manifests into the solver's snapshot, for the commands that answer
//! what-if questions offline (`plan`, `explain`).

use std::path::PathBuf;

use quartermaster_cluster::{ClusterError, Ingested, SnapshotOptions};
use quartermaster_pricing::Catalog;

use crate::manifests::{Document, read_documents};

/// The snapshot of the given files, and every note said while reading them.
pub struct Loaded {
    /// The snapshot and the ingestion notes.
    pub ingested: Ingested,
    /// Notes from reading the files (each prefixed with its file).
    pub read_notes: Vec<String>,
    /// The objects read (Karpenter ones converted), for what the snapshot does not keep (the
    /// NodeClasses' reservation selectors).
    pub objects: Vec<serde_json::Value>,
}

/// How `plan` and `explain` read the cluster the manifests would run in.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reading<'a> {
    /// NodePools without a NodeClass region buy here (else the catalog's default region of
    /// their cloud).
    pub region: Option<&'a str>,
    /// Apply the `ExtendedResourceToleration` admission plugin to the pods, as such an API
    /// server would.
    pub extended_resource_toleration: bool,
}

/// Reads `files` (files, directories or `-`) and builds the snapshot. An error names the file
/// and, where there is one, the object.
pub fn load(files: &[PathBuf], catalog: &Catalog, reading: Reading<'_>) -> anyhow::Result<Loaded> {
    let mut documents = Vec::new();
    for path in files {
        documents.extend(read_documents(path)?);
    }
    let mut read_notes = Vec::new();
    for d in &documents {
        read_notes.extend(d.notes.iter().map(|n| format!("{}: {n}", d.file.display())));
    }
    let objects: Vec<_> = documents.iter().map(|d| d.value.clone()).collect();
    let options = SnapshotOptions::priced(catalog).in_region(reading.region);
    let mut ingested =
        quartermaster_cluster::snapshot(&objects, options).map_err(|e| with_file(e, &documents))?;
    if reading.extended_resource_toleration {
        let pods =
            quartermaster_cluster::admission::extended_resource_toleration(&mut ingested.snapshot);
        ingested.notes.push(format!(
            "ExtendedResourceToleration applied: {pods} pod(s) tolerate the NoSchedule taints of the extended resources they request"
        ));
    }
    Ok(Loaded {
        ingested,
        read_notes,
        objects,
    })
}

/// Prefixes an ingestion error with the file its object came from (and, for a document that is
/// not a manifest at all, its position in that file).
fn with_file(error: ClusterError, documents: &[Document]) -> anyhow::Error {
    let document = match &error {
        ClusterError::Unidentified { index, .. } => {
            index.checked_sub(1).and_then(|i| documents.get(i))
        }
        ClusterError::Invalid { object, .. } | ClusterError::TooManyResources { object, .. } => {
            documents.iter().find(|d| {
                let v = &d.value;
                let kind = v["kind"].as_str().unwrap_or_default();
                let name = v["metadata"]["name"].as_str().unwrap_or_default();
                let namespace = v["metadata"]["namespace"].as_str().unwrap_or("default");
                *object == format!("{kind}/{namespace}/{name}")
                    || *object == format!("{kind}/{name}")
            })
        }
    };
    let Some(d) = document else {
        return error.into();
    };
    match &error {
        ClusterError::Unidentified { reason, .. } => anyhow::anyhow!(
            "{}: document {}: {reason} (is this a Kubernetes manifest?)",
            d.file.display(),
            d.index
        ),
        _ => anyhow::anyhow!("{}: {error}", d.file.display()),
    }
}
