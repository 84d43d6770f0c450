//! From slices to what the report prints, with no I/O: one row per cell, the paired
//! comparisons with their intervals, and the run's resolution (the A/A control's interval).

use std::collections::BTreeMap;

use crate::model::{
    LoadModel, Pairing, Partner, Raw, Relaunch, ServerConfig, ServerKey, Slice, Subject,
};
use crate::stats::instances::{self, Series};
use crate::stats::{duets, launches, stopping, Interval};
use crate::stats::{order_statistic_median, paired_ratios};

mod calibration;
mod dropped;
mod means;
mod pairs;
mod reach;
mod row;
mod seed;
mod types;
pub use calibration::{Calibration, PairOffset};
pub use dropped::DroppedRound;
use means::{add_route_means, route_means};
pub use pairs::comparison_pairs;
pub use reach::{answered_after_s, run_end_s, Reach};
use row::row;
pub use row::UNSATURATED_NOTE;
pub use seed::{seed_table, FallbackShare, Limit, SeedCell, SeedSource, SeedTable, SEED_COLUMNS};
pub use types::{
    resolution_limit, Comparison, Metric, OpenRow, Resolution, RouteMean, Row, SplitPoints,
    Summary, DEFAULT_RESOLUTION, KEPT_UP, MEAN_ROUTE, SATURATED,
};

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

/// What the report prints of `raw`, with how long each A/A cell took to reach the run's
/// limit ([`reach::reach`]).
pub fn summarise(raw: &Raw) -> Summary {
    let mut s = summarise_slices(raw);
    s.reach = reach::reach(raw, resolution_limit(&raw.settings));
    s.seed = seed_table(raw);
    s.dropped = dropped::dropped_rounds(raw);
    s
}

