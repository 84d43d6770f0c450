//! Adaptive rounds (`--target-resolution`): after the planned rounds a run keeps adding rounds
//! until the A/A control resolves the target in every cell, or the budget would run out first.
//! A noisy hour then costs time instead of resolution, and where even the time did not suffice
//! the table says which cells fell short.
//!
//! An added round drives only the blocks whose A/A is still wider than the target (each under
//! every profile, so the profile comparisons gain pairs too): the cells that need slices get
//! them — open loop below capacity is noisier per slice than keep-alive — and the budget is not
//! spent on cells already resolved.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::LoadModel;
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

/// Whether to drive another round.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Cells still wider than the target, and time for a round of their blocks (of every
    /// block while some cell has no interval yet).
    Round(Blocks),
    /// Every cell at the target.
    Reached,
    /// A round would end past the budget; these cells are still wider.
    BudgetSpent(Vec<Resolution>),
    /// The run has no A/A control: nothing to judge the target by.
    NoControl,
}

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

    /// After a round: another one, or why not. `cells` is how many A/A cells the run has
    /// (one with no interval yet counts as open); `elapsed` the measuring so far, `per_visit`
    /// one visit's share of it (one driver window: a slice, or a duet's two), `visits_in` how
    /// many visits a round of some blocks holds.
    pub fn next(
        &self,
        s: &Summary,
        cells: usize,
        elapsed: Duration,
        per_visit: Duration,
        visits_in: impl Fn(&Blocks) -> usize,
    ) -> Next {
        if cells == 0 {
            return Next::NoControl;
        }
        let judged = s
            .resolution
            .iter()
            .filter(|r| r.metric == Metric::CpuPerRequest)
            .count();
        let open = self.open(s);
        if open.is_empty() && judged >= cells {
            return Next::Reached;
        }
        let blocks: Blocks = (judged >= cells).then(|| {
            open.iter()
                .map(|r| Block {
                    load: r.load,
                    conns: r.conns,
                    route: r.route.clone(),
                })
                .collect()
        });
        let round = per_visit * visits_in(&blocks) as u32;
        if elapsed + round > self.budget() {
            return Next::BudgetSpent(open.into_iter().cloned().collect());
        }
        Next::Round(blocks)
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
        }
    }

    fn summary(cells: Vec<Resolution>) -> Summary {
        Summary {
            resolution: cells,
            ..Summary::default()
        }
    }

    #[test]
    fn rounds_go_on_until_every_cell_is_resolved_or_the_budget_is_spent() {
        let t = Target {
            half_width: 0.02,
            budget_s: 600.0,
        };
        // 10 slices a block, 1.5 s each: a round of every block (two) is 30 s.
        let (min, slice) = (Duration::from_secs(60), Duration::from_millis(1500));
        let slices = |b: &Blocks| b.as_ref().map_or(20, |b| 10 * b.len());
        let wide = summary(vec![cell(64, 0.015), cell(512, 0.031)]);
        let only_512 = BTreeSet::from([Block {
            load: LoadModel::KeepAlive,
            conns: 512,
            route: "GET:/".into(),
        }]);
        // Only the open cell's block is driven again.
        assert_eq!(
            t.next(&wide, 2, min, slice, slices),
            Next::Round(Some(only_512))
        );
        let done = summary(vec![cell(64, 0.015), cell(512, 0.019)]);
        assert_eq!(t.next(&done, 2, min, slice, slices), Next::Reached);
        // One cell has no interval yet: not reached, and every block goes again.
        let partial = summary(vec![cell(64, 0.015)]);
        assert_eq!(t.next(&partial, 2, min, slice, slices), Next::Round(None));
        // The next round would end past the budget: stop, naming the open cell. A round of
        // the one open block (15 s) still fits where a round of both (30 s) would not.
        assert_eq!(
            t.next(&wide, 2, Duration::from_secs(590), slice, slices),
            Next::BudgetSpent(vec![cell(512, 0.031)])
        );
        assert!(matches!(
            t.next(&wide, 2, Duration::from_secs(580), slice, slices),
            Next::Round(Some(_))
        ));
        assert_eq!(
            t.next(&partial, 2, Duration::from_secs(580), slice, slices),
            Next::BudgetSpent(vec![])
        );
        assert_eq!(t.next(&wide, 0, min, slice, slices), Next::NoControl);
        // req/s cells do not count: the target is on CPU per request.
        let mut rps = cell(64, 0.5);
        rps.metric = Metric::Rps;
        let with_rps = summary(vec![cell(64, 0.01), rps]);
        assert_eq!(t.next(&with_rps, 1, min, slice, slices), Next::Reached);
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
