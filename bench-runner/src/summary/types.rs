//! What a summary holds: the metrics, a row per cell, the paired comparisons, the run's
//! resolution and the route means — the shapes summary.json and every renderer read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{LoadModel, Profile, ServerConfig, Subject};
use crate::stats::Interval;

/// A slice in which the server used less of its CPUs than this is unsaturated: its req/s
/// measured the driver or the machine, not the server.
pub const SATURATED: f64 = 0.90;
/// The A/A half-width a run is judged against when it set no `--target-resolution` of its own
/// (the default target's: one threshold, whether the runner adds rounds for it or the table
/// calls a run too noisy).
pub const DEFAULT_RESOLUTION: f64 = 0.02;

/// The A/A half-width this run is judged against: its own target, or [`DEFAULT_RESOLUTION`].
pub fn resolution_limit(settings: &crate::model::Settings) -> f64 {
    settings
        .target
        .as_ref()
        .map_or(DEFAULT_RESOLUTION, |t| t.half_width)
}
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
    /// Median req/s over the saturated slices (over all, when none was saturated); open loop,
    /// the rate achieved, over every slice.
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
    /// The kernel's share of the server's CPU time, pooled over its slices' user and kernel
    /// time (none: the CPU source does not split it, or a run recorded before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_share: Option<f64>,
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
    /// The rate its slices offered (median; fixed from its first slice on).
    pub offered_rps: f64,
    /// `offered_rps` over the configuration's median keep-alive req/s at the level and route
    /// over the whole run: the share of its capacity it was really offered (the runner fixes
    /// the rate from the keep-alive slices before the first share; `crate::offered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_of_run_capacity: Option<f64>,
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
    /// On CPU per request, where both rows split their CPU time: the change apportioned to
    /// kernel and user time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitPoints>,
}

/// A change in CPU per request apportioned to kernel and user time, each in points of the
/// baseline's CPU per request: with the ratio `r` and the kernel shares `a` (config) and `b`
/// (baseline), `kernel = r·a − b` and `user = r·(1 − a) − (1 − b)`, which sum to `r − 1`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitPoints {
    pub kernel: f64,
    pub user: f64,
}

impl SplitPoints {
    pub fn of(ratio: f64, config_share: f64, baseline_share: f64) -> SplitPoints {
        SplitPoints {
            kernel: ratio * config_share - baseline_share,
            user: ratio * (1.0 - config_share) - (1.0 - baseline_share),
        }
    }
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
    /// The rounds (pairs) its interval rests on (0 in summaries written before it).
    #[serde(default)]
    pub pairs: usize,
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
    /// When each A/A cell came within the run's limit and stayed (summaries before it:
    /// none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reach: Vec<super::Reach>,
    /// The run's own check of its intervals over rounds: the A/A pairs and the replicate
    /// contrasts on CPU per request (none: no control, or servers kept resident).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<super::Calibration>,
    /// Every interval carries the processes' own luck (fresh launches every round, or several
    /// instances): a change is a result by its interval alone. Otherwise (resident servers) a
    /// result must also exceed what the A/A pair reached in its cell.
    #[serde(default)]
    pub intervals_cover_processes: bool,
    /// The seed PR's table: each server alone, kept alive (none: the run drove no rx alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<super::SeedTable>,
    /// The rounds failed slices left out, each named with its cause.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<super::DroppedRound>,
}

/// The row of `config` under `profile` in one cell, among `rows` ([`Summary::row`], and the
/// summary's own making before it has a `Summary`).
pub(super) fn find_row<'a>(
    rows: &'a [Row],
    profile: Profile,
    config: &Subject,
    load: LoadModel,
    conns: u32,
    route: &str,
) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.profile == profile
            && &r.config == config
            && r.load == load
            && r.conns == conns
            && r.route == route
    })
}

impl Summary {
    /// The comparison of `config` under `profile` against `baseline` under its profile, in
    /// one cell (any load model: a summary split by [`Summary::for_load`] holds one) on
    /// `metric`.
    pub fn comparison(
        &self,
        (profile, config): (Profile, &Subject),
        baseline: (Profile, &Subject),
        conns: u32,
        route: &str,
        metric: Metric,
    ) -> Option<&Comparison> {
        self.comparisons.iter().find(|x| {
            x.profile == profile
                && &x.config == config
                && x.baseline_profile == baseline.0
                && &x.baseline == baseline.1
                && x.conns == conns
                && x.route == route
                && x.metric == metric
        })
    }

    /// The row of `config` under `profile` in one cell.
    pub fn row(
        &self,
        profile: Profile,
        config: &Subject,
        load: LoadModel,
        conns: u32,
        route: &str,
    ) -> Option<&Row> {
        find_row(&self.rows, profile, config, load, conns, route)
    }

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
            resolution_worst: super::worst(&resolution),
            resolution,
            route_means: self
                .route_means
                .iter()
                .filter(|m| m.load == load)
                .cloned()
                .collect(),
            reach: self
                .reach
                .iter()
                .filter(|r| r.load == load)
                .cloned()
                .collect(),
            // The run's check of its intervals is the whole run's: said once, not per load.
            calibration: None,
            intervals_cover_processes: self.intervals_cover_processes,
            // The seed table is kept alive and the run's, said once.
            seed: None,
            // The rounds left out are said once, for the whole run.
            dropped: Vec::new(),
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
