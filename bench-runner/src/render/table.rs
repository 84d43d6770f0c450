//! table.md: the seed PR's layout, every change with its paired interval, then the evidence.

use super::cross::filter_cost;
use super::evidence::{evidence_notes, evidence_rows};
use super::loads::{load_tables, notes_once};
use super::resolution::{
    calibration_text, dropped_text, how_to_read_rest, resolution_text, target_text,
};
use crate::model::{LoadModel, Pairing, Raw, Relaunch};
use crate::summary::{Summary, MEAN_ROUTE};

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
    if let Some(from) = &st.rates_from {
        t += &format!("**Open-loop rates** taken from run {} (`--rates-from`): every share of capacity is a share of the keep-alive req/s that run measured, so each server was driven at that run's rates, and its costs there compare with these like with like.\n\n", from.run);
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
    t += &dropped_text(s);
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
        t += &format!("How to read: each change is the ratio {against}, {from}, then its 95 % interval {} in brackets (two identical processes differ, and the interval covers that; docs/methodology.md). {}", super::resolution::interval_over(st), how_to_read_rest("figures"));
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
    t += &notes_once(s, &st.loads);
    for &load in &st.loads {
        let part = s.for_load(load);
        if by_load {
            t += &format!("# Load `{}`: {}\n\n", load.name(), load.describe());
            t += &resolution_text(&part, st, crate::summary::resolution_limit(st));
        }
        t += &load_tables(&part, load, &routes);
    }
    t += &filter_cost(s, &st.loads, &routes);
    t += EVIDENCE_POINTER;
    t += &super::glossary::markdown();
    t
}

/// Where table.md sends its reader for the evidence (evidence.md; the page's last section).
pub const EVIDENCE_POINTER: &str = "The evidence for every cell — the backend each server said it ran, req/s and CPU per request with their spread, P50 and P99, how busy the server and the driver were, syscalls per request, failures — and every server's start-up line are in evidence.md beside this file (report.html: the collapsed section at its end).\n\n";

/// evidence.md: every cell's evidence per load model, what its columns mean, the syscall
/// profiles and the servers' records.
pub fn evidence_markdown(raw: &Raw, s: &Summary) -> String {
    let mut t = format!(
        "# Evidence: rxbench {} ({})

",
        raw.started_utc, raw.engine
    );
    if raw.settings.loads != [LoadModel::KeepAlive] {
        for &load in &raw.settings.loads {
            let part = s.for_load(load);
            t += &evidence_rows(&part, Some(load));
            t += "\n";
            if load.offered().is_some() {
                t += &super::open::latency_tables(&part, load, &raw.settings.route_names());
            }
        }
    } else {
        t += &evidence_rows(s, None);
    }
    t + &evidence_notes(raw)
}
