//! Adaptive rounds (`--target-resolution`): after the planned rounds a run keeps adding rounds
//! until the A/A control resolves the target in every cell, or the budget would run out first.
//! A noisy hour then costs time instead of resolution, and where even the time did not suffice
//! the table says which cells fell short.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::summary::{Metric, Resolution, Summary};

/// What a run aims for: the A/A half-width on CPU per request in every cell, within a budget.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// 0.02 = ±2 %.
    pub half_width: f64,
    /// The measuring time no added round may end past (the planned rounds always run).
    pub budget_s: f64,
}

/// Whether to drive another round.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Cells still wider than the target, and time for a round.
    Round,
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
    /// (one with no interval yet counts as open); `elapsed` the measuring so far, `per_round`
    /// the last round's length.
    pub fn next(&self, s: &Summary, cells: usize, elapsed: Duration, per_round: Duration) -> Next {
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
        if elapsed + per_round > self.budget() {
            return Next::BudgetSpent(open.into_iter().cloned().collect());
        }
        Next::Round
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
        let (min, round) = (Duration::from_secs(60), Duration::from_secs(45));
        let wide = summary(vec![cell(64, 0.015), cell(512, 0.031)]);
        assert_eq!(t.next(&wide, 2, min, round), Next::Round);
        let done = summary(vec![cell(64, 0.015), cell(512, 0.019)]);
        assert_eq!(t.next(&done, 2, min, round), Next::Reached);
        // One cell has no interval yet: not reached.
        let partial = summary(vec![cell(64, 0.015)]);
        assert_eq!(t.next(&partial, 2, min, round), Next::Round);
        // The next round would end past the budget: stop, naming the open cell.
        let late = Duration::from_secs(560);
        assert_eq!(
            t.next(&wide, 2, late, round),
            Next::BudgetSpent(vec![cell(512, 0.031)])
        );
        assert_eq!(t.next(&wide, 0, min, round), Next::NoControl);
        // req/s cells do not count: the target is on CPU per request.
        let mut rps = cell(64, 0.5);
        rps.metric = Metric::Rps;
        let with_rps = summary(vec![cell(64, 0.01), rps]);
        assert_eq!(t.next(&with_rps, 1, min, round), Next::Reached);
    }
}
