//! Where the controller's Google credentials come from (Application Default Credentials:
//! `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's ADC file, or the metadata server, which is how
//! GKE Workload Identity hands them out) and whose they are, and an access token for the calls
//! the SDK clients do not make (the Cloud Billing Catalog). Nothing here ever shows a secret:
//! a credentials file is read for its `type` and `client_email` (or the service account it
//! impersonates) only.

use crate::errors::GcpError;

/// Which source of Application Default Credentials the environment points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// The file `GOOGLE_APPLICATION_CREDENTIALS` names.
    EnvironmentFile {
        /// Its path.
        path: String,
    },
    /// gcloud's application default credentials (`gcloud auth application-default login`).
    GcloudFile {
        /// Its path.
        path: String,
    },
    /// The metadata server: GKE Workload Identity, or the VM's service account.
    MetadataServer,
}

impl std::fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::EnvironmentFile { path } => write!(f, "GOOGLE_APPLICATION_CREDENTIALS ({path})"),
            Self::GcloudFile { path } => {
                write!(f, "gcloud application default credentials ({path})")
            }
            Self::MetadataServer => f.write_str(
                "the metadata server (GKE Workload Identity or the VM's service account)",
            ),
        }
    }
}

/// Whose the credentials are, as far as can be told without a secret or a network call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Where they come from.
    pub source: CredentialSource,
    /// The kind of credentials file (`service_account`, `authorized_user`,
    /// `external_account`, `impersonated_service_account`); `None` for the metadata server or
    /// an unreadable file.
    pub kind: Option<String>,
    /// The service account's email (a key's `client_email`, or the account an
    /// `external_account` / impersonation file impersonates); `None` when the file does not say
    /// (a user's credentials) or for the metadata server (it is not asked here).
    pub account: Option<String>,
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.account, self.kind.as_deref()) {
            (Some(account), Some("external_account")) => write!(
                f,
                "service account {account} (workload identity federation) from {}",
                self.source
            ),
            (Some(account), _) => write!(f, "service account {account} from {}", self.source),
            (None, Some("authorized_user")) => {
                write!(f, "a user's gcloud login from {}", self.source)
            }
            (None, Some(kind)) => write!(f, "{kind} credentials from {}", self.source),
            (None, None) if self.source == CredentialSource::MetadataServer => write!(
                f,
                "service account unknown (not asked) from {}",
                self.source
            ),
            (None, None) => write!(f, "unreadable credentials file from {}", self.source),
        }
    }
}

