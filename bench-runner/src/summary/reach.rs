//! How long the run's answer took: for each A/A control cell (CPU per request), the round
//! after which its interval was within the run's limit and stayed there, and when in the run
//! that round ended. The rounds' summaries are re-made from the slices of the rounds up to
//! each one, as the run would have printed them had it stopped there.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{summarise_slices, Metric, MEAN_ROUTE};
use crate::model::{LoadModel, Profile, Raw};

/// One A/A cell's reach.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reach {
    pub profile: Profile,
    pub load: LoadModel,
    pub conns: u32,
    pub route: String,
    /// The round from which on the cell was within the limit (`None`: not by the run's end).
    pub round: Option<u32>,
    /// Seconds from the run's start (servers' start-up included) to the end of the cell's
    /// slices in that round (a round's open loop at shares of capacity runs after every
    /// planned round of the rest); without a round, to the end of the run.
    pub after_s: f64,
}

type CellKey = (Profile, LoadModel, u32, String);

/// Every A/A cell's reach of `limit` (a half-width: 0.02 = ±2 %).
pub fn reach(raw: &Raw, limit: f64) -> Vec<Reach> {
    // The rounds driven, and when each block of each round ended.
    let rounds: BTreeSet<u32> = raw.slices.iter().map(|s| s.round).collect();
    let mut block_ends: BTreeMap<(u32, LoadModel, u32, String), f64> = BTreeMap::new();
    for s in &raw.slices {
        let end = s.at_s + s.window_s;
        let block = block_ends
            .entry((s.round, s.load, s.conns, s.route.to_string()))
            .or_insert(0.0);
        *block = block.max(end);
    }
    // A cell's slices in a round: its block's, or for the mean over routes every route's.
    let cell_end = |round: u32, (_, load, conns, route): &CellKey| {
        block_ends
            .iter()
            .filter(|((r, l, c, rt), _)| {
                (*r, *l, *c) == (round, *load, *conns) && (rt == route || route == MEAN_ROUTE)
            })
            .map(|(_, end)| *end)
            .reduce(f64::max)
    };
    let Some(run_end) = run_end_s(raw) else {
        return Vec::new();
    };
    // Walked back from the last round: a cell keeps the earliest round of its unbroken run of
    // rounds within the limit up to the end, and drops out of the walk at the first round it
    // was not; the walk stops when every cell has.
    let mut reached: BTreeMap<CellKey, Option<u32>> = BTreeMap::new();
    let mut prefix = raw.clone();
    let mut later: Option<u32> = None;
    for &round in rounds.iter().rev() {
        prefix.slices.retain(|s| s.round <= round);
        let widths: BTreeMap<CellKey, f64> = summarise_slices(&prefix)
            .resolution
            .into_iter()
            .filter(|r| r.metric == Metric::CpuPerRequest)
            .map(|r| ((r.profile, r.load, r.conns, r.route), r.half_width))
            .collect();
        if later.is_none() {
            reached = widths.keys().map(|k| (k.clone(), None)).collect();
        }
        let mut any = false;
        for (key, at) in reached.iter_mut() {
            // Within at every round after this one (none after the last), and at this one.
            if *at == later && widths.get(key).is_some_and(|w| *w <= limit) {
                *at = Some(round);
                any = true;
            }
        }
        if !any {
            break;
        }
        later = Some(round);
    }
    reached
        .into_iter()
        .map(|(cell, round)| {
            let after_s = round.and_then(|r| cell_end(r, &cell)).unwrap_or(run_end);
            let (profile, load, conns, route) = cell;
            Reach {
                profile,
                load,
                conns,
                route,
                round,
                after_s,
            }
        })
        .collect()
}

/// Seconds from the run's start to the end of its last window (`None`: no slice).
pub fn run_end_s(raw: &Raw) -> Option<f64> {
    raw.slices
        .iter()
        .map(|s| s.at_s + s.window_s)
        .reduce(f64::max)
}

