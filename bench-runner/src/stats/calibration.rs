//! Whether a run's intervals are as wide as they say, checked inside the run, out of sample.
//!
//! Every comparison's interval is Student's t over its rounds ([`super::launches`],
//! [`super::duets`]): calibrated when the rounds are independent draws around the true ratio,
//! which fresh launches and a duet order drawn afresh every round make them. What would break
//! it is something fixed for a whole run that sets two servers apart — an offset no number of
//! rounds averages away. Counted as below over the seven duet runs of 2026-12-06/07 with the
//! rounds' own intervals (results/method-pair-offset-20261207): 8 of 147 A/A cells and 3 of 98
//! replicate contrasts apart, as 95 % intervals promise, but 4 of 21 pairs over all their
//! cells, at offsets of 0.3–0.5 % — a quarter of one cell's interval, too small to move its
//! coverage, large enough to exist. What stayed fixed for a configuration there was its port,
//! which every launch now draws afresh (`Plan::launch_ports`); no run-level term is added to
//! any interval, and these checks say in every run whether one is missing.
//!
//! Two checks keep that honest in every run, each with the rounds as its unit:
//!
//! - **The A/A pair**: the control (`io_uring-control` against `io_uring`) under one profile,
//!   its cells averaged per round. The cells of a pair share each round's launch, so they are
//!   not independent replicates of the pair's offset and a test over cells would count one
//!   launch's luck seven times; the rounds are independent.
//! - **Replicate contrasts**: every comparison across profiles made twice, with `io_uring`
//!   and with `io_uring-control` (no-io-uring against relaxed, say). Their ratios differ, round
//!   by round, by nothing but noise, so the contrast's interval should exclude 0 about one time
//!   in twenty. It checks the very kind of interval the headline reports, on comparisons whose
//!   servers differ.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::stopping::interval;
use super::Interval;

/// How many of a kind of check were made, and how many came out apart at 95 %.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub made: usize,
    pub apart: usize,
}

impl Tally {
    /// Counts one check's interval (none: not made).
    pub fn count(&mut self, interval: Option<Interval>) {
        if let Some(i) = interval {
            self.made += 1;
            self.apart += usize::from(i.excludes_one());
        }
    }

    /// The chance of at least `apart` of `made` coming out apart were each one's chance 5 %
    /// (a binomial tail): a small value says the intervals are too narrow.
    pub fn chance(&self) -> f64 {
        let n = self.made as i32;
        (self.apart as i32..=n)
            .map(|k| binomial(n, k) * 0.05f64.powi(k) * 0.95f64.powi(n - k))
            .sum()
    }
}

/// `n` choose `k`, as a float (the tallies are small).
fn binomial(n: i32, k: i32) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * f64::from(n - i) / f64::from(i + 1))
}

/// An identical pair's offset over all its cells: for every round that all the cells have, the
/// mean of their ln ratios; then Student's t over those rounds (fewer than three: none;
/// Stein's where rounds were added after `first_stage`).
pub fn pair_offset(cells: &[&BTreeMap<u32, f64>], first_stage: Option<u32>) -> Option<Interval> {
    let first = cells.first()?;
    let per_round: BTreeMap<u32, f64> = first
        .keys()
        .filter(|r| cells.iter().all(|c| c.contains_key(r)))
        .map(|r| {
            let mean = cells.iter().map(|c| c[r]).sum::<f64>() / cells.len() as f64;
            (*r, mean)
        })
        .collect();
    interval(&per_round, first_stage)
}

/// A replicate contrast: one comparison made with two copies of a server (`a`, `b`: each
/// one's ln ratio by round), their difference over the rounds both have.
pub fn contrast(
    a: &BTreeMap<u32, f64>,
    b: &BTreeMap<u32, f64>,
    first_stage: Option<u32>,
) -> Option<Interval> {
    let d: BTreeMap<u32, f64> = a
        .iter()
        .filter_map(|(r, x)| b.get(r).map(|y| (*r, x - y)))
        .collect();
    interval(&d, first_stage)
}

#[cfg(test)]
mod tests;
