//! Intervals that sample both levels of variance: the instances of a configuration (separate
//! processes, each with its own luck of memory placement and caches) and the rounds each
//! instance was measured in.
//!
//! The model, on the log scale (so effects are ratios): the value of instance `p` in round
//! `t` is `y = config + instance_p + round_t + noise`. Every resident of a cell shares the
//! round's drift, so a two-way fit over all of them (Tukey's median polish: robust to the odd
//! slow slice, and indifferent to a missing one) leaves each instance its own level `m_p`.
//! A configuration's level is the mean of its instances'. Its variance has two parts: the
//! instance effect, `σ²/k`, and what the rounds left in each `m_p`. The instance variance is
//! pooled over every configuration of the cell (the same mechanism — placement — for all),
//! which gives it `Σ(k − 1)` degrees of freedom instead of the two a pair of configurations
//! would; the round noise is each configuration's own (an unsaturated server is noisier than a
//! saturated one). The interval is Student's t on the instance variance's degrees of freedom:
//! exact for normal effects when round noise is negligible, conservative otherwise.

use std::collections::BTreeMap;

use super::{median, Interval};

/// An instance measured in fewer rounds than this gives no level (the spread of its rounds
/// would rest on one or two residuals).
pub const MIN_ROUNDS: usize = 3;
/// Fewer degrees of freedom for the instance variance than this give no interval (t's 97.5 %
/// point is 12.7 at one).
pub const MIN_DF: usize = 2;
/// A normal distribution's standard deviation over its median absolute deviation.
const MAD_TO_SD: f64 = 1.4826;
/// Median-polish sweeps: the fit moves by less than 1e-9 after a handful.
const SWEEPS: usize = 12;

/// One resident's series: round → value.
pub type Series = BTreeMap<u32, f64>;

/// What the fit says of one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    /// Mean of its instances' levels (log scale).
    pub mean: f64,
    /// The part of `mean`'s variance that the rounds leave (log scale, squared).
    pub round_var: f64,
    /// Its instances with a level.
    pub k: usize,
    /// The fewest rounds any of its instances was measured in.
    pub rounds: usize,
}

/// Every configuration of one cell, fitted together.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// By the index of the configuration in the input; `None`: no instance with enough rounds.
    pub levels: Vec<Option<Level>>,
    /// The variance between instances of one configuration (log scale, squared), pooled.
    pub instance_var: f64,
    /// Its degrees of freedom: Σ (k − 1) over the configurations.
    pub df: usize,
}

/// Fits `configs` (each a list of its instances' series) of one cell.
pub fn fit(configs: &[Vec<&Series>]) -> Fit {
    // Rows: every instance with enough positive values, as (config, round → log value).
    let mut rows: Vec<(usize, BTreeMap<u32, f64>)> = Vec::new();
    for (c, instances) in configs.iter().enumerate() {
        for s in instances {
            let logs: BTreeMap<u32, f64> = s
                .iter()
                .filter(|(_, v)| v.is_finite() && **v > 0.0)
                .map(|(r, v)| (*r, v.ln()))
                .collect();
            if logs.len() >= MIN_ROUNDS {
                rows.push((c, logs));
            }
        }
    }
    let (effects, residuals) = median_polish(&rows);
    let residents = rows.len();
    let rounds: std::collections::BTreeSet<u32> =
        rows.iter().flat_map(|(_, r)| r.keys().copied()).collect();
    // A two-way fit spends a parameter per row and per column: the residuals' mean square
    // underestimates the noise by about (P−1)(n−1)/(Pn).
    let (p, n) = (residents as f64, rounds.len() as f64);
    let inflate = if residents > 1 && rounds.len() > 1 {
        p * n / ((p - 1.0) * (n - 1.0))
    } else {
        f64::NAN
    };
    let mut levels = Vec::with_capacity(configs.len());
    let mut between = 0.0;
    let mut df = 0usize;
    let mut round_vars = Vec::new();
    for c in 0..configs.len() {
        let mine: Vec<usize> = (0..residents).filter(|&i| rows[i].0 == c).collect();
        if mine.is_empty() {
            levels.push(None);
            continue;
        }
        let k = mine.len();
        let mean = mine.iter().map(|&i| effects[i]).sum::<f64>() / k as f64;
        // The rounds' noise from the residuals' median absolute deviation: robust, as the
        // levels are, so that one slow slice does not widen every interval it touches.
        let abs: Vec<f64> = mine
            .iter()
            .flat_map(|&i| residuals[i].iter().map(|e| e.abs()))
            .collect();
        let noise = (MAD_TO_SD * median(&abs).unwrap_or(0.0)).powi(2) * inflate;
        // Each instance's level is a median-like summary of its rounds: variance about
        // (π/2)·σ²/n for normal noise.
        let per_instance: Vec<f64> = mine
            .iter()
            .map(|&i| std::f64::consts::FRAC_PI_2 * noise / rows[i].1.len() as f64)
            .collect();
        round_vars.extend(per_instance.iter().copied());
        between += mine
            .iter()
            .map(|&i| (effects[i] - mean).powi(2))
            .sum::<f64>();
        df += k - 1;
        levels.push(Some(Level {
            mean,
            round_var: per_instance.iter().sum::<f64>() / (k * k) as f64,
            k,
            rounds: mine.iter().map(|&i| rows[i].1.len()).min().unwrap_or(0),
        }));
    }
    // What the instances' levels spread by beyond what their rounds alone would give.
    let instance_var = if df > 0 {
        let observed = between / df as f64;
        let from_rounds = round_vars.iter().sum::<f64>() / round_vars.len() as f64;
        (observed - from_rounds).max(0.0)
    } else {
        f64::NAN
    };
    Fit {
        levels,
        instance_var,
        df,
    }
}

