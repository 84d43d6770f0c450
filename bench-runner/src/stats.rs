//! From measurements to the summary rows: medians over rounds, min and max, and the evidence.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{Measurement, Profile, ServerConfig};

/// Rounds in which the server used less CPU than this are marked load-bound.
pub const SATURATED_PCT: f64 = 90.0;

pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// `+8%` / `−8%` (Unicode minus, as the seed PR prints it); `±0%` when equal.
pub fn delta(value: f64, baseline: f64) -> String {
    if baseline == 0.0 {
        return "n/a".into();
    }
    let pct = (value / baseline - 1.0) * 100.0;
    let rounded = pct.round();
    if rounded == 0.0 {
        "±0%".into()
    } else if rounded > 0.0 {
        format!("+{rounded:.0}%")
    } else {
        format!("\u{2212}{:.0}%", -rounded)
    }
}

/// `356k`, `95.2k`, `812`: three significant digits.
pub fn short_rate(rps: f64) -> String {
    if rps >= 100_000.0 {
        format!("{:.0}k", rps / 1000.0)
    } else if rps >= 10_000.0 {
        format!("{:.1}k", rps / 1000.0)
    } else if rps >= 1000.0 {
        format!("{:.2}k", rps / 1000.0)
    } else {
        format!("{rps:.0}")
    }
}

/// `0.166 ms`
pub fn short_ms(us: f64) -> String {
    format!("{:.3} ms", us / 1000.0)
}

/// One line of summary.json: one profile, configuration and connection count over all rounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub profile: Profile,
    pub config: ServerConfig,
    pub conns: u32,
    /// What the server said it ran (the most common answer over rounds).
    pub backend_observed: String,
    pub io_uring: String,
    pub rounds_ok: u32,
    pub rounds_failed: u32,
    pub rps_median: f64,
    pub rps_min: f64,
    pub rps_max: f64,
    pub p50_us_median: f64,
    pub p99_us_median: f64,
    /// Median server CPU over rounds, percent of its CPUs.
    pub server_cpu: Option<f64>,
    /// Rounds where the server was below 90 % CPU: the driver, not the server, set the pace.
    pub load_bound_rounds: u32,
    /// Median over rounds, by syscall; `total` and `epoll_ctl` included.
    pub syscalls_per_request: BTreeMap<String, f64>,
    /// Set when the row did not run what its configuration claims (never silently published).
    pub flag: Option<String>,
    /// Set when the backend differs from the intent for a reason the profile explains.
    pub note: Option<String>,
}

