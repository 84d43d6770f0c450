//! The answer first: what Docker's io_uring block costs a server on this host, in at most ten
//! lines a framework author reads before anything else — at the top of table.md and
//! report.html, and as the last lines the runner prints. Generated from the summary alone, so
//! that a re-render of any committed run has one (a field an older run did not record is named
//! missing, never guessed).

use crate::model::{LoadModel, Profile, Raw, ServerConfig, Subject};
use crate::summary::{Comparison, Metric, Summary};

/// The question the block answers: its title everywhere.
pub const TITLE: &str = "What Docker's io_uring block costs here";

/// A line that details the line above it (a nested bullet).
const SUB: &str = "  ";

/// The headline's lines, each a sentence in plain words (markdown emphasis only); a line that
/// starts with [`SUB`] details the one above it.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    pub lines: Vec<String>,
}

impl Headline {
    /// As table.md and report.html open: a section titled with the question.
    pub fn markdown(&self) -> String {
        let mut t = format!("## {TITLE}\n\n");
        for l in &self.lines {
            match l.strip_prefix(SUB) {
                Some(detail) => t += &format!("  - {detail}\n"),
                None => t += &format!("- {l}\n"),
            }
        }
        // The glossary's terms these lines use, listed: each one defined there.
        let terms = super::glossary::terms_in(&self.lines.join("\n"));
        t += &format!(
            "\nTerms ([glossary](#glossary)): {}. The evidence for every figure follows.\n\n",
            terms.join("; ")
        );
        t
    }

    /// As the runner prints it last: the same lines without markdown.
    pub fn plain(&self) -> String {
        let mut t = format!("{TITLE}:\n");
        for l in &self.lines {
            let plain = l.replace("**", "").replace('`', "");
            match plain.strip_prefix(SUB) {
                Some(detail) => t += &format!("      {detail}\n"),
                None => t += &format!("  - {plain}\n"),
            }
        }
        t
    }
}

mod here;
mod judge;
pub use here::machine_phrase;
use here::{half_widths, resolution};
pub(crate) use judge::{aa_reach, cells, is_result};
use judge::{change, per_level};

/// What the block costs `server` (under `no-io-uring` against `relaxed`), one line per load
/// model: CPU per request, and req/s where saturated slices allowed a comparison.
fn block_cost(raw: &Raw, s: &Summary, server: &Subject, who: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let route = raw.settings.first_route();
    let pair = |load, metric| {
        cells(
            s,
            &route,
            load,
            metric,
            (server, Profile::NoIoUring),
            (server, Profile::Relaxed),
        )
    };
    let mut parts = Vec::new();
    for &load in &raw.settings.loads {
        let Some(cpu) = per_level(s, &load.phrase(), &pair(load, Metric::CpuPerRequest)) else {
            continue;
        };
        let rps = pair(load, Metric::Rps);
        let rps = if rps.iter().any(|c| is_result(s, c)) {
            let shown: Vec<String> = rps
                .iter()
                .map(|c| format!("{} at {}", change(s, c), c.conns))
                .collect();
            format!("; req/s {}", shown.join(", "))
        } else {
            String::new()
        };
        parts.push(format!("{cpu}{rps}"));
    }
    if !parts.is_empty() {
        lines.push(format!(
            "**{who}** under the block (`no-io-uring` against `relaxed`), change in CPU per request:"
        ));
        lines.extend(parts.into_iter().map(|p| format!("{SUB}{p}")));
    }
    lines
}

