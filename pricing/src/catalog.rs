//! The catalog: a list of instance types, the embedded one and user overrides.

use std::path::Path;
use std::sync::OnceLock;

use crate::file::{self, CatalogFile, CatalogMode};
use crate::{Cloud, InstanceType, PricingError};

/// The embedded data files, in catalog order: `(file name, contents)`.
pub const EMBEDDED_FILES: [(&str, &str); 3] = [
    ("aws.toml", include_str!("../data/aws.toml")),
    ("gcp.toml", include_str!("../data/gcp.toml")),
    ("azure.toml", include_str!("../data/azure.toml")),
];

/// An ordered collection of instance types, unique by `(cloud, name)`.
///
/// It serializes as the list of its instance types.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
#[serde(transparent)]
pub struct Catalog {
    instance_types: Vec<InstanceType>,
}

impl Catalog {
    /// A catalog of the given types (later duplicates of a `(cloud, name)` replace earlier
    /// ones, keeping the earlier position).
    pub fn new(instance_types: Vec<InstanceType>) -> Catalog {
        let mut c = Catalog::default();
        c.merge(instance_types);
        c
    }

    /// The catalog compiled into the binary from `data/aws.toml`, `data/gcp.toml` and
    /// `data/azure.toml`. The data is parsed once per process.
    ///
    /// # Panics
    ///
    /// If the embedded data is invalid — which the crate's unit tests rule out.
    pub fn embedded() -> Catalog {
        static EMBEDDED: OnceLock<Catalog> = OnceLock::new();
        EMBEDDED
            .get_or_init(|| {
                let mut types = Vec::new();
                for (name, text) in EMBEDDED_FILES {
                    let f = Catalog::parse(name, text).unwrap_or_else(|e| {
                        panic!("embedded catalog data is invalid (caught by unit tests): {e}")
                    });
                    types.extend(f.instance_types);
                }
                Catalog::new(types)
            })
            .clone()
    }

    /// Reads and validates a user catalog file.
    pub fn from_path(path: &Path) -> Result<CatalogFile, PricingError> {
        let text = std::fs::read_to_string(path).map_err(|e| PricingError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Catalog::parse(&path.display().to_string(), &text)
    }

    /// Parses and validates catalog-file text; `file_name` is used in error messages.
    pub fn parse(file_name: &str, text: &str) -> Result<CatalogFile, PricingError> {
        file::parse(file_name, text)
    }

    /// Applies an override file: with [`CatalogMode::Replace`] the result holds only the file's
    /// types; with [`CatalogMode::Extend`] (the default) a file type replaces the catalog's
    /// type of the same `(cloud, name)` in place and new types are appended.
    pub fn with_override(mut self, file: CatalogFile) -> Catalog {
        match file.mode {
            CatalogMode::Replace => Catalog::new(file.instance_types),
            CatalogMode::Extend => {
                self.merge(file.instance_types);
                self
            }
        }
    }

    fn merge(&mut self, types: Vec<InstanceType>) {
        for t in types {
            match self
                .instance_types
                .iter_mut()
                .find(|e| e.cloud == t.cloud && e.name == t.name)
            {
                Some(existing) => *existing = t,
                None => self.instance_types.push(t),
            }
        }
    }

    /// All instance types, in catalog order.
    pub fn instance_types(&self) -> &[InstanceType] {
        &self.instance_types
    }

    /// The instance types of one cloud.
    pub fn for_cloud(&self, cloud: Cloud) -> impl Iterator<Item = &InstanceType> {
        self.instance_types.iter().filter(move |t| t.cloud == cloud)
    }

    /// Looks an instance type up by cloud and name.
    pub fn get(&self, cloud: Cloud, name: &str) -> Option<&InstanceType> {
        self.instance_types
            .iter()
            .find(|t| t.cloud == cloud && t.name == name)
    }

    /// Number of instance types.
    pub fn len(&self) -> usize {
        self.instance_types.len()
    }

    /// True if the catalog has no instance types.
    pub fn is_empty(&self) -> bool {
        self.instance_types.is_empty()
    }
}
