//! Added rounds (`--target-resolution`): after the planned rounds — the first stage — the
//! spread of each A/A cell decides, once, how many more rounds its block needs for the target
//! ([`crate::stats::stopping`]: Stein's two-stage rule); the run drives them and stops, within
//! its budget. A noisy hour then costs time instead of resolution, and where even the time did
//! not suffice the table says which cells fell short.
//!
//! An added round drives only the blocks still short of the target (each under every profile,
//! so the profile comparisons gain pairs too): the cells that need slices get them — open loop
//! below capacity is noisier per slice than keep-alive — and the budget is not spent on cells
//! already resolved.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::LoadModel;
use crate::stats::stopping::rounds_needed;
use crate::summary::{Metric, Resolution, Summary, MEAN_ROUTE};

/// What a run aims for: the A/A half-width on CPU per request in every cell, within a budget.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// 0.02 = ±2 %.
    pub half_width: f64,
    /// The measuring time no added round may end past (the planned rounds always run).
    pub budget_s: f64,
}

/// One block of a round: a load model, level and route, every server once.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Block {
    pub load: LoadModel,
    pub conns: u32,
    /// A route's name, or [`MEAN_ROUTE`] for the mean over the routes (all of them then).
    pub route: String,
}

impl Block {
    /// Whether a cell of `load` at `conns` on `route` belongs to this block.
    pub fn holds(&self, load: LoadModel, conns: u32, route: &str) -> bool {
        self.load == load
            && self.conns == conns
            && (self.route == route || self.route == MEAN_ROUTE)
    }
}

/// The blocks an added round drives: `None` for all of them.
pub type Blocks = Option<BTreeSet<Block>>;

/// What the first stage decides ([`crate::stats::stopping`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Some A/A cell has no interval yet (a slice failed): a round of every block, then
    /// decide again. A rule on what is missing, not on the spread.
    Incomplete,
    /// The rounds to add: decided once, from the spread of the rounds so far.
    Add(Added),
    /// Every cell is at the target already: nothing to add.
    Reached,
    /// The run has no A/A control: nothing to judge the target by.
    NoControl,
}

/// The rounds the two-stage rule adds, by block: block `b` is driven in added rounds
/// `1..=added[b]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Added(pub std::collections::BTreeMap<Block, u32>);

impl Added {
    /// How many rounds are added in all (the most any block gets).
    pub fn rounds(&self) -> u32 {
        self.0.values().copied().max().unwrap_or(0)
    }

    /// The blocks of added round `k` (1-based).
    pub fn round(&self, k: u32) -> Blocks {
        Some(
            self.0
                .iter()
                .filter(|(_, n)| **n >= k)
                .map(|(b, _)| b.clone())
                .collect(),
        )
    }
}

/// What the rule asked and what was driven, recorded in raw.json's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddedRounds {
    /// The first stage's last round: the planned rounds, and any of every block added while
    /// an A/A cell had no interval.
    pub first_stage: u32,
    /// Rounds the first stage's spread asked for (the most of any block).
    pub asked: u32,
    /// Blocks given at least one.
    pub blocks: usize,
    /// Rounds driven: fewer than asked where the budget ran out first.
    pub driven: u32,
}

/// No block gets more rounds than this many times the planned ones: past it the budget has
/// long run out.
const MOST_TIMES_PLANNED: usize = 8;

impl Target {
    pub fn budget(&self) -> Duration {
        Duration::from_secs_f64(self.budget_s)
    }

