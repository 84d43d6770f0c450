//! The cells as bars: one panel per profile, the configurations grouped per connection level,
//! each bar the cell's median with the 95 % interval of that median as a whisker — CPU µs per
//! request over every slice that measured, or k req/s over the saturated ones (with several
//! routes, the mean over them, without a whisker: the-benchmarker's figure).

use plotters::prelude::*;

use super::{Area, ChartError};
use crate::model::{LoadModel, Profile, Raw, Subject};
use crate::render::palette::{colour, legend, BAR_ORDER};
use crate::stats::order_statistic_median;
use crate::summary::{slice_value, Metric, Summary};

/// A bar: its value and its whisker's ends.
type Bar = (f64, f64, f64);

pub(super) fn draw(
    area: &Area,
    raw: &Raw,
    s: &Summary,
    route: &str,
    load: LoadModel,
    metric: Metric,
) -> Result<(), ChartError> {
    let profiles: Vec<Profile> = Profile::ALL
        .into_iter()
        .filter(|p| s.rows.iter().any(|r| r.profile == *p))
        .collect();
    let conns = raw.settings.conns_of(load).to_vec();
    let cpus = raw.settings.server_cpus.len().max(1);
    let route_mean = metric == Metric::Rps && raw.settings.routes.len() > 1;
    let (scale, unit) = match metric {
        Metric::Rps => (1000.0, "k req/s"),
        _ => (1.0, "CPU µs per request"),
    };
    let cell = |p: Profile, c: &Subject, n: u32| -> Option<Bar> {
        if route_mean {
            let m = s
                .route_means
                .iter()
                .find(|m| m.profile == p && &m.config == c && m.conns == n)?;
            return Some((m.rps_mean, m.rps_mean, m.rps_mean));
        }
        let values: Vec<f64> = raw
            .slices
            .iter()
            .filter(|x| {
                x.server.profile == p
                    && &x.server.config == c
                    && x.load == load
                    && x.conns == n
                    && x.route.to_string() == route
            })
            .filter_map(|x| slice_value(x, metric, cpus))
            .collect();
        let row = s
            .rows
            .iter()
            .find(|r| r.profile == p && &r.config == c && r.conns == n && r.route == route)?;
        let median = match metric {
            Metric::Rps => row.rps_median,
            _ => row.cpu_us_per_request?,
        };
        Some(match order_statistic_median(&values) {
            Some(i) => (median, i.low, i.high),
            None => (median, median, median),
        })
    };
    let tallest = profiles
        .iter()
        .flat_map(|&p| {
            s.subjects_of(p, &BAR_ORDER)
                .into_iter()
                .flat_map(|c| {
                    conns
                        .iter()
                        .filter_map(|&n| cell(p, &c, n))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        })
        .map(|(_, _, hi)| hi)
        .fold(0.0, f64::max);
    // Headroom above the tallest bar for the legend.
    let y_max = (tallest / scale).max(1e-3) * 1.45;
    let what = if route_mean {
        format!("{unit}, mean over {} routes", raw.settings.routes.len())
    } else if raw.settings.routes.len() > 1 {
        format!("{unit}, route {route}")
    } else {
        unit.to_string()
    };
    let panels = area.split_evenly((1, profiles.len().max(1)));
    for (panel, &profile) in panels.iter().zip(&profiles) {
        let n = conns.len() as f64;
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("profile {}: {what}, {}", profile.name(), load.name()),
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(30)
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
            .y_labels(6)
            .light_line_style(RGBColor(240, 240, 240))
            .y_desc(unit)
            .y_label_formatter(&|y| {
                if y_max < 10.0 {
                    format!("{y:.1}")
                } else {
                    format!("{y:.0}")
                }
            })
            .draw()?;
        let present = s.subjects_of(profile, &BAR_ORDER);
        let width = 0.8 / present.len().max(1) as f64;
        for (j, config) in present.iter().enumerate() {
            let col = colour(config);
            let mut rects = Vec::new();
            let mut whiskers = Vec::new();
            for (i, &c) in conns.iter().enumerate() {
                let Some((v, lo, hi)) = cell(profile, config, c) else {
                    continue;
                };
                let (v, lo, hi) = (v / scale, lo / scale, hi / scale);
                let x0 = i as f64 - 0.4 + j as f64 * width;
                let mid = x0 + width / 2.0;
                rects.push(Rectangle::new(
                    [(x0 + width * 0.06, 0.0), (x0 + width * 0.94, v)],
                    col.filled(),
                ));
                if hi > lo {
                    let tick = width * 0.2;
                    for path in [
                        vec![(mid, lo), (mid, hi)],
                        vec![(mid - tick, lo), (mid + tick, lo)],
                        vec![(mid - tick, hi), (mid + tick, hi)],
                    ] {
                        whiskers.push(PathElement::new(path, BLACK.stroke_width(1)));
                    }
                }
            }
            chart
                .draw_series(rects)?
                .label(config.name())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], col.filled()));
            chart.draw_series(whiskers)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, 10)?;
    }
    Ok(())
}
