//! The `quartermaster` command line.
//!
//! Thin by design: parse arguments, wire the library crates together, print. Every decision
//! (what an instance type costs, whether a manifest is valid) is made in `quartermaster-pricing`
//! and `quartermaster-policies`; this crate only formats their answers.
//!
//! [`run`] is the whole program as a function of its arguments and two writers, so the contract
//! tests in `tests/` drive it in-process exactly as the binary does.

mod cli;
mod clouds;
mod commands;
pub mod logging;
mod manifests;
mod output;
mod reservations;
mod static_nodes;
mod workload;

use std::ffi::OsString;
use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;

pub use cli::Cli;

/// Exit code: everything went as asked.
pub const EXIT_OK: u8 = 0;
/// Exit code: the command ran and found problems (invalid manifests), or failed with an error.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code: the command line itself was malformed.
pub const EXIT_USAGE: u8 = 2;

static TERMINAL_PROGRESS: AtomicBool = AtomicBool::new(false);

/// Lets long-running commands (`simulate`) draw a progress line on standard error, when standard
/// error is a terminal. The binary calls this before [`run`]; in-process callers such as the
/// contract tests do not, so their output never carries progress lines.
pub fn enable_terminal_progress() {
    TERMINAL_PROGRESS.store(io::stderr().is_terminal(), Ordering::Relaxed);
}

/// Whether clap's messages may carry ANSI colour: the stream is a terminal and `NO_COLOR` is
/// unset or empty.
fn colour_allowed(to_stderr: bool) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let terminal = if to_stderr {
        io::stderr().is_terminal()
    } else {
        io::stdout().is_terminal()
    };
    terminal && !no_color
}

/// Whether [`enable_terminal_progress`] found a terminal.
pub(crate) fn terminal_progress() -> bool {
    TERMINAL_PROGRESS.load(Ordering::Relaxed)
}

/// Runs the command line `args` (the first item is the program name), writing results to `out`
/// and diagnostics to `err`. Returns the process exit code. Never panics on bad input: every
/// failure becomes one `error: …` line on `err`.
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            // Colour only on a terminal, and never when NO_COLOR is set (no-color.org).
            let rendered = if colour_allowed(e.use_stderr()) {
                e.render().ansi().to_string()
            } else {
                e.render().to_string()
            };
            let sink: &mut dyn Write = if e.use_stderr() { err } else { out };
            let _ = sink.write_all(rendered.as_bytes());
            return code;
        }
    };
    match commands::dispatch(cli, out, err) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => EXIT_OK,
        Err(e) => {
            // An error may quote what an SDK read (a token file, a credential variable).
            let message = quartermaster_cloud::Secrets::of_process().scrub(&format!("{e:#}"));
            let _ = writeln!(err, "error: {message}");
            EXIT_FAILURE
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|cause| cause.downcast_ref::<io::Error>())
        .any(|io| io.kind() == io::ErrorKind::BrokenPipe)
}
