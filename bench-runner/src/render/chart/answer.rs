//! answer.svg, the first figure of report.html: what Docker's io_uring block costs here — the
//! io_uring server and an epoll server (rx), each under `no-io-uring` against itself under
//! `relaxed`, CPU per request, one row per load model and level, with its 95 % interval over
//! the grey band of how far two identical servers (the A/A control) came apart in that cell.
//! A filled dot is a result by the headline's rule (its interval excludes no change and it is
//! larger than the band); a hollow one is not.

use std::path::Path;

use plotters::prelude::*;

use super::ChartError;
use crate::model::{Profile, Raw, ServerConfig, Subject};
use crate::render::headline::{aa_reach, cells, is_result};
use crate::render::palette::colour;
use crate::summary::{Comparison, Metric, Summary};

const WIDTH: u32 = 1100;
const ROW_H: u32 = 30;
const BAND: RGBColor = RGBColor(225, 225, 225);
/// The two servers the answer is about, in the order their dots sit within a row.
const SERVERS: [(ServerConfig, &str); 2] = [
    (ServerConfig::IoUring, "io_uring server"),
    (ServerConfig::Rx, "epoll server (rx)"),
];

/// One row: a load model at a level, with the block's cost for each server that has one.
struct Row<'a> {
    label: String,
    costs: Vec<(ServerConfig, &'a Comparison)>,
    /// How far from no change the A/A control reached in the cell, under either profile.
    band: Option<f64>,
    /// Per cost: a result (the headline's rule: its interval excludes no change and it is
    /// larger than the band).
    results: Vec<bool>,
}

fn rows<'a>(raw: &Raw, s: &'a Summary) -> Vec<Row<'a>> {
    let route = raw.settings.first_route();
    let mut rows = Vec::new();
    for &load in &raw.settings.loads {
        // Each server against itself: no-io-uring over relaxed, by level.
        let by_server: Vec<(ServerConfig, Vec<&Comparison>)> = SERVERS
            .iter()
            .map(|&(config, _)| {
                let own = Subject::Own(config);
                let mine = (&own, Profile::NoIoUring);
                let base = (&own, Profile::Relaxed);
                (
                    config,
                    cells(s, &route, load, Metric::CpuPerRequest, mine, base),
                )
            })
            .collect();
        for &conns in raw.settings.conns_of(load) {
            let costs: Vec<(ServerConfig, &Comparison)> = by_server
                .iter()
                .filter_map(|(config, cs)| {
                    let c = cs.iter().find(|c| c.conns == conns)?;
                    Some((*config, *c))
                })
                .collect();
            if costs.is_empty() {
                continue;
            }
            // What two identical servers reached in the cell, under either profile: the
            // headline's bar for a result.
            let band = costs
                .iter()
                .filter_map(|(_, c)| aa_reach(s, c))
                .reduce(f64::max);
            let results = costs.iter().map(|(_, c)| is_result(s, c)).collect();
            rows.push(Row {
                label: format!("{}, {conns} conns", load.phrase()),
                costs,
                band,
                results,
            });
        }
    }
    rows
}

/// Whether the run has anything to draw: both profiles and the io_uring server or rx.
pub fn applies(raw: &Raw, s: &Summary) -> bool {
    !rows(raw, s).is_empty()
}