/// The summary of the slices as they stand, without the reach (which re-summarises the
/// rounds up to each one): what a run judges its next round by.
pub fn summarise_slices(raw: &Raw) -> Summary {
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
    let relaunched = raw.settings.relaunch == Relaunch::Round;
    if instances > 1 && !relaunched {
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
    let duet_ratios = (raw.settings.pairing == Pairing::Duet).then(|| duet_ratios(raw, cpus));
    let mut measured: Vec<Measured> = Vec::new();
    for pair in comparison_pairs(&servers, &references) {
        for &load in &raw.settings.loads {
            for &conns in raw.settings.conns_of(load) {
                for route in &route_names {
                    for &metric in Metric::of(load) {
                        let at = (load, conns, route, metric);
                        let all = |k: &ServerKey| -> Vec<&Series> {
                            get(k, at).map_or(vec![], |by| by.values().collect())
                        };
                        let estimate = match fits.get(&(load, conns, route.clone(), metric)) {
                            // Duets: the ratio within each, over rounds of fresh launches.
                            _ if duet_ratios.is_some() => Estimate::Rounds(
                                duet_ratios
                                    .as_ref()
                                    .and_then(|d| {
                                        d.get(&(pair.clone(), load, conns, route.clone(), metric))
                                    })
                                    .map_or(BTreeMap::new(), |by_round| {
                                        duets::round_means(by_round, instances.max(1) as usize)
                                    }),
                            ),
                            // Every round launched afresh: the rounds are the replicates.
                            _ if relaunched => Estimate::Rounds(launches::round_differences(
                                &all(&pair.0),
                                &all(&pair.1),
                            )),
                            Some(fit) => Estimate::Done(
                                position(&pair.0)
                                    .zip(position(&pair.1))
                                    .and_then(|(a, b)| fit.compare(a, b)),
                            ),
                            None => {
                                let one = |k: &ServerKey| get(k, at).and_then(|by| by.get(&0));
                                let (Some(a), Some(b)) = (one(&pair.0), one(&pair.1)) else {
                                    continue;
                                };
                                Estimate::Done(order_statistic_median(&paired_ratios(a, b)))
                            }
                        };
                        measured.push(Measured {
                            pair: pair.clone(),
                            load,
                            conns,
                            route: route.clone(),
                            metric,
                            estimate,
                        });
                    }
                }
            }
        }
    }
    let first_stage = raw.settings.first_stage();
    let calibration = calibration::calibrate(&measured, first_stage);
    let mut comparisons = Vec::new();
    for m in &measured {
        // Rounds as replicates: Student's t over them, with nothing added — what could stay
        // fixed for a run is drawn afresh per round, and `calibration` checks it; Stein's
        // where rounds were added after a first stage.
        let interval = match &m.estimate {
            Estimate::Done(interval) => *interval,
            Estimate::Rounds(d) => stopping::interval(d, first_stage),
        };
        let Some(i) = interval else {
            continue;
        };
        let Measured {
            pair,
            load,
            conns,
            route,
            metric,
            ..
        } = m;
        comparisons.push(Comparison {
            profile: pair.0.profile,
            load: *load,
            conns: *conns,
            route: route.clone(),
            config: pair.0.config.clone(),
            baseline: pair.1.config.clone(),
            baseline_profile: pair.1.profile,
            metric: *metric,
            ratio_median: i.median,
            ci95_low: i.low,
            ci95_high: i.high,
            significant: i.excludes_one(),
            pairs: i.n,
            instances: (instances > 1).then_some(instances),
            split: split_of(&rows, m, i.median),
        });
    }
    let resolution: Vec<Resolution> = comparisons
        .iter()
        .filter(|c| {
            c.metric != Metric::P50
                && c.config == Subject::Own(ServerConfig::IoUringControl)
                && c.baseline == Subject::Own(ServerConfig::IoUring)
                && c.profile == c.baseline_profile
                // The mean over the routes is its routes again, not a cell of its own.
                && c.route != MEAN_ROUTE
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
            pairs: c.pairs,
        })
        .collect();
    let route_means = route_means(&rows, routes);
    Summary {
        rows,
        comparisons,
        resolution_worst: worst(&resolution),
        resolution,
        route_means,
        reach: Vec::new(),
        calibration,
        intervals_cover_processes: raw.settings.intervals_cover_processes(),
        seed: None,
        dropped: Vec::new(),
    }
}

/// A CPU-per-request comparison's change apportioned to kernel and user time, from the two
/// rows' kernel shares (none on other metrics, or where a row has no split).
fn split_of(rows: &[Row], m: &Measured, ratio: f64) -> Option<types::SplitPoints> {
    if m.metric != Metric::CpuPerRequest {
        return None;
    }
    let share = |k: &ServerKey| {
        types::find_row(rows, k.profile, &k.config, m.load, m.conns, &m.route)?.kernel_share
    };
    Some(types::SplitPoints::of(
        ratio,
        share(&m.pair.0)?,
        share(&m.pair.1)?,
    ))
}

/// A comparison as measured, before its interval: the rounds' ln ratios where rounds are the
/// replicates (duets, fresh launches), or the interval its own method already gave.
struct Measured {
    pair: (ServerKey, ServerKey),
    load: LoadModel,
    conns: u32,
    route: String,
    metric: Metric,
    estimate: Estimate,
}

enum Estimate {
    /// Round → ln(A / B).
    Rounds(BTreeMap<u32, f64>),
    Done(Option<Interval>),
}

/// A duet comparison's key: (A, B), load model, level, route, metric.
type DuetKey = ((ServerKey, ServerKey), LoadModel, u32, String, Metric);

/// Where a duet's two slices are found: its round, its pass's position and its cell. A round
/// can hold two passes (open loop at shares of capacity runs after the others), each
/// numbering its positions from 0, so the round and position alone would put two duets
/// together — and leave both out (results/20261206T013721Z, before this key: 396 of 990
/// duets).
type DuetAt = (u32, u32, LoadModel, u32, String);

/// Every duet's ln(A / B) on every metric both of its slices have, by comparison and round
/// (each duet is entered both ways, as ln(A / B) under (A, B) and its negative under (B, A),
/// so a comparison finds it whichever side the table puts first).
fn duet_ratios(raw: &Raw, cpus: usize) -> BTreeMap<DuetKey, BTreeMap<u32, Vec<f64>>> {
    let mut duets: BTreeMap<DuetAt, Vec<&Slice>> = BTreeMap::new();
    for s in raw.slices.iter().filter(|s| s.duet.is_some()) {
        let at = (s.round, s.position, s.load, s.conns, s.route.to_string());
        duets.entry(at).or_default().push(s);
    }
    let mut out: BTreeMap<DuetKey, BTreeMap<u32, Vec<f64>>> = BTreeMap::new();
    for pair in duets.values() {
        // Two slices that name each other, or no duet.
        let [a, b] = pair[..] else { continue };
        if a.duet != Some(Partner::of(b)) || b.duet != Some(Partner::of(a)) {
            continue;
        }
        for &metric in Metric::of(a.load) {
            let value = |s: &Slice| slice_value(s, metric, cpus);
            // A failed duet is still a duet of its round: its NaN leaves the round out.
            let d = match (value(a), value(b)) {
                (Some(x), Some(y)) if x > 0.0 && y > 0.0 => (x / y).ln(),
                _ if metric == Metric::CpuPerRequest => f64::NAN,
                _ => continue,
            };
            for ((p, q), d) in [((a, b), d), ((b, a), -d)] {
                out.entry((
                    (p.server.clone(), q.server.clone()),
                    p.load,
                    p.conns,
                    p.route.to_string(),
                    metric,
                ))
                .or_default()
                .entry(p.round)
                .or_default()
                .push(d);
            }
        }
    }
    out
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
