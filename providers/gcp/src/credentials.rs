//! Where the controller's Google credentials come from (Application Default Credentials:
//! `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's ADC file, or the metadata server, which is how
//! GKE Workload Identity hands them out), and an access token for the calls the SDK clients do
//! not make (the Cloud Billing Catalog). Neither ever shows a secret.

use crate::error::GcpError;

/// Where Application Default Credentials will be read from, in words (a path or the metadata
/// server; never the content).
pub fn credentials_source() -> String {
    if let Some(path) = std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS") {
        return format!(
            "GOOGLE_APPLICATION_CREDENTIALS ({})",
            std::path::Path::new(&path).display()
        );
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    if let Some(file) = home
        .map(|h| h.join(".config/gcloud/application_default_credentials.json"))
        .filter(|f| f.exists())
    {
        return format!(
            "gcloud application default credentials ({})",
            file.display()
        );
    }
    "the metadata server (GKE Workload Identity or the VM's service account)".to_owned()
}

/// An OAuth access token from Application Default Credentials.
pub async fn access_token() -> Result<String, GcpError> {
    let credentials = google_cloud_auth::credentials::Builder::default()
        .build_access_token_credentials()
        .map_err(|e| GcpError::Credentials(e.to_string()))?;
    let token = credentials
        .access_token()
        .await
        .map_err(|e| GcpError::Credentials(e.to_string()))?;
    Ok(token.token)
}
