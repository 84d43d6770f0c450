//! table.md: the seed PR's layout, every change with its paired interval, then the evidence.

use super::cross::{against_foreign, filter_cost};
use super::evidence::{evidence_notes, evidence_rows};
use super::resolution::{calibration_text, how_to_read_rest, resolution_text, target_text};
use crate::model::{LoadModel, Pairing, Profile, Raw, Relaunch, ServerConfig, Settings, Subject};
use crate::stats::{ratio_text, short_rate, two_digit_latency};
use crate::summary::{Comparison, Metric, Row, Summary, MEAN_ROUTE};

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

pub fn comparison<'a>(
    s: &'a Summary,
    p: Profile,
    c: &Subject,
    base: (Profile, &Subject),
    conns: u32,
    route: &str,
    metric: Metric,
) -> Option<&'a Comparison> {
    s.comparisons.iter().find(|x| {
        x.profile == p
            && &x.config == c
            && x.baseline_profile == base.0
            && &x.baseline == base.1
            && x.conns == conns
            && x.route == route
            && x.metric == metric
    })
}

pub fn markdown(raw: &Raw, s: &Summary) -> String {
    let mut t = String::from("# rxbench results\n\n");
    // The answer first; how it was made, and the evidence, after.
    t += &super::headline::headline(raw, s).markdown();
    t += &super::seed::section(raw, s);
    t += &super::why::section(raw, s);
    let st = &raw.settings;
    let factors = raw.machine.cost_factors();
    t += &format!(
        "Engine: {}. Machine: {} ({} cores), kernel {}{}. Driver: {}. Started {} (commit {}){}.\n\n",
        raw.engine,
        raw.machine.cpu_model,
        raw.machine.cores,
        raw.machine.kernel,
        if factors.is_empty() { String::new() } else { format!(" ({factors})") },
        raw.driver,
        raw.started_utc,
        raw.commit.as_deref().unwrap_or("unknown"),
        if raw.complete {
            ""
        } else {
            " — **incomplete run** (interrupted or failed: the figures rest on the slices it finished)"
        }
    );
    // A run of keep-alive alone reads as the runs before the load axis did.
    let by_load = raw.settings.loads != [LoadModel::KeepAlive];
    let cell = if by_load {
        "(server, load model, connection level, route)"
    } else {
        "(server, connection level, route)"
    };
    let instances = if st.instances > 1 {
        format!(" x {} instances of each configuration (separate processes, started in a shuffled order)", st.instances)
    } else {
        String::new()
    };
    let launched = match st.relaunch {
        Relaunch::Once => "every server resident for the whole run",
        Relaunch::Round => "every server launched afresh before each round (new processes, so that the rounds are independent replicates)",
    };
    // A run of duets visits every comparison, not every server, and a visit is two slices.
    let visit = match st.pairing {
        Pairing::Alternate => format!("every {cell} once for a {:.0} ms slice", st.slice_s * 1000.0),
        Pairing::Duet => format!(
            "every comparison's duet once a cell for a {:.0} ms window (a slice of each of its two servers)",
            st.slice_s * 1000.0
        ),
    };
    t += &format!(
        "Method: {launched}, servers on CPUs {:?}, driver on {:?}, {} network; {} rounds{instances}, each driving {visit} after a {:.0} ms warm-up, {} (seed {}). {} slices.\n\n",
        st.server_cpus, st.load_cpus, st.network, st.rounds, st.slice_warmup_s * 1000.0, raw.schedule().describe(by_load), st.seed, raw.slices.len()
    );
    if st.pairing == Pairing::Duet {
        t += "Pairing: duets — each round drives the two servers of every comparison at once, over one window, on the same server CPUs (one duet per instance pairing), so the host's interference of that second falls on both; a change is the ratio within each duet, its interval Student's t over rounds, nothing added: what could stay fixed for a run (which server of a duet goes first, the processes themselves, their ports) is drawn afresh every round, and the A/A pairs and replicate contrasts check it (docs/methodology.md, \"Duets\" and \"Calibration\"). Each server had about half the server CPUs while it ran: CPU per request is the figure; req/s and latency are those of a shared machine.\n\n";
    }
    if let Some(target) = &st.target {
        t += &target_text(target, st, s);
    }
    if by_load {
        let loads: Vec<String> = st
            .loads
            .iter()
            .map(|l| format!("`{}`: {}", l.name(), l.describe()))
            .collect();
        t += &format!("Load models: {}. Each is a level of the matrix like the connection count: a comparison pairs two servers under the same model, and each model has its own tables, resolution and evidence below.\n\n", loads.join("; "));
    }
    if !by_load {
        t += &resolution_text(s, st, crate::summary::resolution_limit(st));
    }
    for n in &raw.notes {
        t += &format!("- {n}\n");
    }
    if !raw.notes.is_empty() {
        t += "\n";
    }
    let against = "against the column it replaces (rx and oneshot against legacy, io_uring against rx, the A/A control against io_uring)";
    if st.intervals_cover_processes() {
        let from = if st.pairing == Pairing::Duet {
            "within each duet (both servers driven at once over one window): the geometric mean over rounds of the duets' ratios".to_string()
        } else if st.instances > 1 {
            format!(
                "from all {} instances of each over the same rounds: the ratio of their levels",
                st.instances
            )
        } else {
            "from the same rounds, each launched afresh: the geometric mean over rounds of their ratios".to_string()
        };
        t += &format!("How to read: each change is the ratio {against}, {from}, then its 95 % interval {} in brackets (two identical processes differ, and the interval covers that; docs/methodology.md). {}", interval_over(st), how_to_read_rest("figures"));
        let apart = s.comparisons.iter().filter(|c| c.significant).count();
        t += &format!("Of the {} comparisons this run made, {apart} tell their two servers apart; were nothing different at all, chance alone would tell about {:.1} apart (one in twenty).{}\n\n", s.comparisons.len(), s.comparisons.len() as f64 / 20.0, calibration_text(s));
    } else {
        t += &format!("How to read: each change is the paired ratio {against}, slice by slice in the same rounds: its median, then in brackets its 95 % interval from the order statistics of the pairs (none below 6 pairs). {}", how_to_read_rest("medians"));
    }

    t += &format!("{}\n\n", super::html::FIGURES_HERE);
    let mut routes = st.route_names();
    if routes.len() > 1 {
        routes.push(MEAN_ROUTE.into());
    }
    let parts: Vec<(LoadModel, Summary)> = st.loads.iter().map(|&l| (l, s.for_load(l))).collect();
    for (load, part) in &parts {
        if by_load {
            t += &format!("# Load `{}`: {}\n\n", load.name(), load.describe());
            t += &resolution_text(part, st, crate::summary::resolution_limit(st));
        }
        t += &load_tables(part, *load, &routes);
    }
    if by_load {
        t += "# Evidence\n\n";
        for (load, part) in &parts {
            t += &evidence_rows(part, Some(*load));
            t += "\n";
        }
    } else {
        t += &evidence_rows(s, None);
    }
    t += &evidence_notes(raw);
    t += super::glossary::GLOSSARY;
    t
}

