//! Keeping secrets out of everything Quartermaster prints: logs, Kubernetes Events, NodeClaim
//! conditions, metrics, `/cost`, reports and CLI output.
//!
//! Two tools:
//! - [`Sensitive`]: a value whose `Debug` and `Display` print `<redacted>`, for fields that hold
//!   a secret (user data, a bootstrap token, a credential) inside structs that derive `Debug`.
//! - [`Secrets`]: the secret values known where an error is made (a NodeClass's `userData`, a
//!   GCP `kube-env`, Azure bootstrap custom data), scrubbed from text that may echo them: a
//!   cloud API that rejects a launch sometimes quotes the offending field in its message, and
//!   that message becomes a log line, an Event and a NodeClaim condition.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// What a secret is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Needles shorter than this are not scrubbed: short values (`true`, `1`, a zone) are not
/// secrets, and replacing them would mangle ordinary words of a message.
const MIN_NEEDLE: usize = 8;

/// Single words of a secret at least this long are scrubbed on their own (a token, a key, a
/// JWT quoted without the rest of its line); shorter words are ordinary text.
const MIN_WORD: usize = 16;

/// A value that never shows itself: `Debug` and `Display` print `<redacted>`. Read it with
/// [`Sensitive::expose`].
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Sensitive<T>(pub T);

impl<T> Sensitive<T> {
    /// The value itself, for the one place that must send it (the cloud API call).
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> std::fmt::Debug for Sensitive<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<T> std::fmt::Display for Sensitive<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Secret values to scrub from text: each value as it is, each of its lines (an API may quote
/// one line, or re-wrap the value), each long word (a token quoted alone), and the base64 of
/// each (user data travels base64-encoded, so an echo of the request carries it in that form,
/// at any alignment).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    needles: Vec<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} needles)", self.needles.len())
    }
}

impl Secrets {
    /// No secrets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `secret` (and its lines, and their base64 forms) to the values scrubbed.
    pub fn add(&mut self, secret: &str) {
        let mut pieces: Vec<&str> = vec![secret.trim()];
        pieces.extend(secret.lines().map(str::trim));
        pieces.extend(
            secret
                .split(|c: char| c.is_whitespace() || "=:\"',;()[]{}<>\\".contains(c))
                .filter(|w| w.len() >= MIN_WORD),
        );
        for piece in pieces {
            if piece.len() < MIN_NEEDLE {
                continue;
            }
            self.push(piece.to_owned());
            for core in base64_cores(piece.as_bytes()) {
                self.push(core);
            }
        }
        // Longest first, so a value is replaced whole before any of its lines.
        self.needles
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    /// These secrets and `other`'s.
    pub fn with(mut self, other: &Secrets) -> Self {
        for n in &other.needles {
            self.push(n.clone());
        }
        self.needles
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        self
    }

    fn push(&mut self, needle: String) {
        if needle.len() >= MIN_NEEDLE && !self.needles.contains(&needle) {
            self.needles.push(needle);
        }
    }

    /// Whether there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// `text` with every secret replaced by `<redacted>`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for needle in &self.needles {
            if out.contains(needle.as_str()) {
                out = out.replace(needle.as_str(), REDACTED);
            }
        }
        out
    }
}

/// Environment variables whose values are credentials (never their names' neighbours such as
/// `AWS_ACCESS_KEY_ID` or `AZURE_CLIENT_ID`, which identify and may be shown).
pub const CREDENTIAL_VARIABLES: &[&str] = &[
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PASSWORD",
    "AZURE_FEDERATED_TOKEN",
    "AZURE_PASSWORD",
    "GCP_BILLING_API_KEY",
];

/// Environment variables naming files whose whole content is a credential (projected service
/// account tokens).
pub const CREDENTIAL_TOKEN_FILES: &[&str] = &[
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AZURE_FEDERATED_TOKEN_FILE",
];

/// The fields of a Google credentials file (service account key, gcloud's authorized user)
/// that are secrets; the rest (`client_email`, `client_id`, `project_id`) identify.
const GOOGLE_SECRET_FIELDS: &[&str] = &[
    "private_key",
    "private_key_id",
    "client_secret",
    "refresh_token",
];