impl Fit {
    /// Configuration `a` against `b`: their ratio and its 95 % interval, or `None` when either
    /// has no level or the instance variance too few degrees of freedom.
    pub fn compare(&self, a: usize, b: usize) -> Option<Interval> {
        let (la, lb) = (self.levels.get(a)?.as_ref()?, self.levels.get(b)?.as_ref()?);
        if self.df < MIN_DF || !self.instance_var.is_finite() {
            return None;
        }
        let var = self.instance_var * (1.0 / la.k as f64 + 1.0 / lb.k as f64)
            + la.round_var
            + lb.round_var;
        if !var.is_finite() {
            return None;
        }
        let diff = la.mean - lb.mean;
        let half = t975(self.df) * var.sqrt();
        Some(Interval {
            median: diff.exp(),
            low: (diff - half).exp(),
            high: (diff + half).exp(),
            n: la.rounds.min(lb.rounds),
        })
    }
}

/// Tukey's median polish of rows of (round → value): each row's effect (the overall level
/// included) and its residuals.
fn median_polish(rows: &[(usize, BTreeMap<u32, f64>)]) -> (Vec<f64>, Vec<Vec<f64>>) {
    let mut effects = vec![0.0; rows.len()];
    let mut columns: BTreeMap<u32, f64> = BTreeMap::new();
    let residual = |i: usize, r: u32, v: f64, effects: &[f64], columns: &BTreeMap<u32, f64>| {
        v - effects[i] - columns.get(&r).copied().unwrap_or(0.0)
    };
    for _ in 0..SWEEPS {
        for (i, (_, row)) in rows.iter().enumerate() {
            let res: Vec<f64> = row
                .iter()
                .map(|(r, v)| residual(i, *r, *v, &effects, &columns))
                .collect();
            effects[i] += median(&res).unwrap_or(0.0);
        }
        let mut by_round: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for (i, (_, row)) in rows.iter().enumerate() {
            for (r, v) in row {
                by_round
                    .entry(*r)
                    .or_default()
                    .push(residual(i, *r, *v, &effects, &columns));
            }
        }
        for (r, res) in by_round {
            *columns.entry(r).or_insert(0.0) += median(&res).unwrap_or(0.0);
        }
    }
    let residuals = rows
        .iter()
        .enumerate()
        .map(|(i, (_, row))| {
            row.iter()
                .map(|(r, v)| residual(i, *r, *v, &effects, &columns))
                .collect()
        })
        .collect();
    (effects, residuals)
}

/// Student's t, 97.5 % point: the table to 30 degrees of freedom, the Cornish–Fisher
/// expansion beyond (within 1e-4 there).
pub fn t975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        _ => {
            let (z, v) = (1.959_964f64, df as f64);
            z + (z.powi(3) + z) / (4.0 * v)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * v * v)
                + (3.0 * z.powi(7) + 19.0 * z.powi(5) + 17.0 * z.powi(3) - 15.0 * z)
                    / (384.0 * v.powi(3))
        }
    }
}

#[cfg(test)]
mod tests;
