//! What `quartermaster doctor --cloud C` prints: one [`Check`] per thing a first install gets
//! wrong (credentials, permissions, the NodeClass's subnets and images, GPU quotas, the price
//! API), each OK, WARN or FAIL with the fix. Every cloud crate produces these; the CLI prints
//! them and exits 1 on any FAIL.

use serde::Serialize;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum CheckOutcome {
    /// It works.
    Ok,
    /// It works, but something is worth knowing (e.g. a low GPU quota).
    Warn,
    /// It does not work; the controller will fail on this.
    Fail,
}

/// One line of `doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked, e.g. `credentials`, `permission ec2:CreateFleet`, `subnets`.
    pub name: String,
    /// How it came out.
    pub outcome: CheckOutcome,
    /// What was found (whose credentials, which subnets, the error). Never a secret.
    pub detail: String,
    /// How to fix it, for WARN and FAIL.
    pub fix: Option<String>,
}

impl Check {
    /// A passing check.
    pub fn ok(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            outcome: CheckOutcome::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    /// A warning with its fix.
    pub fn warn(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name: name.into(),
            outcome: CheckOutcome::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// A failing check with its fix.
    pub fn fail(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name: name.into(),
            outcome: CheckOutcome::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}
