//! The catalog: a list of instance types, the embedded one and user overrides.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::file::{self, CatalogFile, CatalogMode, OfferingKey};
use crate::label_cache::{LabelCache, TypeLabels};
use crate::{
    CapacityType, Cloud, InstanceType, InterruptionBand, Offering, PricingError, SpotInterruption,
};

/// The embedded data files, in catalog order: `(file name, contents)`.
pub const EMBEDDED_FILES: [(&str, &str); 3] = [
    ("aws.toml", include_str!("../data/aws.toml")),
    ("gcp.toml", include_str!("../data/gcp.toml")),
    ("azure.toml", include_str!("../data/azure.toml")),
];

/// The embedded generated offerings files, each with the facts file it extends:
/// `(facts file name, offerings file name, contents)` (see [`crate::generated`]).
pub const EMBEDDED_OFFERINGS: [(&str, &str, &str); 6] = [
    (
        "aws.toml",
        "offerings/aws.csv",
        include_str!("../data/offerings/aws.csv"),
    ),
    (
        "aws.toml",
        "offerings/aws-cpu.csv",
        include_str!("../data/offerings/aws-cpu.csv"),
    ),
    (
        "gcp.toml",
        "offerings/gcp.csv",
        include_str!("../data/offerings/gcp.csv"),
    ),
    (
        "gcp.toml",
        "offerings/gcp-cpu.csv",
        include_str!("../data/offerings/gcp-cpu.csv"),
    ),
    (
        "azure.toml",
        "offerings/azure.csv",
        include_str!("../data/offerings/azure.csv"),
    ),
    (
        "azure.toml",
        "offerings/azure-cpu.csv",
        include_str!("../data/offerings/azure-cpu.csv"),
    ),
];

/// The embedded catalog, every region, parsed once per process.
fn embedded_all_regions_shared() -> &'static Catalog {
    static EMBEDDED: OnceLock<Catalog> = OnceLock::new();
    EMBEDDED.get_or_init(|| {
        Catalog::from_sources(&EMBEDDED_FILES, &EMBEDDED_OFFERINGS).unwrap_or_else(|e| {
            panic!("embedded catalog data is invalid (caught by unit tests): {e}")
        })
    })
}

/// Serializes the shared list of instance types as the list itself.
fn serialize_types<S: serde::Serializer>(
    types: &Arc<Vec<InstanceType>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(types.as_slice(), s)
}

/// An ordered collection of instance types, unique by `(cloud, name)`, with each cloud's
/// default region and the interruption bands of spot offerings where known.
///
/// It serializes as the list of its instance types.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
#[serde(transparent)]
pub struct Catalog {
    // Shared by clones (a catalog is cloned by every caller of the embedded one and by every
    // plan); copied on the first change of a shared one.
    #[serde(serialize_with = "serialize_types")]
    instance_types: Arc<Vec<InstanceType>>,
    #[serde(skip)]
    default_regions: BTreeMap<Cloud, String>,
    #[serde(skip)]
    spot_interruptions: BTreeMap<OfferingKey, SpotInterruption>,
    #[serde(skip)]
    labels: LabelCache,
}

impl Catalog {
    /// A catalog of the given types (later duplicates of a `(cloud, name)` replace earlier
    /// ones, keeping the earlier position).
    pub fn new(instance_types: Vec<InstanceType>) -> Catalog {
        let mut c = Catalog::default();
        c.merge(instance_types);
        c
    }

    /// The catalog compiled into the binary, in each cloud's default region only
    /// ([`Catalog::in_default_regions`]: `us-east-1`, `us-central1`, `eastus`) — the one-region
    /// catalog benchmarks, simulated clouds and tests are pinned against. Everything that lets
    /// a user choose a region (`catalog`, `plan`, `simulate`, the controller) reads
    /// [`Catalog::embedded_all_regions`]. The data is parsed once per process.
    ///
    /// # Panics
    ///
    /// If the embedded data is invalid — which the crate's unit tests rule out.
    pub fn embedded() -> Catalog {
        static DEFAULT_REGIONS: OnceLock<Catalog> = OnceLock::new();
        DEFAULT_REGIONS
            .get_or_init(|| embedded_all_regions_shared().in_default_regions())
            .clone()
    }