pub fn draw(path: &Path, raw: &Raw, s: &Summary) -> Result<(), ChartError> {
    let rows = rows(raw, s);
    let height = 138 + ROW_H * rows.len().max(1) as u32;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (head, body) = root.split_vertically(58);
    head.draw(&Text::new(
        "What Docker's io_uring block costs here: change in CPU per request under no-io-uring against relaxed",
        (12, 10),
        ("sans-serif", 15),
    ))?;
    // The legend above the rows, clear of every interval.
    let key = ("sans-serif", 13);
    head.draw(&Rectangle::new([(14, 36), (28, 48)], BAND.filled()))?;
    head.draw(&Text::new(
        "what two identical servers (A/A) differed by",
        (34, 35),
        key,
    ))?;
    let mut x = 330;
    for &(config, name) in &SERVERS {
        let col = colour(&Subject::Own(config));
        head.draw(&Circle::new((x, 42), 5, col.filled()))?;
        head.draw(&Text::new(name, (x + 10, 35), key))?;
        x += 170;
    }
    // With resident servers a result must also clear the A/A band; otherwise its interval
    // alone decides (headline::is_result).
    let hollow = if s.intervals_cover_processes {
        "filled: a result; hollow: not resolved"
    } else {
        "filled: a result; hollow: not resolved, or no larger than the A/A"
    };
    head.draw(&Text::new(hollow, (x, 35), key))?;
    let (lo, hi) = rows.iter().fold((1.0f64, 1.0f64), |(lo, hi), r| {
        let b = r.band.unwrap_or(0.0);
        r.costs
            .iter()
            .fold((lo.min(1.0 - b), hi.max(1.0 + b)), |(lo, hi), (_, c)| {
                (lo.min(c.ci95_low), hi.max(c.ci95_high))
            })
    });
    let span = (hi - lo).max(0.04);
    let n = rows.len().max(1) as f64;
    let labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(330)
        .build_cartesian_2d((lo - span * 0.05)..(hi + span * 0.05), 0.0..n)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(rows.len().max(1) * 2 + 1)
        .y_label_formatter(&|y| {
            let i = (y - 0.5).round();
            if (y - 0.5 - i).abs() > 1e-6 || i < 0.0 || i as usize >= labels.len() {
                return String::new();
            }
            labels[labels.len() - 1 - i as usize].clone()
        })
        .y_label_style(("sans-serif", 13))
        .x_label_formatter(&|x| format!("{:+.0} %", (x - 1.0) * 100.0))
        .x_desc("change in CPU per request, 95 % interval")
        .light_line_style(RGBColor(242, 242, 242))
        .draw()?;
    let y_of = |i: usize| n - 0.5 - i as f64;
    chart.draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
        let b = r.band?;
        Some(Rectangle::new(
            [(1.0 - b, y_of(i) - 0.45), (1.0 + b, y_of(i) + 0.45)],
            BAND.filled(),
        ))
    }))?;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(1.0, 0.0), (1.0, n)],
        RGBColor(200, 0, 0).stroke_width(1),
    )))?;
    for (k, &(config, _)) in SERVERS.iter().enumerate() {
        let col = colour(&Subject::Own(config));
        // The two servers' dots sit a little above and below the row's middle.
        let dy = 0.15 - 0.3 * k as f64;
        let of = || {
            rows.iter().enumerate().filter_map(move |(i, r)| {
                let at = r.costs.iter().position(|(c, _)| *c == config)?;
                Some((y_of(i) + dy, &r.costs[at].1, r.results[at]))
            })
        };
        chart.draw_series(of().map(|(y, c, _)| {
            PathElement::new(vec![(c.ci95_low, y), (c.ci95_high, y)], col.stroke_width(2))
        }))?;
        chart.draw_series(of().map(|(y, c, result)| {
            let style = if result { col.filled() } else { WHITE.filled() };
            EmptyElement::at((c.ratio_median, y))
                + Circle::new((0, 0), 5, style)
                + Circle::new((0, 0), 5, col.stroke_width(2))
        }))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::headline::tests::run;

    #[test]
    fn the_answer_draws_both_servers_per_cell_over_the_aa_band() {
        let (raw, s) = run();
        let rows = rows(&raw, &s);
        assert_eq!(rows.len(), 1, "one load model at one level");
        let row = &rows[0];
        assert_eq!(row.label, "kept alive, 64 conns");
        let configs: Vec<ServerConfig> = row.costs.iter().map(|(c, _)| *c).collect();
        assert_eq!(configs, [ServerConfig::IoUring, ServerConfig::Rx]);
        // The io_uring server pays 20 % under the block; rx nothing.
        let (_, io) = &row.costs[0];
        assert!(
            io.significant && (io.ratio_median - 1.2).abs() < 0.02,
            "{io:?}"
        );
        assert!(
            row.band.is_some_and(|b| b > 0.0 && b < 0.05),
            "{:?}",
            row.band
        );
        let path = std::env::temp_dir().join(format!("rxbench-answer-{}.svg", std::process::id()));
        draw(&path, &raw, &s).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        for text in [
            "What Docker&apos;s io_uring block costs here",
            "kept alive, 64 conns",
            "io_uring server",
            "epoll server (rx)",
            "change in CPU per request",
        ] {
            assert!(
                svg.contains(text) || svg.contains(&text.replace("&apos;", "'")),
                "{text}"
            );
        }
    }

    #[test]
    fn a_run_without_both_profiles_has_no_answer_to_draw() {
        let (mut raw, _) = run();
        raw.slices.retain(|s| s.server.profile == Profile::Relaxed);
        raw.servers.retain(|s| s.key.profile == Profile::Relaxed);
        let s = crate::summary::summarise(&raw);
        assert!(!applies(&raw, &s));
    }
}
