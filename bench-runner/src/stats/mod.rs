//! Statistics with no I/O: medians, the order-statistic interval of a median (and the
//! percentile bootstrap the calibration study keeps as the old method), paired ratios, the
//! two-level interval of configurations run as several instances ([`instances`]), the
//! rounds' intervals of fresh launches and duets, the checks of their calibration inside a run
//! ([`calibration`]), and how a ratio with its interval is printed.

pub mod calibration;
pub mod duets;
pub mod instances;
pub mod launches;
pub mod stopping;

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

/// Bootstrap resamples per interval: enough that the 2.5 % and 97.5 % points move by less
/// than the figures print (checked in the tests against a known distribution).
pub const RESAMPLES: usize = 4000;
/// Fewer values than this give the percentile bootstrap no interval: it cannot be wider than
/// their range, and the true median lies outside the range of n values with probability
/// 2^(1-n) — 25 % for 3, 6 % for 5. (Kept for the calibration study's "old" method; it
/// covers less than it says at small sizes: 94.2 % of 2000 samples of 6 normal values.)
pub const MIN_PAIRS: usize = 5;
/// The fewest values whose order-statistic interval for the median reaches 95 %: with n
/// values the widest one, their range, covers the median with probability 1 − 2^(1−n),
/// 93.8 % for 5 and 96.9 % for 6.
pub const MIN_ORDER_PAIRS: usize = 6;

pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    median_sorted(&v)
}

fn median_sorted(v: &[f64]) -> Option<f64> {
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The `q` quantile (0–1) of sorted values, linearly interpolated.
fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// A median (or a ratio of levels) with its 95 % interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// How many values (pairs) it rests on.
    pub n: usize,
}

impl Interval {
    /// A ratio whose interval excludes 1: a difference this run can tell from noise.
    pub fn excludes_one(&self) -> bool {
        self.low > 1.0 || self.high < 1.0
    }

    /// Half the interval's width, relative to its median (0.016 = ±1.6 %).
    pub fn half_width(&self) -> f64 {
        (self.high - self.low) / 2.0 / self.median
    }
}

/// The median of `values` and its 95 % interval from `RESAMPLES` bootstrap resamples, drawn
/// from a generator seeded with `seed` (the same values and seed give the same interval).
pub fn bootstrap_median(values: &[f64], seed: u64) -> Option<Interval> {
    if values.len() < MIN_PAIRS || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut rng = Pcg64::seed_from_u64(seed);
    let n = values.len();
    let mut sample = vec![0.0; n];
    let mut medians = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        for s in sample.iter_mut() {
            *s = values[below(&mut rng, n)];
        }
        sample.sort_by(f64::total_cmp);
        medians.push(median_sorted(&sample)?);
    }
    medians.sort_by(f64::total_cmp);
    Some(Interval {
        median: median(values)?,
        low: quantile_sorted(&medians, 0.025),
        high: quantile_sorted(&medians, 0.975),
        n,
    })
}

/// The median of `values` and its distribution-free 95 % interval: the order statistics
/// `x(l)` and `x(n+1-l)` with the largest `l` for which `P(l ≤ B ≤ n−l) ≥ 0.95`, B binomial
/// (n, ½) — exact for any continuous distribution of independent values, at every n from
/// [`MIN_ORDER_PAIRS`] on (the percentile bootstrap of a median covers less than it says at
/// the sizes one-instance runs have). Coverage is at least 95 %, and more where the binomial
/// steps force it (96.9 % at 6, 96.1 % at 12, 97.7 % at 24).
pub fn order_statistic_median(values: &[f64]) -> Option<Interval> {
    let n = values.len();
    if n < MIN_ORDER_PAIRS || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    // P(B ≤ j) for B ~ Binomial(n, 1/2), accumulated term by term: C(n, j) / 2^n.
    let (mut term, mut below) = (0.5f64.powi(n as i32), 0.0);
    let mut l = 0;
    for j in 0..n {
        below += term;
        // [x(j+1), x(n-j)] misses the median with probability 2·P(B ≤ j).
        if 2.0 * below > 0.05 {
            break;
        }
        l = j + 1;
        term *= (n - j) as f64 / (j + 1) as f64;
    }
    (l > 0).then(|| Interval {
        median: median_sorted(&v).expect("n ≥ 6"),
        low: v[l - 1],
        high: v[n - l],
        n,
    })
}

