//! From slices to what the report prints, with no I/O: one row per cell, the paired
//! comparisons with their intervals, and the run's resolution (the A/A control's interval).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{Profile, Raw, ServerConfig, ServerCounters, ServerKey, Slice, Subject};
use crate::stats::{bootstrap_median, median, paired_ratios, seed_for, Interval};

/// A slice in which the server used less of its CPUs than this is unsaturated: its req/s
/// measured the driver or the machine, not the server.
pub const SATURATED: f64 = 0.90;
/// A resolution worse than this (A/A half-width) cannot separate the effects this suite is for.
pub const RESOLUTION_LIMIT: f64 = 0.03;
/// The pseudo-route of the-benchmarker's published figure: the mean over the routes.
pub const MEAN_ROUTE: &str = "mean";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    CpuPerRequest,
    Rps,
    /// Each slice's median latency.
    P50,
}

impl Metric {
    /// As summary.json spells it.
    pub fn key(self) -> &'static str {
        match self {
            Metric::CpuPerRequest => "cpu_per_request",
            Metric::Rps => "rps",
            Metric::P50 => "p50",
        }
    }
}

/// One line of summary.json: one server at one connection level on one route, over all slices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub profile: Profile,
    pub config: Subject,
    pub conns: u32,
    pub route: String,
    /// What the server said it ran (its start-up line).
    pub backend_observed: String,
    pub io_uring: String,
    /// Slices that measured (the name is the old table's: one slice per round).
    pub rounds_ok: u32,
    pub rounds_failed: u32,
    /// Median req/s over the saturated slices (over all, when none was saturated).
    pub rps_median: f64,
    pub rps_min: f64,
    pub rps_max: f64,
    /// Median server CPU time per request, in µs, over every slice.
    pub cpu_us_per_request: Option<f64>,
    pub cpu_us_per_request_min: Option<f64>,
    pub cpu_us_per_request_max: Option<f64>,
    /// Percentiles of the slices' histograms merged.
    pub p50_us: f64,
    pub p99_us: f64,
    /// Medians over slices of each slice's percentile.
    pub p50_us_median: f64,
    pub p99_us_median: f64,
    /// Median server CPU over slices, percent of its CPUs.
    pub server_cpu: Option<f64>,
    /// Median driver CPU over slices, percent of the load CPUs (near 100: the driver, not the
    /// server, may be what limits req/s).
    pub driver_cpu: Option<f64>,
    /// Slices with the server below 90 % CPU (their req/s is left out of `rps_median`).
    pub load_bound_rounds: u32,
    /// The server's counters summed over the slices, divided by its requests; by syscall,
    /// with `total` and `epoll_ctl`.
    pub syscalls_per_request: BTreeMap<String, f64>,
    /// Set when the row did not run what its configuration claims (never silently published).
    pub flag: Option<String>,
    /// Set when the backend differs from the intent for a reason the profile explains.
    pub note: Option<String>,
}

/// A paired comparison: `config` under `profile` against `baseline` under `baseline_profile`,
/// slice by slice in the same rounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub profile: Profile,
    pub conns: u32,
    pub route: String,
    pub config: Subject,
    pub baseline: Subject,
    pub baseline_profile: Profile,
    pub metric: Metric,
    /// Median of config / baseline over the pairs (< 1 on CPU per request: config is cheaper).
    pub ratio_median: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
    /// The interval excludes 1.
    pub significant: bool,
    pub pairs: usize,
}

impl Comparison {
    pub fn interval(&self) -> Interval {
        Interval {
            median: self.ratio_median,
            low: self.ci95_low,
            high: self.ci95_high,
            n: self.pairs,
        }
    }
}

/// The A/A control's interval half-width for one profile, level and route.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    pub profile: Profile,
    pub conns: u32,
    pub route: String,
    pub metric: Metric,
    /// 0.016 = the run resolves ±1.6 %.
    pub half_width: f64,
    /// The farthest end of the A/A interval from 1 (0.021: two identical servers may seem
    /// 2.1 % apart here); above the half-width when the pair itself came out apart.
    pub aa_bound: f64,
    /// The A/A interval excludes 1: the same server twice was told apart in this cell.
    pub aa_apart: bool,
}

