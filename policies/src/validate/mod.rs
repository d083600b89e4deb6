//! Validation (stub).
/// A problem.
#[derive(Debug)]
pub struct FieldError;
/// A validated object.
#[derive(Debug)]
pub enum ValidatedObject {}
/// Validates.
pub fn validate_manifest(_doc: &serde_json::Value) -> Result<ValidatedObject, Vec<FieldError>> {
    Err(vec![])
}
