//! Reading Kubernetes manifests: multi-document YAML (or JSON), with `kind: List` expanded.

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use serde::Deserialize;
use serde_json::Value;

/// One object read from a file, with its position for messages.
#[derive(Debug)]
pub struct Document {
    /// The object as JSON.
    pub value: Value,
}

/// Reads every object in `path` (`-` is standard input). Empty documents are skipped and the
/// `items` of a `kind: List` (as `kubectl get -o yaml` prints) are returned one by one.
pub fn read_documents(path: &Path) -> anyhow::Result<Vec<Document>> {
    let text = if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
        text
    } else {
        std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?
    };
    parse_documents(&text).with_context(|| path.display().to_string())
}

/// Parses multi-document YAML text into objects.
pub fn parse_documents(text: &str) -> anyhow::Result<Vec<Document>> {
    let mut documents = Vec::new();
    for (index, de) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(de)
            .with_context(|| format!("document {}: not valid YAML", index + 1))?;
        push_expanded(value, &mut documents);
    }
    Ok(documents)
}

fn push_expanded(value: Value, documents: &mut Vec<Document>) {
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
                    push_expanded(item, documents);
                }
            }
        }
        other => documents.push(Document { value: other }),
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
    fn broken_yaml_names_the_document() {
        let err = parse_documents("kind: A\n---\nkind: [unclosed\n").unwrap_err();
        assert!(
            format!("{err:#}").starts_with("document 2: not valid YAML"),
            "{err:#}"
        );
    }
}