/// The-benchmarker's figure: the mean over the routes of each route's req/s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouteMean {
    pub profile: Profile,
    pub config: Subject,
    pub conns: u32,
    pub rps_mean: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Summary {
    pub rows: Vec<Row>,
    pub comparisons: Vec<Comparison>,
    pub resolution: Vec<Resolution>,
    /// The worst A/A half-width per metric (`None`: no control in this run).
    pub resolution_worst: BTreeMap<String, f64>,
    pub route_means: Vec<RouteMean>,
}

impl Summary {
    /// What was measured under `profile`: this project's configurations in `order`, then the
    /// foreign servers by name.
    pub fn subjects_of(&self, profile: Profile, order: &[ServerConfig]) -> Vec<Subject> {
        let measured = |c: &Subject| {
            self.rows
                .iter()
                .any(|r| r.profile == profile && &r.config == c)
        };
        let own = order.iter().map(|&c| Subject::Own(c)).filter(measured);
        let mut foreign: Vec<Subject> = self
            .rows
            .iter()
            .filter(|r| r.profile == profile && r.config.own().is_none())
            .map(|r| r.config.clone())
            .collect();
        foreign.sort();
        foreign.dedup();
        own.chain(foreign).collect()
    }
}

/// Cell key: server, connection level, route.
type CellKey = (ServerKey, u32, String);

pub fn summarise(raw: &Raw) -> Summary {
    let cpus = raw.settings.server_cpus.len().max(1);
    let mut cells: BTreeMap<CellKey, Vec<&Slice>> = BTreeMap::new();
    for s in &raw.slices {
        cells
            .entry((s.server.clone(), s.conns, s.route.clone()))
            .or_default()
            .push(s);
    }
    // A server that never started still gets its rows, flagged with why.
    for record in &raw.servers {
        for &conns in &raw.settings.conns {
            for route in &raw.settings.routes {
                cells
                    .entry((record.key.clone(), conns, route.clone()))
                    .or_default();
            }
        }
    }
    let rows: Vec<Row> = cells
        .iter()
        .map(|((key, conns, route), slices)| row(raw, key, *conns, route, slices, cpus))
        .collect();

    // Per cell and metric: round -> value, for the pairing.
    let mut series: BTreeMap<(CellKey, Metric), BTreeMap<u32, f64>> = BTreeMap::new();
    for (key, slices) in &cells {
        for s in slices.iter().filter(|s| s.ok()) {
            if let Some(c) = s.cpu_us_per_request() {
                series
                    .entry((key.clone(), Metric::CpuPerRequest))
                    .or_default()
                    .insert(s.round, c);
            }
            if let Some(r) = &s.report {
                series
                    .entry((key.clone(), Metric::P50))
                    .or_default()
                    .insert(s.round, r.latency.p50_us);
            }
            // req/s only where the server set the pace.
            if let (Some(r), Some(u)) = (s.rps(), s.utilisation(cpus)) {
                if u >= SATURATED {
                    series
                        .entry((key.clone(), Metric::Rps))
                        .or_default()
                        .insert(s.round, r);
                }
            }
        }
    }
    let routes = &raw.settings.routes;
    if routes.len() > 1 {
        add_route_means(&mut series, routes);
    }

    let mut comparisons = Vec::new();
    let servers: Vec<ServerKey> = raw.servers.iter().map(|s| s.key.clone()).collect();
    let mut route_names = routes.clone();
    if routes.len() > 1 {
        route_names.push(MEAN_ROUTE.into());
    }
    let references: Vec<Subject> = raw
        .references
        .iter()
        .map(|r| Subject::Foreign(r.as_str().into()))
        .collect();
    for pair in comparison_pairs(&servers, &references) {
        for &conns in &raw.settings.conns {
            for route in &route_names {
                for metric in [Metric::CpuPerRequest, Metric::Rps, Metric::P50] {
                    let get =
                        |k: &ServerKey| series.get(&((k.clone(), conns, route.clone()), metric));
                    let (Some(a), Some(b)) = (get(&pair.0), get(&pair.1)) else {
                        continue;
                    };
                    let name = format!("{}|{}|{conns}|{route}|{metric:?}", pair.0, pair.1);
                    let Some(i) =
                        bootstrap_median(&paired_ratios(a, b), seed_for(raw.settings.seed, &name))
                    else {
                        continue;
                    };
                    comparisons.push(Comparison {
                        profile: pair.0.profile,
                        conns,
                        route: route.clone(),
                        config: pair.0.config.clone(),
                        baseline: pair.1.config.clone(),
                        baseline_profile: pair.1.profile,
                        metric,
                        ratio_median: i.median,
                        ci95_low: i.low,
                        ci95_high: i.high,
                        significant: i.excludes_one(),
                        pairs: i.n,
                    });
                }
            }
        }
    }
    let resolution: Vec<Resolution> = comparisons
        .iter()
        .filter(|c| {
            c.metric != Metric::P50
                && c.config == Subject::Own(ServerConfig::IoUringControl)
                && c.baseline == Subject::Own(ServerConfig::IoUring)
                && c.profile == c.baseline_profile
        })
        .map(|c| Resolution {
            profile: c.profile,
            conns: c.conns,
            route: c.route.clone(),
            metric: c.metric,
            half_width: c.interval().half_width(),
            aa_bound: (1.0 - c.ci95_low).max(c.ci95_high - 1.0),
            aa_apart: c.significant,
        })
        .collect();
    let mut resolution_worst = BTreeMap::new();
    for r in &resolution {
        let e = resolution_worst
            .entry(r.metric.key().to_string())
            .or_insert(0.0f64);
        *e = e.max(r.half_width);
    }
    let route_means = route_means(&rows, routes);
    Summary {
        rows,
        comparisons,
        resolution,
        resolution_worst,
        route_means,
    }
}

