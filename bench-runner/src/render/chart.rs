//! chart.svg: one panel per profile — the configurations as grouped bars per connection level
//! (k req/s, with the 95 % interval of each cell's median as a whisker) — and under them a
//! forest plot of the paired comparisons (ratio and interval per cell, a line at 1.0): the
//! figure that says at a glance what is significant.

use std::path::Path;

use plotters::prelude::*;

use crate::model::{LoadModel, Profile, Raw, ServerConfig, Subject};
use crate::stats::order_statistic_median;
use crate::summary::{Metric, Summary, SATURATED};

pub(super) const BAR_ORDER: [ServerConfig; 5] = [
    ServerConfig::Legacy,
    ServerConfig::Oneshot,
    ServerConfig::Rx,
    ServerConfig::IoUring,
    ServerConfig::IoUringControl,
];

/// Foreign servers, in name order: greys and muted hues, apart from the project's colours.
const FOREIGN: [RGBColor; 6] = [
    RGBColor(90, 90, 90),
    RGBColor(150, 150, 150),
    RGBColor(128, 100, 162),
    RGBColor(191, 129, 45),
    RGBColor(53, 151, 143),
    RGBColor(200, 200, 200),
];

pub(super) fn colour(c: &Subject, foreign_index: usize) -> RGBColor {
    match c {
        Subject::Own(ServerConfig::Legacy) => RGBColor(214, 96, 77),
        Subject::Own(ServerConfig::Oneshot) => RGBColor(244, 165, 130),
        Subject::Own(ServerConfig::Rx) => RGBColor(33, 102, 172),
        Subject::Own(ServerConfig::IoUring) => RGBColor(27, 120, 55),
        Subject::Own(ServerConfig::IoUringControl) => RGBColor(127, 191, 123),
        Subject::Foreign(_) => FOREIGN[foreign_index % FOREIGN.len()],
    }
}

const WIDTH: u32 = 1260;
const PANEL_H: u32 = 380;
const ROW_H: u32 = 17;

/// What plotters reports: the SVG backend's own error is an `io::Error`.
pub type ChartError = DrawingAreaErrorKind<std::io::Error>;

type Result<T = (), E = ChartError> = std::result::Result<T, E>;

/// The chart of one closed-loop load model: `s` holds that model's rows and comparisons only
/// ([`Summary::for_load`]).
pub fn draw(path: &Path, raw: &Raw, s: &Summary, load: LoadModel) -> Result {
    let route = raw
        .settings
        .routes
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string();
    let forest: Vec<&crate::summary::Comparison> = s
        .comparisons
        .iter()
        .filter(|c| {
            c.profile == c.baseline_profile && c.route == route && c.metric == Metric::CpuPerRequest
        })
        .collect();
    let forest_h = 90 + ROW_H * forest.len().max(1) as u32;
    let root = SVGBackend::new(path, (WIDTH, PANEL_H + forest_h)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(PANEL_H);
    bars(&top, raw, s, &route, load)?;
    forest_plot(&bottom, raw, s, &route)?;
    root.present()?;
    Ok(())
}

fn bars(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    raw: &Raw,
    s: &Summary,
    route: &str,
    load: LoadModel,
) -> Result<()> {
    let profiles: Vec<Profile> = Profile::ALL
        .into_iter()
        .filter(|p| s.rows.iter().any(|r| r.profile == *p))
        .collect();
    let conns = raw.settings.conns_of(load).to_vec();
    let cpus = raw.settings.server_cpus.len().max(1);
    // Each cell's median req/s over its saturated slices, with that median's interval.
    let cell = |p: Profile, c: &Subject, n: u32| -> Option<(f64, f64, f64)> {
        let rps: Vec<f64> = raw
            .slices
            .iter()
            .filter(|x| {
                x.server.profile == p
                    && &x.server.config == c
                    && x.load == load
                    && x.conns == n
                    && x.route.to_string() == route
                    && x.ok()
            })
            .filter(|x| x.utilisation(cpus).is_some_and(|u| u >= SATURATED))
            .filter_map(|x| x.rps())
            .collect();
        let row = s
            .rows
            .iter()
            .find(|r| r.profile == p && &r.config == c && r.conns == n && r.route == route)?;
        let i = order_statistic_median(&rps);
        Some(match i {
            Some(i) => (row.rps_median, i.low, i.high),
            None => (row.rps_median, row.rps_median, row.rps_median),
        })
    };
    // Headroom above the tallest bar for the legend.
    let y_max = s
        .rows
        .iter()
        .map(|r| r.rps_max)
        .fold(0.0, f64::max)
        .max(1.0)
        / 1000.0
        * 1.45;
    let panels = area.split_evenly((1, profiles.len().max(1)));
    for (panel, &profile) in panels.iter().zip(&profiles) {
        let n = conns.len() as f64;
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("profile {}: req/s, {}", profile.name(), load.name()),
                ("sans-serif", 17),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(52)
            .build_cartesian_2d(-0.5..n - 0.5, 0.0..y_max)?;
        let labels = conns.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(conns.len())
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                    format!("{} conns", labels[i as usize])
                } else {
                    String::new()
                }
            })
            .y_labels(8)
            .light_line_style(RGBColor(240, 240, 240))
            .y_desc("k req/s")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        let present = s.subjects_of(profile, &BAR_ORDER);
        let width = 0.8 / present.len().max(1) as f64;
        let mut foreign = 0;
        for (j, config) in present.iter().enumerate() {
            let col = colour(config, foreign);
            foreign += usize::from(config.own().is_none());
            let mut rects = Vec::new();
            let mut whiskers = Vec::new();
            for (i, &c) in conns.iter().enumerate() {
                let Some((v, lo, hi)) = cell(profile, config, c) else {
                    continue;
                };
                let x0 = i as f64 - 0.4 + j as f64 * width;
                let mid = x0 + width / 2.0;
                rects.push(Rectangle::new(
                    [(x0 + width * 0.06, 0.0), (x0 + width * 0.94, v / 1000.0)],
                    col.filled(),
                ));
                whiskers.push(PathElement::new(
                    vec![(mid, lo / 1000.0), (mid, hi / 1000.0)],
                    BLACK.stroke_width(1),
                ));
                whiskers.push(PathElement::new(
                    vec![
                        (mid - width * 0.2, lo / 1000.0),
                        (mid + width * 0.2, lo / 1000.0),
                    ],
                    BLACK.stroke_width(1),
                ));
                whiskers.push(PathElement::new(
                    vec![
                        (mid - width * 0.2, hi / 1000.0),
                        (mid + width * 0.2, hi / 1000.0),
                    ],
                    BLACK.stroke_width(1),
                ));
            }
            chart
                .draw_series(rects)?
                .label(config.name())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], col.filled()));
            chart.draw_series(whiskers)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .label_font(("sans-serif", 11))
            .draw()?;
    }
    Ok(())
}

