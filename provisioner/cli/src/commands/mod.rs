//! One module per subcommand; [`dispatch`] routes a parsed command line to it.

mod bench;
mod catalog;
mod catalog_toml;
mod controller;
mod crds;
mod doctor;
pub mod explain;
pub mod import;
mod plan;
mod plan_buffers;
mod plan_requests;
mod preferences;
pub mod report;
mod simulate;
mod validate;

use std::io::Write;

use crate::cli::{Cli, Command};

/// Runs the parsed command, returning the exit code.
pub fn dispatch(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    match cli.command {
        Command::Catalog(args) => catalog::run(&args, out, err),
        Command::Doctor(args) => doctor::run(&args, out),
        Command::Crds => crds::run(out),
        Command::Validate(args) => validate::run(&args, out, err),
        Command::Plan(args) => plan::run(&args, out, err),
        Command::Bench(args) => bench::run(&args, out, err),
        Command::Simulate(args) => simulate::run(&args, out, err),
        Command::Controller(args) => controller::run(&args, err),
        Command::Report(args) => report::run(&args, out, err),
        Command::Import(args) => import::run(&args, out, err),
        Command::Explain(args) => explain::run(&args, out),
    }
}
