//! What the headline counts as a result, and how it words a change: a cell's interval against
//! the A/A control's reach, and the comparisons of one server under the block per level.

use crate::model::{LoadModel, Profile, Subject};
use crate::summary::{Comparison, Metric, Summary};

/// How far from no change two identical servers (the A/A control) reached in `c`'s cell, under
/// either of the profiles it compares (what the answer's chart draws as a band).
pub(crate) fn aa_reach(s: &Summary, c: &Comparison) -> Option<f64> {
    s.resolution
        .iter()
        .filter(|r| {
            r.load == c.load
                && r.conns == c.conns
                && r.route == c.route
                && r.metric == c.metric
                && (r.profile == c.profile || r.profile == c.baseline_profile)
        })
        .map(|r| r.aa_bound)
        .reduce(f64::max)
}

/// The bar a change must clear besides its interval: with resident servers, whose intervals do
/// not carry the processes' own luck, what the A/A control reached in its cell. Where the
/// intervals carry it (fresh launches, several instances) the interval is the one test (none:
/// issue #47, the bar on top of it was a second test).
fn aa_bar(s: &Summary, c: &Comparison) -> Option<f64> {
    if s.intervals_cover_processes {
        None
    } else {
        aa_reach(s, c)
    }
}

/// A change that is a result: its interval excludes no change (and, with resident servers, it
/// is larger than what two identical servers differed by in its cell).
pub(crate) fn is_result(s: &Summary, c: &Comparison) -> bool {
    c.significant && aa_bar(s, c).is_none_or(|reach| (c.ratio_median - 1.0).abs() > reach)
}

/// A paired change in percent with its interval (and, where it is no larger than what two
/// identical servers differed by, that it is not a result), or that it is not resolved and at
/// what width.
pub(super) fn change(s: &Summary, c: &Comparison) -> String {
    let pct = crate::stats::signed_pct;
    if c.significant {
        let figure = format!(
            "{} % [{}, {}]",
            pct(c.ratio_median),
            pct(c.ci95_low),
            pct(c.ci95_high)
        );
        match aa_bar(s, c) {
            Some(reach) if (c.ratio_median - 1.0).abs() <= reach => format!(
                "{figure}, within what two identical servers differ by here (±{:.1} %): not a result",
                reach * 100.0
            ),
            _ => figure,
        }
    } else {
        let reach = (c.ci95_low - 1.0).abs().max((c.ci95_high - 1.0).abs()) * 100.0;
        // Whole percents, but never "±0 %": an interval narrower than 1 % keeps a decimal.
        if reach < 0.95 {
            format!("not resolved at ±{reach:.1} %")
        } else {
            format!("not resolved at ±{reach:.0} %")
        }
    }
}

/// The comparisons of `config` under `profile` against `baseline` under `base_profile`, for
/// one load model and metric, by connection level.
pub(crate) fn cells<'a>(
    s: &'a Summary,
    route: &str,
    load: LoadModel,
    metric: Metric,
    (config, profile): (&Subject, Profile),
    (baseline, base_profile): (&Subject, Profile),
) -> Vec<&'a Comparison> {
    let mut v: Vec<&Comparison> = s
        .comparisons
        .iter()
        .filter(|c| {
            c.load == load
                && c.metric == metric
                && &c.config == config
                && c.profile == profile
                && &c.baseline == baseline
                && c.baseline_profile == base_profile
                && c.route == route
        })
        .collect();
    v.sort_by_key(|c| c.conns);
    v
}

/// `kept alive (64 / 256 / 512 connections)` and the cells' changes joined the same way.
pub(super) fn per_level(s: &Summary, label: &str, cs: &[&Comparison]) -> Option<String> {
    if cs.is_empty() {
        return None;
    }
    let levels: Vec<String> = cs.iter().map(|c| c.conns.to_string()).collect();
    let changes: Vec<String> = cs.iter().map(|c| change(s, c)).collect();
    Some(format!(
        "{label} ({} connections): {}",
        levels.join(" / "),
        changes.join(" · ")
    ))
}