/// Every comparison the table shows: the seed PR's before/after pairs within a profile; each
/// of this project's configurations, and each `references` server, against each (other)
/// foreign server under the same profile; and each profile against `relaxed` for the same
/// server (what the filter itself costs).
pub fn comparison_pairs(
    servers: &[ServerKey],
    references: &[Subject],
) -> Vec<(ServerKey, ServerKey)> {
    let mut pairs = Vec::new();
    let mut add = |a: &ServerKey, b: ServerKey| {
        if servers.contains(&b) {
            pairs.push((a.clone(), b));
        }
    };
    for a in servers {
        if let Some(base) = a.config.baseline() {
            add(
                a,
                ServerKey {
                    profile: a.profile,
                    config: base,
                },
            );
        }
    }
    let subject = |k: &&ServerKey| k.config.own().is_some() || references.contains(&k.config);
    for a in servers.iter().filter(subject) {
        for b in servers.iter().filter(|k| k.config.own().is_none()) {
            // A reference is the subject against the others, not the baseline of another.
            let both_references = references.contains(&a.config) && references.contains(&b.config);
            if b.profile == a.profile && b.config != a.config && !both_references {
                add(a, b.clone());
            }
        }
    }
    for a in servers.iter().filter(|k| k.profile != Profile::Relaxed) {
        add(
            a,
            ServerKey {
                profile: Profile::Relaxed,
                config: a.config.clone(),
            },
        );
    }
    pairs
}

