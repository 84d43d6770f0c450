//! From slices to what the report prints, with no I/O: one row per cell, the paired
//! comparisons with their intervals, and the run's resolution (the A/A control's interval).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{LoadModel, Profile, Raw, ServerConfig, ServerKey, Slice, Subject};
use crate::stats::instances::{self, Series};
use crate::stats::{order_statistic_median, paired_ratios, Interval};

mod means;
mod pairs;
mod row;
use means::{add_route_means, route_means};
pub use pairs::comparison_pairs;
use row::row;

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
    /// Each slice's 99th and 99.9th percentile latency: open loop only, where latency is
    /// measured from each request's due time (closed loop, it is Little's law's).
    P99,
    P999,
}

impl Metric {
    const CLOSED: [Metric; 3] = [Metric::CpuPerRequest, Metric::Rps, Metric::P50];
    /// An open-loop server does not set the rate (the schedule does), so req/s is not one of
    /// its figures.
    const OPEN: [Metric; 4] = [
        Metric::CpuPerRequest,
        Metric::P50,
        Metric::P99,
        Metric::P999,
    ];

    /// What a cell under `load` is measured and compared on.
    pub fn of(load: LoadModel) -> &'static [Metric] {
        match load.offered() {
            Some(_) => &Self::OPEN,
            None => &Self::CLOSED,
        }
    }

    pub fn is_latency(self) -> bool {
        matches!(self, Metric::P50 | Metric::P99 | Metric::P999)
    }

    /// Its part of the name that seeds the calibration study's bootstraps (its "old"
    /// method). Frozen: renaming a variant must not move a committed study's counts.
    pub fn seed_name(self) -> &'static str {
        match self {
            Metric::CpuPerRequest => "CpuPerRequest",
            Metric::Rps => "Rps",
            Metric::P50 => "P50",
            Metric::P99 => "P99",
            Metric::P999 => "P999",
        }
    }

    /// As summary.json spells it.
    pub fn key(self) -> &'static str {
        match self {
            Metric::CpuPerRequest => "cpu_per_request",
            Metric::Rps => "rps",
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::P999 => "p999",
        }
    }
}

/// One line of summary.json: one server at one connection level on one route, over all slices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub profile: Profile,
    pub config: Subject,
    pub load: LoadModel,
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
    /// A connection per request: the share of connections the server closed itself (its
    /// response announced the close); the client closed the rest, which the server would
    /// have kept open despite `Connection: close`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_closed: Option<f64>,
    /// Open loop: the schedule and what the latency was beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<OpenRow>,
    /// Set when the row did not run what its configuration claims (never silently published).
    pub flag: Option<String>,
    /// Set when the backend differs from the intent for a reason the profile explains.
    pub note: Option<String>,
}

/// An open-loop row's own figures (its `rps_median` is the rate it achieved).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenRow {
    /// The rate its slices offered (median; fixed after the first round).
    pub offered_rps: f64,
    /// P99.9 of the slices' histograms merged, from each request's due time.
    pub p999_us: Option<f64>,
    /// Median over slices of P99 from the actual send, as a closed-loop driver would
    /// report it: the gap to `p99_us` is the queueing a schedule sees and a closed loop hides.
    pub uncorrected_p99_us: f64,
    /// Slices whose driver fell behind its schedule (left out of the latency comparisons).
    pub behind_rounds: u32,
    /// Slices in which the server answered under [`KEPT_UP`] of the offered rate: it did not
    /// keep up, its queue grew through the slice, and the latency is the backlog's (kept in
    /// the comparisons: at one offered rate, keeping up or not is the difference to show).
    pub overloaded_rounds: u32,
}

/// The share of the offered rate a server must answer for an open-loop slice to be steady.
pub const KEPT_UP: f64 = 0.97;

/// A paired comparison: `config` under `profile` against `baseline` under `baseline_profile`,
/// slice by slice in the same rounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub profile: Profile,
    pub load: LoadModel,
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
    /// Rounds behind the interval: pairs with one instance; with several, the fewest rounds
    /// an instance of either side measured.
    pub pairs: usize,
    /// Instances per configuration when there were several: the interval then samples
    /// instances as well as rounds ([`crate::stats::instances`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
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
    pub load: LoadModel,
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
    pub load: LoadModel,
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
    /// The part of the summary under one load model (its worst resolution its own).
    pub fn for_load(&self, load: LoadModel) -> Summary {
        let resolution: Vec<Resolution> = self
            .resolution
            .iter()
            .filter(|r| r.load == load)
            .cloned()
            .collect();
        Summary {
            rows: self
                .rows
                .iter()
                .filter(|r| r.load == load)
                .cloned()
                .collect(),
            comparisons: self
                .comparisons
                .iter()
                .filter(|c| c.load == load)
                .cloned()
                .collect(),
            resolution_worst: worst(&resolution),
            resolution,
            route_means: self
                .route_means
                .iter()
                .filter(|m| m.load == load)
                .cloned()
                .collect(),
        }
    }

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

/// A slice's value on `metric`, as comparisons pair them: none from a failed slice, and req/s
/// only where the server set the pace (saturated).
pub fn slice_value(s: &Slice, metric: Metric, cpus: usize) -> Option<f64> {
    if !s.ok() {
        return None;
    }
    match metric {
        Metric::CpuPerRequest => s.cpu_us_per_request(),
        Metric::Rps => s.utilisation(cpus).filter(|u| *u >= SATURATED).and(s.rps()),
        // An open-loop slice whose driver fell behind its schedule measured the driver.
        _ if s.behind_schedule() => None,
        Metric::P50 => s.report.as_ref().map(|r| r.latency.p50_us),
        Metric::P99 => s.report.as_ref().map(|r| r.latency.p99_us),
        Metric::P999 => s.report.as_ref().and_then(|r| r.latency.p999_us),
    }
}

