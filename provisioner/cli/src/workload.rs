//! Reading workload manifests into the solver's snapshot, for the commands that answer
//! what-if questions offline (`plan`, `explain`).

use std::path::PathBuf;

use quartermaster_cluster::{ClusterError, Ingested};
use quartermaster_pricing::Catalog;

use crate::manifests::{Document, read_documents};

/// The snapshot of the given files, and every note said while reading them.
pub struct Loaded {
    /// The snapshot and the ingestion notes.
    pub ingested: Ingested,
    /// Notes from reading the files (each prefixed with its file).
    pub read_notes: Vec<String>,
}

/// Reads `files` (files, directories or `-`) and builds the snapshot; NodePools without a
/// NodeClass region buy in `region` (else the catalog's default region of their cloud). An
/// error names the file and, where there is one, the object.
pub fn load(files: &[PathBuf], catalog: &Catalog, region: Option<&str>) -> anyhow::Result<Loaded> {
    let mut documents = Vec::new();
    for path in files {
        documents.extend(read_documents(path)?);
    }
    let mut read_notes = Vec::new();
    for d in &documents {
        read_notes.extend(d.notes.iter().map(|n| format!("{}: {n}", d.file.display())));
    }
    let objects: Vec<_> = documents.iter().map(|d| d.value.clone()).collect();
    let ingested = quartermaster_cluster::snapshot_in_region(&objects, catalog, region)
        .map_err(|e| with_file(e, &documents))?;
    Ok(Loaded {
        ingested,
        read_notes,
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
