//! One row of the summary: a server at one level on one route over all its slices, with what
//! it really ran judged against what its configuration claims.

use wire::{Backend, IoUringState};

use super::{OpenRow, Row, KEPT_UP, SATURATED};
use crate::model::{
    BackendSeen, Failure, LoadModel, Raw, ServerConfig, ServerCounters, ServerKey, ServerRecord,
    Slice, Startup,
};
use crate::offered::run_capacity;
use crate::stats::median;

/// The note a closed-loop row carries when none of its slices saturated the server.
pub const UNSATURATED_NOTE: &str = "no slice saturated the server: req/s is the median of all slices and measured the driver or the machine";

pub(super) fn row(
    raw: &Raw,
    key: &ServerKey,
    (load, conns, route): (LoadModel, u32, &str),
    slices: &[&Slice],
    cpus: usize,
) -> Row {
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
    let offered_rps = median(
        &ok.iter()
            .filter_map(|s| s.offered_rps())
            .collect::<Vec<_>>(),
    )
    .unwrap_or(0.0);
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
    let records: Vec<&ServerRecord> = raw.instances_of(key).collect();
    let started: Vec<&Startup> = records.iter().filter_map(|r| r.startup.as_ref()).collect();
    let startup = started.first().copied();
    let backend = startup.map_or("unknown".into(), |s| s.backend.to_string());
    let io_uring = startup.map_or("unknown".into(), Startup::io_uring_text);
    let (mut flag, mut note) = match (key.config.own(), startup) {
        (Some(config), Some(startup)) => judge(config, startup),
        _ => (None, None),
    };
    // What an instance itself said last, when it failed to start.
    let last_said = |r: &ServerRecord| {
        r.events
            .last()
            .and_then(|e| e.detail().lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("")
            .to_string()
    };
    let unstarted: Vec<&&ServerRecord> = records
        .iter()
        .filter(|r| r.startup.is_none() && !r.events.is_empty())
        .collect();
    let record = records.first().copied();
    if !unstarted.is_empty() && unstarted.len() == records.len() {
        // A result, not a crash of the run: say what the server itself said last.
        flag = Some(format!("did not start: {}", last_said(unstarted[0])));
    } else if let Some(r) = unstarted.first() {
        flag = Some(format!(
            "{} of {} instances did not start: {}",
            unstarted.len(),
            records.len(),
            last_said(r)
        ));
    } else if started
        .iter()
        .any(|s| s.backend != started[0].backend || s.io_uring != started[0].io_uring)
    {
        flag = Some(format!(
            "its instances ran different backends: {}",
            started
                .iter()
                .map(|s| format!("{} ({})", s.backend, s.io_uring_text()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    } else if slices.is_empty() {
        let why = record
            .and_then(|r| r.events.last())
            .map_or("not measured", Failure::headline);
        flag = Some(format!("no slice: {why}"));
    } else if ok.is_empty() {
        flag = Some(flag.unwrap_or_else(|| {
            let why = slices
                .iter()
                .find_map(|s| s.error.as_ref())
                .map_or("", Failure::headline);
            format!("every slice failed: {why}")
        }));
    } else if saturated.is_empty() && load.offered().is_none() {
        let n = UNSATURATED_NOTE;
        note = Some(note.map_or(n.to_string(), |o| format!("{o}; {n}")));
    }
    // Closed loop, req/s is the server's capacity: only saturated slices measured it. Open
    // loop, the schedule sets the rate and a row's req/s is what it achieved of it: every
    // slice counts (a saturated open-loop slice is one that fell behind, not the rule).
    let rps_basis = if saturated.is_empty() || load.offered().is_some() {
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
        load,
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
                .filter_map(|s| Some(s.driver_busy(load_cpus)? * 100.0))
                .collect::<Vec<_>>(),
        ),
        load_bound_rounds: unsaturated as u32,
        syscalls_per_request: counters.per_request(),
        server_closed: server_closed(&ok),
        kernel_share: kernel_share(&ok),
        open: load.offered().map(|_| OpenRow {
            offered_rps,
            share_of_run_capacity: run_capacity(raw, key, conns, route)
                .filter(|&c| c > 0.0 && offered_rps > 0.0)
                .map(|c| offered_rps / c),
            p999_us: merged(0.999),
            uncorrected_p99_us: median(
                &reports
                    .iter()
                    .filter_map(|r| r.open_loop.map(|o| o.uncorrected.p99_us))
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(0.0),
            behind_rounds: ok.iter().filter(|s| s.behind_schedule()).count() as u32,
            overloaded_rounds: ok
                .iter()
                .filter(|s| match (s.rps(), s.offered_rps()) {
                    (Some(got), Some(offered)) => got < KEPT_UP * offered,
                    _ => false,
                })
                .count() as u32,
        }),
        flag,
        note,
    }
}

/// Did the server run what its configuration claims? `(flag, note)`: a flag is a problem, a
/// note an expected consequence of the profile (io_uring denied, so `auto` fell back).
fn judge(config: ServerConfig, startup: &Startup) -> (Option<String>, Option<String>) {
    let intended = config.intended_backend();
    let BackendSeen::Server(ran) = startup.backend else {
        return (
            Some(format!("claims {intended} but ran a foreign server")),
            None,
        );
    };
    if ran == intended {
        return (None, None);
    }
    if let (Backend::IoUring, Backend::Epoll(_), Some(IoUringState::Unavailable(why))) =
        (intended, ran, &startup.io_uring)
    {
        return (
            None,
            Some(format!("io_uring denied ({why}): fell back to {ran}")),
        );
    }
    (
        Some(format!(
            "claims {intended} but ran {ran} (io_uring={})",
            startup.io_uring_text()
        )),
        None,
    )
}

/// Over the slices' closes (a connection per request), the share the server closed.
fn server_closed(slices: &[&Slice]) -> Option<f64> {
    let (server, client) = slices
        .iter()
        .filter_map(|s| s.report.as_ref()?.closes)
        .fold((0, 0), |(a, b), c| (a + c.server, b + c.client));
    (server + client > 0).then(|| server as f64 / (server + client) as f64)
}

/// The kernel's share of the CPU time over every slice that split it, pooled (each slice is a
/// sample of ticks; pooled, the run's rounds sharpen it).
fn kernel_share(slices: &[&Slice]) -> Option<f64> {
    let (system, total) = slices
        .iter()
        .filter_map(|s| s.server_cpu_split)
        .fold((0u64, 0u64), |(sys, all), c| {
            (sys + c.system_ns, all + c.system_ns + c.user_ns)
        });
    (total > 0).then(|| system as f64 / total as f64)
}