    /// The cells (CPU per request) whose A/A half-width is still above the target.
    pub fn open<'a>(&self, s: &'a Summary) -> Vec<&'a Resolution> {
        s.resolution
            .iter()
            .filter(|r| r.metric == Metric::CpuPerRequest && r.half_width > self.half_width)
            .collect()
    }

    /// After the first stage (the planned rounds, and any round of every block a missing
    /// interval added): the rounds each block still needs, from each A/A cell's spread so far
    /// ([`rounds_needed`]). `cells` is how many A/A cells the run has, `planned` its planned
    /// rounds.
    pub fn decide(&self, s: &Summary, cells: usize, planned: u32) -> Decision {
        if cells == 0 {
            return Decision::NoControl;
        }
        let judged: Vec<&Resolution> = s
            .resolution
            .iter()
            .filter(|r| r.metric == Metric::CpuPerRequest)
            .collect();
        if judged.len() < cells {
            return Decision::Incomplete;
        }
        let most = planned as usize * MOST_TIMES_PLANNED;
        let mut added = Added::default();
        for r in judged {
            let n = rounds_needed(r.half_width, r.pairs, self.half_width, most);
            let more = n.saturating_sub(r.pairs) as u32;
            if more > 0 {
                let block = Block {
                    load: r.load,
                    conns: r.conns,
                    route: r.route.clone(),
                };
                let at = added.0.entry(block).or_default();
                *at = (*at).max(more);
            }
        }
        if added.0.is_empty() {
            Decision::Reached
        } else {
            Decision::Add(added)
        }
    }

    /// Whether a round of `round` more measuring still ends within the budget.
    pub fn fits(&self, elapsed: Duration, round: Duration) -> bool {
        elapsed + round <= self.budget()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LoadModel, Profile};

    fn cell(conns: u32, half_width: f64) -> Resolution {
        Resolution {
            profile: Profile::Relaxed,
            load: LoadModel::KeepAlive,
            conns,
            route: "GET:/".into(),
            metric: Metric::CpuPerRequest,
            half_width,
            aa_bound: half_width,
            aa_apart: false,
            pairs: 6,
        }
    }

    fn summary(cells: Vec<Resolution>) -> Summary {
        Summary {
            resolution: cells,
            ..Summary::default()
        }
    }

    fn block(conns: u32) -> Block {
        Block {
            load: LoadModel::KeepAlive,
            conns,
            route: "GET:/".into(),
        }
    }

    #[test]
    fn the_first_stage_decides_the_added_rounds_of_each_block_once() {
        let t = Target {
            half_width: 0.02,
            budget_s: 600.0,
        };
        // c=512 at ±3.1 % after six rounds needs 6 × (3.1 / 2)² ≈ 13 in all (t shrinking
        // too); c=64 at ±1.5 % none; the same block under another profile at ±2.5 % fewer.
        let mut other = cell(512, 0.025);
        other.profile = Profile::NoIoUring;
        let wide = summary(vec![cell(64, 0.015), cell(512, 0.031), other]);
        let Decision::Add(added) = t.decide(&wide, 3, 6) else {
            panic!("{:?}", t.decide(&wide, 3, 6));
        };
        let n = rounds_needed(0.031, 6, 0.02, 48) as u32 - 6;
        assert!((5..=9).contains(&n), "{n}");
        assert_eq!(added.0, [(block(512), n)].into());
        assert_eq!(added.rounds(), n);
        assert_eq!(added.round(1), Some([block(512)].into()));
        assert_eq!(added.round(n + 1), Some([].into()));
        // Every cell at the target: nothing added.
        let done = summary(vec![cell(64, 0.015), cell(512, 0.019)]);
        assert_eq!(t.decide(&done, 2, 6), Decision::Reached);
        // One cell has no interval yet: a round of every block, then decide again.
        let partial = summary(vec![cell(64, 0.015)]);
        assert_eq!(t.decide(&partial, 2, 6), Decision::Incomplete);
        assert_eq!(t.decide(&wide, 0, 6), Decision::NoControl);
        // req/s cells do not count: the target is on CPU per request.
        let mut rps = cell(64, 0.5);
        rps.metric = Metric::Rps;
        let with_rps = summary(vec![cell(64, 0.01), rps]);
        assert_eq!(t.decide(&with_rps, 1, 6), Decision::Reached);
        // A round fits while it ends within the budget.
        let min = Duration::from_secs(60);
        assert!(t.fits(Duration::from_secs(540), min));
        assert!(!t.fits(Duration::from_secs(541), min));
    }

    #[test]
    fn a_mean_block_holds_every_route_of_its_level() {
        let b = Block {
            load: LoadModel::KeepAlive,
            conns: 64,
            route: MEAN_ROUTE.into(),
        };
        assert!(
            b.holds(LoadModel::KeepAlive, 64, "GET:/")
                && b.holds(LoadModel::KeepAlive, 64, "POST:/user")
        );
        assert!(
            !b.holds(LoadModel::KeepAlive, 256, "GET:/")
                && !b.holds(LoadModel::PerRequest, 64, "GET:/")
        );
        let one = Block {
            route: "GET:/".into(),
            ..b
        };
        assert!(
            one.holds(LoadModel::KeepAlive, 64, "GET:/")
                && !one.holds(LoadModel::KeepAlive, 64, "POST:/user")
        );
    }
}
