//! `quartermaster plan`: placeholder replaced by the plan implementation.

use std::io::Write;

use crate::cli::PlanArgs;

pub fn run(_args: &PlanArgs, _out: &mut dyn Write, _err: &mut dyn Write) -> anyhow::Result<u8> {
    anyhow::bail!("`plan` is not built yet")
}