/// The identity `var` (environment variables) and `read` (files) point at, in ADC's order:
/// `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's file under `HOME` (when it exists), the metadata
/// server.
pub fn identity(
    var: impl Fn(&str) -> Option<String>,
    read: impl Fn(&str) -> Option<String>,
) -> Identity {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    let (source, content) = if let Some(path) = set("GOOGLE_APPLICATION_CREDENTIALS") {
        let content = read(&path);
        (CredentialSource::EnvironmentFile { path }, content)
    } else if let Some((path, content)) = set("HOME")
        .map(|home| format!("{home}/.config/gcloud/application_default_credentials.json"))
        .and_then(|path| read(&path).map(|c| (path, c)))
    {
        (CredentialSource::GcloudFile { path }, Some(content))
    } else {
        (CredentialSource::MetadataServer, None)
    };
    let json: Option<serde_json::Value> = content.and_then(|c| serde_json::from_str(&c).ok());
    let field = |name: &str| {
        json.as_ref()
            .and_then(|j| j.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let impersonated = field("service_account_impersonation_url").and_then(|url| {
        // …/projects/-/serviceAccounts/EMAIL:generateAccessToken
        let tail = url.rsplit("/serviceAccounts/").next()?.to_owned();
        let email = tail.split(':').next()?.to_owned();
        email.contains('@').then_some(email)
    });
    Identity {
        source,
        kind: field("type"),
        account: field("client_email").or(impersonated),
    }
}

/// [`identity`] of this process.
pub fn process_identity() -> Identity {
    identity(
        |name| std::env::var(name).ok(),
        |path| {
            let file = std::fs::File::open(path).ok()?;
            if file.metadata().ok()?.len() > 1 << 20 {
                return None;
            }
            std::io::read_to_string(file).ok()
        },
    )
}

/// Where Application Default Credentials will be read from, in words (a path or the metadata
/// server; never the content).
pub fn credentials_source() -> String {
    process_identity().source.to_string()
}

/// An OAuth access token from Application Default Credentials.
pub async fn access_token() -> Result<String, GcpError> {
    // google-cloud-auth is built without a rustls provider of its own: without one installed
    // it panics on its first token (`doctor` and `catalog --live` ask before any client
    // connects). Ring, as `SdkCompute::connect` installs; an earlier one is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let credentials = google_cloud_auth::credentials::Builder::default()
        .build_access_token_credentials()
        .map_err(|e| GcpError::Credentials(e.to_string()))?;
    let token = credentials
        .access_token()
        .await
        .map_err(|e| GcpError::Credentials(e.to_string()))?;
    Ok(token.token)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn of(vars: &[(&str, &str)], files: &[(&str, serde_json::Value)]) -> Identity {
        let vars: BTreeMap<&str, &str> = vars.iter().copied().collect();
        let files: BTreeMap<&str, String> =
            files.iter().map(|(p, j)| (*p, j.to_string())).collect();
        identity(
            |name| vars.get(name).map(|v| v.to_string()),
            |path| files.get(path).cloned(),
        )
    }

    const KEY: &str = "/keys/sa.json";

    #[test]
    fn a_key_file_names_its_service_account_and_never_its_key() {
        let key = serde_json::json!({
            "type": "service_account",
            "project_id": "p",
            "private_key_id": "CANARY-SECRET-key-id",
            "private_key": "-----BEGIN PRIVATE KEY-----\nCANARY-SECRET-key\n-----END PRIVATE KEY-----\n",
            "client_email": "quartermaster@p.iam.gserviceaccount.com",
        });
        let id = of(&[("GOOGLE_APPLICATION_CREDENTIALS", KEY)], &[(KEY, key)]);
        assert_eq!(
            id.account.as_deref(),
            Some("quartermaster@p.iam.gserviceaccount.com")
        );
        let text = id.to_string();
        assert_eq!(
            text,
            "service account quartermaster@p.iam.gserviceaccount.com from GOOGLE_APPLICATION_CREDENTIALS (/keys/sa.json)"
        );
        assert!(!format!("{id:?}").contains("CANARY"));
    }

    #[test]
    fn workload_identity_federation_names_the_impersonated_account() {
        let config = serde_json::json!({
            "type": "external_account",
            "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": "https://sts.googleapis.com/v1/token",
            "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/qm@p.iam.gserviceaccount.com:generateAccessToken",
            "credential_source": {"file": "/var/run/service-account/token"},
        });
        let id = of(&[("GOOGLE_APPLICATION_CREDENTIALS", KEY)], &[(KEY, config)]);
        assert_eq!(id.account.as_deref(), Some("qm@p.iam.gserviceaccount.com"));
        assert!(
            id.to_string().contains("workload identity federation"),
            "{id}"
        );
    }

    #[test]
    fn gcloud_login_then_the_metadata_server() {
        let adc = "/home/me/.config/gcloud/application_default_credentials.json";
        let user = serde_json::json!({"type": "authorized_user", "client_id": "x.apps.googleusercontent.com",
            "client_secret": "CANARY-SECRET-client", "refresh_token": "CANARY-SECRET-refresh"});
        let id = of(&[("HOME", "/home/me")], &[(adc, user)]);
        assert_eq!(
            id.source,
            CredentialSource::GcloudFile {
                path: adc.to_owned()
            }
        );
        assert_eq!(id.account, None);
        assert!(id.to_string().starts_with("a user's gcloud login"), "{id}");
        assert!(!id.to_string().contains("CANARY"));

        let metadata = of(&[("HOME", "/home/me")], &[]);
        assert_eq!(metadata.source, CredentialSource::MetadataServer);
        assert!(
            metadata.to_string().starts_with("service account unknown"),
            "{metadata}"
        );
    }

    #[test]
    fn an_unreadable_file_is_said_so() {
        let id = of(&[("GOOGLE_APPLICATION_CREDENTIALS", "/missing.json")], &[]);
        assert_eq!(
            id.to_string(),
            "unreadable credentials file from GOOGLE_APPLICATION_CREDENTIALS (/missing.json)"
        );
    }
}