/// Cell key: server, load model, connection level, route.
type CellKey = (ServerKey, LoadModel, u32, String);
/// A cell's values: instance -> round -> value.
type ByInstance = BTreeMap<u32, Series>;

pub fn summarise(raw: &Raw) -> Summary {
    let cpus = raw.settings.server_cpus.len().max(1);
    let mut cells: BTreeMap<CellKey, Vec<&Slice>> = BTreeMap::new();
    for s in &raw.slices {
        cells
            .entry((s.server.clone(), s.load, s.conns, s.route.to_string()))
            .or_default()
            .push(s);
    }
    // A server that never started still gets its rows, flagged with why.
    for record in &raw.servers {
        for &load in &raw.settings.loads {
            for &conns in raw.settings.conns_of(load) {
                for route in &raw.settings.route_names() {
                    cells
                        .entry((record.key.clone(), load, conns, route.clone()))
                        .or_default();
                }
            }
        }
    }
    let rows: Vec<Row> = cells
        .iter()
        .map(|((key, load, conns, route), slices)| {
            row(raw, key, (*load, *conns, route), slices, cpus)
        })
        .collect();

    // Per cell and metric: instance -> round -> value, for the pairing.
    let mut series: BTreeMap<(CellKey, Metric), ByInstance> = BTreeMap::new();
    for (key, slices) in &cells {
        let mut put = |metric: Metric, s: &Slice, v: f64| {
            series
                .entry((key.clone(), metric))
                .or_default()
                .entry(s.instance)
                .or_default()
                .insert(s.round, v);
        };
        for s in slices.iter() {
            for &metric in Metric::of(s.load) {
                if let Some(v) = slice_value(s, metric, cpus) {
                    put(metric, s, v);
                }
            }
        }
    }
    let routes = &raw.settings.route_names();
    if routes.len() > 1 {
        add_route_means(&mut series, routes);
    }

    let mut comparisons = Vec::new();
    let servers: Vec<ServerKey> = raw.configurations();
    let mut route_names = routes.clone();
    if routes.len() > 1 {
        route_names.push(MEAN_ROUTE.into());
    }
    let references: Vec<Subject> = raw
        .references
        .iter()
        .map(|r| Subject::Foreign(r.as_str().into()))
        .collect();
    let instances = raw.settings.instances;
    let get = |k: &ServerKey, (load, conns, route, metric): (LoadModel, u32, &String, Metric)| {
        series.get(&((k.clone(), load, conns, route.clone()), metric))
    };
    // Two or more instances: every configuration of a cell fitted together, once per cell.
    let mut fits = BTreeMap::new();
    if instances > 1 {
        for &load in &raw.settings.loads {
            for &conns in raw.settings.conns_of(load) {
                for route in &route_names {
                    for &metric in Metric::of(load) {
                        let at = (load, conns, route, metric);
                        let groups: Vec<Vec<&Series>> = servers
                            .iter()
                            .map(|k| get(k, at).map_or(vec![], |by| by.values().collect()))
                            .collect();
                        fits.insert(
                            (load, conns, route.clone(), metric),
                            instances::fit(&groups),
                        );
                    }
                }
            }
        }
    }
    let position = |k: &ServerKey| servers.iter().position(|s| s == k);
    for pair in comparison_pairs(&servers, &references) {
        for &load in &raw.settings.loads {
            for &conns in raw.settings.conns_of(load) {
                for route in &route_names {
                    for &metric in Metric::of(load) {
                        let at = (load, conns, route, metric);
                        let interval = match fits.get(&(load, conns, route.clone(), metric)) {
                            Some(fit) => position(&pair.0)
                                .zip(position(&pair.1))
                                .and_then(|(a, b)| fit.compare(a, b)),
                            None => {
                                let one = |k: &ServerKey| get(k, at).and_then(|by| by.get(&0));
                                let (Some(a), Some(b)) = (one(&pair.0), one(&pair.1)) else {
                                    continue;
                                };
                                order_statistic_median(&paired_ratios(a, b))
                            }
                        };
                        let Some(i) = interval else {
                            continue;
                        };
                        comparisons.push(Comparison {
                            profile: pair.0.profile,
                            load,
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
                            instances: (instances > 1).then_some(instances),
                        });
                    }
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
            load: c.load,
            conns: c.conns,
            route: c.route.clone(),
            metric: c.metric,
            half_width: c.interval().half_width(),
            aa_bound: (1.0 - c.ci95_low).max(c.ci95_high - 1.0),
            aa_apart: c.significant,
        })
        .collect();
    let route_means = route_means(&rows, routes);
    Summary {
        rows,
        comparisons,
        resolution_worst: worst(&resolution),
        resolution,
        route_means,
    }
}

/// The widest A/A half-width per metric.
fn worst(resolution: &[Resolution]) -> BTreeMap<String, f64> {
    let mut worst = BTreeMap::new();
    for r in resolution {
        let e = worst.entry(r.metric.key().to_string()).or_insert(0.0f64);
        *e = e.max(r.half_width);
    }
    worst
}

#[cfg(test)]
pub mod tests;