/// What the block costs an epoll server (rx under `no-io-uring` against `relaxed`): which cells
/// resolve, over every load model — in one line where at most two do, else a line per load
/// model as for the io_uring server (a cost in most cells is the filter's, not a cell's luck).
fn epoll_cost(raw: &Raw, s: &Summary) -> Vec<String> {
    let rx = Subject::Own(ServerConfig::Rx);
    let route = raw.settings.first_route();
    let by_load: Vec<(LoadModel, Vec<&Comparison>)> = raw
        .settings
        .loads
        .iter()
        .map(|&load| {
            let cs = cells(
                s,
                &route,
                load,
                Metric::CpuPerRequest,
                (&rx, Profile::NoIoUring),
                (&rx, Profile::Relaxed),
            );
            (load, cs)
        })
        .filter(|(_, cs)| !cs.is_empty())
        .collect();
    let all: Vec<&Comparison> = by_load
        .iter()
        .flat_map(|(_, cs)| cs.iter().copied())
        .collect();
    if all.is_empty() {
        return Vec::new();
    }
    let gap_of = |c: &Comparison| rate_gap(s, c).map_or(String::new(), |g| format!(" — {g}"));
    let described = |c: &&Comparison| {
        format!(
            "{}, {} connections: {}{}",
            c.load.phrase(),
            c.conns,
            change(s, c),
            gap_of(c)
        )
    };
    let resolved: Vec<&Comparison> = all.iter().copied().filter(|c| is_result(s, c)).collect();
    let widths: Vec<f64> = all
        .iter()
        .map(|c| (c.ci95_high - c.ci95_low) / 2.0 * 100.0)
        .collect();
    let lead = "**An epoll server** (rx, which never asks for io_uring) under the block";
    let intervals = half_widths(&widths);
    if resolved.len() > 2 {
        let pct = crate::stats::signed_pct;
        let changes = resolved.iter().map(|c| c.ratio_median);
        let (lo, hi) = changes.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
            (lo.min(r), hi.max(r))
        });
        let mut lines = vec![format!(
            "{lead}: resolved in {} of {} cells, {} to {} % (intervals {intervals}), change in CPU per request:",
            resolved.len(),
            all.len(),
            pct(lo),
            pct(hi)
        )];
        for (load, cs) in &by_load {
            // Each level's gap, named by its level where the model ran at several.
            let gaps: Vec<String> = cs
                .iter()
                .filter_map(|c| {
                    let gap = rate_gap(s, c)?;
                    Some(if cs.len() > 1 {
                        format!("{} connections {gap}", c.conns)
                    } else {
                        gap
                    })
                })
                .collect();
            let gaps = if gaps.is_empty() {
                String::new()
            } else {
                format!(" — {}", gaps.join("; "))
            };
            if let Some(level) = per_level(s, &load.phrase(), cs) {
                lines.push(format!("{SUB}{level}{gaps}"));
            }
        }
        return lines;
    }
    // Apart, but by no more than identical servers were: said, and not counted as a result.
    let within: Vec<String> = all
        .iter()
        .filter(|c| c.significant && !is_result(s, c))
        .map(described)
        .collect();
    let mut line = if resolved.is_empty() {
        format!(
            "{lead}: nothing resolvable in {n} of {n} cells (intervals {intervals}): the block costs it nothing this run can see",
            n = all.len()
        )
    } else {
        let shown: Vec<String> = resolved.iter().map(described).collect();
        format!(
            "{lead}: resolved in {} of {} cells (intervals {intervals}) — {}",
            resolved.len(),
            all.len(),
            shown.join("; ")
        )
    };
    if !within.is_empty() {
        line += &format!(" (apart, {})", within.join("; "));
    }
    vec![line + "."]
}

/// At a share of each server's own capacity the two servers of a comparison are driven at
/// different rates, and CPU per request falls as the rate rises (the wake-ups of an idle server
/// spread over more requests): a change there is partly the rate's, so the line says how far
/// apart the two rates were.
fn rate_gap(s: &Summary, c: &Comparison) -> Option<String> {
    if !matches!(c.load, LoadModel::Open(crate::model::Offered::Own(_))) {
        return None;
    }
    let rate = |config: &Subject, profile: Profile| {
        s.row(profile, config, c.load, c.conns, &c.route)
            .map(|r| r.rps_median)
    };
    let gap = rate(&c.config, c.profile)? / rate(&c.baseline, c.baseline_profile)? - 1.0;
    (gap.abs() >= 0.001).then(|| {
        format!(
            "driven at {:.1} % {} requests a second, each at a share of its own capacity",
            gap.abs() * 100.0,
            if gap < 0.0 { "fewer" } else { "more" }
        )
    })
}