/// A uniform index below `n` (Lemire's multiply-shift; the bias is below 2^-50 for the sizes
/// used here).
pub fn below(rng: &mut Pcg64, n: usize) -> usize {
    ((u128::from(rng.next_u64()) * n as u128) >> 64) as usize
}

/// `a[i] / b[i]` for every round `i` both have (the pairing that cancels the machine's drift).
pub fn paired_ratios(
    a: &std::collections::BTreeMap<u32, f64>,
    b: &std::collections::BTreeMap<u32, f64>,
) -> Vec<f64> {
    a.iter()
        .filter_map(|(round, x)| b.get(round).map(|y| x / y))
        .filter(|r| r.is_finite())
        .collect()
}

/// A seed for one comparison's bootstrap, derived from the run's seed and its name, so that
/// re-rendering a run reproduces every interval.
pub fn seed_for(run_seed: u64, name: &str) -> u64 {
    // FNV-1a over the name, mixed with the run's seed.
    name.bytes().fold(0xcbf2_9ce4_8422_2325 ^ run_seed, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A ratio as a signed change in percent, one decimal, with a true minus sign: `+8.1`,
/// `\u{2212}12.0`, `0.0` within a twentieth of a percent of no change.
pub fn signed_pct(ratio: f64) -> String {
    let p = (ratio - 1.0) * 100.0;
    if p >= 0.05 {
        format!("+{p:.1}")
    } else if p <= -0.05 {
        format!("\u{2212}{:.1}", -p)
    } else {
        "0.0".into()
    }
}

/// `+8.1 % [+6.0, +10.0]`, `−12.0 % [−14.0, −10.1]`, or `≈ [−1.0, +2.3]` when the interval
/// contains 1: a difference the run cannot tell from noise is never printed as a signed
/// percentage. One decimal, because the run resolves about one percent.
pub fn ratio_text(i: &Interval) -> String {
    let pct = signed_pct;
    let range = format!("[{}, {}]", pct(i.low), pct(i.high));
    if i.excludes_one() {
        format!("{} % {range}", pct(i.median))
    } else {
        format!("≈ {range}")
    }
}

/// `356k`, `95.2k`, `812`: three significant digits.
pub fn short_rate(rps: f64) -> String {
    if rps >= 100_000.0 {
        format!("{:.0}k", rps / 1000.0)
    } else if rps >= 10_000.0 {
        format!("{:.1}k", rps / 1000.0)
    } else if rps >= 1000.0 {
        format!("{:.2}k", rps / 1000.0)
    } else {
        format!("{rps:.0}")
    }
}

/// A latency from the merged histograms with the two significant digits their buckets keep
/// (`driver::report::LatencyBuckets`), no more: `45 µs`, `290 µs`, `1.2 ms`, `26 ms`. A
/// third digit would be the bucket's edge, not a measurement.
pub fn two_digit_latency(us: f64) -> String {
    let round2 = |v: f64| {
        if v <= 0.0 {
            return 0.0;
        }
        let step = 10f64.powi(v.log10().floor() as i32 - 1);
        (v / step).round() * step
    };
    let us = round2(us);
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 10_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{:.0} ms", us / 1000.0)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Standard normal samples (Box–Muller) from a seeded generator, for every simulation
    /// of the crate's tests.
    pub(crate) fn normal(rng: &mut Pcg64) -> f64 {
        let u = |r: &mut Pcg64| ((r.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let (a, b) = (u(rng), u(rng));
        (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
    }

    #[test]
    fn medians_and_texts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(short_rate(356_123.0), "356k");
        assert_eq!(short_rate(95_240.0), "95.2k");
        assert_eq!(two_digit_latency(166.0), "170 µs");
        assert_eq!(two_digit_latency(290.0), "290 µs");
        assert_eq!(two_digit_latency(45.0), "45 µs");
        assert_eq!(two_digit_latency(7.0), "7 µs");
        assert_eq!(two_digit_latency(1200.0), "1.2 ms");
        assert_eq!(two_digit_latency(2500.0), "2.5 ms");
        assert_eq!(two_digit_latency(9960.0), "10 ms");
        assert_eq!(two_digit_latency(26_000.0), "26 ms");
        assert_eq!(two_digit_latency(264_000.0), "260 ms");
        let sig = Interval {
            median: 0.88,
            low: 0.86,
            high: 0.899,
            n: 20,
        };
        assert_eq!(
            ratio_text(&sig),
            "\u{2212}12.0 % [\u{2212}14.0, \u{2212}10.1]"
        );
        let up = Interval {
            median: 1.081,
            low: 1.06,
            high: 1.10,
            n: 20,
        };
        assert_eq!(ratio_text(&up), "+8.1 % [+6.0, +10.0]");
        let noise = Interval {
            median: 1.03,
            low: 0.99,
            high: 1.05,
            n: 20,
        };
        assert!(!noise.excludes_one());
        assert_eq!(ratio_text(&noise), "≈ [\u{2212}1.0, +5.0]");
        assert!((noise.half_width() - 0.03 / 1.03).abs() < 1e-12);
    }

    #[test]
    fn the_bootstrap_of_a_known_distribution_gives_the_known_interval() {
        // The median of n normal(1, σ) samples has standard error σ·sqrt(π/2)/sqrt(n); its 95 %
        // interval is ±1.96 of that. Over many samples the bootstrap's width must agree.
        let (n, sigma) = (401, 0.05);
        let expected_half = 1.96 * sigma * (std::f64::consts::PI / 2.0).sqrt() / (n as f64).sqrt();
        let mut rng = Pcg64::seed_from_u64(7);
        let mut halves = Vec::new();
        let mut covered = 0;
        for trial in 0..40 {
            let values: Vec<f64> = (0..n).map(|_| 1.0 + sigma * normal(&mut rng)).collect();
            let i = bootstrap_median(&values, trial).unwrap();
            halves.push((i.high - i.low) / 2.0);
            covered += usize::from(i.low <= 1.0 && 1.0 <= i.high);
        }
        let half = median(&halves).unwrap();
        assert!(
            (half / expected_half - 1.0).abs() < 0.2,
            "bootstrap half-width {half:.5}, theory {expected_half:.5}"
        );
        // 95 % coverage: out of 40 intervals about 38 contain the true median; 33 is far
        // below what a correct interval gives (p < 0.01).
        assert!(covered >= 33, "covered {covered}/40");
    }

    #[test]
    fn the_order_statistic_interval_is_exact_at_the_sizes_runs_have() {
        // Its coverage does not depend on the distribution: count it on a skewed one
        // (exponential) at the sizes one-instance runs make, against the binomial's promise.
        let mut rng = Pcg64::seed_from_u64(11);
        for (n, promised) in [(6usize, 0.969), (12, 0.961), (24, 0.977)] {
            let trials = 4000;
            let truth = std::f64::consts::LN_2; // the exponential(1)'s median
            let mut covered = 0;
            for _ in 0..trials {
                let values: Vec<f64> = (0..n)
                    .map(|_| -(1.0 - (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64).ln())
                    .collect();
                let i = order_statistic_median(&values).unwrap();
                covered += usize::from(i.low <= truth && truth <= i.high);
            }
            let rate = covered as f64 / trials as f64;
            // 4000 trials: a standard error of 0.3 %.
            assert!(
                (rate - promised).abs() < 0.012,
                "n={n}: covered {rate:.3}, promised {promised}"
            );
        }
        // The percentile bootstrap at the old minimum of 5 pairs covers less than 95 %: it
        // cannot reach past the range, which alone misses 6.25 % of the time.
        let mut rng = Pcg64::seed_from_u64(12);
        let mut covered = 0;
        for trial in 0..2000 {
            let values: Vec<f64> = (0..5).map(|_| normal(&mut rng)).collect();
            let i = bootstrap_median(&values, trial).unwrap();
            covered += usize::from(i.low <= 0.0 && 0.0 <= i.high);
        }
        assert!(covered < 1880, "bootstrap at n=5 covered {covered}/2000");
        // Below six values no interval reaches 95 %; the bounds are order statistics.
        assert_eq!(order_statistic_median(&[1.0, 2.0, 3.0, 4.0, 5.0]), None);
        let i = order_statistic_median(&[
            6.0, 1.0, 5.0, 2.0, 4.0, 3.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0,
        ])
        .unwrap();
        assert_eq!((i.low, i.median, i.high, i.n), (3.0, 6.5, 10.0, 12));
        assert_eq!(
            order_statistic_median(&[1.0, f64::NAN, 1.0, 1.0, 1.0, 1.0]),
            None
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_interval_and_too_few_values_give_none() {
        let v = [1.0, 1.1, 0.9, 1.05, 0.97, 1.02];
        assert_eq!(bootstrap_median(&v, 3), bootstrap_median(&v, 3));
        assert_eq!(bootstrap_median(&v[..MIN_PAIRS - 1], 3), None);
        assert_eq!(bootstrap_median(&[1.0, f64::NAN, 1.0], 3), None);
        assert_ne!(seed_for(1, "a"), seed_for(1, "b"));
        assert_ne!(seed_for(1, "a"), seed_for(2, "a"));
    }

    #[test]
    fn pairing_by_round_beats_comparing_medians_on_drifting_data() {
        // The machine's speed drifts ±25 % from round to round; B is 3 % cheaper than A in
        // every round, with 1 % noise of its own. Paired, the difference is plain; comparing
        // the two medians with independent resampling (what the old table did) hides it.
        let mut rng = Pcg64::seed_from_u64(11);
        let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
        for round in 0..25u32 {
            let drift = 1.0 + 0.25 * (f64::from(round) * 0.9).sin();
            a.insert(round, drift * (1.0 + 0.01 * normal(&mut rng)));
            b.insert(round, drift * 0.97 * (1.0 + 0.01 * normal(&mut rng)));
        }
        let paired = bootstrap_median(&paired_ratios(&b, &a), 5).unwrap();
        assert!(paired.excludes_one() && paired.high < 1.0, "{paired:?}");
        assert!((paired.median - 0.97).abs() < 0.01, "{paired:?}");

        let unpaired = unpaired_ratio_of_medians(&b, &a, 5);
        assert!(
            !unpaired.excludes_one(),
            "drift swamps an unpaired comparison: {unpaired:?}"
        );
        assert!(unpaired.half_width() > 4.0 * paired.half_width());
    }

    /// What pairing is compared against: the ratio of two medians, each series resampled on
    /// its own.
    fn unpaired_ratio_of_medians(
        a: &BTreeMap<u32, f64>,
        b: &BTreeMap<u32, f64>,
        seed: u64,
    ) -> Interval {
        let (a, b): (Vec<f64>, Vec<f64>) =
            (a.values().copied().collect(), b.values().copied().collect());
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut draw = |v: &[f64]| {
            let s: Vec<f64> = (0..v.len()).map(|_| v[below(&mut rng, v.len())]).collect();
            median(&s).unwrap()
        };
        let mut ratios: Vec<f64> = (0..RESAMPLES).map(|_| draw(&a) / draw(&b)).collect();
        ratios.sort_by(f64::total_cmp);
        Interval {
            median: median(&a).unwrap() / median(&b).unwrap(),
            low: quantile_sorted(&ratios, 0.025),
            high: quantile_sorted(&ratios, 0.975),
            n: a.len(),
        }
    }
}
