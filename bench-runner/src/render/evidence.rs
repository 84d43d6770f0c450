//! table.md's evidence: per cell what was measured beside the figures (backend observed,
//! spread, saturation, syscalls per request, failures), what the columns mean, the syscall
//! profiles and each server's record.

use crate::model::{LoadModel, Raw};
use crate::stats::two_digit_latency;
use crate::summary::{Summary, SATURATED, UNSATURATED_NOTE};

/// The evidence table of one load model (`None`: a run of keep-alive alone, whose heading
/// names no load).
pub(super) fn evidence_rows(s: &Summary, load: Option<LoadModel>) -> String {
    let heading = match load {
        None => "## Evidence".to_string(),
        Some(l) => format!("## Evidence: load `{}`", l.name()),
    };
    let mut t = heading
        + "\n\n| profile | config | route | backend observed | conns | req/s median [min–max] | CPU µs/req median [min–max] | P50 | P99 | server CPU | driver CPU | unsaturated slices | syscalls/req (epoll_ctl) | slices ok/failed | notes |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    let mut unsaturated = false;
    for r in &s.rows {
        let sys = |k: &str| {
            r.syscalls_per_request
                .get(k)
                .map_or("–".into(), |v| format!("{v:.3}"))
        };
        let mut notes = match (&r.flag, &r.note) {
            (Some(f), _) => format!("⚠ {f}"),
            (None, Some(n)) => n.clone(),
            _ => String::new(),
        };
        if let Some(share) = r.server_closed {
            let closes = if share >= 0.5 {
                format!(
                    "the server closed {:.0} % of the connections",
                    share * 100.0
                )
            } else {
                format!(
                    "the server kept {:.0} % of the connections open despite `Connection: close` (the client closed them)",
                    (1.0 - share) * 100.0
                )
            };
            notes = if notes.is_empty() {
                closes
            } else {
                format!("{notes}; {closes}")
            };
        }
        // Said once under the table, not in every row.
        if notes.contains(UNSATURATED_NOTE) {
            notes = notes.replace(UNSATURATED_NOTE, "no slice saturated the server †");
            unsaturated = true;
        }
        let cpu = match (
            r.cpu_us_per_request,
            r.cpu_us_per_request_min,
            r.cpu_us_per_request_max,
        ) {
            (Some(m), Some(lo), Some(hi)) => format!("{m:.2} [{lo:.2}–{hi:.2}]"),
            _ => "–".into(),
        };
        t += &format!(
            "| {} | {} | {} | {} io_uring={} | {} | {:.0} [{:.0}–{:.0}] | {cpu} | {} | {} | {} | {} | {} | {} ({}) | {}/{} | {} |\n",
            r.profile.name(), r.config.name(), r.route, r.backend_observed, r.io_uring, r.conns,
            r.rps_median, r.rps_min, r.rps_max, two_digit_latency(r.p50_us), two_digit_latency(r.p99_us),
            r.server_cpu.map_or("–".into(), |c| format!("{c:.0} %")),
            r.driver_cpu.map_or("–".into(), |c| format!("{c:.0} %")),
            match &r.open {
                // The schedule, not the server, sets an open-loop slice's rate.
                Some(o) => format!("open loop: {} behind schedule", o.behind_rounds),
                None => r.load_bound_rounds.to_string(),
            },
            sys("total"), sys("epoll_ctl"), r.rounds_ok, r.rounds_failed, notes.replace('|', "/")
        );
    }
    if unsaturated {
        t += &format!("\n† {UNSATURATED_NOTE}.\n");
    }
    t
}

/// What the evidence tables' columns mean, the syscall profiles and the servers' records.
pub(super) fn evidence_notes(raw: &Raw) -> String {
    let mut t = String::new();
    t += &format!("\nsyscalls/req: the server's own counters, SIGUSR1 snapshots at the two edges of every slice diffed, summed over the cell's slices, divided by the requests the server counted in the same windows. CPU µs/req: the server's CPU time over exactly the slice (container: its cgroup's counter; native: the process CPU clock) divided by the requests the driver completed in it. Server CPU: that time as a share of the server's CPUs (driver CPU: the runner process's, driver included, as a share of the load CPUs); below {:.0} % the slice is unsaturated and its req/s is left out of the median. P50/P99: the slices' latency histograms merged.\n\n", SATURATED * 100.0);
    t += &strace_profiles(raw);
    t += "## Servers\n\n| server | port | start-up line | starts | events |\n| --- | --- | --- | --- | --- |\n";
    for sv in &raw.servers {
        t += &format!(
            "| {} | {} | {} | {} | {} |\n",
            sv.key,
            sv.port,
            sv.startup.as_ref().map_or("–", |s| s.line.as_str()),
            sv.starts,
            sv.events
                .iter()
                .map(|e| e.detail().replace('\n', " ⏎ ").replace('|', "/"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    t
}

/// The syscall profiles from the extra strace slices, most frequent calls first.
fn strace_profiles(raw: &Raw) -> String {
    let with: Vec<_> = raw
        .servers
        .iter()
        .filter_map(|sv| Some((sv, sv.strace.as_ref()?)))
        .collect();
    if with.is_empty() {
        return String::new();
    }
    let mut t = String::from("## Syscall profiles\n\nOne extra slice per server after the rounds, under `strace -c -f` (the seed PR's method), with no warm-up so that strace's count and the driver's requests cover the same load. strace slows a server down: these slices are in no figure above.\n\n| server | conns | route | requests | syscalls/req | the most frequent, per request |\n| --- | --- | --- | --- | --- | --- |\n");
    for (sv, p) in with {
        let per = p.per_request();
        let mut calls: Vec<(&String, &f64)> = per.iter().filter(|(k, _)| *k != "total").collect();
        calls.sort_by(|a, b| b.1.total_cmp(a.1));
        let top = calls
            .iter()
            .take(5)
            .map(|(k, v)| format!("{k} {v:.3}"))
            .collect::<Vec<_>>()
            .join(", ");
        let (total, top) = match &p.error {
            Some(e) => (
                "–".to_string(),
                format!("none: {}", e.detail().replace('|', "/")),
            ),
            None => (
                per.get("total").map_or("–".into(), |v| format!("{v:.3}")),
                top,
            ),
        };
        t += &format!(
            "| {} | {} | {} | {} | {total} | {top} |\n",
            sv.key, p.conns, p.route, p.requests
        );
    }
    t + "\n"
}
