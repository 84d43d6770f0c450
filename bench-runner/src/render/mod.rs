//! Writes a run's outputs from raw.json: summary.json, table.md, results.csv, comparisons.csv,
//! chart.svg and report.html (all of it in one page)
//! (raw.json itself is the runner's to write: re-rendering never rewrites the source).

mod chart;
mod html;
mod table;

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::model::{Machine, Raw, ServerRecord, Settings};
use crate::summary::{summarise, Summary};

#[derive(Serialize)]
struct SummaryFile<'a> {
    engine: &'a str,
    machine: &'a Machine,
    driver: &'a str,
    started_utc: &'a str,
    settings: &'a Settings,
    complete: bool,
    notes: &'a [String],
    servers: &'a [ServerRecord],
    #[serde(flatten)]
    summary: &'a Summary,
}

pub fn write_all(dir: &Path, raw: &Raw) -> Result<Summary> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let summary = summarise(raw);
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .with_context(|| format!("writing {}", dir.join(name).display()))
    };
    let file = SummaryFile {
        engine: &raw.engine,
        machine: &raw.machine,
        driver: &raw.driver,
        started_utc: &raw.started_utc,
        settings: &raw.settings,
        complete: raw.complete,
        notes: &raw.notes,
        servers: &raw.servers,
        summary: &summary,
    };
    write("summary.json", serde_json::to_string_pretty(&file)?)?;
    let markdown = table::markdown(raw, &summary);
    write("table.md", markdown.clone())?;
    write("results.csv", table::csv(&summary))?;
    write("comparisons.csv", table::comparisons_csv(&summary))?;
    chart::draw(&dir.join("chart.svg"), raw, &summary)?;
    let svg = std::fs::read_to_string(dir.join("chart.svg")).context("reading chart.svg back")?;
    let title = format!("rxbench results {} ({})", raw.started_utc, raw.engine);
    write("report.html", html::page(&title, &markdown, &svg))?;
    Ok(summary)
}
