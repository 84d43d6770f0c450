//! Writes a run's outputs from raw.json: summary.json, table.md, results.csv, comparisons.csv,
//! chart.svg and report.html (all of it in one page)
//! (raw.json itself is the runner's to write: re-rendering never rewrites the source).

mod chart;
mod csv;
mod html;
mod table;

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::model::{Machine, Raw, ServerRecord, Settings};
use crate::summary::{summarise, Summary};

/// summary.json: the run's description beside its [`Summary`] (what readers of the results
/// deserialize; the end-to-end tests do).
#[derive(Serialize, Deserialize)]
pub struct SummaryFile {
    pub engine: String,
    pub machine: Machine,
    pub driver: String,
    pub started_utc: String,
    pub settings: Settings,
    pub complete: bool,
    pub notes: Vec<String>,
    pub servers: Vec<ServerRecord>,
    #[serde(flatten)]
    pub summary: Summary,
}

/// Every output of the run in `dir`, from `raw`; returns the summary they show.
pub fn write_all(dir: &Path, raw: &Raw) -> Result<Summary> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let summary = summarise(raw);
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .with_context(|| format!("writing {}", dir.join(name).display()))
    };
    let file = SummaryFile {
        engine: raw.engine.clone(),
        machine: raw.machine.clone(),
        driver: raw.driver.clone(),
        started_utc: raw.started_utc.clone(),
        settings: raw.settings.clone(),
        complete: raw.complete,
        notes: raw.notes.clone(),
        servers: raw.servers.clone(),
        summary,
    };
    write("summary.json", serde_json::to_string_pretty(&file)?)?;
    let summary = file.summary;
    let markdown = table::markdown(raw, &summary);
    write("table.md", markdown.clone())?;
    write("results.csv", csv::rows(&summary))?;
    write("comparisons.csv", csv::comparisons(&summary))?;
    chart::draw(&dir.join("chart.svg"), raw, &summary)?;
    let svg = std::fs::read_to_string(dir.join("chart.svg")).context("reading chart.svg back")?;
    let title = format!("rxbench results {} ({})", raw.started_utc, raw.engine);
    write("report.html", html::page(&title, &markdown, &svg))?;
    Ok(summary)
}
