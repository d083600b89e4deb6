//! A failed cloud API call, as every provider's port reports it ([`ApiError`]), and the one
//! mapping from it to [`CloudError`]: each cloud describes its error codes in an
//! [`ErrorTable`] (which codes mean no capacity, a quota, throttling, a missing resource, a
//! request that can never succeed; how HTTP statuses are read without a code), and
//! [`ErrorTable::map`] / [`ErrorTable::map_code`] apply it. Pure, so every code is tested
//! without a network.

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::{CloudError, LaunchOffering};

/// A failed cloud call, reduced to what error mapping needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// How the call failed.
    pub kind: ApiErrorKind,
    /// The cloud's error code or reason (`InsufficientInstanceCapacity`,
    /// `ZONE_RESOURCE_POOL_EXHAUSTED`, `AllocationFailed`), when the service answered with one.
    pub code: Option<String>,
    /// The service's or the transport's words (never credentials).
    pub message: String,
    /// The HTTP status, when there was a response.
    pub status: Option<u16>,
    /// The `Retry-After` header, when the response had one.
    pub retry_after: Option<Duration>,
}

/// How a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// The service answered with an error (or a finished operation carried one).
    Service,
    /// No answer in time (connect, attempt or operation timeout).
    Timeout,
    /// The request could not be sent (connection refused, DNS, TLS).
    Dispatch,
    /// The request could not be built (missing region, bad input).
    Construction,
    /// No credential could be had.
    Credential,
    /// The response (or the request) could not be (de)serialized.
    Response,
}

impl ApiError {
    /// A service error with `code` and `message` (tests, operation errors, in-band errors).
    pub fn service(code: &str, message: &str) -> Self {
        Self {
            kind: ApiErrorKind::Service,
            code: Some(code.to_owned()),
            message: message.to_owned(),
            status: None,
            retry_after: None,
        }
    }

    /// An error of `kind` with `message` and no code.
    pub fn other(kind: ApiErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            code: None,
            message: message.into(),
            status: None,
            retry_after: None,
        }
    }

    /// The same error with an HTTP status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Whether the call reached the cloud at all (not a dead endpoint or a timeout).
    pub fn reached(&self) -> bool {
        !matches!(self.kind, ApiErrorKind::Dispatch | ApiErrorKind::Timeout)
    }
}

/// How HTTP statuses are read where the code did not decide.
#[derive(Debug, Clone, Copy)]
pub struct StatusRules {
    /// Statuses of throttling.
    pub throttled: &'static [RangeInclusive<u16>],
    /// Whether the throttling statuses count even when the answer has a code.
    pub throttled_with_code: bool,
    /// Statuses of a missing resource.
    pub not_found: &'static [RangeInclusive<u16>],
    /// Statuses of a request that can never succeed as it is.
    pub invalid: &'static [RangeInclusive<u16>],
    /// Whether the not-found and invalid statuses count when the answer has a code no list
    /// knows (otherwise only without a code).
    pub with_code: bool,
    /// Whether an invalid request decided by its status alone says `HTTP <status>: ` first.
    pub invalid_says_status: bool,
}

/// What stands before the message of an error that is not the service's answer.
#[derive(Debug, Clone, Copy)]
pub struct KindWords {
    /// [`ApiErrorKind::Construction`] (an invalid request).
    pub construction: &'static str,
    /// [`ApiErrorKind::Credential`] (an invalid request).
    pub credential: &'static str,
    /// [`ApiErrorKind::Timeout`] (transient).
    pub timeout: &'static str,
    /// [`ApiErrorKind::Dispatch`] (transient).
    pub dispatch: &'static str,
}

/// One cloud's error codes, read in this order: capacity, quota, throttling, not found,
/// invalid; any other code is transient (retried with backoff).
#[derive(Debug, Clone, Copy)]
pub struct ErrorTable {
    /// Codes that mean "this offering has no capacity now": the engine marks the offering
    /// unavailable and tries the next one.
    pub capacity: &'static [&'static str],
    /// Words that mean no capacity whatever the code.
    pub capacity_words: &'static [&'static str],
    /// Codes of account or project limits.
    pub quota: &'static [&'static str],
    /// `(code, word)`: the code is a quota when its message has the word (any case).
    pub quota_when_words: &'static [(&'static str, &'static str)],
    /// Codes of throttling.
    pub throttled: &'static [&'static str],
    /// Codes of a missing resource.
    pub not_found: &'static [&'static str],
    /// Codes of a request that can never succeed as it is.
    pub invalid: &'static [&'static str],
    /// Prefixes of such codes (`InvalidParameter` matches `InvalidParameterValue`).
    pub invalid_prefixes: &'static [&'static str],
    /// How statuses are read.
    pub statuses: StatusRules,
    /// Whether a message says its code first (`CODE: words`).
    pub code_in_message: bool,
    /// Whether a not-found error keeps the message in its `provider_id` (callers put the
    /// provider id they asked for in its place), or leaves it empty.
    pub not_found_keeps_message: bool,
    /// What stands before the message of a failure that is not the service's answer.
    pub kind_words: KindWords,
    /// How long a throttled caller waits when the cloud sends no `Retry-After`.
    pub default_retry: Duration,
}

