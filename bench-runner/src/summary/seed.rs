//! The seed PR's table as the PR measured it: each server driven alone, kept alive, its own
//! req/s and latency per connection level — from the servers a run of duets drives alone
//! ([`crate::model::Raw::solo`]), or from a run that drives every server alone anyway
//! (alternating). Every cell is paired with rx by round, as the duets are paired.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::SATURATED;
use crate::model::{LoadModel, Pairing, Profile, Raw, ServerConfig, ServerKey, Slice, Subject};
use crate::stats::{median, stopping, Interval};

/// The table's columns: epoll before the fix (re-armed per request), after it, and io_uring.
pub const SEED_COLUMNS: [ServerConfig; 3] = [
    ServerConfig::Legacy,
    ServerConfig::Rx,
    ServerConfig::IoUring,
];

/// The seed PR's table of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedTable {
    /// Where its slices come from: servers driven alone between the duets of each round, or
    /// a run whose every slice is a server alone.
    pub source: SeedSource,
    pub route: String,
    /// Rounds with a slice of some cell.
    pub rounds: usize,
    pub cells: Vec<SeedCell>,
    /// The PR's own figure for its claim, per level: the io_uring server under the block
    /// (fallen back to epoll) against itself unblocked, on req/s, paired by round.
    pub fallback: Vec<FallbackShare>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeedSource {
    /// A run of duets drove these servers alone too, in the same blocks and launches.
    AloneBesideDuets,
    /// A run without duets: every slice is a server alone.
    Alternating,
}

/// One server at one level, alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedCell {
    pub profile: Profile,
    pub config: Subject,
    pub conns: u32,
    /// What the server said it ran (io_uring under the block: epoll, fallen back).
    pub backend_observed: String,
    /// Slices that measured.
    pub slices: usize,
    /// Median req/s over its slices.
    pub rps_median: f64,
    /// The geometric mean of its req/s over rounds with a 95 % interval (Student's t on the
    /// logs): how well the run pins this server's own rate, every launch's luck and the
    /// host's hour included.
    pub rps_level: Option<Interval>,
    /// P50 and P99 of its slices' histograms merged, in µs.
    pub p50_us: f64,
    pub p99_us: f64,
    /// Little's law: the connections over the median rate, in µs — what a closed loop's
    /// P50 must be near (each connection has one request in flight).
    pub little_us: f64,
    /// req/s and P50 against rx under the same profile, paired by round (none for rx).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps_vs_rx: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_vs_rx: Option<Interval>,
    /// Median busy share of the server's CPUs and of the driver's, over its slices.
    pub server_busy: Option<f64>,
    pub driver_busy: Option<f64>,
    pub limit: Limit,
}

/// What set a closed-loop cell's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The server's CPU was busy ([`SATURATED`] or more): its req/s is its capacity.
    Server,
    /// The driver's was, and the server's not: the req/s is the driver's.
    Driver,
    /// Both were.
    Both,
    /// Neither: each connection waits for its answer, the answer for the request — the
    /// pair's ping-pong (wake-ups and the loopback's latency) set the rate.
    Neither,
}

impl Limit {
    fn of(server: Option<f64>, driver: Option<f64>) -> Limit {
        let busy = |u: Option<f64>| u.is_some_and(|u| u >= SATURATED);
        match (busy(server), busy(driver)) {
            (true, true) => Limit::Both,
            (true, false) => Limit::Server,
            (false, true) => Limit::Driver,
            (false, false) => Limit::Neither,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Limit::Server => "server-bound",
            Limit::Driver => "driver-bound",
            Limit::Both => "server- and driver-bound",
            Limit::Neither => "neither: the pair's ping-pong",
        }
    }
}

/// The io_uring server's req/s under the block as a share of its own unblocked, at a level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FallbackShare {
    pub conns: u32,
    pub share: Interval,
}

/// The slices the table reads: a duet run's servers alone, or every keep-alive slice of a run
/// that drives one server at a time.
fn alone(raw: &Raw) -> (SeedSource, Vec<&Slice>) {
    match raw.settings.pairing {
        Pairing::Duet => (SeedSource::AloneBesideDuets, raw.solo.iter().collect()),
        Pairing::Alternate => (SeedSource::Alternating, raw.slices.iter().collect()),
    }
}

