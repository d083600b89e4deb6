//! `quartermaster bench`: placeholder replaced by the benchmark implementation.

use std::io::Write;

use crate::cli::BenchArgs;

pub fn run(_args: &BenchArgs, _out: &mut dyn Write, _err: &mut dyn Write) -> anyhow::Result<u8> {
    anyhow::bail!("`bench` is not built yet")
}
