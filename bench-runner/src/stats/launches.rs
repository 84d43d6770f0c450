//! Intervals for a run whose servers are launched afresh every round (`--relaunch round`).
//!
//! A resident process keeps its own luck — memory placement, caches, which core's timer it
//! shares — for the whole run: two identical processes differ by about 1 % here, the same in
//! every cell (results/20261204T150915Z/aa-residuals.md). With k resident instances a run
//! draws that luck k times per configuration however many rounds it measures, so the
//! interval rests on an estimate of it with few degrees of freedom, pooled over
//! configurations whose luck may not spread alike, and every cell of a run shares the same
//! draws: its misses come in groups. Launching every server again before each round makes
//! the launch the unit that is replicated (Kalibera & Jones, ISMM 2013: repeat at the level
//! with the most variance). Then each round is an independent replicate of the whole
//! comparison: both configurations' fresh instances, measured within the same minutes.
//!
//! On the log scale, round `r` gives `d_r` = mean of A's instances − mean of B's instances;
//! the round's drift, shared by both, cancels. The `d_r` are independent and identically
//! distributed whatever the instance and slice variances are and however they differ by
//! configuration, so Student's t on the rounds is the interval: no pooling, no model of the
//! instance level.

use std::collections::BTreeMap;

use super::instances::{t975, Series};
use super::Interval;

/// Fewer rounds measured on both sides than this give no interval (t's 97.5 % point is 4.3 at
/// two degrees of freedom; below it an interval says little).
pub const MIN_ROUNDS: usize = 3;

/// The mean log value of a configuration's instances in each round they were all measured in
/// positively (a round with a failed slice on one instance is left out: its mean would be
/// another instance's luck alone).
fn round_levels(instances: &[&Series]) -> BTreeMap<u32, f64> {
    let mut rounds: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for s in instances {
        for (r, v) in s.iter() {
            if v.is_finite() && *v > 0.0 {
                rounds.entry(*r).or_default().push(v.ln());
            }
        }
    }
    rounds
        .into_iter()
        .filter(|(_, v)| v.len() == instances.len())
        .map(|(r, v)| (r, v.iter().sum::<f64>() / v.len() as f64))
        .collect()
}

/// Configuration A (its instances' series, round → value) against B: the ratio of their
/// levels and its 95 % interval, from the rounds both were measured in.
pub fn compare(a: &[&Series], b: &[&Series]) -> Option<Interval> {
    rounds_interval(&values(&round_differences(a, b)))
}

/// The ln ratio of A's level to B's in every round both were measured in, by round (none
/// without instances on either side).
pub fn round_differences(a: &[&Series], b: &[&Series]) -> BTreeMap<u32, f64> {
    if a.is_empty() || b.is_empty() {
        return BTreeMap::new();
    }
    let (la, lb) = (round_levels(a), round_levels(b));
    la.iter()
        .filter_map(|(r, x)| lb.get(r).map(|y| (*r, x - y)))
        .collect()
}

/// A comparison's per-round values in round order, for [`rounds_interval`].
pub fn values(by_round: &BTreeMap<u32, f64>) -> Vec<f64> {
    by_round.values().copied().collect()
}

/// The mean of per-round differences of log values, `d`, as a ratio with Student's t 95 %
/// interval over the rounds (fewer than [`MIN_ROUNDS`]: none).
pub fn rounds_interval(d: &[f64]) -> Option<Interval> {
    let n = d.len();
    if n < MIN_ROUNDS || d.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let (mean, var) = mean_var(d);
    Some(ratio_interval(
        mean,
        t975(n - 1) * (var / n as f64).sqrt(),
        n,
    ))
}

/// The mean and the sample variance of `d` (at least two values).
pub(super) fn mean_var(d: &[f64]) -> (f64, f64) {
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (d.len() - 1) as f64;
    (mean, var)
}

/// A mean of ln ratios ± `half` as a ratio with its interval, resting on `n` values.
pub(super) fn ratio_interval(mean: f64, half: f64, n: usize) -> Interval {
    Interval {
        median: mean.exp(),
        low: (mean - half).exp(),
        high: (mean + half).exp(),
        n,
    }
}

#[cfg(test)]
mod tests;
