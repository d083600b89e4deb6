//! The HTTP pipeline's pieces: a static test token, and the policy that keeps every failed response's ARM error code, status and `Retry-After` (read into an [`ApiError`]).

use super::*;

/// A fixed bearer token (local test servers).
pub(super) struct StaticToken(pub(super) String);

impl std::fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StaticToken(..)")
    }
}

#[async_trait]
impl TokenCredential for StaticToken {
    async fn get_token(
        &self,
        _scopes: &[&str],
    ) -> azure_core::Result<azure_core::auth::AccessToken> {
        Ok(azure_core::auth::AccessToken::new(
            self.0.clone(),
            time::OffsetDateTime::now_utc() + time::Duration::hours(1),
        ))
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        Ok(())
    }
}

/// A failed ARM response, as [`KeepArmErrors`] saw it.
#[derive(Debug)]
pub(super) struct ArmHttpError {
    status: u16,
    code: Option<String>,
    message: String,
    retry_after: Option<Duration>,
}

impl std::fmt::Display for ArmHttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HTTP {} {}: {}",
            self.status,
            self.code.as_deref().unwrap_or("(no code)"),
            self.message
        )
    }
}

impl std::error::Error for ArmHttpError {}

/// Turns every unsuccessful response into an error that keeps ARM's code, message, status and
/// `Retry-After` (azure_core's own error drops the headers).
#[derive(Debug)]
pub(super) struct KeepArmErrors;

#[async_trait]
impl Policy for KeepArmErrors {
    async fn send(
        &self,
        ctx: &Context,
        request: &mut Request,
        next: &[Arc<dyn Policy>],
    ) -> PolicyResult {
        let response = next[0].send(ctx, request, &next[1..]).await?;
        if response.status().is_success() {
            return Ok(response);
        }
        let (status, headers, body) = response.deconstruct();
        let body = body.collect().await.unwrap_or_default();
        let (code, message) = error_of(&json_or_null(&body));
        let error = ArmHttpError {
            status: u16::from(status),
            code: code.clone(),
            message: message.unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned()),
            retry_after: retry_after(&headers),
        };
        Err(azure_core::Error::new(
            ErrorKind::HttpResponse {
                status,
                error_code: code,
            },
            error,
        ))
    }
}

/// The `Retry-After` header in seconds, when present.
pub(super) fn retry_after(headers: &Headers) -> Option<Duration> {
    headers
        .get_optional_str(&HeaderName::from_static("retry-after"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

pub(super) fn header(headers: &Headers, name: &'static str) -> Option<String> {
    headers
        .get_optional_str(&HeaderName::from_static(name))
        .map(str::to_owned)
}

pub(super) fn json_or_null(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

/// ARM's `{"error": {"code", "message"}}` (or the same at the top level).
pub(super) fn error_of(body: &Value) -> (Option<String>, Option<String>) {
    let e = body.get("error").unwrap_or(body);
    let text = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
    (text("code"), text("message"))
}

/// An SDK error as a port error.
pub(super) fn api_error(e: azure_core::Error) -> ApiError {
    if let Some(h) = e.downcast_ref::<ArmHttpError>() {
        return ApiError {
            kind: ApiErrorKind::Service,
            code: h.code.clone(),
            message: h.message.clone(),
            status: Some(h.status),
            retry_after: h.retry_after,
        };
    }
    let kind = match e.kind() {
        ErrorKind::HttpResponse { status, error_code } => {
            return ApiError {
                kind: ApiErrorKind::Service,
                code: error_code.clone(),
                message: e.to_string(),
                status: Some(u16::from(*status)),
                retry_after: None,
            };
        }
        ErrorKind::Credential => ApiErrorKind::Credential,
        ErrorKind::DataConversion => ApiErrorKind::Response,
        _ => ApiErrorKind::Dispatch,
    };
    ApiError::other(kind, e.to_string())
}
