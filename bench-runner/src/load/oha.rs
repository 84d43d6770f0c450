//! oha (crates.io; the-benchmarker's load generator from 2025-02 to 2026-08), its
//! `--output-format json` parsed: the cross-check for a connection per request
//! (`--disable-keepalive`) and for open-loop latency (`-q RATE --latency-correction`). Its
//! window is the whole child run, in whole seconds, with no warm-up. Installed with
//! `cargo install oha --locked` (`.ci/run` does), never vendored.

use std::collections::BTreeMap;
use std::path::PathBuf;

use driver::report::{Errors, Latency, OpenLoop, RateStats, Report};
use serde::Deserialize;

use super::{run_child, Load, LoadDriver, LoadError, Setup};
use crate::model::LoadModel;

pub struct Oha {
    path: PathBuf,
}

impl Oha {
    /// oha on the PATH, or where `cargo install` puts it.
    pub fn find() -> Result<Oha, LoadError> {
        let cargo_bin = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
            .map(|c| c.join("bin/oha"));
        let runs = |p: &PathBuf| {
            std::process::Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        };
        std::iter::once(PathBuf::from("oha"))
            .chain(cargo_bin)
            .find(runs)
            .map(|path| Oha { path })
            .ok_or(LoadError::OhaMissing)
    }

    /// oha's command line for `load` (`url` carries the route's path).
    pub fn args(load: &Load, setup: &Setup) -> Vec<String> {
        let mut a = vec![
            "--no-tui".to_string(),
            "--output-format".into(),
            "json".into(),
            "-c".into(),
            load.conns.to_string(),
            "-z".into(),
            format!("{}s", setup.slice.as_secs().max(1)),
            "-m".into(),
            load.route.method.clone(),
        ];
        if load.model == LoadModel::PerRequest {
            a.push("--disable-keepalive".into());
        }
        if let Some(rate) = load.rate {
            a.extend([
                "-q".into(),
                format!("{rate:.0}"),
                "--latency-correction".into(),
            ]);
        }
        a.push(load.url.to_string());
        a
    }
}

impl LoadDriver for Oha {
    fn name(&self) -> &'static str {
        "oha"
    }

    fn drive(
        &self,
        load: &Load,
        setup: &Setup,
        edge: &mut dyn FnMut(),
    ) -> Result<Report, LoadError> {
        let mut cmd = std::process::Command::new(&self.path);
        cmd.args(Oha::args(load, setup));
        let out = run_child("oha", &mut cmd, edge)?;
        parse(&out, load).map_err(|detail| LoadError::Report {
            name: "oha",
            detail,
        })
    }
}

/// The part of oha's JSON report read here (times in seconds).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OhaJson {
    summary: Summary,
    latency_percentiles: Percentiles,
    #[serde(default)]
    status_code_distribution: BTreeMap<String, u64>,
    #[serde(default)]
    error_distribution: BTreeMap<String, u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    total: f64,
    slowest: Option<f64>,
    average: Option<f64>,
    total_data: Option<f64>,
}

#[derive(Deserialize)]
struct Percentiles {
    p50: Option<f64>,
    p75: Option<f64>,
    p90: Option<f64>,
    p99: Option<f64>,
    #[serde(rename = "p99.9")]
    p999: Option<f64>,
}

/// oha's report as this project's: responses from its status-code counts, req/s over its
/// whole run, percentiles in µs (corrected ones where it paced a rate).
pub fn parse(json: &[u8], load: &Load) -> Result<Report, String> {
    let j: OhaJson = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    let requests: u64 = j.status_code_distribution.values().sum();
    let bad_status: u64 = j
        .status_code_distribution
        .iter()
        .filter(|(code, _)| !code.starts_with('2') && !code.starts_with('3'))
        .map(|(_, n)| n)
        .sum();
    let us = |s: Option<f64>| s.unwrap_or(0.0) * 1e6;
    let latency = Latency {
        mean_us: us(j.summary.average),
        stdev_us: 0.0,
        max_us: us(j.summary.slowest),
        within_stdev_pct: 0.0,
        p50_us: us(j.latency_percentiles.p50),
        p75_us: us(j.latency_percentiles.p75),
        p90_us: us(j.latency_percentiles.p90),
        p99_us: us(j.latency_percentiles.p99),
        p999_us: j.latency_percentiles.p999.map(|s| s * 1e6),
    };
    let elapsed = j.summary.total;
    if elapsed <= 0.0 {
        return Err(format!("a run of {elapsed} s"));
    }
    let achieved = requests as f64 / elapsed;
    Ok(Report {
        url: load.url.to_string(),
        engine: "oha".into(),
        io_uring: None,
        threads: 1,
        connections: u64::from(load.conns),
        duration_s: elapsed,
        requests,
        elapsed_s: elapsed,
        bytes_read: j.summary.total_data.unwrap_or(0.0) as u64,
        requests_per_s: achieved,
        transfer_per_s: j.summary.total_data.unwrap_or(0.0) / elapsed,
        latency,
        req_per_thread: RateStats::default(),
        errors: Errors {
            read: j.error_distribution.values().sum(),
            status: bad_status,
            ..Errors::default()
        },
        reconnects: None,
        driver_cpu_s: None,
        driver_syscalls: None,
        latency_buckets: None,
        closes: None,
        open_loop: load.rate.map(|target_rps| OpenLoop {
            target_rps,
            deadline_s: None,
            // oha reports the corrected latency only.
            uncorrected: Latency::default(),
            send_lag_p99_us: 0.0,
            behind: fell_behind(achieved, target_rps),
        }),
    })
}

