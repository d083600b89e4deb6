//! Where the controller's Azure credentials come from, and a token probe for `doctor`. Neither
//! ever returns or logs a secret.

use std::time::Duration;

use crate::config::{AzureSettings, CredentialSource};
use crate::errors::AzureError;

/// Which source of azure_identity's default chain the environment points at, and whose
/// credentials they are (the client and tenant ids identify; no secret is ever kept here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A fixed token for a local test server.
    StaticToken,
    /// Azure Workload Identity: the federated token the webhook projects
    /// (`AZURE_FEDERATED_TOKEN_FILE`) exchanged for the app's (`AZURE_CLIENT_ID`) token.
    WorkloadIdentity {
        /// `AZURE_CLIENT_ID`.
        client_id: Option<String>,
        /// `AZURE_TENANT_ID`.
        tenant_id: Option<String>,
        /// `AZURE_FEDERATED_TOKEN_FILE` (`None`: the token is in `AZURE_FEDERATED_TOKEN`).
        token_file: Option<String>,
    },
    /// A service principal from the environment, with a client secret or a certificate.
    ServicePrincipal {
        /// `AZURE_CLIENT_ID`.
        client_id: Option<String>,
        /// `AZURE_TENANT_ID`.
        tenant_id: Option<String>,
        /// `AZURE_CLIENT_SECRET` or `AZURE_CLIENT_CERTIFICATE_PATH` (the variable's name).
        with: &'static str,
    },
    /// No credential variables: a managed identity (user-assigned when `AZURE_CLIENT_ID` is
    /// set) or the Azure CLI's login.
    ManagedIdentityOrCli {
        /// `AZURE_CLIENT_ID`, if set.
        client_id: Option<String>,
    },
}

impl Identity {
    /// Whether the source is missing a variable it needs (workload identity without the
    /// client or tenant id).
    pub fn incomplete(&self) -> bool {
        matches!(self, Self::WorkloadIdentity { client_id, tenant_id, .. } | Self::ServicePrincipal { client_id, tenant_id, .. } if client_id.is_none() || tenant_id.is_none())
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let or_unset = |v: &Option<String>, name: &str| {
            v.clone()
                .unwrap_or_else(|| format!("unset ({name} is missing)"))
        };
        match self {
            Self::StaticToken => f.write_str("a static test token (plain-http endpoint)"),
            Self::WorkloadIdentity {
                client_id,
                tenant_id,
                token_file,
            } => write!(
                f,
                "workload identity: client id {}, tenant {}, federated token {}",
                or_unset(client_id, "AZURE_CLIENT_ID"),
                or_unset(tenant_id, "AZURE_TENANT_ID"),
                match token_file {
                    Some(file) => format!("in {file} (AZURE_FEDERATED_TOKEN_FILE)"),
                    None => "from AZURE_FEDERATED_TOKEN".to_owned(),
                }
            ),
            Self::ServicePrincipal {
                client_id,
                tenant_id,
                with,
            } => write!(
                f,
                "a service principal from the environment: client id {}, tenant {}, with {with}",
                or_unset(client_id, "AZURE_CLIENT_ID"),
                or_unset(tenant_id, "AZURE_TENANT_ID"),
            ),
            Self::ManagedIdentityOrCli { client_id } => match client_id {
                Some(id) => write!(
                    f,
                    "managed identity: client id {id} (user-assigned), or the Azure CLI login; no AZURE_* credential variables set"
                ),
                None => f.write_str(
                    "managed identity (system-assigned) or the Azure CLI login; no AZURE_* credential variables set",
                ),
            },
        }
    }
}

