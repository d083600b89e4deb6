//! Kubernetes API errors as cloud errors: the engine branches on the variant.

use quartermaster_cloud::CloudError;

/// The HTTP status of an API error response, if the error is one.
pub(crate) fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Whether the API said the object does not exist.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    status_code(e) == Some(404)
}

/// Whether the API said the object already exists or changed under us.
pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409)
}

/// `e`, met while doing `what`, as a cloud error: 429 is throttling, 422 and 400 an invalid
/// request (the Node the launch describes can never be created), anything else transient.
/// Not-found is the caller's to map, since only it knows what was looked for.
pub(crate) fn cloud_error(what: &str, e: kube::Error) -> CloudError {
    match status_code(&e) {
        Some(429) => CloudError::Throttled { retry_after: None },
        Some(400 | 422) => CloudError::InvalidRequest {
            message: format!("{what}: {e}"),
        },
        _ => CloudError::Transient {
            message: format!("{what}: {e}"),
        },
    }
}