/// oha reports no send lag, so its achieved rate is the only sign that it fell behind its
/// schedule (its own core busy: on 2 cores it can offer less than half a fast server's
/// keep-alive rate). Under this fraction of the target the slice is marked behind: it cannot
/// tell a slow oha from an overloaded server, and in neither case is its latency the server's
/// at the offered rate.
pub const ON_SCHEDULE: f64 = 0.9;

fn fell_behind(achieved_rps: f64, target_rps: f64) -> bool {
    achieved_rps < ON_SCHEDULE * target_rps
}

#[cfg(test)]
mod tests {
    use super::*;
    use driver::target::Route;

    /// The shape of oha 1.x's `--output-format json` (its fields this parser does not read
    /// trimmed to what a real report has at least).
    const REPORT: &[u8] = br#"{"summary":{"successRate":1.0,"total":1.25,"slowest":0.0042,
        "fastest":0.00005,"average":0.0003,"requestsPerSec":80004.0,"totalData":0,
        "sizePerRequest":0,"sizePerSec":0},"responseTimeHistogram":{},
        "latencyPercentiles":{"p10":0.0001,"p25":0.00015,"p50":0.0002,"p75":0.00025,
        "p90":0.0003,"p95":0.00035,"p99":0.0008,"p99.9":0.002,"p99.99":0.004},
        "rps":{"mean":80000.0},"details":{},
        "statusCodeDistribution":{"200":99995,"404":5},
        "errorDistribution":{"connection closed":3}}"#;

    #[test]
    fn a_report_in_oha_s_json_reads_as_this_project_s() {
        let route = Route::get_root();
        let load = Load {
            url: "http://127.0.0.1:3000/",
            route: &route,
            model: LoadModel::Open(crate::model::Offered::Own(50)),
            conns: 64,
            rate: Some(80_000.0),
        };
        let r = parse(REPORT, &load).unwrap();
        assert_eq!(r.requests, 100_000);
        assert_eq!(r.requests_per_s, 80_000.0);
        assert_eq!((r.errors.status, r.errors.read), (5, 3));
        assert!((r.latency.p50_us - 200.0).abs() < 1e-9);
        assert!((r.latency.p99_us - 800.0).abs() < 1e-9);
        assert_eq!(r.latency.p999_us.map(f64::round), Some(2000.0));
        assert_eq!(r.open_loop.unwrap().target_rps, 80_000.0);
        assert!(!r.open_loop.unwrap().behind, "80 000 of 80 000 req/s");
        assert!(parse(b"{}", &load).is_err());
    }

    #[test]
    fn an_open_loop_oha_short_of_its_rate_is_behind_schedule() {
        let route = Route::get_root();
        let load = |rate| Load {
            url: "http://127.0.0.1:3000/",
            route: &route,
            model: LoadModel::Open(crate::model::Offered::Own(50)),
            conns: 64,
            rate: Some(rate),
        };
        // The report's 100 000 responses in 1.25 s: 80 000 req/s achieved.
        let behind = |rate| {
            parse(REPORT, &load(rate))
                .unwrap()
                .open_loop
                .unwrap()
                .behind
        };
        assert!(!behind(85_000.0), "94 % of the rate");
        assert!(behind(100_000.0), "80 % of the rate");
        let closed = Load {
            rate: None,
            ..load(1.0)
        };
        assert!(parse(REPORT, &closed).unwrap().open_loop.is_none());
    }

    #[test]
    fn the_command_line_says_the_load_model() {
        let route: Route = "POST:/user".parse().unwrap();
        let setup = Setup {
            slice: std::time::Duration::from_secs(1),
            warmup: std::time::Duration::ZERO,
            threads: 1,
            abort: Default::default(),
        };
        let load = |model, rate| Load {
            url: "http://127.0.0.1:3000/user",
            route: &route,
            model,
            conns: 16,
            rate,
        };
        let per_request = Oha::args(&load(LoadModel::PerRequest, None), &setup).join(" ");
        assert_eq!(
            per_request,
            "--no-tui --output-format json -c 16 -z 1s -m POST --disable-keepalive http://127.0.0.1:3000/user"
        );
        let open = Oha::args(
            &load(
                LoadModel::Open(crate::model::Offered::Own(50)),
                Some(5000.0),
            ),
            &setup,
        )
        .join(" ");
        assert!(
            open.ends_with("-q 5000 --latency-correction http://127.0.0.1:3000/user"),
            "{open}"
        );
    }
}