/// The identity `var` (environment variables) points azure_identity's default chain at, in
/// its order: workload identity, a service principal's secret or certificate, then managed
/// identity or the Azure CLI. `settings` with a static token say so.
pub fn identity(settings: &AzureSettings, var: impl Fn(&str) -> Option<String>) -> Identity {
    if matches!(settings.credentials, CredentialSource::StaticToken(_)) {
        return Identity::StaticToken;
    }
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    let client_id = set("AZURE_CLIENT_ID");
    let tenant_id = set("AZURE_TENANT_ID");
    let token_file = set("AZURE_FEDERATED_TOKEN_FILE");
    if token_file.is_some() || set("AZURE_FEDERATED_TOKEN").is_some() {
        return Identity::WorkloadIdentity {
            client_id,
            tenant_id,
            token_file,
        };
    }
    for with in ["AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH"] {
        if set(with).is_some() {
            return Identity::ServicePrincipal {
                client_id,
                tenant_id,
                with,
            };
        }
    }
    Identity::ManagedIdentityOrCli { client_id }
}

/// [`identity`] of this process's environment.
pub fn process_identity(settings: &AzureSettings) -> Identity {
    identity(settings, |name| std::env::var(name).ok())
}

/// Which source of azure_identity's default chain the environment points at, in words (names
/// of variables and ids only, never a secret).
pub fn credential_source(settings: &AzureSettings) -> String {
    process_identity(settings).to_string()
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn of(vars: &[(&str, &str)]) -> Identity {
        let vars: BTreeMap<&str, &str> = vars.iter().copied().collect();
        identity(&AzureSettings::default(), |name| {
            vars.get(name).map(|v| v.to_string())
        })
    }

    const CLIENT: &str = "11111111-2222-3333-4444-555555555555";
    const TENANT: &str = "66666666-7777-8888-9999-000000000000";

    #[test]
    fn workload_identity_shows_the_client_and_tenant_ids_and_the_token_file() {
        let id = of(&[
            ("AZURE_CLIENT_ID", CLIENT),
            ("AZURE_TENANT_ID", TENANT),
            (
                "AZURE_FEDERATED_TOKEN_FILE",
                "/var/run/secrets/azure/tokens/azure-identity-token",
            ),
            ("AZURE_CLIENT_SECRET", "CANARY-SECRET-azure"),
        ]);
        assert!(!id.incomplete());
        let text = id.to_string();
        assert!(
            text.starts_with("workload identity: client id 11111111-"),
            "{text}"
        );
        assert!(text.contains(TENANT), "{text}");
        assert!(text.contains("azure-identity-token"), "{text}");
        assert!(!text.contains("CANARY"), "{text}");
        assert!(!format!("{id:?}").contains("CANARY"));
    }

    #[test]
    fn a_missing_client_id_is_incomplete() {
        let id = of(&[("AZURE_FEDERATED_TOKEN_FILE", "/t")]);
        assert!(id.incomplete());
        assert!(
            id.to_string().contains("AZURE_CLIENT_ID is missing"),
            "{id}"
        );
    }

    #[test]
    fn a_service_principal_names_the_variable_never_the_secret() {
        let id = of(&[
            ("AZURE_CLIENT_ID", CLIENT),
            ("AZURE_TENANT_ID", TENANT),
            ("AZURE_CLIENT_SECRET", "CANARY-SECRET-azure"),
        ]);
        let text = id.to_string();
        assert!(text.contains("with AZURE_CLIENT_SECRET"), "{text}");
        assert!(text.contains(CLIENT), "{text}");
        assert!(!text.contains("CANARY"), "{text}");
    }

    #[test]
    fn nothing_set_is_managed_identity_or_the_cli_and_a_static_token_says_so() {
        assert_eq!(of(&[]), Identity::ManagedIdentityOrCli { client_id: None });
        assert!(
            of(&[("AZURE_CLIENT_ID", CLIENT)])
                .to_string()
                .contains("user-assigned")
        );
        let settings = AzureSettings {
            credentials: CredentialSource::StaticToken("CANARY-SECRET-static".into()),
            ..AzureSettings::default()
        };
        let id = identity(&settings, |_| None);
        assert_eq!(id, Identity::StaticToken);
        assert!(!id.to_string().contains("CANARY"));
    }
}
