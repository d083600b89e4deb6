//! One pod's ResourceClaims against the devices of every catalog type.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec};
use quartermaster_policies::Requirements;
use quartermaster_policies::dra::{
    AttributeValue, ClaimRequirements, NodeDevice, SelectorEvaluator, Unsatisfied,
};
use quartermaster_pricing::sharing::GpuSharing;
use quartermaster_pricing::{Catalog, InstanceType};
use quartermaster_solver::resources::{CPU, MEMORY};
use quartermaster_solver::{DeviceFit, NodePoolSpec, Resources};

use super::DraObjects;
use super::classes::with_built_in;
use super::devices::node_devices;

/// What a pod's claims come to.
#[derive(Debug, Clone)]
pub(crate) struct Resolution {
    /// Per instance type: what fits and what does not, and why.
    pub fit: Arc<DeviceFit>,
    /// Whether some claim still needs devices (false when every claim is allocated already or
    /// asks for none): only then are instance types restricted.
    pub needs_devices: bool,
    /// The extended resources the devices count in, with how many the claims take on the types
    /// that fit (`nvidia.com/gpu` × 1; MIG devices in their profiles' resources).
    pub takes: Takes,
    /// Of `takes`, those of claims shared with other pods (`resourceClaimName`, not yet
    /// allocated): taken once, by the first pod that uses the claim.
    pub shared_takes: Takes,
    /// The NodePools whose nodes publish the devices planned for (a MIG layout's pools, or the
    /// others), when some pool has a MIG layout; `None`: any pool.
    pub pools: Option<Vec<String>>,
    /// `ResourceClaim/<namespace>/<name>` of the shared, unallocated claims.
    pub shared: Vec<String>,
    /// Node terms (ORed) of claims already allocated: the pod can only run where its devices
    /// are. Empty when none is allocated.
    pub pinned: Vec<Requirements>,
}

/// Devices taken, by the extended resource they count in, in name order.
pub(crate) type Takes = Vec<(String, u32)>;

/// A claim of the pod, ready to allocate.
struct PodClaim {
    /// `ResourceClaimTemplate/<ns>/<name>` or `ResourceClaim/<ns>/<name>`.
    id: String,
    requirements: ClaimRequirements,
    shared: bool,
}

/// A catalog type that publishes devices, as the nodes of some pools would.
struct TypeDevices<'a> {
    it: &'a InstanceType,
    /// The MIG layout its GPUs are partitioned by in `pools`; `None`: whole GPUs.
    variant: Option<String>,
    /// The pools whose nodes of this type publish these devices.
    pools: Vec<String>,
    devices: Result<Vec<NodeDevice>, String>,
    /// Its cheapest available offering, dollars per hour (infinite when none).
    price: f64,
}

/// Resolves pods' claims for one snapshot: DeviceClasses, device models and results are
/// computed once and shared by every pod with the same claims.
pub(crate) struct Resolver<'a> {
    objects: &'a DraObjects,
    classes: BTreeMap<String, DeviceClass>,
    catalog: Option<&'a Catalog>,
    pools: &'a [NodePoolSpec],
    evaluator: SelectorEvaluator,
    types: Option<Vec<TypeDevices<'a>>>,
    cache: HashMap<String, Option<Arc<Resolution>>>,
}

impl<'a> Resolver<'a> {
    /// A resolver over the DRA objects given and the catalog's types that some NodePool of
    /// `pools` may buy (its cloud, and its requirements on the type's own labels; every type
    /// when there is no pool).
    pub fn new(
        objects: &'a DraObjects,
        catalog: Option<&'a Catalog>,
        pools: &'a [NodePoolSpec],
    ) -> Self {
        Self {
            objects,
            classes: with_built_in(&objects.classes),
            catalog,
            pools,
            evaluator: SelectorEvaluator::default(),
            types: None,
            cache: HashMap::new(),
        }
    }

    /// What the claims of a pod in `namespace` with `spec` and `requests` (its other
    /// resources) come to; `None` when it has no claims (or no catalog to plan them with).
    /// Where types differ in the devices they would give, the pod is planned as on the
    /// cheapest type that satisfies the claims and holds its CPU and memory.
    pub fn resolve(
        &mut self,
        namespace: &str,
        spec: &PodSpec,
        requests: &Resources,
    ) -> Option<Arc<Resolution>> {
        let refs = spec.resource_claims.as_ref().filter(|c| !c.is_empty())?;
        self.catalog?;
        let (cpu, memory) = (requests.get(CPU), requests.get(MEMORY));
        let key = format!("{namespace}|{cpu}|{memory}|{refs:?}");
        if let Some(done) = self.cache.get(&key) {
            return done.clone();
        }
        let resolution = self
            .resolve_uncached(namespace, spec, (cpu, memory))
            .map(Arc::new);
        self.cache.insert(key, resolution.clone());
        resolution
    }

