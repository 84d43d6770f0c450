//! Writes a run's outputs from raw.json: summary.json, table.md (the answer and the
//! comparisons), evidence.md (every cell's evidence and every server's record), results.csv, comparisons.csv,
//! answer.svg (what the block costs, the first figure), chart.svg, latency.svg (with open-loop
//! cells) and report.html (all of it in one page)
//! (raw.json itself is the runner's to write: re-rendering never rewrites the source).

mod chart;
mod cross;
mod csv;
mod evidence;
mod glossary;
pub mod headline;
mod html;
mod latency;
mod loads;
mod open;
mod palette;
mod resolution;
mod seed;
mod table;
mod why;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::file::{self, FileError};
use crate::model::{LoadModel, Machine, Raw, ServerRecord, Settings};
use crate::summary::{summarise, Summary};

/// Why a run's outputs could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("summary.json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("drawing chart.svg: {0}")]
    Chart(#[from] chart::ChartError),
}

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
    /// The run's syscall probe ([`crate::probe`]), absent in runs recorded before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<crate::model::SyscallCost>,
    #[serde(flatten)]
    pub summary: Summary,
}

/// table.md's text.
pub fn table_md(raw: &Raw, summary: &Summary) -> String {
    table::markdown(raw, summary)
}

/// Every output of the run in `dir`, from `raw`; returns the summary they show.
pub fn write_all(dir: &Path, raw: &Raw) -> Result<Summary, RenderError> {
    std::fs::create_dir_all(dir).map_err(file::error("creating", dir))?;
    let summary = summarise(raw);
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(file::error("writing", &path))
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
        probe: raw.probe.clone(),
        summary,
    };
    write("summary.json", serde_json::to_string_pretty(&file)?)?;
    let summary = file.summary;
    let markdown = table_md(raw, &summary);
    write("table.md", markdown.clone())?;
    let evidence = table::evidence_markdown(raw, &summary);
    write("evidence.md", evidence.clone())?;
    write("results.csv", csv::rows(&summary))?;
    write("comparisons.csv", csv::comparisons(&summary))?;
    // A chart per closed-loop model: the run's first in chart.svg (keep-alive, where it ran),
    // per-request beside it; open loop has latency.svg.
    let mut figures = Vec::new();
    // The answer first: what the block costs the io_uring server and an epoll server.
    if chart::answer::applies(raw, &summary) {
        let path = dir.join("answer.svg");
        chart::answer::draw(&path, raw, &summary)?;
        let svg = std::fs::read_to_string(&path).map_err(file::error("reading back", &path))?;
        figures.push((svg, html::ANSWER_CAPTION.to_string()));
    }
    let first = raw.settings.loads.first().copied().unwrap_or_default();
    for load in raw.settings.loads.iter().copied() {
        let name = match load {
            _ if load == first => "chart.svg".to_string(),
            LoadModel::PerRequest => "chart-per-request.svg".to_string(),
            _ => continue,
        };
        let path = dir.join(&name);
        chart::draw(&path, raw, &summary.for_load(load), load)?;
        let svg = std::fs::read_to_string(&path).map_err(file::error("reading back", &path))?;
        figures.push((svg, html::chart_caption(load)));
    }
    if latency::applies(raw) {
        let path = dir.join("latency.svg");
        latency::draw(&path, raw, &summary)?;
        let svg = std::fs::read_to_string(&path).map_err(file::error("reading back", &path))?;
        figures.push((svg, html::LATENCY_CAPTION.to_string()));
    }
    let title = format!("rxbench results {} ({})", raw.started_utc, raw.engine);
    write(
        "report.html",
        html::page(&title, &markdown, &evidence, &figures),
    )?;
    if let Some(group) = raw.settings.calibration_group {
        let study = crate::calibrate::analyse(raw, group);
        write("calibration.md", crate::calibrate::markdown(raw, &study))?;
        write("calibration.json", serde_json::to_string_pretty(&study)?)?;
    }
    Ok(summary)
}