/// Every table of one load model: per profile the seed PR's three, then what the profile
/// costs, the foreign servers, the mean over the routes.
fn load_tables(s: &Summary, load: LoadModel, routes: &[String]) -> String {
    let open = load.offered().is_some();
    let closed_tables = [
        ("req/s", Metric::Rps),
        ("CPU per request (µs)", Metric::CpuPerRequest),
        ("P50 latency (where a column has its baseline, the paired change alone: each histogram keeps two significant digits, coarser than the change; every P50 is in the evidence)", Metric::P50),
    ];
    let open_tables = [
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
    let tables: &[(&str, Metric)] = if open { &open_tables } else { &closed_tables };
    let mut t = String::new();
    for profile in Profile::ALL {
        if !s.rows.iter().any(|r| r.profile == profile) {
            continue;
        }
        t += &format!("## Profile `{}`\n\n", profile.name());
        for route in routes {
            if routes.len() > 1 {
                t += &format!("### Route `{route}`\n\n");
            }
            if open {
                t += &super::open::latency_table(s, load, profile, route);
            }
            for &(title, metric) in tables {
                t += &seed_table(s, profile, route, title, metric);
            }
        }
    }
    t += &filter_cost(s, routes);
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

/// One seed-PR table: a row per connection level, a column per configuration, each value
/// with its paired change against its baseline.
fn seed_table(s: &Summary, profile: Profile, route: &str, title: &str, metric: Metric) -> String {
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
            let value = if route == MEAN_ROUTE {
                if metric != Metric::Rps {
                    t += " – |";
                    continue;
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
                t += " – |";
                continue;
            };
            // Where the column has its baseline in the run but no interval: too few pairs
            // (rounds both measured, or both saturated for req/s) for one that holds.
            let change = c.baseline().and_then(|b| {
                match comparison(s, profile, c, (profile, &b), n, route, metric) {
                    Some(x) => Some(ratio_text(&x.interval())),
                    None => find(s, profile, &b, n, route).map(|_| "(too few pairs)".to_string()),
                }
            });
            t += &match (change, metric) {
                // Two bucketed P50s side by side could read as equal beside a real change.
                (Some(change), m) if m.is_latency() => format!(" {change} |"),
                (Some(change), _) => format!(" {value} {change} |"),
                (None, _) => format!(" {value} |"),
            };
        }
        t += "\n";
    }
    t + "\n"
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

/// What a comparison's interval is taken over, by how the run launched and paired its servers.
pub(super) fn interval_over(st: &Settings) -> &'static str {
    match (st.relaunch, st.pairing) {
        (Relaunch::Once, _) => "over instances and rounds",
        (Relaunch::Round, Pairing::Duet) => {
            "over rounds of duets (Student's t; each round's processes new, the order within each duet drawn afresh)"
        }
        (Relaunch::Round, Pairing::Alternate) => {
            "over rounds (Student's t; each round's processes new)"
        }
    }
}
