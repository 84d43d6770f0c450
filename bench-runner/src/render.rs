//! Writes a run's results: raw.json, summary.json, table.md, results.csv and chart.svg.

use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;
use serde::Serialize;

use crate::model::{Profile, Raw, ServerConfig};
use crate::stats::{delta, short_ms, short_rate, summarise, Row, SATURATED_PCT};

#[derive(Serialize)]
pub struct Summary<'a> {
    pub engine: &'a str,
    pub machine: &'a crate::model::Machine,
    pub driver: &'a str,
    pub started_utc: &'a str,
    pub settings: &'a serde_json::Value,
    pub notes: &'a [String],
    pub rows: &'a [Row],
}

/// Writes every output derived from `raw` into `dir` (raw.json itself is the runner's to write:
/// re-rendering never rewrites the source).
pub fn write_all(dir: &Path, raw: &Raw) -> Result<Vec<Row>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let rows = summarise(&raw.measurements);
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .with_context(|| format!("writing {}", dir.join(name).display()))
    };
    let summary = Summary {
        engine: &raw.engine,
        machine: &raw.machine,
        driver: &raw.driver,
        started_utc: &raw.started_utc,
        settings: &raw.settings,
        notes: &raw.notes,
        rows: &rows,
    };
    write("summary.json", serde_json::to_string_pretty(&summary)?)?;
    write("table.md", table_md(raw, &rows))?;
    write("results.csv", csv(&rows))?;
    chart(&dir.join("chart.svg"), &rows)?;
    Ok(rows)
}

fn cell(rows: &[Row], p: Profile, c: ServerConfig, conns: u32) -> Option<&Row> {
    rows.iter()
        .find(|r| r.profile == p && r.config == c && r.conns == conns)
}

fn mark(r: &Row) -> &'static str {
    if r.flag.is_some() {
        " ⚠"
    } else if r.load_bound_rounds > 0 {
        " ᴸ"
    } else {
        ""
    }
}

/// The seed PR's table per profile (req/s and P50 with deltas), then the evidence per row.
pub fn table_md(raw: &Raw, rows: &[Row]) -> String {
    let mut s = String::new();
    s += "# rxbench results\n\n";
    s += &format!(
        "Engine: {}. Machine: {} ({} cores), kernel {}. Driver: {}. Started {}.\n\n",
        raw.engine,
        raw.machine.cpu_model,
        raw.machine.cores,
        raw.machine.kernel,
        raw.driver,
        raw.started_utc
    );
    if let Some(o) = raw.settings.as_object() {
        let parts: Vec<String> = o.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s += &format!("Settings: {}.\n\n", parts.join(", "));
    }
    for n in &raw.notes {
        s += &format!("- {n}\n");
    }
    if !raw.notes.is_empty() {
        s += "\n";
    }
    s += "Medians over rounds; deltas against the column they replace (rx and oneshot against \
legacy; io_uring after against io_uring before, the control: same server, so its delta is the \
noise). ᴸ: at least one round had the server below 90 % CPU (load-bound: the driver set the \
pace). ⚠: the configuration did not run what it claims, see the evidence table.\n\n";
    let configs = [
        ServerConfig::Legacy,
        ServerConfig::Rx,
        ServerConfig::IoUring,
        ServerConfig::IoUringControl,
        ServerConfig::Oneshot,
    ];
    let mut conns: Vec<u32> = rows.iter().map(|r| r.conns).collect();
    conns.sort_unstable();
    conns.dedup();
    for profile in Profile::ALL {
        if !rows.iter().any(|r| r.profile == profile) {
            continue;
        }
        s += &format!("## Profile `{}`\n\n", profile.name());
        for (title, is_rate) in [("req/s", true), ("P50 latency", false)] {
            s += &format!("{title}:\n\n| conns |");
            for c in configs {
                s += &format!(" {} |", c.heading());
            }
            s += "\n| --- |";
            for _ in configs {
                s += " --- |";
            }
            s += "\n";
            for &n in &conns {
                s += &format!("| {n} |");
                for c in configs {
                    let Some(r) = cell(rows, profile, c, n) else {
                        s += " – |";
                        continue;
                    };
                    let (v, fmt) = if is_rate {
                        (r.rps_median, short_rate(r.rps_median))
                    } else {
                        (r.p50_us_median, short_ms(r.p50_us_median))
                    };
                    let d = c
                        .baseline()
                        .and_then(|b| cell(rows, profile, b, n))
                        .map(|b| {
                            let base = if is_rate {
                                b.rps_median
                            } else {
                                b.p50_us_median
                            };
                            format!(" ({})", delta(v, base))
                        })
                        .unwrap_or_default();
                    s += &format!(" {fmt}{d}{} |", mark(r));
                }
                s += "\n";
            }
            s += "\n";
        }
    }
    s += "## Evidence\n\n";
    s += "| profile | config | backend observed | conns | req/s median [min–max] | P50 | P99 | server CPU | load-bound rounds | syscalls/req (epoll_ctl) | rounds ok/failed | notes |\n";
    s += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for r in rows {
        let sys = |k: &str| {
            r.syscalls_per_request
                .get(k)
                .map_or("–".into(), |v| format!("{v:.3}"))
        };
        let notes = match (&r.flag, &r.note) {
            (Some(f), _) => format!("⚠ {f}"),
            (None, Some(n)) => n.clone(),
            _ => String::new(),
        };
        s += &format!(
            "| {} | {} | {} io_uring={} | {} | {:.0} [{:.0}–{:.0}] | {} | {} | {} | {} | {} ({}) | {}/{} | {} |\n",
            r.profile.name(),
            r.config.name(),
            r.backend_observed,
            r.io_uring,
            r.conns,
            r.rps_median,
            r.rps_min,
            r.rps_max,
            short_ms(r.p50_us_median),
            short_ms(r.p99_us_median),
            r.server_cpu.map_or("–".into(), |c| format!("{c:.0} %")),
            r.load_bound_rounds,
            sys("total"),
            sys("epoll_ctl"),
            r.rounds_ok,
            r.rounds_failed,
            notes
        );
    }
    s += &format!(
        "\nsyscalls/req: the server's own counters (its SIGTERM line) divided by the requests it \
counted over the same window (warm-up included on both sides). Server CPU: the container's \
cgroup CPU time (native: the process's) over the measured window, in percent of its CPUs; \
below {SATURATED_PCT:.0} % the round is load-bound.\n"
    );
    s
}

pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "profile,config,backend_observed,io_uring,conns,rounds_ok,rounds_failed,rps_median,rps_min,rps_max,p50_us_median,p99_us_median,server_cpu,load_bound_rounds,syscalls_per_request_total,epoll_ctl_per_request,flag,note\n",
    );
    let q = |t: &str| format!("\"{}\"", t.replace('"', "\"\""));
    for r in rows {
        let sys = |k: &str| {
            r.syscalls_per_request
                .get(k)
                .map_or(String::new(), |v| format!("{v:.4}"))
        };
        s += &format!(
            "{},{},{},{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.1},{},{},{},{},{},{}\n",
            r.profile.name(),
            r.config.name(),
            r.backend_observed,
            q(&r.io_uring),
            r.conns,
            r.rounds_ok,
            r.rounds_failed,
            r.rps_median,
            r.rps_min,
            r.rps_max,
            r.p50_us_median,
            r.p99_us_median,
            r.server_cpu.map_or(String::new(), |c| format!("{c:.1}")),
            r.load_bound_rounds,
            sys("total"),
            sys("epoll_ctl"),
            q(r.flag.as_deref().unwrap_or("")),
            q(r.note.as_deref().unwrap_or(""))
        );
    }
    s
}

/// req/s and P50 against connections, one line per profile and configuration.
pub fn chart(path: &Path, rows: &[Row]) -> Result<()> {
    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(600);
    let mut conns: Vec<u32> = rows.iter().map(|r| r.conns).collect();
    conns.sort_unstable();
    conns.dedup();
    let x_max = conns.last().copied().unwrap_or(1) as f64 * 1.05;
    let series: Vec<(String, Vec<&Row>)> = {
        let mut keys: Vec<(Profile, ServerConfig)> =
            rows.iter().map(|r| (r.profile, r.config)).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|(p, c)| {
                let mut pts: Vec<&Row> = rows
                    .iter()
                    .filter(|r| r.profile == p && r.config == c && r.rounds_ok > 0)
                    .collect();
                pts.sort_by_key(|r| r.conns);
                (format!("{} / {}", p.name(), c.name()), pts)
            })
            .collect()
    };
    // Legends where the lines are not: req/s sits high, latency rises to the right.
    let rate: fn(&Row) -> f64 = |r| r.rps_median;
    let p50: fn(&Row) -> f64 = |r| r.p50_us_median / 1000.0;
    for (area, title, pick, legend_at) in [
        (
            &left,
            "req/s (median)",
            rate,
            SeriesLabelPosition::LowerRight,
        ),
        (
            &right,
            "P50 latency (ms, median)",
            p50,
            SeriesLabelPosition::UpperLeft,
        ),
    ] {
        let y_max = rows.iter().map(pick).fold(0.0, f64::max).max(1e-9) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart.configure_mesh().x_desc("connections").draw()?;
        for (i, (name, pts)) in series.iter().enumerate() {
            let color = Palette99::pick(i).stroke_width(2);
            let line: Vec<(f64, f64)> = pts.iter().map(|r| (r.conns as f64, pick(r))).collect();
            chart
                .draw_series(LineSeries::new(line.clone(), color))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(
                        vec![(x, y), (x + 16, y)],
                        Palette99::pick(i).stroke_width(2),
                    )
                });
            chart.draw_series(
                line.iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, Palette99::pick(i).filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .position(legend_at)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 11))
            .draw()?;
    }
    root.present().context("writing chart.svg")?;
    Ok(())
}