pub fn summarise(measurements: &[Measurement]) -> Vec<Row> {
    let mut groups: BTreeMap<(Profile, ServerConfig, u32), Vec<&Measurement>> = BTreeMap::new();
    for m in measurements {
        groups
            .entry((m.profile, m.config, m.conns))
            .or_default()
            .push(m);
    }
    let mut rows = Vec::new();
    for ((profile, config, conns), ms) in groups {
        // The last attempt of each round decides it.
        let mut by_round: BTreeMap<u32, &Measurement> = BTreeMap::new();
        for m in &ms {
            let e = by_round.entry(m.round).or_insert(m);
            if m.attempt >= e.attempt {
                *e = m;
            }
        }
        let ok: Vec<&Measurement> = by_round.values().copied().filter(|m| m.ok()).collect();
        let failed = by_round.len() - ok.len();
        let rps: Vec<f64> = ok
            .iter()
            .map(|m| m.report.as_ref().unwrap().requests_per_s)
            .collect();
        let p50: Vec<f64> = ok
            .iter()
            .map(|m| m.report.as_ref().unwrap().latency.p50_us)
            .collect();
        let p99: Vec<f64> = ok
            .iter()
            .map(|m| m.report.as_ref().unwrap().latency.p99_us)
            .collect();
        let cpu: Vec<f64> = ok.iter().filter_map(|m| m.server_cpu_pct).collect();
        let mut per_name: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for m in &ok {
            if let Some(c) = &m.counters {
                for (k, v) in c.per_request() {
                    per_name.entry(k).or_default().push(v);
                }
            }
        }
        let mut backends: BTreeMap<(String, String), u32> = BTreeMap::new();
        for m in by_round.values() {
            if let Some(s) = &m.startup {
                *backends
                    .entry((s.backend.clone(), s.io_uring.clone()))
                    .or_default() += 1;
            }
        }
        let ((backend, io_uring), _) = backends
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(k, n)| (k.clone(), *n))
            .unwrap_or((("unknown".into(), "unknown".into()), 0));
        let (flag, note) = judge(config, &backend, &io_uring, backends.len());
        let flag = match (flag, failed, ok.is_empty()) {
            (f, _, true) => Some(f.unwrap_or_else(|| "every round failed".into())),
            (f, _, _) => f,
        };
        rows.push(Row {
            profile,
            config,
            conns,
            backend_observed: backend,
            io_uring,
            rounds_ok: ok.len() as u32,
            rounds_failed: failed as u32,
            rps_median: median(&rps).unwrap_or(0.0),
            rps_min: if rps.is_empty() {
                0.0
            } else {
                rps.iter().cloned().fold(f64::INFINITY, f64::min)
            },
            rps_max: rps.iter().cloned().fold(0.0, f64::max),
            p50_us_median: median(&p50).unwrap_or(0.0),
            p99_us_median: median(&p99).unwrap_or(0.0),
            server_cpu: median(&cpu),
            load_bound_rounds: cpu.iter().filter(|&&c| c < SATURATED_PCT).count() as u32,
            syscalls_per_request: per_name
                .into_iter()
                .filter_map(|(k, v)| median(&v).map(|m| (k, m)))
                .collect(),
            flag,
            note,
        });
    }
    rows
}

