//! Report files: `summary.json`, `cost.csv` (FOCUS) and `report.html`.

pub mod focus_csv;
pub mod html;
pub mod svg;

use std::io::Write;
use std::path::Path;

use crate::Simulation;
use crate::error::SimulationError;

/// Writes `summary.json`, `cost.csv` and `report.html` into `dir` (created if missing).
pub fn write_dir(dir: &Path, sim: &Simulation) -> Result<(), SimulationError> {
    let err = |path: &Path, e: std::io::Error| SimulationError::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
    let summary = dir.join("summary.json");
    let mut text =
        serde_json::to_string_pretty(&sim.summary.to_json()).expect("a summary serialises");
    text.push('\n');
    std::fs::write(&summary, text).map_err(|e| err(&summary, e))?;

    let csv = dir.join("cost.csv");
    let file = std::fs::File::create(&csv).map_err(|e| err(&csv, e))?;
    let mut w = std::io::BufWriter::new(file);
    focus_csv::write(&sim.scenario, &sim.run.record, &mut w).map_err(|e| err(&csv, e))?;
    w.flush().map_err(|e| err(&csv, e))?;

    let html = dir.join("report.html");
    std::fs::write(
        &html,
        html::render(&sim.scenario, &sim.summary, &sim.run.record),
    )
    .map_err(|e| err(&html, e))?;
    Ok(())
}

#[cfg(test)]
mod tests;
