//! chart.svg (and chart-per-request.svg): the paired comparisons first — each a ratio with
//! its 95 % interval, against the band of what the run's A/A control could resolve in that
//! cell, CPU per request beside req/s — the figure that says what is a result; under them the
//! cells themselves, CPU µs per request and k req/s as bars per profile and connection level.
//!
//! The bars start at 0 and so squeeze a few per cent into a sliver: the ratio plot above them
//! carries the comparison, the bars say what the magnitudes are.

pub mod answer;
mod bars;
mod forest;

use std::path::Path;

use plotters::prelude::*;

use crate::model::{LoadModel, Raw};
use crate::summary::{Metric, Summary};

const WIDTH: u32 = 1260;
const PANEL_H: u32 = 300;
const ROW_H: u32 = 17;

pub use super::palette::ChartError;

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// The chart of one closed-loop load model: `s` holds that model's rows and comparisons only
/// ([`Summary::for_load`]). The comparisons and the CPU bars are those of the run's first
/// route (the caption names it); with several routes the req/s bars are the mean over them,
/// the-benchmarker's figure.
pub fn draw(path: &Path, raw: &Raw, s: &Summary, load: LoadModel) -> Result<(), ChartError> {
    let route = raw
        .settings
        .routes
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string();
    let rows = forest::rows(s, &route, Metric::CpuPerRequest)
        .len()
        .max(forest::rows(s, &route, Metric::Rps).len());
    let forest_h = 110 + ROW_H * rows.max(1) as u32;
    let root = SVGBackend::new(path, (WIDTH, forest_h + 2 * PANEL_H)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, rest) = root.split_vertically(forest_h);
    let (cpu, rps) = rest.split_vertically(PANEL_H);
    forest::draw(&top, s, &route, load, raw.settings.routes.len())?;
    bars::draw(&cpu, raw, s, &route, load, Metric::CpuPerRequest)?;
    bars::draw(&rps, raw, s, &route, load, Metric::Rps)?;
    root.present()?;
    Ok(())
}
