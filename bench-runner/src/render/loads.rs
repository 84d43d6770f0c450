//! table.md's comparisons of one load model: per profile a table a metric (a row per
//! connection level, a column per configuration, each value with its paired change against
//! the column it replaces), or one table of every metric where the model ran at one level;
//! then the foreign servers and the mean over the routes. What is said once for every load
//! (which tables are left out, and why) is [`notes_once`]'s.

use super::cross::against_foreign;
use crate::model::{LoadModel, Profile, ServerConfig, Subject};
use crate::stats::{ratio_text, short_rate, two_digit_latency};
use crate::summary::{Metric, Row, Summary, MEAN_ROUTE};

/// Column order of the seed PR's table.
const COLUMNS: [ServerConfig; 5] = [
    ServerConfig::Legacy,
    ServerConfig::Rx,
    ServerConfig::IoUring,
    ServerConfig::IoUringControl,
    ServerConfig::Oneshot,
];

fn find<'a>(s: &'a Summary, p: Profile, c: &Subject, conns: u32, route: &str) -> Option<&'a Row> {
    s.rows
        .iter()
        .find(|r| r.profile == p && &r.config == c && r.conns == conns && r.route == route)
}

/// What a closed-loop model's tables show, each metric with its title.
const CLOSED: [(&str, Metric); 3] = [
    ("req/s", Metric::Rps),
    ("CPU per request (µs)", Metric::CpuPerRequest),
    ("P50 latency (where a column has its baseline, the paired change alone: each histogram keeps two significant digits, coarser than the change)", Metric::P50),
];
/// An open-loop model's: the rate is the schedule's, so no req/s.
const OPEN: [(&str, Metric); 4] = [
    (
        "CPU per request (µs) at the offered rate",
        Metric::CpuPerRequest,
    ),
    (
        "P50 latency, paired change where a column has its baseline",
        Metric::P50,
    ),
    (
        "P99 latency, paired change where a column has its baseline",
        Metric::P99,
    ),
    (
        "P99.9 latency, paired change where a column has its baseline",
        Metric::P999,
    ),
];

/// Whether a metric's table can show a change: req/s compares only slices in which the
/// server was saturated, which a duet's servers, on half the CPU each, never are.
fn resolvable(s: &Summary, m: Metric) -> bool {
    m != Metric::Rps || s.comparisons.iter().any(|c| c.metric == m)
}

/// What is said once, before the first load model's tables, for all of them: the tables left
/// out, and why.
pub(super) fn notes_once(s: &Summary, loads: &[LoadModel]) -> String {
    let mut t = String::new();
    let closed = loads.iter().any(|l| l.offered().is_none());
    if closed && !s.rows.is_empty() && !resolvable(s, Metric::Rps) {
        t += "req/s: no table — req/s compares only slices in which the server was saturated (≥ 90 % CPU), and none was here (in a run of duets each server has about half the CPU); every cell's req/s is in evidence.md, and each server's own in the seed PR's table above.\n\n";
    }
    if default_lets_io_uring_through(s) {
        t += "`default`: this engine's own profile lets io_uring through (as Docker did before 25), so its tables would repeat `relaxed`'s under a filter: what that filter costs each server is in \"What the profile costs\" below, and every `default` cell is in evidence.md.\n\n";
    }
    if loads.iter().any(|l| l.offered().is_some()) {
        t += "Open loop: the rate offered, the rate achieved and the latency of every server are in evidence.md; below, the paired changes.\n\n";
    }
    t
}

/// Every table of one load model: per profile its metrics, then the foreign servers and the
/// mean over the routes. `default` is left out where it lets io_uring through
/// ([`notes_once`] says so).
pub(super) fn load_tables(s: &Summary, load: LoadModel, routes: &[String]) -> String {
    let tables: &[(&str, Metric)] = match load.offered() {
        Some(_) => &OPEN,
        None => &CLOSED,
    };
    let tables: Vec<(&str, Metric)> = tables
        .iter()
        .copied()
        .filter(|(_, m)| resolvable(s, *m))
        .collect();
    let folded = default_lets_io_uring_through(s);
    let mut levels: Vec<u32> = s.rows.iter().map(|r| r.conns).collect();
    levels.sort_unstable();
    levels.dedup();
    let mut t = String::new();
    for profile in Profile::ALL {
        if !s.rows.iter().any(|r| r.profile == profile) || (folded && profile == Profile::Default) {
            continue;
        }
        t += &format!("## Profile `{}`\n\n", profile.name());
        for route in routes {
            if routes.len() > 1 {
                t += &format!("### Route `{route}`\n\n");
            }
            match levels[..] {
                [n] => t += &metrics_table(s, profile, route, n, &tables),
                _ => {
                    for &(title, metric) in &tables {
                        t += &level_table(s, profile, route, title, metric);
                    }
                }
            }
        }
    }
    t += &against_foreign(s, routes);
    if !s.route_means.is_empty() {
        t += "## Mean over the routes (the-benchmarker's published figure)\n\n| profile | config | conns | req/s (mean of the routes' medians) |\n| --- | --- | --- | --- |\n";
        for m in &s.route_means {
            t += &format!(
                "| {} | {} | {} | {} |\n",
                m.profile.name(),
                m.config.name(),
                m.conns,
                short_rate(m.rps_mean)
            );
        }
        t += "\n";
    }
    t
}

