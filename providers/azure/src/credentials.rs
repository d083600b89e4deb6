//! Where the controller's Azure credentials come from, and a token probe for `doctor`. Neither
//! ever returns or logs a secret.

use std::time::Duration;

use crate::config::{AzureSettings, CredentialSource};
use crate::error::AzureError;

/// Which source of azure_identity's default chain the environment points at (names of
/// variables only, never their values).
pub fn credential_source(settings: &AzureSettings) -> String {
    if matches!(settings.credentials, CredentialSource::StaticToken(_)) {
        return "a static test token".to_owned();
    }
    let set = |v: &str| std::env::var_os(v).is_some_and(|x| !x.is_empty());
    if set("AZURE_FEDERATED_TOKEN_FILE") {
        "workload identity (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID)"
            .to_owned()
    } else if set("AZURE_CLIENT_SECRET") || set("AZURE_CLIENT_CERTIFICATE_PATH") {
        "a service principal from the environment (AZURE_CLIENT_ID, AZURE_TENANT_ID)".to_owned()
    } else {
        "managed identity or the Azure CLI (no AZURE_* credential variables set)".to_owned()
    }
}

/// Asks the settings' credential for a Resource Manager token within `timeout`.
pub async fn probe_token(settings: &AzureSettings, timeout: Duration) -> Result<(), AzureError> {
    let credential = crate::sdk::credential(&settings.credentials)
        .map_err(|e| AzureError::Settings(e.message))?;
    let scope = format!(
        "{}/{}",
        settings.endpoint().trim_end_matches('/'),
        azure_core::auth::DEFAULT_SCOPE_SUFFIX.trim_start_matches('/')
    );
    match tokio::time::timeout(timeout, credential.get_token(&[scope.as_str()])).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(AzureError::Settings(format!(
            "no token: {}",
            e.to_string().chars().take(400).collect::<String>()
        ))),
        Err(_) => Err(AzureError::Settings(format!(
            "no token within {}s",
            timeout.as_secs()
        ))),
    }
}