/// Adds the per-round mean over the routes (rounds where every route measured) as the
/// [`MEAN_ROUTE`] series of each server and level.
fn add_route_means(
    series: &mut BTreeMap<(CellKey, Metric), BTreeMap<u32, f64>>,
    routes: &[String],
) {
    let mut means: BTreeMap<(CellKey, Metric), BTreeMap<u32, f64>> = BTreeMap::new();
    let keys: std::collections::BTreeSet<(ServerKey, u32, Metric)> = series
        .keys()
        .map(|((k, c, _), m)| (k.clone(), *c, *m))
        .collect();
    for (key, conns, metric) in keys {
        let per_route: Vec<&BTreeMap<u32, f64>> = routes
            .iter()
            .filter_map(|r| series.get(&((key.clone(), conns, r.clone()), metric)))
            .collect();
        if per_route.len() != routes.len() {
            continue;
        }
        let rounds = per_route[0]
            .keys()
            .filter(|r| per_route.iter().all(|s| s.contains_key(r)));
        let out: BTreeMap<u32, f64> = rounds
            .map(|r| {
                (
                    *r,
                    per_route.iter().map(|s| s[r]).sum::<f64>() / routes.len() as f64,
                )
            })
            .collect();
        means.insert(((key, conns, MEAN_ROUTE.into()), metric), out);
    }
    series.extend(means);
}

fn route_means(rows: &[Row], routes: &[String]) -> Vec<RouteMean> {
    if routes.len() < 2 {
        return vec![];
    }
    let mut sums: BTreeMap<(Profile, Subject, u32), Vec<f64>> = BTreeMap::new();
    for r in rows {
        sums.entry((r.profile, r.config.clone(), r.conns))
            .or_default()
            .push(r.rps_median);
    }
    sums.into_iter()
        .filter(|(_, v)| v.len() == routes.len())
        .map(|((profile, config, conns), v)| RouteMean {
            profile,
            config,
            conns,
            rps_mean: v.iter().sum::<f64>() / v.len() as f64,
        })
        .collect()
}

