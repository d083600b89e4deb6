//! KServe (`serving.kserve.io`): an InferenceService's predictor (and transformer, explainer) at
//! `minReplicas` (default 1), and an LLMInferenceService's `spec.template` × `spec.replicas`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::custom::{PodGroup, Raw, group, lookup, number, numbered, parse};
use crate::error::ClusterError;

/// The label with the InferenceService's name.
const ISVC: &str = "serving.kserve.io/inferenceservice";

/// The keys of a component that hold its model server as a container (`model`, or one of the
/// older per-framework keys).
const MODEL_KEYS: [&str; 11] = [
    "model",
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "huggingface",
    "pmml",
    "lightgbm",
    "paddle",
];

/// Each component present: its pod spec is the component object itself (`containers`,
/// `tolerations`, …) with its model server (`model` etc.) as the first container.
pub(super) fn read_inference_service(
    raw: &Raw,
    notes: &mut Vec<String>,
) -> Result<Vec<PodGroup>, ClusterError> {
    let mut groups = Vec::new();
    for component in ["predictor", "transformer", "explainer"] {
        let path = format!("spec.{component}");
        let Some(value) = lookup(&raw.spec, &path) else {
            if component == "predictor" {
                return Err(ClusterError::invalid(&raw.id, path, "missing"));
            }
            continue;
        };
        let mut spec: PodSpec = parse(value, &raw.id, &path)?;
        for key in MODEL_KEYS {
            if let Some(v) = value.get(key).filter(|v| !v.is_null()) {
                let mut server: Container = parse(v, &raw.id, &format!("{path}.{key}"))?;
                if server.name.is_empty() {
                    server.name = "kserve-container".to_owned();
                }
                spec.containers.insert(0, server);
            }
        }
        let labels: BTreeMap<String, String> = value
            .get("labels")
            .map(|v| parse(v, &raw.id, &format!("{path}.labels")))
            .transpose()?
            .unwrap_or_default();
        let n = number(raw, &format!("{path}.minReplicas"), 1)?;
        if value.get("workerSpec").is_some_and(|w| !w.is_null()) {
            notes.push(format!(
                "{}: {path}.workerSpec (multi-node) is not planned yet; only the {component} head pods are",
                raw.id
            ));
        }
        if n == 0 {
            notes.push(format!(
                "{}: {component} scales to zero (minReplicas 0); no pods planned for it",
                raw.id
            ));
        }
        groups.push(group(
            component,
            path,
            (labels, spec),
            &[(ISVC, &raw.name), ("component", component)],
            numbered(&format!("{}-{component}", raw.name), n),
        ));
    }
    Ok(groups)
}

/// `spec.template` × `spec.replicas` (default 1), and the prefill pool (`spec.prefill`) the same
/// way. Multi-node workers (`spec.worker`) are not planned yet: a note says so.
pub(super) fn read_llm_inference_service(
    raw: &Raw,
    notes: &mut Vec<String>,
) -> Result<Vec<PodGroup>, ClusterError> {
    let mut groups = Vec::new();
    for (role, at, suffix) in [
        ("decode", "spec", "kserve"),
        ("prefill", "spec.prefill", "kserve-prefill"),
    ] {
        if lookup(&raw.spec, at).is_none() {
            continue;
        }
        let template = format!("{at}.template");
        let Some(value) = lookup(&raw.spec, &template) else {
            notes.push(format!(
                "{}: no {template} (it comes from spec.baseRefs, which is not given); no {role} pods planned",
                raw.id
            ));
            continue;
        };
        let spec: PodSpec = parse(value, &raw.id, &template)?;
        let n = number(raw, &format!("{at}.replicas"), 1)?;
        if lookup(&raw.spec, &format!("{at}.worker")).is_some() {
            notes.push(format!(
                "{}: {at}.worker (multi-node) is not planned yet; only the {role} leader pods are",
                raw.id
            ));
        }
        groups.push(group(
            role,
            template,
            (BTreeMap::new(), spec),
            &[
                ("app.kubernetes.io/name", &raw.name),
                ("app.kubernetes.io/part-of", "llminferenceservice"),
            ],
            numbered(&format!("{}-{suffix}", raw.name), n),
        ));
    }
    Ok(groups)
}
