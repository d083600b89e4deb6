//! The `quartermaster` binary: hands the process arguments to [`quartermaster::run`].

use std::process::ExitCode;

fn main() -> ExitCode {
    quartermaster::enable_terminal_progress();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let code = quartermaster::run(std::env::args_os(), &mut stdout.lock(), &mut stderr.lock());
    ExitCode::from(code)
}
