//! Cross-crate tests: the CLI's stable contracts (flags, JSON keys, exit codes), the generated
//! CRDs checked into the chart, and the layering rules of the workspace.

mod bench;
mod catalog;
mod crds;
mod fixtures;
mod labels;
mod layering;
mod plan;
mod simulate;
mod validate;