/// The table, where the run drove rx alone, kept alive, on its first route.
pub fn seed_table(raw: &Raw) -> Option<SeedTable> {
    let route = raw.settings.first_route();
    let (source, slices) = alone(raw);
    let cpus = raw.settings.server_cpus.len().max(1);
    let load_cpus = raw.settings.load_cpus.len().max(1);
    let first_stage = raw.settings.first_stage();
    let mut by_cell: BTreeMap<(Profile, ServerConfig, u32), Vec<&Slice>> = BTreeMap::new();
    for s in slices {
        let Some(config) = s.server.config.own() else {
            continue;
        };
        if s.load == LoadModel::KeepAlive
            && s.route.to_string() == route
            && SEED_COLUMNS.contains(&config)
        {
            by_cell
                .entry((s.server.profile, config, s.conns))
                .or_default()
                .push(s);
        }
    }
    if !by_cell.keys().any(|(_, c, _)| *c == ServerConfig::Rx) {
        return None;
    }
    // round → the mean log value of the cell's slices that round (one instance a round alone
    // beside duets; every instance alternating).
    let series = |cell: &(Profile, ServerConfig, u32), value: fn(&Slice) -> Option<f64>| {
        let mut by_round: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for s in by_cell.get(cell).into_iter().flatten().filter(|s| s.ok()) {
            if let Some(v) = value(s).filter(|v| *v > 0.0) {
                by_round.entry(s.round).or_default().push(v.ln());
            }
        }
        by_round
            .into_iter()
            .map(|(r, v)| (r, v.iter().sum::<f64>() / v.len() as f64))
            .collect::<BTreeMap<u32, f64>>()
    };
    let rps = |s: &Slice| s.rps();
    let p50 = |s: &Slice| s.report.as_ref().map(|r| r.latency.p50_us);
    let compare = |a: &(Profile, ServerConfig, u32), b: &(Profile, ServerConfig, u32), f| {
        let (x, y) = (series(a, f), series(b, f));
        let d: BTreeMap<u32, f64> = x
            .iter()
            .filter_map(|(r, v)| Some((*r, v - y.get(r)?)))
            .collect();
        stopping::interval(&d, first_stage)
    };
    let mut cells = Vec::new();
    for (key, slices) in &by_cell {
        let &(profile, config, conns) = key;
        let ok: Vec<&Slice> = slices.iter().copied().filter(|s| s.ok()).collect();
        let rates: Vec<f64> = ok.iter().filter_map(|s| s.rps()).collect();
        let Some(rps_median) = median(&rates) else {
            continue;
        };
        let buckets: Vec<&driver::report::LatencyBuckets> = ok
            .iter()
            .filter_map(|s| s.report.as_ref()?.latency_buckets.as_ref())
            .collect();
        let slice_median = |f: fn(&Slice) -> Option<f64>| {
            median(&ok.iter().filter_map(|s| f(s)).collect::<Vec<_>>()).unwrap_or(0.0)
        };
        let merged = |q: f64| driver::report::LatencyBuckets::merged_quantile(&buckets, q);
        let p50_us = merged(0.50).unwrap_or_else(|| slice_median(p50));
        let p99_us = merged(0.99)
            .unwrap_or_else(|| slice_median(|s| s.report.as_ref().map(|r| r.latency.p99_us)));
        let rx = (profile, ServerConfig::Rx, conns);
        let against_rx = |f| {
            (config != ServerConfig::Rx)
                .then(|| compare(key, &rx, f))
                .flatten()
        };
        let levels = series(key, rps);
        let server_busy = median(
            &ok.iter()
                .filter_map(|s| s.utilisation(cpus))
                .collect::<Vec<_>>(),
        );
        let driver_busy = median(
            &ok.iter()
                .filter_map(|s| s.driver_busy(load_cpus))
                .collect::<Vec<_>>(),
        );
        cells.push(SeedCell {
            profile,
            config: config.into(),
            conns,
            backend_observed: backend_of(
                raw,
                &ServerKey {
                    profile,
                    config: config.into(),
                },
            ),
            slices: ok.len(),
            rps_median,
            rps_level: stopping::interval(&levels, first_stage),
            p50_us,
            p99_us,
            little_us: f64::from(conns) / rps_median * 1e6,
            rps_vs_rx: against_rx(rps),
            p50_vs_rx: against_rx(p50),
            server_busy,
            driver_busy,
            limit: Limit::of(server_busy, driver_busy),
        });
    }
    // The cells are keyed profile first: the levels repeat until sorted.
    let mut levels: Vec<u32> = by_cell.keys().map(|k| k.2).collect();
    levels.sort_unstable();
    levels.dedup();
    let fallback = levels
        .into_iter()
        .filter_map(|conns| {
            let blocked = (Profile::NoIoUring, ServerConfig::IoUring, conns);
            let free = (Profile::Relaxed, ServerConfig::IoUring, conns);
            Some(FallbackShare {
                conns,
                share: compare(&blocked, &free, rps)?,
            })
        })
        .collect();
    let mut rounds: Vec<u32> = by_cell.values().flatten().map(|s| s.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    Some(SeedTable {
        source,
        route,
        rounds: rounds.len(),
        cells,
        fallback,
    })
}

/// What a configuration's first instance to start said it ran.
fn backend_of(raw: &Raw, key: &ServerKey) -> String {
    raw.instances_of(key)
        .find_map(|r| r.startup.as_ref())
        .map_or("unknown".into(), |s| s.backend.to_string())
}

#[cfg(test)]
mod tests;