/// When the run's answer was in: every A/A cell within the limit from then on (`None`: some
/// cell never was, or the run has no A/A control).
pub fn answered_after_s(reach: &[Reach]) -> Option<f64> {
    if reach.is_empty() || reach.iter().any(|r| r.round.is_none()) {
        return None;
    }
    reach.iter().map(|r| r.after_s).reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Relaunch, ServerConfig, ServerKey, Subject};
    use crate::summary::tests::synthetic;

    /// The A/A pair under `relaxed`, launched afresh every round (Student's t over rounds),
    /// its ratio in round `r` from `ratio(r)`; round `r` ends at `10 r + 1` s.
    fn aa_run(rounds: u32, ratio: impl Fn(u32) -> f64) -> Raw {
        let key = |config| ServerKey {
            profile: Profile::Relaxed,
            config: Subject::Own(config),
        };
        let control = key(ServerConfig::IoUringControl);
        let servers = [key(ServerConfig::IoUring), control.clone()];
        let mut raw = synthetic(
            &servers,
            rounds,
            |k, r| if *k == control { 5.0 * ratio(r) } else { 5.0 },
            |_, _| 1.0,
        );
        raw.settings.relaunch = Relaunch::Round;
        for s in &mut raw.slices {
            s.at_s = f64::from(s.round) * 10.0;
        }
        raw
    }

    /// The A/A half-width of the rounds up to `round`, as the run would have printed it.
    fn width_up_to(raw: &Raw, round: u32) -> Option<f64> {
        let mut prefix = raw.clone();
        prefix.slices.retain(|s| s.round <= round);
        summarise_slices(&prefix)
            .resolution
            .iter()
            .find(|r| r.metric == Metric::CpuPerRequest)
            .map(|r| r.half_width)
    }

    #[test]
    fn a_cell_reaches_the_limit_at_the_first_round_it_stays_within_it_from() {
        // Three rounds 2-3 % apart, then quiet ones: the interval narrows round by round.
        let noisy = [1.03, 0.97, 1.02];
        let raw = aa_run(12, |r| {
            noisy
                .get(r as usize - 1)
                .copied()
                .unwrap_or(1.0 + 0.001 * f64::from(r % 3))
        });
        let reached = reach(&raw, 0.02);
        assert_eq!(reached.len(), 1, "{reached:?}");
        // The first round from which every prefix's width is within ±2 %, found forwards.
        let within: Vec<u32> = (1..=12)
            .filter(|&r| (r..=12).all(|q| width_up_to(&raw, q).is_some_and(|w| w <= 0.02)))
            .collect();
        let first = *within
            .first()
            .expect("the quiet rounds bring it within ±2 %");
        assert!(
            first > 3,
            "not within while the noisy rounds dominate: {first}"
        );
        assert_eq!(reached[0].round, Some(first));
        assert_eq!(reached[0].after_s, f64::from(first) * 10.0 + 1.0);
        assert_eq!(
            answered_after_s(&reached),
            Some(f64::from(first) * 10.0 + 1.0)
        );

        // A second block in every round that runs 1000 s later (as open loop at shares of
        // capacity runs after the planned rounds): each cell is timed by its own block.
        let mut two = raw.clone();
        let later: Vec<_> = two
            .slices
            .iter()
            .map(|s| crate::model::Slice {
                load: LoadModel::PerRequest,
                at_s: s.at_s + 1000.0,
                ..s.clone()
            })
            .collect();
        two.slices.extend(later);
        two.settings.loads.push(LoadModel::PerRequest);
        let reached = reach(&two, 0.02);
        let after = |load| reached.iter().find(|r| r.load == load).unwrap().after_s;
        assert_eq!(after(LoadModel::KeepAlive), f64::from(first) * 10.0 + 1.0);
        assert_eq!(
            after(LoadModel::PerRequest),
            f64::from(first) * 10.0 + 1001.0
        );
    }

    #[test]
    fn a_cell_pushed_out_again_by_a_late_round_has_not_reached_it() {
        // Quiet from round 4, until round 12 lands 40 % apart.
        let noisy = [1.03, 0.97, 1.02];
        let ratio = |r: u32| match r {
            12 => 1.40,
            r if r <= 3 => noisy[r as usize - 1],
            r => 1.0 + 0.001 * f64::from(r % 3),
        };
        let raw = aa_run(12, ratio);
        assert!(
            width_up_to(&raw, 11).unwrap() <= 0.02,
            "within before round 12"
        );
        assert!(width_up_to(&raw, 12).unwrap() > 0.02, "and out after it");
        let late = reach(&raw, 0.02);
        assert_eq!(late[0].round, None);
        assert_eq!(late[0].after_s, 121.0, "the run's end");
        assert_eq!(answered_after_s(&late), None);
        // No A/A control: nothing to reach.
        let mut none = raw.clone();
        none.slices
            .retain(|s| s.server.config == Subject::Own(ServerConfig::IoUring));
        assert!(reach(&none, 0.02).is_empty());
        assert_eq!(answered_after_s(&[]), None);
    }
}