/// A model measured at one level: one table, a row per metric.
fn metrics_table(
    s: &Summary,
    profile: Profile,
    route: &str,
    conns: u32,
    tables: &[(&str, Metric)],
) -> String {
    let present = s.subjects_of(profile, &COLUMNS);
    let mut t = format!("{conns} connections, each value with its paired change against the column it replaces (latency: the change alone where there is one):\n\n| metric |");
    for c in &present {
        t += &format!(" {} |", heading(s, profile, c, route));
    }
    t += &format!("\n| --- |{}\n", " --- |".repeat(present.len()));
    // Open loop: the rate each server was driven at, beside its cost — at a share of its own
    // capacity every server is offered a rate of its own, and the cost depends on it.
    let offered: Vec<Option<f64>> = present
        .iter()
        .map(|c| {
            Some(
                find(s, profile, c, conns, route)?
                    .open
                    .as_ref()?
                    .offered_rps,
            )
        })
        .collect();
    if offered.iter().any(Option::is_some) {
        t += "| driven at (req/s offered) |";
        for o in &offered {
            t += &format!(" {} |", o.map_or("–".into(), short_rate));
        }
        t += "\n";
    }
    for &(_, metric) in tables {
        t += &format!("| {} |", metric_name(metric));
        for c in &present {
            t += &format!(" {} |", value_text(s, profile, c, conns, route, metric));
        }
        t += "\n";
    }
    t + "\n"
}

fn metric_name(m: Metric) -> &'static str {
    match m {
        Metric::Rps => "req/s",
        Metric::CpuPerRequest => "CPU µs a request",
        Metric::P50 => "P50",
        Metric::P99 => "P99",
        Metric::P999 => "P99.9",
    }
}

/// Whether the engine's `default` profile let the io_uring server run io_uring in this part
/// of the run (Docker before 25): then `default` is `relaxed` plus a filter.
fn default_lets_io_uring_through(s: &Summary) -> bool {
    let io_uring = Subject::Own(ServerConfig::IoUring);
    let rows: Vec<&Row> = s
        .rows
        .iter()
        .filter(|r| r.profile == Profile::Default && r.config == io_uring)
        .collect();
    !rows.is_empty()
        && rows
            .iter()
            .all(|r| r.backend_observed.starts_with("io_uring"))
}

/// One metric's table: a row per connection level, a column per configuration, each value
/// with its paired change against its baseline.
fn level_table(s: &Summary, profile: Profile, route: &str, title: &str, metric: Metric) -> String {
    let mut conns: Vec<u32> = s.rows.iter().map(|r| r.conns).collect();
    conns.sort_unstable();
    conns.dedup();
    let present = s.subjects_of(profile, &COLUMNS);
    let mut t = format!("{title}:\n\n| conns |");
    for c in &present {
        t += &format!(" {} |", heading(s, profile, c, route));
    }
    t += "\n| --- |";
    for _ in &present {
        t += " --- |";
    }
    t += "\n";
    for &n in &conns {
        t += &format!("| {n} |");
        for c in &present {
            t += &format!(" {} |", value_text(s, profile, c, n, route, metric));
        }
        t += "\n";
    }
    t + "\n"
}

/// One configuration's value in a cell on one metric, with its paired change against the
/// column it replaces (a latency: the change alone, where there is one).
fn value_text(
    s: &Summary,
    profile: Profile,
    c: &Subject,
    n: u32,
    route: &str,
    metric: Metric,
) -> String {
    let value = if route == MEAN_ROUTE {
        if metric != Metric::Rps {
            return "–".into();
        }
        s.route_means
            .iter()
            .find(|m| m.profile == profile && &m.config == c && m.conns == n)
            .map(|m| short_rate(m.rps_mean))
    } else {
        find(s, profile, c, n, route).map(|r| {
            let mark = if r.flag.is_some() { " ⚠" } else { "" };
            let v = match metric {
                Metric::Rps => short_rate(r.rps_median),
                Metric::CpuPerRequest => r
                    .cpu_us_per_request
                    .map_or("–".into(), |c| format!("{c:.2}")),
                Metric::P50 => two_digit_latency(r.p50_us),
                Metric::P99 => two_digit_latency(r.p99_us),
                Metric::P999 => r
                    .open
                    .as_ref()
                    .and_then(|o| o.p999_us)
                    .map_or("–".into(), two_digit_latency),
            };
            format!("{v}{mark}")
        })
    };
    let Some(value) = value else {
        return "–".into();
    };
    // Where the column has its baseline in the run but no interval: too few pairs (rounds
    // both measured, or both saturated for req/s) for one that holds.
    let change = c.baseline().and_then(|b| {
        match s.comparison((profile, c), (profile, &b), n, route, metric) {
            Some(x) => Some(ratio_text(&x.interval())),
            None => find(s, profile, &b, n, route).map(|_| "(too few pairs)".to_string()),
        }
    });
    match (change, metric) {
        // Two bucketed P50s side by side could read as equal beside a real change.
        (Some(change), m) if m.is_latency() => change,
        (Some(change), _) => format!("{value} {change}"),
        (None, _) => value,
    }
}

/// A column's heading, and what it really ran where every row of it fell back (io_uring
/// columns under `no-io-uring`): the figures beneath are then epoll's.
fn heading(s: &Summary, profile: Profile, c: &Subject, route: &str) -> String {
    let rows: Vec<&Row> = s
        .rows
        .iter()
        .filter(|r| {
            r.profile == profile && &r.config == c && (r.route == route || route == MEAN_ROUTE)
        })
        .collect();
    let fell_back = !rows.is_empty()
        && rows.iter().all(|r| {
            r.note
                .as_deref()
                .is_some_and(|n| n.contains("fell back to"))
        });
    if fell_back {
        format!(
            "{} — ran {} (io_uring denied)",
            c.heading(),
            rows[0].backend_observed
        )
    } else {
        c.heading().to_string()
    }
}