fn row(raw: &Raw, key: &ServerKey, conns: u32, route: &str, slices: &[&Slice], cpus: usize) -> Row {
    let load_cpus = raw.settings.load_cpus.len().max(1);
    let ok: Vec<&Slice> = slices.iter().copied().filter(|s| s.ok()).collect();
    let util: Vec<Option<f64>> = ok.iter().map(|s| s.utilisation(cpus)).collect();
    let saturated: Vec<f64> = ok
        .iter()
        .zip(&util)
        .filter(|(_, u)| u.is_some_and(|u| u >= SATURATED))
        .filter_map(|(s, _)| s.rps())
        .collect();
    let all_rps: Vec<f64> = ok.iter().filter_map(|s| s.rps()).collect();
    let cpu_req: Vec<f64> = ok.iter().filter_map(|s| s.cpu_us_per_request()).collect();
    let reports: Vec<&driver::report::Report> =
        ok.iter().filter_map(|s| s.report.as_ref()).collect();
    let buckets: Vec<&driver::report::LatencyBuckets> = reports
        .iter()
        .filter_map(|r| r.latency_buckets.as_ref())
        .collect();
    let merged = |q: f64| driver::report::LatencyBuckets::merged_quantile(&buckets, q);
    let slice_p = |f: fn(&driver::report::Report) -> f64| {
        median(&reports.iter().map(|r| f(r)).collect::<Vec<_>>()).unwrap_or(0.0)
    };
    let p50_median = slice_p(|r| r.latency.p50_us);
    let p99_median = slice_p(|r| r.latency.p99_us);
    let mut counters = ServerCounters::default();
    for c in ok.iter().filter_map(|s| s.counters.as_ref()) {
        counters.add(c);
    }
    let unsaturated = util
        .iter()
        .filter(|u| u.is_none_or(|u| u < SATURATED))
        .count();
    let record = raw.server(key);
    let startup = record.and_then(|r| r.startup.as_ref());
    let backend = startup.map_or("unknown".into(), |s| s.backend.clone());
    let io_uring = startup.map_or("unknown".into(), |s| s.io_uring.clone());
    let (mut flag, mut note) = match key.config.own() {
        Some(config) => judge(config, &backend, &io_uring),
        None => (None, None),
    };
    let never_started = record.is_some_and(|r| r.startup.is_none() && !r.events.is_empty());
    if never_started {
        // A result, not a crash of the run: say what the server itself said last.
        let last = record
            .and_then(|r| r.events.last())
            .and_then(|e| e.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("");
        flag = Some(format!("did not start: {last}"));
    } else if slices.is_empty() {
        let why = record
            .and_then(|r| r.events.last())
            .map_or("not measured", |e| e.lines().next().unwrap_or(""));
        flag = Some(format!("no slice: {why}"));
    } else if ok.is_empty() {
        flag = Some(flag.unwrap_or_else(|| {
            let why = slices
                .iter()
                .find_map(|s| s.error.clone())
                .unwrap_or_default();
            format!("every slice failed: {}", why.lines().next().unwrap_or(""))
        }));
    } else if saturated.is_empty() {
        let n = "no slice saturated the server: req/s is the median of all slices and measured the driver or the machine";
        note = Some(note.map_or(n.to_string(), |o| format!("{o}; {n}")));
    }
    let rps_basis = if saturated.is_empty() {
        &all_rps
    } else {
        &saturated
    };
    let min_max = |v: &[f64]| {
        (
            v.iter().copied().reduce(f64::min),
            v.iter().copied().reduce(f64::max),
        )
    };
    let (rps_min, rps_max) = min_max(&all_rps);
    let (cpu_min, cpu_max) = min_max(&cpu_req);
    Row {
        profile: key.profile,
        config: key.config.clone(),
        conns,
        route: route.to_string(),
        backend_observed: backend,
        io_uring,
        rounds_ok: ok.len() as u32,
        rounds_failed: (slices.len() - ok.len()) as u32,
        rps_median: median(rps_basis).unwrap_or(0.0),
        rps_min: rps_min.unwrap_or(0.0),
        rps_max: rps_max.unwrap_or(0.0),
        cpu_us_per_request: median(&cpu_req),
        cpu_us_per_request_min: cpu_min,
        cpu_us_per_request_max: cpu_max,
        p50_us: merged(0.50).unwrap_or(p50_median),
        p99_us: merged(0.99).unwrap_or(p99_median),
        p50_us_median: p50_median,
        p99_us_median: p99_median,
        server_cpu: median(&util.iter().flatten().map(|u| u * 100.0).collect::<Vec<_>>()),
        driver_cpu: median(
            &ok.iter()
                .filter_map(|s| {
                    let cpu = s.report.as_ref()?.driver_cpu_s?;
                    (s.window_s > 0.0).then(|| cpu / s.window_s / load_cpus as f64 * 100.0)
                })
                .collect::<Vec<_>>(),
        ),
        load_bound_rounds: unsaturated as u32,
        syscalls_per_request: counters.per_request(),
        flag,
        note,
    }
}

/// Did the server run what its configuration claims? `(flag, note)`: a flag is a problem, a
/// note an expected consequence of the profile (io_uring denied, so `auto` fell back).
fn judge(config: ServerConfig, backend: &str, io_uring: &str) -> (Option<String>, Option<String>) {
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
pub mod tests {
    use super::*;
    use crate::model::{Machine, ServerRecord, Settings, Startup};

    pub fn report(requests: u64, p50: f64) -> driver::report::Report {
        let mut r: driver::report::Report = serde_json::from_value(serde_json::json!({
            "url": "u", "engine": "io_uring", "threads": 1, "connections": 64, "duration_s": 1.0,
            "requests": requests, "elapsed_s": 1.0, "bytes_read": 0, "requests_per_s": requests as f64,
            "transfer_per_s": 0.0,
            "latency": {"mean_us": 1.0, "stdev_us": 0.0, "max_us": 1.0, "within_stdev_pct": 100.0,
                         "p50_us": p50, "p75_us": 1.0, "p90_us": 1.0, "p99_us": 2.0 * p50, "p999_us": null},
            "req_per_thread": {"mean": 0.0, "stdev": 0.0, "max": 0.0, "within_stdev_pct": 0.0},
            "errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0, "status": 0},
            "reconnects": null, "driver_cpu_s": null, "driver_syscalls": null
        }))
        .unwrap();
        // 60 % of the samples at `p50`, the rest at twice that.
        let at_p50 = requests * 6 / 10;
        r.latency_buckets = Some(driver::report::LatencyBuckets(vec![
            (p50 as u64, at_p50),
            (2 * p50 as u64, requests - at_p50),
        ]));
        r
    }

    fn key(profile: Profile, config: impl Into<Subject>) -> ServerKey {
        ServerKey {
            profile,
            config: config.into(),
        }
    }

    /// A run of `rounds` over the given servers, where `cost(key, round)` gives the CPU µs per
    /// request and `util(key, round)` the server's utilisation; 100 000 requests a slice scaled
    /// by the machine's speed in that round.
    pub fn synthetic(
        servers: &[ServerKey],
        rounds: u32,
        cost: impl Fn(&ServerKey, u32) -> f64,
        util: impl Fn(&ServerKey, u32) -> f64,
    ) -> Raw {
        let mut slices = Vec::new();
        for round in 1..=rounds {
            for (i, k) in servers.iter().enumerate() {
                let c = cost(k, round);
                let u = util(k, round);
                // Requests the server can do in the window at that cost and utilisation.
                let requests = (u * 1e6 / c) as u64;
                slices.push(Slice {
                    round,
                    position: i as u32,
                    server: k.clone(),
                    conns: 64,
                    route: "GET:/".into(),
                    at_s: 0.0,
                    window_s: 1.0,
                    report: Some(report(requests, 150.0)),
                    server_cpu_ns: Some((u * 1e9) as u64),
                    counters: Some(ServerCounters {
                        requests,
                        connections: 0,
                        syscalls: [
                            ("recvfrom".to_string(), requests),
                            ("sendto".to_string(), requests),
                        ]
                        .into(),
                    }),
                    error: None,
                });
            }
        }
        Raw {
            schema: crate::model::SCHEMA,
            engine: "native".into(),
            machine: Machine::default(),
            driver: "rxload".into(),
            started_utc: String::new(),
            commit: None,
            foreign: vec![],
            references: vec![],
            settings: Settings {
                rounds,
                slice_s: 1.0,
                slice_warmup_s: 0.3,
                conns: vec![64],
                routes: vec!["GET:/".into()],
                seed: 9,
                server_cpus: vec![0],
                load_cpus: vec![1],
                network: "host".into(),
                target_host: "127.0.0.1".into(),
            },
            servers: servers
                .iter()
                .map(|k| ServerRecord {
                    key: k.clone(),
                    port: 3000,
                    startup: Some(Startup {
                        line: String::new(),
                        backend: k
                            .config
                            .own()
                            .map_or("foreign", |c| c.intended_backend())
                            .into(),
                        io_uring: "active(x)".into(),
                        workers: 1,
                    }),
                    starts: 1,
                    events: vec![],
                    final_counters: None,
                    strace: None,
                })
                .collect(),
            slices,
            notes: vec![],
            complete: true,
        }
    }

    #[test]
    fn paired_comparisons_find_the_real_difference_and_not_the_control() {
        let servers = [
            key(Profile::Relaxed, ServerConfig::Legacy),
            key(Profile::Relaxed, ServerConfig::Rx),
            key(Profile::Relaxed, ServerConfig::IoUring),
            key(Profile::Relaxed, ServerConfig::IoUringControl),
        ];
        // Legacy costs 14 % more than rx; both io_uring servers are the same; the machine
        // drifts by ±20 % between rounds and every slice has 1–2 % noise of its own.
        let noise = |k: &ServerKey, r: u32| {
            let c = k.config.own().unwrap() as u32;
            1.0 + 0.015 * ((r * 7 + c * 13) as f64).sin()
        };
        let raw = synthetic(
            &servers,
            24,
            |k, r| {
                let base = match k.config.own().unwrap() {
                    ServerConfig::Legacy => 7.8,
                    ServerConfig::Rx => 6.85,
                    _ => 7.3,
                };
                base * (1.0 + 0.2 * (r as f64).sin()) * noise(k, r)
            },
            |_, r| if r % 6 == 0 { 0.45 } else { 0.98 },
        );
        let s = summarise(&raw);
        let cmp = |config, metric| {
            s.comparisons
                .iter()
                .find(|c| c.config == config && c.metric == metric)
                .unwrap()
        };
        let rx = cmp(ServerConfig::Rx, Metric::CpuPerRequest);
        assert_eq!((&rx.baseline, rx.pairs), (&ServerConfig::Legacy.into(), 24));
        assert!(rx.significant && rx.ci95_high < 0.9, "{rx:?}");
        let control = cmp(ServerConfig::IoUringControl, Metric::CpuPerRequest);
        assert_eq!(control.baseline, ServerConfig::IoUring);
        assert!(!control.significant, "{control:?}");
        // req/s pairs leave out the four half-speed rounds.
        assert_eq!(cmp(ServerConfig::Rx, Metric::Rps).pairs, 20);
        let io = cmp(ServerConfig::IoUring, Metric::CpuPerRequest);
        assert_eq!(io.baseline, ServerConfig::Rx);
        assert!(io.significant && io.ratio_median > 1.0);
        // Resolution: the control's half-width, for both metrics.
        assert_eq!(s.resolution.len(), 2);
        let worst = s.resolution_worst["cpu_per_request"];
        assert!(worst > 0.0 && worst < 0.03, "{worst}");
        // Rows: unsaturated slices counted and left out of the req/s median.
        let row = s
            .rows
            .iter()
            .find(|r| r.config == ServerConfig::Rx)
            .unwrap();
        assert_eq!(row.load_bound_rounds, 4);
        assert_eq!(row.rounds_ok, 24);
        assert_eq!(row.syscalls_per_request["total"], 2.0);
        assert!(row.flag.is_none() && row.note.is_none(), "{row:?}");
        assert_eq!(
            row.p50_us, 150.0,
            "merged buckets: 60 % of the samples at 150 µs"
        );
    }

    #[test]
    fn profiles_are_compared_with_relaxed_for_the_same_configuration() {
        let servers = [
            key(Profile::Default, ServerConfig::Rx),
            key(Profile::NoIoUring, ServerConfig::Rx),
            key(Profile::Relaxed, ServerConfig::Rx),
            key(Profile::Relaxed, ServerConfig::Legacy),
        ];
        let pairs = comparison_pairs(&servers, &[]);
        let has = |a: usize, b: usize| pairs.contains(&(servers[a].clone(), servers[b].clone()));
        assert!(has(0, 2) && has(1, 2) && has(2, 3));
        assert_eq!(pairs.len(), 3, "{pairs:?}");
    }

    #[test]
    fn each_own_configuration_is_compared_with_each_foreign_server_of_its_profile() {
        let nginx = || Subject::Foreign("nginx".into());
        let servers = [
            key(Profile::Relaxed, ServerConfig::Rx),
            key(Profile::Relaxed, ServerConfig::Legacy),
            key(Profile::Relaxed, nginx()),
            key(Profile::NoIoUring, nginx()),
        ];
        let pairs = comparison_pairs(&servers, &[]);
        let has = |a: usize, b: usize| pairs.contains(&(servers[a].clone(), servers[b].clone()));
        assert!(has(0, 1), "rx against legacy, as before");
        assert!(has(0, 2) && has(1, 2), "each configuration against nginx");
        assert!(has(3, 2), "nginx under no-io-uring against relaxed");
        assert!(
            !has(2, 0),
            "a foreign server is the baseline, not the subject"
        );
        assert_eq!(pairs.len(), 4, "{pairs:?}");
        // A foreign row has no backend to judge and no counters to miss.
        let raw = synthetic(&servers[..3], 6, |_, _| 7.0, |_, _| 0.99);
        let mut raw = raw;
        for s in raw.slices.iter_mut().filter(|s| s.server.config == nginx()) {
            s.counters = None;
        }
        let s = summarise(&raw);
        let row = s.rows.iter().find(|r| r.config == nginx()).unwrap();
        assert!(row.flag.is_none() && row.note.is_none(), "{row:?}");
        assert!(row.syscalls_per_request.is_empty());
        assert!(s
            .comparisons
            .iter()
            .any(|c| c.config == ServerConfig::Rx && c.baseline == nginx()));
    }

    #[test]
    fn a_reference_server_is_compared_with_every_other_foreign_server_of_its_profile() {
        let foreign = |n: &str| Subject::Foreign(n.into());
        let servers = [
            key(Profile::Relaxed, ServerConfig::Rx),
            key(Profile::Relaxed, foreign("floor")),
            key(Profile::Relaxed, foreign("nginx")),
            key(Profile::Relaxed, foreign("hyper")),
            key(Profile::NoIoUring, foreign("hyper")),
        ];
        let pairs = comparison_pairs(&servers, &[foreign("floor")]);
        let has = |a: usize, b: usize| pairs.contains(&(servers[a].clone(), servers[b].clone()));
        assert!(
            has(0, 1) && has(0, 2) && has(0, 3),
            "ours against each, the floor included"
        );
        assert!(has(1, 2) && has(1, 3), "the floor against each other peer");
        assert!(!has(2, 1) && !has(1, 1) && !has(1, 4), "{pairs:?}");
        assert!(
            !has(2, 3),
            "peers that are not references are not set against each other"
        );
        assert_eq!(pairs.len(), 6, "{pairs:?}"); // and hyper under no-io-uring against relaxed
        assert_eq!(comparison_pairs(&servers, &[]).len(), 4);
    }

    #[test]
    fn a_server_that_never_measured_is_flagged_and_a_fallback_is_a_note() {
        let servers = [
            key(Profile::NoIoUring, ServerConfig::IoUring),
            key(Profile::Relaxed, ServerConfig::Rx),
        ];
        let mut raw = synthetic(&servers, 3, |_, _| 7.0, |_, _| 0.99);
        raw.servers[0].startup.as_mut().unwrap().backend = "epoll/rx".into();
        raw.servers[0].startup.as_mut().unwrap().io_uring = "unavailable(EPERM)".into();
        for s in raw.slices.iter_mut().filter(|s| s.server == servers[1]) {
            s.error = Some("the server exited\nlast line".into());
        }
        let s = summarise(&raw);
        let denied = &s.rows[0];
        assert_eq!(
            denied.note.as_deref(),
            Some("io_uring denied (EPERM): fell back to epoll/rx")
        );
        assert!(denied.flag.is_none());
        let dead = &s.rows[1];
        assert_eq!(dead.rounds_failed, 3);
        assert_eq!(
            dead.flag.as_deref(),
            Some("every slice failed: the server exited")
        );
    }

    #[test]
    fn route_means_are_the_mean_of_the_routes() {
        let servers = [
            key(Profile::Relaxed, ServerConfig::Rx),
            key(Profile::Relaxed, ServerConfig::Legacy),
        ];
        let mut raw = synthetic(&servers, 5, |_, _| 10.0, |_, _| 1.0);
        let mut second = raw.slices.clone();
        for s in &mut second {
            s.route = "POST:/user".into();
            s.report = Some(report(50_000, 100.0));
        }
        raw.slices.extend(second);
        raw.settings.routes = vec!["GET:/".into(), "POST:/user".into()];
        let s = summarise(&raw);
        let rx = s
            .route_means
            .iter()
            .find(|m| m.config == ServerConfig::Rx)
            .unwrap();
        assert_eq!(rx.rps_mean, 75_000.0);
        assert!(s
            .comparisons
            .iter()
            .any(|c| c.route == MEAN_ROUTE && c.metric == Metric::Rps));
    }
}