/// The seed PR's fix: rx against legacy, kept alive, in the profile a blocked server runs.
fn seed_fix(raw: &Raw, s: &Summary) -> Option<String> {
    let route = raw.settings.first_route();
    let (rx, legacy) = (
        Subject::Own(ServerConfig::Rx),
        Subject::Own(ServerConfig::Legacy),
    );
    for profile in [Profile::NoIoUring, Profile::Relaxed, Profile::Default] {
        let cs = cells(
            s,
            &route,
            LoadModel::KeepAlive,
            Metric::CpuPerRequest,
            (&rx, profile),
            (&legacy, profile),
        );
        if let Some(line) = per_level(s, "kept alive", &cs) {
            return Some(format!(
                "**The seed PR's fix** (epoll registered once, `rx`, against the re-arm per request, `legacy`) under `{}`, CPU per request — {line}.",
                profile.name()
            ));
        }
    }
    None
}

/// Whether this engine's own default profile let io_uring through (what the io_uring server
/// said it ran under `default`).
fn engine_default(raw: &Raw, s: &Summary) -> String {
    if raw.engine.starts_with("native") {
        return "**This engine**: none (native run): `no-io-uring` is a seccomp filter in the server's process, Docker ≥ 25's behaviour; there is no engine `default` profile to test.".into();
    }
    let observed = s
        .rows
        .iter()
        .find(|r| r.profile == Profile::Default && r.config == Subject::Own(ServerConfig::IoUring))
        .map(|r| (r.backend_observed.clone(), r.io_uring.clone()));
    match observed {
        Some((backend, _)) if backend.starts_with("io_uring") => format!(
            "**This engine's `default` profile** ({}) lets io_uring through, as Docker did before 25: here `no-io-uring` stands in for Docker ≥ 25, containerd ≥ 2, Podman and CRI-O.",
            raw.engine
        ),
        Some((backend, why)) => format!(
            "**This engine's `default` profile** ({}) blocks io_uring (the server ran {backend}, io_uring {why}): its `default` rows are the block itself.",
            raw.engine
        ),
        None => format!(
            "**This engine** ({}): the io_uring server was not measured under its `default` profile, so this run does not say whether it blocks io_uring.",
            raw.engine
        ),
    }
}

/// The headline of a run.
pub fn headline(raw: &Raw, s: &Summary) -> Headline {
    let mut lines = Vec::new();
    let io_uring = Subject::Own(ServerConfig::IoUring);
    lines.extend(block_cost(raw, s, &io_uring, "The io_uring server"));
    // Foreign servers (`--server`): the reader's own, what the block costs it.
    let mut foreign: Vec<Subject> = s
        .rows
        .iter()
        .filter(|r| r.config.own().is_none())
        .map(|r| r.config.clone())
        .collect();
    foreign.sort();
    foreign.dedup();
    for f in &foreign {
        lines.extend(block_cost(raw, s, f, &format!("`{}`", f.name())));
    }
    if lines.is_empty() {
        lines.push("This run did not measure a server under both `no-io-uring` and `relaxed`: it cannot say what the block costs (run the default plan, or add `--profiles no-io-uring,relaxed`).".into());
    }
    if !lines[0].starts_with("This run did not") {
        lines.push(super::why::sentence(raw, s));
    }
    lines.extend(epoll_cost(raw, s));
    lines.extend(seed_fix(raw, s));
    lines.push(engine_default(raw, s));
    lines.push(format!(
        "**Here**: {}; {}.",
        machine_phrase(&raw.machine),
        resolution(raw, s)
    ));
    Headline { lines }
}

#[cfg(test)]
pub(crate) mod tests;
