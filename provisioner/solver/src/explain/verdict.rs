//! What [`explain`](super::explain) says of the pod and of each candidate: the outcome, and a
//! candidate's verdict (the choice, a cheaper or a dearer fit, or the first reason it was rejected).

use quartermaster_pricing::CapacityType;

/// Where the plan puts the pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// On a node to buy.
    NewNode {
        /// Its NodePool.
        node_pool: String,
        /// Instance type.
        instance_type: String,
        /// Zone.
        zone: String,
        /// Capacity type.
        capacity_type: CapacityType,
        /// Dollars per hour.
        price_per_hour: f64,
        /// How many pods the node holds, this one included.
        pods: usize,
    },
    /// On a node that exists or is already launching, at no added cost.
    Existing {
        /// Node (or NodeClaim) name.
        node: String,
    },
    /// Nowhere.
    Unschedulable {
        /// The solver's reason.
        reason: String,
    },
}

/// Why a candidate offering is not the choice.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The plan's choice.
    Chosen,
    /// It could hold the pod, and costs this much more per hour than the choice.
    MoreExpensive {
        /// Dollars per hour above the choice.
        by_per_hour: f64,
    },
    /// It could hold the pod and is cheaper alone, but the plan shares the chosen node with
    /// other pods, and one of these for each pod of the chosen node costs more than the chosen
    /// node: `alone_per_hour ≥ chosen_per_hour`.
    CheaperAlone {
        /// Pods that share the chosen node.
        shared_with: usize,
        /// One of these for each pod of the chosen node (`(shared_with + 1) × price`).
        alone_per_hour: f64,
        /// The chosen node's price.
        chosen_per_hour: f64,
    },
    /// It could hold the pod and is cheaper, but it does not satisfy a preferred node-affinity
    /// term the plan honours for the pod's group (see `plan`'s preferences).
    Dispreferred {
        /// The preference, e.g. `quartermaster.dev/capacity-type In [spot]`.
        preference: String,
        /// What honouring it costs the plan, when measured.
        cost_per_hour: Option<f64>,
    },
    /// It could hold the pod and is cheaper even as one node for each pod of the chosen node
    /// (`alone_per_hour < chosen_per_hour`): the plan keeps its choice for the pod's topology
    /// spread or pod affinity, or its packing heuristic did not find this one (the plan's gap
    /// to its lower bound says how far from optimal it may be).
    Cheaper {
        /// Pods on the chosen node, this one included.
        pods: usize,
        /// One of these for each of them.
        alone_per_hour: f64,
        /// The chosen node's price.
        chosen_per_hour: f64,
        /// True when the pod has topology spread or pod (anti-)affinity rules in force.
        placed_by_rules: bool,
    },
    /// It cannot hold the pod.
    Rejected(Rejection),
}

