//! Shared helpers for the cross-crate tests: run the CLI in-process, find workspace files.

use std::path::PathBuf;

/// What one CLI invocation produced.
#[derive(Debug)]
pub struct Output {
    /// The exit code `quartermaster` would exit with.
    pub code: u8,
    /// Everything written to standard output.
    pub stdout: String,
    /// Everything written to standard error.
    pub stderr: String,
}

impl Output {
    /// Standard output parsed as JSON; panics with both streams when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Runs `quartermaster ARGS...` in-process, exactly as the binary does, from the workspace root.
pub fn quartermaster(args: &[&str]) -> Output {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let argv = std::iter::once("quartermaster").chain(args.iter().copied());
    let code = quartermaster::run(argv, &mut stdout, &mut stderr);
    Output {
        code,
        stdout: String::from_utf8(stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(stderr).expect("stderr is UTF-8"),
    }
}

/// The workspace root (this crate lives in `tests/`).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A path under the workspace root, as a string for CLI arguments.
pub fn path(relative: &str) -> String {
    workspace_root().join(relative).display().to_string()
}

pub mod prometheus;
pub mod tools;
