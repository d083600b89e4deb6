//! The controller's log lines (`--log-level`, `--log-format`), built so that no credential,
//! token or user data reaches them whatever the level:
//!
//! - events of the cloud SDKs that print whole requests, responses or credentials are dropped
//!   at every level: AWS SigV4's signing events (at trace: the canonical request, with the
//!   `x-amz-security-token` session token in clear), the AWS SDK's `transmitting request` and
//!   `received response` (requests and responses; bodies are redacted by the SDK today, not
//!   by contract), `resolved identity`, `resolving endpoint` and loaded-credential events (the whole access
//!   key id),
//!   the ECS / EKS Pod Identity provider's `invalid auth token` warning (it prints the token),
//!   and `azure_core`'s transport event (at debug: every request with its body, e.g. a VM's
//!   `customData`, and its `Authorization` header — azure_core 0.21 redacts every header but
//!   that one);
//! - every line is scrubbed of the credentials the process environment holds
//!   ([`quartermaster_cloud::Secrets::of_process`]) before it is written.

use std::io::Write;

use tracing::Metadata;
use tracing_subscriber::Layer as _;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;

/// How lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Json,
    /// Human-readable lines.
    Text,
}

/// Event fields through which SDKs print requests, responses or credentials.
const SECRET_FIELDS: &[&str] = &[
    "request",
    "response",
    "identity",
    "output_or_error",
    "creds",
    "next_creds",
    "chain",
    "token",
    "canonical_request",
    "string_to_sign",
    "params",
    "endpoint_params",
];

/// Targets whose every event may print a secret.
const SECRET_TARGETS: &[&str] = &["azure_core::policies::transport", "aws_sigv4"];

/// Whether an event or span of the SDKs may print a secret (see the module docs); such
/// callsites never reach the log.
pub fn prints_secrets(metadata: &Metadata<'_>) -> bool {
    let target = metadata.target();
    if SECRET_TARGETS.iter().any(|t| target.starts_with(t)) {
        return true;
    }
    // aws_smithy_*, aws_config, aws_runtime, aws_credential_types, aws_sdk_*, …
    let sdk = target.starts_with("aws_");
    // At trace the SDK dumps its internal state (runtime components, config bags) whole, with
    // the credentials provider inside: only its plain messages stay.
    let dump = *metadata.level() == tracing::Level::TRACE
        && metadata.fields().iter().any(|f| f.name() != "message");
    sdk && (dump
        || metadata
            .fields()
            .iter()
            .any(|f| SECRET_FIELDS.contains(&f.name())))
}

/// The subscriber of the controller's logs: `level` (a tracing filter such as `info` or
/// `quartermaster=debug`), lines in `format` written to `writer`, ANSI colours when `ansi`.
pub fn subscriber<W>(
    level: &str,
    format: Format,
    ansi: bool,
    writer: W,
) -> anyhow::Result<impl tracing::Subscriber + Send + Sync + 'static>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .map_err(|e| anyhow::anyhow!("--log-level {level:?}: {e}"))?;
    let writer = Scrubbing(writer);
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    let layer = match format {
        Format::Json => layer.json().flatten_event(true).boxed(),
        Format::Text => layer.boxed(),
    };
    let safe = tracing_subscriber::filter::filter_fn(|m| !prints_secrets(m));
    Ok(tracing_subscriber::registry().with(layer.with_filter(safe).with_filter(filter)))
}

/// A writer that scrubs every line of the process environment's credentials.
struct Scrubbing<W>(W);

impl<'a, W: MakeWriter<'a>> MakeWriter<'a> for Scrubbing<W> {
    type Writer = ScrubbingWriter<W::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        ScrubbingWriter(self.0.make_writer())
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        ScrubbingWriter(self.0.make_writer_for(meta))
    }
}

/// One event's writer: the formatter writes each event whole, so each write is scrubbed whole.
struct ScrubbingWriter<W>(W);

impl<W: Write> Write for ScrubbingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let secrets = quartermaster_cloud::Secrets::of_process();
        match std::str::from_utf8(buf) {
            Ok(text) if !secrets.is_empty() => {
                self.0.write_all(secrets.scrub(text).as_bytes())?;
            }
            _ => self.0.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    const CANARY: &str = "CANARY-SECRET-0d9e8f7a";

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What the SDKs' secret-printing events look like (their targets and fields), and one
    /// ordinary event.
    fn emit() {
        tracing::trace!(target: "aws_smithy_runtime::client::orchestrator", request = ?format!("UserData={CANARY}"), "transmitting request");
        tracing::trace!(target: "aws_smithy_runtime::client::orchestrator::auth", identity = ?CANARY, "resolved identity");
        tracing::warn!(target: "aws_config::ecs", token = %CANARY, "invalid auth token");
        tracing::info!(target: "aws_config::profile::credentials", creds = ?CANARY, "loaded base credentials");
        tracing::debug!(target: "azure_core::policies::transport", "the following request will be passed to the transport policy: {CANARY}");
        tracing::trace!(target: "aws_sigv4::http_request::sign", canonical_request = %format!("x-amz-security-token:{CANARY}"));
        tracing::info!(target: "quartermaster_controller::driver", nodeclaim = "gpu-1", "launched");
        tracing::trace!(target: "aws_smithy_runtime::client::orchestrator", "beginning attempt #1");
    }

    #[test]
    fn sdk_events_that_print_requests_or_credentials_never_reach_the_log() {
        for format in [Format::Json, Format::Text] {
            let buffer = Buffer::default();
            let sink = buffer.clone();
            let subscriber = subscriber("trace", format, false, move || sink.clone()).unwrap();
            tracing::subscriber::with_default(subscriber, emit);
            let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
            assert!(!text.contains(CANARY), "{format:?}:\n{text}");
            assert!(text.contains("launched"), "{format:?}:\n{text}");
            assert!(text.contains("beginning attempt #1"), "{format:?}:\n{text}");
        }
    }

    #[test]
    fn a_bad_level_is_an_error_naming_the_flag() {
        let e = subscriber("no=such=level", Format::Json, false, std::io::sink)
            .err()
            .expect("an error");
        assert!(e.to_string().contains("--log-level"), "{e}");
    }
}
