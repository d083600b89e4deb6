//! Cross-crate tests: the CLI's stable contracts (flags, JSON keys, exit codes), the generated
//! CRDs checked into the chart, and the layering rules of the workspace.

mod admission;
mod bad_input;
mod bench;
mod catalog;
mod catalog_live;
mod chart;
mod corpus_karpenter;
mod corpus_karpenter_workloads;
mod corpus_labels;
mod corpus_workloads;
mod crds;
mod e2e;
mod e2e_api_faults;
mod e2e_gpu_mix;
mod e2e_repair;
mod e2e_restarts;
mod explain;
mod explain_claims;
mod fixtures;
mod focus;
mod gangs;
mod guardrails;
mod labels;
mod layering;
mod node_shape;
mod page;
mod plan;
mod provisioning_request;
mod report;
mod reservations;
mod secrets;
mod simulate;
mod spot_expected_cost;
mod static_pools;
mod validate;
