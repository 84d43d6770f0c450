//! table.md's comparisons across the matrix's other axes: each profile against `relaxed`
//! (what the filter costs), and this project's servers against foreign ones.

use super::table::comparison;
use crate::model::{Profile, ServerConfig, Subject};
use crate::stats::ratio_text;
use crate::summary::{Comparison, Metric, Summary};

/// What the seccomp filter itself costs: each profile against `relaxed`, same configuration.
pub(super) fn filter_cost(s: &Summary, routes: &[String]) -> String {
    let rows: Vec<&Comparison> = s
        .comparisons
        .iter()
        .filter(|c| {
            c.baseline_profile == Profile::Relaxed
                && c.profile != Profile::Relaxed
                && c.metric != Metric::P50
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut t = String::from("## What the profile costs: each profile against `relaxed` (no filter), same configuration\n\nPaired ratio of CPU per request and of req/s (median, 95 % interval). Under `no-io-uring` (and an engine that blocks io_uring) the io_uring columns compare the epoll fallback with relaxed's io_uring.\n\n| profile | config | conns | route | CPU per request | req/s |\n| --- | --- | --- | --- | --- | --- |\n");
    for profile in [Profile::Default, Profile::NoIoUring] {
        for config in s.subjects_of(profile, &ServerConfig::ALL) {
            for route in routes {
                let mut conns: Vec<u32> = rows.iter().map(|c| c.conns).collect();
                conns.sort_unstable();
                conns.dedup();
                for n in conns {
                    let get = |m| {
                        comparison(
                            s,
                            profile,
                            &config,
                            (Profile::Relaxed, &config),
                            n,
                            route,
                            m,
                        )
                    };
                    let (cpu, rps) = (get(Metric::CpuPerRequest), get(Metric::Rps));
                    if cpu.is_none() && rps.is_none() {
                        continue;
                    }
                    let text = |c: Option<&Comparison>| {
                        c.map_or("–".into(), |c| ratio_text(&c.interval()))
                    };
                    t += &format!(
                        "| {} | {} | {n} | {route} | {} | {} |\n",
                        profile.name(),
                        config.name(),
                        text(cpu),
                        text(rps)
                    );
                }
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
            let get = |m| comparison(s, profile, config, (profile, foreign), n, route, m);
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
