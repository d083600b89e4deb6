//! `quartermaster crds`: every CRD as multi-document YAML, generated from the Rust types.

use std::io::Write;

use anyhow::Context;

pub fn run(out: &mut dyn Write) -> anyhow::Result<u8> {
    out.write_all(render()?.as_bytes())?;
    Ok(crate::EXIT_OK)
}

/// The YAML that `charts/quartermaster/crds/` must hold byte for byte.
pub fn render() -> anyhow::Result<String> {
    let mut yaml = String::new();
    for crd in quartermaster_policies::crds() {
        yaml.push_str("---\n");
        yaml.push_str(&serde_norway::to_string(&crd).context("serialising a CRD")?);
    }
    Ok(yaml)
}
