//! `quartermaster doctor --cloud C [-f NODECLASS.yaml]`: one line per check, exit 1 on any FAIL.

use std::io::Write;

use anyhow::Context;
use quartermaster_cloud::{Check, CheckOutcome};

use crate::cli::{DoctorArgs, PlanFormat};
use crate::clouds;

/// Runs the chosen cloud's checks and prints them.
pub fn run(args: &DoctorArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let node_class = match &args.file {
        Some(path) => Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        None => None,
    };
    let cloud = clouds::cloud_of(args.cloud);
    let mut checks = clouds::block_on(clouds::doctor(
        cloud,
        &args.access,
        args.region.as_deref(),
        node_class.as_deref(),
    ))?;
    // The checks name identities, never secrets; an SDK error quoting one is scrubbed here.
    let secrets = quartermaster_cloud::Secrets::of_process();
    for check in &mut checks {
        check.detail = secrets.scrub(&check.detail);
        check.fix = check.fix.as_deref().map(|f| secrets.scrub(f));
    }
    match args.output {
        PlanFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &checks).context("writing JSON")?;
            writeln!(out)?;
        }
        PlanFormat::Table => write_lines(&checks, out)?,
    }
    let failed = checks.iter().any(|c| c.outcome == CheckOutcome::Fail);
    Ok(if failed {
        crate::EXIT_FAILURE
    } else {
        crate::EXIT_OK
    })
}

/// `OK   name  detail`, and for WARN / FAIL an indented `fix:` line.
fn write_lines(checks: &[Check], out: &mut dyn Write) -> anyhow::Result<()> {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in checks {
        let outcome = match c.outcome {
            CheckOutcome::Ok => "OK",
            CheckOutcome::Warn => "WARN",
            CheckOutcome::Fail => "FAIL",
        };
        writeln!(out, "{outcome:<4} {:<width$}  {}", c.name, c.detail)?;
        if let Some(fix) = &c.fix {
            writeln!(out, "     fix: {fix}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_check_with_the_fix_under_warnings_and_failures() {
        let checks = vec![
            Check::ok("credentials", "found"),
            Check::fail(
                "permission ec2:CreateFleet",
                "denied: UnauthorizedOperation",
                "add ec2:CreateFleet",
            ),
            Check::warn("gpu quotas", "not checked", "aws service-quotas ..."),
        ];
        let mut out = Vec::new();
        write_lines(&checks, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(lines[0].starts_with("OK   credentials "), "{text}");
        assert!(
            lines[1].starts_with("FAIL permission ec2:CreateFleet  denied"),
            "{text}"
        );
        assert_eq!(lines[2], "     fix: add ec2:CreateFleet");
        assert!(lines[3].starts_with("WARN gpu quotas "), "{text}");
    }
}
