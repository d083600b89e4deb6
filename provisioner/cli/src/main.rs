//! The `quartermaster` binary: hands the process arguments to [`quartermaster::run`].

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    quartermaster::enable_terminal_progress();
    // Unlocked handles: `controller` logs to standard error from other threads.
    let code = quartermaster::run(
        std::env::args_os(),
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    );
    ExitCode::from(code)
}