/// Did the row run what its configuration claims? `(flag, note)`: a flag is a problem, a note
/// an expected consequence of the profile (io_uring denied, so `auto` fell back).
fn judge(
    config: ServerConfig,
    backend: &str,
    io_uring: &str,
    distinct: usize,
) -> (Option<String>, Option<String>) {
    if distinct > 1 {
        return (Some("the backend differed between rounds".into()), None);
    }
    let intended = config.intended_backend();
    if backend == intended {
        return (None, None);
    }
    if intended == "io_uring"
        && backend.starts_with("epoll/")
        && io_uring.starts_with("unavailable(")
    {
        let why = io_uring
            .trim_start_matches("unavailable(")
            .trim_end_matches(')');
        return (
            None,
            Some(format!("io_uring denied ({why}): fell back to {backend}")),
        );
    }
    (
        Some(format!(
            "claims {intended} but ran {backend} (io_uring={io_uring})"
        )),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ServerCounters, Startup};
    use driver::report::Report;

    #[test]
    fn medians_and_deltas() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(delta(356.0, 330.0), "+8%");
        assert_eq!(delta(0.166, 0.180), "\u{2212}8%");
        assert_eq!(delta(1.0, 1.001), "±0%");
        assert_eq!(short_rate(356_123.0), "356k");
        assert_eq!(short_rate(95_240.0), "95.2k");
        assert_eq!(short_ms(166.0), "0.166 ms");
    }

    fn m(
        round: u32,
        attempt: u32,
        config: ServerConfig,
        rps: f64,
        backend: &str,
        io_uring: &str,
        ok: bool,
    ) -> Measurement {
        let mut report: Report = serde_json::from_value(serde_json::json!({
            "url": "u", "engine": "io_uring", "threads": 1, "connections": 64, "duration_s": 1.0,
            "requests": (rps as u64), "elapsed_s": 1.0, "bytes_read": 0, "requests_per_s": rps,
            "transfer_per_s": 0.0,
            "latency": {"mean_us": 1.0, "stdev_us": 0.0, "max_us": 1.0, "within_stdev_pct": 100.0,
                         "p50_us": rps / 1000.0, "p75_us": 1.0, "p90_us": 1.0, "p99_us": 2.0, "p999_us": null},
            "req_per_thread": {"mean": 0.0, "stdev": 0.0, "max": 0.0, "within_stdev_pct": 0.0},
            "errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0, "status": 0},
            "reconnects": null, "driver_cpu_s": null, "driver_syscalls": null
        }))
        .unwrap();
        report.requests_per_s = rps;
        Measurement {
            round,
            profile: Profile::NoIoUring,
            config,
            conns: 64,
            attempt,
            startup: Some(Startup {
                line: String::new(),
                backend: backend.into(),
                io_uring: io_uring.into(),
                workers: 1,
            }),
            report: ok.then_some(report),
            server_cpu_pct: Some(if round == 1 { 80.0 } else { 99.0 }),
            counters: Some(ServerCounters {
                requests: 100,
                connections: 64,
                syscalls: [
                    ("recvfrom".to_string(), 100),
                    ("sendto".to_string(), 100),
                    ("epoll_ctl_mod".to_string(), 100 * round as u64),
                ]
                .into(),
            }),
            error: (!ok).then(|| "crashed".to_string()),
        }
    }

    #[test]
    fn rows_take_medians_keep_min_max_and_judge_the_backend() {
        let ms = vec![
            m(
                1,
                1,
                ServerConfig::Oneshot,
                100.0,
                "epoll/oneshot",
                "not-tried",
                true,
            ),
            m(
                2,
                1,
                ServerConfig::Oneshot,
                300.0,
                "epoll/oneshot",
                "not-tried",
                false,
            ),
            m(
                2,
                2,
                ServerConfig::Oneshot,
                120.0,
                "epoll/oneshot",
                "not-tried",
                true,
            ),
            m(
                3,
                1,
                ServerConfig::Oneshot,
                110.0,
                "epoll/oneshot",
                "not-tried",
                true,
            ),
            m(
                1,
                1,
                ServerConfig::IoUring,
                90.0,
                "epoll/rx",
                "unavailable(EPERM)",
                true,
            ),
            m(
                1,
                1,
                ServerConfig::Rx,
                90.0,
                "epoll/legacy",
                "not-tried",
                true,
            ),
        ];
        let rows = summarise(&ms);
        let one = rows
            .iter()
            .find(|r| r.config == ServerConfig::Oneshot)
            .unwrap();
        assert_eq!(
            (one.rps_median, one.rps_min, one.rps_max),
            (110.0, 100.0, 120.0)
        );
        assert_eq!(
            (one.rounds_ok, one.rounds_failed),
            (3, 0),
            "the retry replaced the failed attempt"
        );
        assert_eq!(one.load_bound_rounds, 1);
        assert_eq!(one.syscalls_per_request["epoll_ctl"], 2.0);
        assert_eq!(one.syscalls_per_request["total"], 4.0);
        assert_eq!((one.flag.as_deref(), one.note.as_deref()), (None, None));
        let uring = rows
            .iter()
            .find(|r| r.config == ServerConfig::IoUring)
            .unwrap();
        assert_eq!(uring.flag, None);
        assert_eq!(
            uring.note.as_deref(),
            Some("io_uring denied (EPERM): fell back to epoll/rx")
        );
        let rx = rows.iter().find(|r| r.config == ServerConfig::Rx).unwrap();
        assert!(rx
            .flag
            .as_deref()
            .unwrap()
            .starts_with("claims epoll/rx but ran epoll/legacy"));
    }

    #[test]
    fn a_row_whose_rounds_all_failed_is_flagged_not_dropped() {
        let rows = summarise(&[m(
            1,
            2,
            ServerConfig::Rx,
            5.0,
            "epoll/rx",
            "not-tried",
            false,
        )]);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].rounds_failed, 1);
        assert_eq!(rows[0].flag.as_deref(), Some("every round failed"));
    }
}