impl ErrorTable {
    /// The [`CloudError`] of a failed call about `offering`, when it was about one.
    pub fn map(&self, e: &ApiError, offering: Option<&LaunchOffering>) -> CloudError {
        let words = &self.kind_words;
        let said = |prefix: &str| format!("{prefix}{}", e.message);
        match e.kind {
            ApiErrorKind::Service => self.map_code(
                e.code.as_deref(),
                &e.message,
                e.status,
                e.retry_after,
                offering,
            ),
            ApiErrorKind::Construction => CloudError::InvalidRequest {
                message: said(words.construction),
            },
            ApiErrorKind::Credential => CloudError::InvalidRequest {
                message: said(words.credential),
            },
            ApiErrorKind::Timeout => CloudError::Transient {
                message: said(words.timeout),
            },
            ApiErrorKind::Dispatch => CloudError::Transient {
                message: said(words.dispatch),
            },
            ApiErrorKind::Response => CloudError::Transient {
                message: e.message.clone(),
            },
        }
    }

    /// The [`CloudError`] for `code` (when the answer had one) with `message`, the HTTP
    /// `status` and `Retry-After` when known, for a call about `offering` when it was about
    /// one. A capacity code without an offering is transient.
    pub fn map_code(
        &self,
        code: Option<&str>,
        message: &str,
        status: Option<u16>,
        retry_after: Option<Duration>,
        offering: Option<&LaunchOffering>,
    ) -> CloudError {
        let words = match code {
            Some(c) if self.code_in_message => format!("{c}: {message}"),
            _ => message.to_owned(),
        };
        let is = |list: &[&str]| code.is_some_and(|c| list.contains(&c));
        let rules = &self.statuses;
        let status_is = |ranges: &[RangeInclusive<u16>]| {
            status.is_some_and(|s| ranges.iter().any(|r| r.contains(&s)))
        };
        if is(self.capacity) || self.capacity_words.iter().any(|w| message.contains(w)) {
            return match offering {
                Some(o) => CloudError::InsufficientCapacity {
                    instance_type: o.instance_type.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                    message: words,
                },
                None => CloudError::Transient { message: words },
            };
        }
        let lower = message.to_ascii_lowercase();
        if is(self.quota)
            || self
                .quota_when_words
                .iter()
                .any(|(c, w)| code == Some(*c) && lower.contains(w))
        {
            return CloudError::QuotaExceeded { message: words };
        }
        if is(self.throttled)
            || ((code.is_none() || rules.throttled_with_code) && status_is(rules.throttled))
        {
            return CloudError::Throttled {
                retry_after: Some(retry_after.unwrap_or(self.default_retry)),
            };
        }
        let not_found = |words: String| CloudError::NotFound {
            provider_id: if self.not_found_keeps_message {
                words
            } else {
                String::new()
            },
        };
        if is(self.not_found) {
            return not_found(words);
        }
        if is(self.invalid)
            || code.is_some_and(|c| self.invalid_prefixes.iter().any(|p| c.starts_with(p)))
        {
            return CloudError::InvalidRequest { message: words };
        }
        if code.is_none() || rules.with_code {
            if status_is(rules.not_found) {
                return not_found(words);
            }
            if status_is(rules.invalid) {
                let message = match status {
                    Some(s) if code.is_none() && rules.invalid_says_status => {
                        format!("HTTP {s}: {words}")
                    }
                    _ => words,
                };
                return CloudError::InvalidRequest { message };
            }
        }
        CloudError::Transient { message: words }
    }
}

/// One row of a table-driven error test: a code (or none) and an HTTP status in, the kind of
/// [`CloudError`] out. Providers test their [`ErrorTable`]s with [`check_rows`].
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The code, if the answer had one.
    pub code: Option<&'static str>,
    /// The HTTP status, if known.
    pub status: Option<u16>,
    /// The message.
    pub message: &'static str,
    /// What it must map to: `capacity`, `quota`, `throttled`, `not_found`, `invalid` or
    /// `transient`.
    pub want: &'static str,
}

/// The kind of `e` as a [`Row::want`] word.
pub fn kind_word(e: &CloudError) -> &'static str {
    match e {
        CloudError::InsufficientCapacity { .. } => "capacity",
        CloudError::QuotaExceeded { .. } => "quota",
        CloudError::Throttled { .. } => "throttled",
        CloudError::NotFound { .. } => "not_found",
        CloudError::InvalidRequest { .. } => "invalid",
        CloudError::Transient { .. } => "transient",
    }
}

/// Maps every row through `table` for a call about `offering` and panics naming each row whose
/// kind differs.
pub fn check_rows(table: &ErrorTable, offering: Option<&LaunchOffering>, rows: &[Row]) {
    let wrong: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let got = kind_word(&table.map_code(r.code, r.message, r.status, None, offering));
            (got != r.want).then(|| format!("{r:?} mapped to {got}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