/// Files larger than this are not read for secrets (a token is a few kilobytes).
const MAX_SECRET_FILE: u64 = 64 * 1024;

/// How long [`Secrets::of_process`] keeps what it read.
const REREAD_AFTER: Duration = Duration::from_secs(60);

impl Secrets {
    /// The credentials the environment holds for the clouds' SDK chains: the values of
    /// [`CREDENTIAL_VARIABLES`], the content of [`CREDENTIAL_TOKEN_FILES`], and the secret
    /// fields of the Google credentials file (`GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's
    /// application default credentials under `HOME`). `var` reads a variable, `read` a file
    /// (both injected, so tests need not touch the process environment).
    pub fn from_environment(
        var: impl Fn(&str) -> Option<String>,
        read: impl Fn(&str) -> Option<String>,
    ) -> Secrets {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let mut secrets = Secrets::new();
        for name in CREDENTIAL_VARIABLES {
            if let Some(value) = set(name) {
                secrets.add(&value);
            }
        }
        for name in CREDENTIAL_TOKEN_FILES {
            if let Some(content) = set(name).and_then(|path| read(&path)) {
                secrets.add(&content);
            }
        }
        let google = set("GOOGLE_APPLICATION_CREDENTIALS").or_else(|| {
            set("HOME")
                .map(|home| format!("{home}/.config/gcloud/application_default_credentials.json"))
        });
        if let Some(json) = google.and_then(|path| read(&path)) {
            secrets.add_google_credentials(&json);
        }
        secrets
    }

    /// The secret fields of a Google credentials file (JSON); nothing when it is not JSON.
    fn add_google_credentials(&mut self, json: &str) {
        let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(json) else {
            return;
        };
        for field in GOOGLE_SECRET_FIELDS {
            if let Some(value) = fields.get(*field).and_then(|v| v.as_str()) {
                self.add(value);
            }
        }
    }

    /// [`Secrets::from_environment`] of this process, read again when a minute old (projected
    /// service account tokens are rotated while the controller runs).
    pub fn of_process() -> Arc<Secrets> {
        static PROCESS: Mutex<Option<(Instant, Arc<Secrets>)>> = Mutex::new(None);
        let mut cached = PROCESS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((read_at, secrets)) = cached.as_ref()
            && read_at.elapsed() < REREAD_AFTER
        {
            return secrets.clone();
        }
        let secrets = Arc::new(Secrets::from_environment(
            |name| std::env::var(name).ok(),
            |path| {
                let file = std::fs::File::open(path).ok()?;
                if file.metadata().ok()?.len() > MAX_SECRET_FILE {
                    return None;
                }
                std::io::read_to_string(file).ok()
            },
        ));
        *cached = Some((Instant::now(), secrets.clone()));
        secrets
    }
}