    fn resolve_uncached(
        &mut self,
        namespace: &str,
        spec: &PodSpec,
        (cpu, memory): (i64, i64),
    ) -> Option<Resolution> {
        let mut claims = Vec::new();
        let mut pinned: Vec<Requirements> = Vec::new();
        let mut problem: Option<String> = None;
        let mut ids = Vec::new();
        for r in spec.resource_claims.iter().flatten() {
            let (id, claim_spec, shared): (String, Option<&ResourceClaimSpec>, bool) =
                match (&r.resource_claim_name, &r.resource_claim_template_name) {
                    (Some(name), _) => {
                        let id = format!("ResourceClaim/{namespace}/{name}");
                        let key = (namespace.to_owned(), name.clone());
                        match self.objects.claims.get(&key) {
                            Some(claim) => {
                                let allocation =
                                    claim.status.as_ref().and_then(|s| s.allocation.as_ref());
                                if let Some(allocation) = allocation {
                                    pinned = and_node_terms(
                                        &pinned,
                                        &node_terms(allocation.node_selector.as_ref()),
                                    );
                                    ids.push(id);
                                    continue;
                                }
                                (id, Some(&claim.spec), true)
                            }
                            None => (id, None, true),
                        }
                    }
                    (None, Some(name)) => {
                        let id = format!("ResourceClaimTemplate/{namespace}/{name}");
                        let key = (namespace.to_owned(), name.clone());
                        let spec = self.objects.templates.get(&key).map(|t| &t.spec.spec);
                        (id, spec, false)
                    }
                    (None, None) => continue,
                };
            ids.push(id.clone());
            let Some(claim_spec) = claim_spec else {
                problem.get_or_insert(format!("{id} is not given"));
                continue;
            };
            match ClaimRequirements::from_spec(claim_spec, &self.classes) {
                Ok(requirements) if requirements.is_empty() => {}
                Ok(requirements) => claims.push(PodClaim {
                    id,
                    requirements,
                    shared,
                }),
                Err(e) => {
                    problem.get_or_insert(format!("{id}: {e}"));
                }
            }
        }
        if claims.is_empty() && problem.is_none() {
            // Every claim is allocated already (pinned) or asks for nothing.
            return Some(Resolution {
                fit: Arc::new(DeviceFit {
                    claims: ids,
                    ..DeviceFit::default()
                }),
                needs_devices: false,
                takes: Vec::new(),
                shared_takes: Vec::new(),
                pools: None,
                shared: Vec::new(),
                pinned,
            });
        }
        let shared: Vec<String> = claims
            .iter()
            .filter(|c| c.shared)
            .map(|c| c.id.clone())
            .collect();
        let mut fit = DeviceFit {
            claims: ids,
            ..DeviceFit::default()
        };
        self.ensure_types();
        let types = self.types.as_deref().unwrap_or_default();
        // Types (per MIG variant) whose devices satisfy the claims, with what they take, the
        // part of it shared claims take, and the requests chosen.
        let mut feasible: Vec<(&TypeDevices<'_>, Takes, Takes, String)> = Vec::new();
        for t in types {
            if let Some(p) = &problem {
                fit.ruled_out.insert(t.it.name.clone(), p.clone());
                continue;
            }
            match allocate(&claims, t, &self.evaluator) {
                Ok((takes, shared_takes, choice)) => {
                    feasible.push((t, takes, shared_takes, choice));
                }
                Err(why) => {
                    // A type some variant satisfies is not ruled out by another's failure.
                    fit.ruled_out.entry(t.it.name.clone()).or_insert(why);
                }
            }
        }
        let holds = |it: &InstanceType| {
            let cpu_left =
                i64::from(it.vcpu) * 1000 - i64::try_from(it.overhead.cpu_millis).unwrap_or(0);
            let memory_left = i64::try_from(it.memory_mib.saturating_sub(it.overhead.memory_mib))
                .unwrap_or(i64::MAX / (1 << 20))
                * (1 << 20);
            cpu <= cpu_left && memory <= memory_left
        };
        let cheaper = |a: &&(&TypeDevices<'_>, Takes, Takes, String),
                       b: &&(&TypeDevices<'_>, Takes, Takes, String)| {
            a.0.price
                .total_cmp(&b.0.price)
                .then(a.0.it.name.cmp(&b.0.it.name))
        };
        let cheapest = feasible
            .iter()
            .filter(|f| holds(f.0.it))
            .min_by(cheaper)
            .or_else(|| feasible.iter().min_by(cheaper));
        let Some((best, takes, shared_takes, choice)) = cheapest.cloned() else {
            return Some(Resolution {
                fit: Arc::new(fit),
                needs_devices: true,
                takes: Vec::new(),
                shared_takes: Vec::new(),
                pools: None,
                shared,
                pinned,
            });
        };
        let mut differ = false;
        let mut pools: Vec<String> = Vec::new();
        for (t, tk, _, ch) in &feasible {
            if t.variant == best.variant && *tk == takes {
                fit.ruled_out.remove(&t.it.name);
                fit.fits.insert(t.it.name.clone(), total(tk));
                pools.extend(t.pools.iter().cloned());
            } else if !fit.fits.contains_key(&t.it.name) {
                differ = true;
                fit.ruled_out.insert(
                    t.it.name.clone(),
                    format!(
                        "takes {} ({ch}{}); the pod is planned for {}, as on {} (${:.2}/h), the \
                         cheapest type that satisfies its claims and holds its CPU and memory",
                        show(tk),
                        t.variant
                            .as_ref()
                            .map_or_else(String::new, |v| format!(", MIG layout {v}")),
                        show(&takes),
                        best.it.name,
                        best.price
                    ),
                );
            }
        }
        if differ {
            fit.choice = Some(format!("{choice} on {}", best.it.name));
        }
        pools.sort();
        pools.dedup();
        let any_mig = self.pools.iter().any(|p| mig_config(p).is_some());
        Some(Resolution {
            fit: Arc::new(fit),
            needs_devices: true,
            takes,
            shared_takes,
            pools: (any_mig && !pools.is_empty()).then_some(pools),
            shared,
            pinned,
        })
    }

    /// Builds, once, the catalog's types that publish devices (once per MIG layout some pool
    /// that may buy them partitions their GPUs by, and once whole for the other pools), with
    /// their devices.
    fn ensure_types(&mut self) {
        if self.types.is_some() {
            return;
        }
        let overrides = &self.objects.overrides;
        let mut out = Vec::new();
        for it in self.catalog.into_iter().flat_map(Catalog::instance_types) {
            let labels = Requirements::from_labels(&it.labels());
            // Variant (None: whole GPUs) -> the pools that buy the type so.
            let mut variants: BTreeMap<Option<String>, Vec<String>> = BTreeMap::new();
            if self.pools.is_empty() {
                variants.insert(None, Vec::new());
            }
            for p in self.pools {
                if p.cloud != it.cloud || p.requirements.compatible(&labels).is_err() {
                    continue;
                }
                variants
                    .entry(mig_config(p).map(str::to_owned))
                    .or_default()
                    .push(p.name.clone());
            }
            for (variant, pools) in variants {
                let devices = match &variant {
                    None => node_devices(it, None, overrides),
                    Some(config) => {
                        let layout = it
                            .accelerator
                            .as_ref()
                            .and_then(|a| quartermaster_pricing::sharing::mig_layout(a, config));
                        let Some(layout) = layout else { continue };
                        node_devices(it, Some(layout), overrides)
                    }
                };
                if devices.as_ref().is_ok_and(Vec::is_empty) {
                    continue;
                }
                out.push(TypeDevices {
                    it,
                    variant,
                    pools,
                    devices,
                    price: it
                        .offerings
                        .iter()
                        .filter(|o| o.available)
                        .map(|o| o.price_per_hour)
                        .fold(f64::INFINITY, f64::min),
                });
            }
        }
        self.types = Some(out);
    }
}

/// The MIG layout a pool partitions its GPUs by, when it names one (`gpuSharing: {strategy:
/// mig, migConfig: ...}`).
fn mig_config(pool: &NodePoolSpec) -> Option<&str> {
    match &pool.node_shape.gpu_sharing {
        Some(GpuSharing::Mig { config }) => Some(config),
        _ => None,
    }
}

/// All the devices of `takes`.
fn total(takes: &Takes) -> u32 {
    takes.iter().map(|(_, n)| n).sum()
}

/// `takes` for people: `1 nvidia.com/gpu`, `2 nvidia.com/mig-1g.5gb + 1 nvidia.com/mig-3g.20gb`.
fn show(takes: &Takes) -> String {
    takes
        .iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Allocates every claim on one node of `t`, each after the previous ones: the devices taken,
/// those of shared claims, and the requests (or subrequests) chosen; or why not.
fn allocate(
    claims: &[PodClaim],
    t: &TypeDevices<'_>,
    evaluator: &SelectorEvaluator,
) -> Result<(Takes, Takes, String), String> {
    let devices = t
        .devices
        .as_ref()
        .map_err(|e| format!("device model: {e}"))?;
    if devices.is_empty() {
        return Err("a node of this type publishes no devices".to_owned());
    }
    let mut taken = vec![false; devices.len()];
    let mut takes: BTreeMap<String, u32> = BTreeMap::new();
    let mut shared_takes: BTreeMap<String, u32> = BTreeMap::new();
    let mut chosen: Vec<String> = Vec::new();
    for claim in claims {
        match claim.requirements.allocate_free(devices, &taken, evaluator) {
            Ok(allocation) => {
                for d in &allocation.devices {
                    let Some(i) = devices
                        .iter()
                        .position(|n| n.driver == d.driver && n.name == d.device)
                    else {
                        continue;
                    };
                    taken[i] = true;
                    if !chosen.contains(&d.request) {
                        chosen.push(d.request.clone());
                    }
                    let resource = resource_for(&devices[i], t.it);
                    if claim.shared {
                        *shared_takes.entry(resource.clone()).or_default() += 1;
                    }
                    *takes.entry(resource).or_default() += 1;
                }
            }
            Err(why) => {
                let selector = match &why {
                    Unsatisfied::TooFewDevices { request, .. } => claim
                        .requirements
                        .blocking_selector(request, devices, evaluator),
                    _ => None,
                };
                return Err(match selector {
                    Some(s) => format!("{}: {why}: {s}", claim.id),
                    None => format!("{}: {why}", claim.id),
                });
            }
        }
    }
    Ok((
        takes.into_iter().collect(),
        shared_takes.into_iter().collect(),
        format!("request {}", chosen.join(", ")),
    ))
}

/// The extended resource `device` of a node of `it` counts in: an NVIDIA MIG device in its
/// profile's (`nvidia.com/mig-1g.5gb`), else the well-known drivers' (`gpu.nvidia.com` →
/// `nvidia.com/gpu`), else the type's accelerator resource when the driver is its domain (the
/// generic device form), else a resource named after the driver (an override's; its
/// NodeOverlay gives the types that much of it).
fn resource_for(device: &NodeDevice, it: &InstanceType) -> String {
    let driver = device.driver.as_str();
    let text = |name: &str| match device.attribute(&format!("{driver}/{name}")) {
        Some(AttributeValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    if driver == "gpu.nvidia.com"
        && text("type") == Some("mig")
        && let Some(profile) = text("profile")
    {
        return quartermaster_pricing::sharing::mig_resource(profile);
    }
    if let Some(r) = super::resource_of_driver(driver) {
        return r.to_owned();
    }
    if let Some(a) = &it.accelerator
        && a.resource.split('/').next() == Some(driver)
    {
        return a.resource.clone();
    }
    driver.to_owned()
}

/// A NodeSelector's terms as requirements: labels by `matchExpressions`, the node's name
/// (`matchFields` on `metadata.name`) by its hostname label.
fn node_terms(selector: Option<&k8s_openapi::api::core::v1::NodeSelector>) -> Vec<Requirements> {
    let Some(selector) = selector else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for term in &selector.node_selector_terms {
        let mut reqs = term
            .match_expressions
            .as_deref()
            .and_then(|e| Requirements::from_k8s(e).ok())
            .unwrap_or_default();
        for f in term.match_fields.iter().flatten() {
            if f.key == "metadata.name" {
                let as_label = k8s_openapi::api::core::v1::NodeSelectorRequirement {
                    key: quartermaster_solver::pod::HOSTNAME.to_owned(),
                    ..f.clone()
                };
                if let Ok(r) = Requirements::from_k8s(&[as_label]) {
                    reqs = reqs.intersect(&r);
                }
            }
        }
        out.push(reqs);
    }
    out
}

/// Terms that hold where a term of `a` and a term of `b` both do (`a` empty: `b`).
pub(crate) fn and_node_terms(a: &[Requirements], b: &[Requirements]) -> Vec<Requirements> {
    if a.is_empty() {
        return b.to_vec();
    }
    if b.is_empty() {
        return a.to_vec();
    }
    a.iter()
        .flat_map(|x| b.iter().map(move |y| x.intersect(y)))
        .collect()
}
