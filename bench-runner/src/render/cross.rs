//! table.md's comparisons across the matrix's other axes: each profile against `relaxed`
//! (what the filter costs), and this project's servers against foreign ones.

use crate::model::{LoadModel, Profile, ServerConfig, Subject};
use crate::stats::ratio_text;
use crate::summary::{Comparison, Metric, Summary};

/// What the seccomp filter itself costs: each profile against `relaxed`, same configuration,
/// once for the whole run — a row per server and metric, a column per cell (load model,
/// connection level, route); req/s only where some comparison on it resolved.
pub(super) fn filter_cost(s: &Summary, loads: &[LoadModel], routes: &[String]) -> String {
    let across = |c: &&Comparison| {
        c.baseline_profile == Profile::Relaxed
            && c.profile != Profile::Relaxed
            && matches!(c.metric, Metric::CpuPerRequest | Metric::Rps)
    };
    let rows: Vec<&Comparison> = s.comparisons.iter().filter(across).collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut columns: Vec<(LoadModel, u32, &String)> = Vec::new();
    for &load in loads {
        let mut conns: Vec<u32> = rows
            .iter()
            .filter(|c| c.load == load)
            .map(|c| c.conns)
            .collect();
        conns.sort_unstable();
        conns.dedup();
        for n in conns {
            columns.extend(routes.iter().map(|r| (load, n, r)));
        }
    }
    let metrics: Vec<(Metric, &str)> = [
        (Metric::CpuPerRequest, "CPU per request"),
        (Metric::Rps, "req/s"),
    ]
    .into_iter()
    .filter(|(m, _)| rows.iter().any(|c| c.metric == *m))
    .collect();
    let mut t = String::from("## What the profile costs: each profile against `relaxed` (no filter), same configuration\n\nPaired ratio (95 % interval). Under `no-io-uring` (and an engine that blocks io_uring) the io_uring rows compare the epoll fallback with relaxed's io_uring.\n\n| profile | server | metric |");
    for (load, n, route) in &columns {
        let load = if loads.len() > 1 {
            format!("{} ", load.name())
        } else {
            String::new()
        };
        let route = if routes.len() > 1 {
            format!(" {route}")
        } else {
            String::new()
        };
        t += &format!(" {load}c={n}{route} |");
    }
    t += "\n| --- | --- | --- |";
    t += &" --- |".repeat(columns.len());
    t += "\n";
    for profile in [Profile::Default, Profile::NoIoUring] {
        for config in s.subjects_of(profile, &ServerConfig::ALL) {
            for &(metric, name) in &metrics {
                let cells: Vec<Option<&Comparison>> = columns
                    .iter()
                    .map(|&(load, n, route)| {
                        rows.iter().copied().find(|c| {
                            (
                                c.profile,
                                &c.config,
                                &c.baseline,
                                c.load,
                                c.conns,
                                &c.route,
                                c.metric,
                            ) == (profile, &config, &config, load, n, route, metric)
                        })
                    })
                    .collect();
                if cells.iter().all(Option::is_none) {
                    continue;
                }
                t += &format!("| {} | {} | {name} |", profile.name(), config.name());
                for c in cells {
                    t += &format!(" {} |", c.map_or("–".into(), |c| ratio_text(&c.interval())));
                }
                t += "\n";
            }
        }
    }
    t + "\n"
}

/// Each of this project's configurations against each foreign server, same profile.
pub(super) fn against_foreign(s: &Summary, routes: &[String]) -> String {
    let mut pairs: Vec<(Profile, &Subject, &Subject, u32)> = s
        .comparisons
        .iter()
        .filter(|c| c.baseline.own().is_none() && c.profile == c.baseline_profile)
        .map(|c| (c.profile, &c.config, &c.baseline, c.conns))
        .collect();
    pairs.sort();
    pairs.dedup();
    if pairs.is_empty() {
        return String::new();
    }
    let mut t = String::from("## Against the foreign servers

Paired ratio, the server (this project's configuration, or a `--reference` server) over the foreign server it is set against, slice by slice in the same rounds (median, 95 % interval): req/s above 1 and CPU per request or P50 below 1 favour the first.

| profile | server | against | conns | route | req/s | CPU per request | P50 |
| --- | --- | --- | --- | --- | --- | --- | --- |
");
    for (profile, config, foreign, n) in pairs {
        for route in routes {
            let get = |m| s.comparison((profile, config), (profile, foreign), n, route, m);
            let text =
                |c: Option<&Comparison>| c.map_or("–".into(), |c| ratio_text(&c.interval()));
            t += &format!(
                "| {} | {} | {} | {n} | {route} | {} | {} | {} |\n",
                profile.name(),
                config.name(),
                foreign.name(),
                text(get(Metric::Rps)),
                text(get(Metric::CpuPerRequest)),
                text(get(Metric::P50))
            );
        }
    }
    t + "\n"
}
