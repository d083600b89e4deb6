//! Reading Kubernetes manifests: multi-document YAML (or JSON), with `kind: List` expanded and
//! Karpenter v1 NodePools and EC2NodeClasses converted to their Quartermaster equivalents.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use quartermaster_policies::karpenter;
use serde::Deserialize;
use serde_json::Value;

/// One object read from a file, with its position for messages.
#[derive(Debug)]
pub struct Document {
    /// The object as JSON (a Karpenter object already converted).
    pub value: Value,
    /// What was done to read it (a Karpenter conversion, fields with no equivalent).
    pub notes: Vec<String>,
    /// The file it was read from (inside the directory when a directory was given; `-` for
    /// standard input).
    pub file: PathBuf,
    /// Its position in that file, from 1 (the items of a `kind: List` each count as one).
    pub index: usize,
}

impl Document {
    /// How messages name the object: `Kind/name`, or `document N` when it has no kind (not a
    /// Kubernetes object at all).
    pub fn what(&self) -> String {
        if self.value.get("kind").and_then(Value::as_str).is_some() {
            describe(&self.value)
        } else {
            format!("document {}", self.index)
        }
    }
}

/// Reads every object in `path` (`-` is standard input). Empty documents are skipped and the
/// `items` of a `kind: List` (as `kubectl get -o yaml` prints) are returned one by one.
pub fn read_documents(path: &Path) -> anyhow::Result<Vec<Document>> {
    Ok(parse_documents_raw(path)?
        .into_iter()
        .map(converted)
        .collect())
}

/// [`read_documents`] without the Karpenter conversion: the objects as written. A directory is
/// read as `kubectl apply -f DIR` reads it: its `*.yaml`, `*.yml` and `*.json` files, sorted by
/// name (not recursive); each document names its own file.
pub fn parse_documents_raw(path: &Path) -> anyhow::Result<Vec<Document>> {
    if path.is_dir() {
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("{}: cannot read the directory", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.extension()
                        .and_then(|x| x.to_str())
                        .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"))
            })
            .collect();
        files.sort();
        if files.is_empty() {
            anyhow::bail!(
                "{}: the directory holds no *.yaml, *.yml or *.json file",
                path.display()
            );
        }
        let mut documents = Vec::new();
        for file in files {
            documents.extend(parse_documents_raw(&file)?);
        }
        return Ok(documents);
    }
    let text = if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
        text
    } else {
        std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?
    };
    // A UTF-8 byte-order mark (editors on Windows write one) is not part of the YAML.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if looks_like_helm_template(text) {
        anyhow::bail!(
            "{}: this is an unrendered Helm template ({{{{ … }}}} expressions); render it first, e.g. `helm template RELEASE CHART > rendered.yaml`",
            path.display()
        );
    }
    let values = parse_values(text).with_context(|| path.display().to_string())?;
    Ok(values
        .into_iter()
        .enumerate()
        .map(|(i, value)| Document {
            value,
            notes: Vec::new(),
            file: path.to_path_buf(),
            index: i + 1,
        })
        .collect())
}

/// Whether `text` holds Go-template expressions outside comments (`{{ .Values.x }}`).
fn looks_like_helm_template(text: &str) -> bool {
    text.lines().any(|line| {
        let code = line.trim_start();
        !code.starts_with('#') && code.contains("{{") && code.contains("}}")
    })
}

/// Parses multi-document YAML text into objects.
#[cfg(test)]
fn parse_documents(text: &str) -> anyhow::Result<Vec<Document>> {
    Ok(parse_values(text)?
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            converted(Document {
                value,
                notes: Vec::new(),
                file: PathBuf::from("test.yaml"),
                index: i + 1,
            })
        })
        .collect())
}

fn parse_values(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut values = Vec::new();
    for (index, de) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(de)
            .with_context(|| format!("document {}: not valid YAML", index + 1))?;
        push_expanded(value, &mut values);
    }
    Ok(values)
}

fn push_expanded(value: Value, values: &mut Vec<Value>) {
    match value {
        Value::Null => {}
        Value::Object(ref map)
            if map
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k == "List" || k.ends_with("List"))
                && map.get("items").is_some_and(Value::is_array) =>
        {
            if let Some(Value::Array(items)) = value.get("items").cloned() {
                for item in items {
                    push_expanded(item, values);
                }
            }
        }
        other => values.push(other),
    }
}

/// A document, converted when it is a Karpenter NodePool or EC2NodeClass.
fn converted(document: Document) -> Document {
    let value = &document.value;
    let Some(c) = karpenter::convert(value, None) else {
        return document;
    };
    let from = format!(
        "{} {}",
        value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or(""),
        describe(value)
    );
    let mut notes = vec![format!(
        "{from} read as {} {} (`quartermaster import karpenter` writes the equivalent manifest)",
        quartermaster_policies::labels::API_VERSION,
        describe(&c.value)
    )];
    notes.extend(
        c.warnings
            .iter()
            .map(|w| format!("{}: {w}", describe(&c.value))),
    );
    Document {
        value: c.value,
        notes,
        ..document
    }
}

/// `kind/name` of a raw object, for messages about objects that failed to parse.
pub fn describe(value: &Value) -> String {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("<no kind>");
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("<no name>");
    format!("{kind}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_and_lists_are_flattened() {
        let text = "---\nkind: A\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {kind: B, metadata: {name: b}}\n- {kind: C, metadata: {name: c}}\n";
        let docs = parse_documents(text).unwrap();
        let names: Vec<String> = docs.iter().map(|d| describe(&d.value)).collect();
        assert_eq!(names, ["A/a", "B/b", "C/c"]);
    }

    #[test]
    fn documents_know_their_file_and_position() {
        let dir = std::env::temp_dir().join(format!("qm-manifests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.yaml"),
            "kind: A\nmetadata: {name: a}\n---\nplain text\n",
        )
        .unwrap();
        std::fs::write(dir.join("b.yml"), "kind: B\nmetadata: {name: b}\n").unwrap();
        let docs = read_documents(&dir).unwrap();
        let seen: Vec<(String, usize, String)> = docs
            .iter()
            .map(|d| {
                let file = d.file.file_name().unwrap().to_string_lossy().into_owned();
                (file, d.index, d.what())
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("a.yaml".to_owned(), 1, "A/a".to_owned()),
                ("a.yaml".to_owned(), 2, "document 2".to_owned()),
                ("b.yml".to_owned(), 1, "B/b".to_owned()),
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn karpenter_objects_are_converted_with_a_note() {
        let text = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: a}\nspec: {role: r, unheardOf: 1}\n";
        let docs = parse_documents(text).unwrap();
        assert_eq!(docs[0].value["kind"], "AWSNodeClass");
        assert_eq!(
            docs[0].notes,
            [
                "karpenter.k8s.aws/v1 EC2NodeClass/a read as quartermaster.dev/v1 AWSNodeClass/a (`quartermaster import karpenter` writes the equivalent manifest)",
                "AWSNodeClass/a: spec.unheardOf: no Quartermaster equivalent; removed"
            ]
        );
    }

    #[test]
    fn broken_yaml_names_the_document() {
        let err = parse_documents("kind: A\n---\nkind: [unclosed\n").unwrap_err();
        assert!(
            format!("{err:#}").starts_with("document 2: not valid YAML"),
            "{err:#}"
        );
    }
}