    /// The catalog compiled into the binary from the curated facts files `data/aws.toml`,
    /// `data/gcp.toml` and `data/azure.toml` and the generated offerings
    /// `data/offerings/<cloud>.csv` and `data/offerings/<cloud>-cpu.csv` of each cloud
    /// ([`Catalog::from_sources`]), every region of every cloud, with each cloud's default
    /// region. The data is parsed once per process.
    ///
    /// # Panics
    ///
    /// If the embedded data is invalid — which the crate's unit tests rule out.
    pub fn embedded_all_regions() -> Catalog {
        embedded_all_regions_shared().clone()
    }

    /// A catalog from facts files `(name, text)` in order, each extended by the generated
    /// offerings files `(facts file name, name, text)` that name it.
    pub fn from_sources(
        facts: &[(&str, &str)],
        offerings: &[(&str, &str, &str)],
    ) -> Result<Catalog, PricingError> {
        let mut catalog = Catalog::default();
        for (name, text) in facts {
            let mut f = Catalog::parse(name, text)?;
            for (_, file, text) in offerings.iter().filter(|(of, _, _)| of == name) {
                crate::generated::apply(file, text, &mut f)?;
            }
            catalog = catalog.with_override(f);
        }
        Ok(catalog)
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
    ///
    /// The file's `default_region` replaces the catalog's for its cloud; its spot interruption
    /// bands replace those of the types it replaces.
    pub fn with_override(mut self, file: CatalogFile) -> Catalog {
        if file.mode == CatalogMode::Replace {
            self = Catalog::default();
        }
        let replaced: BTreeSet<(Cloud, &str)> = file
            .instance_types
            .iter()
            .map(|t| (t.cloud, t.name.as_str()))
            .collect();
        self.spot_interruptions
            .retain(|(cloud, name, _, _), _| !replaced.contains(&(*cloud, name.as_str())));
        self.spot_interruptions.extend(file.spot_interruptions);
        self.default_regions.extend(file.default_regions);
        self.merge(file.instance_types);
        self
    }

    /// Sets the default region of a cloud (see [`Catalog::default_region`]).
    pub fn with_default_region(mut self, cloud: Cloud, region: impl Into<String>) -> Catalog {
        self.default_regions.insert(cloud, region.into());
        self
    }

    /// Records the interruption band of the spot offering of type `name` in `zone`.
    pub fn with_spot_interruption(
        mut self,
        cloud: Cloud,
        name: &str,
        zone: &str,
        interruption: SpotInterruption,
    ) -> Catalog {
        self.spot_interruptions.insert(
            (
                cloud,
                name.to_owned(),
                zone.to_owned(),
                crate::CapacityType::Spot,
            ),
            interruption,
        );
        self
    }

    pub(crate) fn merge(&mut self, types: Vec<InstanceType>) {
        self.labels.clear();
        if types.is_empty() {
            return;
        }
        let list = Arc::make_mut(&mut self.instance_types);
        for t in types {
            match list
                .iter_mut()
                .find(|e| e.cloud == t.cloud && e.name == t.name)
            {
                Some(existing) => *existing = t,
                None => list.push(t),
            }
        }
    }

    /// All instance types, in catalog order.
    pub fn instance_types(&self) -> &[InstanceType] {
        &self.instance_types
    }

    /// The labels of every instance type and offering, index for index with
    /// [`Catalog::instance_types`]; built on first use and shared by clones of the catalog.
    pub fn labels(&self) -> &[TypeLabels] {
        self.labels.get(&self.instance_types)
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

    /// The regions a cloud has offerings in, sorted.
    pub fn regions(&self, cloud: Cloud) -> BTreeSet<&str> {
        self.for_cloud(cloud)
            .flat_map(|t| t.offerings.iter().map(|o| o.region.as_str()))
            .collect()
    }

    /// The region a cloud's machines are bought in when nothing else says where: the
    /// `default_region` a data file names for the cloud (the embedded catalog: `us-east-1`,
    /// `us-central1`, `eastus`), else the cloud's only region. `None` when the cloud has several
    /// regions and no file names a default, or no offerings at all.
    pub fn default_region(&self, cloud: Cloud) -> Option<&str> {
        if let Some(r) = self.default_regions.get(&cloud) {
            return Some(r.as_str());
        }
        let regions = self.regions(cloud);
        match regions.len() {
            1 => regions.into_iter().next(),
            _ => None,
        }
    }

    /// The catalog with a `reserved` offering (priced 0: a reservation is paid whether used or
    /// not) for the type and zone of every reservation that has none yet, copied from the
    /// type's offering in that zone. Reservations of types or zones the catalog lacks are
    /// left out.
    pub fn with_reserved_offerings(&self, reservations: &[crate::Reservation]) -> Catalog {
        let mut changed: Vec<InstanceType> = Vec::new();
        for r in reservations {
            let Some(t) = changed
                .iter()
                .find(|t| t.cloud == r.cloud && t.name == r.instance_type)
                .or_else(|| self.get(r.cloud, &r.instance_type))
            else {
                continue;
            };
            if t.offerings
                .iter()
                .any(|o| o.zone == r.zone && o.capacity_type == CapacityType::Reserved)
            {
                continue;
            }
            let Some(template) = t.offerings.iter().find(|o| o.zone == r.zone) else {
                continue;
            };
            let mut reserved = template.clone();
            reserved.capacity_type = CapacityType::Reserved;
            reserved.price_per_hour = 0.0;
            reserved.available = true;
            reserved.estimate = false;
            reserved.price_source = "reservation (paid whether used or not)".to_owned();
            let mut offerings = t.offerings.clone();
            offerings.push(reserved);
            let updated = t.with_offerings(offerings);
            changed.retain(|c| !(c.cloud == updated.cloud && c.name == updated.name));
            changed.push(updated);
        }
        let mut out = self.clone();
        if !changed.is_empty() {
            out.merge(changed);
        }
        out
    }

    /// The catalog with only the offerings `keep(cloud, region)` accepts; instance types left
    /// with no offering are dropped. Default regions and interruption bands are kept.
    pub fn retain_regions(&self, keep: impl Fn(Cloud, &str) -> bool) -> Catalog {
        // Only the kept offerings are cloned: the embedded catalog has thousands in other regions.
        let instance_types = self
            .instance_types
            .iter()
            .filter_map(|t| {
                let offerings: Vec<Offering> = t
                    .offerings
                    .iter()
                    .filter(|o| keep(t.cloud, &o.region))
                    .cloned()
                    .collect();
                (!offerings.is_empty()).then(|| t.with_offerings(offerings))
            })
            .collect();
        Catalog {
            instance_types: Arc::new(instance_types),
            default_regions: self.default_regions.clone(),
            spot_interruptions: self.spot_interruptions.clone(),
            labels: LabelCache::default(),
        }
    }

    /// The catalog restricted to each cloud's [`Catalog::default_region`] (a cloud without one
    /// keeps every region): what the catalog was before it had several regions per cloud.
    pub fn in_default_regions(&self) -> Catalog {
        let defaults: BTreeMap<Cloud, Option<String>> = Cloud::ALL
            .into_iter()
            .map(|c| (c, self.default_region(c).map(str::to_owned)))
            .collect();
        self.retain_regions(|cloud, region| {
            defaults
                .get(&cloud)
                .and_then(Option::as_deref)
                .is_none_or(|d| d == region)
        })
    }

    /// The interruption band of an offering of `instance_type`, when a source gives one (spot
    /// offerings only; `None` is "unknown", not "never interrupted").
    pub fn spot_interruption(
        &self,
        instance_type: &InstanceType,
        offering: &Offering,
    ) -> Option<&SpotInterruption> {
        self.spot_interruptions.get(&(
            instance_type.cloud,
            instance_type.name.clone(),
            offering.zone.clone(),
            offering.capacity_type,
        ))
    }

    /// [`Offering::expected_cost_per_hour`] with the offering's band from this catalog.
    pub fn expected_cost_per_hour(
        &self,
        instance_type: &InstanceType,
        offering: &Offering,
        restart_cost: f64,
    ) -> f64 {
        let band: Option<InterruptionBand> = self
            .spot_interruption(instance_type, offering)
            .map(|s| s.band);
        offering.expected_cost_per_hour(band, restart_cost)
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