fn forest_plot(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    raw: &Raw,
    s: &Summary,
    route: &str,
) -> Result<()> {
    let (left, right) = area.split_horizontally(WIDTH / 2);
    for (half, metric) in [(left, Metric::CpuPerRequest), (right, Metric::Rps)] {
        let rows: Vec<&crate::summary::Comparison> = s
            .comparisons
            .iter()
            .filter(|c| c.profile == c.baseline_profile && c.route == route && c.metric == metric)
            .collect();
        let (lo, hi) = rows.iter().fold((1.0f64, 1.0f64), |(lo, hi), c| {
            (lo.min(c.ci95_low), hi.max(c.ci95_high))
        });
        let pad = (hi - lo).max(0.02) * 0.08;
        let n = rows.len().max(1) as f64;
        let names: Vec<String> = rows
            .iter()
            .map(|c| {
                format!(
                    "{} c={}: {} / {}",
                    c.profile.name(),
                    c.conns,
                    c.config.name(),
                    c.baseline.name()
                )
            })
            .collect();
        let title = match metric {
            Metric::CpuPerRequest => "paired ratio of CPU per request (< 1: cheaper), 95 % CI",
            _ => "paired ratio of req/s (> 1: faster), 95 % CI",
        };
        let mut chart = ChartBuilder::on(&half)
            .caption(title, ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(if metric == Metric::CpuPerRequest {
                230
            } else {
                12
            })
            .build_cartesian_2d((lo - pad)..(hi + pad), 0.0..n)?;
        let labels = names.clone();
        let show_names = metric == Metric::CpuPerRequest;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows.len().max(1) * 2 + 1)
            .y_label_formatter(&|y| {
                let i = (y - 0.5).round();
                if !show_names
                    || (y - 0.5 - i).abs() > 1e-6
                    || i < 0.0
                    || i as usize >= labels.len()
                {
                    return String::new();
                }
                labels[labels.len() - 1 - i as usize].clone()
            })
            .y_label_style(("sans-serif", 11))
            .x_label_formatter(&|x| format!("{x:.2}"))
            .light_line_style(RGBColor(242, 242, 242))
            .draw()?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(1.0, 0.0), (1.0, n)],
            RGBColor(200, 0, 0).stroke_width(1),
        )))?;
        for (i, c) in rows.iter().enumerate() {
            let y = n - 0.5 - i as f64;
            let col = if c.significant {
                RGBColor(20, 60, 140)
            } else {
                RGBColor(150, 150, 150)
            };
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(c.ci95_low, y), (c.ci95_high, y)],
                col.stroke_width(2),
            )))?;
            chart.draw_series(std::iter::once(Circle::new(
                (c.ratio_median, y),
                4,
                col.filled(),
            )))?;
        }
        let _ = raw;
    }
    Ok(())
}