/// The base64 characters that encode `bytes` whatever precedes and follows them: for each of
/// the three alignments, the encoding without its first and last group of four characters
/// (those may mix in neighbouring bytes).
fn base64_cores(bytes: &[u8]) -> Vec<String> {
    let mut cores = Vec::new();
    for offset in 0..3 {
        let mut padded = vec![0u8; offset];
        padded.extend_from_slice(bytes);
        let encoded = STANDARD.encode(&padded);
        let encoded = encoded.trim_end_matches('=');
        let start = if offset == 0 { 0 } else { 4 };
        // Drop the last (possibly partial) group: the bytes after the secret change it.
        let end = encoded.len().saturating_sub(4);
        if end > start + MIN_NEEDLE {
            cores.push(encoded[start..end].to_owned());
        }
    }
    cores
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANARY: &str = "CANARY-SECRET-7f3a9c1e";

    #[test]
    fn sensitive_values_never_print() {
        let s = Sensitive(CANARY.to_owned());
        assert_eq!(format!("{s:?}"), REDACTED);
        assert_eq!(format!("{s}"), REDACTED);
        assert_eq!(
            format!("{:?}", Some(s.clone())),
            format!("Some({REDACTED})")
        );
        assert_eq!(s.expose(), CANARY);
    }

    #[test]
    fn a_secret_its_lines_and_its_base64_at_any_alignment_are_scrubbed() {
        let user_data = format!("#!/bin/bash\nexport TOKEN={CANARY}\n/etc/eks/bootstrap.sh\n");
        let mut secrets = Secrets::new();
        secrets.add(&user_data);
        let echoed = format!("InvalidParameterValue: bad user data {user_data:?}");
        assert!(
            !secrets.scrub(&echoed).contains(CANARY),
            "{}",
            secrets.scrub(&echoed)
        );
        let one_line = format!("Invalid value for field 'metadata': 'export TOKEN={CANARY}'");
        let scrubbed = secrets.scrub(&one_line);
        assert!(!scrubbed.contains(CANARY), "{scrubbed}");
        assert!(scrubbed.contains(REDACTED), "{scrubbed}");
        // The whole document, base64-encoded after an unknown prefix of 0, 1 or 2 bytes.
        for prefix in ["", "M", "MI"] {
            let doc = format!("{prefix}MIME-Version: 1.0\n\n{user_data}--//--\n");
            let b64 = STANDARD.encode(doc.as_bytes());
            let text = format!("the template's UserData {b64} is too long");
            let scrubbed = secrets.scrub(&text);
            for core in base64_cores(CANARY.as_bytes()) {
                assert!(!scrubbed.contains(&core), "{prefix:?}: {scrubbed}");
            }
        }
    }

    #[test]
    fn credentials_of_the_environment_are_secrets_and_identifiers_are_not() {
        let env = std::collections::BTreeMap::from([
            ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEYID1234"),
            ("AWS_SECRET_ACCESS_KEY", "CANARY-SECRET-aws-secret-key"),
            ("AWS_SESSION_TOKEN", "CANARY-SECRET-aws-session-token"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/token/irsa"),
            ("AZURE_CLIENT_ID", "00000000-1111-2222-3333-444444444444"),
            ("AZURE_CLIENT_SECRET", "CANARY-SECRET-azure-client-secret"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/keys/sa.json"),
        ]);
        let files = std::collections::BTreeMap::from([
            ("/token/irsa", "CANARY-SECRET-irsa-jwt\n".to_owned()),
            (
                "/keys/sa.json",
                serde_json::json!({
                    "type": "service_account",
                    "client_email": "quartermaster@project.iam.gserviceaccount.com",
                    "private_key_id": "CANARY-SECRET-gcp-key-id",
                    "private_key": "-----BEGIN PRIVATE KEY-----\nCANARY-SECRET-gcp-private-key\n-----END PRIVATE KEY-----\n",
                })
                .to_string(),
            ),
        ]);
        let secrets = Secrets::from_environment(
            |name| env.get(name).map(|v| v.to_string()),
            |path| files.get(path).cloned(),
        );
        let text = format!("{env:?} {files:?}");
        let scrubbed = secrets.scrub(&text);
        assert!(!scrubbed.contains("CANARY-SECRET"), "{scrubbed}");
        for shown in [
            "AKIAEXAMPLEKEYID1234",
            "00000000-1111-2222-3333-444444444444",
            "quartermaster@project.iam.gserviceaccount.com",
        ] {
            assert!(scrubbed.contains(shown), "{shown} scrubbed: {scrubbed}");
        }
        let none = Secrets::from_environment(|_| None, |_| None);
        assert!(none.is_empty());
    }

    #[test]
    fn short_values_and_unrelated_text_are_left_alone() {
        let mut secrets = Secrets::new();
        secrets.add("true");
        secrets.add("  ");
        assert!(secrets.is_empty());
        secrets.add(CANARY);
        let text = "insufficient capacity for g5.xlarge in us-east-1a: true";
        assert_eq!(secrets.scrub(text), text);
        assert!(!format!("{secrets:?}").contains(CANARY));
    }
}
