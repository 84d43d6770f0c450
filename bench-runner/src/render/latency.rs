//! latency.svg, for a run with open-loop cells: latency against offered load, one panel per
//! connection level (rows) and profile (columns), a line per configuration through its
//! open-loop cells at shares of its own capacity — P99 solid, P50 thin, each the median over
//! slices of the slice's own — on a log axis, where
//! a queue building up near capacity shows as the knee it is.

use std::path::Path;

use plotters::prelude::*;

use super::chart::ChartError;
use super::palette::{colour, legend, BAR_ORDER};
use crate::model::{Offered, Profile, Raw};
use crate::summary::Summary;

const PANEL_W: u32 = 520;
const PANEL_H: u32 = 320;

/// Whether the run has the open-loop cells the chart is drawn from.
pub fn applies(raw: &Raw) -> bool {
    raw.settings
        .loads
        .iter()
        .any(|l| matches!(l.offered(), Some(Offered::Own(_))))
}

pub fn draw(path: &Path, raw: &Raw, s: &Summary) -> Result<(), ChartError> {
    let profiles: Vec<Profile> = Profile::ALL
        .into_iter()
        .filter(|p| s.rows.iter().any(|r| r.profile == *p))
        .collect();
    // The levels some open-loop rate was offered at.
    let mut conns: Vec<u32> = raw
        .settings
        .loads
        .iter()
        .filter(|l| l.offered().is_some())
        .flat_map(|&l| raw.settings.conns_of(l).iter().copied())
        .collect();
    conns.sort_unstable();
    conns.dedup();
    let conns = &conns;
    let route = raw
        .settings
        .routes
        .first()
        .map(ToString::to_string)
        .unwrap_or_default();
    let (cols, rows) = (profiles.len().max(1), conns.len().max(1));
    let root =
        SVGBackend::new(path, (PANEL_W * cols as u32, PANEL_H * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    // Each open-loop row at a share of its own capacity: (percent, P50, P99) by subject.
    let points = |p: Profile, n: u32, c: &crate::model::Subject| -> Vec<(f64, f64, f64)> {
        let mut v: Vec<(f64, f64, f64)> = s
            .rows
            .iter()
            .filter(|r| r.profile == p && r.conns == n && &r.config == c && r.route == route)
            .filter_map(|r| match r.load.offered()? {
                Offered::Own(pct) if r.p99_us_median > 0.0 => {
                    Some((f64::from(pct), r.p50_us_median.max(1.0), r.p99_us_median))
                }
                _ => None,
            })
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let latencies = s
        .rows
        .iter()
        .filter(|r| matches!(r.load.offered(), Some(Offered::Own(_))) && r.p99_us_median > 0.0);
    let (lo, hi) = latencies.fold((f64::MAX, 1.0f64), |(lo, hi), r| {
        (lo.min(r.p50_us_median.max(1.0)), hi.max(r.p99_us_median))
    });
    let (lo, hi) = (lo.min(hi) / 1.5, hi * 2.0);
    let panels = root.split_evenly((rows, cols));
    for (k, panel) in panels.iter().enumerate() {
        let (Some(&n), Some(&profile)) = (conns.get(k / cols), profiles.get(k % cols)) else {
            continue;
        };
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!(
                    "profile {}, {n} conns: latency against load",
                    profile.name()
                ),
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(58)
            .build_cartesian_2d(0.0..100.0, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("offered, % of the server's own keep-alive req/s")
            .y_desc("µs from the due time (log)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(RGBColor(240, 240, 240))
            .label_style(("sans-serif", 11))
            .draw()?;
        for subject in s.subjects_of(profile, &BAR_ORDER) {
            let col = colour(&subject);
            let pts = points(profile, n, &subject);
            if pts.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|&(x, _, p99)| (x, p99)),
                    col.stroke_width(2),
                ))?
                .label(format!("{} P99", subject.name()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 14, y)], col.stroke_width(2))
                });
            chart.draw_series(
                pts.iter()
                    .map(|&(x, _, p99)| Circle::new((x, p99), 3, col.filled())),
            )?;
            chart.draw_series(LineSeries::new(
                pts.iter().map(|&(x, p50, _)| (x, p50)),
                col.mix(0.6).stroke_width(1),
            ))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 11)?;
    }
    root.present()?;
    Ok(())
}