/// What rules a candidate out.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// The offering is marked unavailable (a recent insufficient-capacity error) or not offered.
    Unavailable {
        /// Which of the two.
        detail: String,
    },
    /// The NodePool's requirements exclude it.
    PoolRequirement {
        /// The requirement, and what the node would carry.
        detail: String,
    },
    /// The pod does not tolerate one of the pool's taints.
    Taint {
        /// The taint.
        taint: String,
    },
    /// The pod's node selector / required node affinity does not match the node's labels.
    NodeSelector {
        /// The first requirement that fails, and what the node would carry.
        detail: String,
    },
    /// The pod's DRA ResourceClaims: the devices a node of this type would publish cannot
    /// satisfy them.
    Devices {
        /// The request and the selector or constraint that fails.
        detail: String,
    },
    /// Too little of one resource.
    Resources {
        /// Resource name.
        resource: String,
        /// What the pod requests.
        requested: String,
        /// What a node of this type has for pods (allocatable minus DaemonSets).
        available: String,
    },
    /// A NodePool limit (`limits`, `limits.nodes`, `maxHourlyCost`) would be exceeded.
    Limit {
        /// Which limit, and by what.
        detail: String,
    },
    /// The NodePool's `maxGpuOvershoot`: the node has too many more accelerators than the pod
    /// occupies, and a node within the bound is cheaper per accelerator (or none holds it).
    Overshoot {
        /// Accelerators of the node.
        gpus: i64,
        /// Accelerators the pod occupies.
        requested: i64,
        /// The pool's `maxGpuOvershoot`.
        max: u32,
    },
    /// The NodePool's `minValues`: too few distinct values of a key among the offerings that
    /// could hold the pod.
    MinValues {
        /// The requirement and how many values it has.
        detail: String,
    },
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unavailable { detail } => write!(f, "unavailable: {detail}"),
            Self::PoolRequirement { detail } => write!(f, "NodePool requirement: {detail}"),
            Self::Taint { taint } => write!(f, "taint {taint} not tolerated"),
            Self::NodeSelector { detail } => write!(f, "node selector / affinity: {detail}"),
            Self::Devices { detail } => write!(f, "resource claims: {detail}"),
            Self::Resources {
                resource,
                requested,
                available,
            } => write!(
                f,
                "{resource}: requests {requested}, a node has {available} for pods"
            ),
            Self::Limit { detail } => write!(f, "NodePool limit: {detail}"),
            Self::Overshoot {
                gpus,
                requested,
                max,
            } => crate::pack::guard::Overshoot {
                gpus: *gpus,
                requested: *requested,
                max: *max,
            }
            .fmt(f),
            Self::MinValues { detail } => f.write_str(detail),
        }
    }
}

impl Rejection {
    /// The reason without what differs from one candidate to the next (the value the node
    /// would carry, how much a given type has), so candidates ruled out alike count together.
    pub fn summary(&self) -> String {
        let cut = |detail: &str| {
            detail
                .split(" (the node would")
                .next()
                .unwrap_or(detail)
                .to_owned()
        };
        match self {
            Self::PoolRequirement { detail } => format!("NodePool requirement: {}", cut(detail)),
            Self::NodeSelector { detail } => format!("node selector / affinity: {}", cut(detail)),
            Self::Resources {
                resource,
                requested,
                ..
            } => format!("{resource}: requests {requested}, more than a node has for pods"),
            Self::Overshoot { requested, max, .. } => format!(
                "overshoot: more than {max} GPUs beyond the {requested} requested, maxGpuOvershoot {max}"
            ),
            other => other.to_string(),
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Chosen => f.write_str("chosen"),
            Self::MoreExpensive { by_per_hour } => {
                write!(
                    f,
                    "more expensive than the choice by ${by_per_hour:.4}/hour"
                )
            }
            Self::CheaperAlone {
                shared_with,
                alone_per_hour,
                chosen_per_hour,
            } => write!(
                f,
                "cheaper alone, but the choice holds {shared_with} other pod(s) too: {} of these would cost ${alone_per_hour:.4}/hour, the choice ${chosen_per_hour:.4}/hour",
                shared_with + 1
            ),
            Self::Dispreferred {
                preference,
                cost_per_hour,
            } => {
                write!(
                    f,
                    "cheaper, but not {preference}, a preference the plan honours"
                )?;
                match cost_per_hour {
                    Some(c) => write!(f, " (for ${c:.4}/hour)"),
                    None => Ok(()),
                }
            }
            Self::Cheaper {
                pods,
                alone_per_hour,
                chosen_per_hour,
                placed_by_rules,
            } => {
                if *pods > 1 {
                    write!(
                        f,
                        "cheaper, even one for each of the choice's {pods} pods (${alone_per_hour:.4}/hour against ${chosen_per_hour:.4}/hour): "
                    )?;
                } else {
                    write!(
                        f,
                        "cheaper than the choice by ${:.4}/hour: ",
                        chosen_per_hour - alone_per_hour
                    )?;
                }
                f.write_str(if *placed_by_rules {
                    "the pod's topology spread or pod affinity keep it on the choice"
                } else {
                    "the packer's heuristic kept the choice (see the plan's gap to its lower bound)"
                })
            }
            Self::Rejected(r) => r.fmt(f),
        }
    }
}
