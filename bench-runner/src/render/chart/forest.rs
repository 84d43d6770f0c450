//! The forest plot: one row per paired comparison within a profile, its ratio and 95 %
//! interval, over a grey band of the A/A control's half-width in that cell — an interval
//! that excludes 1 is a result (dark), one that does not is drawn pale, and the band shows
//! how large a difference the run could have told apart at all.

use plotters::prelude::*;

use super::{Area, ChartError};
use crate::model::LoadModel;
use crate::render::palette::legend;
use crate::summary::{Comparison, Metric, Summary};

const RESOLVED: RGBColor = RGBColor(20, 60, 140);
const UNRESOLVED: RGBColor = RGBColor(160, 160, 160);
const BAND: RGBColor = RGBColor(225, 225, 225);

/// The comparisons a forest shows: within one profile, on `route` and `metric`.
pub(super) fn rows<'a>(s: &'a Summary, route: &str, metric: Metric) -> Vec<&'a Comparison> {
    s.comparisons
        .iter()
        .filter(|c| c.profile == c.baseline_profile && c.route == route && c.metric == metric)
        .collect()
}

/// The A/A control's half-width in the comparison's cell, on its metric.
fn band(s: &Summary, c: &Comparison) -> Option<f64> {
    s.resolution
        .iter()
        .find(|r| {
            r.profile == c.profile
                && r.load == c.load
                && r.conns == c.conns
                && r.route == c.route
                && r.metric == c.metric
        })
        .map(|r| r.half_width)
}

pub(super) fn draw(
    area: &Area,
    s: &Summary,
    route: &str,
    load: LoadModel,
    routes: usize,
) -> Result<(), ChartError> {
    let of_route = if routes > 1 {
        format!(", route {route}")
    } else {
        String::new()
    };
    let (head, body) = area.split_vertically(34);
    head.draw(&Text::new(
        format!(
            "{}{of_route}: paired ratios, 95 % intervals; dark = a result (the interval excludes 1), \
             pale = not resolved; grey band = the A/A control's half-width in that cell",
            load.name()
        ),
        (12, 12),
        ("sans-serif", 14),
    ))?;
    let (left, right) = body.split_horizontally(super::WIDTH / 2 + 110);
    for (half, metric) in [(left, Metric::CpuPerRequest), (right, Metric::Rps)] {
        let rows = rows(s, route, metric);
        if rows.is_empty() {
            // req/s pairs only saturated slices: say why the half is empty, not an empty axis.
            half.draw(&Text::new(
                match metric {
                    Metric::Rps => "req/s: no paired comparison (no cell saturated its server)",
                    _ => "CPU per request: no paired comparison",
                },
                (20, 40),
                ("sans-serif", 13),
            ))?;
            continue;
        }
        let bands: Vec<Option<f64>> = rows.iter().map(|c| band(s, c)).collect();
        let (lo, hi) = rows
            .iter()
            .zip(&bands)
            .fold((1.0f64, 1.0f64), |(lo, hi), (c, b)| {
                let b = b.unwrap_or(0.0);
                (
                    lo.min(c.ci95_low).min(1.0 - b),
                    hi.max(c.ci95_high).max(1.0 + b),
                )
            });
        // Room on the right for the legend, clear of the rows.
        let pad = (hi - lo).max(0.02) * 0.08;
        let room = (hi - lo).max(0.02) * 0.3;
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
            Metric::CpuPerRequest => "CPU per request (< 1: cheaper)",
            _ => "req/s, saturated slices (> 1: faster)",
        };
        let show_names = metric == Metric::CpuPerRequest;
        let mut chart = ChartBuilder::on(&half)
            .caption(title, ("sans-serif", 14))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(if show_names { 240 } else { 12 })
            .build_cartesian_2d((lo - pad)..(hi + room), 0.0..n)?;
        let labels = names.clone();
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
        let y_of = |i: usize| n - 0.5 - i as f64;
        chart
            .draw_series(
                rows.iter()
                    .zip(&bands)
                    .enumerate()
                    .filter_map(|(i, (_, b))| {
                        let b = (*b)?;
                        let y = y_of(i);
                        Some(Rectangle::new(
                            [(1.0 - b, y - 0.42), (1.0 + b, y + 0.42)],
                            BAND.filled(),
                        ))
                    }),
            )?
            .label("A/A half-width")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], BAND.filled()));
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(1.0, 0.0), (1.0, n)],
            RGBColor(200, 0, 0).stroke_width(1),
        )))?;
        for (resolved, col, label) in [
            (true, RESOLVED, "a result"),
            (false, UNRESOLVED, "not resolved"),
        ] {
            let pick = || {
                rows.iter()
                    .enumerate()
                    .filter(move |(_, c)| c.significant == resolved)
            };
            chart.draw_series(pick().map(|(i, c)| {
                PathElement::new(
                    vec![(c.ci95_low, y_of(i)), (c.ci95_high, y_of(i))],
                    col.stroke_width(2),
                )
            }))?;
            chart
                .draw_series(
                    pick().map(|(i, c)| Circle::new((c.ratio_median, y_of(i)), 4, col.filled())),
                )?
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 6, y), 4, col.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, 11)?;
    }
    Ok(())
}
